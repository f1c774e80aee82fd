package mlx5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// ErrNotDrained: the QP's send queue is not drained: the device does not
// report the QP in SQD (QUERY_QP's state 0x5), so its posted work cannot
// be canceled. It comes with unix.EINVAL, as libmlx5's
// mlx5dv_qp_cancel_posted_send_wrs returns -EINVAL.
var ErrNotDrained = errors.New("the send queue is not drained (the QP is not in SQD)")

// qpcStateSQDrained is the QP context's state once a send queue drain has
// ended: MLX5_QPC_STATE_SQDRAINED in rdma-core's mlx5_ifc.h,
// MLX5_QP_STATE_SQD in the kernel's qp.h (docs/MODEL.md, "QP states").
const qpcStateSQDrained = 0x5

// qpcStateNames names the QP context's states in errors.
var qpcStateNames = [...]string{"RST", "INIT", "RTR", "RTS", "SQER", "SQD", "ERR", "SQ_DRAINING"}

// cancelBox is the QUERY_QP mailboxes a cancel uses, kept with the QP so
// that a cancel allocates nothing of its own.
type cancelBox struct {
	in  [16]byte  // query_qp_in
	out [272]byte // query_qp_out
}

// CancelPostedSends turns the send work requests with id wrID that the
// device has not started into NOPs, and returns how many it turned
// (mlx5dv_qp_cancel_posted_send_wrs). It is for signature pipelining:
// after EventSQDrained, poll the QP's CQ until it is empty, check the
// mkeys, cancel the work that must not run (the fenced response behind
// the failed transfer), then move the QP back to RTS with Modify.
//
// The send queue must be drained: the device must report the QP in SQD
// (a DEVX QUERY_QP, as libmlx5 sends it); otherwise nothing is written and
// the error wraps ErrNotDrained and EINVAL. The query reads the device's
// send counter (hw_sq_wqebb_counter), and the work requests from there to
// the producer counter are walked; each one with id wrID has its first
// WQE's opcode byte rewritten to NOP and its opmod cleared, as libmlx5
// does: its size, fence and completion flags stay, so it completes as
// the original would have: if it was signaled, with a completion that
// carries its wr_id, its original opcode (WCSend, WCRDMAWrite, ...) and
// WCSuccess once the QP is back in RTS, or WCWRFlushErr if the QP goes to
// ERR instead; if not, silently, with the next signaled one. An mkey
// configure is canceled by its UMR (the mkey keeps its layout and
// signature block, but the driver records the configure's as it did at
// the post: configure it again); its SET_PSVs still run and complete it.
// A work request that is already a NOP (a NOP, or canceled before) is
// not counted; one the device has started (a multi-WQE configure it
// stopped inside) is left alone.
//
// docs/MLX5.md ("Cancel") says where this differs from libmlx5 44.0.
//
// Like a post, it belongs to the QP's poster: call it from the goroutine
// that posts, not during a batch. It needs DEVX (ErrNoDEVX) and returns
// ErrClosed after Close (Close waits for a cancel in flight before it
// destroys the QP). It works on verbs and DEVX QPs and
// does not require QPOptions.SigPipelining (libmlx5 does not either): the
// query decides, and on mlx5_ib only a signature-pipelining QP stops in
// SQD.
func (qp *QP) CancelPostedSends(wrID uint64) (int, error) {
	const op = "cancel posted sends"
	if err := qp.usable(op); err != nil {
		return 0, err
	}
	if qp.g.closed() {
		return 0, opErr(op, qp.name, ErrClosed)
	}
	if !qp.c.devx {
		return 0, &Error{Op: op, Obj: qp.name, Err: &reasonError{msg: "the cancel reads the QP's state with a DEVX QUERY_QP", errs: []error{ErrNoDEVX}}}
	}
	if len(qp.sq.slots) == 0 {
		return 0, invalid(op, qp.name, "the QP has no send queue")
	}
	if !qp.g.enter() {
		return 0, opErr(op, qp.name, ErrClosed)
	}
	defer qp.g.exit()
	if qp.batch.open {
		return 0, invalid(op, qp.name, "a batch is open (Commit or Abort it first)")
	}
	hw, err := qp.drainedAt(op)
	if err != nil {
		if qp.g.closed() {
			return 0, opErr(op, qp.name, ErrClosed)
		}
		return 0, err
	}
	return qp.cancelFrom(op, hw, wrID)
}

// drainedAt queries the QP (QUERY_QP, through DEVX on the verbs QP's
// handle or the DEVX QP) and returns the device's send counter if the
// send queue is drained.
func (qp *QP) drainedAt(op string) (uint16, error) {
	b := &qp.cancel
	clear(b.in[:])
	clear(b.out[:])
	prm.QueryQpIn.Opcode.Set(b.in[:], prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(b.in[:], uint64(qp.qpn))
	if err := qp.c.queryObj(op, qp.name, devxHandle(qp.obj, qp.handle), b.in[:], b.out[:]); err != nil {
		return 0, err // the kernel's error names the call, the firmware's the command
	}
	qpc := prm.QueryQpOut.Qpc
	if st := prm.Qpc.State.At(qpc).Get(b.out[:]); st != qpcStateSQDrained {
		name := "unknown"
		if st < uint64(len(qpcStateNames)) {
			name = qpcStateNames[st]
		}
		msg := fmt.Sprintf("QUERY_QP says state %#x (%s), not %#x (SQD, drained)", st, name, qpcStateSQDrained)
		if name == "SQ_DRAINING" {
			msg += ": the drain has not ended; wait for EventSQDrained"
		}
		return 0, &Error{Op: op, Obj: qp.name, Err: &reasonError{msg: msg, errs: []error{ErrNotDrained, unix.EINVAL}}}
	}
	return uint16(prm.Qpc.HwSqWqebbCounter.At(qpc).Get(b.out[:])), nil
}

// cancelFrom turns the work requests with id wrID from the device's
// counter hw to the producer counter into NOPs. The walk goes by the
// per-WQEBB records of work requests the driver posted, from the first
// one the device has not started, each to the next by its end (sqSlot.next),
// so it visits each unconsumed work request once, in any lap of the ring
// and across the 16-bit wrap, and nothing the device already consumed.
func (qp *QP) cancelFrom(op string, hw uint16, wrID uint64) (int, error) {
	sq := &qp.sq
	mask := len(sq.slots) - 1
	pi, tail := sq.pi, uint16(sq.tail.Load())
	// The device consumes in order and completes only what it consumed,
	// so its counter lies between the poller's consumer counter and the
	// producer counter.
	window := pi - tail
	if hw-tail > window {
		return 0, &Error{Op: op, Obj: qp.name, Err: fmt.Errorf("the device's send counter %d is outside the posted work (%d to %d): %w", hw, tail, pi, unix.EIO)}
	}
	w := hw
	if w != tail && w != pi && sq.slots[int(w-1)&mask].next != w {
		// The device stopped inside a work request of several WQEs: it
		// started it, so it is not canceled.
		w = sq.slots[int(w)&mask].next
	}
	n := 0
	for w != pi {
		s := &sq.slots[int(w)&mask]
		if s.next-w == 0 || s.next-tail > window {
			return n, &Error{Op: op, Obj: qp.name, Err: fmt.Errorf("the send queue's record at counter %d is inconsistent (next %d, posted %d to %d): %w", w, s.next, tail, pi, unix.EIO)}
		}
		if s.wrID == wrID && nopWQE(sq.ring.Slot(w)) {
			n++
		}
		w = s.next
	}
	return n, nil
}

// nopWQE turns the WQE whose control segment starts ctrl into a NOP as
// libmlx5's mlx5dv_qp_cancel_wr does: opmod and opcode (the first and last
// bytes of opmod_idx_opcode) become 0, the WQE index and everything else
// stay. It reports false for a WQE that is a NOP already. The word is
// written with one 32-bit store: the device, stopped in SQD, reads it
// after the move back to RTS, a command the kernel rings after a write
// barrier (docs/MLX5.md, "Cancel").
func nopWQE(ctrl []byte) bool {
	v := binary.BigEndian.Uint32(ctrl[:4])
	if uint8(v) == wqe.OpcodeNOP {
		return false
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v&0x00ffff00|uint32(wqe.OpcodeNOP))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&ctrl[0])), binary.NativeEndian.Uint32(b[:]))
	return true
}
