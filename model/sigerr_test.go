package model

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// sigErrRig is a signature mkey with T10-DIF in both domains over four
// 512-byte blocks, configured by QP a of a connected pair: its memory
// domain with block 1's guard corrupted (a gather through the mkey, an
// RDMA WRITE from it, fails the memory domain's check), and wire bytes
// with block 2's reference tag corrupted (a scatter into it, the peer's
// RDMA WRITE to its rkey, fails the wire domain's check).
type sigErrRig struct {
	t                *testing.T
	r                *rig
	a, b             *tqp
	mk               *tmkey
	attr             *sig.BlockAttr
	mem, dst, src    []byte
	kmem, kdst, ksrc uint32 // their keys
	memErr, wireErr  sig.MkeyErr
}

func newSigErrRig(t *testing.T, opt Options, q qpOpts) *sigErrRig {
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	s := &sigErrRig{t: t, r: newRigOpts(t, "cx6dx", opt)}
	s.a, s.b = pair(t, s.r, q)
	d := func() *sig.Domain { return t10dif(sig.BlockSize512, 0x10) }
	s.attr = &sig.BlockAttr{Mem: d(), Wire: d(), CheckMask: 0xff}
	eng, err := sig.NewEngine(s.attr)
	if err != nil {
		t.Fatal(err)
	}
	var km, kd, ks seam.MR
	s.mem, km = s.r.mr(4*520, all)
	s.dst, kd = s.r.mr(4*520, all)
	s.src, ks = s.r.mr(4*520, all)
	s.kmem, s.kdst, s.ksrc = km.LKey, kd.RKey, ks.LKey
	for i := range 4 {
		pattern(s.mem[520*i:520*i+512], uint64(40+i))
	}
	if err := eng.Generate(sig.DomainMemory, s.mem); err != nil {
		t.Fatal(err)
	}
	if me, err := eng.Transfer(sig.TX, s.src, s.mem); err != nil || !me.OK() {
		t.Fatal(me, err)
	}
	s.mem[1*520+512] ^= 0x01
	binary.BigEndian.PutUint32(s.src[2*520+516:], 0xbad)
	if s.memErr, err = eng.Check(sig.DomainMemory, s.mem); err != nil || s.memErr.Type != sig.MkeyErrBadGuard {
		t.Fatal(s.memErr, err)
	}
	if s.wireErr, err = eng.Check(sig.DomainWire, s.src); err != nil || s.wireErr.Type != sig.MkeyErrBadRefTag {
		t.Fatal(s.wireErr, err)
	}
	s.mk = s.r.freeMkey(1, true)
	s.configure(wqe.MkeyConfigure{Sig: s.attr})
	return s
}

// configure posts c on the mkey (layout: the memory domain) by QP a and
// takes its completion.
func (s *sigErrRig) configure(c wqe.MkeyConfigure) {
	s.r.t.Helper()
	c.List = []wqe.KLM{{Addr: addr(s.mem), ByteCount: 4 * 520, Mkey: s.kmem}}
	idx := s.a.configure(s.mk, c)
	if cqe := s.a.scq.next(); cqe[63]>>4 != 0 || binary.BigEndian.Uint16(cqe[60:]) != idx {
		s.r.t.Fatalf("configure: CQE %x, want a requester CQE of WQE %d", cqe, idx)
	}
}

// gather RDMA-writes the mkey's four blocks from QP a: the memory domain
// is checked. It returns the SIG_ERR CQE, nil if none came before the
// WRITE's completion.
func (s *sigErrRig) gather() []byte {
	s.r.t.Helper()
	idx := s.a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(s.dst), rkey: s.kdst,
		sges: []tsge{{4 * 520, s.mk.key, 0}}})
	return s.sigErrThen(s.a.scq, "gather", s.a.wantReq(tOpRDMAWrite, idx, 0, 0))
}

// scatter RDMA-writes the bad wire bytes into the mkey's rkey from QP b:
// a checks the wire domain and reports on its receive CQ. It returns the
// SIG_ERR CQE, nil if none came. The memory domain, which the scatter
// overwrites, is put back as it was.
func (s *sigErrRig) scatter() []byte {
	s.r.t.Helper()
	defer copy(s.mem, append([]byte(nil), s.mem...))
	idx := s.b.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: 0, rkey: s.mk.key,
		sges: []tsge{{4 * 520, s.ksrc, addr(s.src)}}})
	checkCQE(s.t, "scatter", s.b.scq.next(), s.b.wantReq(tOpRDMAWrite, idx, 0, 0))
	if c := s.a.rcq.ready(); c != nil {
		return s.a.rcq.next()
	}
	return nil
}

// sigErrThen reads CQEs of cq up to the completion want and returns the
// SIG_ERR CQE before it, if any.
func (s *sigErrRig) sigErrThen(cq *tcq, what string, want []byte) []byte {
	s.r.t.Helper()
	c := cq.next()
	var se []byte
	if c[63]>>4 == 12 {
		se, c = c, cq.next()
	}
	checkCQE(s.t, what, c, want)
	return se
}

// TestSigErrOncePerPSV: the PSV of the checked domain reports the first
// signature error and ignores the next ones until a SET_PSV initialises
// it again (rdma-core commit 88ec631, "mlx5: Always post SET_PSV WRs
// after block signature error"; docs/MODEL.md, "Signature errors"). Two
// bad gathers: one SIG_ERR CQE; a bad scatter still reports (another
// PSV); a configure with the block's SET_PSVs re-arms; a signature error
// the PSV ignores does not stop a drain_sigerr queue.
func TestSigErrOncePerPSV(t *testing.T) {
	s := newSigErrRig(t, Options{}, qpOpts{})
	if c := s.gather(); c == nil {
		t.Fatal("the first bad gather: no SIG_ERR CQE")
	} else {
		checkSigErr(t, c, s.mk.key, s.a.qpn, s.memErr, s.attr.Mem, 0)
	}
	if c := s.gather(); c != nil {
		t.Errorf("the second bad gather: SIG_ERR CQE %x; the memory PSV is in its error state", c)
	}
	// The wire domain's PSV has not reported yet.
	if c := s.scatter(); c == nil {
		t.Error("a bad scatter: no SIG_ERR CQE from the wire PSV")
	} else {
		checkSigErr(t, c, s.mk.key, s.a.qpn, s.wireErr, s.attr.Wire, 0)
	}
	if c := s.scatter(); c != nil {
		t.Errorf("the second bad scatter: SIG_ERR CQE %x", c)
	}
	// A new signature block (BSF and SET_PSVs), no counter update: the
	// PSVs are initialised again and report.
	s.configure(wqe.MkeyConfigure{Sig: s.attr})
	if c := s.gather(); c == nil {
		t.Error("a bad gather after the SET_PSVs: no SIG_ERR CQE")
	}
	if c := s.gather(); c != nil {
		t.Errorf("the next bad gather: SIG_ERR CQE %x", c)
	}
	// The block kept, the counter updated: libmlx5 posts the block's
	// SET_PSVs again, which re-arm.
	s.configure(wqe.MkeyConfigure{UpdateSigErr: true, SigErrs: 3, Block: wqe.PSVsOf(s.attr)})
	if c := s.gather(); c == nil {
		t.Error("a bad gather after the counter update: no SIG_ERR CQE")
	}
	if f := s.r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}

// TestSigErrIgnoredDoesNotDrain: with drain_sigerr the first bad gather
// stops the send queue; after SQD_RTS a second one, which the PSV
// ignores, does not: the NOP behind it runs.
func TestSigErrIgnoredDoesNotDrain(t *testing.T) {
	s := newSigErrRig(t, Options{}, qpOpts{drainSigerr: true})
	if c := s.gather(); c == nil {
		t.Fatal("the first bad gather: no SIG_ERR CQE")
	}
	s.a.waitState(StateSQD)
	s.a.modify(prm.MLX5_CMD_OP_SQD_RTS_QP, nil)
	s.a.waitState(StateRTS)
	if c := s.gather(); c != nil {
		t.Errorf("the second bad gather: SIG_ERR CQE %x", c)
	}
	idx := s.a.post(twqe{opcode: tOpNOP, fm: tSignaled})
	checkCQE(t, "NOP after an ignored signature error", s.a.scq.next(), s.a.wantReq(tOpNOP, idx, 0, 0))
	if st := s.a.state(); st != StateRTS {
		t.Errorf("QP state %#x after an ignored signature error, want RTS", st)
	}
	s.a.scq.none(time.Millisecond)
}

// TestSigErrOncePerMkey: with Options.SigErrOncePerMkey the mkey reports
// one signature error, in whichever domain, and then none until a UMR
// writes an expected_sigerr_count other than its count of reported errors
// (modulo 2): new SET_PSVs alone do not re-arm it. The configures here
// count as libmlx5's do: the first sets 1 (SigErrs 0), the one after the
// first error 0, the one after the second 1.
func TestSigErrOncePerMkey(t *testing.T) {
	s := newSigErrRig(t, Options{SigErrOncePerMkey: true}, qpOpts{})
	if c := s.gather(); c == nil {
		t.Fatal("the first bad gather: no SIG_ERR CQE")
	} else {
		checkSigErr(t, c, s.mk.key, s.a.qpn, s.memErr, s.attr.Mem, 0)
	}
	if c := s.scatter(); c != nil {
		t.Errorf("a bad scatter after the mkey reported: SIG_ERR CQE %x", c)
	}
	s.configure(wqe.MkeyConfigure{Sig: s.attr})
	if c := s.gather(); c != nil {
		t.Errorf("a bad gather after SET_PSVs without a counter update: SIG_ERR CQE %x", c)
	}
	s.configure(wqe.MkeyConfigure{UpdateSigErr: true, SigErrs: 1, Block: wqe.PSVsOf(s.attr)})
	if c := s.gather(); c == nil {
		t.Error("a bad gather after the counter update: no SIG_ERR CQE")
	}
	if c := s.scatter(); c != nil {
		t.Errorf("a bad scatter after the second report: SIG_ERR CQE %x", c)
	}
	s.configure(wqe.MkeyConfigure{UpdateSigErr: true, SigErrs: 2, Block: wqe.PSVsOf(s.attr)})
	if c := s.scatter(); c == nil {
		t.Error("a bad scatter after the second counter update: no SIG_ERR CQE")
	} else {
		checkSigErr(t, c, s.mk.key, s.a.qpn, s.wireErr, s.attr.Wire, 0)
	}
	if f := s.r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}
