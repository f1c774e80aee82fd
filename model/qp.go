package model

import (
	"github.com/mlx5go/mlx5go/prm"
)

// QP states: the values of qpc.state, as enum mlx5_qp_state in the
// kernel's include/linux/mlx5/qp.h names them (MLX5_QP_STATE_*). The send
// queue drain has two: 0x7 while the WQEs before the stop are still
// completing (MLX5_QP_STATE_SQ_DRAINING), then 0x5 once they have
// (MLX5_QP_STATE_SQD; rdma-core's mlx5_ifc.h calls it
// MLX5_QPC_STATE_SQDRAINED, and mlx5dv_qp_cancel_posted_send_wrs wants a
// QUERY_QP state of 0x5). The kernel's mlx5_ifc.h alone calls 0x7
// MLX5_QPC_STATE_SQD.
const (
	StateRST        = 0x0
	StateINIT       = 0x1
	StateRTR        = 0x2
	StateRTS        = 0x3
	StateSQER       = 0x4
	StateSQD        = 0x5 // the send queue is drained
	StateERR        = 0x6
	StateSQDraining = 0x7 // the send queue is draining
)

// QP service types the model creates (qpc.st, MLX5_QP_ST_* in qp.h).
const (
	stRC  = 0x0
	stUC  = 0x1
	stUD  = 0x2
	stXRC = 0x3
	stDCI = 0x5
)

// rq_type of a QP with its own receive queue, and of one with none
// (MLX5_NON_ZERO_RQ, MLX5_ZERO_LEN_RQ).
const (
	rqTypeRegular = 0x0
	zeroLenRQ     = 0x3
)

// sendWQEBB is the send queue's basic block (MLX5_SEND_WQE_BB).
const sendWQEBB = 64

// optMask32DCIStreamChannelID is MLX5_QPC_OPT_MASK_32_DCI_STREAM_CHANNEL_ID
// (rdma-core 44.0's mlx5_ifc.h), a bit of opt_param_mask_95_32: the
// command applies qpc_ext.dci_stream_channel_id.
const optMask32DCIStreamChannelID = 1 << 0

type qpObj struct {
	uid   uint16
	ctx   ctxID
	qpn   uint32
	qpc   []byte // the QP context (232 bytes), state included
	ext   []byte // the qpc_ext the last INIT2INIT/RTS2RTS carried (192 bytes)
	pdn   uint32
	cqs   []uint32
	umems []uint32

	// The data path. wq is the work queue buffer (RQ then SQ) and dbr its
	// 8-byte doorbell record; nil for a QP without queues.
	wq, dbr []byte
	rq      wqGeom // receive queue: entries and stride
	sq      wqGeom // send queue: WQEBBs of 64 bytes, after the RQ
	// sqCI and rqCI are the hardware's consumer counters: the next
	// WQEBB (send) and WQE (receive) to run, 16 bits as the doorbell
	// record's producer counters.
	sqCI, rqCI uint16
	// rnr is set while a send waits for the responder's receive WQE.
	rnr *rnrWait
	// stopIn, when not 0, is how many more WQEs the send queue runs
	// before it stops after a signature error (drain_sigerr and
	// Options.SigStop: the window of docs/MODEL.md, "Where it stops").
	stopIn int

	// srq is the SRQ whose WQEs the responder takes (rq_type SRQ), nil
	// for a QP with its own receive queue.
	srq *srqObj
	// ece is the ECE options the QP negotiated (create, then modify).
	ece uint32
	// dct marks a DCT (CREATE_DCT): it shares the QP numbers and is no
	// QP to QP commands.
	dct bool
	// ib is the kernel's verbs QP when mlx5_ib created it: where its
	// events go.
	ib *vqp
	// commEst is set once COMM_EST was raised in the current RTR.
	commEst bool
	// dc is a DCI's stream channels in error or a DCT's key violations
	// (dc.go); nil until there are some.
	dc *dcState
}

// wqGeom is one work queue's place in the QP's buffer.
type wqGeom struct {
	off     int // byte offset in wq
	entries int // a power of two; 0 for no queue
	stride  int // bytes per entry
}

func (q *qpObj) state() uint8 { return uint8(prm.Qpc.State.Get(q.qpc)) }

// transition is one QP state transition command.
type transition struct {
	from   []uint8 // states it leaves; nil for any state
	to     uint8
	qpn    prm.Field
	qpc    prm.Field // zero Width when the command carries no QP context
	opt    prm.Field // opt_param_mask (zero Width: none)
	ece    prm.Field // the input's ece (zero Width: none)
	outECE prm.Field // the output's ece (zero Width: none)
	ext    prm.Field // qpc_ext flag (INIT2INIT, RTS2RTS)
	opt2   prm.Field // opt_param_mask_95_32, with qpc_ext
	data   prm.Field // qpc_data_ext
	minIn  int
	minOut int
}

func tr(from []uint8, to uint8, l, out *prm.Layout) transition {
	t := transition{from: from, to: to, minIn: int(l.Size), minOut: int(out.Size)}
	t.qpn, _ = l.Field("qpn")
	t.qpc, _ = l.Field("qpc")
	t.opt, _ = l.Field("opt_param_mask")
	t.ece, _ = l.Field("ece")
	t.outECE, _ = out.Field("ece")
	if ext, ok := l.Field("qpc_ext"); ok {
		t.ext = ext
		t.opt2, _ = l.Field("opt_param_mask_95_32")
		t.data, _ = l.Field("qpc_data_ext")
		t.minIn = int(t.data.Off / 8) // the extension is optional
	}
	return t
}

// transitions are the QP state machine of the PRM (modify QP commands);
// 2ERR and 2RST leave any state. SQD_RTS leaves SQD only, not
// SQ_DRAINING: see docs/MODEL.md, "QP states".
var transitions = map[uint16]transition{
	prm.MLX5_CMD_OP_RST2INIT_QP:  tr([]uint8{StateRST}, StateINIT, prm.Rst2initQpIn.Layout(), prm.Rst2initQpOut.Layout()),
	prm.MLX5_CMD_OP_INIT2INIT_QP: tr([]uint8{StateINIT}, StateINIT, prm.Init2initQpIn.Layout(), prm.Init2initQpOut.Layout()),
	prm.MLX5_CMD_OP_INIT2RTR_QP:  tr([]uint8{StateINIT}, StateRTR, prm.Init2rtrQpIn.Layout(), prm.Init2rtrQpOut.Layout()),
	prm.MLX5_CMD_OP_RTR2RTS_QP:   tr([]uint8{StateRTR}, StateRTS, prm.Rtr2rtsQpIn.Layout(), prm.Rtr2rtsQpOut.Layout()),
	prm.MLX5_CMD_OP_RTS2RTS_QP:   tr([]uint8{StateRTS}, StateRTS, prm.Rts2rtsQpIn.Layout(), prm.Rts2rtsQpOut.Layout()),
	prm.MLX5_CMD_OP_SQERR2RTS_QP: tr([]uint8{StateSQER}, StateRTS, prm.Sqerr2rtsQpIn.Layout(), prm.Sqerr2rtsQpOut.Layout()),
	prm.MLX5_CMD_OP_SQD_RTS_QP:   tr([]uint8{StateSQD}, StateRTS, prm.Sqd2rtsQpIn.Layout(), prm.Sqd2rtsQpOut.Layout()),
	prm.MLX5_CMD_OP_2ERR_QP:      tr(nil, StateERR, prm.Qp2errIn.Layout(), prm.Qp2errOut.Layout()),
	prm.MLX5_CMD_OP_2RST_QP:      tr(nil, StateRST, prm.Qp2rstIn.Layout(), prm.Qp2rstOut.Layout()),
}

// Optional parameters of a transition (enum mlx5_qp_optpar, qp.h) and the
// QP context fields each governs. A transition applies the non-zero
// fields of its QP context, and the fields of the optional parameters its
// opt_param_mask names as they are, zero included (how mlx5_ib clears rre
// on an RTR2RTS that drops remote read).
var optParams = []struct {
	bit    uint32
	fields []prm.Field
}{
	{1 << 1, []prm.Field{prm.Qpc.Rre}},                                         // RRE
	{1 << 2, []prm.Field{prm.Qpc.Rae, prm.Qpc.AtomicMode}},                     // RAE
	{1 << 3, []prm.Field{prm.Qpc.Rwe}},                                         // RWE
	{1 << 4, []prm.Field{prm.Ads.PkeyIndex.At(prm.Qpc.PrimaryAddressPath)}},    // PKEY_INDEX
	{1 << 5, []prm.Field{prm.Qpc.QKey}},                                        // Q_KEY
	{1 << 6, []prm.Field{prm.Qpc.MinRnrNak}},                                   // RNR_TIMEOUT
	{1 << 7, []prm.Field{prm.Qpc.PrimaryAddressPath}},                          // PRIMARY_ADDR_PATH
	{1 << 8, []prm.Field{prm.Qpc.LogSraMax}},                                   // SRA_MAX
	{1 << 9, []prm.Field{prm.Qpc.LogRraMax}},                                   // RRA_MAX
	{1 << 10, []prm.Field{prm.Qpc.PmState}},                                    // PM_STATE
	{1 << 12, []prm.Field{prm.Qpc.RetryCount}},                                 // RETRY_COUNT
	{1 << 13, []prm.Field{prm.Qpc.RnrRetry}},                                   // RNR_RETRY
	{1 << 14, []prm.Field{prm.Ads.AckTimeout.At(prm.Qpc.PrimaryAddressPath)}},  // ACK_TIMEOUT
	{1 << 16, []prm.Field{prm.Ads.VhcaPortNum.At(prm.Qpc.PrimaryAddressPath)}}, // PRI_PORT
}

// applyOptParams copies the fields of the optional parameters set in opt
// from the command's QP context src into dst.
func applyOptParams(dst, src []byte, opt uint32) {
	for _, p := range optParams {
		if opt&p.bit == 0 {
			continue
		}
		for _, f := range p.fields {
			if f.Width <= 64 {
				f.Set(dst, f.Get(src))
			} else {
				copy(f.Bytes(dst), f.Bytes(src))
			}
		}
	}
}

// createOnly are the qpc fields a QP gets at CREATE_QP and keeps: a
// transition's QP context does not change them.
var createOnly = map[string]bool{
	"state": true, "st": true, "pd": true, "uar_page": true, "cqn_snd": true, "cqn_rcv": true,
	"log_rq_size": true, "log_rq_stride": true, "no_sq": true, "log_sq_size": true, "rq_type": true,
	"srqn_rmpn_xrqn": true, "log_page_size": true, "page_offset": true, "dbr_addr": true,
	"dbr_umem_valid": true, "dbr_umem_id": true, "user_index": true, "ts_format": true,
	"log_num_dci_stream_channels": true, "log_num_dci_errored_streams": true, "xrcd": true,
	"hw_sq_wqebb_counter": true, "sw_sq_wqebb_counter": true, "hw_rq_counter": true, "sw_rq_counter": true,
}

// merge copies the non-zero fields of src into dst, both holding the
// struct l describes, descending into nested structs; fields named in skip
// are left alone. A transition's QP context changes only what it sets.
func merge(dst, src []byte, l *prm.Layout, skip map[string]bool) {
	for _, f := range l.Fields {
		if skip[f.Name] {
			continue
		}
		if inner, ok := prm.LayoutOf(f.Type); f.Type != "" && ok {
			if d, s := f.Bytes(dst), f.Bytes(src); d != nil && s != nil {
				merge(d, s, inner, nil)
			}
			continue
		}
		if f.Width <= 64 {
			if v := f.Get(src); v != 0 {
				f.Set(dst, v)
			}
			continue
		}
		if s := f.Bytes(src); s != nil && !zero(s) {
			copy(f.Bytes(dst), s)
		}
	}
}

// resetQPC takes a QP context back to what CREATE_QP gave it: the IB
// spec's Reset state, in which a QP's attributes are their initial
// values, so that the next RESET to INIT starts from nothing (a remote
// access or atomic enable of the QP's last life does not survive: the
// transitions apply only the non-zero fields they carry).
func resetQPC(qpc []byte) {
	for _, f := range prm.Qpc.Layout().Fields {
		if createOnly[f.Name] {
			continue
		}
		if f.Width <= 64 {
			f.Set(qpc, 0)
		} else {
			clear(f.Bytes(qpc))
		}
	}
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkQPC applies the profile's caps to a QP context a command carries.
func (h *hca) checkQPC(qpc []byte, st uint64) *fwErr {
	if prm.Qpc.DrainSigerr.Get(qpc) != 0 && h.prof.cap(prm.CmdHcaCap.DrainSigerr) == 0 {
		return badParam(SyndromeNoCap)
	}
	ch := prm.Qpc.LogNumDciStreamChannels.Get(qpc)
	errored := prm.Qpc.LogNumDciErroredStreams.Get(qpc)
	if (ch != 0 || errored != 0) && st != stDCI {
		return badParam(SyndromeBadValue)
	}
	// Each within its cap; more errored streams than stream channels is
	// allowed: rdma-core's Mlx5DcStreamsRes makes a DCI of 2^2 channels
	// and 2^3 errored streams (tests/mlx5_base.py, generate_dci_attr).
	if ch > h.prof.cap(prm.CmdHcaCap.LogMaxDciStreamChannels) || errored > h.prof.cap(prm.CmdHcaCap.LogMaxDciErroredStreams) {
		return badParam(SyndromeNoCap)
	}
	return nil
}

func createQP(h *hca, c *fwCall) *fwErr {
	qpc := prm.CreateQpIn.Qpc.Bytes(c.in)
	st := prm.Qpc.St.Get(qpc)
	switch st {
	case stRC, stUC, stUD, stXRC, stDCI:
	default:
		return badParam(SyndromeBadValue)
	}
	if e := h.checkQPC(qpc, st); e != nil {
		return e
	}
	maxSz := h.prof.cap(prm.CmdHcaCap.LogMaxQpSz)
	if prm.Qpc.LogSqSize.Get(qpc) > maxSz || prm.Qpc.LogRqSize.Get(qpc) > maxSz {
		return badParam(SyndromeBadValue)
	}
	pdn := uint32(prm.Qpc.Pd.Get(qpc))
	if e := h.pdRef(pdn, c.uid); e != nil {
		return e
	}
	var cqs []uint32
	if prm.Qpc.NoSq.Get(qpc) == 0 {
		cqs = append(cqs, uint32(prm.Qpc.CqnSnd.Get(qpc)))
	}
	if prm.Qpc.RqType.Get(qpc) != zeroLenRQ {
		cqs = append(cqs, uint32(prm.Qpc.CqnRcv.Get(qpc)))
	}
	for _, n := range cqs {
		if _, e := h.cq(n, c.uid); e != nil {
			return e
		}
	}
	var srq *srqObj
	if prm.Qpc.RqType.Get(qpc) == srqRQ {
		// An SRQ's receive queue: srqn 0 is the kernel's own SRQ (devr->s1,
		// which a DCI names), which the model does not have.
		if n := uint32(prm.Qpc.SrqnRmpnXrqn.Get(qpc)); n != 0 {
			s, ok := h.srqs[n]
			if !ok {
				return noObject()
			}
			if e := checkOwner(s.uid, c.uid); e != nil {
				return e
			}
			srq = s
		}
	}
	// The kernel set wq_umem_valid and dbr_umem_valid (devx_set_umem_valid):
	// the work queue (from offset 0: create_qp_in's wq_umem_offset is not
	// in prm's tables) and its doorbell record live in UMEMs of this uid,
	// which must hold them. A verbs QP's live in the memory mlx5_ib
	// pinned.
	q := &qpObj{uid: c.uid, ctx: c.ctx, ext: make([]byte, prm.QpcExt.Layout().Size), pdn: pdn, cqs: cqs, srq: srq}
	q.rq, q.sq = wqGeometry(qpc)
	if c.mem != nil {
		need := q.sq.off + q.sq.entries*q.sq.stride
		if need > 0 && len(c.mem.buf) < need || len(c.mem.dbr) < 8 {
			return badParam(SyndromeBadValue)
		}
		if need > 0 {
			q.wq = c.mem.buf[:need:need]
		}
		q.dbr = c.mem.dbr
	} else if c.get(prm.CreateQpIn.WqUmemValid) != 0 && len(cqs) > 0 {
		id := uint32(c.get(prm.CreateQpIn.WqUmemId))
		mem, e := h.umemRange(id, c.uid, 0, uint64(q.sq.off+q.sq.entries*q.sq.stride))
		if e != nil {
			return e
		}
		q.wq, q.umems = mem, append(q.umems, id)
	}
	if prm.Qpc.DbrUmemValid.Get(qpc) != 0 && len(cqs) > 0 {
		id := uint32(prm.Qpc.DbrUmemId.Get(qpc))
		mem, e := h.umemRange(id, c.uid, prm.Qpc.DbrAddr.Get(qpc), 8)
		if e != nil {
			return e
		}
		q.dbr, q.umems = mem, append(q.umems, id)
	}
	var n uint32
	var ok bool
	if end := limit(firstQPN, h.prof.cap(prm.CmdHcaCap.LogMaxQp)); h.reuseQPN {
		n, ok = allocLowest(h.qps, firstQPN, end)
	} else {
		n, ok = alloc(h, "qp", h.qps, firstQPN, end)
	}
	if !ok {
		return limitReached()
	}
	q.qpn = n
	q.qpc = append([]byte(nil), qpc...)
	prm.Qpc.State.Set(q.qpc, StateRST)
	umems := q.umems
	h.qps[n] = q
	h.pds[pdn].refs++
	for _, cq := range cqs {
		h.cqs[cq].refs++
	}
	for _, id := range umems {
		h.umems[id].refs++
	}
	if srq != nil {
		srq.refs++
	}
	prm.CreateQpOut.Qpn.Set(c.out, uint64(n))
	if h.prof.cap(prm.CmdHcaCap.EceSupport) != 0 {
		q.ece = negotiateECE(uint32(c.get(prm.CreateQpIn.Ece)))
		prm.CreateQpOut.Ece.Set(c.out, uint64(q.ece))
	}
	return nil
}

// negotiateECE is the model's ECE answer: the device speaks ECE version 1
// (bits 31:28) and none of its optional features, so any offer of version
// 1 or later gets version 1 alone; no offer gets none.
func negotiateECE(offer uint32) uint32 {
	if offer == 0 {
		return 0
	}
	return eceVersion1
}

// wqGeometry places a QP's queues in its buffer: the receive queue
// first ((1<<log_rq_size) WQEs of 16<<log_rq_stride bytes; none with a
// zero-length or shared receive queue), the send queue after it
// (64<<log_sq_size bytes; none with no_sq).
func wqGeometry(qpc []byte) (rq, sq wqGeom) {
	if prm.Qpc.RqType.Get(qpc) == rqTypeRegular {
		rq = wqGeom{entries: 1 << prm.Qpc.LogRqSize.Get(qpc), stride: 16 << prm.Qpc.LogRqStride.Get(qpc)}
	}
	sq = wqGeom{off: rq.entries * rq.stride, stride: sendWQEBB}
	if prm.Qpc.NoSq.Get(qpc) == 0 {
		sq.entries = 1 << prm.Qpc.LogSqSize.Get(qpc)
	}
	return rq, sq
}

func (h *hca) qp(n uint32, uid uint16) (*qpObj, *fwErr) {
	q, ok := h.qps[n]
	if !ok || q.dct {
		return nil, noObject()
	}
	return q, checkOwner(q.uid, uid)
}

func queryQP(h *hca, c *fwCall) *fwErr {
	q, e := h.qp(uint32(c.get(prm.QueryQpIn.Qpn)), c.uid)
	if e != nil {
		return e
	}
	copy(prm.QueryQpOut.Qpc.Bytes(c.out), q.qpc)
	return nil
}

func destroyQP(h *hca, c *fwCall) *fwErr {
	n := uint32(c.get(prm.DestroyQpIn.Qpn))
	q, e := h.qp(n, c.uid)
	if e != nil {
		return e
	}
	h.releaseQP(n, q)
	return nil
}

func (h *hca) releaseQP(n uint32, q *qpObj) {
	h.clearRNR(q)
	if q.srq != nil {
		q.srq.refs--
	}
	h.pds[q.pdn].refs--
	for _, cq := range q.cqs {
		h.cqs[cq].refs--
	}
	for _, id := range q.umems {
		h.umems[id].refs--
	}
	delete(h.qps, n)
}

func modifyQP(h *hca, c *fwCall) *fwErr {
	t := transitions[uint16(c.get(prm.MboxIn.Opcode))]
	q, e := h.qp(uint32(c.get(t.qpn)), c.uid)
	if e != nil {
		return e
	}
	if t.from != nil && !contains(t.from, q.state()) {
		return fail(prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, SyndromeQPState)
	}
	next := append([]byte(nil), q.qpc...)
	if t.qpc.Width != 0 {
		src := t.qpc.Bytes(c.in)
		if e := h.checkQPC(src, prm.Qpc.St.Get(q.qpc)); e != nil {
			return e
		}
		merge(next, src, prm.Qpc.Layout(), createOnly)
		if t.opt.Width != 0 {
			applyOptParams(next, src, uint32(c.get(t.opt)))
		}
	}
	ext := q.ext
	if t.ext.Width != 0 && c.get(t.ext) != 0 {
		if h.prof.cap(prm.CmdHcaCap.QpcExtension) == 0 {
			return badParam(SyndromeNoCap)
		}
		if len(c.in) < int((t.data.Off+t.data.Width)/8) {
			return fail(prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR, SyndromeInputLength)
		}
		data := t.data.Bytes(c.in)
		if t.to == StateRTS && c.get(t.opt2)&optMask32DCIStreamChannelID != 0 {
			// mlx5dv_dci_stream_id_reset's command: the last check, as it
			// changes the DCI (dc.go).
			if e := h.dciResetStream(q, uint16(prm.QpcExt.DciStreamChannelId.Get(data))); e != nil {
				return e
			}
		}
		ext = append([]byte(nil), data...)
	}
	from := q.state()
	if t.to == StateRST {
		resetQPC(next)
	}
	prm.Qpc.State.Set(next, uint64(t.to))
	q.qpc, q.ext = next, ext
	if t.ece.Width != 0 && h.prof.cap(prm.CmdHcaCap.EceSupport) != 0 {
		if offer := uint32(c.get(t.ece)); offer != 0 {
			q.ece = negotiateECE(offer)
		}
	}
	if t.outECE.Width != 0 && len(c.out) >= t.minOut {
		t.outECE.Set(c.out, uint64(q.ece))
	}
	h.transitioned(q, from)
	return nil
}

func contains(s []uint8, v uint8) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
