package model

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
)

// The DC transport (dynamically connected): a DCI (qpc.st DCI) reaches a
// DCT by number, WQE by WQE. docs/MODEL.md, section "DC", gives every rule
// below with its source; the short version:
//
//   - A DCI data WQE is the control segment (struct mlx5_wqe_ctrl_seg,
//     rdma-core's mlx5dv.h: bytes 9-10 dci_stream_channel_id), the 48-byte
//     address vector (struct mlx5_wqe_av: the DC access key in bytes 0-7
//     where UD has its Q_Key, the DCT number in the low 24 bits of
//     dqp_dct), then what RC has: the remote address segment, the atomic
//     segment, data or inline segments. That is what libmlx5 44.0's
//     mlx5_send_wr_set_dc_addr(_stream) writes (the oracle's dc vectors).
//   - The address vector must address the model's port, as for UD; the
//     DCT (any context of the HCA) must exist, be in RTR and hold the
//     WQE's access key. Otherwise nothing answers: the WR completes with
//     TRANSPORT_RETRY_EXC_ERR, and a wrong key counts in the DCT's
//     dc_access_key_violation_count (an inference, see docs/MODEL.md).
//   - The DCT responds as an RC responder would with its own access
//     rights, PD and SRQ, but an error never takes it out of RTR: it
//     serves every DCI, and mlx5_ib has no transition that would bring it
//     back (mlx5_ib_modify_dct).
//   - Stream channels: a WR's stream channel is its dci_stream_channel_id
//     modulo 2^log_num_dci_stream_channels. An error puts the channel in
//     error: its later WRs complete with WR_FLUSH_ERR, in order, until
//     RTS2RTS_QP resets it, while the other channels' WRs run; when
//     2^log_num_dci_errored_streams channels are in error the QP goes to
//     ERR (mlx5dv_dci_stream_id_reset(3)). The channels run apart, each
//     in order (dcistreams.go). A DCI without streams has one channel and
//     an errored limit of one: an error takes it to ERR, as for RC.

// Send WQE opcodes of atomics (MLX5_OPCODE_ATOMIC_CS, _FA,
// include/linux/mlx5/qp.h).
const (
	opAtomicCS = 0x11
	opAtomicFA = 0x12
)

// DC WQE layout: the control segment's dci_stream_channel_id (rdma-core
// 44.0 mlx5dv.h, struct mlx5_wqe_ctrl_seg: signature at 8, the stream id
// at 9-10, fm_ce_se at 11), the address vector after the control
// segment, the DC access key at its start (struct mlx5_wqe_av's key union:
// qkey for UD, dc_key for DC) and struct mlx5_wqe_atomic_seg.
const (
	ctrlStreamID  = 9
	dcAVOff       = ctrlSegSize
	dcDataOff     = ctrlSegSize + avSize
	avDCKey       = 0
	atomicSegSize = 16 // swap_add, compare
	atomicBytes   = 8  // the operand size (atomic_size_dc 8 bytes)
)

// dcState is what the model keeps for a DCI or a DCT beyond the QP
// context.
type dcState struct {
	// errored are a DCI's stream channels in error (the channel ids).
	errored map[uint16]bool
	// keyViolations is a DCT's dc_access_key_violation_count (dctc,
	// mlx5_ifc.h): requests with another access key.
	keyViolations uint32
	// run is a DCI with streams' send queue as the device runs it
	// (dcistreams.go); nil until it runs, and after RESET.
	run *dciRun
}

// dciRun returns q's stream run state, nil when it has none.
func (q *qpObj) dciRun() *dciRun {
	if q.dc == nil {
		return nil
	}
	return q.dc.run
}

// dcOf returns q's DC state, made on first use.
func dcOf(q *qpObj) *dcState {
	if q.dc == nil {
		q.dc = &dcState{errored: map[uint16]bool{}}
	}
	return q.dc
}

func isDCI(q *qpObj) bool { return !q.dct && prm.Qpc.St.Get(q.qpc) == stDCI }

// dciChannel is the stream channel of DCI WQE w: its
// dci_stream_channel_id modulo the DCI's 2^log_num_dci_stream_channels
// channels (a DCI without streams has one).
func dciChannel(q *qpObj, w *sendWQE) uint16 {
	return streamChannel(q, binary.BigEndian.Uint16(w.b[ctrlStreamID:]))
}

// streamChannel is the stream channel of stream id on DCI q.
func streamChannel(q *qpObj, id uint16) uint16 {
	n := uint32(1) << prm.Qpc.LogNumDciStreamChannels.Get(q.qpc)
	return uint16(uint32(id) & (n - 1))
}

// execDCI runs a WQE of DCI q: flushed if its stream channel is in error,
// else run (NOP, UMR and SET_PSV as on any QP, data WQEs to a DCT), and an
// error completion decided as a stream error or a QP error.
func (h *hca) execDCI(q *qpObj, w *sendWQE) result {
	ch := dciChannel(q, w)
	if q.dc != nil && q.dc.errored[ch] {
		return result{fail: &wqeFail{syndrome: SyndromeWRFlush, why: fmt.Sprintf("stream channel %d is in error: flushed", ch)}, keepQP: true}
	}
	var r result
	switch w.opcode {
	case opNOP:
	case opUMR:
		r.fail = h.execUMR(q, w)
	case opSetPSV:
		r.fail = h.execSetPSV(q, w)
	default:
		r = h.dcRun(q, w)
	}
	if r.fail != nil {
		r.keepQP = h.dciStreamError(q, ch, r.fail)
	}
	return r
}

// dciStreamError decides what error f of a WQE on stream channel ch of
// DCI q does: a stream error (true: the channel is in error and the QP
// stays in RTS) or, when it is the QP's or the errored channels reach
// 2^log_num_dci_errored_streams, a QP error (false: the caller moves the
// QP to ERR).
func (h *hca) dciStreamError(q *qpObj, ch uint16, f *wqeFail) bool {
	switch {
	case f.syndrome == SyndromeLocalQPOp:
		return false // a malformed WQE is the QP's
	case f.syndrome == SyndromeTransportRetry && h.ctxs[q.ctx] != nil && h.ctxs[q.ctx].opt.DCIRetryErrorTakesQP:
		return false
	}
	s := dcOf(q)
	s.errored[ch] = true
	limit := 1 << prm.Qpc.LogNumDciErroredStreams.Get(q.qpc)
	if len(s.errored) >= limit {
		f.why += fmt.Sprintf("; %d stream channels are in error, the DCI's limit (2^log_num_dci_errored_streams): the QP goes to ERR", len(s.errored))
		return false
	}
	f.why += fmt.Sprintf("; stream channel %d is in error until reset", ch)
	return true
}

// dciResetStream is RTS2RTS_QP's stream reset (qpc_ext with
// MLX5_QPC_OPT_MASK_32_DCI_STREAM_CHANNEL_ID, the command
// mlx5dv_dci_stream_id_reset sends): the channel of id leaves its error.
// A QP that is not a DCI is BAD_PARAM_ERR; a channel that is not in error
// BAD_RES_STATE_ERR (the firmware's answer is not public; rdma-core 44.0's
// test_dc_send_stream_bad_flow expects a reset of a good stream to fail).
func (h *hca) dciResetStream(q *qpObj, id uint16) *fwErr {
	if !isDCI(q) {
		return badParam(SyndromeBadValue)
	}
	ch := uint16(uint32(id) & (1<<prm.Qpc.LogNumDciStreamChannels.Get(q.qpc) - 1))
	if q.dc == nil || !q.dc.errored[ch] {
		return fail(prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, SyndromeStreamState)
	}
	delete(q.dc.errored, ch)
	return nil
}

// dciStreamsReset clears a DCI's stream errors and what its channels
// fetched (a QP back in RST: its counters start over).
func dciStreamsReset(q *qpObj) {
	if q.dc != nil {
		clear(q.dc.errored)
		q.dc.run = nil
	}
}

// dcRun runs the data WQE w of DCI q.
func (h *hca) dcRun(q *qpObj, w *sendWQE) result {
	if len(w.b) < dcDataOff {
		return result{fail: qpOpErr("a DCI data WQE of %d bytes has no address vector (ds %d)", len(w.b), w.ds)}
	}
	av := w.b[dcAVOff:dcDataOff]
	switch w.opcode {
	case opSend, opSendImm, opSendInval:
		return h.dcSend(q, w, av)
	case opRDMAWrite, opRDMAWriteImm:
		return h.dcWrite(q, w, av)
	case opRDMARead:
		return h.dcRead(q, w, av)
	case opAtomicCS, opAtomicFA:
		return h.dcAtomic(q, w, av)
	}
	return result{fail: unmodelled("opcode %#x on a DCI is not modelled", w.opcode)}
}

// dcTarget finds the DCT that av, the address vector of a DCI's WQE,
// reaches, and the flags_rqpn bits of its receive completions. The address must be the
// model's port (as a UD datagram's: a valid source GID index, a
// destination GID of the port and its MAC; the GRH bit is reserved on
// RoCE); the DCT, numbered by dqp_dct's low 24 bits, must be in RTR; the
// access key must be the DCT's, else the DCT drops the request and counts
// it. Nothing answers a dropped request: the requester's retries run out.
func (h *hca) dcTarget(av []byte) (*qpObj, uint32, *wqeFail) {
	gidFl := binary.BigEndian.Uint32(av[avGRHGIDFl:])
	var rgid [16]byte
	copy(rgid[:], av[avRGID:])
	sgid, ok := h.gid(uint8(gidFl >> 20))
	if !ok || !h.isPortGID(rgid) || [6]byte(av[avRMAC:avRMAC+6]) != portMAC {
		return nil, 0, retryExceeded("the address vector (source GID index %d, destination GID %x, MAC %x) is not the model's port: nothing answers",
			uint8(gidFl>>20), rgid, av[avRMAC:avRMAC+6])
	}
	n := binary.BigEndian.Uint32(av[avDQP:]) & 0xffffff
	r, ok := h.qps[n]
	if !ok || !r.dct || !receiving(r) {
		return nil, 0, retryExceeded("no DCT %#x in RTR: nothing answers", n)
	}
	if key, want := binary.BigEndian.Uint64(av[avDCKey:]), prm.Qpc.DcAccessKey.Get(r.qpc); key != want {
		dcOf(r).keyViolations++
		return nil, 0, retryExceeded("DCT %#x: DC access key %#x is not the DCT's: the DCT drops the request and counts it (dc_access_key_violation_count)", n, key)
	}
	// RoCE: every packet has a network header; its type as for UD
	// (flags_rqpn bits 29:28 and 25:24).
	return r, cqeGRH | uint32(roceL3(sgid))<<24, nil
}

// roceL3 is the network header type of a RoCE packet sent from source GID
// sgid (MLX5_CQE_ROCE_L3_HEADER_TYPE_*): IPv4 for a RoCE v2 IPv4-mapped
// GID, IPv6 for another RoCE v2 GID, the IB GRH for RoCE v1.
func roceL3(sgid seam.GIDEntry) uint8 {
	switch {
	case sgid.Type == gidTypeRoCEv2 && ipv4Mapped(sgid.GID):
		return cqeL3IPv4
	case sgid.Type == gidTypeRoCEv2:
		return cqeL3IPv6
	}
	return cqeL3GRH
}

func retryExceeded(format string, args ...any) *wqeFail {
	return &wqeFail{syndrome: SyndromeTransportRetry, why: fmt.Sprintf(format, args...)}
}

// dctRecvFail completes receive WQE rw of DCT r in error (the DCT stays in
// RTR) and returns the requester's failure f.
func (h *hca) dctRecvFail(r *qpObj, rw *rwqe, syndrome uint8, f *wqeFail, sigs []sigEvent) result {
	h.consume(r, rw)
	h.errCQE(r, r.recvCQ(), cqeRespErr, syndrome, 0, rw.counter)
	if f == nil {
		return result{sigs: sigs}
	}
	return result{fail: f, sigs: sigs}
}

// dcSend runs SEND, SEND_IMM and SEND_INVAL to a DCT: the message goes
// into the next WQE of the DCT's SRQ.
func (h *hca) dcSend(q *qpObj, w *sendWQE, av []byte) result {
	sges, inline, f := dataSegs(w.b[dcDataOff:], true)
	if f != nil {
		return result{fail: f}
	}
	msg, sigs, f := h.gather(q, sges, inline)
	if f != nil {
		return result{fail: f}
	}
	r, flags, f := h.dcTarget(av)
	if f != nil {
		return result{fail: f, sigs: sigs}
	}
	rw, ok := h.recvWQE(r)
	if !ok {
		return result{rnr: true, sigs: sigs}
	}
	rsigs, long, e := h.scatter(r.pdn, rw.sges, msg)
	for _, s := range rsigs {
		h.sigErrCQE(r, r.recvCQ(), s.key, s.err)
	}
	switch {
	case e != nil:
		return h.dctRecvFail(r, rw, SyndromeLocalProt, &wqeFail{syndrome: SyndromeRemoteOp, why: "the DCT's receive WQE: " + e.why}, sigs)
	case long:
		return h.dctRecvFail(r, rw, SyndromeLocalLength, &wqeFail{syndrome: SyndromeRemoteInvalReq, why: "the message is longer than the DCT's receive WQE"}, sigs)
	}
	op, imm := uint8(cqeRespSend), uint32(0)
	switch w.opcode {
	case opSendImm:
		op, imm = cqeRespSendIm, w.imm
	case opSendInval:
		op, imm = cqeRespSendIn, w.imm
		if why := h.invalidate(r, w.imm); why != "" {
			// Class J, as for RC: the requester completes; the receive
			// WQE completes in error; the DCT stays.
			h.record(&h.wqeErrors, r.ctx, fmt.Sprintf("DCT %#x receive WQE %d: %s", r.qpn, rw.counter, why))
			return h.dctRecvFail(r, rw, SyndromeRemoteInvalReq, nil, sigs)
		}
	}
	h.consume(r, rw)
	h.respCQE(r, op, rw.counter, uint32(len(msg)), imm, q.qpn, flags, w.fmCeSe&ctrlSolicited != 0)
	return result{sigs: sigs}
}

// dcWrite runs RDMA_WRITE and RDMA_WRITE_IMM to a DCT.
func (h *hca) dcWrite(q *qpObj, w *sendWQE, av []byte) result {
	if len(w.b) < dcDataOff+raddrSegSize {
		return result{fail: qpOpErr("RDMA WRITE without a remote address segment")}
	}
	seg := w.b[dcDataOff:]
	raddr, rkey := binary.BigEndian.Uint64(seg), binary.BigEndian.Uint32(seg[8:])
	sges, inline, f := dataSegs(seg[raddrSegSize:], true)
	if f != nil {
		return result{fail: f}
	}
	msg, sigs, f := h.gather(q, sges, inline)
	if f != nil {
		return result{fail: f}
	}
	r, flags, f := h.dcTarget(av)
	if f != nil {
		return result{fail: f, sigs: sigs}
	}
	if prm.Qpc.Rwe.Get(r.qpc) == 0 {
		return result{fail: &wqeFail{syndrome: SyndromeRemoteInvalReq, why: fmt.Sprintf("DCT %#x does not allow RDMA WRITE", r.qpn)}, sigs: sigs}
	}
	var rw *rwqe
	if w.opcode == opRDMAWriteImm {
		var ok bool
		if rw, ok = h.recvWQE(r); !ok {
			return result{rnr: true, sigs: sigs}
		}
	}
	if len(msg) > 0 { // a zero-length RDMA WRITE checks no rkey
		ev, e := h.write(rkey, r.pdn, raddr, msg, accRemoteWrite)
		if e != nil {
			return result{fail: &wqeFail{syndrome: SyndromeRemoteAccess, why: fmt.Sprintf("DCT %#x rkey: %s", r.qpn, e.why)}, sigs: sigs}
		}
		if ev != nil {
			h.sigErrCQE(r, r.recvCQ(), ev.key, ev.err)
		}
	}
	if rw != nil {
		h.consume(r, rw)
		h.respCQE(r, cqeRespWRImm, rw.counter, uint32(len(msg)), w.imm, q.qpn, flags, w.fmCeSe&ctrlSolicited != 0)
	}
	return result{sigs: sigs}
}

// dcRead runs RDMA_READ from a DCT: the local data segments say how much
// and where.
func (h *hca) dcRead(q *qpObj, w *sendWQE, av []byte) result {
	if len(w.b) < dcDataOff+raddrSegSize {
		return result{fail: qpOpErr("RDMA READ without a remote address segment")}
	}
	seg := w.b[dcDataOff:]
	raddr, rkey := binary.BigEndian.Uint64(seg), binary.BigEndian.Uint32(seg[8:])
	sges, _, f := dataSegs(seg[raddrSegSize:], false)
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
	r, _, f := h.dcTarget(av)
	if f != nil {
		return result{fail: f}
	}
	if prm.Qpc.Rre.Get(r.qpc) == 0 {
		return result{fail: &wqeFail{syndrome: SyndromeRemoteInvalReq, why: fmt.Sprintf("DCT %#x does not allow RDMA READ", r.qpn)}}
	}
	var msg []byte
	if total > 0 {
		var ev *sigEvent
		var e *keyErr
		if msg, ev, e = h.read(rkey, r.pdn, raddr, total, accRemoteRead); e != nil {
			return result{fail: &wqeFail{syndrome: SyndromeRemoteAccess, why: fmt.Sprintf("DCT %#x rkey: %s", r.qpn, e.why)}}
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

// dcAtomic runs ATOMIC_CS and ATOMIC_FA on a DCT: 8 bytes at the remote
// address, naturally aligned, through an rkey with remote atomic access,
// with the DCT's atomics enabled (rae). The operands are big-endian in the
// WQE (struct mlx5_wqe_atomic_seg: swap or add, then compare); memory is
// read and written in host byte order, the atomic_req_8B_endianness_mode
// every profile reports (1, host endianness, as mlx5_core sets it). The
// original 8 bytes land in the local data segments, which must hold them.
func (h *hca) dcAtomic(q *qpObj, w *sendWQE, av []byte) result {
	if len(w.b) < dcDataOff+raddrSegSize+atomicSegSize {
		return result{fail: qpOpErr("an atomic without its remote address and atomic segments")}
	}
	seg := w.b[dcDataOff:]
	raddr, rkey := binary.BigEndian.Uint64(seg), binary.BigEndian.Uint32(seg[8:])
	swapAdd := binary.BigEndian.Uint64(seg[raddrSegSize:])
	compare := binary.BigEndian.Uint64(seg[raddrSegSize+8:])
	sges, _, f := dataSegs(seg[raddrSegSize+atomicSegSize:], false)
	if f != nil {
		return result{fail: f}
	}
	var room uint64
	for _, s := range sges {
		if e := h.reach(s.key, q.pdn, s.addr, s.n, accLocalWrite); e != nil {
			return result{fail: protErr("lkey: %s", e.why)}
		}
		room += s.n
	}
	if room < atomicBytes {
		return result{fail: &wqeFail{syndrome: SyndromeLocalLength, why: fmt.Sprintf("the atomic's data segments hold %d bytes, not %d", room, atomicBytes)}}
	}
	r, _, f := h.dcTarget(av)
	if f != nil {
		return result{fail: f}
	}
	switch {
	case prm.Qpc.Rae.Get(r.qpc) == 0:
		return result{fail: &wqeFail{syndrome: SyndromeRemoteInvalReq, why: fmt.Sprintf("DCT %#x does not allow atomics", r.qpn)}}
	case raddr%atomicBytes != 0:
		return result{fail: &wqeFail{syndrome: SyndromeRemoteInvalReq, why: fmt.Sprintf("DCT %#x: the atomic's address %#x is not 8-byte aligned", r.qpn, raddr)}}
	}
	old, e := h.atomic(rkey, r.pdn, raddr, w.opcode, swapAdd, compare)
	if e != nil {
		return result{fail: &wqeFail{syndrome: SyndromeRemoteAccess, why: fmt.Sprintf("DCT %#x rkey: %s", r.qpn, e.why)}}
	}
	sigs, _, ke := h.scatter(q.pdn, sges, old)
	if ke != nil {
		return result{fail: protErr("lkey: %s", ke.why), sigs: sigs}
	}
	return result{byteCnt: atomicBytes, sigs: sigs}
}

// atomic runs an 8-byte compare-and-swap or fetch-and-add at addr of rkey
// for a responder of PD pdn and returns the original bytes. Not through a
// signature mkey: its wire and memory bytes differ.
func (h *hca) atomic(rkey, pdn uint32, addr uint64, op uint8, swapAdd, compare uint64) ([]byte, *keyErr) {
	mk, e := h.mkey(rkey, pdn, accRemoteAtomic)
	if e != nil {
		return nil, e
	}
	if mk.sigOn() {
		return nil, keyFail("key %#x: an atomic through a signature mkey", rkey)
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

// rnrTimerOf is the RNR NAK timer (min_rnr_nak) of the responder a send of
// q that found no receive WQE was for: the DCT of a DCI's WQE, the QP an
// RC QP points at.
func (h *hca) rnrTimerOf(q *qpObj, w *sendWQE) int64 {
	r, ok := h.qps[uint32(prm.Qpc.RemoteQpn.Get(q.qpc))]
	if isDCI(q) && len(w.b) >= dcDataOff {
		r, ok = h.qps[binary.BigEndian.Uint32(w.b[dcAVOff+avDQP:])&0xffffff]
	}
	if !ok {
		return rnrTimer[0]
	}
	return rnrTimer[prm.Qpc.MinRnrNak.Get(r.qpc)&31]
}

// DCTKeyViolations returns the dc_access_key_violation_count of DCT dctn
// (any context's): the requests the DCT dropped because their DC access
// key was not its own. ok is false when there is no such DCT.
func (d *Device) DCTKeyViolations(dctn uint32) (n uint32, ok bool) {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	r, ok := d.h.qps[dctn]
	if !ok || !r.dct {
		return 0, false
	}
	if r.dc == nil {
		return 0, true
	}
	return r.dc.keyViolations, true
}

// DCIErroredStreams returns the stream channels of DCI qpn (any context's)
// that are in error, in increasing order; ok is false when there is no
// such DCI.
func (d *Device) DCIErroredStreams(qpn uint32) (channels []uint16, ok bool) {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	q, ok := d.h.qps[qpn]
	if !ok || !isDCI(q) {
		return nil, false
	}
	if q.dc != nil {
		for ch := range q.dc.errored {
			channels = append(channels, ch)
		}
	}
	slices.Sort(channels)
	return channels, true
}
