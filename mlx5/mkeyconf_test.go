package mlx5

import (
	"errors"
	"reflect"
	"testing"

	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// TestMkeyConfigureFollowsBlockValues: an mkey configure copies the WQEs
// of its last one only for a signature block of the same value, however
// the block is reached: a block changed in place, behind the same
// pointers, after configures that left a template of it is checked again
// (refused when invalid or unsupported), and its PSVs and BSF are the new
// value's.
func TestMkeyConfigureFollowsBlockValues(t *testing.T) {
	c := sbsContext()
	f := newSBSConfigure(t, c, true) // its QP; an mkey of other caps
	qp, cq := f.qp, f.cq
	// Every cap but the IP checksum guard.
	m := &Mkey{c: c, lkey: sbsMkey, rkey: sbsMkey, maxEntries: 4, sigMkey: true, psvIndex: [2]uint32{sbsMemPSV, sbsWirePSV},
		sentErrs: ^uint32(0), name: mkeyName(sbsMkey),
		sigCaps: sig.Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 1, CRCType: 7}, checkCaps: true}
	memDIF := &sig.T10DIF{AppTag: 0x1234, RefTag: 0x5678}
	wireDIF := &sig.T10DIF{Seed: 0xffff, AppTag: 0xabcd, RefTag: 0x11223344, Flags: sig.T10DIFAppEscape}
	wr := MkeyConfigureWR{Mkey: m, Flags: SendSignaled | SendInline, SetAccess: true,
		Access: AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite,
		List:   []KLM{{Addr: sbsAddr, ByteCount: sbsLength, Mkey: sbsLKey}},
		Sig: &sig.BlockAttr{
			Mem:       &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512, T10DIF: memDIF},
			Wire:      &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize520, T10DIF: wireDIF},
			CheckMask: 0xff,
		}}
	post := func() error {
		t.Helper()
		if err := sbsRecycle(qp, cq, wqe.OpcodeSetPSV, 1); err != nil {
			t.Fatal(err)
		}
		return qp.PostMkeyConfigure(&wr)
	}
	if err := post(); err != nil {
		t.Fatal(err)
	}
	if err := post(); err != nil { // the same value: the template is kept
		t.Fatal(err)
	}
	if err := post(); err != nil { // and copied
		t.Fatal(err)
	}
	if !m.tmpl.ok {
		t.Fatal("three configures alike left no template")
	}
	memDIF.Seed = 0x1234 // invalid, behind the same pointer
	if err := post(); !errors.Is(err, ErrInvalid) || !errors.Is(err, sig.ErrT10DIFSeed) {
		t.Fatalf("a block changed in place to an invalid seed: %v", err)
	}
	memDIF.Seed = 0
	wireDIF.Guard = sig.T10DIFGuardCsum // valid, but not in the caps
	if err := post(); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a block changed in place to a guard the device lacks: %v", err)
	}
	wireDIF.Guard = sig.T10DIFGuardCRC
	wireDIF.RefTag = 0x99887766 // valid: the PSVs follow
	if err := post(); err != nil {
		t.Fatal(err)
	}
	if want := wqe.PSVsOf(wr.Sig); m.sigPSV != want {
		t.Fatalf("after a block changed in place: PSVs %+v, want %+v", m.sigPSV, want)
	}
	var bsf [wqe.BSFSegSize]byte
	if err := wqe.PutBSF(bsf[:], wr.Sig, sbsMemPSV, sbsWirePSV); err != nil {
		t.Fatal(err)
	}
	// The next configures' WQEs (built, then copied) hold that BSF.
	for range 2 {
		if err := post(); err != nil {
			t.Fatal(err)
		}
	}
	if !m.tmpl.ok {
		t.Fatal("configures alike after a block changed in place left no template")
	}
	start := qp.sq.pi
	if err := post(); err != nil {
		t.Fatal(err)
	}
	ring, found := qp.sq.ring, false
	for at := start; at != qp.sq.pi; at++ {
		slot := ring[int(at)&(len(ring)/wqe.WQEBB-1)*wqe.WQEBB:][:wqe.BSFSegSize]
		found = found || [wqe.BSFSegSize]byte(slot) == bsf
	}
	if !found || qp.sq.pi == start {
		t.Fatalf("the configure from the template (WQEBBs %d to %d) does not hold the BSF\n%x", start, qp.sq.pi, bsf)
	}
}

// TestMkeyConfigureCoversWR: every field of MkeyConfigureWR but the ones
// no WQE depends on, and every piece of QP and mkey state a configure's
// WQEs depend on, reaches the builder's inputs (mkeyConfigure): changed
// one at a time, each changes them (TestMkeyTmplKeyCoversInputs checks
// the template's key). A field added to MkeyConfigureWR is changed here
// too.
func TestMkeyConfigureCoversWR(t *testing.T) {
	c := sbsContext()
	cq := benchCQ(t, c, 255, 0x402)
	qp := benchQP(t, c, QPOptions{PD: &PD{}, SendCQ: cq, RecvCQ: cq, MaxSendWR: 16, MaxSendSGE: 1, MaxRecvWR: 1, MaxRecvSGE: 1,
		MaxInlineData: 128, SendOps: Opcodes(OpRDMAWrite), MkeyConfigure: true}, sbsUMRQP)
	newMkey := func() *Mkey {
		return &Mkey{c: c, lkey: sbsMkey, rkey: sbsMkey, maxEntries: 4, sigMkey: true, psvIndex: [2]uint32{sbsMemPSV, sbsWirePSV},
			sentErrs: 3, name: mkeyName(sbsMkey), sigCaps: sig.Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 3, CRCType: 7}, checkCaps: true}
	}
	newWR := func(m *Mkey) *MkeyConfigureWR {
		return &MkeyConfigureWR{WrID: 7, Mkey: m, Flags: SendSignaled, SetAccess: true, Access: AccessLocalWrite | AccessRemoteRead,
			List: []KLM{{Addr: sbsAddr, ByteCount: sbsLength, Mkey: sbsLKey}}, RepeatCount: 2,
			Sig: &sig.BlockAttr{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512, T10DIF: &sig.T10DIF{AppTag: 1}}}}
	}
	inputs := func(qp *QP, m *Mkey, wr *MkeyConfigureWR, errs uint32) wqe.MkeyConfigure {
		var in wqe.MkeyConfigure
		access, _ := wr.Access.mkeyAccess()
		mkeyConfigure(&in, qp, m, wr, access, errs)
		return in
	}
	base := inputs(qp, newMkey(), newWR(newMkey()), 3)

	// The work request's fields.
	excluded := map[string]string{"WrID": "the completion's: no WQE holds it"}
	typ := reflect.TypeOf(MkeyConfigureWR{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		m := newMkey()
		wr := newWR(m)
		v := reflect.ValueOf(wr).Elem().Field(i)
		switch {
		case f.Name == "Mkey":
			o := newMkey()
			o.lkey++
			wr.Mkey = o
		case v.Kind() == reflect.Bool:
			v.SetBool(!v.Bool())
		case v.CanUint():
			v.SetUint(v.Uint() ^ 1)
		case v.Kind() == reflect.Pointer && v.IsNil():
			v.Set(reflect.New(v.Type().Elem()))
		case v.Kind() == reflect.Pointer:
			v.SetZero()
		case v.Kind() == reflect.Slice:
			if v.IsNil() {
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			} else {
				v.SetZero()
			}
		default:
			t.Fatalf("MkeyConfigureWR.%s: a %v: teach the test to change it", f.Name, v.Kind())
		}
		got := inputs(qp, wr.Mkey, wr, 3)
		same := reflect.DeepEqual(got, base)
		if reason, ok := excluded[f.Name]; ok != same {
			t.Errorf("MkeyConfigureWR.%s: the builder's inputs change: %v (excluded: %q)", f.Name, !same, reason)
		}
	}

	// The QP's and the mkey's state, and the signature errors reported.
	for _, s := range []struct {
		name   string
		change func(qp *QP, m *Mkey, errs *uint32)
	}{
		{"qp.qpn", func(qp *QP, _ *Mkey, _ *uint32) { qp.qpn++ }},
		{"qp.sq.fm", func(qp *QP, _ *Mkey, _ *uint32) { qp.sq.fm = !qp.sq.fm }},
		{"m.lkey", func(_ *QP, m *Mkey, _ *uint32) { m.lkey++ }},
		{"m.maxEntries", func(_ *QP, m *Mkey, _ *uint32) { m.maxEntries = 9 }},
		{"m.psvIndex[0]", func(_ *QP, m *Mkey, _ *uint32) { m.psvIndex[0]++ }},
		{"m.psvIndex[1]", func(_ *QP, m *Mkey, _ *uint32) { m.psvIndex[1]++ }},
		{"m.sigMkey", func(_ *QP, m *Mkey, _ *uint32) { m.sigMkey = false }},
		{"m.bsf", func(_ *QP, m *Mkey, _ *uint32) { m.bsf = wqe.BSFSet }},
		{"m.sentErrs", func(_ *QP, m *Mkey, _ *uint32) { m.sentErrs++ }},
		{"m.sigPSV", func(_ *QP, m *Mkey, _ *uint32) { m.sigPSV.Mem = true }},
		{"m.checkCaps", func(_ *QP, m *Mkey, _ *uint32) { m.checkCaps = false }},
		{"m.sigCaps", func(_ *QP, m *Mkey, _ *uint32) { m.sigCaps.CRCType = 1 }},
		{"signature errors", func(_ *QP, _ *Mkey, errs *uint32) { *errs++ }},
	} {
		qpn, fm := qp.qpn, qp.sq.fm
		m, errs := newMkey(), uint32(3)
		s.change(qp, m, &errs)
		if reflect.DeepEqual(inputs(qp, m, newWR(m), errs), base) {
			t.Errorf("%s: the builder's inputs do not change", s.name)
		}
		qp.qpn, qp.sq.fm = qpn, fm
	}
}
