package model

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// Where a QP with drain_sigerr stops after a signature error: anywhere
// from right after the failing WQE to right before the next fenced one
// (the man page of mlx5dv_qp_cancel_posted_send_wrs), as Options.SigStop
// says.

// stopRig is a drain_sigerr QP a and its peer b, two signature mkeys
// (T10-DIF in memory, plain on the wire) over memory whose block 1 is
// corrupted, and plain memory to send from and write into.
type stopRig struct {
	r        *rig
	a, b     *tqp
	ch       seam.EventChannel
	bad      [2]*tmkey
	src, dst []byte
	smr, dmr seam.MR
}

func newStopRig(t *testing.T, opt Options) *stopRig {
	t.Helper()
	return newStopRigQP(t, opt, qpOpts{})
}

// newStopRigQP is newStopRig with the QPs made as o says (drain_sigerr
// added).
func newStopRigQP(t *testing.T, opt Options, o qpOpts) *stopRig {
	t.Helper()
	s := &stopRig{r: newRigOpts(t, "cx7", opt)}
	o.drainSigerr = true
	s.a, s.b = pair(t, s.r, o)
	s.ch = newChannel(t, s.r.d)
	if err := s.r.d.Subscribe(s.ch, s.a.h, []uint16{evSQDrained}, 7); err != nil {
		t.Fatal(err)
	}
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	s.src, s.smr = s.r.mr(4096, all)
	s.dst, s.dmr = s.r.mr(16384, all)
	pattern(s.src, 3)
	attr := &sig.BlockAttr{Mem: t10dif(sig.BlockSize512, 0), CheckMask: 0xff}
	eng, err := sig.NewEngine(attr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.bad {
		mem, km := s.r.mr(4*520, all)
		pattern(mem, uint64(40+i))
		if err := eng.Generate(sig.DomainMemory, mem); err != nil {
			t.Fatal(err)
		}
		mem[520+9] ^= 0x10 // block 1's guard no longer matches
		s.bad[i] = s.r.freeMkey(1, true)
		s.a.configure(s.bad[i], wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(mem), ByteCount: 4 * 520, Mkey: km.LKey}}, Sig: attr})
		s.a.scq.next()
	}
	return s
}

// badWrite is an RDMA WRITE of the 4 blocks of bad mkey i: its check fails.
func (s *stopRig) badWrite(i int, fm uint8) twqe {
	return twqe{opcode: tOpRDMAWrite, fm: fm, hasRaddr: true, raddr: addr(s.dst[4096*i:]), rkey: s.dmr.RKey,
		sges: []tsge{{4 * 512, s.bad[i].key, 0}}}
}

// plainWrite is an RDMA WRITE of plain memory: nothing to check.
func (s *stopRig) plainWrite(fm uint8) twqe {
	return twqe{opcode: tOpRDMAWrite, fm: fm, hasRaddr: true, raddr: addr(s.dst[8192:]), rkey: s.dmr.RKey,
		sges: []tsge{{512, s.smr.LKey, addr(s.src)}}}
}

// send is a 32-byte SEND of plain memory (b must have a receive).
func (s *stopRig) send(fm uint8) twqe {
	return twqe{opcode: tOpSend, fm: fm, sges: []tsge{{32, s.smr.LKey, addr(s.src)}}}
}

// postAll puts the WQEs on a's send queue and rings once, so that the
// doorbell record covers them all when the first runs; it returns their
// counters and the producer counter after them.
func (s *stopRig) postAll(ws ...twqe) ([]uint16, uint16) {
	idx := make([]uint16, len(ws))
	for i, w := range ws {
		idx[i] = s.a.put(w.encode(s.a.qpn, s.a.sqPI))
	}
	s.a.ring(idx[len(idx)-1])
	return idx, s.a.sqPI
}

// hw is QUERY_QP's state and hw_sq_wqebb_counter of a.
func (s *stopRig) hw(t *testing.T) (uint8, uint16) {
	t.Helper()
	out := prm.QueryQpOut.Layout().New()
	if err := s.r.d.ObjQuery(s.a.h, transitionInQuery(s.a.qpn), out); err != nil {
		t.Fatal(err)
	}
	qpc := prm.QueryQpOut.Qpc
	return uint8(prm.Qpc.State.At(qpc).Get(out)), uint16(prm.Qpc.HwSqWqebbCounter.At(qpc).Get(out))
}

// stopped waits for a's SQ_DRAINED and returns where the QP stopped.
func (s *stopRig) stopped(t *testing.T) uint16 {
	t.Helper()
	if ev := nextEvent(t, s.ch, mustCome); ev.typ != evSQDrained {
		t.Fatalf("event %#x, want SQ_DRAINED", ev.typ)
	}
	st, hw := s.hw(t)
	if st != StateSQD {
		t.Fatalf("after SQ_DRAINED: state %#x, want SQD", st)
	}
	return hw
}

// wantSigErr checks that c is a SIG_ERR CQE of a for mkey m.
func (s *stopRig) wantSigErr(t *testing.T, what string, c []byte, m *tmkey) {
	t.Helper()
	if c[63]>>4 != 12 || binary.BigEndian.Uint32(c[36:]) != m.key || binary.BigEndian.Uint32(c[56:]) != s.a.qpn {
		t.Errorf("%s: CQE %x, want a SIG_ERR of mkey %#x, QP %#x", what, c, m.key, s.a.qpn)
	}
}

// The window in action: a WRITE whose check fails (F), then three
// unfenced WQEs (a plain WRITE, a second failing WRITE through another
// mkey, a plain SEND), a fenced SEND and a NOP, posted with one doorbell.
// Each policy stops where it says, within the window: Earliest right
// after F, Latest right before the fenced SEND, After n after n of the
// three; every WQE that ran before the stop has its CQE (the second
// failing one its own SIG_ERR CQE first) before SQ_DRAINED, and
// hw_sq_wqebb_counter is the first that did not. SQD_RTS goes on, a
// second failure not run yet stops the queue again within its own window
// (the plain SEND), and in the end every WQE completed exactly once. The
// seeded policy reaches every position of the window over a few seeds,
// and the same seed stops at the same place.
func TestSigStopWindow(t *testing.T) {
	const n = 6                    // WQEs posted
	bad := map[int]int{0: 0, 2: 1} // WQE -> the bad mkey it reads
	const fencedAt = 4             // the fenced SEND
	run := func(t *testing.T, stop SigStop) []int {
		s := newStopRig(t, Options{SigStop: stop})
		ridx := []uint16{s.b.recv(tsge{64, s.dmr.LKey, addr(s.dst[12288:])}), s.b.recv(tsge{64, s.dmr.LKey, addr(s.dst[12288+64:])})}
		ops := []uint8{tOpRDMAWrite, tOpRDMAWrite, tOpRDMAWrite, tOpSend, tOpSend, tOpNOP}
		idx, pi := s.postAll(s.badWrite(0, tSignaled), s.plainWrite(tSignaled), s.badWrite(1, tSignaled),
			s.send(tSignaled), s.send(tSignaled|fenceModeSmallAndFence<<5), twqe{opcode: tOpNOP, fm: tSignaled})
		counter := func(i int) uint16 {
			if i == n {
				return pi
			}
			return idx[i]
		}
		expect := func(i int) {
			t.Helper()
			if m, ok := bad[i]; ok {
				s.wantSigErr(t, fmt.Sprintf("WQE %d", i), s.a.scq.next(), s.bad[m])
			}
			checkCQE(t, fmt.Sprintf("WQE %d", i), s.a.scq.next(), s.a.wantReq(ops[i], idx[i], 0, 0))
		}
		var ks []int // WQEs of the window run at each stop
		for next := 0; next < n; {
			f := -1
			for i := next; i < n; i++ {
				if _, ok := bad[i]; ok {
					f = i
					break
				}
			}
			if f < 0 { // nothing fails any more: everything runs
				for i := next; i < n; i++ {
					expect(i)
				}
				break
			}
			for i := next; i <= f; i++ {
				expect(i)
			}
			hw := s.stopped(t)
			k := -1
			for i := f + 1; i <= fencedAt; i++ {
				if counter(i) == hw {
					k = i - f - 1
				}
			}
			if k < 0 {
				t.Fatalf("stopped at counter %d, outside the window after WQE %d (counters %d to %d)", hw, f, counter(f+1), counter(fencedAt))
			}
			for i := f + 1; i <= f+k; i++ {
				expect(i)
			}
			s.a.scq.none(time.Millisecond)
			ks = append(ks, k)
			s.a.modify(prm.MLX5_CMD_OP_SQD_RTS_QP, nil)
			next = f + k + 1
		}
		s.a.scq.none(time.Millisecond)
		for i, ri := range ridx {
			checkCQE(t, fmt.Sprintf("receive %d", i), s.b.rcq.next(), s.b.wantResp(2, ri, 32, 0, s.a.qpn, 0))
		}
		s.b.rcq.none(time.Millisecond)
		if st, hw := s.hw(t); st != StateRTS || hw != pi {
			t.Errorf("in the end: state %#x, counter %d; want RTS, %d", st, hw, pi)
		}
		if f, e := s.r.d.Faults(), s.r.d.WQEErrors(); len(f)+len(e) != 0 {
			t.Errorf("faults %q, WQE errors %q", f, e)
		}
		return ks
	}
	for _, c := range []struct {
		stop SigStop
		want []int // the window's WQEs run at each stop
	}{
		{SigStop{}, []int{0, 0}}, // F stops; WQE 2 stops again, before the SEND
		{SigStop{Policy: SigStopLatest}, []int{3}},
		{SigStop{Policy: SigStopAfter, After: 1}, []int{1, 1}},
		{SigStop{Policy: SigStopAfter, After: 2}, []int{2}}, // both failures in one stop
		{SigStop{Policy: SigStopAfter, After: 9}, []int{3}},
	} {
		t.Run(fmt.Sprintf("%v/%d", c.stop.Policy, c.stop.After), func(t *testing.T) {
			if ks := run(t, c.stop); fmt.Sprint(ks) != fmt.Sprint(c.want) {
				t.Errorf("stops after %v WQEs of the window, want %v", ks, c.want)
			}
		})
	}
	t.Run("seeded", func(t *testing.T) {
		seen := map[int]bool{}
		for seed := range uint64(12) {
			stop := SigStop{Policy: SigStopSeeded, Seed: seed}
			ks := run(t, stop)
			seen[ks[0]] = true
			if again := run(t, stop); fmt.Sprint(again) != fmt.Sprint(ks) {
				t.Errorf("seed %d: stops after %v, then %v", seed, ks, again)
			}
		}
		if len(seen) != 4 {
			t.Errorf("the first stop ran %v WQEs of the window over 12 seeds, want every count from 0 to 3", seen)
		}
	})
}

// The window's ends: a fence mode of FENCE, STRONG_ORDERING or
// SMALL_AND_FENCE ends it, the initiator small fence does not; the
// doorbell record does (SigStopLatest stops right after the failing WQE
// when nothing more was posted before it ran); a WQE of the window that
// completes in error moves the QP to ERR (no drain: it flushes the rest);
// one that waits for the responder's receive WQE (RNR) holds the stop
// back until it has run.
func TestSigStopWindowEnds(t *testing.T) {
	latest := Options{SigStop: SigStop{Policy: SigStopLatest}}
	for _, fm := range []uint8{fenceModeFence, fenceModeStrongOrdering, fenceModeSmallAndFence} {
		t.Run(fmt.Sprintf("fence mode %d", fm), func(t *testing.T) {
			s := newStopRig(t, latest)
			idx, _ := s.postAll(s.badWrite(0, 0), twqe{opcode: tOpNOP, fm: 1 << 5}, twqe{opcode: tOpNOP, fm: tSignaled},
				twqe{opcode: tOpNOP, fm: tSignaled | fm<<5}, twqe{opcode: tOpNOP, fm: tSignaled})
			s.wantSigErr(t, "the failing WRITE", s.a.scq.next(), s.bad[0])
			checkCQE(t, "the NOP after the small fence", s.a.scq.next(), s.a.wantReq(tOpNOP, idx[2], 0, 0))
			if hw := s.stopped(t); hw != idx[3] {
				t.Errorf("stopped at %d, want %d (before the fenced NOP)", hw, idx[3])
			}
			s.a.scq.none(time.Millisecond)
		})
	}
	t.Run("doorbell record", func(t *testing.T) {
		s := newStopRig(t, latest)
		w := s.a.post(s.badWrite(0, tSignaled))
		s.wantSigErr(t, "the failing WRITE", s.a.scq.next(), s.bad[0])
		checkCQE(t, "the failing WRITE", s.a.scq.next(), s.a.wantReq(tOpRDMAWrite, w, 0, 0))
		nop := s.a.post(twqe{opcode: tOpNOP, fm: tSignaled})
		if hw := s.stopped(t); hw != nop {
			t.Errorf("stopped at %d, want %d (what the doorbell record covered)", hw, nop)
		}
		s.a.scq.none(time.Millisecond)
		s.a.modify(prm.MLX5_CMD_OP_SQD_RTS_QP, nil)
		checkCQE(t, "the NOP after the resume", s.a.scq.next(), s.a.wantReq(tOpNOP, nop, 0, 0))
	})
	t.Run("an RNR wait in the window", func(t *testing.T) {
		s := newStopRigQP(t, latest, qpOpts{rnrRetry: 7, minRNRNak: 1})
		idx, _ := s.postAll(s.badWrite(0, 0), s.send(tSignaled), twqe{opcode: tOpNOP, fm: tSignaled | fenceModeFence<<5})
		s.wantSigErr(t, "the failing WRITE", s.a.scq.next(), s.bad[0])
		time.Sleep(2 * time.Millisecond)
		if st, hw := s.hw(t); st != StateRTS || hw != idx[1] {
			t.Errorf("the SEND waiting for a receive: state %#x at %d, want RTS at %d", st, hw, idx[1])
		}
		ridx := s.b.recv(tsge{64, s.dmr.LKey, addr(s.dst[12288:])})
		checkCQE(t, "the SEND", s.a.scq.next(), s.a.wantReq(tOpSend, idx[1], 0, 0))
		checkCQE(t, "its receive", s.b.rcq.next(), s.b.wantResp(2, ridx, 32, 0, s.a.qpn, 0))
		if hw := s.stopped(t); hw != idx[2] {
			t.Errorf("stopped at %d, want %d (before the fenced NOP)", hw, idx[2])
		}
	})
	t.Run("error in the window", func(t *testing.T) {
		s := newStopRig(t, latest)
		broken := s.plainWrite(tSignaled)
		broken.rkey ^= 0x100 // no such mkey: a remote access error
		idx, _ := s.postAll(s.badWrite(0, 0), broken, twqe{opcode: tOpNOP, fm: tSignaled},
			twqe{opcode: tOpNOP, fm: tSignaled | fenceModeSmallAndFence<<5})
		s.wantSigErr(t, "the failing WRITE", s.a.scq.next(), s.bad[0])
		checkCQE(t, "the broken WRITE", s.a.scq.next(), s.a.wantErr(cqeReqErr, SyndromeRemoteAccess, tOpRDMAWrite, idx[1], 0))
		for _, i := range idx[2:] {
			checkCQE(t, "flushed", s.a.scq.next(), s.a.wantErr(cqeReqErr, SyndromeWRFlush, tOpNOP, i, 0))
		}
		if st, _ := s.hw(t); st != StateERR {
			t.Errorf("state %#x, want ERR", st)
		}
		noEvent(t, s.ch, 2*time.Millisecond)
	})
}

// Options.SigStop is checked when the context opens.
func TestSigStopOptions(t *testing.T) {
	for _, s := range []SigStop{{Policy: SigStopAfter + 1}, {Policy: SigStopAfter, After: -1}} {
		if d, err := NewWithOptions("cx7", Options{SigStop: s}); err == nil {
			d.Close()
			t.Errorf("%+v accepted", s)
		}
	}
	d, err := NewWithOptions("cx7", Options{SigStop: SigStop{Policy: SigStopSeeded, Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.OpenWithOptions(Options{SigStop: SigStop{Policy: 9}}); err == nil {
		t.Error("OpenWithOptions accepted an unknown policy")
	}
}
