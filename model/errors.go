package model

import (
	"fmt"

	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// KernelError is a call the model's kernel side refused, as mlx5_ib
// would: the errno, and the kernel rule that refused it. errors.Is(err,
// unix.EINVAL) and the like hold.
type KernelError struct {
	Call  string     // "devx obj create"
	Errno unix.Errno // what the ioctl returns
	Rule  string     // the kernel rule, e.g. "devx_is_obj_create_cmd"
	// Cmd is the firmware's failure behind the errno, when the call ran a
	// command that failed and no output mailbox carries it back (destroy),
	// unless Options.StatusErrno hides it as Linux 6.1 does.
	Cmd *prm.CmdError
}

func (e *KernelError) Error() string {
	return fmt.Sprintf("model: %s: %v (%s)", e.Call, e.Errno, e.Rule)
}

// Unwrap returns the errno, and the firmware's failure if there is one.
func (e *KernelError) Unwrap() []error {
	if e.Cmd != nil {
		return []error{e.Errno, e.Cmd}
	}
	return []error{e.Errno}
}

// FirmwareError is a command the model's firmware failed, returned with
// the output mailbox that carries its status and syndrome (see Options).
// errors.Is holds for the command's prm.Status and for unix.EREMOTEIO, the
// errno of mlx5_cmd_do for a failed status.
type FirmwareError struct {
	Call string
	Cmd  *prm.CmdError
}

func (e *FirmwareError) Error() string {
	return fmt.Sprintf("model: %s: %v (%v)", e.Call, e.Cmd, unix.EREMOTEIO)
}

// Unwrap returns the command error and EREMOTEIO.
func (e *FirmwareError) Unwrap() []error { return []error{e.Cmd, unix.EREMOTEIO} }

func kerr(call string, errno unix.Errno, rule string) error {
	return &KernelError{Call: call, Errno: errno, Rule: rule}
}

// statusErrno is the kernel's cmd_status_to_err (mlx5_core cmd.c): the
// errno mlx5_cmd_exec returns for a firmware status.
func statusErrno(s prm.Status) unix.Errno {
	switch s {
	case prm.MLX5_CMD_STAT_OK:
		return 0
	case prm.MLX5_CMD_STAT_INT_ERR:
		return unix.EIO
	case prm.MLX5_CMD_STAT_BAD_OP_ERR:
		return unix.EINVAL
	case prm.MLX5_CMD_STAT_BAD_PARAM_ERR:
		return unix.EINVAL
	case prm.MLX5_CMD_STAT_BAD_SYS_STATE_ERR:
		return unix.EIO
	case prm.MLX5_CMD_STAT_BAD_RES_ERR:
		return unix.EINVAL
	case prm.MLX5_CMD_STAT_RES_BUSY:
		return unix.EBUSY
	case prm.MLX5_CMD_STAT_LIM_ERR:
		return unix.ENOMEM
	case prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR:
		return unix.EINVAL
	case prm.MLX5_CMD_STAT_IX_ERR:
		return unix.EINVAL
	case prm.MLX5_CMD_STAT_NO_RES_ERR:
		return unix.EAGAIN
	case prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR:
		return unix.EIO
	case prm.MLX5_CMD_STAT_BAD_OUTP_LEN_ERR:
		return unix.EIO
	case prm.MLX5_CMD_STAT_BAD_QP_STATE_ERR:
		return unix.EINVAL
	case prm.MLX5_CMD_STAT_BAD_PKT_ERR:
		return unix.EINVAL
	case prm.MLX5_CMD_STAT_BAD_SIZE_OUTS_CQES_ERR:
		return unix.EINVAL
	}
	return unix.EIO
}

// Syndromes the model's firmware reports with a failed status. The
// firmware's own syndromes are not public; these are the model's, stable
// so that tests can tell one failure from another. Each is 0x4d0000NN
// ('M' for model).
const (
	SyndromeBadOpcode    uint32 = 0x4d000001 // opcode not implemented
	SyndromeBadOpMod     uint32 = 0x4d000002 // op_mod not known for the opcode
	SyndromeInputLength  uint32 = 0x4d000003 // input mailbox shorter than the command
	SyndromeOutputLength uint32 = 0x4d000004 // output mailbox shorter than the answer
	SyndromeNoObject     uint32 = 0x4d000005 // the number names no object
	SyndromeWrongUID     uint32 = 0x4d000006 // the object belongs to another uid
	SyndromeQPState      uint32 = 0x4d000007 // transition from the wrong QP state
	SyndromeNoCap        uint32 = 0x4d000008 // a field needs a capability the profile lacks
	SyndromeBadValue     uint32 = 0x4d000009 // a field's value is out of range
	SyndromeLimit        uint32 = 0x4d00000a // the log_max_* limit is reached
	SyndromeInUse        uint32 = 0x4d00000b // destroy of an object others refer to
	SyndromeStreamState  uint32 = 0x4d00000c // a DCI stream reset of a stream channel not in error
)

// fwErr is a failed firmware command: status and syndrome.
type fwErr struct {
	status   prm.Status
	syndrome uint32
}

func fail(s prm.Status, syndrome uint32) *fwErr { return &fwErr{s, syndrome} }

func badParam(syndrome uint32) *fwErr { return fail(prm.MLX5_CMD_STAT_BAD_PARAM_ERR, syndrome) }
