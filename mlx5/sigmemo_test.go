package mlx5

import (
	"errors"
	"reflect"
	"testing"

	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// TestSigMemoFollowsValues: an mkey configure skips the signature
// block's checks only for a block of the value it checked last, however
// the block is reached: a block changed in place, behind the same
// pointers, after a configure that remembered it is checked again
// (refused when invalid or unsupported), and its PSVs are the new
// value's.
func TestSigMemoFollowsValues(t *testing.T) {
	c := sbsContext()
	cq := benchCQ(t, c, 255, 0x402)
	qp := benchQP(t, c, QPOptions{PD: &PD{}, SendCQ: cq, RecvCQ: cq, MaxSendWR: 256, MaxSendSGE: 1, MaxRecvWR: 1, MaxRecvSGE: 1,
		MaxInlineData: 128, SendOps: Opcodes(OpRDMAWrite, OpSend), MkeyConfigure: true}, sbsUMRQP)
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
	if err := post(); err != nil { // the same value: from the memo
		t.Fatal(err)
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
	if m.sigMemo.bsf != bsf {
		t.Fatalf("after a block changed in place: the remembered BSF\n%x, want\n%x", m.sigMemo.bsf, bsf)
	}
	// This configure's WQEs (from the memo) hold that BSF.
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
		t.Fatalf("the configure from the memo (WQEBBs %d to %d) does not hold the BSF\n%x", start, qp.sq.pi, bsf)
	}
}

// TestSigMemoCoversSig: sigMemo compares every field of the signature
// block's types; a field added to them must be added to it.
func TestSigMemoCoversSig(t *testing.T) {
	for _, c := range []struct {
		v    any
		want int
	}{{sig.BlockAttr{}, 6}, {sig.Domain{}, 5}, {sig.T10DIF{}, 5}, {sig.CRC{}, 2}} {
		if n := reflect.TypeOf(c.v).NumField(); n != c.want {
			t.Errorf("%T has %d fields, sigMemo compares %d: update mlx5/sigmemo.go and this test", c.v, n, c.want)
		}
	}
}
