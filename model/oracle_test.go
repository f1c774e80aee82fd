package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/oracle/sigattr"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

// The model against rdma-core 44.0's libmlx5 (the oracle's vectors, see
// testdata/README.md): the UMR WQEs libmlx5 writes run on the model, and
// the SIG_ERR CQEs the model writes are what libmlx5 decodes.

// The oracle readers of internal/oracle, by the names these tests use.
var (
	readJSONL = oracle.Lines
	unhex     = oracle.Unhex
	num       = oracle.Num
)

// mkeyCheckRecord is what the test reads of a mkey_check record.
type mkeyCheckRecord struct {
	Case  string `json:"case"`
	Input struct {
		Attr   *sigattr.Attr `json:"sig_block_attr"`
		Fields *struct {
			ExpTrans string `json:"expected_trans_sig"`
			ActTrans string `json:"actual_trans_sig"`
			ExpRef   string `json:"expected_ref_tag"`
			ActRef   string `json:"actual_ref_tag"`
			Syndrome string `json:"syndrome"`
			SigType  uint8  `json:"sig_type"`
			Domain   uint8  `json:"domain"`
			Mkey     string `json:"mkey"`
			Offset   string `json:"sig_err_offset"`
		} `json:"sigerr_cqe_fields"`
		CQEs []struct {
			Hex string `json:"hex"`
		} `json:"cqes_written"`
	} `json:"input"`
	Result struct {
		Check struct {
			Ret      int    `json:"ret"`
			Type     uint32 `json:"err_type_value"`
			Actual   string `json:"actual_value"`
			Expected string `json:"expected_value"`
			Offset   string `json:"offset"`
		} `json:"mkey_check"`
	} `json:"result"`
}

// TestOracleSigErrCQE checks the SIG_ERR CQE encoding against every
// mkey_check record: the CQE the model writes for the error a record's
// mlx5dv_mkey_check reported is the record's CQE byte for byte, and the
// decoding rule the data-path tests use (decodeSigErr) gives what
// libmlx5 gave for every record it accepted.
func TestOracleSigErrCQE(t *testing.T) {
	n, written := 0, 0
	readJSONL(t, "testdata/mkey_check.jsonl", func(line []byte) {
		var r mkeyCheckRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		n++
		f := r.Input.Fields
		if f == nil {
			return // no SIG_ERR CQE in the case
		}
		attr, err := r.Input.Attr.BlockAttr()
		if err != nil {
			t.Fatal(err)
		}
		var recorded []byte
		for _, c := range r.Input.CQEs {
			if b := unhex(t, c.Hex); b[63]>>4 == 12 {
				recorded = b
			}
		}
		if recorded == nil {
			t.Fatalf("%s: no SIG_ERR CQE written", r.Case)
		}
		if r.Result.Check.Ret != 0 {
			// libmlx5 refused the CQE: the model never writes one of
			// these (transaction signature type, a domain other than
			// wire or memory or one the mkey lacks, no known syndrome).
			return
		}
		var d *sig.Domain
		if f.Domain == 0 {
			d = attr.Wire
		} else {
			d = attr.Mem
		}
		typ, act, exp, off := decodeSigErr(recorded, d)
		chk := r.Result.Check
		if uint32(typ) != chk.Type || act != num(t, chk.Actual) || exp != num(t, chk.Expected) || off != num(t, chk.Offset) {
			t.Errorf("%s: decodeSigErr gives %v %#x %#x %#x, libmlx5 %d %s %s %s", r.Case, typ, act, exp, off, chk.Type, chk.Actual, chk.Expected, chk.Offset)
		}
		// The model's CQE for this error, with the record's whole
		// signatures: sig's decoder carries them into the MkeyErr.
		e, err := sig.DecodeSigErrCQE(sig.SigErrCQE{
			ExpectedTransSig: uint32(num(t, f.ExpTrans)), ActualTransSig: uint32(num(t, f.ActTrans)),
			ExpectedRefTag: uint32(num(t, f.ExpRef)), ActualRefTag: uint32(num(t, f.ActRef)),
			Syndrome: uint16(num(t, f.Syndrome)), SigType: f.SigType, Domain: f.Domain, Offset: num(t, f.Offset),
		}, attr)
		if err != nil {
			t.Fatalf("%s: %v", r.Case, err)
		}
		var c cqe
		putSigErr(&c, uint32(num(t, f.Mkey)), 0, e)
		c[63] |= recorded[63] & 1
		want := recorded
		if bits := binary.BigEndian.Uint16(recorded[32:]); bits&(bits-1) != 0 {
			// Several syndrome bits: libmlx5 reports the one that wins,
			// and the model sets only that one.
			want = append([]byte(nil), recorded...)
			binary.BigEndian.PutUint16(want[32:], binary.BigEndian.Uint16(c[32:]))
			if bits&binary.BigEndian.Uint16(c[32:]) == 0 {
				t.Errorf("%s: syndrome %#x is not among the recorded %#x", r.Case, binary.BigEndian.Uint16(c[32:]), bits)
			}
		}
		if !bytes.Equal(c[:], want) {
			t.Errorf("%s: the model's CQE\n%x, the record's\n%x", r.Case, c[:], want)
		}
		if typ2, act2, exp2, off2 := decodeSigErr(c[:], d); typ2 != typ || act2 != act || exp2 != exp || off2 != off {
			t.Errorf("%s: the model's CQE decodes to %v %#x %#x %#x", r.Case, typ2, act2, exp2, off2)
		}
		written++
	})
	if n != 18 || written != 13 {
		t.Errorf("%d records, %d CQEs compared; want 18 and 13", n, written)
	}
}

// umrRecord is one line of testdata/umr_sig_wqes.jsonl.
type umrRecord struct {
	Case      string          `json:"case"`
	Fresh     bool            `json:"fresh"`
	ConfFlags uint32          `json:"conf_flags"`
	Setters   []umrSetter     `json:"setters"`
	QPN       uint32          `json:"qpn"`
	LKey      string          `json:"lkey"`
	Mkc       string          `json:"mkc"`
	PSVs      []uint32        `json:"psvs"`
	PIBefore  uint16          `json:"sq_pi_before"`
	WQEBBs    []string        `json:"wqebbs"`
	Result    int             `json:"wr_complete"`
	Raw       json.RawMessage `json:"-"`
}

type umrSetter struct {
	Op     string `json:"op"`
	Access uint32 `json:"access_flags"`
	SGE    []struct {
		Addr   string `json:"addr"`
		Length uint32 `json:"length"`
		LKey   string `json:"lkey"`
	} `json:"sge"`
	Repeat uint32 `json:"repeat_count"`
	Data   []struct {
		Addr  string `json:"addr"`
		Count uint32 `json:"bytes_count"`
		Skip  uint32 `json:"bytes_skip"`
		LKey  string `json:"lkey"`
	} `json:"data"`
	Attr *sigattr.Attr `json:"sig_block_attr"`
}

// TestOracleUMR runs every mkey configure libmlx5 wrote in the umr_sig
// family on the model (the WQEBBs as recorded, with the QP number, mkey
// and PSV indexes the model gave in place of the fake kernel's) and
// checks the mkey's state against what the record asked for: access,
// length, translation and signature attributes.
func TestOracleUMR(t *testing.T) {
	r := newRig(t, "cx7")
	a, b := pair(t, r, qpOpts{logSQ: 4})
	// The expected state of the current mkey, carried across the
	// sequence/* records that reuse one mkey.
	type state struct {
		key              uint32
		psvs             map[uint32]uint32
		access           uint32
		length           uint64
		klms             []klm
		rep              *repeatBlock
		attr             *sig.BlockAttr
		hasAccess, isSig bool
	}
	var cur *state
	ran := 0
	readJSONL(t, "testdata/umr_sig_wqes.jsonl", func(line []byte) {
		var rec umrRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Result != 0 {
			return // libmlx5 wrote nothing
		}
		if rec.Mkc != "" {
			key, psvs := r.recordedMkey(t, &rec)
			cur = &state{key: key, psvs: psvs, isSig: prm.Mkc.BsfEn.Get(unhex(t, rec.Mkc)) != 0}
		}
		if cur == nil {
			t.Fatalf("%s: no mkey", rec.Case)
		}
		// The expected state after this configure.
		sawSig := false
		for _, s := range rec.Setters {
			switch s.Op {
			case "wr_set_mkey_access_flags":
				cur.access, cur.hasAccess = s.Access, true
			case "wr_set_mkey_layout_list":
				cur.klms, cur.rep, cur.length = nil, nil, 0
				for _, g := range s.SGE {
					cur.klms = append(cur.klms, klm{g.Length, uint32(num(t, g.LKey)), num(t, g.Addr)})
					cur.length += uint64(g.Length)
				}
			case "wr_set_mkey_layout_interleaved":
				cur.klms, cur.rep = nil, &repeatBlock{count: s.Repeat}
				for _, e := range s.Data {
					cur.rep.ents = append(cur.rep.ents, repeatEnt{uint16(e.Count + e.Skip), uint16(e.Count), uint32(num(t, e.LKey)), num(t, e.Addr)})
					cur.rep.byteCount += e.Count
				}
				cur.length = uint64(cur.rep.byteCount) * uint64(s.Repeat)
			case "wr_set_mkey_sig_block":
				attr, err := s.Attr.BlockAttr()
				if err != nil {
					t.Fatal(err)
				}
				cur.attr, sawSig = attr, true
			}
		}
		if !sawSig && (rec.ConfFlags&1 != 0 || rec.Fresh) {
			cur.attr = nil // RESET_SIG_ATTR, or a first configure without one
		}

		// Reset the QP so the WQEs land at the recorded counter (0).
		a.reset()
		b.reset()
		connect(a, b, true)
		if rec.PIBefore != 0 {
			t.Fatalf("%s: starts at counter %d", rec.Case, rec.PIBefore)
		}
		var wq []byte
		for _, h := range rec.WQEBBs {
			wq = append(wq, unhex(t, h)...)
		}
		patchUMR(t, rec.Case, wq, rec.QPN, a.qpn, uint32(num(t, rec.LKey)), cur.key, cur.psvs)
		runRecorded(t, a, rec.Case, wq)
		ran++

		st := r.mkeyState(cur.key)
		mkc := st.mkc
		if prm.Mkc.Free.Get(mkc) != 0 {
			t.Errorf("%s: the mkey is still free", rec.Case)
		}
		if cur.hasAccess {
			got := uint32(prm.Mkc.Lw.Get(mkc) | prm.Mkc.Rw.Get(mkc)<<1 | prm.Mkc.Rr.Get(mkc)<<2 | prm.Mkc.A.Get(mkc)<<3)
			if got != cur.access {
				t.Errorf("%s: access %#x, want %#x", rec.Case, got, cur.access)
			}
		}
		if l := prm.Mkc.Len.Get(mkc); l != cur.length {
			t.Errorf("%s: len %#x, want %#x", rec.Case, l, cur.length)
		}
		if !reflect.DeepEqual(st.klms, cur.klms) || !reflect.DeepEqual(st.rep, cur.rep) {
			t.Errorf("%s: translation %v %+v, want %v %+v", rec.Case, st.klms, st.rep, cur.klms, cur.rep)
		}
		switch {
		case cur.attr == nil && st.sigOn():
			t.Errorf("%s: a signature (%+v) where none was set", rec.Case, st.sig.attr)
		case cur.attr != nil && !st.sigOn():
			t.Errorf("%s: no signature (bsf_en %d)", rec.Case, prm.Mkc.BsfEn.Get(mkc))
		case cur.attr != nil:
			if !sameAttr(&st.sig.attr, cur.attr) {
				t.Errorf("%s: the BSF reads as\n%s, libmlx5 was given\n%s", rec.Case, attrString(&st.sig.attr), attrString(cur.attr))
			}
		}
	})
	if ran != 236 {
		t.Errorf("%d configures ran, want the 236 libmlx5 wrote", ran)
	}
	if f := r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}

// recordedMkey creates, in the rig's PD, the mkey of a configure record
// from the mkey context of its CREATE_MKEY, and the PSVs it had, and
// returns the mkey's key (the recorded variant) and the model's PSV index
// for each recorded one.
func (r *rig) recordedMkey(t *testing.T, rec *umrRecord) (uint32, map[uint32]uint32) {
	t.Helper()
	in := mbox(prm.CreateMkeyIn.Layout(), prm.MLX5_CMD_OP_CREATE_MKEY)
	copy(prm.CreateMkeyIn.MemoryKeyMkeyEntry.Bytes(in), unhex(t, rec.Mkc))
	prm.Mkc.Pd.At(prm.CreateMkeyIn.MemoryKeyMkeyEntry).Set(in, uint64(r.pdn))
	idx := uint32(prm.CreateMkeyOut.MkeyIndex.Get(r.create(in, 16)))
	psvs := map[uint32]uint32{}
	for _, old := range rec.PSVs {
		psv := mbox(prm.CreatePsvIn.Layout(), prm.MLX5_CMD_OP_CREATE_PSV)
		prm.CreatePsvIn.NumPsv.Set(psv, 1)
		prm.CreatePsvIn.Pd.Set(psv, uint64(r.pdn))
		psvs[old] = uint32(prm.CreatePsvOut.Psv0Index.Get(r.create(psv, 32)))
	}
	return idx<<8 | uint32(num(t, rec.LKey)&0xff), psvs
}

// runRecorded puts recorded WQEs wq, patched for a, on a's send queue,
// then a signaled NOP, rings, and fails the test on an error CQE before
// the NOP's.
func runRecorded(t *testing.T, a *tqp, name string, wq []byte) {
	t.Helper()
	a.put(wq)
	nop := a.put(twqe{opcode: tOpNOP, fm: tSignaled}.encode(a.qpn, a.sqPI))
	a.ring(nop)
	for {
		c := a.scq.next()
		if c[63]>>4 != 0 {
			t.Fatalf("%s: CQE %x; WQE errors %q", name, c, a.r.d.WQEErrors())
		}
		if binary.BigEndian.Uint16(c[60:]) == nop {
			break
		}
	}
}

// patchUMR replaces, in a recorded UMR + SET_PSV sequence, the fake
// kernel's numbers with the model's: the QP in every ctrl segment, the
// mkey in the UMR's imm, the PSVs in the BSF and the SET_PSVs.
func patchUMR(t *testing.T, name string, wq []byte, oldQPN, qpn, oldKey, key uint32, psvs map[uint32]uint32) {
	t.Helper()
	psv := func(b []byte) {
		w := binary.BigEndian.Uint32(b)
		if old := w & 0xffffff; old != 0 {
			n, ok := psvs[old]
			if !ok {
				t.Fatalf("%s: PSV %#x was not created", name, old)
			}
			binary.BigEndian.PutUint32(b, w&^0xffffff|n)
		}
	}
	for off := 0; off < len(wq); {
		c := wq[off:]
		ds := int(c[7] & 0x3f)
		if got := binary.BigEndian.Uint32(c[4:]) >> 8; got != oldQPN {
			t.Fatalf("%s: WQE at %d names QP %#x", name, off, got)
		}
		binary.BigEndian.PutUint32(c[4:], qpn<<8|uint32(ds))
		switch c[3] {
		case 0x25:
			if binary.BigEndian.Uint32(c[12:]) != oldKey {
				t.Fatalf("%s: UMR imm %x", name, c[12:16])
			}
			binary.BigEndian.PutUint32(c[12:], key)
			xlt, bsf := int(binary.BigEndian.Uint16(c[20:])), int(binary.BigEndian.Uint16(c[22:]))
			if bsf != 0 {
				b := c[16+48+64+16*xlt:]
				psv(b[8:])
				psv(b[12:])
			}
		case 0x20:
			psv(c[16:])
		default:
			t.Fatalf("%s: opcode %#x", name, c[3])
		}
		off += (ds*16 + 63) &^ 63
	}
}

// sameAttr reports whether two configurations make the same engine: the
// same domains and check mask and the same effective copy mask (libmlx5
// writes the copy mask it computes into the BSF; T10-DIF's APP_ESCAPE
// adds nothing to APP_REF_ESCAPE).
func sameAttr(a, b *sig.BlockAttr) bool {
	norm := func(d *sig.Domain) *sig.Domain {
		if d == nil || d.T10DIF == nil {
			return d
		}
		c, t := *d, *d.T10DIF
		if t.Flags&sig.T10DIFAppRefEscape != 0 {
			t.Flags &^= sig.T10DIFAppEscape
		}
		c.T10DIF = &t
		return &c
	}
	return reflect.DeepEqual(norm(a.Mem), norm(b.Mem)) && reflect.DeepEqual(norm(a.Wire), norm(b.Wire)) &&
		a.CheckMask == b.CheckMask && a.EffectiveCopyMask() == b.EffectiveCopyMask()
}

func attrString(a *sig.BlockAttr) string {
	j, _ := json.Marshal(a)
	return string(j)
}
