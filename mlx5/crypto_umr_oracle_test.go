package mlx5

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/oracle/umrsig"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// cryptoUMRDivergences are the crypto_umr records where mlx5go refuses
// what libmlx5 44.0 posts, with the reason (docs/MLX5.md, "Crypto
// mkeys").
var cryptoUMRDivergences = map[string]string{
	"plaintext_multi/weak/dek_of_another_pd_accepted":                "the DEK is of another PD than the mkey's; libmlx5 never compares them",
	"plaintext_multi/weak/dek_in_error_state_accepted":               "the DEK's last known state is ERROR; libmlx5 does not look",
	"plaintext_multi/weak/destroyed_dek/1_configure":                 "(accepted; the DEK's destroy that follows is refused with EBUSY)",
	"plaintext_multi/weak/destroyed_dek/2_reconfigure_after_destroy": "(accepted: the DEK was never destroyed)",
}

// TestOracleCryptoConfigure posts every configure of the oracle's
// crypto_umr family (crypto mkeys alone and with block signatures, on a
// multi-block and a single-block-only device; lists and interleaved
// layouts, sequences that carry the mkey's crypto and signature state,
// batches with sends, the ring's end and the counter's wrap, and the
// configures libmlx5 refuses) through PostMkeyConfigure or a batch, and
// compares what the driver leaves with what libmlx5 44.0 left: every
// WQEBB, the doorbell record and the UAR write (the 8-byte doorbell or the
// BlueFlame copy). A configure libmlx5 refused is refused with ErrInvalid
// (EINVAL and ENOMEM both) and nothing written. Where mlx5go checks more
// (cryptoUMRDivergences) it refuses. The harness passes 8 keytag bytes
// whatever its DEK, and so does the replay: a Keytag for a DEK without
// one is written as libmlx5 writes it.
func TestOracleCryptoConfigure(t *testing.T) {
	const file = "testdata/crypto_umr.jsonl"
	c := &Context{devx: true}
	pds := map[string]*PD{"pd": {c: c, pdn: 1}, "pd2": {c: c, pdn: 2}}
	var single, multi bool
	var deks map[string]*DEK
	mkeys := map[uint32]*Mkey{}
	n := map[string]int{}
	umrsig.ReadCrypto(t, file, func(r *umrsig.Record) {
		if strings.HasSuffix(r.Case, "/setup") {
			dev, _ := r.Input.Device.(map[string]any)
			gc, _ := dev["general_caps"].(map[string]any)
			multi = gc["aes_xts_multi_block_be_tweak"] == 1.0
			single = multi || gc["aes_xts_single_block_le_tweak"] == 1.0
			deks = map[string]*DEK{}
			for _, d := range r.Result.DEKs {
				id, err := umrsig.Num(d.ObjID)
				if err != nil {
					t.Fatal(err)
				}
				deks[d.Name] = &DEK{c: c, pd: pds[d.PD], id: uint32(id), keytag: d.HasKeytag}
			}
			if d := deks["dek_err"]; d != nil {
				d.state = DEKError
			}
			mkeys = map[uint32]*Mkey{}
			n["setup"]++
			return
		}
		psvs, err := r.PSVIndexes()
		if err != nil {
			t.Fatal(err)
		}
		mkeyOf := func(lkey uint32, fresh, sigMkey, crypto bool, maxEntries int) *Mkey {
			m := mkeys[lkey]
			if m == nil || fresh {
				m = &Mkey{c: c, pd: pds["pd"], lkey: lkey, rkey: lkey, maxEntries: maxEntries, sigMkey: sigMkey,
					sentErrs: ^uint32(0), name: mkeyName(lkey)}
				if crypto {
					m.crypto = &mkeyCrypto{singleBlock: single, multiBlock: multi}
				}
				if sigMkey && len(psvs) >= 2 {
					m.psvIndex, psvs = [2]uint32{psvs[0], psvs[1]}, psvs[2:]
				}
				mkeys[lkey] = m
			}
			return m
		}
		// The work requests: the record's one configure, or its batch.
		var posts []cryptoPost
		expressible := true
		addConf := func(in umrsig.Configure, ok bool, err error, wrID uint64, fresh, sigMkey, crypto bool, maxEntries int) {
			if err != nil {
				t.Fatal(err)
			}
			if !ok || SendFlags(in.Flags)&SendInline == 0 {
				expressible = false
				return
			}
			m := mkeyOf(in.Mkey, fresh, sigMkey, crypto, maxEntries)
			wr := configureWR(&umrsig.Record{Input: r.Input}, &in, m)
			wr.WrID = wrID
			if cr := in.Crypto; cr != nil {
				d := deks[cr.DEK]
				wr.Crypto = &CryptoAttr{EncryptOnTx: cr.EncryptOnTx, Order: SigCryptoOrder(cr.Order),
					DataUnitSize: sig.BlockSize(uint32(int32(cr.DataUnitSize))), InitialTweak: cr.InitialTweak, DEK: d}
				wr.Crypto.Keytag = cr.Keytag[:]
			}
			posts = append(posts, cryptoPost{wr: wr})
		}
		if len(r.Input.WRs) == 0 {
			in, ok, err := r.Configure()
			mk := &r.Input.Mkey
			addConf(in, ok, err, r.Input.WrID, mk.Fresh, mk.BlockSignature, mk.Crypto, mk.MaxEntries)
		}
		for i := range r.Input.WRs {
			w := &r.Input.WRs[i]
			switch w.Kind {
			case "mkey_configure":
				in, ok, err := w.Configure()
				addConf(in, ok, err, w.WrID, w.Mkey.Fresh, w.Mkey.BlockSignature, w.Mkey.Crypto, w.Mkey.MaxEntries)
			case "ibv_wr_rdma_write", "ibv_wr_send":
				s := &SendWR{WrID: w.WrID, Opcode: OpSend, Flags: SendFlags(w.WRFlags)}
				if w.Kind == "ibv_wr_rdma_write" {
					ra, _ := umrsig.Num(w.RemoteAddr)
					rk, _ := umrsig.Num(w.RKey)
					s.Opcode, s.RemoteAddr, s.RKey = OpRDMAWrite, ra, uint32(rk)
				}
				addr, _ := umrsig.Num(w.SGE.Addr)
				lkey, _ := umrsig.Num(w.SGE.Lkey)
				s.SGL = []SGE{{Addr: addr, Length: w.SGE.Length, LKey: uint32(lkey)}}
				posts = append(posts, cryptoPost{send: s})
			default:
				t.Fatalf("%s: a %q work request", r.Case, w.Kind)
			}
		}
		if !expressible {
			n["not expressible"]++
			return
		}
		if strings.Contains(r.Case, "after_sig_error") {
			for _, p := range posts {
				p.wr.Mkey.sigErrs.Add(1)
			}
		}

		// The harness's QP, emptied at sq_pi_before, its small fence
		// consumed.
		qp, uar := testQP(t, c, r.QP.WQECnt)
		qp.qpn, qp.sq.maxWQE, qp.mkeyConf, qp.sq.maxInline = r.QP.QPN, r.QP.WQECnt, true, r.QP.MaxInline
		qp.sq.maxMsg = 1 << 30
		qp.sq.pi = uint16(r.PIBefore)
		qp.sq.tail.Store(uint32(qp.sq.pi))
		half := doorbell.BlueFlameOffset + qp.sq.bell.Half()
		b := qp.Begin()
		for _, p := range posts {
			if p.wr != nil {
				b.AddMkeyConfigure(p.wr)
			} else {
				b.Add(p.send)
			}
		}
		err = b.Commit()

		if why, ok := cryptoUMRDivergences[r.Case]; ok && !strings.HasPrefix(why, "(") {
			if !errors.Is(err, ErrInvalid) || qp.sq.pi != uint16(r.PIBefore) {
				t.Errorf("%s: %v; mlx5go refuses it (%s)", r.Case, err, why)
			}
			n["refused where libmlx5 is weaker"]++
			return
		}
		if r.Result.WRComplete != 0 {
			if !errors.Is(err, ErrInvalid) || !errors.Is(err, unix.EINVAL) {
				t.Errorf("%s: libmlx5 failed (errno %d), post: %v", r.Case, r.Result.WRComplete, err)
			}
			if !queueUntouched(qp, uint16(r.PIBefore)) {
				t.Errorf("%s: the refused post wrote to the queue", r.Case)
			}
			n["refused"]++
			return
		}
		if err != nil {
			t.Errorf("%s: %v", r.Case, err)
			return
		}
		want, ok := recordedWQEBBs(t, qp, r)
		for i, w := range want {
			g := qp.sq.ring.Slot(uint16(r.PIBefore + i))
			if !bytes.Equal(g, w) {
				t.Errorf("%s: WQEBB %d\n got %x\nwant %x", r.Case, i, g, w)
				ok = false
			}
		}
		w := uarWrite(t, r)
		reg := uar[half : half+r.BF.Size]
		if !uarHolds(reg, w) {
			t.Errorf("%s: UAR write\n got %x\nwant %x (%d bytes)", r.Case, reg, w, len(w))
			ok = false
		}
		if strings.HasSuffix(r.Case, "/destroyed_dek/1_configure") {
			// libmlx5 destroys the DEK under the mkey; mlx5go refuses.
			d := posts[0].wr.Crypto.DEK
			d.mu.Lock()
			err := d.inUse()
			d.mu.Unlock()
			if errors.Is(err, unix.EBUSY) {
				n["DEK destroy refused while used"]++
			} else {
				t.Errorf("%s: destroying the DEK the mkey uses: %v, want EBUSY", r.Case, err)
			}
		}
		if ok {
			n["byte-exact"]++
		}
	})
	t.Logf("%v", n)
	want := map[string]int{"setup": 2, "byte-exact": 80, "refused": 21,
		"refused where libmlx5 is weaker": 2, "not expressible": 7, "DEK destroy refused while used": 1}
	if !mapsEqual(n, want) {
		t.Errorf("%v, want %v", n, want)
	}
}

// cryptoPost is one work request of a crypto_umr record: a configure or
// a send.
type cryptoPost struct {
	wr   *MkeyConfigureWR
	send *SendWR
}

// TestOracleCreateCryptoMkey: the CREATE_MKEY (and CREATE_PSVs) of a
// crypto mkey are libmlx5's, byte for byte (crypto_objs.jsonl, mkey/*):
// crypto_en, bsf_en, bsf_octword_size 4 for the crypto BSF and 8 with a
// signature BSF before it, en_rinval with RemoteInvalidate; its keys come
// from the output. The records of max_entries 0 (which mlx5go refuses),
// of flags mlx5go does not have (UPDATE_TAG, an unknown bit) and of a
// device that fails the command are left out. The caps check before the
// commands is CreateMkey's (TestCreateCryptoMkeyNeedsEngine).
func TestOracleCreateCryptoMkey(t *testing.T) {
	const file = "testdata/crypto_objs.jsonl"
	n := 0
	oracle.Lines(t, file, func(line []byte) {
		var c oracle.Case
		if err := jsonUnmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(c.Case, "mkey/") || strings.Contains(c.Case, "UPDATE_TAG") || strings.Contains(c.Case, "bit5") ||
			strings.Contains(c.Case, "device_fails") || strings.HasSuffix(c.Case, "/max_entries_0") {
			return
		}
		var in struct {
			Flags      int `json:"create_flags"`
			MaxEntries int `json:"max_entries"`
		}
		var res struct {
			LKey string `json:"lkey"`
		}
		if err := jsonUnmarshal(c.Input, &in); err != nil {
			t.Fatal(err)
		}
		if err := jsonUnmarshal(c.Result, &res); err != nil {
			t.Fatal(err)
		}
		want := c.KernelCmds
		mkIn, err := hex.DecodeString(want[len(want)-1].Attrs[1].Hex)
		if err != nil {
			t.Fatal(err)
		}
		r, got := recordedAnswering(t, want)
		pdn := uint32(prm.Mkc.Pd.At(prm.CreateMkeyIn.MemoryKeyMkeyEntry).Get(mkIn))
		m := &Mkey{c: r.Context, pd: &PD{c: r.Context, pdn: pdn}, maxEntries: in.MaxEntries, sigMkey: in.Flags&2 != 0,
			rinval: in.Flags&16 != 0, crypto: &mkeyCrypto{multiBlock: true, singleBlock: true}, sentErrs: ^uint32(0)}
		if err := m.create(); err != nil {
			t.Fatalf("%s: %v", c.Case, err)
		}
		calls := *got
		if len(calls) != len(want) {
			t.Fatalf("%s: %d DEVX creates, libmlx5 %d", c.Case, len(calls), len(want))
		}
		for i := range want {
			oracle.Compare(t, want[i], calls[i])
		}
		if k := fmt.Sprintf("0x%08x", m.lkey); k != res.LKey {
			t.Errorf("%s: lkey %s, libmlx5 %s", c.Case, k, res.LKey)
		}
		n++
	})
	if n != 19 {
		t.Errorf("%d mkey creates replayed, want 19", n)
	}
}

// recordedAnswering is a recording kernel that answers the calls made on
// it with the outputs of want, in order, and the calls it records.
func recordedAnswering(t *testing.T, want []oracle.Call) (*recorded, *[]oracle.Got) {
	r := newRecorded(t)
	calls := new([]oracle.Got)
	r.fill = func(call *uverbs.Call) {
		i := len(*calls)
		*calls = append(*calls, got(call))
		if i < len(want) && call.Hdr.MethodID == want[i].MethodID && len(call.Data) > 2 {
			out, err := hex.DecodeString(want[i].Attrs[2].OutHex)
			if err != nil {
				t.Fatal(err)
			}
			copy(call.Data[2], out)
		}
	}
	return r, calls
}

// TestCreateCryptoMkeyNeedsEngine: CreateMkey with Crypto asks the
// device's CryptoCaps, and refuses (ErrUnsupported, EOPNOTSUPP) before any
// command a device whose caps report neither AES-XTS engine, as libmlx5
// does (crypto_caps.jsonl: off, crypto_bit_only, crypto_objs_no_engine).
func TestCreateCryptoMkeyNeedsEngine(t *testing.T) {
	r := newRecorded(t)
	seedCaps(t, r.Context) // the oracle's device: no crypto engine
	pd := &PD{c: r.Context, pdn: 0x11}
	r.last = nil
	_, err := pd.CreateMkey(MkeyOptions{MaxEntries: 4, Crypto: true})
	if strings.Contains(fmt.Sprint(err), "query crypto caps") {
		t.Skipf("CryptoCaps is the skeleton's (i25-c fills it in): %v", err)
	}
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("a crypto mkey on a device without an AES-XTS engine: %v", err)
	}
	if r.last != nil {
		t.Error("a command reached the kernel")
	}
}
