package model

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
)

// The DC transport (dynamically connected): a DCI (qpc.st DCI) reaches a
// DCT by number, WQE by WQE. Its WQEs run through the transports' one
// requester and responder (transport.go, dcTransport); what is DC's own
// is here: finding the DCT and the stream channels' errors. docs/MODEL.md,
// section "DC", gives every rule below with its source; the short
// version:
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
//     rights, PD and SRQ, but an error never takes it out of RTR
//     (dcTransport.respStays): it serves every DCI, and mlx5_ib has no
//     transition that would bring it back (mlx5_ib_modify_dct).
//   - Stream channels: a WR's stream channel is its dci_stream_channel_id
//     modulo 2^log_num_dci_stream_channels. An error puts the channel in
//     error: its later WRs complete with WR_FLUSH_ERR, in order, until
//     RTS2RTS_QP resets it, while the other channels' WRs run; when
//     2^log_num_dci_errored_streams channels are in error the QP goes to
//     ERR (mlx5dv_dci_stream_id_reset(3)). The channels run apart, each
//     in order (dcistreams.go). A DCI without streams has one channel and
//     an errored limit of one: an error takes it to ERR, as for RC.

// The DC access key's place in the address vector (struct mlx5_wqe_av's
// key union: qkey for UD, dc_key for DC; rdma-core 44.0's mlx5dv.h).
const avDCKey = 0

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
func dciChannel(q *qpObj, w *sendWQE) uint16 { return streamChannel(q, w.stream) }

// streamChannel is the stream channel of stream id on DCI q.
func streamChannel(q *qpObj, id uint16) uint16 {
	n := uint32(1) << prm.Qpc.LogNumDciStreamChannels.Get(q.qpc)
	return uint16(uint32(id) & (n - 1))
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

// dctPeer finds the DCT that av, the address vector of a DCI's WQE,
// reaches, and the flags_rqpn bits of its receive completions. The
// address must be the model's port (avPort); the DCT, numbered by
// dqp_dct's low 24 bits, must be in RTR; the access key must be the
// DCT's, else the DCT drops the request and counts it. Nothing answers a
// dropped request: the requester's retries run out.
func (h *hca) dctPeer(av []byte) (peer, *wqeFail) {
	sgid, _, f := h.avPort(av)
	if f != nil {
		return peer{}, f
	}
	n := binary.BigEndian.Uint32(av[avDQP:]) & 0xffffff
	r, ok := h.qps[n]
	if !ok || !r.dct || !receiving(r) {
		return peer{}, retryExceeded("no DCT %#x in RTR: nothing answers", n)
	}
	if key, want := binary.BigEndian.Uint64(av[avDCKey:]), prm.Qpc.DcAccessKey.Get(r.qpc); key != want {
		dcOf(r).keyViolations++
		return peer{}, retryExceeded("DCT %#x: DC access key %#x is not the DCT's: the DCT drops the request and counts it (dc_access_key_violation_count)", n, key)
	}
	// RoCE: every packet has a network header; its type as for UD
	// (flags_rqpn bits 29:28 and 25:24).
	return peer{r: r, flags: cqeGRH | uint32(roceL3(sgid))<<24}, nil
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
