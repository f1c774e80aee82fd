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
	if e == nil {
		return "<nil>"
	}
	s := "mlx5: " + e.Op
	if e.Obj != "" {
		s += " " + e.Obj
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// opErr wraps err with the operation and the object.
func opErr(op, obj string, err error) error { return &Error{Op: op, Obj: obj, Err: err} }

// wrapAs makes err, which a step of op on obj returned, op's error on obj,
// naming each once: an *Error of the step gives its cause, after the step
// ("mlx5: connect QP 0x1a2: to INIT: ..."); with step "", the step is the
// *Error's own operation (and its object, if another), and an *Error of
// op itself is returned as it is. Any other error is the cause, after the
// step if there is one.
func wrapAs(op, obj, step string, err error) error {
	e, ok := err.(*Error)
	switch {
	case !ok && step == "":
		return &Error{Op: op, Obj: obj, Err: err}
	case !ok:
		return &Error{Op: op, Obj: obj, Err: &stepError{step: step, err: err}}
	case step == "" && e.Op == op:
		return e
	case step == "":
		step = e.Op
		if e.Obj != obj && e.Obj != "" {
			step += " " + e.Obj
		}
	}
	return &Error{Op: op, Obj: obj, Err: &stepError{step: step, err: e.Err}}
}

// stepError is the cause of a failed step of an operation, after the
// step's name.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// unusable is the error of a call on a nil object, or on a zero value
// the package did not make (&QP{}): ErrInvalid, as os.File's methods
// return it; typ is the object's type, ctor what makes one.
func unusable(op, typ, ctor string, isNil bool) error {
	if isNil {
		return invalid(op, typ, "nil *%s", typ)
	}
	return invalid(op, typ, "a zero %s, not made by %s", typ, ctor)
}

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
func pdName(pdn uint32) string { return fmt.Sprintf("PD %#x", pdn) }
func cqName(cqn uint32) string { return fmt.Sprintf("CQ %#x", cqn) }
func mkeyName(k uint32) string { return fmt.Sprintf("mkey %#x", k) }
