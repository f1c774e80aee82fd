package mlx5_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"golang.org/x/sys/unix"
)

// QP.CancelPostedSends end to end on the software ConnectX: signature
// pipelining stops the send queue after an RDMA WRITE whose memory
// fails its T10-DIF check, the fenced response behind it is canceled, and
// the QP goes back to RTS.

// cancelRig is a signature-pipelining RC QP a connected to a peer b, a's
// work completing on scq and b's on pcq, and a signature mkey over 4
// T10-DIF blocks of the rig's buffer.
type cancelRig struct {
	*evRig
	scq, pcq *mlx5.CQ
	a, b     *mlx5.QP
	mk       *mlx5.Mkey
	attr     *sig.BlockAttr
	mem      []byte // the mkey's memory: 4 blocks of 512 bytes and their 8-byte PI
	recvs    uint64 // receives posted on b
}

// Offsets in the rig's 64 KiB buffer.
const (
	cancelRespOff   = 8192    // the responses' bytes, 16 per wr_id (mod 256)
	cancelSigOff    = 12288   // the signature mkey's memory
	cancelSigBytes  = 4 * 520 // in memory
	cancelWireBytes = 4 * 512 // on the wire: an SGE through the mkey counts these
	cancelWriteOff  = 16384   // where the WRITEs land at the peer
	cancelRecvOff   = 32768   // the peer's receives, 64 bytes each (mod 256)
)

func newCancelRig(t testing.TB, opt model.Options, maxSendWR int) *cancelRig {
	t.Helper()
	r := &cancelRig{evRig: newEvRig(t, "cx7", opt)}
	r.scq, r.pcq = r.cq(t, 1024, false), r.cq(t, 256, false)
	r.a = r.qp(t, mlx5.QPOptions{SendCQ: r.scq, RecvCQ: r.scq, SigPipelining: true, MkeyConfigure: true, MaxMkeyEntries: 1, MaxSendWR: maxSendWR})
	r.b = r.qp(t, mlx5.QPOptions{SendCQ: r.pcq, RecvCQ: r.pcq, MaxRecvWR: 64, MaxRecvSGE: 1})
	if err := r.a.Connect(r.b.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	if err := r.b.Connect(r.a.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	r.attr = &sig.BlockAttr{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
		T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x1234, RefTag: 7, Flags: sig.T10DIFRefRemap}},
		CheckMask: 0xff}
	eng, err := sig.NewEngine(r.attr)
	if err != nil {
		t.Fatal(err)
	}
	r.mem = r.buf.Bytes()[cancelSigOff : cancelSigOff+cancelSigBytes]
	for i := range r.mem {
		r.mem[i] = byte(i*7 + i>>9)
	}
	if err := eng.Generate(sig.DomainMemory, r.mem); err != nil {
		t.Fatal(err)
	}
	if r.mk, err = r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true}); err != nil {
		t.Fatal(err)
	}
	post := r.a.Begin().AddMkeyConfigure(r.configure(1)).Commit()
	if post != nil {
		t.Fatal(post)
	}
	if wc := pollN(t, r.scq, 1, 5*time.Second); wc[0].WrID != 1 || wc[0].Status != mlx5.WCSuccess {
		t.Fatalf("configure: %+v", wc)
	}
	return r
}

// configure is the mkey's configure: its memory, the T10-DIF block.
func (r *cancelRig) configure(wrID uint64) *mlx5.MkeyConfigureWR {
	return &mlx5.MkeyConfigureWR{WrID: wrID, Mkey: r.mk, Flags: mlx5.SendSignaled,
		List: []mlx5.KLM{{Addr: r.mr.Addr() + cancelSigOff, ByteCount: cancelSigBytes, Mkey: r.mr.LKey()}}, Sig: r.attr}
}

// corrupt toggles a bit of block 2's data: its guard no longer matches
// (call again to restore it).
func (r *cancelRig) corrupt() { r.mem[2*520+17] ^= 0x40 }

// write is an RDMA WRITE of the mkey's 4 blocks (their memory domain)
// into the peer, signaled: the transfer checks the guards.
func (r *cancelRig) write(wrID uint64) *mlx5.SendWR {
	return &mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: r.mr.Addr() + cancelWriteOff,
		RKey: r.mr.RKey(), SGL: []mlx5.SGE{{Addr: 0, Length: cancelWireBytes, LKey: r.mk.LKey()}}}
}

// resp is a 16-byte response SEND carrying its wr_id.
func (r *cancelRig) resp(wrID uint64, flags mlx5.SendFlags) *mlx5.SendWR {
	off := cancelRespOff + int(wrID%256)*16
	binary.LittleEndian.PutUint64(r.buf.Bytes()[off:], wrID)
	return &mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpSend, Flags: flags,
		SGL: []mlx5.SGE{{Addr: r.mr.Addr() + uint64(off), Length: 16, LKey: r.mr.LKey()}}}
}

// peerRecv posts a receive on b.
func (r *cancelRig) peerRecv(t testing.TB) {
	t.Helper()
	off := cancelRecvOff + int(r.recvs%256)*64
	if err := r.b.PostRecv(r.recvs, []mlx5.SGE{{Addr: r.mr.Addr() + uint64(off), Length: 64, LKey: r.mr.LKey()}}); err != nil {
		t.Fatal(err)
	}
	r.recvs++
}

// received is the wr_id of the response receive wc (a completion of b)
// carries.
func (r *cancelRig) received(t testing.TB, wc mlx5.Completion) uint64 {
	t.Helper()
	if wc.Opcode != mlx5.WCRecv || wc.Status != mlx5.WCSuccess || wc.ByteLen != 16 {
		t.Fatalf("the peer's completion %+v, want a 16-byte receive", wc)
	}
	off := cancelRecvOff + int(wc.WrID%256)*64
	return binary.LittleEndian.Uint64(r.buf.Bytes()[off:])
}

// drained waits for a's SQ_DRAINED and checks that it is in SQD.
func (r *cancelRig) drained(t testing.TB) {
	t.Helper()
	wantQPEvent(t, nextEvent(t, r.c, 5*time.Second), mlx5.EventSQDrained, r.a)
	if at, err := r.a.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateSQD || at.SQDraining {
		t.Fatalf("after SQ_DRAINED: %v, draining %v, %v", at.State, at.SQDraining, err)
	}
}

// resume moves a from SQD back to RTS.
func (r *cancelRig) resume(t testing.TB) {
	t.Helper()
	if err := r.a.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTS, CurState: mlx5.QPStateSQD}, mlx5.QPAttrState|mlx5.QPAttrCurState); err != nil {
		t.Fatalf("SQD to RTS: %v", err)
	}
}

// ring copies a's send queue.
func ring(qp *mlx5.QP) []byte {
	b, _, _, _ := mlx5.SendQueue(qp)
	return bytes.Clone(b)
}

// sqProducer is the QP's send producer counter.
func sqProducer(qp *mlx5.QP) uint16 {
	_, pi, _, _ := mlx5.SendQueue(qp)
	return pi
}

// ctrlWord is the first word of the control segment of the WQE at
// counter c (opmod, wqe_index, opcode) and the second (qpn, ds).
func ctrlWords(sq []byte, c uint16) (uint32, uint32) {
	o := int(c) * 64 % len(sq)
	return binary.BigEndian.Uint32(sq[o:]), binary.BigEndian.Uint32(sq[o+4:])
}

// onlyNOPed checks that after differs from before in the opcode bytes of
// the WQEs at the counters given, each now NOP, and nowhere else.
func onlyNOPed(t testing.TB, before, after []byte, at ...uint16) {
	t.Helper()
	want := bytes.Clone(before)
	for _, c := range at {
		want[int(c)*64%len(want)+3] = 0 // opcode NOP; opmod was 0 already
	}
	for i := 0; i < len(want); i += 64 {
		if !bytes.Equal(after[i:i+64], want[i:i+64]) {
			t.Errorf("WQEBB %d: %x, want %x", i/64, after[i:i+64], want[i:i+64])
		}
	}
}

// The flow of the man page and of rdma-core's pipelining test: the WRITE
// through the signature mkey with a bad guard completes, the send queue
// stops (SQ_DRAINED, SQD) before the fenced SEND behind it, the mkey
// check says bad guard, the cancel turns the SEND into a NOP (one work
// request), the QP goes back to RTS, and the NOP completes once with the
// SEND's wr_id, opcode SEND and success; the peer never gets the SEND,
// and gets the bad-status response posted after. With ManualDrain the
// cancel is refused while the QP is still draining.
func TestCancelPostedSends(t *testing.T) {
	for _, manual := range []bool{false, true} {
		t.Run(fmt.Sprintf("ManualDrain=%v", manual), func(t *testing.T) {
			r := newCancelRig(t, model.Options{ManualDrain: manual}, 16)
			r.peerRecv(t)
			r.peerRecv(t)
			r.corrupt()
			post(t, r.a, r.write(2))
			at := sqProducer(r.a)
			post(t, r.a, r.resp(3, mlx5.SendSignaled|mlx5.SendFence))
			if wc := pollN(t, r.scq, 1, 5*time.Second); wc[0].WrID != 2 || wc[0].Status != mlx5.WCSuccess || wc[0].Opcode != mlx5.WCRDMAWrite {
				t.Fatalf("the write: %+v; %q", wc, r.dev.WQEErrors())
			}
			before := ring(r.a)
			if manual {
				n, err := r.a.CancelPostedSends(3)
				if n != 0 || !errors.Is(mlx5.Checked(t, err), mlx5.ErrNotDrained) || !errors.Is(err, unix.EINVAL) {
					t.Errorf("cancel while draining: %d, %v; want ErrNotDrained", n, err)
				}
				t.Log(err)
				if !bytes.Equal(ring(r.a), before) {
					t.Error("the refused cancel wrote to the send queue")
				}
				if err := r.dev.FinishDrain(r.a.QPN()); err != nil {
					t.Fatal(err)
				}
			}
			r.drained(t)
			if me, err := r.mk.Check(); err != nil || me.Type != sig.MkeyErrBadGuard {
				t.Errorf("mkey check: %+v, %v; want a bad guard", me, err)
			}
			n, err := r.a.CancelPostedSends(3)
			if n != 1 || err != nil {
				t.Fatalf("cancel: %d, %v; want 1", n, err)
			}
			onlyNOPed(t, before, ring(r.a), at)
			// The NOP keeps the SEND's size (ds 2) and flags (fence,
			// signaled).
			sq := ring(r.a)
			if w0, w1 := ctrlWords(sq, at); w0 != uint32(at)<<8 || w1&0x3f != 2 || sq[int(at)*64%len(sq)+11]&0xe8 != 0x88 {
				t.Errorf("the NOP's control segment: %08x %08x fm_ce_se %#x", w0, w1, sq[int(at)*64%len(sq)+11])
			}
			// A second cancel finds the NOP, not a SEND: nothing more.
			if n, err := r.a.CancelPostedSends(3); n != 0 || err != nil {
				t.Errorf("second cancel: %d, %v; want 0", n, err)
			}
			r.resume(t)
			if wc := pollN(t, r.scq, 1, 5*time.Second); wc[0] != (mlx5.Completion{WrID: 3, Opcode: mlx5.WCSend, Status: mlx5.WCSuccess, QPN: r.a.QPN()}) {
				t.Errorf("the canceled SEND's completion: %+v", wc[0])
			}
			pollN(t, r.pcq, 0, time.Second) // the peer got nothing
			// The bad-status response goes out instead.
			post(t, r.a, r.resp(4, mlx5.SendSignaled))
			if wc := pollN(t, r.scq, 1, 5*time.Second); wc[0].WrID != 4 || wc[0].Status != mlx5.WCSuccess {
				t.Errorf("the response: %+v", wc)
			}
			if wc := pollN(t, r.pcq, 1, 5*time.Second); r.received(t, wc[0]) != 4 {
				t.Errorf("the peer received %d, want the response 4", r.received(t, wc[0]))
			}
			if at, err := r.a.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateRTS {
				t.Errorf("after: %v, %v", at.State, err)
			}
			noEvent(t, r.c, time.Millisecond)
			if f := r.dev.Faults(); len(f) != 0 {
				t.Errorf("faults: %q", f)
			}
		})
	}
}

// What the cancel refuses, and what it finds nothing to cancel in: a QP
// not in SQD (in RTS, or in INIT with work waiting) is ErrNotDrained with
// EINVAL and nothing written; in SQD a wr_id that matches nothing, or the
// counters equal (all the work consumed, the matching wr_id among it),
// cancel 0 and write nothing; no send queue, an open batch are
// ErrInvalid; a context without DEVX is ErrNoDEVX; a closed QP, or one
// of a closed context, ErrClosed.
func TestCancelPostedSendsRefused(t *testing.T) {
	r := newCancelRig(t, model.Options{}, 16)
	wantNotDrained := func(qp *mlx5.QP, what string) {
		t.Helper()
		before := ring(qp)
		n, err := qp.CancelPostedSends(3)
		if n != 0 || !errors.Is(mlx5.Checked(t, err), mlx5.ErrNotDrained) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %d, %v; want ErrNotDrained, EINVAL", what, n, err)
		}
		if !bytes.Equal(ring(qp), before) {
			t.Errorf("%s: the refused cancel wrote to the send queue", what)
		}
	}
	wantNotDrained(r.a, "in RTS")

	// In INIT, posted work waits: still not drained.
	init := r.qp(t, mlx5.QPOptions{SendCQ: r.scq, RecvCQ: r.scq})
	toInit(t, init, rcAccess)
	post(t, init, r.resp(3, mlx5.SendSignaled))
	wantNotDrained(init, "in INIT with a SEND posted")

	// In SQD: a WRITE that stopped the queue, two SENDs behind it.
	r.peerRecv(t)
	r.peerRecv(t)
	r.corrupt()
	post(t, r.a, r.write(2))
	post(t, r.a, r.resp(3, mlx5.SendSignaled|mlx5.SendFence))
	post(t, r.a, r.resp(4, mlx5.SendSignaled))
	pollN(t, r.scq, 1, 5*time.Second)
	r.drained(t)
	before := ring(r.a)
	if n, err := r.a.CancelPostedSends(99); n != 0 || err != nil {
		t.Errorf("no match: %d, %v", n, err)
	}
	if n, err := r.a.CancelPostedSends(2); n != 0 || err != nil {
		t.Errorf("the WRITE the device consumed: %d, %v; want 0", n, err)
	}
	if !bytes.Equal(ring(r.a), before) {
		t.Error("a cancel of nothing wrote to the send queue")
	}
	b := r.a.Begin()
	if n, err := r.a.CancelPostedSends(3); n != 0 || !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) {
		t.Errorf("during a batch: %d, %v; want ErrInvalid", n, err)
	}
	b.Abort()
	r.resume(t)
	pollN(t, r.scq, 2, 5*time.Second)
	r.corrupt()

	// Counters equal: the WRITE is the last work posted. A configure
	// first re-arms the mkey, whose PSV reported WRITE 2's error and
	// ignores errors until then (docs/MODEL.md, "Signature errors").
	r.corrupt()
	if err := r.a.PostMkeyConfigure(r.configure(6)); err != nil {
		t.Fatal(err)
	}
	post(t, r.a, r.write(5))
	pollN(t, r.scq, 2, 5*time.Second)
	r.drained(t)
	before = ring(r.a)
	for _, id := range []uint64{2, 3, 4, 5} {
		if n, err := r.a.CancelPostedSends(id); n != 0 || err != nil {
			t.Errorf("counters equal, wr_id %d: %d, %v; want 0", id, n, err)
		}
	}
	if !bytes.Equal(ring(r.a), before) {
		t.Error("a cancel with the counters equal wrote to the send queue")
	}
	r.resume(t)
	r.corrupt()

	noSQ, err := r.c.CreateQP(mlx5.QPOptions{PD: r.pd, SendCQ: r.scq, RecvCQ: r.scq, MaxRecvWR: 4, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := noSQ.CancelPostedSends(1); n != 0 || !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) {
		t.Errorf("no send queue: %d, %v; want ErrInvalid", n, err)
	}

	if err := r.a.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := r.a.CancelPostedSends(3); n != 0 || !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("after Close: %d, %v; want ErrClosed", n, err)
	}
	r.c.Close()
	if n, err := init.CancelPostedSends(3); n != 0 || !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("after the context's Close: %d, %v; want ErrClosed", n, err)
	}

	// Without DEVX there is no QUERY_QP to ask.
	nd := newEvRig(t, "cx7", model.Options{NoDEVX: true})
	cq := nd.cq(t, 16, false)
	qp := nd.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
	if n, err := qp.CancelPostedSends(1); n != 0 || !errors.Is(mlx5.Checked(t, err), mlx5.ErrNoDEVX) {
		t.Errorf("without DEVX: %d, %v; want ErrNoDEVX", n, err)
	}
}

// A DEVX QP: its QUERY_QP goes to the DEVX object. drain_sigerr by a DEVX
// INIT2INIT, the drain by the model's InjectSigErr; the device's counter
// (QUERY_QP's hw_sq_wqebb_counter) stays where it stopped, after the
// NOPs it ran. Two SENDs with one wr_id (one unsignaled) and an RDMA
// WRITE are canceled behind it; the move to ERR flushes every work
// request once, the canceled ones with their own wr_id and original
// opcode, unsignaled or not.
func TestCancelPostedSendsDEVXQP(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq, err := r.c.CreateCQ(mlx5.CQOptions{Entries: 64, DEVX: true})
	if err != nil {
		t.Fatal(err)
	}
	qp := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, DEVX: true})
	toInit(t, qp, rcAccess)
	in := mailbox(prm.Init2initQpIn.Layout(), prm.MLX5_CMD_OP_INIT2INIT_QP)
	prm.Init2initQpIn.Qpn.Set(in, uint64(qp.QPN()))
	prm.Init2initQpIn.OptParamMask.Set(in, 1<<11) // MLX5_QPC_OPT_MASK_INIT2INIT_DRAIN_SIGERR
	prm.Qpc.DrainSigerr.At(prm.Init2initQpIn.Qpc).Set(in, 1)
	if err := qp.DevxModify(in, make([]byte, prm.Init2initQpOut.Layout().Size)); err != nil {
		t.Fatal(err)
	}
	r.toRTR(t, qp, qp.QPN())
	toRTS(t, qp)
	for i := range 3 {
		post(t, qp, &mlx5.SendWR{WrID: uint64(10 + i), Opcode: mlx5.OpNOP, Flags: mlx5.SendSignaled})
	}
	pollN(t, cq, 3, 5*time.Second)
	if n, err := qp.CancelPostedSends(10); n != 0 || !errors.Is(mlx5.Checked(t, err), mlx5.ErrNotDrained) {
		t.Errorf("in RTS: %d, %v", n, err)
	}
	if err := r.dev.InjectSigErr(qp.QPN()); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Microsecond) {
		at, err := qp.Query(mlx5.QPAttrState)
		if err != nil {
			t.Fatal(err)
		}
		if at.State == mlx5.QPStateSQD && !at.SQDraining {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the DEVX QP is in %v (draining %v)", at.State, at.SQDraining)
		}
	}
	send := func(id uint64, flags mlx5.SendFlags) *mlx5.SendWR {
		return &mlx5.SendWR{WrID: id, Opcode: mlx5.OpSend, Flags: flags, SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: 16, LKey: r.mr.LKey()}}}
	}
	post(t, qp, send(5, mlx5.SendSignaled|mlx5.SendFence))
	post(t, qp, r.writeWR(6, r.mr.RKey()))
	post(t, qp, send(5, 0))
	post(t, qp, &mlx5.SendWR{WrID: 7, Opcode: mlx5.OpNOP, Flags: mlx5.SendSignaled})
	out := make([]byte, prm.QueryQpOut.Layout().Size)
	qin := mailbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(qin, uint64(qp.QPN()))
	if err := qp.DevxQuery(qin, out); err != nil {
		t.Fatal(err)
	}
	if hw := prm.Qpc.HwSqWqebbCounter.At(prm.QueryQpOut.Qpc).Get(out); hw != 3 {
		t.Errorf("hw_sq_wqebb_counter %d, want 3 (the NOPs it ran)", hw)
	}
	before := ring(qp)
	if n, err := qp.CancelPostedSends(5); n != 2 || err != nil {
		t.Fatalf("cancel 5: %d, %v; want 2", n, err)
	}
	if n, err := qp.CancelPostedSends(6); n != 1 || err != nil {
		t.Fatalf("cancel 6: %d, %v; want 1", n, err)
	}
	if n, err := qp.CancelPostedSends(7); n != 0 || err != nil {
		t.Fatalf("cancel the NOP: %d, %v; want 0", n, err)
	}
	onlyNOPed(t, before, ring(qp), 3, 4, 5)
	modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState)
	wc := pollN(t, cq, 4, 5*time.Second)
	want := []mlx5.Completion{
		{WrID: 5, Opcode: mlx5.WCSend, Status: mlx5.WCWRFlushErr},
		{WrID: 6, Opcode: mlx5.WCRDMAWrite, Status: mlx5.WCWRFlushErr},
		{WrID: 5, Opcode: mlx5.WCSend, Status: mlx5.WCWRFlushErr},
		{WrID: 7, Opcode: mlx5.WCNOP, Status: mlx5.WCWRFlushErr},
	}
	for i := range want {
		want[i].QPN = qp.QPN()
		if wc[i] != want[i] {
			t.Errorf("completion %d: %+v, want %+v", i, wc[i], want[i])
		}
	}
}

// The walk in every lap of the ring and across the 16-bit counter wrap,
// with a poller goroutine as a program would have it (run it under
// -race): rounds at work positions where the stopped WRITE is the ring's
// last WQEBB and the canceled SEND its first, where the mkey configure
// before it straddles the ring's end, where the counter wraps from 65535
// to 0 between the WRITE and the SEND, where the configure straddles the
// wrap, and mid-ring after many laps. Each round cancels two SENDs with
// one wr_id (one unsignaled, fenced) around a signaled SEND with another:
// the cancel returns 2, only their opcodes change, the device's counter
// (QUERY_QP) is the one after the WRITE, and after SQD to RTS the
// completions are the other SEND's and the signaled NOP's (the SEND's
// wr_id and opcode), the unsignaled NOP freed with them: the next round
// posts a whole ring. Then libmlx5 44.0's second flaw: a WRITE that
// stops the queue with nothing behind it (counters equal, after laps), a
// cancel of the wr_ids of work the ring still holds, consumed: 0, and
// not a byte written.
func TestCancelPostedSendsRing(t *testing.T) {
	r := newCancelRig(t, model.Options{}, 8)
	_, _, _, size := mlx5.SendQueue(r.a)
	wcs := make(chan mlx5.Completion, 4*size)
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() { // the poller
		buf := make([]mlx5.Completion, 16)
		for {
			n, err := r.scq.Poll(buf)
			if err != nil {
				done <- err
				return
			}
			for _, wc := range buf[:n] {
				wcs <- wc
			}
			if n == 0 {
				select {
				case <-stop:
					done <- nil
					return
				default:
					time.Sleep(2 * time.Microsecond)
				}
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("poller: %v", err)
		}
	}()
	next := func(want ...mlx5.Completion) {
		t.Helper()
		for i, w := range want {
			w.QPN = r.a.QPN()
			select {
			case wc := <-wcs:
				if wc != w {
					t.Fatalf("completion %d: %+v, want %+v", i, wc, w)
				}
			case <-time.After(mustCome):
				t.Fatalf("completion %d: none, want %+v", i, w)
			}
		}
	}
	quiet := func() {
		t.Helper()
		select {
		case wc := <-wcs:
			t.Fatalf("an extra completion: %+v", wc)
		case <-time.After(time.Millisecond):
		}
	}
	const nopID = 0x5a5a
	abs := int(sqProducer(r.a)) // the producer counter, not wrapped
	// advance posts NOPs until the producer counter is to, a ring's worth
	// at a time, the last signaled.
	advance := func(to int) {
		t.Helper()
		for abs < to {
			k := min(to-abs, size)
			b := r.a.Begin()
			for i := range k {
				wr := &mlx5.SendWR{WrID: nopID, Opcode: mlx5.OpNOP}
				if i == k-1 {
					wr.Flags = mlx5.SendSignaled
				}
				b.Add(wr)
			}
			if err := b.Commit(); err != nil {
				t.Fatalf("%d NOPs at %d: %v", k, abs, err)
			}
			abs += k
			next(mlx5.Completion{WrID: nopID, Opcode: mlx5.WCNOP})
		}
		if got := int(sqProducer(r.a)); got != abs&0xffff {
			t.Fatalf("producer counter %d, want %d", got, abs&0xffff)
		}
	}
	postAt := func(wr *mlx5.SendWR) uint16 {
		t.Helper()
		at := sqProducer(r.a)
		post(t, r.a, wr)
		abs += int(sqProducer(r.a) - at)
		return at
	}
	configure := func(id uint64) int {
		t.Helper()
		at := sqProducer(r.a)
		if err := r.a.PostMkeyConfigure(r.configure(id)); err != nil {
			t.Fatal(err)
		}
		n := int(sqProducer(r.a) - at)
		abs += n
		return n
	}
	hwCounter := func() uint16 {
		t.Helper()
		in := mailbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
		prm.QueryQpIn.Qpn.Set(in, uint64(r.a.QPN()))
		out := make([]byte, prm.QueryQpOut.Layout().Size)
		if err := r.a.DevxQuery(in, out); err != nil {
			t.Fatal(err)
		}
		return uint16(prm.Qpc.HwSqWqebbCounter.At(prm.QueryQpOut.Qpc).Get(out))
	}
	// A configure after a signature error carries the counter update: its
	// size, measured once the mkey has had one.
	r.corrupt()
	wp := postAt(r.write(9))
	next(mlx5.Completion{WrID: 9, Opcode: mlx5.WCRDMAWrite})
	r.drained(t)
	if hw := hwCounter(); hw != wp+1 {
		t.Fatalf("hw_sq_wqebb_counter %d, want %d", hw, wp+1)
	}
	r.resume(t)
	r.corrupt()
	if me, err := r.mk.Check(); err != nil || me.Type != sig.MkeyErrBadGuard {
		t.Fatalf("mkey check: %+v, %v", me, err)
	}
	cs := configure(10)
	next(mlx5.Completion{WrID: 10, Opcode: mlx5.WCUMR})
	t.Logf("ring of %d WQEBBs; a configure takes %d", size, cs)
	if cs < 2 || size < 32 {
		t.Fatalf("a configure of %d WQEBBs in a ring of %d: the positions below need more", cs, size)
	}

	for i, p := range []struct {
		what  string
		write int // the WRITE's counter, not wrapped
	}{
		{"the WRITE the ring's last WQEBB, the SEND its first", size - 1},
		{"the configure across the ring's end", 3*size + cs/2},
		{"the counter wraps between the WRITE and the SEND", 1<<16 - 1},
		{"the configure across the counter's wrap", 2<<16 + cs/2},
		{"mid-ring after many laps", 2<<16 + 9*size + size/2},
	} {
		x, y := uint64(100+2*i), uint64(101+2*i)
		advance(p.write - cs)
		r.peerRecv(t)
		r.corrupt()
		configure(uint64(50 + i))
		w := postAt(r.write(uint64(70 + i)))
		x1 := postAt(r.resp(x, mlx5.SendFence))
		yAt := postAt(r.resp(y, mlx5.SendSignaled))
		x2 := postAt(r.resp(x, mlx5.SendSignaled))
		if int(w) != p.write&0xffff || abs != p.write+4 {
			t.Fatalf("%s: the WRITE at %d, want %d", p.what, w, p.write&0xffff)
		}
		next(mlx5.Completion{WrID: uint64(50 + i), Opcode: mlx5.WCUMR}, mlx5.Completion{WrID: uint64(70 + i), Opcode: mlx5.WCRDMAWrite})
		r.drained(t)
		if hw := hwCounter(); hw != x1 {
			t.Errorf("%s: hw_sq_wqebb_counter %d, want %d (after the WRITE)", p.what, hw, x1)
		}
		before := ring(r.a)
		if n, err := r.a.CancelPostedSends(x); n != 2 || err != nil {
			t.Fatalf("%s: cancel: %d, %v; want 2", p.what, n, err)
		}
		onlyNOPed(t, before, ring(r.a), x1, x2)
		if t.Failed() {
			t.Fatalf("%s: SENDs at %d, %d (ring %d, %d), the other at %d", p.what, x1, x2, int(x1)%size, int(x2)%size, yAt)
		}
		r.resume(t)
		next(mlx5.Completion{WrID: y, Opcode: mlx5.WCSend}, mlx5.Completion{WrID: x, Opcode: mlx5.WCSend})
		quiet()
		if wc := pollN(t, r.pcq, 1, 5*time.Second); r.received(t, wc[0]) != y {
			t.Fatalf("%s: the peer received %d, want only %d", p.what, r.received(t, wc[0]), y)
		}
		r.corrupt()
		if me, err := r.mk.Check(); err != nil || me.Type != sig.MkeyErrBadGuard {
			t.Fatalf("%s: mkey check: %+v, %v", p.what, me, err)
		}

		// Counters equal, the ring full of consumed work with these
		// wr_ids. A configure first re-arms the mkey, whose PSV reported
		// the WRITE's error and ignores errors until then (docs/MODEL.md,
		// "Signature errors").
		r.corrupt()
		configure(uint64(60 + i))
		postAt(r.write(uint64(90 + i)))
		next(mlx5.Completion{WrID: uint64(60 + i), Opcode: mlx5.WCUMR}, mlx5.Completion{WrID: uint64(90 + i), Opcode: mlx5.WCRDMAWrite})
		r.drained(t)
		before = ring(r.a)
		for _, id := range []uint64{x, y, uint64(70 + i), nopID} {
			if n, err := r.a.CancelPostedSends(id); n != 0 || err != nil {
				t.Errorf("%s, counters equal: cancel %#x: %d, %v; want 0", p.what, id, n, err)
			}
		}
		if !bytes.Equal(ring(r.a), before) {
			t.Errorf("%s: a cancel with the counters equal wrote to the ring", p.what)
		}
		r.resume(t)
		r.corrupt()
		if _, err := r.mk.Check(); err != nil {
			t.Fatal(err)
		}
		quiet()
	}
	t.Logf("%d WQEBBs posted", abs)
	if f := r.dev.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}

// Close while the poster cancels: a cancel runs whole, or fails (with
// the kernel's error for the QP being destroyed while Close is under
// way), and Close waits for one in flight; once Close returned, cancels
// return ErrClosed. Run it under -race.
func TestCancelPostedSendsClose(t *testing.T) {
	for range 20 {
		r := newCancelRig(t, model.Options{}, 16)
		r.peerRecv(t)
		r.corrupt()
		post(t, r.a, r.write(2))
		post(t, r.a, r.resp(3, mlx5.SendSignaled|mlx5.SendFence))
		pollN(t, r.scq, 1, 5*time.Second)
		r.drained(t)
		closed := make(chan error)
		go func() { closed <- r.a.Close() }()
		canceled := 0
		for {
			n, err := r.a.CancelPostedSends(3)
			if err != nil {
				break
			}
			canceled += n
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if n, err := r.a.CancelPostedSends(3); n != 0 || !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
			t.Fatalf("after Close: %d, %v", n, err)
		}
		if canceled > 1 {
			t.Fatalf("canceled %d times", canceled)
		}
	}
}
