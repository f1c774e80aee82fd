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
