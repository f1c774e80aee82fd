package mlx5

import (
	"errors"
	"fmt"

	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
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
	if qp.g.closed() {
		return opErr(op, qp.name, ErrClosed)
	}
	c := qp.c
	if qp.typ != QPTypeDCI {
		return invalid(op, qp.name, "a %v QP has no DCI streams", qp.typ)
	}
	if m := c.Caps.MaxDCIStreams; m.LogErrored == 0 {
		return unsupported(op, qp.name, "the device has no errored streams to reset (Caps.MaxDCIStreams: dci_streams_caps max_log_num_errored 0)")
	}
	general, err := c.generalCaps()
	if err != nil {
		return opErr(op, qp.name, err)
	}
	if prm.CmdHcaCap.QpcExtension.Get(general) == 0 {
		return unsupported(op, qp.name, "the device has no QP context extension (qpc_extension), which names the stream")
	}
	switch {
	case !c.devx:
		return opErr(op, qp.name, ErrNoDEVX)
	case !qp.dciStreams:
		return invalid(op, qp.name, "a DCI without streams (QPOptions.DCIStreams) has no stream to reset: an error takes it to ERR; recover the QP (Modify to RESET, then RTS)")
	case stream > qp.maxStream:
		return invalid(op, qp.name, "stream %d of a DCI of %d streams (QPOptions.DCIStreams): 0 to %d", stream, int(qp.maxStream)+1, qp.maxStream)
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
	if err != nil && !errors.Is(err, unix.EREMOTEIO) {
		return opErr(op, qp.name, err) // the kernel's
	}
	if ferr := prm.Check(in, out); ferr != nil {
		errs := []error{ferr, cmdStatusErrno(prm.Status(prm.MboxOut.Status.Get(out)))}
		if err != nil {
			errs = append(errs, err) // the kernel's EREMOTEIO
		}
		return &Error{Op: op, Obj: qp.name, Err: &reasonError{msg: fmt.Sprintf("stream %d: %v", stream, ferr), errs: errs}}
	}
	if err != nil {
		return opErr(op, qp.name, err) // EREMOTEIO with status OK
	}
	return nil
}

// cmdStatusErrnos is libmlx5's mlx5_cmd_status_to_err (rdma-core 44.0,
// providers/mlx5), which mlx5dv_dci_stream_id_reset returns for a command
// the firmware refused (the same table as the kernel's
// cmd_status_to_err); a status not listed is EIO.
var cmdStatusErrnos = map[prm.Status]unix.Errno{
	prm.MLX5_CMD_STAT_INT_ERR:                unix.EIO,
	prm.MLX5_CMD_STAT_BAD_OP_ERR:             unix.EINVAL,
	prm.MLX5_CMD_STAT_BAD_PARAM_ERR:          unix.EINVAL,
	prm.MLX5_CMD_STAT_BAD_SYS_STATE_ERR:      unix.EIO,
	prm.MLX5_CMD_STAT_BAD_RES_ERR:            unix.EINVAL,
	prm.MLX5_CMD_STAT_RES_BUSY:               unix.EBUSY,
	prm.MLX5_CMD_STAT_LIM_ERR:                unix.ENOMEM,
	prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR:      unix.EINVAL,
	prm.MLX5_CMD_STAT_IX_ERR:                 unix.EINVAL,
	prm.MLX5_CMD_STAT_NO_RES_ERR:             unix.EAGAIN,
	prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR:        unix.EIO,
	prm.MLX5_CMD_STAT_BAD_OUTP_LEN_ERR:       unix.EIO,
	prm.MLX5_CMD_STAT_BAD_QP_STATE_ERR:       unix.EINVAL,
	prm.MLX5_CMD_STAT_BAD_PKT_ERR:            unix.EINVAL,
	prm.MLX5_CMD_STAT_BAD_SIZE_OUTS_CQES_ERR: unix.EINVAL,
}

// cmdStatusErrno is the errno libmlx5 gives a failed command's status.
func cmdStatusErrno(s prm.Status) unix.Errno {
	if e, ok := cmdStatusErrnos[s]; ok {
		return e
	}
	return unix.EIO
}
