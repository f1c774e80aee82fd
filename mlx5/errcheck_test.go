package mlx5

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// CheckAPIError fails tb unless err is an error of the public API as
// docs/MLX5.md ("Errors") promises it (apiErrorDefect says how). Tests of
// both packages call it wherever the API returns an error.
func CheckAPIError(tb testing.TB, err error) {
	tb.Helper()
	if d := apiErrorDefect(err); d != "" {
		tb.Errorf("%s\n\terror: %v (%T)", d, err, err)
	}
}

// apiErrorDefect says what is wrong with err as an error the public API
// returned, or "" if nothing is:
//   - it is a *Error itself (not wrapped in something else), with Op and
//     Obj set;
//   - its message is "mlx5: <Op> <Obj>: <cause>", with "mlx5:" once: no
//     *Error hides in its cause (an operation's error wrapping another's
//     names the operation, or the object, twice), and a numbered object
//     ("QP 0x1a2") is not named again in the cause;
//   - the sentinels come with their errnos (ErrInvalid with EINVAL,
//     ErrUnsupported with EOPNOTSUPP);
//   - a kernel refusal (uverbs' CallError, the model's KernelError)
//     reaches its errno through errors.Is;
//   - a firmware failure (the model's FirmwareError, an errno of
//     EREMOTEIO) carries a *prm.CmdError with its status, and errors.Is
//     finds the status.
func apiErrorDefect(err error) string {
	if err == nil {
		return "no error"
	}
	e, ok := err.(*Error)
	if !ok {
		return fmt.Sprintf("the error is a %T, not a *mlx5.Error", err)
	}
	if e.Op == "" || e.Obj == "" {
		return fmt.Sprintf("the *mlx5.Error names no operation or no object (Op %q, Obj %q)", e.Op, e.Obj)
	}
	if e.Err == nil {
		return "the *mlx5.Error has no cause"
	}
	msg := err.Error()
	if prefix := "mlx5: " + e.Op + " " + e.Obj + ": "; !strings.HasPrefix(msg, prefix) {
		return fmt.Sprintf("the message does not begin %q", prefix)
	}
	if n := strings.Count(msg, "mlx5:"); n != 1 {
		return fmt.Sprintf("the message says \"mlx5:\" %d times", n)
	}
	var inner *Error
	if errors.As(e.Err, &inner) {
		return fmt.Sprintf("the cause wraps another *mlx5.Error (%q on %q)", inner.Op, inner.Obj)
	}
	if strings.ContainsAny(e.Obj, "0123456789") && strings.Contains(e.Err.Error(), e.Obj) {
		return fmt.Sprintf("the cause names %q again", e.Obj)
	}
	if errors.Is(err, ErrInvalid) && !errors.Is(err, unix.EINVAL) {
		return "ErrInvalid without EINVAL"
	}
	if errors.Is(err, ErrUnsupported) && !errors.Is(err, unix.EOPNOTSUPP) {
		return "ErrUnsupported without EOPNOTSUPP"
	}
	var errno unix.Errno
	var ce *uverbs.CallError
	var ke *model.KernelError
	if (errors.As(err, &ce) || errors.As(err, &ke)) && !errors.As(err, &errno) {
		return "a kernel refusal whose errno errors.Is does not reach"
	}
	var fe *model.FirmwareError
	var cmd *prm.CmdError
	if errors.As(err, &fe) || errors.Is(err, unix.EREMOTEIO) {
		if !errors.As(err, &cmd) {
			return "a firmware failure without its *prm.CmdError"
		}
		if !errors.Is(err, cmd.Status) {
			return fmt.Sprintf("a firmware failure whose status %v errors.Is does not find", cmd.Status)
		}
	}
	return ""
}

// TestAPIErrorDefect: the check tells a good error from each kind of bad
// one, so that a test using it can fail.
func TestAPIErrorDefect(t *testing.T) {
	good := invalid("post send", "QP 0x1a2", "work request %d", 3)
	nested := opErr("connect", "QP 0x1a2", opErr("modify", "QP 0x1a2", ErrClosed))
	for _, c := range []struct {
		name string
		err  error
		bad  bool
	}{
		{"an *Error with a reason", good, false},
		{"a firmware failure", opErr("devx obj create", "context", &prm.CmdError{Opcode: prm.MLX5_CMD_OP_CREATE_QP, Status: prm.MLX5_CMD_STAT_BAD_PARAM_ERR}), false},
		{"a kernel refusal", opErr("devx obj create", "context", &model.KernelError{Call: "devx obj create", Errno: unix.EINVAL}), false},
		{"nil", nil, true},
		{"a bare errno", unix.EINVAL, true},
		{"a wrapped *Error", fmt.Errorf("mlx5: connect: %w", good), true},
		{"no object", opErr("post send", "", ErrClosed), true},
		{"no operation", opErr("", "QP 0x1", ErrClosed), true},
		{"an *Error in an *Error", nested, true},
		{"mlx5: in the cause", opErr("open", "mlx5_0", errors.New("mlx5: no such device")), true},
		{"the object again", opErr("modify", "QP 0x1a2", errors.New("QP 0x1a2 is busy")), true},
		{"ErrInvalid alone", opErr("post send", "QP 0x1", ErrInvalid), true},
		{"a firmware errno without the status", opErr("devx obj create", "context", unix.EREMOTEIO), true},
	} {
		if got := apiErrorDefect(c.err) != ""; got != c.bad {
			t.Errorf("%s: defect %q, want a defect: %v", c.name, apiErrorDefect(c.err), c.bad)
		}
	}
}

// Checked runs CheckAPIError on err and returns it, so that a test that
// asserts an error checks it too: errors.Is(Checked(t, err), ErrClosed).
func Checked(tb testing.TB, err error) error {
	tb.Helper()
	CheckAPIError(tb, err)
	return err
}
