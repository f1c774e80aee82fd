package mlx5

import "github.com/mlx5go/mlx5go/wqe"

// WCRaw is the opcode of a raw WQE's completion: IBV_WC_DRIVER2, as
// libmlx5 reports every mlx5dv_wr_raw_wqe whatever its WQE's opcode. It is
// WCNOP's value.
const WCRaw = WCNOP

// AddRaw adds one WQE that the caller encoded itself with package wqe
// (mlx5dv_wr_raw_wqe): w is its bytes, a control segment first, and wrID
// is what its completion reports, with opcode WCRaw. The driver sets the
// control segment's WQE counter and QP number and copies the rest as it
// is: opcode, ds, fm_ce_se (whether it is signaled or fenced is the
// caller's to write), imm and, on a DCI, the stream. No small fence is
// added to it, and the next work request is not fenced after it, as in
// libmlx5. A raw WQE completes exactly once like any other, in order,
// and is flushed with the others when the QP errs.
//
// A WQE that is malformed poisons the batch before anything is written
// (ErrInvalid): w shorter than a control segment, a ds (the low 6 bits of
// byte 7) that is 0, counts more 16-byte units than w holds or fewer
// WQEBBs than w spans (wqe.BuildRaw), more WQEBBs than the QP's largest
// work request (QPOptions), or a QP without a send queue. A WQE that
// fits the QP but not the room left in the send queue is ErrQueueFull.
// The device runs what w says: a WQE that is well formed but wrong (an
// opcode the QP's type does not take, a key that is not the PD's)
// completes in error, as the device reports it.
func (b *Batch) AddRaw(wrID uint64, w []byte) *Batch {
	const op = postSend
	if !b.takes(op, w == nil) {
		return b
	}
	qp := b.qp
	if len(qp.sq.slots) == 0 {
		b.fail(op, invalid(postOpNames[op], qp.name, "the QP has no send queue (MaxSendWR 0)"))
		return b
	}
	r, err := wqe.BuildRaw(qp.sq.ring, qp.sq.pi, b.room(), qp.qpn, w)
	if err != nil {
		b.fail(op, qp.wrErr(op, b.n, wrID, r.WQEBBs, err))
		return b
	}
	b.stream = 0
	if qp.sq.streams != nil {
		b.stream = uint16(w[9])<<8 | uint16(w[10]) // dci_stream_channel_id
	}
	b.added(wrID, WCRaw, 0, r.WQEBBs, r.Doorbell, false, 1)
	return b
}
