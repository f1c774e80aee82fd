// Package umrsig reads the oracle's umr_sig records (libmlx5's
// mlx5dv_wr_mkey_configure cases, also in its wrap family) and the
// crypto_umr records (the same with mlx5dv_wr_set_mkey_crypto, and
// batches): the inputs of each configure as plain values and what libmlx5
// wrote. It is for tests
// of wqe and mlx5, so it imports neither.
package umrsig

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/oracle/sigattr"
	"github.com/mlx5go/mlx5go/sig"
)

type setter struct {
	Op          string `json:"op"`
	Access      uint32 `json:"access_flags"`
	SGE         []sge  `json:"sge"`
	RepeatCount uint32 `json:"repeat_count"`
	Data        []struct {
		Addr  string `json:"addr"`
		Count uint32 `json:"bytes_count"`
		Skip  uint32 `json:"bytes_skip"`
		Lkey  string `json:"lkey"`
	} `json:"data"`
	Attr   *sigattr.Attr `json:"sig_block_attr"`
	Crypto *cryptoAttr   `json:"crypto_attr"`
}

// cryptoAttr is wr_set_mkey_crypto's argument as the crypto_umr records
// hold it.
type cryptoAttr struct {
	Standard     int    `json:"crypto_standard"`
	EncryptOnTx  bool   `json:"encrypt_on_tx"`
	Order        int    `json:"signature_crypto_order"`
	DataUnitSize int    `json:"data_unit_size"`
	InitialTweak string `json:"initial_tweak"`
	DEK          *struct {
		Name      string `json:"name"`
		ObjID     string `json:"obj_id"`
		PD        string `json:"pd"`
		KeySize   int    `json:"key_size"`
		HasKeytag bool   `json:"has_keytag"`
	} `json:"dek"`
	Keytag   string `json:"keytag"`
	CompMask uint64 `json:"comp_mask"`
}

// Crypto is a configure's crypto (mlx5dv_crypto_attr) as plain values.
type Crypto struct {
	EncryptOnTx  bool
	Order        int // enum mlx5dv_signature_crypto_order
	DataUnitSize int // enum mlx5dv_block_size (-1 in a record libmlx5 refused)
	InitialTweak [16]byte
	// The DEK by the name the record's setup gave it, its object id, PD
	// ("pd" or "pd2") and whether it has a keytag; DEK is "" for none.
	DEK       string
	DEKID     uint32
	DEKPD     string
	DEKKeytag bool
	Keytag    [8]byte
}

// mkey is the mkey a configure record names.
type mkey struct {
	BlockSignature bool   `json:"block_signature"`
	Crypto         bool   `json:"crypto"`
	MaxEntries     int    `json:"max_entries"`
	Fresh          bool   `json:"fresh"`
	Lkey           string `json:"lkey"`
}

// confAttr is mlx5dv_mkey_conf_attr.
type confAttr struct {
	ConfFlags uint64 `json:"conf_flags"`
	CompMask  uint64 `json:"comp_mask"`
}

// BatchWR is one work request of a crypto_umr batch record: an mkey
// configure, or an RDMA WRITE or SEND of one SGE.
type BatchWR struct {
	Kind       string   `json:"kind"` // mkey_configure, ibv_wr_rdma_write, ibv_wr_send
	Mkey       mkey     `json:"mkey"`
	WrID       uint64   `json:"wr_id"`
	WRFlags    uint32   `json:"wr_flags"`
	NumSetters *int     `json:"num_setters"`
	ConfAttr   confAttr `json:"mkey_conf_attr"`
	Setters    []setter `json:"setters"`
	RemoteAddr string   `json:"remote_addr"`
	RKey       string   `json:"rkey"`
	SGE        *sge     `json:"sge"`
}

type sge struct {
	Addr   string `json:"addr"`
	Length uint32 `json:"length"`
	Lkey   string `json:"lkey"`
}

// Record is one umr_sig record, as far as tests read it.
type Record struct {
	Case  string `json:"case"`
	Input struct {
		Mkey       mkey     `json:"mkey"`
		WrID       uint64   `json:"wr_id"`
		WRFlags    uint32   `json:"wr_flags"`
		NumSetters *int     `json:"num_setters"` // crypto_umr's
		ConfAttr   confAttr `json:"mkey_conf_attr"`
		Setters    []setter `json:"setters"`
		// crypto_umr's: the device profile's name, and a batch's work
		// requests.
		Device any       `json:"device"`
		WRs    []BatchWR `json:"wrs"`
	} `json:"input"`
	QP struct {
		Name      string `json:"name"`
		QPN       uint32 `json:"qpn"`
		WQECnt    int    `json:"sq_wqe_cnt"`
		SQStride  int    `json:"sq_stride"`
		MaxInline int    `json:"max_inline_data"`
	} `json:"qp"`
	Result struct {
		WRComplete int `json:"wr_complete"`
		// A crypto_umr setup record's DEKs.
		DEKs []struct {
			Name      string `json:"name"`
			ObjID     string `json:"obj_id"`
			PD        string `json:"pd"`
			HasKeytag bool   `json:"has_keytag"`
		} `json:"deks"`
	} `json:"result"`
	PIBefore int `json:"sq_pi_before"`
	PIAfter  int `json:"sq_pi_after"`
	SQ       struct {
		WQEBBs []struct {
			Index int    `json:"index"`
			Hex   string `json:"hex"`
		} `json:"wqebbs"`
	} `json:"sq"`
	DBRec struct {
		Send int `json:"send_counter"`
	} `json:"dbrec"`
	BF struct {
		Size   int `json:"size"`
		Writes []struct {
			Len int    `json:"len"`
			Hex string `json:"hex"`
		} `json:"writes"`
	} `json:"bf"`
	MkeyCreate []struct {
		Method string `json:"method"`
		Attrs  []struct {
			Name   string `json:"name"`
			Hex    string `json:"hex"`
			OutHex string `json:"out_hex"`
		} `json:"attrs"`
	} `json:"mkey_create_cmds"`
	Wrap *struct {
		Schema string `json:"schema"`
	} `json:"wrap"`
}

// KLM is one entry of a list layout (struct ibv_sge of
// mlx5dv_wr_set_mkey_layout_list).
type KLM struct {
	Addr      uint64
	ByteCount uint32
	Key       uint32
}

// RepeatEntry is one entry of an interleaved layout (struct
// mlx5dv_mr_interleaved).
type RepeatEntry struct {
	Addr      uint64
	ByteCount uint32
	Skip      uint32
	Key       uint32
}

// Configure is what a record's setters and flags asked for.
type Configure struct {
	Mkey        uint32
	Flags       uint32 // enum ibv_send_flags
	SetAccess   bool
	Access      uint32 // enum ibv_access_flags
	List        []KLM
	Interleaved []RepeatEntry
	RepeatCount uint32
	Sig         *sig.BlockAttr
	ResetSig    bool // MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR
	Crypto      *Crypto
}

// Configure returns the record's inputs; ok is false when they use what
// neither wqe nor mlx5 expresses (conf flags other than RESET_SIG_ATTR,
// a comp_mask, another setter, a setter called twice, a setter count
// other than the setters called, a crypto standard other than AES-XTS or
// a crypto comp_mask).
func (r *Record) Configure() (c Configure, ok bool, err error) {
	in := &r.Input
	return configureOf(&in.Mkey, in.WRFlags, in.NumSetters, &in.ConfAttr, in.Setters)
}

// Configure returns the inputs of a batch's mkey configure, as
// Record.Configure does.
func (w *BatchWR) Configure() (c Configure, ok bool, err error) {
	return configureOf(&w.Mkey, w.WRFlags, w.NumSetters, &w.ConfAttr, w.Setters)
}

func configureOf(m *mkey, flags uint32, numSetters *int, attr *confAttr, setters []setter) (c Configure, ok bool, err error) {
	if attr.ConfFlags&^1 != 0 || attr.CompMask != 0 || numSetters != nil && *numSetters != len(setters) {
		return c, false, nil
	}
	key, err := sigattr.Num(m.Lkey)
	if err != nil {
		return c, false, err
	}
	c = Configure{Mkey: uint32(key), Flags: flags, ResetSig: attr.ConfFlags&1 != 0}
	seen := map[string]bool{}
	num := func(s string) uint64 {
		v, e := sigattr.Num(s)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	for _, s := range setters {
		if seen[s.Op] {
			return c, false, nil
		}
		seen[s.Op] = true
		switch s.Op {
		case "wr_set_mkey_access_flags":
			c.SetAccess, c.Access = true, s.Access
		case "wr_set_mkey_layout_list":
			c.List = make([]KLM, 0, len(s.SGE))
			for _, g := range s.SGE {
				c.List = append(c.List, KLM{Addr: num(g.Addr), ByteCount: g.Length, Key: uint32(num(g.Lkey))})
			}
		case "wr_set_mkey_layout_interleaved":
			c.RepeatCount = s.RepeatCount
			c.Interleaved = make([]RepeatEntry, 0, len(s.Data))
			for _, d := range s.Data {
				c.Interleaved = append(c.Interleaved, RepeatEntry{Addr: num(d.Addr), ByteCount: d.Count, Skip: d.Skip, Key: uint32(num(d.Lkey))})
			}
		case "wr_set_mkey_sig_block":
			if c.Sig, err = s.Attr.BlockAttr(); err != nil {
				return c, false, err
			}
		case "wr_set_mkey_crypto":
			a := s.Crypto
			if a == nil || a.Standard != 0 || a.CompMask != 0 {
				return c, false, nil
			}
			cr := &Crypto{EncryptOnTx: a.EncryptOnTx, Order: a.Order, DataUnitSize: a.DataUnitSize}
			if err := unhex(cr.InitialTweak[:], a.InitialTweak); err != nil {
				return c, false, err
			}
			if err := unhex(cr.Keytag[:], a.Keytag); err != nil {
				return c, false, err
			}
			if d := a.DEK; d != nil {
				cr.DEK, cr.DEKID, cr.DEKPD, cr.DEKKeytag = d.Name, uint32(num(d.ObjID)), d.PD, d.HasKeytag
			}
			c.Crypto = cr
		default:
			return c, false, nil
		}
	}
	return c, err == nil, err
}

// unhex decodes s, of exactly len(dst) bytes, into dst.
func unhex(dst []byte, s string) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(dst) {
		return fmt.Errorf("bad %d-byte hex %q", len(dst), s)
	}
	copy(dst, b)
	return nil
}

// Num parses a record's number: decimal or 0x-prefixed hex.
func Num(s string) (uint64, error) { return sigattr.Num(s) }

// PSVIndexes returns the PSV indexes of the record's CREATE_PSV commands,
// in creation order (psv0_index, bits 136..159 of create_psv_out).
func (r *Record) PSVIndexes() ([]uint32, error) {
	var out []uint32
	for _, c := range r.MkeyCreate {
		for _, a := range c.Attrs {
			if a.Name != "CMD_IN" || !strings.HasPrefix(a.Hex, "0600") { // CREATE_PSV
				continue
			}
			for _, o := range c.Attrs {
				if o.Name == "CMD_OUT" {
					b, err := hex.DecodeString(o.OutHex)
					if err != nil || len(b) < 20 {
						return nil, fmt.Errorf("%s: bad CREATE_PSV output %q", r.Case, o.OutHex)
					}
					out = append(out, uint32(b[17])<<16|uint32(b[18])<<8|uint32(b[19]))
				}
			}
		}
	}
	return out, nil
}

// WQEBBs returns the WQEBBs libmlx5 wrote, in ring order from
// sq_pi_before.
func (r *Record) WQEBBs() ([][]byte, error) {
	out := make([][]byte, len(r.SQ.WQEBBs))
	for i, w := range r.SQ.WQEBBs {
		b, err := hex.DecodeString(w.Hex)
		if err != nil {
			return nil, fmt.Errorf("%s: WQEBB %d: %w", r.Case, i, err)
		}
		out[i] = b
	}
	return out, nil
}

// Read calls each for every umr_sig record of path (a wrap file's other
// records are left out).
func Read(t testing.TB, path string, each func(r *Record)) {
	t.Helper()
	oracle.Records(t, path, func(r *Record) bool { return r.Wrap == nil || r.Wrap.Schema == "umr_sig" }, each)
}

// ReadCrypto calls each for every record of a crypto_umr file: its setup
// records and its configures (the umr_sig schema with crypto).
func ReadCrypto(t testing.TB, path string, each func(r *Record)) {
	t.Helper()
	oracle.Records(t, path, func(*Record) bool { return true }, each)
}
