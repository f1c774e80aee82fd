package cm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/mlx5"
)

// Private data limits: what the IB CM's messages carry for the
// connection manager's IP port spaces (<rdma/ib_cm.h>'s
// IB_CM_*_PRIVATE_DATA_SIZE; a request's and a UD request's lose the
// 36-byte header the RDMA CM puts first, struct cma_hdr in cma.c). More
// is refused with mlx5.ErrInvalid before anything is sent.
const (
	MaxRequestData   = 56  // Dial, TCP: an IB CM REQ's 92 bytes less the CM header
	MaxReplyData     = 196 // Request.Accept, TCP: a REP's
	MaxRejectData    = 148 // Request.Reject, TCP: a REJ's
	MaxUDRequestData = 180 // Dial, UDP: a SIDR REQ's 216 bytes less the CM header
	MaxUDReplyData   = 136 // Request.Accept and Reject, UDP: a SIDR REP's
)

// DefaultRDMADepth is the RDMA READ and atomic depth a connection asks
// for when its options give none, as mlx5.QP.Connect does (16: the
// ConnectX's 1 << log_max_ra_req_qp).
const DefaultRDMADepth = 16

// DefaultResolveTimeout bounds each of address and route resolution when
// DialOptions.ResolveTimeout is 0 (librdmacm's examples use 2 s).
const DefaultResolveTimeout = 2 * time.Second

// DialOptions describe a connection to make.
type DialOptions struct {
	// QP is the queue pair the connection carries, in RESET (a UD QP may
	// already be in RTS), on the device the address resolves to: RC for
	// "tcp", UD for "udp".
	QP QP
	// PrivateData is sent with the request: at most MaxRequestData bytes
	// (TCP) or MaxUDRequestData (UDP).
	PrivateData []byte
	// Source binds the connection to a local address (and port); the
	// zero value lets the route choose.
	Source netip.AddrPort
	// ResponderResources is how many RDMA READs and atomics the peer may
	// have outstanding on this QP, InitiatorDepth how many this QP may
	// have outstanding to the peer; 0 is DefaultRDMADepth. The peer's
	// accept may lower them.
	ResponderResources, InitiatorDepth uint8
	// RetryCount and RNRRetryCount are the QP's transport and RNR retry
	// counts (0 is 7, 7 is "forever" for RNR), as librdmacm sends them
	// without parameters.
	RetryCount, RNRRetryCount uint8
	// TypeOfService is the RoCE traffic class (RDMA_OPTION_ID_TOS); 0
	// is the device's default.
	TypeOfService uint8
	// AckTimeout, if not 0, is the QP's local ACK timeout
	// (RDMA_OPTION_ID_ACK_TIMEOUT; 4.096 µs × 2^AckTimeout).
	AckTimeout uint8
	// ResolveTimeout bounds address and route resolution each; 0 is
	// DefaultResolveTimeout. ctx bounds the whole Dial.
	ResolveTimeout time.Duration
}

// Dial connects to address ("host:port") in network: "tcp" (tcp4, tcp6)
// for an RC connection, "udp" (udp4, udp6) for UD. It resolves the
// address to a device and a route, moves opt.QP to INIT, sends the
// request with opt.PrivateData, and on the peer's accept moves the QP to
// RTR and RTS and completes the handshake, as librdmacm's rdma_connect
// and its CONNECT_RESPONSE handling do; for UD it learns the peer's QP
// number and Q_Key. It returns the established connection, or an error
// with nothing left behind: the CM's id destroyed (a request already sent
// is withdrawn, which the peer sees as a reject), the QP in ERR if it was
// moved. A refused connection is a *RejectError (ErrRejected), one that
// nobody answered ErrUnreachable, an address with no RDMA device behind
// it, or no route to it, ErrResolve with the errno (unix.ENODEV,
// unix.ENETUNREACH, ...).
func (m *Manager) Dial(ctx context.Context, network, address string, opt *DialOptions) (*Conn, error) {
	const op = "dial"
	if m == nil {
		return nil, invalid(op, address, "a nil Manager")
	}
	if opt == nil {
		opt = &DialOptions{}
	}
	dst, err := ResolveAddr(ctx, network, address)
	if err != nil {
		return nil, invalid(op, address, "%v", err)
	}
	obj := dst.String()
	limit := MaxRequestData
	if dst.Space == UDP {
		limit = MaxUDRequestData
	}
	if len(opt.PrivateData) > limit {
		return nil, invalid(op, obj, "%d bytes of private data: a %v request carries at most %d", len(opt.PrivateData), dst.Space, limit)
	}
	if opt.Source.IsValid() && opt.Source.Addr().Unmap().Is4() != dst.AddrPort.Addr().Is4() {
		return nil, invalid(op, obj, "source %v and destination %v are of different IP versions", opt.Source, dst.AddrPort)
	}
	if dst.AddrPort.Addr().IsUnspecified() {
		return nil, invalid(op, obj, "the unspecified address: dial a host's address")
	}
	for _, a := range []netip.Addr{dst.AddrPort.Addr(), opt.Source.Addr()} {
		if a.IsValid() && a.Unmap().WithZone("").IsLoopback() {
			return nil, loopbackErr(op, obj, a)
		}
	}
	ready, err := checkQP(opt.QP, dst.Space)
	if err != nil {
		if errors.Is(err, errDEVX) {
			return nil, unsupported(op, obj, "%v", err)
		}
		return nil, invalid(op, obj, "%v", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, opErr(op, obj, err)
	}
	d := &dialer{m: m, op: op, obj: obj, dst: dst, opt: opt, qpReady: ready}
	c, err := d.dial(ctx)
	if err != nil {
		d.undo()
		return nil, err
	}
	return c, nil
}

// dialer is one Dial in progress: what it made, for undo.
type dialer struct {
	m       *Manager
	op, obj string
	dst     Addr
	opt     *DialOptions
	id      *cmID
	qpReady bool // a UD QP already in RTS
	qpMoved bool
	// responded: the peer accepted (CONNECT_RESPONSE); its later reject
	// explains a failed step.
	responded bool
	guid      uint64
	port      uint8
	localSrc  netip.AddrPort
}

func (d *dialer) fail(step string, err error) error {
	if rej := d.peerGaveUp(); rej != nil {
		// The step failed because the peer left: say so.
		return opErr(d.op, d.obj, rej)
	}
	if errors.Is(err, mlx5.ErrClosed) || errors.Is(err, errIDGone) {
		return closedErr(d.op, d.obj)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return opErr(d.op, d.obj, err)
	}
	return opErr(d.op, d.obj, stepErr(step, err))
}

// failResolve is fail for the resolve commands: an errno that says the
// address or route has none is ErrResolve, as the resolve's error event
// would be.
func (d *dialer) failResolve(step string, err error) error {
	if isResolveErrno(err) {
		return opErr(d.op, d.obj, resolveStepErr(step, err))
	}
	return d.fail(step, err)
}

// peerGaveUp is the reject or unreachable event of the id, if the peer
// ended the connection while Dial was moving the QP after the peer's
// accept: a step then fails because the IB CM left the connection's
// state, and the event that says why follows within moments (it may be
// on its way through the manager's reader).
func (d *dialer) peerGaveUp() error {
	if d.id == nil || !d.responded {
		return nil
	}
	deadline := time.Now().Add(gaveUpWait)
	for {
		d.id.qmu.Lock()
		for _, ev := range d.id.queue {
			switch ev.Type {
			case evRejected:
				d.id.qmu.Unlock()
				return &RejectError{Reason: int(ev.Status), PrivateData: ev.Conn.PrivateData}
			case evUnreachable, evConnectError, evDisconnected:
				d.id.qmu.Unlock()
				return statusErr(ErrUnreachable, "the peer left the connection", ev.Status)
			}
		}
		d.id.qmu.Unlock()
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil
		}
		select {
		case <-d.id.wake:
		case <-time.After(wait):
		case <-d.m.done:
			return nil
		}
	}
}

// gaveUpWait bounds how long a failed Dial waits for the event that
// explains it.
const gaveUpWait = 100 * time.Millisecond

// undo leaves nothing of a failed Dial: the id destroyed (withdrawing a
// request), the QP flushed to ERR if it was moved.
func (d *dialer) undo() {
	if d.id != nil {
		d.id.destroy()
	}
	if d.qpMoved {
		toError(d.opt.QP)
	}
}

func (d *dialer) dial(ctx context.Context) (*Conn, error) {
	m, opt := d.m, d.opt
	id, err := m.newID(d.dst.Space)
	if err != nil {
		return nil, d.fail("create id", err)
	}
	d.id = id
	if opt.TypeOfService != 0 {
		if err := id.call(func(kid uint32) error { return m.s.SetOption(kid, optLevelID, optTOS, []byte{opt.TypeOfService}) }); err != nil {
			return nil, d.fail("set type of service", err)
		}
	}
	if opt.AckTimeout != 0 {
		if err := id.call(func(kid uint32) error { return m.s.SetOption(kid, optLevelID, optAckTimeout, []byte{opt.AckTimeout}) }); err != nil {
			return nil, d.fail("set ack timeout", err)
		}
	}
	timeout := uint32(DefaultResolveTimeout.Milliseconds())
	if opt.ResolveTimeout > 0 {
		timeout = uint32(max(1, opt.ResolveTimeout.Milliseconds()))
	}
	if err := id.call(func(kid uint32) error { return m.s.ResolveAddr(kid, opt.Source, d.dst.AddrPort, timeout) }); err != nil {
		return nil, d.failResolve("resolve address", err)
	}
	ev, err := id.waitFor(ctx)
	if err != nil {
		return nil, d.fail("resolve address", err)
	}
	switch ev.Type {
	case evAddrResolved:
	case evAddrError:
		return nil, opErr(d.op, d.obj, statusErr(ErrResolve, "resolve address", ev.Status))
	default:
		return nil, d.unexpected("resolve address", ev)
	}
	var a seam.CMAddr
	if err := id.call(func(kid uint32) (err error) { a, err = m.s.QueryAddr(kid); return }); err != nil {
		return nil, d.fail("query address", err)
	}
	d.guid, d.port, d.localSrc = a.NodeGUID, a.Port, a.Src
	if g, ok, err := qpDevice(opt.QP); err != nil {
		return nil, d.fail("query the QP's device", err)
	} else if ok && g != a.NodeGUID {
		return nil, invalid(d.op, d.obj, "the address resolves to device %s, the QP is on device %s", guidString(a.NodeGUID), guidString(g))
	}
	if err := id.call(func(kid uint32) error { return m.s.ResolveRoute(kid, timeout) }); err != nil {
		return nil, d.failResolve("resolve route", err)
	}
	if ev, err = id.waitFor(ctx); err != nil {
		return nil, d.fail("resolve route", err)
	}
	switch ev.Type {
	case evRouteResolved:
	case evRouteError:
		return nil, opErr(d.op, d.obj, statusErr(ErrResolve, "resolve route", ev.Status))
	default:
		return nil, d.unexpected("resolve route", ev)
	}
	if d.dst.Space == UDP {
		return d.dialUD(ctx)
	}
	return d.dialRC(ctx)
}

func (d *dialer) unexpected(step string, ev seam.CMEvent) error {
	if ev.Type == evDeviceRemoval {
		return opErr(d.op, d.obj, stepErr(step, ErrDeviceRemoved))
	}
	return opErr(d.op, d.obj, stepErr(step, fmt.Errorf("unexpected event %d (status %d)", ev.Type, ev.Status)))
}

func orDefault(v, def uint8) uint8 {
	if v == 0 {
		return def
	}
	return v
}

// dialRC is rdma_create_qp's INIT, rdma_connect, and the CONNECT_RESPONSE
// handling of librdmacm's rdma_get_cm_event (ucma_process_conn_resp):
// INIT with the CM's attributes again, RTR, RTS, then the RTU.
func (d *dialer) dialRC(ctx context.Context) (*Conn, error) {
	m, opt, id, qp := d.m, d.opt, d.id, d.opt.QP
	d.qpMoved = true
	if err := id.modifyTo(qp, stateInit, nil); err != nil {
		return nil, d.fail("move the QP to INIT", err)
	}
	p := &seam.CMConnParam{QPN: qp.QPN(), PrivateData: opt.PrivateData, SRQ: hasSRQ(qp),
		ResponderResources: orDefault(opt.ResponderResources, DefaultRDMADepth), InitiatorDepth: orDefault(opt.InitiatorDepth, DefaultRDMADepth),
		RetryCount: min(orDefault(opt.RetryCount, 7), 7), RNRRetryCount: min(orDefault(opt.RNRRetryCount, 7), 7)}
	if err := id.call(func(kid uint32) error { return m.s.Connect(kid, p) }); err != nil {
		return nil, d.fail("connect", err)
	}
	ev, err := id.waitFor(ctx)
	if err != nil {
		return nil, d.fail("connect", err)
	}
	switch ev.Type {
	case evConnectResponse:
		d.responded = true
	case evRejected:
		return nil, opErr(d.op, d.obj, &RejectError{Reason: int(ev.Status), PrivateData: ev.Conn.PrivateData})
	case evUnreachable, evConnectError:
		return nil, opErr(d.op, d.obj, statusErr(ErrUnreachable, "connect", ev.Status))
	default:
		return nil, d.unexpected("connect", ev)
	}
	for _, s := range []struct {
		state uint8
		name  string
	}{{stateInit, "INIT"}, {stateRTR, "RTR"}, {stateRTS, "RTS"}} {
		if err := id.modifyTo(qp, s.state, nil); err != nil {
			return nil, d.fail("move the QP to "+s.name, err)
		}
	}
	if err := id.call(func(kid uint32) error { return m.s.Accept(kid, 0, nil) }); err != nil {
		return nil, d.fail("establish", err)
	}
	c := newConn(m, id, qp, Addr{Space: TCP, AddrPort: d.localSrc}, d.dst, ev.Conn.PrivateData, d.guid, d.port)
	if err := c.start(); err != nil {
		d.id = nil // the connection destroyed it
		return nil, d.fail("establish", err)
	}
	return c, nil
}

// dialUD readies the UD QP as rdma_create_qp's ucma_init_ud_qp does
// (INIT with the CM's P_Key index, port and Q_Key, RTR, RTS with SQ PSN
// 0), sends the SIDR request and takes the peer's QP number, Q_Key and
// address vector from ESTABLISHED.
func (d *dialer) dialUD(ctx context.Context) (*Conn, error) {
	m, opt, id, qp := d.m, d.opt, d.id, d.opt.QP
	if !d.qpReady {
		d.qpMoved = true
		if err := readyUD(id, qp); err != nil {
			return nil, d.fail("ready the UD QP", err)
		}
	}
	p := &seam.CMConnParam{QPN: qp.QPN(), PrivateData: opt.PrivateData}
	if err := id.call(func(kid uint32) error { return m.s.Connect(kid, p) }); err != nil {
		return nil, d.fail("connect", err)
	}
	ev, err := id.waitFor(ctx)
	if err != nil {
		return nil, d.fail("connect", err)
	}
	switch {
	case ev.Type == evEstablished:
	case ev.Type == evUnreachable && ev.Status == SIDRReject:
		return nil, opErr(d.op, d.obj, &RejectError{Reason: int(ev.Status), UD: true, PrivateData: ev.UD.PrivateData})
	case ev.Type == evUnreachable && ev.Status == SIDRNoListener:
		return nil, opErr(d.op, d.obj, &RejectError{Reason: int(ev.Status), UD: true, PrivateData: ev.UD.PrivateData})
	case ev.Type == evUnreachable:
		return nil, opErr(d.op, d.obj, statusErr(ErrUnreachable, "connect", ev.Status))
	default:
		return nil, d.unexpected("connect", ev)
	}
	c := newConn(m, id, qp, Addr{Space: UDP, AddrPort: d.localSrc}, d.dst, ev.UD.PrivateData, d.guid, d.port)
	c.peer = UDPeer{QPN: ev.UD.QPN, QKey: ev.UD.QKey, Path: pathOf(&ev.UD.AH)}
	if err := c.start(); err != nil {
		d.id = nil
		return nil, d.fail("establish", err)
	}
	return c, nil
}

// readyUD moves a UD QP from RESET to RTS with the id's attributes.
func readyUD(id *cmID, qp QP) error {
	if err := id.modifyTo(qp, stateInit, nil); err != nil {
		return fmt.Errorf("to INIT: %w", err)
	}
	if err := qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTR}, mlx5.QPAttrState); err != nil {
		return fmt.Errorf("to RTR: %w", err)
	}
	if err := qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTS}, mlx5.QPAttrState|mlx5.QPAttrSQPSN); err != nil {
		return fmt.Errorf("to RTS: %w", err)
	}
	return nil
}

// guidString prints a GUID as sysfs does.
func guidString(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}
