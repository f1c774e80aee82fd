package model

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/mlx5go/mlx5go/prm"
)

// The send queue: what the HCA does after a doorbell. Everything here
// runs under the HCA's lock.

// Send WQE opcodes (MLX5_OPCODE_*, include/linux/mlx5/device.h).
const (
	opNOP          = 0x00
	opSendInval    = 0x01
	opRDMAWrite    = 0x08
	opRDMAWriteImm = 0x09
	opSend         = 0x0a
	opSendImm      = 0x0b
	opRDMARead     = 0x10
	opSetPSV       = 0x20
	opUMR          = 0x25
)

// Control segment bits (mlx5dv.h) and data segment constants (qp.h,
// device.h).
const (
	ctrlCQUpdate  = 2 << 2    // MLX5_WQE_CTRL_CQ_UPDATE
	ctrlSolicited = 1 << 1    // MLX5_WQE_CTRL_SOLICITED
	inlineSeg     = 1 << 31   // MLX5_INLINE_SEG
	invalidLKey   = 0x100     // MLX5_INVALID_LKEY: ends a receive WQE's list
	dataSegZero   = 1 << 31   // a data segment's byte_count of 0 means 2 GiB (libmlx5's mlx5_wr_memcpy)
	ibMaxMsg      = 1 << 31   // the IB spec's longest message
	ctrlSegSize   = 16        // struct mlx5_wqe_ctrl_seg
	raddrSegSize  = 16        // struct mlx5_wqe_raddr_seg
	maxWQEBytes   = 64 * 0x10 // ds is 6 bits: at most 63 octwords
)

// sendWQE is one send WQE as read from the ring.
type sendWQE struct {
	index  uint16 // the ctrl segment's wqe_index
	opcode uint8
	qpn    uint32
	ds     int
	fmCeSe uint8
	imm    uint32
	bbs    uint16 // WQEBBs it takes: ceil(ds*16/64), at least 1
	b      []byte // its ds*16 bytes, contiguous
}

// dbrWord reads word i of a doorbell record (big-endian): 0 is the
// receive counter, 1 the send counter (MLX5_RCV_DBR, MLX5_SND_DBR).
func dbrWord(dbr []byte, i int) uint32 { return load32(dbr[4*i : 4*i+4]) }

// readWQE reads the WQE at the send queue's consumer counter, avail
// WQEBBs of which the doorbell record covers; ok is false when it cannot
// be read yet (a fault says why).
func (h *hca) readWQE(q *qpObj, avail uint16) (*sendWQE, bool) { return h.readWQEAt(q, q.sqCI, avail) }

// wqeHeader reads the control segment of the WQE at counter c of q's
// send queue (the WQE's bytes are left for readWQEAt).
func wqeHeader(q *qpObj, c uint16) *sendWQE {
	first := q.sqSlot(c)
	w := &sendWQE{}
	d0, d1 := binary.BigEndian.Uint32(first), binary.BigEndian.Uint32(first[4:])
	w.opcode, w.index = uint8(d0), uint16(d0>>8)
	w.qpn, w.ds = d1>>8, int(d1&0x3f)
	w.fmCeSe, w.imm = first[11], binary.BigEndian.Uint32(first[12:])
	w.bbs = uint16((w.ds*16 + sendWQEBB - 1) / sendWQEBB)
	if w.bbs == 0 {
		w.bbs = 1
	}
	return w
}

// sqSlot is the WQEBB of q's send queue at counter c.
func (q *qpObj) sqSlot(c uint16) []byte {
	o := q.sq.off + int(c)&(q.sq.entries-1)*sendWQEBB
	return q.wq[o : o+sendWQEBB]
}

// fits checks that WQE w at counter c lies within the avail WQEBBs the
// doorbell record covers and within the ring; a fault says why not.
func (h *hca) fits(q *qpObj, c uint16, w *sendWQE, avail uint16) bool {
	if w.bbs > avail {
		h.fault(q.ctx, "QP %#x: the WQE at counter %d takes %d WQEBBs, the doorbell record covers %d", q.qpn, c, w.bbs, avail)
		return false
	}
	if int(w.bbs) > q.sq.entries {
		h.fault(q.ctx, "QP %#x: the WQE at counter %d takes %d WQEBBs, the ring has %d", q.qpn, c, w.bbs, q.sq.entries)
		return false
	}
	return true
}

// checkIndex faults when WQE w, read at counter c, names another counter
// or another QP in its control segment.
func (h *hca) checkIndex(q *qpObj, c uint16, w *sendWQE) {
	if w.index != c {
		h.fault(q.ctx, "QP %#x: the WQE at counter %d has wqe_index %d", q.qpn, c, w.index)
	}
	if w.qpn != q.qpn {
		h.fault(q.ctx, "QP %#x: the WQE at counter %d names QP %#x", q.qpn, c, w.qpn)
	}
}

// readWQEAt reads the WQE at counter c of q's send queue, avail WQEBBs
// of which the doorbell record covers; ok is false when it cannot be read
// yet (a fault says why).
func (h *hca) readWQEAt(q *qpObj, c, avail uint16) (*sendWQE, bool) {
	w := wqeHeader(q, c)
	if !h.fits(q, c, w, avail) {
		return nil, false
	}
	buf := make([]byte, 0, int(w.bbs)*sendWQEBB)
	for i := range w.bbs {
		buf = append(buf, q.sqSlot(c+i)...)
	}
	w.b = buf[:w.ds*16]
	h.checkIndex(q, c, w)
	return w, true
}

// result is what running one WQE did.
type result struct {
	fail    *wqeFail   // an error completion (nil: success)
	byteCnt uint32     // the requester CQE's byte_cnt
	sigs    []sigEvent // signature errors the requester's checks found
	rnr     bool       // the responder had no receive WQE: retry later
	// selfErr: the QP is its own responder and the responder side failed;
	// it goes to ERR once the WQE has completed.
	selfErr bool
	// keepQP: the error completion is a DCI stream error (dc.go): the QP
	// stays in RTS and goes on with its other WQEs.
	keepQP bool
}

// with returns r with the requester's signature errors.
func (r result) with(sigs []sigEvent) result {
	r.sigs = sigs
	return r
}

// runSQ runs the WQEs the doorbell record's send counter says are posted,
// from the hardware's consumer counter, while the QP may: in RTS (in ERR
// it flushes them; in any other state they wait).
func (h *hca) runSQ(q *qpObj) {
	if q.wq == nil || q.dbr == nil || q.sq.entries == 0 {
		h.fault(q.ctx, "QP %#x: a doorbell for a QP without a send queue in UMEMs", q.qpn)
		return
	}
	if streamed(q) {
		h.runStreams(q) // dcistreams.go: stream channels run apart
		return
	}
	for {
		pi := uint16(dbrWord(q.dbr, 1))
		avail := pi - q.sqCI
		if avail == 0 {
			if q.stopIn != 0 {
				h.drainStop(q) // the window was counted in what is posted: not reached
			}
			return
		}
		if int(avail) > q.sq.entries {
			h.fault(q.ctx, "QP %#x: the send counter %d is %d WQEBBs past the hardware's %d, the ring has %d", q.qpn, pi, avail, q.sqCI, q.sq.entries)
			return
		}
		switch q.state() {
		case StateRTS:
		case StateERR:
			h.flush(q)
			return
		default:
			return
		}
		if q.rnr != nil && time.Now().Before(q.rnr.next) {
			return // an RNR wait
		}
		w, ok := h.readWQE(q, avail)
		if !ok {
			return
		}
		r := h.execWQE(q, w)
		if r.rnr {
			if h.waitRNR(q, w) {
				continue // the retries ran out on a DCI stream: the QP goes on
			}
			return
		}
		h.clearRNR(q)
		q.sqCI += w.bbs
		prm.Qpc.HwSqWqebbCounter.Set(q.qpc, uint64(q.sqCI))
		for _, s := range r.sigs {
			h.sigErrCQE(q, q.sendCQ(), s.key, s.err)
		}
		if r.fail != nil {
			h.errCQE(q, q.sendCQ(), cqeReqErr, r.fail.syndrome, w.opcode, w.index)
			msg := fmt.Sprintf("QP %#x WQE %d (opcode %#x): %s", q.qpn, w.index, w.opcode, r.fail.why)
			if r.fail.syndrome != SyndromeWRFlush { // a DCI stream's flush is no error of its own
				h.record(&h.wqeErrors, q.ctx, msg)
			}
			if r.fail.unmodelled {
				h.record(&h.faults, q.ctx, msg)
			}
			if r.keepQP {
				continue
			}
			h.toErr(q)
			return
		}
		if w.fmCeSe&ctrlCQUpdate != 0 {
			h.reqCQE(q, w, r.byteCnt)
		}
		if r.selfErr {
			h.toErr(q)
			return
		}
		if q.stopIn != 0 {
			// A WQE of the window after a signature error ran (its own
			// signature errors reported, the window unchanged).
			if q.stopIn--; q.stopIn == 0 {
				h.drainStop(q)
				return
			}
			continue
		}
		if len(r.sigs) > 0 && prm.Qpc.DrainSigerr.Get(q.qpc) != 0 {
			// Signature pipelining: the send queue stops after the WQE
			// whose check failed, or after some of the unfenced WQEs
			// behind it (Options.SigStop), drains, and waits for SQD_RTS.
			if q.stopIn = h.sigStopAfter(q); q.stopIn == 0 {
				h.drainStop(q)
				return
			}
		}
	}
}

// execWQE runs one WQE.
func (h *hca) execWQE(q *qpObj, w *sendWQE) result {
	if w.ds == 0 {
		return result{fail: qpOpErr("ds 0: not even a control segment")}
	}
	if isDCI(q) {
		return h.execDCI(q, w) // dc.go: stream channels
	}
	switch w.opcode {
	case opNOP:
		return result{}
	case opUMR:
		return result{fail: h.execUMR(q, w)}
	case opSetPSV:
		return result{fail: h.execSetPSV(q, w)}
	case opSend, opSendImm, opSendInval, opRDMAWrite, opRDMAWriteImm, opRDMARead:
	default:
		return result{fail: unmodelled("opcode %#x is not modelled", w.opcode)}
	}
	switch st := prm.Qpc.St.Get(q.qpc); st {
	case stRC:
	case stUC:
		// UC has no RDMA READ and no SEND with invalidate (the IB spec's
		// opcodes for UC; rxe's rxe_opcode table).
		if w.opcode == opRDMARead || w.opcode == opSendInval {
			return result{fail: qpOpErr("opcode %#x on a UC QP", w.opcode)}
		}
	case stUD:
		if w.opcode != opSend && w.opcode != opSendImm {
			return result{fail: qpOpErr("opcode %#x on a UD QP", w.opcode)}
		}
		return h.udSend(q, w)
	default:
		return result{fail: unmodelled("the model runs data WQEs on RC, UC, UD and DCI QPs only (st %#x)", st)}
	}
	switch w.opcode {
	case opRDMARead:
		return h.rdmaRead(q, w)
	case opRDMAWrite, opRDMAWriteImm:
		return h.rdmaWrite(q, w)
	}
	return h.send(q, w)
}

// sge is one data segment (struct mlx5_wqe_data_seg).
type sge struct {
	n    uint64
	key  uint32
	addr uint64
}

// dataSegs reads the data part of a WQE: data segments, or one inline
// segment (byte_count with MLX5_INLINE_SEG) whose bytes follow. An empty
// inline segment is not modelled: libmlx5 never writes one (it leaves the
// segment out), and what a device makes of it is not public; a driver
// that writes an SGE of 2^31 bytes as a data segment writes one.
func dataSegs(b []byte, inlineOK bool) (sges []sge, inline []byte, f *wqeFail) {
	if len(b) >= 4 && binary.BigEndian.Uint32(b)&inlineSeg != 0 {
		if !inlineOK {
			return nil, nil, qpOpErr("an inline segment where data segments must be")
		}
		n := int(binary.BigEndian.Uint32(b) &^ inlineSeg)
		if n == 0 {
			return nil, nil, unmodelled("an empty inline segment (byte_count %#x: an SGE of 2^31 bytes written as a data segment?)", inlineSeg)
		}
		if 4+n > len(b) {
			return nil, nil, qpOpErr("inline data of %d bytes past the WQE's end", n)
		}
		return nil, b[4 : 4+n], nil
	}
	if len(b)%16 != 0 {
		return nil, nil, qpOpErr("data segments of %d bytes", len(b))
	}
	for ; len(b) > 0; b = b[16:] {
		n := uint64(binary.BigEndian.Uint32(b))
		if n == 0 {
			n = dataSegZero
		}
		sges = append(sges, sge{n, binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint64(b[8:])})
	}
	return sges, nil, nil
}

// msgLen checks the length of q's message, data segments or inline bytes,
// against the QP's maximum, 2^qpc.log_msg_max (mlx5_ib sets it from
// log_max_msg with the path MTU; left 0, the IB spec's 2^31), before any
// byte is read: longer is a local length error, the IB spec's Local
// Length Error for a message over the port's maximum message size.
func msgLen(q *qpObj, sges []sge, inline []byte) *wqeFail {
	n := uint64(len(inline))
	for _, s := range sges {
		n += s.n
	}
	limit := uint64(ibMaxMsg)
	if l := prm.Qpc.LogMsgMax.Get(q.qpc); l != 0 {
		limit = min(limit, 1<<l)
	}
	if n > limit {
		return &wqeFail{syndrome: SyndromeLocalLength, why: fmt.Sprintf("a message of %d bytes, the QP's maximum is %d (log_msg_max)", n, limit)}
	}
	return nil
}

// gather builds the message of a send or RDMA WRITE: the inline bytes,
// or the bytes behind each data segment's lkey as they go on the wire.
func (h *hca) gather(q *qpObj, sges []sge, inline []byte) ([]byte, []sigEvent, *wqeFail) {
	if inline != nil {
		return append([]byte(nil), inline...), nil, nil
	}
	var msg []byte
	var sigs []sigEvent
	for _, s := range sges {
		b, ev, e := h.read(s.key, q.pdn, s.addr, s.n, accLocalRead)
		if e != nil {
			return nil, nil, protErr("lkey: %s", e.why)
		}
		if ev != nil {
			sigs = append(sigs, *ev)
		}
		msg = append(msg, b...)
	}
	return msg, sigs, nil
}

// scatter writes msg into the buffers of sges, in order, as local writes
// of a QP of PD pdn; each takes up to its length of the message (wire
// bytes, through a signature mkey too). A message longer than the buffers
// is a length error (long is true); a key that does not resolve is a
// protection error.
func (h *hca) scatter(pdn uint32, sges []sge, msg []byte) (sigs []sigEvent, long bool, e *keyErr) {
	for _, s := range sges {
		if len(msg) == 0 {
			break
		}
		w := min(s.n, uint64(len(msg)))
		ev, e := h.write(s.key, pdn, s.addr, msg[:w], accLocalWrite)
		if e != nil {
			return sigs, false, e
		}
		if ev != nil {
			sigs = append(sigs, *ev)
		}
		msg = msg[w:]
	}
	return sigs, len(msg) > 0, nil
}

// responder finds the QP at the other end of RC or UC QP q: the QP of
// this HCA numbered qpc.remote_qpn, of q's service type, that can receive
// (RTR, RTS, SQER, and both halves of SQD: a drain stops the send queue
// only) and whose remote_qpn is q. The address path is not read.
func (h *hca) responder(q *qpObj) (*qpObj, *wqeFail) {
	n := uint32(prm.Qpc.RemoteQpn.Get(q.qpc))
	st := prm.Qpc.St.Get(q.qpc)
	r, ok := h.qps[n]
	if !ok || r.dct || prm.Qpc.St.Get(r.qpc) != st || uint32(prm.Qpc.RemoteQpn.Get(r.qpc)) != q.qpn {
		return nil, &wqeFail{syndrome: SyndromeTransportRetry, why: fmt.Sprintf("no QP %#x of the same type pointing back at the QP: no response, transport retries exhausted", n)}
	}
	if !receiving(r) {
		return nil, &wqeFail{syndrome: SyndromeTransportRetry, why: fmt.Sprintf("the responder QP %#x is in state %#x: no response, transport retries exhausted", n, r.state())}
	}
	return r, nil
}

// receiving reports whether QP r takes messages: RTR and every later
// state but ERR (IB's responder is ready from RTR on; SQER and SQD stop
// the send queue only).
func receiving(r *qpObj) bool {
	switch r.state() {
	case StateRTR, StateRTS, StateSQER, StateSQDraining, StateSQD:
		return true
	}
	return false
}

// unreliable reports whether q is a UC QP: no acknowledgements, so what
// goes wrong at the responder (no responder, no receive WQE, a message
// too long, a bad rkey, no remote write) loses the message and the
// requester completes as if it had arrived (rxe_resp.c's class D and E
// errors for UC).
func unreliable(q *qpObj) bool { return prm.Qpc.St.Get(q.qpc) == stUC }

// arrived is what the responder does when a message reaches it: the
// first one in RTR raises COMM_EST (the IB spec's Communication
// Established event; mlx5_ib_qp_event's IB_EVENT_COMM_EST), once per RTR.
func (h *hca) arrived(r *qpObj) {
	if r.state() == StateRTR && !r.commEst {
		r.commEst = true
		h.qpEvent(evCommEst, r)
	}
}

// rwqe is a receive WQE the responder found: its data segments and the
// counter its CQE carries (the RQ's WQE counter, or the SRQ WQE's index).
type rwqe struct {
	sges    []sge
	counter uint16
	srq     *srqObj // the SRQ it came from; nil for the QP's own RQ
	srqn    uint32
}

// recvWQE reads the responder's next receive WQE, from its SRQ if it has
// one; ok is false when there is none (by the doorbell record's receive
// counter).
func (h *hca) recvWQE(r *qpObj) (*rwqe, bool) {
	if r.srq != nil {
		sges, idx, ok := h.srqRecvWQE(r.srq)
		if !ok {
			return nil, false
		}
		return &rwqe{sges: sges, counter: idx, srq: r.srq, srqn: uint32(prm.Qpc.SrqnRmpnXrqn.Get(r.qpc))}, true
	}
	if r.wq == nil || r.dbr == nil || r.rq.entries == 0 {
		return nil, false
	}
	pi := uint16(dbrWord(r.dbr, 0))
	if pi == r.rqCI {
		return nil, false
	}
	if int(pi-r.rqCI) > r.rq.entries {
		h.fault(r.ctx, "QP %#x: the receive counter %d is %d WQEs past the hardware's %d, the ring has %d", r.qpn, pi, pi-r.rqCI, r.rqCI, r.rq.entries)
		return nil, false
	}
	o := r.rq.off + int(r.rqCI)&(r.rq.entries-1)*r.rq.stride
	sges, bad := readSGEs(r.wq[o : o+r.rq.stride])
	if bad != 0 {
		h.fault(r.ctx, "QP %#x receive WQE %d: a data segment's byte_count %#x has bit 31 (MLX5_INLINE_SEG) set", r.qpn, r.rqCI, bad)
	}
	return &rwqe{sges: sges, counter: r.rqCI}, true
}

// consume takes receive WQE w of r: the SRQ's head moves on, or the RQ's
// consumer counter. It comes before the WQE's CQE: once the CQE is
// written the driver may give the WQE back, and an SRQ WQE given back is
// relinked at the free list's tail (libmlx5's mlx5_free_srq_wqe writes the
// tail's next_wqe_index), so the device must have followed the WQE's
// next_wqe_index already.
func (h *hca) consume(r *qpObj, w *rwqe) {
	if w.srq != nil {
		h.takeSRQ(w.srq, w.srqn)
		return
	}
	r.rqCI++
	prm.Qpc.HwRqCounter.Set(r.qpc, uint64(r.rqCI))
}

// respFail is an error responder r detected in a request of q: r goes to
// ERR (after completing the receive WQE w it consumed, if any, with
// respSyndrome; with event, raising that affiliated error, for errors no
// receive WQE reports) and q completes with fail. A QP that is its own
// responder is flushed by its requester side, after the failed WQE's
// completion.
func (h *hca) respFail(q, r *qpObj, w *rwqe, respSyndrome uint8, fail *wqeFail, event uint8) result {
	if w != nil {
		h.consume(r, w)
		h.errCQE(r, r.recvCQ(), cqeRespErr, respSyndrome, 0, w.counter)
	}
	if event != 0 {
		h.qpEvent(event, r)
	}
	if r != q {
		h.toErr(r)
	}
	if fail == nil || unreliable(q) {
		return result{selfErr: r == q}
	}
	return result{fail: fail}
}

// send runs SEND, SEND_IMM and SEND_INVAL: the message goes into the
// responder's next receive WQE.
func (h *hca) send(q *qpObj, w *sendWQE) result {
	sges, inline, f := dataSegs(w.b[ctrlSegSize:], true)
	if f == nil {
		f = msgLen(q, sges, inline)
	}
	if f != nil {
		return result{fail: f}
	}
	msg, sigs, f := h.gather(q, sges, inline)
	if f != nil {
		return result{fail: f}
	}
	r, f := h.responder(q)
	if f != nil {
		if unreliable(q) {
			return result{sigs: sigs}
		}
		return result{fail: f}
	}
	h.arrived(r)
	rw, ok := h.recvWQE(r)
	if !ok {
		if unreliable(q) {
			return result{sigs: sigs}
		}
		return result{rnr: true, sigs: sigs}
	}
	rsigs, long, e := h.scatter(r.pdn, rw.sges, msg)
	for _, s := range rsigs {
		h.sigErrCQE(r, r.recvCQ(), s.key, s.err)
	}
	switch {
	case e != nil:
		return h.respFail(q, r, rw, SyndromeLocalProt, &wqeFail{syndrome: SyndromeRemoteOp, why: "the responder's receive WQE: " + e.why}, 0).with(sigs)
	case long && unreliable(q):
		return result{sigs: sigs} // class D: dropped, the WQE stays
	case long:
		return h.respFail(q, r, rw, SyndromeLocalLength, &wqeFail{syndrome: SyndromeRemoteInvalReq, why: "the message is longer than the responder's receive WQE"}, 0)
	}
	op, imm := uint8(cqeRespSend), uint32(0)
	switch w.opcode {
	case opSendImm:
		op, imm = cqeRespSendIm, w.imm
	case opSendInval:
		op, imm = cqeRespSendIn, w.imm
		if why := h.invalidate(r, w.imm); why != "" {
			// The IB transport's class J, as Linux's rxe handles it
			// (rxe_resp.c, RESPST_ERR_INVALIDATE_RKEY): the message was
			// received and is acknowledged, so the requester completes
			// successfully; the receive WQE completes in error (remote
			// invalid request) and the responder goes to ERR.
			h.record(&h.wqeErrors, r.ctx, fmt.Sprintf("QP %#x receive WQE %d: %s", r.qpn, rw.counter, why))
			return h.respFail(q, r, rw, SyndromeRemoteInvalReq, nil, 0).with(sigs)
		}
	}
	h.consume(r, rw)
	h.respCQE(r, op, rw.counter, uint32(len(msg)), imm, q.qpn, 0, w.fmCeSe&ctrlSolicited != 0)
	return result{sigs: sigs}
}

// invalidate is SEND_INVAL's remote invalidation of key at responder r:
// the mkey the key names (its index and its variant byte) must be in r's
// PD and allow remote invalidation (mkc.en_rinval); it becomes free. Its
// state is not checked: invalidating a free mkey succeeds, as rxe's
// rxe_invalidate_mr and rdmavt's rvt_invalidate_rkey allow.
func (h *hca) invalidate(r *qpObj, key uint32) string {
	mk, ok := h.mkeys[key>>8]
	switch {
	case !ok || uint8(key) != uint8(prm.Mkc.Mkey70.Get(mk.mkc)):
		return fmt.Sprintf("remote invalidation of key %#x: no such mkey", key)
	case mk.pdn != r.pdn:
		return fmt.Sprintf("remote invalidation of key %#x: the mkey is in PD %#x, the QP in PD %#x", key, mk.pdn, r.pdn)
	case prm.Mkc.EnRinval.Get(mk.mkc) == 0:
		return fmt.Sprintf("remote invalidation of key %#x: the mkey does not allow it (en_rinval)", key)
	}
	prm.Mkc.Free.Set(mk.mkc, 1)
	return ""
}

// rdmaWrite runs RDMA_WRITE and RDMA_WRITE_IMM.
func (h *hca) rdmaWrite(q *qpObj, w *sendWQE) result {
	if len(w.b) < ctrlSegSize+raddrSegSize {
		return result{fail: qpOpErr("RDMA WRITE without a remote address segment")}
	}
	raddr, rkey := binary.BigEndian.Uint64(w.b[16:]), binary.BigEndian.Uint32(w.b[24:])
	sges, inline, f := dataSegs(w.b[ctrlSegSize+raddrSegSize:], true)
	if f == nil {
		f = msgLen(q, sges, inline)
	}
	if f != nil {
		return result{fail: f}
	}
	msg, sigs, f := h.gather(q, sges, inline)
	if f != nil {
		return result{fail: f}
	}
	r, f := h.responder(q)
	if f != nil {
		if unreliable(q) {
			return result{sigs: sigs}
		}
		return result{fail: f}
	}
	h.arrived(r)
	if prm.Qpc.Rwe.Get(r.qpc) == 0 {
		if unreliable(q) {
			return result{sigs: sigs} // rxe's check_op_valid for UC: dropped
		}
		return h.respFail(q, r, nil, 0, &wqeFail{syndrome: SyndromeRemoteInvalReq, why: "the responder QP does not allow RDMA WRITE (qpc.rwe)"}, evWQInvalReqError)
	}
	var rw *rwqe
	if w.opcode == opRDMAWriteImm {
		var ok bool
		if rw, ok = h.recvWQE(r); !ok {
			if unreliable(q) {
				return result{sigs: sigs}
			}
			return result{rnr: true, sigs: sigs}
		}
	}
	if len(msg) > 0 { // a zero-length RDMA WRITE checks no rkey
		ev, e := h.write(rkey, r.pdn, raddr, msg, accRemoteWrite)
		if e != nil {
			if unreliable(q) {
				return result{sigs: sigs} // class E: dropped
			}
			return h.respFail(q, r, nil, 0, &wqeFail{syndrome: SyndromeRemoteAccess, why: "rkey: " + e.why}, evWQAccessError)
		}
		if ev != nil {
			h.sigErrCQE(r, r.recvCQ(), ev.key, ev.err)
		}
	}
	if rw != nil {
		h.consume(r, rw)
		h.respCQE(r, cqeRespWRImm, rw.counter, uint32(len(msg)), w.imm, q.qpn, 0, w.fmCeSe&ctrlSolicited != 0)
	}
	return result{sigs: sigs}
}

// rdmaRead runs RDMA_READ: the local data segments say how much to read
// (their lengths, wire bytes through a signature mkey too) and where it
// goes.
func (h *hca) rdmaRead(q *qpObj, w *sendWQE) result {
	if len(w.b) < ctrlSegSize+raddrSegSize {
		return result{fail: qpOpErr("RDMA READ without a remote address segment")}
	}
	raddr, rkey := binary.BigEndian.Uint64(w.b[16:]), binary.BigEndian.Uint32(w.b[24:])
	sges, _, f := dataSegs(w.b[ctrlSegSize+raddrSegSize:], false)
	if f == nil {
		f = msgLen(q, sges, nil)
	}
	if f != nil {
		return result{fail: f}
	}
	var total uint64
	for _, s := range sges {
		if e := h.reach(s.key, q.pdn, s.addr, s.n, accLocalWrite); e != nil {
			return result{fail: protErr("lkey: %s", e.why)}
		}
		total += s.n
	}
	r, f := h.responder(q)
	if f != nil {
		return result{fail: f}
	}
	h.arrived(r)
	if prm.Qpc.Rre.Get(r.qpc) == 0 {
		return h.respFail(q, r, nil, 0, &wqeFail{syndrome: SyndromeRemoteInvalReq, why: "the responder QP does not allow RDMA READ (qpc.rre)"}, evWQInvalReqError)
	}
	var msg []byte
	if total > 0 {
		var ev *sigEvent
		var e *keyErr
		msg, ev, e = h.read(rkey, r.pdn, raddr, total, accRemoteRead)
		if e != nil {
			return h.respFail(q, r, nil, 0, &wqeFail{syndrome: SyndromeRemoteAccess, why: "rkey: " + e.why}, evWQAccessError)
		}
		if ev != nil {
			h.sigErrCQE(r, r.recvCQ(), ev.key, ev.err)
		}
	}
	sigs, _, e := h.scatter(q.pdn, sges, msg)
	if e != nil {
		return result{fail: protErr("lkey: %s", e.why), sigs: sigs}
	}
	return result{byteCnt: uint32(len(msg)), sigs: sigs}
}

// toErr moves q to ERR as the data path does on an error: its posted
// receive and send WQEs complete with flush errors.
func (h *hca) toErr(q *qpObj) {
	q.stopIn = 0
	from := q.state()
	prm.Qpc.State.Set(q.qpc, StateERR)
	h.flush(q)
	h.enteredErr(q, from)
}

// enteredErr raises SRQ_LAST_WQE for a QP that takes its receive WQEs
// from an SRQ and has just entered ERR: it will take no more (the IB
// spec's Last WQE Reached, mlx5_ib_qp_event's IB_EVENT_QP_LAST_WQE_REACHED).
func (h *hca) enteredErr(q *qpObj, from uint8) {
	if from != StateERR && q.srq != nil {
		h.qpEvent(evSRQLastWQE, q)
	}
}

// toRST moves q to RST as a 2RST_QP does (the kernel's destroy of a QP
// it does not believe in RESET).
func (h *hca) toRST(q *qpObj) {
	from := q.state()
	prm.Qpc.State.Set(q.qpc, StateRST)
	h.transitioned(q, from)
}

// flush completes every posted WQE of a QP in ERR with WR_FLUSH_ERR:
// receive WQEs up to the doorbell record's receive counter, then send
// WQEs up to its send counter.
func (h *hca) flush(q *qpObj) {
	h.clearRNR(q)
	if q.wq == nil || q.dbr == nil {
		return
	}
	if q.rq.entries > 0 {
		pi := uint16(dbrWord(q.dbr, 0))
		if int(pi-q.rqCI) > q.rq.entries {
			h.fault(q.ctx, "QP %#x: the receive counter %d is %d WQEs past the hardware's %d, the ring has %d", q.qpn, pi, pi-q.rqCI, q.rqCI, q.rq.entries)
		} else {
			for ; q.rqCI != pi; q.rqCI++ {
				h.errCQE(q, q.recvCQ(), cqeRespErr, SyndromeWRFlush, 0, q.rqCI)
			}
			prm.Qpc.HwRqCounter.Set(q.qpc, uint64(q.rqCI))
		}
	}
	if q.sq.entries > 0 {
		h.flushSQ(q)
	}
}

// flushSQ completes the posted send WQEs of a QP in ERR with WR_FLUSH_ERR,
// one CQE each.
func (h *hca) flushSQ(q *qpObj) {
	if s := q.dciRun(); s != nil {
		// A DCI with streams: first what it fetched and did not run
		// (dcistreams.go); the fetch counter follows the flush.
		h.flushFetched(q, s, h.ctxs[q.ctx] != nil && h.ctxs[q.ctx].opt.DCIReadAtFetch)
		defer func() { s.fetched = q.sqCI }()
	}
	pi := uint16(dbrWord(q.dbr, 1))
	if int(pi-q.sqCI) > q.sq.entries {
		h.fault(q.ctx, "QP %#x: the send counter %d is %d WQEBBs past the hardware's %d, the ring has %d", q.qpn, pi, pi-q.sqCI, q.sqCI, q.sq.entries)
		return
	}
	for q.sqCI != pi {
		w, ok := h.readWQE(q, pi-q.sqCI)
		if !ok {
			return
		}
		h.errCQE(q, q.sendCQ(), cqeReqErr, SyndromeWRFlush, w.opcode, w.index)
		q.sqCI += w.bbs
	}
	prm.Qpc.HwSqWqebbCounter.Set(q.qpc, uint64(q.sqCI))
}

// transitioned is the data path's part of a QP state transition: a QP
// entering RTS runs what is posted, one entering ERR flushes it, one
// entering RST starts its queues over.
func (h *hca) transitioned(q *qpObj, from uint8) {
	if q.state() != StateRTS {
		q.stopIn = 0 // a stop pending after a signature error is moot
	}
	switch q.state() {
	case StateRTS:
		if q.wq != nil && q.dbr != nil && q.sq.entries > 0 {
			h.runSQ(q)
		}
	case StateRTR:
		q.commEst = false
	case StateERR:
		h.flush(q)
		h.enteredErr(q, from)
	case StateRST:
		h.clearRNR(q)
		dciStreamsReset(q)
		q.sqCI, q.rqCI = 0, 0
		prm.Qpc.HwSqWqebbCounter.Set(q.qpc, 0)
		prm.Qpc.HwRqCounter.Set(q.qpc, 0)
	}
}

// RNR: a send that found no receive WQE waits and is retried after the
// responder's RNR NAK timer (qpc.min_rnr_nak), rnr_retry times (7:
// forever), then fails with RNR_RETRY_EXC_ERR.

// rnrWait is a QP's pending RNR retry.
type rnrWait struct {
	left int // retries left; -1 for no limit
	next time.Time
}

// rnrTimer is the IB spec's RNR NAK timer encoding (min_rnr_timer of
// ibv_modify_qp), in microseconds.
var rnrTimer = [32]int64{655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520}

// waitRNR handles an RNR NAK for WQE w: a wait until the responder's
// timer runs out, or, with the retries used up, the error completion. It
// reports whether the send queue goes on at once (the error was a DCI
// stream's).
func (h *hca) waitRNR(q *qpObj, w *sendWQE) bool {
	if q.rnr == nil {
		left := int(prm.Qpc.RnrRetry.Get(q.qpc))
		if left == 7 {
			left = -1
		}
		q.rnr = &rnrWait{left: left}
		h.rnrWaiting.Add(1)
	}
	if q.rnr.left == 0 {
		h.clearRNR(q)
		q.sqCI += w.bbs
		prm.Qpc.HwSqWqebbCounter.Set(q.qpc, uint64(q.sqCI))
		h.errCQE(q, q.sendCQ(), cqeReqErr, SyndromeRNRRetryExceeded, w.opcode, w.index)
		f := &wqeFail{syndrome: SyndromeRNRRetryExceeded, why: "the responder has no receive WQE and the RNR retries are exhausted"}
		stream := isDCI(q) && h.dciStreamError(q, dciChannel(q, w), f)
		h.record(&h.wqeErrors, q.ctx, fmt.Sprintf("QP %#x WQE %d: %s", q.qpn, w.index, f.why))
		if !stream {
			h.toErr(q)
		}
		return stream
	}
	if q.rnr.left > 0 {
		q.rnr.left--
	}
	q.rnr.next = time.Now().Add(time.Duration(h.rnrTimerOf(q, w)) * time.Microsecond)
	return false
}

func (h *hca) clearRNR(q *qpObj) {
	if q.rnr != nil {
		q.rnr = nil
		h.rnrWaiting.Add(-1)
	}
}

// retryRNR retries the waiting sends of context ctx's QPs whose timer ran
// out.
func (h *hca) retryRNR(ctx ctxID, now time.Time) {
	for _, q := range h.qps {
		if q.ctx == ctx && q.rnr != nil && !now.Before(q.rnr.next) {
			h.runSQ(q)
		}
	}
}
