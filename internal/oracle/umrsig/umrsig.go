// Package umrsig reads the oracle's umr_sig records (libmlx5's
// mlx5dv_wr_mkey_configure cases, also in its wrap family): the inputs of
// each configure as plain values and what libmlx5 wrote. It is for tests
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
	Attr *sigattr.Attr `json:"sig_block_attr"`
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
		Mkey struct {
			BlockSignature bool   `json:"block_signature"`
			MaxEntries     int    `json:"max_entries"`
			Fresh          bool   `json:"fresh"`
			Lkey           string `json:"lkey"`
		} `json:"mkey"`
		WrID     uint64 `json:"wr_id"`
		WRFlags  uint32 `json:"wr_flags"`
		ConfAttr struct {
			ConfFlags uint64 `json:"conf_flags"`
			CompMask  uint64 `json:"comp_mask"`
		} `json:"mkey_conf_attr"`
		Setters []setter `json:"setters"`
	} `json:"input"`
	QP struct {
		QPN      uint32 `json:"qpn"`
		WQECnt   int    `json:"sq_wqe_cnt"`
		SQStride int    `json:"sq_stride"`
	} `json:"qp"`
	Result struct {
		WRComplete int `json:"wr_complete"`
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
}

// Configure returns the record's inputs; ok is false when they use what
// neither wqe nor mlx5 expresses (conf flags other than RESET_SIG_ATTR,
// a comp_mask, another setter).
func (r *Record) Configure() (c Configure, ok bool, err error) {
	in := &r.Input
	if in.ConfAttr.ConfFlags&^1 != 0 || in.ConfAttr.CompMask != 0 {
		return c, false, nil
	}
	key, err := sigattr.Num(in.Mkey.Lkey)
	if err != nil {
		return c, false, err
	}
	c = Configure{Mkey: uint32(key), Flags: in.WRFlags, ResetSig: in.ConfAttr.ConfFlags&1 != 0}
	num := func(s string) uint64 {
		v, e := sigattr.Num(s)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	for _, s := range in.Setters {
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
		default:
			return c, false, nil
		}
	}
	return c, err == nil, err
}

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
