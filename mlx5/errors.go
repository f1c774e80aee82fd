package mlx5

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Sentinel errors: every error mlx5 returns for these conditions wraps
// one, so errors.Is finds it, together with the operation and the object.
var (
	// ErrClosed: the object, or the context it belongs to, is closed.
	ErrClosed = errors.New("use of closed object")
	// ErrQueueFull: the work queue has no room for the work request until
	// completions are polled.
	ErrQueueFull = errors.New("work queue full")
	// ErrNoDEVX: the context has no DEVX (the kernel refused it, or it was
	// not requested).
	ErrNoDEVX = errors.New("the context has no DEVX (the kernel refused it, or it was not requested)")
	// ErrUnsupported: the device does not support what was asked. It comes
	// with unix.EOPNOTSUPP, as libmlx5 reports it.
	ErrUnsupported = errors.New("not supported by the device")
	// ErrInvalid: an argument is invalid; nothing was sent to the device.
	ErrInvalid = errors.New("invalid argument")
	// ErrCQOverrun: the device reported that the CQ overran (more
	// completions were due than it holds); completions were lost and the
	// CQ takes no more. Close the QPs on it and the CQ.
	ErrCQOverrun = errors.New("completion queue overrun: completions were lost")
)

// Error is a failed operation on an object: Op is what was done ("post
// send"), Obj names the object ("QP 0x1a2"), Err is the cause, which
// wraps a sentinel above, an errno, or a *prm.CmdError.
type Error struct {
	Op  string
	Obj string
	Err error
}

func (e *Error) Error() string {
	if e.Obj == "" {
		return "mlx5: " + e.Op + ": " + e.Err.Error()
	}
	return "mlx5: " + e.Op + " " + e.Obj + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// opErr wraps err with the operation and the object.
func opErr(op, obj string, err error) error { return &Error{Op: op, Obj: obj, Err: err} }

// invalid is a bad-argument error: ErrInvalid and EINVAL, with what is
// wrong.
func invalid(op, obj, format string, args ...any) error {
	return &Error{Op: op, Obj: obj, Err: &reasonError{msg: fmt.Sprintf(format, args...), errs: []error{ErrInvalid, unix.EINVAL}}}
}

// unsupported is ErrUnsupported and EOPNOTSUPP, with what the device lacks.
func unsupported(op, obj, format string, args ...any) error {
	return &Error{Op: op, Obj: obj, Err: &reasonError{msg: fmt.Sprintf(format, args...), errs: []error{ErrUnsupported, unix.EOPNOTSUPP}}}
}

// reasonError is a message that wraps sentinels without printing them.
type reasonError struct {
	msg  string
	errs []error
}

func (e *reasonError) Error() string   { return e.msg }
func (e *reasonError) Unwrap() []error { return e.errs }

func qpName(qpn uint32) string { return fmt.Sprintf("QP %#x", qpn) }
func cqName(cqn uint32) string { return fmt.Sprintf("CQ %#x", cqn) }
func mkeyName(k uint32) string { return fmt.Sprintf("mkey %#x", k) }
