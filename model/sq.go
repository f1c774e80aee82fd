package model

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/mlx5go/mlx5go/prm"
)

// The send queue: what the HCA does after a doorbell. Everything here
// runs under the HCA's lock.

// Send WQE opcodes (MLX5_OPCODE_*, include/linux/mlx5/device.h and
// qp.h).
const (
	opNOP          = 0x00
	opSendInval    = 0x01
	opRDMAWrite    = 0x08
	opRDMAWriteImm = 0x09
	opSend         = 0x0a
	opSendImm      = 0x0b
	opRDMARead     = 0x10
	opAtomicCS     = 0x11
	opAtomicFA     = 0x12
	// MLX5_OPCODE_ATOMIC_MASKED_CS and _FA (mlx5dv.h): the extended
	// atomics.
	opAtomicMaskedCS = 0x14
	opAtomicMaskedFA = 0x15
	opSetPSV         = 0x20
	opUMR            = 0x25
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
	ctrlStreamID  = 9         // its dci_stream_channel_id, bytes 9-10 (rdma-core 44.0's mlx5dv.h)
	raddrSegSize  = 16        // struct mlx5_wqe_raddr_seg
	atomicSegSize = 16        // struct mlx5_wqe_atomic_seg: swap_add, compare
	atomicBytes   = 8         // an atomic's operand (atomic_size_dc 8 bytes)
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
	stream uint16 // the ctrl segment's dci_stream_channel_id (a DCI's; dc.go)
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
	w.stream = binary.BigEndian.Uint16(first[ctrlStreamID:])
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
	w.copyOut(q, c)
	h.checkIndex(q, c, w)
	return w, true
}

// copyOut copies the bytes of WQE w, whose header was read at counter c,
// out of q's ring into w.b: the ring may wrap within it.
func (w *sendWQE) copyOut(q *qpObj, c uint16) {
	buf := make([]byte, 0, int(w.bbs)*sendWQEBB)
	for i := range w.bbs {
		buf = append(buf, q.sqSlot(c+i)...)
	}
	w.b = buf[:w.ds*16]
}

// result is what running one WQE did.
type result struct {
	fail    *wqeFail   // an error completion (nil: success)
	byteCnt uint32     // the requester CQE's byte_cnt
	sigs    []sigEvent // signature errors the requester's checks found
	// rnr: the responder had no receive WQE; the WQE runs again after
	// rnrDelay, the responder's RNR NAK timer.
	rnr      bool
	rnrDelay time.Duration
	// selfErr: the QP is its own responder and the responder side failed;
	// it goes to ERR once the WQE has completed.
	selfErr bool
	// streamFlush: the WQE's DCI stream channel is in error (dc.go): it
	// completes with WR_FLUSH_ERR, no error of its own, and the QP stays
	// in RTS.
	streamFlush bool
}

// runSQ runs the WQEs the doorbell record's send counter says are posted,
// from the hardware's consumer counter, while the QP may: in RTS (in ERR
// it flushes them; in any other state they wait).
//
// It runs what was posted when it looked, not what the driver goes on
// posting meanwhile: that came with doorbells of its own, which run in
// turn with every other QP's and with the commands that wait for the
// HCA's lock. A device arbitrates between its send queues; a QP whose
// driver posts as fast as the model runs must not keep the others (or a
// create QP) waiting for as long as it posts (issue 15's churn test saw
// a fresh QP's SENDs and commands starved for seconds).
func (h *hca) runSQ(q *qpObj) {
	if q.wq == nil || q.dbr == nil || q.sq.entries == 0 {
		h.fault(q.ctx, "QP %#x: a doorbell for a QP without a send queue in UMEMs", q.qpn)
		return
	}
	if streamed(q) {
		h.runStreams(q) // dcistreams.go: stream channels run apart
		return
	}
	start := q.sqCI
	due := uint16(dbrWord(q.dbr, 1)) - start
	for {
		pi := uint16(dbrWord(q.dbr, 1))
		avail := pi - q.sqCI
		if avail == 0 {
			if q.stopIn != 0 {
				h.drainStop(q) // the window was counted in what is posted: not reached
			}
			return
		}
		if q.sqCI-start >= due && q.state() == StateRTS {
			return // the rest has doorbells of its own
		}
		if int(avail) > q.sq.entries {
			h.fault(q.ctx, "QP %#x: the send counter %d is %d WQEBBs past the hardware's %d, the ring has %d", q.qpn, pi, avail, q.sqCI, q.sq.entries)
			return
		}
		if !h.sqRuns(q) {
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
			if q.rnr == nil {
				q.rnr = newRNRWait(q)
				h.rnrWaiting.Add(1)
			}
			if q.rnr.nak(r.rnrDelay) {
				return // retryRNR runs it again
			}
			r = rnrExhausted()
		}
		h.clearRNR(q)
		q.sqCI += w.bbs
		prm.Qpc.HwSqWqebbCounter.Set(q.qpc, uint64(q.sqCI))
		if !h.complete(q, w, w.index, r) {
			return
		}
		if r.fail != nil {
			continue // a DCI stream's error: the send queue goes on
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

// sqRuns reports whether q's send queue runs its WQEs now: in RTS. In
// ERR it flushes them instead; in any other state they wait.
func (h *hca) sqRuns(q *qpObj) bool {
	switch q.state() {
	case StateRTS:
		return true
	case StateERR:
		h.flush(q)
	}
	return false
}

// complete reports what WQE w, at counter at, did once it has left the
// send queue (runSQ's, or a DCI stream channel's): the signature errors
// the requester's checks found, then its error completion or, if it asks
// for one, its success. An error takes the QP to ERR, but on a DCI it may
// be its stream channel's alone (dciStreamError). complete reports
// whether the send queue goes on: false when the QP went to ERR.
func (h *hca) complete(q *qpObj, w *sendWQE, at uint16, r result) bool {
	for _, s := range r.sigs {
		h.sigErrCQE(q, q.sendCQ(), s.key, s.err)
	}
	if f := r.fail; f != nil {
		t := transportOf(q)
		keep := r.streamFlush || t != nil && t.streams && h.dciStreamError(q, dciChannel(q, w), f)
		h.errCQE(q, q.sendCQ(), cqeReqErr, f.syndrome, w.opcode, at)
		msg := fmt.Sprintf("QP %#x WQE %d (opcode %#x): %s", q.qpn, at, w.opcode, f.why)
		if !r.streamFlush {
			h.record(&h.wqeErrors, q.ctx, msg)
		}
		if f.unmodelled {
			h.record(&h.faults, q.ctx, msg)
		}
		if keep {
			return true
		}
		h.toErr(q)
		return false
	}
	if w.fmCeSe&ctrlCQUpdate != 0 {
		h.reqCQE(q, w, r.byteCnt)
	}
	if r.selfErr {
		h.toErr(q)
		return false
	}
	return true
}

// execWQE runs one WQE: NOP, UMR and SET_PSV on any QP, data WQEs on the
// QP's transport (transport.go). On a DCI a WQE whose stream channel is
// in error is flushed instead.
func (h *hca) execWQE(q *qpObj, w *sendWQE) result {
	if w.ds == 0 {
		return result{fail: qpOpErr("ds 0: not even a control segment")}
	}
	t := transportOf(q)
	if t != nil && t.streams {
		if ch := dciChannel(q, w); q.dc != nil && q.dc.errored[ch] {
			return result{fail: &wqeFail{syndrome: SyndromeWRFlush, why: fmt.Sprintf("stream channel %d is in error: flushed", ch)}, streamFlush: true}
		}
	}
	switch w.opcode {
	case opNOP:
		return result{}
	case opUMR:
		return result{fail: h.execUMR(q, w)}
	case opSetPSV:
		return result{fail: h.execSetPSV(q, w)}
	}
	if t == nil {
		return result{fail: unmodelled("the model runs data WQEs on RC, UC, UD and DCI QPs only (st %#x)", prm.Qpc.St.Get(q.qpc))}
	}
	return h.execData(q, t, w)
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

// newRNRWait starts the RNR wait of a send of q: qpc.rnr_retry retries,
// 7 for no limit.
func newRNRWait(q *qpObj) *rnrWait {
	left := int(prm.Qpc.RnrRetry.Get(q.qpc))
	if left == 7 {
		left = -1
	}
	return &rnrWait{left: left}
}

// nak counts one more RNR NAK: while retries are left the send waits
// for delay, the responder's timer (true); false when they ran out.
func (r *rnrWait) nak(delay time.Duration) bool {
	if r.left == 0 {
		return false
	}
	if r.left > 0 {
		r.left--
	}
	r.next = time.Now().Add(delay)
	return true
}

// rnrExhausted is the result of a send whose RNR retries ran out.
func rnrExhausted() result {
	return result{fail: &wqeFail{syndrome: SyndromeRNRRetryExceeded, why: "the responder has no receive WQE and the RNR retries are exhausted"}}
}

// clearRNR ends q's RNR wait, if it has one.
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
