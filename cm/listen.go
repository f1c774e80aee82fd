package cm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/mlx5"
)

// DefaultBacklog is the number of connection requests a listener holds
// for Accept when ListenOptions.Backlog is 0.
const DefaultBacklog = 128

// ListenOptions describe a listener.
type ListenOptions struct {
	// Backlog is how many connection requests may wait for Accept (0:
	// DefaultBacklog). A request beyond it is rejected
	// (RejectConsumerDefined) at once: the connection manager has
	// already acknowledged it to the peer, so it cannot be left for the
	// peer to retry, as a TCP SYN would be.
	Backlog int
	// ReuseAddr lets the port be bound while a connection on it is in
	// timewait (RDMA_OPTION_ID_REUSEADDR).
	ReuseAddr bool
	// IPv6Only makes a listener on the unspecified IPv6 address take
	// IPv6 requests only (RDMA_OPTION_ID_AFONLY).
	IPv6Only bool
}

// Listener takes the connection requests of a local address.
type Listener struct {
	m       *Manager
	id      *cmID
	addr    Addr
	backlog int

	mu      sync.Mutex
	queue   []*Request
	pending map[*Request]bool // taken by Accept, not yet answered
	// wake is a request queued: one token for one waiting Accept, which
	// hands it on while the queue holds more.
	wake chan struct{}
	// stop is closed, once, when Close begins or the device goes:
	// every waiting Accept returns.
	stop   chan struct{}
	closed bool
	err    error // why the listener stopped (its device went)
}

// Listen listens on address ("host:port"; an empty host listens on every
// RDMA device, port 0 takes a free port, which Addr then tells) in
// network "tcp" (tcp4, tcp6) for RC connections or "udp" (udp4, udp6)
// for UD. ctx bounds a host name's lookup. An address no RDMA device
// holds is refused with ErrResolve (unix.ENODEV, or unix.EADDRNOTAVAIL
// for one that is not this host's).
func (m *Manager) Listen(ctx context.Context, network, address string, opt *ListenOptions) (*Listener, error) {
	const op = "listen"
	if m == nil {
		return nil, invalid(op, address, "a nil Manager")
	}
	if opt == nil {
		opt = &ListenOptions{}
	}
	a, err := ResolveAddr(ctx, network, address)
	if err != nil {
		return nil, invalid(op, address, "%v", err)
	}
	obj := a.String()
	if a.AddrPort.Addr().WithZone("").IsLoopback() {
		return nil, loopbackErr(op, obj, a.AddrPort.Addr())
	}
	if opt.Backlog < 0 {
		return nil, invalid(op, obj, "backlog %d", opt.Backlog)
	}
	backlog := opt.Backlog
	if backlog == 0 {
		backlog = DefaultBacklog
	}
	id, err := m.newID(a.Space)
	if err != nil {
		if errors.Is(err, mlx5.ErrClosed) {
			return nil, closedErr(op, obj)
		}
		return nil, opErr(op, obj, stepErr("create id", err))
	}
	l := &Listener{m: m, id: id, backlog: backlog, pending: map[*Request]bool{}, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	fail := func(step string, err error) (*Listener, error) {
		id.destroy()
		if errors.Is(err, mlx5.ErrClosed) || errors.Is(err, errIDGone) {
			return nil, closedErr(op, obj)
		}
		return nil, opErr(op, obj, stepErr(step, err))
	}
	one := []byte{1, 0, 0, 0} // an int, host order
	binary.NativeEndian.PutUint32(one, 1)
	if opt.ReuseAddr {
		if err := id.call(func(kid uint32) error { return m.s.SetOption(kid, optLevelID, optReuseAddr, one) }); err != nil {
			return fail("set reuseaddr", err)
		}
	}
	if opt.IPv6Only {
		if err := id.call(func(kid uint32) error { return m.s.SetOption(kid, optLevelID, optAFOnly, one) }); err != nil {
			return fail("set IPv6 only", err)
		}
	}
	if err := id.call(func(kid uint32) error { return m.s.Bind(kid, a.AddrPort) }); err != nil {
		if isResolveErrno(err) {
			id.destroy()
			return nil, opErr(op, obj, resolveStepErr("bind", err))
		}
		return fail("bind", err)
	}
	id.qmu.Lock()
	id.onReq = l.request
	id.qmu.Unlock()
	if err := id.call(func(kid uint32) error { return m.s.Listen(kid, backlog) }); err != nil {
		return fail("listen", err)
	}
	var qa seam.CMAddr
	if err := id.call(func(kid uint32) (err error) { qa, err = m.s.QueryAddr(kid); return }); err != nil {
		return fail("query address", err)
	}
	l.addr = Addr{Space: a.Space, AddrPort: qa.Src}
	id.handOver(l.onEvent)
	if !m.track(l) {
		id.destroy()
		return nil, closedErr(op, obj)
	}
	return l, nil
}

// Addr is the listener's address, with the port it got.
func (l *Listener) Addr() net.Addr { return l.addr }

// request takes a connect request in the manager's reader: false refuses
// it (the reader destroys its id, which rejects it).
func (l *Listener) request(ev seam.CMEvent) bool {
	l.mu.Lock()
	full := l.closed || len(l.queue) >= l.backlog
	l.mu.Unlock()
	if full {
		return false
	}
	id := l.m.adopt(ev.ID, l.addr.Space)
	var a seam.CMAddr
	if err := l.m.use(func() (err error) { a, err = l.m.s.QueryAddr(ev.ID); return }); err != nil {
		return false
	}
	r := &Request{l: l, id: id, local: Addr{Space: l.addr.Space, AddrPort: a.Src}, remote: Addr{Space: l.addr.Space, AddrPort: a.Dst},
		nodeGUID: a.NodeGUID, port: a.Port, respRes: ev.Conn.ResponderResources, initDepth: ev.Conn.InitiatorDepth,
		privateData: ev.Conn.PrivateData}
	if l.addr.Space == UDP {
		r.privateData = ev.UD.PrivateData
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || len(l.queue) >= l.backlog {
		return false
	}
	l.queue = append(l.queue, r)
	l.signal()
	return true
}

// onEvent takes the listening id's own events: DEVICE_REMOVAL stops the
// listener (Accept returns ErrDeviceRemoved once the queue is empty).
func (l *Listener) onEvent(ev seam.CMEvent) {
	if ev.Type != evDeviceRemoval {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil && !l.closed {
		close(l.stop)
	}
	l.err = ErrDeviceRemoved
}

// signal wakes one waiting Accept: there is a request to take.
func (l *Listener) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Accept waits for the next connection request, until ctx is done. The
// request must then be accepted or rejected. A listener whose device went
// away returns ErrDeviceRemoved: close it. Any number of goroutines may
// wait in Accept: each request goes to one of them, and Close (or the
// device's removal) releases them all.
func (l *Listener) Accept(ctx context.Context) (*Request, error) {
	const op = "accept"
	if l == nil || l.id == nil {
		return nil, invalid(op, "Listener", "a nil or zero Listener, not made by Manager.Listen")
	}
	obj := l.addr.String()
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, closedErr(op, obj)
		}
		if len(l.queue) > 0 {
			r := l.queue[0]
			l.queue = l.queue[1:]
			l.pending[r] = true
			if len(l.queue) > 0 {
				// Another request's token may have found the slot
				// full: hand it on.
				l.signal()
			}
			l.mu.Unlock()
			return r, nil
		}
		if l.err != nil {
			err := l.err
			l.mu.Unlock()
			return nil, opErr(op, obj, err)
		}
		l.mu.Unlock()
		select {
		case <-l.wake:
		case <-l.stop:
		case <-ctx.Done():
			return nil, opErr(op, obj, ctx.Err())
		case <-l.m.done:
			return nil, opErr(op, obj, l.m.gone())
		}
	}
}

// Close stops listening: requests not yet answered are rejected (their
// Accept and Reject then return mlx5.ErrClosed), and Accept returns
// mlx5.ErrClosed, in every goroutine waiting in it. Connections accepted
// from the listener stay up. Closing twice is safe.
func (l *Listener) Close() error {
	if l == nil || l.id == nil {
		return nil
	}
	return l.close(false)
}

func (l *Listener) close(managerClosing bool) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	if l.err == nil {
		close(l.stop) // every waiting Accept returns ErrClosed
	}
	l.closed = true
	reqs := append([]*Request(nil), l.queue...)
	for r := range l.pending {
		reqs = append(reqs, r)
	}
	l.queue, l.pending = nil, nil
	l.mu.Unlock()
	err := l.id.destroy()
	for _, r := range reqs {
		r.drop()
	}
	if !managerClosing {
		l.m.untrack(l)
	}
	if err != nil && !l.m.isClosed() {
		return opErr("close", l.addr.String(), err)
	}
	return nil
}

// Request is a connection request a listener received. Accept it (with
// the QP the connection is to carry) or Reject it; until then the peer
// waits.
type Request struct {
	l           *Listener
	id          *cmID
	local       Addr
	remote      Addr
	nodeGUID    uint64
	port        uint8
	respRes     uint8
	initDepth   uint8
	privateData []byte

	mu       sync.Mutex
	answered bool
	dropped  bool // its listener closed and rejected it
}

// LocalAddr is the address the request came to.
func (r *Request) LocalAddr() net.Addr { return r.local }

// RemoteAddr is the requester's address.
func (r *Request) RemoteAddr() net.Addr { return r.remote }

// PrivateData is what the requester sent: MaxRequestData bytes (TCP) or
// MaxUDRequestData (UDP), its bytes followed by zeros.
func (r *Request) PrivateData() []byte { return r.privateData }

// NodeGUID is the node GUID of the RDMA device the request came in on:
// the QP that accepts it must be on that device.
func (r *Request) NodeGUID() uint64 { return r.nodeGUID }

// Port is the device port the request came in on.
func (r *Request) Port() uint8 { return r.port }

// RDMADepth is what the requester asked: how many RDMA READs and atomics
// it may have outstanding at this side (ResponderResources), and this
// side at it (InitiatorDepth).
func (r *Request) RDMADepth() (responderResources, initiatorDepth uint8) {
	return r.respRes, r.initDepth
}

func (r *Request) String() string { return fmt.Sprintf("request from %v to %v", r.remote, r.local) }

// AcceptOptions describe how to accept a request.
type AcceptOptions struct {
	// QP is the queue pair the connection carries: RC for a TCP
	// listener, UD for UDP, in RESET (a UD QP may be in RTS already, and
	// serve many requests), on the device the request came in on.
	QP QP
	// PrivateData is sent with the accept: at most MaxReplyData bytes
	// (TCP) or MaxUDReplyData (UDP).
	PrivateData []byte
	// ResponderResources and InitiatorDepth answer the request's
	// RDMADepth (0 takes the request's, at most DefaultRDMADepth).
	ResponderResources, InitiatorDepth uint8
	// RNRRetryCount is this QP's RNR retry count as the peer is told
	// (0 is 7: forever).
	RNRRetryCount uint8
}

// Accept accepts the request: the QP moves to INIT, RTR and RTS with the
// connection manager's attributes, as librdmacm's rdma_accept moves it,
// the accept goes to the peer with opt.PrivateData, and Accept waits,
// until ctx is done, for the peer to complete the handshake (a UD accept
// completes at once).
//
// On failure nothing is left half-made and the peer is answered, as the
// kernel's rdma_accept answers a failed accept: the request is rejected
// (reason RejectConsumerDefined with no private data, or for UD the SIDR
// reject: the peer's Dial returns a *RejectError at once), and the
// error, which says the request was rejected, is mlx5.ErrInvalid for bad
// options (too much private data, a QP missing, of the wrong type, not
// in RESET or on another device), checked before anything is sent or
// the QP moved. A QP Accept moved goes to ERR (its work requests flush);
// one it did not move is left as it was: a QP refused by the checks (it
// may serve something else), one still in RESET (the verbs take no
// RESET to ERR; it can be used again), a UD QP already in RTS (it serves
// other peers). A request is answered once: a second Accept, or an
// Accept after Reject, is mlx5.ErrInvalid and sends nothing; one whose
// listener closed is mlx5.ErrClosed.
func (r *Request) Accept(ctx context.Context, opt *AcceptOptions) (*Conn, error) {
	const op = "accept"
	if r == nil || r.id == nil {
		return nil, invalid(op, "Request", "a nil or zero Request, not made by Listener.Accept")
	}
	obj := r.String()
	if opt == nil {
		opt = &AcceptOptions{}
	}
	ready, cause := r.check(opt)
	if err := r.answer(op, obj); err != nil {
		return nil, err
	}
	if cause != nil {
		r.refuse()
		return nil, opErr(op, obj, rejectedCause(cause))
	}
	c, err := r.accept(ctx, opt, ready)
	if err != nil {
		return nil, opErr(op, obj, err)
	}
	return c, nil
}

// check checks an accept's options before anything is sent or moved:
// ready is a UD QP already in RTS; cause says what is wrong.
func (r *Request) check(opt *AcceptOptions) (ready bool, cause error) {
	ready, err := checkQP(opt.QP, r.local.Space)
	if err != nil {
		if errors.Is(err, errDEVX) {
			return false, unsupportedCause("%v", err)
		}
		return false, invalidCause("%v", err)
	}
	if g, ok, err := qpDevice(opt.QP); err != nil {
		return false, stepErr("query the QP's device", err)
	} else if ok && g != r.nodeGUID {
		return false, invalidCause("the request came in on device %s, the QP is on device %s", guidString(r.nodeGUID), guidString(g))
	}
	limit := MaxReplyData
	if r.local.Space == UDP {
		limit = MaxUDReplyData
	}
	if len(opt.PrivateData) > limit {
		return false, invalidCause("%d bytes of private data: a %v accept carries at most %d", len(opt.PrivateData), r.local.Space, limit)
	}
	return ready, nil
}

// refuse answers a request whose accept failed its checks as the
// kernel's rdma_accept answers a failed accept: a reject (consumer
// defined, no private data; the SIDR reject for UD), then the id
// destroyed. The QP was not moved.
func (r *Request) refuse() {
	defer r.settled()
	m := r.l.m
	r.id.call(func(kid uint32) error { return m.s.Reject(kid, RejectConsumerDefined, nil) })
	r.id.destroy()
}

// answer marks the request answered, once: a request answered before is
// mlx5.ErrInvalid, one its listener's Close rejected mlx5.ErrClosed.
func (r *Request) answer(op, obj string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropped {
		// Not the application's answer: its listener's Close.
		return closedErr(op, obj)
	}
	if r.answered {
		return invalid(op, obj, "the request was already accepted or rejected")
	}
	r.answered = true
	return nil
}

// settled tells the listener the request no longer needs it.
func (r *Request) settled() {
	r.l.mu.Lock()
	if r.l.pending != nil {
		delete(r.l.pending, r)
	}
	r.l.mu.Unlock()
}

func (r *Request) accept(ctx context.Context, opt *AcceptOptions, ready bool) (*Conn, error) {
	m, id, qp := r.l.m, r.id, opt.QP
	defer r.settled()
	moved := false
	// ended is a failure that leaves nothing to answer (the peer's
	// reject or disconnect, the device gone, the manager or listener
	// closed); fail one that rejects the request.
	ended := func(step string, err error) (*Conn, error) {
		// rdma_accept's error path: the QP to ERR, the id destroyed,
		// which sends the REJ if the request still waits for one.
		if moved {
			toError(qp)
		}
		id.destroy()
		switch {
		case errors.Is(err, mlx5.ErrClosed), errors.Is(err, errIDGone):
			return nil, mlx5.ErrClosed
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return nil, err
		}
		return nil, stepErr(step, err)
	}
	fail := func(step string, err error) (*Conn, error) {
		c, err := ended(step, err)
		if !errors.Is(err, mlx5.ErrClosed) {
			err = rejectedCause(err)
		}
		return c, err
	}
	if !m.register(id) {
		return fail("accept", mlx5.ErrClosed)
	}
	respRes := opt.ResponderResources
	if respRes == 0 {
		respRes = min(r.respRes, DefaultRDMADepth)
	}
	initDepth := opt.InitiatorDepth
	if initDepth == 0 {
		initDepth = min(r.initDepth, DefaultRDMADepth)
	}
	p := &seam.CMConnParam{QPN: qp.QPN(), SRQ: hasSRQ(qp), PrivateData: opt.PrivateData, ResponderResources: respRes,
		InitiatorDepth: initDepth, RetryCount: 7, RNRRetryCount: min(orDefault(opt.RNRRetryCount, 7), 7)}
	if r.local.Space == UDP {
		if !ready {
			moved = true
			if err := readyUD(id, qp); err != nil {
				return fail("ready the UD QP", err)
			}
		}
		p = &seam.CMConnParam{QPN: qp.QPN(), PrivateData: opt.PrivateData}
		if err := id.call(func(kid uint32) error { return m.s.Accept(kid, id.uid, p) }); err != nil {
			return fail("accept", err)
		}
		c := newConn(m, id, qp, r.local, r.remote, r.privateData, r.nodeGUID, r.port)
		if err := c.start(); err != nil {
			return nil, err
		}
		return c, nil
	}
	// rdma_create_qp's INIT, then rdma_accept's ucma_modify_qp_rtr (INIT
	// again with the CM's attributes, RTR with max_dest_rd_atomic the
	// responder resources) and ucma_modify_qp_rts (max_rd_atomic the
	// initiator depth).
	moved = true
	if err := id.modifyTo(qp, stateInit, nil); err != nil {
		return fail("move the QP to INIT", err)
	}
	if err := id.modifyTo(qp, stateInit, nil); err != nil {
		return fail("move the QP to INIT", err)
	}
	if err := id.modifyTo(qp, stateRTR, func(a *mlx5.QPAttr) { a.MaxDestRdAtomic = respRes }); err != nil {
		return fail("move the QP to RTR", err)
	}
	if err := id.modifyTo(qp, stateRTS, func(a *mlx5.QPAttr) { a.MaxRdAtomic = initDepth }); err != nil {
		return fail("move the QP to RTS", err)
	}
	if err := id.call(func(kid uint32) error { return m.s.Accept(kid, id.uid, p) }); err != nil {
		return fail("accept", err)
	}
	ev, err := id.waitFor(ctx)
	if err != nil {
		return fail("wait for the peer's RTU", err)
	}
	switch ev.Type {
	case evEstablished:
	case evRejected:
		return ended("wait for the peer's RTU", &RejectError{Reason: int(ev.Status), PrivateData: ev.Conn.PrivateData})
	case evDisconnected:
		return ended("wait for the peer's RTU", ErrDisconnected)
	case evDeviceRemoval:
		return ended("wait for the peer's RTU", ErrDeviceRemoved)
	default:
		return ended("wait for the peer's RTU", statusErr(ErrUnreachable, fmt.Sprintf("event %d", ev.Type), ev.Status))
	}
	c := newConn(m, id, qp, r.local, r.remote, r.privateData, r.nodeGUID, r.port)
	if err := c.start(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reject refuses the request with reason (RejectConsumerDefined, or 0
// for it; or RejectVendorOptionNotSupported: the two the kernel sends for
// an application) and privateData (at most MaxRejectData bytes, or
// MaxUDReplyData for UD), which the peer's Dial returns in its
// *RejectError. A request is answered once. A Reject refused for its
// arguments (a reason or private data the CM does not take) sends
// nothing: the request still waits for an answer.
func (r *Request) Reject(reason int, privateData []byte) error {
	const op = "reject"
	if r == nil || r.id == nil {
		return invalid(op, "Request", "a nil or zero Request, not made by Listener.Accept")
	}
	obj := r.String()
	if reason == 0 {
		reason = RejectConsumerDefined
	}
	if reason != RejectConsumerDefined && reason != RejectVendorOptionNotSupported {
		return invalid(op, obj, "reason %d: an application rejects with %d (consumer defined) or %d (vendor option not supported)",
			reason, RejectConsumerDefined, RejectVendorOptionNotSupported)
	}
	limit := MaxRejectData
	if r.local.Space == UDP {
		limit = MaxUDReplyData
	}
	if len(privateData) > limit {
		return invalid(op, obj, "%d bytes of private data: a %v reject carries at most %d", len(privateData), r.local.Space, limit)
	}
	if err := r.answer(op, obj); err != nil {
		return err
	}
	defer r.settled()
	m := r.l.m
	err := r.id.call(func(kid uint32) error { return m.s.Reject(kid, uint8(reason), privateData) })
	r.id.destroy()
	if err != nil {
		if errors.Is(err, errIDGone) {
			return closedErr(op, obj)
		}
		return opErr(op, obj, err)
	}
	return nil
}

// drop rejects a request nobody answered (its listener closed).
func (r *Request) drop() {
	r.mu.Lock()
	answered := r.answered
	r.answered = true
	r.dropped = !answered
	r.mu.Unlock()
	if !answered {
		r.id.destroy()
	}
}
