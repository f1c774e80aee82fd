package mlx5

import (
	"errors"
	"fmt"

	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// checkOutput turns a DEVX call's result into the error of op on obj:
// the kernel's error (which wraps the errno), unless it is EREMOTEIO (the
// firmware failed) or nil, in which case the output mailbox's status
// decides: a *prm.CmdError naming the opcode, op_mod, status and
// syndrome, printed once, with the errno the kernel returned beside it.
// in may be nil when the command is not known (asynchronous completions).
func checkOutput(op, obj string, in, out []byte, err error) error {
	if err != nil && !errors.Is(err, unix.EREMOTEIO) {
		return opErr(op, obj, err)
	}
	if in == nil {
		in = make([]byte, 8)
	}
	if ferr := prm.Check(in, out); ferr != nil {
		if err != nil {
			return opErr(op, obj, fmt.Errorf("%w (%w)", ferr, unix.EREMOTEIO))
		}
		return opErr(op, obj, ferr)
	}
	if err != nil {
		return opErr(op, obj, err)
	}
	return nil
}

// withStatusErrno adds to a firmware failure the errno libmlx5 returns
// for its status (mlx5_get_cmd_status_err: EINVAL for BAD_PARAM_ERR, and
// so on), so that errors.Is finds the errno a libmlx5 caller sees, and
// errors.As into a unix.Errno finds it before the kernel's EREMOTEIO.
// Other errors are returned as they are.
func withStatusErrno(err error) error {
	var e *Error
	var ferr *prm.CmdError
	if !errors.As(err, &e) || !errors.As(err, &ferr) {
		return err
	}
	return &Error{Op: e.Op, Obj: e.Obj, Err: &reasonError{msg: e.Err.Error(), errs: []error{cmdStatusErrno(ferr.Status), e.Err}}}
}

// cmdStatusErrnos is libmlx5's mlx5_cmd_status_to_err (rdma-core 44.0,
// providers/mlx5/mlx5.c), which mlx5_get_cmd_status_err applies to a
// command the firmware refused: the errno that mlx5dv_dci_stream_id_reset,
// the crypto logins and the DEK calls return. It is the kernel's
// cmd_status_to_err table; a status not listed is EIO.
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
