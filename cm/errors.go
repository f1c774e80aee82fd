package cm

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/mlx5go/mlx5go/mlx5"
	"golang.org/x/sys/unix"
)

// Sentinel errors of the connection manager. Every error this package
// returns is an *mlx5.Error naming the operation and the address or
// connection, whose cause wraps one of these, mlx5.ErrInvalid (bad
// arguments, misuse; with unix.EINVAL), mlx5.ErrUnsupported,
// mlx5.ErrClosed, a context's error, or the kernel's errno.
var (
	// ErrRejected: the peer, or its connection manager, refused the
	// connection; the *RejectError says why. It comes with
	// unix.ECONNREFUSED.
	ErrRejected = errors.New("connection rejected")
	// ErrUnreachable: the peer did not answer (the CM's request timed
	// out: unix.ETIMEDOUT) or the connection could not be completed.
	ErrUnreachable = errors.New("peer unreachable")
	// ErrResolve: the address or the route could not be resolved to an
	// RDMA device and a path, whether the kernel refused the resolve (or
	// a listener's bind) at once or its event said so; the kernel's errno
	// comes with it (unix.ENODEV: no RDMA device behind the address,
	// unix.EADDRNOTAVAIL: the address, or a Dial's Source, is not this
	// host's, unix.ETIMEDOUT: the neighbour or the path did not answer in
	// time, unix.ENETUNREACH or unix.EHOSTUNREACH: no route to it).
	ErrResolve = errors.New("address resolution failed")
	// ErrDisconnected: the connection was disconnected.
	ErrDisconnected = errors.New("disconnected")
	// ErrDeviceRemoved: the RDMA device under the connection went away.
	ErrDeviceRemoved = errors.New("RDMA device removed")
)

// RejectError is a refused connection: the IB CM's reject reason (or,
// for UD, the SIDR status), and the private data the peer sent with it,
// which the IB CM carries at its full size (148 bytes for a connection,
// 136 for UD): the peer's bytes followed by zeros.
type RejectError struct {
	// Reason is the IB CM reject reason: RejectConsumerDefined when the
	// peer's application rejected, RejectNoListener when nobody listens
	// on the port, RejectTimeout when the peer gave up on the
	// connection. For UD it is the SIDR status: SIDRReject when the
	// listener rejected, SIDRNoListener when nobody listens.
	Reason      int
	UD          bool
	PrivateData []byte
}

// Reject reasons and SIDR statuses (enum ib_cm_rej_reason, enum
// ib_cm_sidr_status).
const (
	RejectTimeout                  = 4
	RejectNoListener               = 8 // IB_CM_REJ_INVALID_SERVICE_ID
	RejectConsumerDefined          = 28
	RejectVendorOptionNotSupported = 35
	SIDRNoListener                 = 1 // IB_SIDR_UNSUPPORTED
	SIDRReject                     = 2
)

var rejectNames = map[int]string{
	1: "no QP", 3: "no resources", RejectTimeout: "timeout", 5: "unsupported", RejectNoListener: "invalid service id: nobody listens",
	10: "stale connection", 26: "invalid MTU", 27: "insufficient responder resources", RejectConsumerDefined: "consumer defined",
	RejectVendorOptionNotSupported: "vendor option not supported",
}

var sidrNames = map[int]string{SIDRNoListener: "unsupported: nobody listens", SIDRReject: "rejected", 3: "no QP", 4: "redirect", 5: "unsupported version"}

func (e *RejectError) Error() string {
	names, kind := rejectNames, "reason"
	if e.UD {
		names, kind = sidrNames, "SIDR status"
	}
	if n, ok := names[e.Reason]; ok {
		return fmt.Sprintf("rejected by the peer (%s %d, %s)", kind, e.Reason, n)
	}
	return fmt.Sprintf("rejected by the peer (%s %d)", kind, e.Reason)
}

// Unwrap returns ErrRejected and unix.ECONNREFUSED.
func (e *RejectError) Unwrap() []error { return []error{ErrRejected, unix.ECONNREFUSED} }

// causeError is a cause that wraps sentinels and an errno without
// printing them twice.
type causeError struct {
	msg  string
	errs []error
}

func (e *causeError) Error() string   { return e.msg }
func (e *causeError) Unwrap() []error { return e.errs }

func opErr(op, obj string, err error) error { return &mlx5.Error{Op: op, Obj: obj, Err: err} }

// invalid is misuse or a bad argument: mlx5.ErrInvalid and EINVAL.
func invalid(op, obj, format string, args ...any) error {
	return opErr(op, obj, invalidCause(format, args...))
}

func invalidCause(format string, args ...any) error {
	return &causeError{msg: fmt.Sprintf(format, args...), errs: []error{mlx5.ErrInvalid, unix.EINVAL}}
}

func unsupported(op, obj, format string, args ...any) error {
	return opErr(op, obj, unsupportedCause(format, args...))
}

func unsupportedCause(format string, args ...any) error {
	return &causeError{msg: fmt.Sprintf(format, args...), errs: []error{mlx5.ErrUnsupported, unix.EOPNOTSUPP}}
}

// rejectedCause is the cause of a failed Request.Accept that answered
// the request with a reject, saying so.
func rejectedCause(err error) error {
	return &causeError{msg: err.Error() + " (the request was rejected)", errs: []error{err}}
}

func closedErr(op, obj string) error { return opErr(op, obj, mlx5.ErrClosed) }

// loopbackErr refuses a loopback address: no RDMA device is behind lo.
// The kernel's CM takes one as the unspecified address (cma_any_addr): a
// listener on 127.0.0.1 would take connections to every device's
// addresses, and a connection to it would resolve to the first device and
// then find no route (ENODEV). Refusing it up front says why.
func loopbackErr(op, obj string, a netip.Addr) error {
	return opErr(op, obj, &causeError{msg: fmt.Sprintf("%v is a loopback address: no RDMA device is behind it (use an address of the RDMA device's netdev)", a),
		errs: []error{ErrResolve, unix.ENODEV}})
}

// statusErr is the cause of a failed event: sentinel with the kernel's
// status, a negative errno.
func statusErr(sentinel error, what string, status int32) error {
	if status < 0 {
		errno := unix.Errno(-status)
		return &causeError{msg: fmt.Sprintf("%s: %v", what, errno), errs: []error{sentinel, errno}}
	}
	return &causeError{msg: fmt.Sprintf("%s (status %d)", what, status), errs: []error{sentinel}}
}

// resolveErrnos are the errnos of a resolve or bind command that say the
// address or its route could not be resolved, as ErrResolve lists them
// (others, EINVAL or EADDRINUSE, are misuse or a port taken).
var resolveErrnos = []unix.Errno{unix.ENODEV, unix.EADDRNOTAVAIL, unix.ETIMEDOUT, unix.ENETUNREACH, unix.EHOSTUNREACH}

func isResolveErrno(err error) bool {
	for _, e := range resolveErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// resolveStepErr is stepErr with ErrResolve.
func resolveStepErr(step string, err error) error {
	ce := stepErr(step, err).(*causeError)
	ce.errs = append(ce.errs, ErrResolve)
	return ce
}

// stepErr is the cause of a failed step of an operation, naming it.
func stepErr(step string, err error) error {
	var me *mlx5.Error
	if errors.As(err, &me) {
		err = me.Err
		step += " (" + me.Op
		if me.Obj != "" {
			step += " " + me.Obj
		}
		step += ")"
	}
	return &causeError{msg: step + ": " + err.Error(), errs: []error{err}}
}
