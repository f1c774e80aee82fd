package model

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/mlx5go/mlx5go/prm"
)

// The transports' one requester and one responder. A data WQE (SEND,
// RDMA WRITE, RDMA READ, atomic) runs the same way on RC, UC, UD and DC:
// its segments are read, its message gathered or its landing checked,
// its responder found, and the responder's checks, writes and
// completions made, by the code in this file. What a service type does
// differently is one field of its transport below, each with its source;
// the code here asks the field, never the service type.

// transport is what one service type does differently from the others.
type transport struct {
	name string // in messages: "RC", "UC", "UD", "DCI"
	// runs are the data opcodes the model runs on the transport;
	// forbidden are those the transport does not have, a local QP
	// operation error. Any other data opcode is not modelled.
	runs, forbidden opSet
	// addr is how a request finds its responder.
	addr addressing
	// acked: the responder acknowledges. What goes wrong at the
	// responder reaches the requester: an RNR NAK, an error completion.
	// Without acknowledgements what the responder refuses is lost, and
	// the requester completes as if it had arrived (rxe_resp.c's class D
	// and E errors for UC; a UD datagram nobody takes).
	acked bool
	// commEst: the responder raises COMM_EST at the first message it
	// receives in RTR (the IB spec's Communication Established, of
	// connected QPs; mlx5_ib_qp_event's IB_EVENT_COMM_EST). A DCT raises
	// none: its only resource event is DCT_DRAINED (Linux's qpc.c,
	// rsc_event_notifier).
	commEst bool
	// respStays: an error the responder detects leaves it in its state
	// and raises no affiliated event. A DCT serves every DCI, and
	// mlx5_ib has no transition that would bring it back
	// (mlx5_ib_modify_dct); an RC, UC or UD responder goes to ERR.
	respStays bool
	// datagram: the message is one packet (UD). It is sent only when it
	// fits the path MTU (C10-93.1.1, rxe_req.c: else no packet and no
	// error), a bound that comes before log_msg_max's (mlx5_ib's UD
	// log_msg_max 12 is the largest MTU); it lands behind the 40 bytes of
	// its network header, and is checked whole against the receive WQE
	// before any byte is written.
	datagram bool
	// streams: an error may be its stream channel's alone, the QP staying
	// in RTS (mlx5dv_dci_stream_id_reset(3); dc.go's dciStreamError).
	streams bool
}

// addressing is how a transport's request finds its responder.
type addressing uint8

const (
	// byQPC: the QP the requester's context names (qpc.remote_qpn),
	// which must point back (RC, UC: responder).
	byQPC addressing = iota
	// byDatagram: the address vector after the control segment, a UD QP
	// and its Q_Key (ud.go: datagramPeer).
	byDatagram
	// byDCT: the address vector after the control segment, a DCT and its
	// DC access key (dc.go: dctPeer).
	byDCT
)

// The transports. UC has no RDMA READ, no atomics and no SEND with
// invalidate, UD only SEND and SEND_IMM (the IB spec's opcodes per
// service type, its table of the operations each service supports; rxe's
// rxe_opcode table has no UC or UD READ or atomic opcodes; libmlx5 44.0's
// MLX5_SUPPORTED_SEND_OPS_FLAGS_UC has no READ or atomic, so
// ibv_create_qp_ex refuses them on UC with EOPNOTSUPP). A DCI's
// operations are RC's (libmlx5's mlx5_qp_fill_wr_pfns). The masked
// atomics are every transport's local QP operation error while the
// device has no extended atomics (execData).
var (
	rcTransport = transport{name: "RC", runs: opsSend | opsInval | opsWrite | opsRead | opsAtomic,
		addr: byQPC, acked: true, commEst: true}
	ucTransport = transport{name: "UC", runs: opsSend | opsWrite, forbidden: opsInval | opsRead | opsAtomic,
		addr: byQPC, commEst: true}
	udTransport = transport{name: "UD", runs: opsSend, forbidden: opsInval | opsWrite | opsRead | opsAtomic,
		addr: byDatagram, datagram: true}
	dcTransport = transport{name: "DCI", runs: opsData,
		addr: byDCT, acked: true, respStays: true, streams: true}
)

// transportOf is the transport of q's send queue; nil for a service type
// whose data WQEs the model does not run (and for a DCT, which sends
// nothing).
func transportOf(q *qpObj) *transport {
	if q.dct {
		return nil
	}
	switch prm.Qpc.St.Get(q.qpc) {
	case stRC:
		return &rcTransport
	case stUC:
		return &ucTransport
	case stUD:
		return &udTransport
	case stDCI:
		return &dcTransport
	}
	return nil
}

// opSet is a set of send opcodes, bit n for opcode n (all below 32).
type opSet uint32

func (s opSet) has(op uint8) bool { return op < 32 && s&(1<<op) != 0 }

// The data opcodes by what their WQE carries after the control segment
// (and, on UD and DC, the address vector): SEND data or inline; RDMA
// WRITE the remote address segment, then data or inline; RDMA READ the
// remote address segment, then the data segments the answer lands in; an
// atomic the remote address and atomic segments, then its landing.
const (
	opsSend   opSet = 1<<opSend | 1<<opSendImm
	opsInval  opSet = 1 << opSendInval
	opsWrite  opSet = 1<<opRDMAWrite | 1<<opRDMAWriteImm
	opsRead   opSet = 1 << opRDMARead
	opsAtomic opSet = 1<<opAtomicCS | 1<<opAtomicFA
	// opsMasked are the masked (extended) atomics, which the model does
	// not execute: its profiles report no extended atomic_operations.
	opsMasked opSet = 1<<opAtomicMaskedCS | 1<<opAtomicMaskedFA
	opsData         = opsSend | opsInval | opsWrite | opsRead | opsAtomic
	opsRemote       = opsWrite | opsRead | opsAtomic // a remote address segment
	opsInline       = opsSend | opsInval | opsWrite  // an inline segment may carry the message
)

// request is a data WQE as its segments say.
type request struct {
	w                *sendWQE
	av               []byte // the address vector (UD's datagram segment, DC's struct mlx5_wqe_av); nil on RC and UC
	raddr            uint64 // struct mlx5_wqe_raddr_seg
	rkey             uint32
	swapAdd, compare uint64 // struct mlx5_wqe_atomic_seg
	sges             []sge
	inline           []byte
}

// parse reads data WQE w of transport t: the control segment, the address
// vector where t has one, the remote address and atomic segments its
// opcode has, then its data or inline segments.
func (t *transport) parse(w *sendWQE) (*request, *wqeFail) {
	m := &request{w: w}
	b := w.b[ctrlSegSize:]
	if t.addr != byQPC {
		if len(b) < avSize {
			return nil, qpOpErr("a %s data WQE of %d bytes has no address vector (ds %d)", t.name, len(w.b), w.ds)
		}
		m.av, b = b[:avSize], b[avSize:]
	}
	op := w.opcode
	switch {
	case opsAtomic.has(op) && len(b) < raddrSegSize+atomicSegSize:
		return nil, qpOpErr("an atomic without its remote address and atomic segments")
	case opsRead.has(op) && len(b) < raddrSegSize:
		return nil, qpOpErr("RDMA READ without a remote address segment")
	case opsWrite.has(op) && len(b) < raddrSegSize:
		return nil, qpOpErr("RDMA WRITE without a remote address segment")
	}
	if opsRemote.has(op) {
		m.raddr, m.rkey = binary.BigEndian.Uint64(b), binary.BigEndian.Uint32(b[8:])
		b = b[raddrSegSize:]
	}
	if opsAtomic.has(op) {
		m.swapAdd, m.compare = binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
		b = b[atomicSegSize:]
	}
	var f *wqeFail
	m.sges, m.inline, f = dataSegs(b, opsInline.has(op))
	return m, f
}

// execData runs data WQE w of q, whose transport is t.
func (h *hca) execData(q *qpObj, t *transport, w *sendWQE) result {
	switch op := w.opcode; {
	case opsMasked.has(op) && !h.prof.extendedAtomics():
		return result{fail: qpOpErr("masked atomic opcode %#x: the device has no extended atomics (atomic_operations %#x)", op,
			prm.AtomicCaps.AtomicOperations.Get(h.prof.pages[prm.MLX5_CAP_ATOMIC]))}
	case !opsData.has(op):
		return result{fail: unmodelled("opcode %#x is not modelled", op)}
	case t.forbidden.has(op):
		return result{fail: qpOpErr("opcode %#x on a %s QP", op, t.name)}
	case !t.runs.has(op):
		return result{fail: unmodelled("opcode %#x on a %s QP is not modelled", op, t.name)}
	}
	m, f := t.parse(w)
	if f != nil {
		return result{fail: f}
	}
	switch op := w.opcode; {
	case opsRead.has(op):
		return h.readOp(q, t, m)
	case opsAtomic.has(op):
		return h.atomicOp(q, t, m)
	case opsWrite.has(op):
		return h.writeOp(q, t, m)
	}
	return h.sendOp(q, t, m)
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

// message builds the message of a SEND or RDMA WRITE of q on transport
// t, once its length is checked (msgLen; on a datagram transport the
// MTU's check comes instead, findPeer's): the inline bytes, or the bytes
// behind each data segment's lkey as they go on the wire, and the
// signature errors the requester's checks found on the way.
func (h *hca) message(q *qpObj, t *transport, m *request) ([]byte, []sigEvent, *wqeFail) {
	if !t.datagram {
		if f := msgLen(q, m.sges, m.inline); f != nil {
			return nil, nil, f
		}
	}
	if m.inline != nil {
		return append([]byte(nil), m.inline...), nil, nil
	}
	var msg []byte
	var sigs []sigEvent
	for _, s := range m.sges {
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

// landing checks the data segments the answer of q's RDMA READ or atomic
// lands in (local writes of q's PD) and returns how many bytes they hold.
func (h *hca) landing(q *qpObj, sges []sge) (uint64, *wqeFail) {
	var room uint64
	for _, s := range sges {
		if e := h.reach(s.key, q.pdn, s.addr, s.n, accLocalWrite); e != nil {
			return 0, protErr("lkey: %s", e.why)
		}
		room += s.n
	}
	return room, nil
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

// peer is the responder a request reaches.
type peer struct {
	r *qpObj
	// flags are what its receive CQEs' flags_rqpn carry besides the
	// sender's QP number: on UD and DC the network header bits.
	flags uint32
	// grh is what a datagram's receive buffer starts with (UD); nil else.
	grh []byte
}

// findPeer finds the responder of request m of q, a message of n bytes,
// as t addresses it, and tells it a message arrived. ok is false when
// nothing answers; res is then the request's result. Either way res
// carries sigs, the signature errors the requester's checks found.
func (h *hca) findPeer(q *qpObj, t *transport, m *request, n int, sigs []sigEvent) (p peer, res result, ok bool) {
	var f *wqeFail
	switch t.addr {
	case byDatagram:
		p, f = h.datagramPeer(q, m, n)
	case byDCT:
		p, f = h.dctPeer(m.av)
	default:
		p.r, f = h.responder(q)
	}
	if f != nil {
		return p, t.unanswered(f, sigs), false
	}
	h.arrived(t, p.r)
	return p, result{sigs: sigs}, true
}

// carry gathers the message of SEND or RDMA WRITE m of q and finds its
// responder (findPeer); ok is false when the request ends there, with
// result res.
func (h *hca) carry(q *qpObj, t *transport, m *request) (msg []byte, p peer, res result, ok bool) {
	msg, sigs, f := h.message(q, t, m)
	if f != nil {
		return nil, p, result{fail: f}, false
	}
	p, res, ok = h.findPeer(q, t, m, len(msg), sigs)
	return msg, p, res, ok
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
		return nil, retryExceeded("no QP %#x of the same type pointing back at the QP: no response, transport retries exhausted", n)
	}
	if !receiving(r) {
		return nil, retryExceeded("the responder QP %#x is in state %#x: no response, transport retries exhausted", n, r.state())
	}
	return r, nil
}

// retryExceeded is the failure of a request nothing answers: the
// requester's transport retries run out (no timeout is simulated).
func retryExceeded(format string, args ...any) *wqeFail {
	return &wqeFail{syndrome: SyndromeTransportRetry, why: fmt.Sprintf(format, args...)}
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

// arrived is what responder r of transport t does when a message reaches
// it: on a transport with COMM_EST, the first one in RTR raises it, once
// per RTR.
func (h *hca) arrived(t *transport, r *qpObj) {
	if t.commEst && r.state() == StateRTR && !r.commEst {
		r.commEst = true
		h.qpEvent(evCommEst, r)
	}
}

// respName names responder r in messages.
func respName(r *qpObj) string {
	if r.dct {
		return fmt.Sprintf("DCT %#x", r.qpn)
	}
	return fmt.Sprintf("the responder QP %#x", r.qpn)
}

// unanswered is the result of a request of transport t that nothing
// answered (f says why): an error completion, or, unacknowledged, lost.
func (t *transport) unanswered(f *wqeFail, sigs []sigEvent) result {
	if !t.acked {
		return result{sigs: sigs}
	}
	return result{fail: f, sigs: sigs}
}

// noReceiveWQE is the result of a request of transport t that needs a
// receive WQE of responder r, which has none: an RNR NAK carrying r's
// timer (qpc.min_rnr_nak, the IB spec's encoding), or, unacknowledged,
// lost (class D).
func (t *transport) noReceiveWQE(r *qpObj, sigs []sigEvent) result {
	if !t.acked {
		return result{sigs: sigs}
	}
	return result{rnr: true, rnrDelay: time.Duration(rnrTimer[prm.Qpc.MinRnrNak.Get(r.qpc)&31]) * time.Microsecond, sigs: sigs}
}

// respFail is an error responder r detected in a request of q on
// transport t: the receive WQE w it consumed (if any) completes with
// respSyndrome; unless t keeps the responder up, r raises event (for
// errors no receive WQE reports; 0 for none) and goes to ERR; the
// requester completes with fail where t acknowledges (with none where
// fail is nil: the responder took the message). A QP that is its own
// responder is flushed by its requester side, after the failed WQE's
// completion.
func (h *hca) respFail(q *qpObj, t *transport, r *qpObj, w *rwqe, respSyndrome uint8, fail *wqeFail, event uint8, sigs []sigEvent) result {
	if w != nil {
		h.consume(r, w)
		h.errCQE(r, r.recvCQ(), cqeRespErr, respSyndrome, 0, w.counter)
	}
	self := false
	if !t.respStays {
		if event != 0 {
			h.qpEvent(event, r)
		}
		if self = r == q; !self {
			h.toErr(r)
		}
	}
	if fail == nil || !t.acked {
		return result{selfErr: self, sigs: sigs}
	}
	return result{fail: fail, sigs: sigs}
}

// refused is a request responder r refuses (a message too long for its
// receive WQE, no remote access, a bad rkey): where t acknowledges, a
// NAK, handled as respFail; else the message is lost, and r and its
// receive WQEs stay as they were (rxe_resp.c's classes D and E for UC; a
// UD datagram too long for its receive WQE).
func (h *hca) refused(q *qpObj, t *transport, r *qpObj, w *rwqe, respSyndrome uint8, fail *wqeFail, event uint8, sigs []sigEvent) result {
	if !t.acked {
		return result{sigs: sigs}
	}
	return h.respFail(q, t, r, w, respSyndrome, fail, event, sigs)
}

// sendOp runs SEND, SEND_IMM and SEND_INVAL: the message goes into the
// responder's next receive WQE.
func (h *hca) sendOp(q *qpObj, t *transport, m *request) result {
	msg, p, res, ok := h.carry(q, t, m)
	if !ok {
		return res
	}
	r, sigs := p.r, res.sigs
	rw, found := h.recvWQE(r)
	if !found {
		return t.noReceiveWQE(r, sigs)
	}
	if p.grh != nil {
		msg = append(p.grh, msg...)
	}
	var e *keyErr
	long := false
	if t.datagram {
		e, long = h.recvRoom(r, rw, len(msg))
	}
	if e == nil && !long {
		var rsigs []sigEvent
		rsigs, long, e = h.scatter(r.pdn, rw.sges, msg)
		for _, s := range rsigs {
			h.sigErrCQE(r, r.recvCQ(), s.key, s.err)
		}
	}
	switch {
	case e != nil:
		return h.respFail(q, t, r, rw, SyndromeLocalProt, &wqeFail{syndrome: SyndromeRemoteOp, why: respName(r) + "'s receive WQE: " + e.why}, 0, sigs)
	case long:
		return h.refused(q, t, r, rw, SyndromeLocalLength, &wqeFail{syndrome: SyndromeRemoteInvalReq, why: "the message is longer than " + respName(r) + "'s receive WQE"}, 0, sigs)
	}
	op, imm := uint8(cqeRespSend), uint32(0)
	switch m.w.opcode {
	case opSendImm:
		op, imm = cqeRespSendIm, m.w.imm
	case opSendInval:
		op, imm = cqeRespSendIn, m.w.imm
		if why := h.invalidate(r, m.w.imm); why != "" {
			// The IB transport's class J, as Linux's rxe handles it
			// (rxe_resp.c, RESPST_ERR_INVALIDATE_RKEY): the message was
			// received and is acknowledged, so the requester completes
			// successfully; the receive WQE completes in error (remote
			// invalid request).
			h.record(&h.wqeErrors, r.ctx, fmt.Sprintf("%s receive WQE %d: %s", respName(r), rw.counter, why))
			return h.respFail(q, t, r, rw, SyndromeRemoteInvalReq, nil, 0, sigs)
		}
	}
	h.consume(r, rw)
	h.respCQE(r, op, rw.counter, uint32(len(msg)), imm, q.qpn, p.flags, m.w.fmCeSe&ctrlSolicited != 0)
	return result{sigs: sigs}
}

// recvRoom checks receive WQE w of r for a datagram of n bytes before
// any is written: every data segment's key must be a local-write key of
// r's PD (e says which is not), and together they must hold n bytes
// (long when they do not).
func (h *hca) recvRoom(r *qpObj, w *rwqe, n int) (e *keyErr, long bool) {
	var room uint64
	for _, s := range w.sges {
		if _, e := h.mkey(s.key, r.pdn, accLocalWrite); e != nil {
			return e, false
		}
		room += s.n
	}
	return nil, uint64(n) > room
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

// writeOp runs RDMA_WRITE and RDMA_WRITE_IMM.
func (h *hca) writeOp(q *qpObj, t *transport, m *request) result {
	msg, p, res, ok := h.carry(q, t, m)
	if !ok {
		return res
	}
	r, sigs := p.r, res.sigs
	if prm.Qpc.Rwe.Get(r.qpc) == 0 {
		return h.refused(q, t, r, nil, 0, &wqeFail{syndrome: SyndromeRemoteInvalReq, why: respName(r) + " does not allow RDMA WRITE (rwe)"}, evWQInvalReqError, sigs)
	}
	var rw *rwqe
	if m.w.opcode == opRDMAWriteImm {
		if rw, ok = h.recvWQE(r); !ok {
			return t.noReceiveWQE(r, sigs)
		}
	}
	if len(msg) > 0 { // a zero-length RDMA WRITE checks no rkey
		ev, e := h.write(m.rkey, r.pdn, m.raddr, msg, accRemoteWrite)
		if e != nil {
			return h.refused(q, t, r, nil, 0, &wqeFail{syndrome: SyndromeRemoteAccess, why: respName(r) + " rkey: " + e.why}, evWQAccessError, sigs)
		}
		if ev != nil {
			h.sigErrCQE(r, r.recvCQ(), ev.key, ev.err)
		}
	}
	if rw != nil {
		h.consume(r, rw)
		h.respCQE(r, cqeRespWRImm, rw.counter, uint32(len(msg)), m.w.imm, q.qpn, p.flags, m.w.fmCeSe&ctrlSolicited != 0)
	}
	return result{sigs: sigs}
}

// readOp runs RDMA_READ: the local data segments say how much to read
// (their lengths, wire bytes through a signature mkey too) and where it
// lands.
func (h *hca) readOp(q *qpObj, t *transport, m *request) result {
	if f := msgLen(q, m.sges, nil); f != nil {
		return result{fail: f}
	}
	total, f := h.landing(q, m.sges)
	if f != nil {
		return result{fail: f}
	}
	p, res, ok := h.findPeer(q, t, m, 0, nil)
	if !ok {
		return res
	}
	r := p.r
	if prm.Qpc.Rre.Get(r.qpc) == 0 {
		return h.refused(q, t, r, nil, 0, &wqeFail{syndrome: SyndromeRemoteInvalReq, why: respName(r) + " does not allow RDMA READ (rre)"}, evWQInvalReqError, nil)
	}
	var msg []byte
	if total > 0 {
		var ev *sigEvent
		var e *keyErr
		if msg, ev, e = h.read(m.rkey, r.pdn, m.raddr, total, accRemoteRead); e != nil {
			return h.refused(q, t, r, nil, 0, &wqeFail{syndrome: SyndromeRemoteAccess, why: respName(r) + " rkey: " + e.why}, evWQAccessError, nil)
		}
		if ev != nil {
			h.sigErrCQE(r, r.recvCQ(), ev.key, ev.err)
		}
	}
	sigs, _, e := h.scatter(q.pdn, m.sges, msg)
	if e != nil {
		return result{fail: protErr("lkey: %s", e.why), sigs: sigs}
	}
	return result{byteCnt: uint32(len(msg)), sigs: sigs}
}

// atomicOp runs ATOMIC_CS and ATOMIC_FA on RC and DC: 8 bytes at the
// remote address, naturally aligned (else remote invalid request, as
// rxe's RESPST_ERR_MISALIGNED_ATOMIC), through an rkey with remote atomic
// access, with the responder's atomics enabled (rae: mlx5_ib sets it from
// IBV_ACCESS_REMOTE_ATOMIC, and on RC only with max_dest_rd_atomic above
// 0, set_qpc_atomic_flags). The original 8 bytes land in the local data
// segments, which must hold them (else a local length error, before
// anything is sent). The model runs one request at a time, so the
// initiator and responder depths (log_sra_max, log_rra_max) bound
// nothing.
func (h *hca) atomicOp(q *qpObj, t *transport, m *request) result {
	room, f := h.landing(q, m.sges)
	if f != nil {
		return result{fail: f}
	}
	if room < atomicBytes {
		return result{fail: &wqeFail{syndrome: SyndromeLocalLength, why: fmt.Sprintf("the atomic's data segments hold %d bytes, not %d", room, atomicBytes)}}
	}
	p, res, ok := h.findPeer(q, t, m, 0, nil)
	if !ok {
		return res
	}
	r := p.r
	switch {
	case prm.Qpc.Rae.Get(r.qpc) == 0:
		return h.refused(q, t, r, nil, 0, &wqeFail{syndrome: SyndromeRemoteInvalReq, why: respName(r) + " does not allow atomics (rae)"}, evWQInvalReqError, nil)
	case m.raddr%atomicBytes != 0:
		return h.refused(q, t, r, nil, 0, &wqeFail{syndrome: SyndromeRemoteInvalReq, why: fmt.Sprintf("%s: the atomic's address %#x is not 8-byte aligned", respName(r), m.raddr)}, evWQInvalReqError, nil)
	}
	old, e := h.atomic(m.rkey, r.pdn, m.raddr, m.w.opcode, m.swapAdd, m.compare)
	if e != nil {
		return h.refused(q, t, r, nil, 0, &wqeFail{syndrome: SyndromeRemoteAccess, why: respName(r) + " rkey: " + e.why}, evWQAccessError, nil)
	}
	sigs, _, ke := h.scatter(q.pdn, m.sges, old)
	if ke != nil {
		return result{fail: protErr("lkey: %s", ke.why), sigs: sigs}
	}
	return result{byteCnt: atomicBytes, sigs: sigs}
}

// atomic runs an 8-byte compare-and-swap or fetch-and-add at addr of rkey
// for a responder of PD pdn and returns the original bytes. The operands
// are big-endian in the WQE; memory is read and written in host byte
// order, the atomic_req_8B_endianness_mode every profile reports (1, host
// endianness, as mlx5_core sets it). Not through a signature mkey: its
// wire and memory bytes differ.
func (h *hca) atomic(rkey, pdn uint32, addr uint64, op uint8, swapAdd, compare uint64) ([]byte, *keyErr) {
	mk, e := h.mkey(rkey, pdn, accRemoteAtomic)
	if e != nil {
		return nil, e
	}
	if mk.sigOn() {
		return nil, keyFail("key %#x: an atomic through a signature mkey", rkey)
	}
	if mk.cryptoMkey() {
		return nil, keyFail("key %#x: an atomic through a crypto mkey", rkey)
	}
	spans, e := h.translate(nil, mk, rkey, addr, atomicBytes, accRemoteAtomic, 0)
	if e != nil {
		return nil, e
	}
	old := gatherSpans(spans, atomicBytes)
	v := binary.NativeEndian.Uint64(old)
	switch op {
	case opAtomicCS:
		if v == compare {
			v = swapAdd
		}
	case opAtomicFA:
		v += swapAdd
	}
	var b [atomicBytes]byte
	binary.NativeEndian.PutUint64(b[:], v)
	rest := b[:]
	for _, s := range spans {
		rest = rest[dmaCopy(s, rest):]
	}
	return old, nil
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
