package mlx5

import (
	"fmt"

	"github.com/mlx5go/mlx5go/prm"
)

// DC, mlx5's dynamically connected transport: a DCI (QPTypeDCI) sends to
// any DCT (QPTypeDCT) of the fabric through one send queue, each work
// request naming its DCT (SendWR.AH, RemoteQPN, DCAccessKey). With
// streams (QPOptions.DCIStreams) the DCI runs its work requests on
// 2^LogConcurrent stream channels (SendWR.StreamID): an error on one
// flushes that stream's work only, and ResetDCIStream brings it back,
// until 2^LogErrored streams are in error at once and the QP goes to ERR.

// mlx5QPCOptMask32DCIStreamChannelID is
// MLX5_QPC_OPT_MASK_32_DCI_STREAM_CHANNEL_ID (rdma-core's mlx5_ifc.h): bit
// 0 of opt_param_mask_95_32, the optional parameter that names
// qpc_data_ext.dci_stream_channel_id.
const mlx5QPCOptMask32DCIStreamChannelID = 1 << 0

// ResetDCIStream resets the DCI's stream channel stream after an error
// on it (mlx5dv_dci_stream_id_reset): the device leaves the stream's error
// state and runs work posted on it again. It is libmlx5's DEVX command,
// RTS2RTS_QP with the QP context extension naming the stream
// (qpc_data_ext.dci_stream_channel_id and its optional parameter bit),
// byte for byte.
//
// The rule of mlx5dv_dci_stream_id_reset(3): an error on a stream flushes
// that stream's work requests only, in order, while the other streams go
// on. After an error completion, read the QP's state (Query with
// QPAttrState): if it is still RTS, wait until the stream's work requests
// have all completed (flushed, WCWRFlushErr), then reset the stream and
// post on it again; if it is ERR (2^LogErrored streams were in error at
// once, or the error was the QP's), the streams cannot be reset: recover
// the QP (Modify to RESET, then to RTS) and post again.
//
// "Not in RTS" is the state the driver last saw (a Modify, or a Query
// with QPAttrState), as libmlx5 checks its ibv_qp state: a QP the device
// moved to ERR is refused only once a Query has seen it (the firmware
// refuses the command otherwise). Nothing is sent to the device when the
// reset is refused: ErrUnsupported (EOPNOTSUPP) when the device has no
// errored streams (Caps.MaxDCIStreams.LogErrored 0) or no QP context
// extension (DCCaps.QPCExtension); ErrInvalid (EINVAL) for a QP that is
// not a DCI, a DCI without streams (its first error takes it to ERR), a
// stream it does not have (below 2^LogConcurrent of its DCIStreams) and a
// QP not in RTS; ErrNoDEVX on a context without DEVX. libmlx5 sends the
// command for a DCI without streams and for any stream id, and refuses a
// QP not in RTS with EOPNOTSUPP (docs/MLX5.md, "Differences from
// libmlx5"). A reset the firmware refuses is an *Error wrapping the
// *prm.CmdError (status and syndrome) and the errno libmlx5 returns for
// that status (mlx5_cmd_status_to_err: EINVAL for a bad parameter or
// state, EIO, EBUSY, ENOMEM, EAGAIN).
func (qp *QP) ResetDCIStream(stream uint16) error {
	const op = "reset dci stream"
	if err := qp.usable(op); err != nil {
		return err
	}
	if qp.g.closed() {
		return opErr(op, qp.name, ErrClosed)
	}
	c := qp.c
	if qp.typ != QPTypeDCI {
		return invalid(op, qp.name, "a %v QP has no DCI streams", qp.typ)
	}
	if m := c.caps.MaxDCIStreams; m.LogErrored == 0 {
		return unsupported(op, qp.name, "the device has no errored streams to reset (Caps.MaxDCIStreams: dci_streams_caps max_log_num_errored 0)")
	}
	general, err := c.generalCaps()
	if err != nil {
		return wrapAs(op, qp.name, "", err)
	}
	if prm.CmdHcaCap.QpcExtension.Get(general) == 0 {
		return unsupported(op, qp.name, "the device has no QP context extension (qpc_extension), which names the stream")
	}
	switch {
	case !c.devx:
		return opErr(op, qp.name, ErrNoDEVX)
	case !qp.dciStreams:
		return invalid(op, qp.name, "a DCI without streams (QPOptions.DCIStreams) has no stream to reset: an error takes it to ERR; recover the QP (Modify to RESET, then RTS)")
	case stream > qp.sq.maxStream:
		return invalid(op, qp.name, "stream %d of a DCI of %d streams (QPOptions.DCIStreams): 0 to %d", stream, int(qp.sq.maxStream)+1, qp.sq.maxStream)
	case qp.state != QPStateRTS:
		return invalid(op, qp.name, "the QP is in %v (as last modified or queried), not RTS: a DCI in ERR is recovered by Modify to RESET, then RTS", qp.state)
	}
	in := mailbox(prm.Rts2rtsQpIn.Layout().Size, prm.MLX5_CMD_OP_RTS2RTS_QP)
	prm.Rts2rtsQpIn.QpcExt.Set(in, 1)
	prm.Rts2rtsQpIn.Qpn.Set(in, uint64(qp.qpn))
	prm.Rts2rtsQpIn.OptParamMask9532.Set(in, mlx5QPCOptMask32DCIStreamChannelID)
	prm.QpcExt.DciStreamChannelId.At(prm.Rts2rtsQpIn.QpcDataExt).Set(in, uint64(stream))
	out := make([]byte, prm.Rts2rtsQpOut.Layout().Size)
	err = c.dev.ObjModify(qp.handle, in, out)
	if err := checkOutput(op, qp.name, in, out, err); err != nil {
		return withStatusErrno(wrapAs(op, qp.name, fmt.Sprintf("stream %d", stream), err))
	}
	return nil
}

// DCCaps are the DC capabilities of a device that a DC user checks: the
// dci_streams of mlx5dv_query_device and the general HCA caps (the PRM's
// names) that bound DCIs and DCTs. Context.DCCaps reads them.
type DCCaps struct {
	// DCT: the device has the DC transport (dct).
	DCT bool
	// Streams is dci_streams as mlx5dv_query_device reports it
	// (Caps.MaxDCIStreams, from the kernel's QUERY_DEVICE_EX): the most
	// concurrent and errored stream channels a DCI may ask for, log2.
	Streams DCIStreams
	// LogMaxStreamChannels and LogMaxErroredStreams are the HCA caps
	// log_max_dci_stream_channels and log_max_dci_errored_streams ("max
	// DCI error stream channels supported per DCI before a DCI move to
	// error state"), which mlx5_ib reports as Streams.
	LogMaxStreamChannels, LogMaxErroredStreams int
	// QPCExtension: qpc_extension, the QP context extension
	// ResetDCIStream names the stream in.
	QPCExtension bool
	// StreamReset: ResetDCIStream can run on the device: errored streams
	// (Streams.LogErrored > 0) and the QP context extension, as
	// mlx5dv_dci_stream_id_reset requires.
	StreamReset bool
	// LogMaxRAReq and LogMaxRARes are log_max_ra_req_dc and
	// log_max_ra_res_dc: the outstanding RDMA READs and atomics of a DC
	// initiator and a DC target, log2 (mlx5_ib bounds a DCI's
	// max_rd_atomic by 2^log_max_ra_res_dc).
	LogMaxRAReq, LogMaxRARes int
	// MaxWQESize is max_wqe_sz_sq_dc: the bytes of a DCI's largest send
	// WQE.
	MaxWQESize int
	// LogMaxDCTConnections is log_max_dct_connections: the DCIs a DCT
	// may be connected to at once, log2 (0: not reported).
	LogMaxDCTConnections int
	// LogMaxAtomicSize is log_max_atomic_size_dc: the largest atomic on
	// a DCI, log2 of its bytes.
	LogMaxAtomicSize int
	// ReqScatterToCQE: dc_req_scat_data_cqe, a DCI may scatter a small
	// RDMA READ response into its CQE (mlx5 does not ask for it).
	ReqScatterToCQE bool
	// DCv2: dc_v2, the second version of the DC transport.
	DCv2 bool
	// LAGDCT: lag_dct, DCTs while the ports are bonded (2 bits).
	LAGDCT int
}

// DCCaps returns the device's DC capabilities: Caps.MaxDCIStreams and
// the general HCA caps (read once per context, as SigCaps reads them).
func (c *Context) DCCaps() (DCCaps, error) {
	const op = "query dc caps"
	if err := c.checkOpen(op); err != nil {
		return DCCaps{}, err
	}
	general, err := c.generalCaps()
	if err != nil {
		return DCCaps{}, wrapAs(op, c.name, "", err)
	}
	return dcCapsOf(c.caps.MaxDCIStreams, general), nil
}

// dcCapsOf reads DCCaps from dci_streams and cmd_hca_cap.
func dcCapsOf(streams DCIStreams, general []byte) DCCaps {
	get := func(f prm.Field) int { return int(f.Get(general)) }
	d := DCCaps{
		DCT: get(prm.CmdHcaCap.Dct) != 0, Streams: streams,
		LogMaxStreamChannels: get(prm.CmdHcaCap.LogMaxDciStreamChannels), LogMaxErroredStreams: get(prm.CmdHcaCap.LogMaxDciErroredStreams),
		QPCExtension: get(prm.CmdHcaCap.QpcExtension) != 0,
		LogMaxRAReq:  get(prm.CmdHcaCap.LogMaxRaReqDc), LogMaxRARes: get(prm.CmdHcaCap.LogMaxRaResDc),
		MaxWQESize: get(prm.CmdHcaCap.MaxWqeSzSqDc), LogMaxDCTConnections: get(prm.CmdHcaCap.LogMaxDctConnections),
		LogMaxAtomicSize: get(prm.CmdHcaCap.LogMaxAtomicSizeDc),
		ReqScatterToCQE:  get(prm.CmdHcaCap.DcReqScatDataCqe) != 0, DCv2: get(prm.CmdHcaCap.DcV2) != 0, LAGDCT: get(prm.CmdHcaCap.LagDct),
	}
	d.StreamReset = d.Streams.LogErrored > 0 && d.QPCExtension
	return d
}
