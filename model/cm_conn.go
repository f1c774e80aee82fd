package model

import (
	"net/netip"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// Connections of the model's connection manager: cma.c's rdma_listen,
// rdma_connect, rdma_accept, rdma_reject and rdma_disconnect with the IB
// CM messages they send (cm.c), delivered to the peer id in memory.

// The IB CM's private data sizes (<rdma/ib_cm.h>) and the RDMA CM's
// header before a request's (struct cma_hdr, cma.c).
const (
	cmReqPrivateData     = 92
	cmRepPrivateData     = 196
	cmRejPrivateData     = 148
	cmSIDRReqPrivateData = 216
	cmSIDRRepPrivateData = 136
	cmaHdrSize           = 36
)

// IB CM reject reasons and SIDR statuses (<rdma/ib_cm.h>).
const (
	rejTimeout          = 4
	rejInvalidServiceID = 8
	rejConsumerDefined  = 28
	rejVendorOption     = 35
	sidrUnsupported     = 1
	sidrReject          = 2
)

// The model's CM timings. cm.c retransmits a REQ every 4096 ms
// (cm_convert_to_ms of CMA_CM_RESPONSE_TIMEOUT 20) up to
// CMA_MAX_CM_RETRIES 15 times; a dropped REQ (a listener's backlog full)
// is delivered again on that schedule. A DREQ the peer does not answer
// times out after dreqTimeout, the model's choice (the kernel's is the
// connection's response timeout with retries: tens of seconds).
var (
	reqRetryInterval = 4096 * time.Millisecond
	reqRetries       = 15
	dreqTimeout      = time.Second
)

// maxBacklog is net.rdma_ucm.max_backlog's default (ucma.c).
const maxBacklog = 1024

// pad is the private data as the IB CM message carries it: the sender's
// bytes, zeros to the message's size.
func pad(b []byte, size int) []byte {
	out := make([]byte, size)
	copy(out, b)
	return out
}

// cmAckTimeout is cm.c's cm_ack_timeout.
func cmAckTimeout(caAckDelay, packetLifeTime uint8) uint8 {
	t := int(packetLifeTime) + 1
	if t >= int(caAckDelay) {
		if int(caAckDelay) >= t-1 {
			t++
		}
	} else {
		t = int(caAckDelay)
		if int(packetLifeTime)+1 >= int(caAckDelay)-1 {
			t++
		}
	}
	return uint8(min(31, t))
}

// cmConvertToMs is cm.c's cm_convert_to_ms: 4.096 µs × 2^t, roughly.
func cmConvertToMs(t uint8) time.Duration {
	return time.Duration(1<<max(int(t)-8, 0)) * time.Millisecond
}

func (n *cmNet) ackDelay() uint8 { return uint8(n.h.prof.cap(prm.CmdHcaCap.LocalCaAckDelay)) }

// Listen is ucma_listen: the backlog (0 or beyond max_backlog is
// max_backlog), then rdma_listen from ADDR_BOUND (an IDLE id binds to
// 0.0.0.0 first); a listener's port is its own even with REUSEADDR
// (cma_check_port without reuse).
func (f *CMFile) Listen(id uint32, backlog int) error {
	const call = "listen"
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	c, err := f.lookup(call, id)
	if err != nil {
		return err
	}
	if backlog <= 0 || backlog > maxBacklog {
		backlog = maxBacklog
	}
	c.backlog = backlog
	switch c.state {
	case cmaAddrBound:
	case cmaIdle:
		if err := n.bind(c, netip.AddrPortFrom(netip.IPv4Unspecified(), 0)); err != nil {
			return err
		}
	default:
		return kerr(call, unix.EINVAL, "rdma_listen: the id is not bound")
	}
	if c.reuseaddr {
		if err := n.checkPort(c.bind, c, false); err != nil {
			return err
		}
		c.reuseaddr = false
	}
	c.state = cmaListen
	return nil
}

// findListener is cma_find_listener: a listening id of the port space on
// the port whose address is the destination, or unspecified (or
// loopback: cma_any_addr) of its family, an IPv6 one that is not AF-only
// taking IPv4 too (cma_match_private_data).
func (n *cmNet) findListener(ps uint16, dst netip.AddrPort) *cmID {
	bl := n.binds[bindKey{ps, dst.Port()}]
	if bl == nil {
		return nil
	}
	for _, o := range bl.owners {
		if o.state != cmaListen {
			continue
		}
		la := o.src.Addr()
		switch {
		case anyAddr(la) && !o.afonly:
			return o
		case anyAddr(la) && la.Is4() == dst.Addr().Is4():
			return o
		case la.WithZone("") == dst.Addr().WithZone(""):
			return o
		}
	}
	return nil
}

// Connect is ucma_connect: rdma_connect from ROUTE_RESOLVED sends an IB
// CM REQ (or a SIDR REQ for UD) with the RDMA CM header before the
// private data, which must fit the message (ib_send_cm_req: EINVAL).
func (f *CMFile) Connect(id uint32, p *seam.CMConnParam) error {
	const call = "connect"
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if p == nil {
		return kerr(call, unix.EINVAL, "ucma_connect: conn_param.valid is 0")
	}
	c, err := f.lookupDev(call, id)
	if err != nil {
		return err
	}
	if c.state != cmaRouteResolved {
		return kerr(call, unix.EINVAL, "rdma_connect_locked: the id's route is not resolved")
	}
	size := cmReqPrivateData
	if c.qpType == ibQPTypeUD {
		size = cmSIDRReqPrivateData
	}
	if cmaHdrSize+len(p.PrivateData) > size {
		return kerr(call, unix.EINVAL, "ib_send_cm_req: private data with the CM header exceeds the message's")
	}
	c.qpn, c.srq = p.QPN&0xffffff, p.SRQ
	c.state, c.hasIB = cmaConnect, true
	if c.qpType == ibQPTypeUD {
		c.ib = ibSIDRReqSent
		n.sidrReq(c, p.PrivateData)
		return nil
	}
	c.ib = ibReqSent
	c.respRes, c.initDepth = p.ResponderResources, p.InitiatorDepth
	c.retryCount, c.rnrRetry = min(p.RetryCount, 7), min(p.RNRRetryCount, 7)
	c.pathMTU = c.route.mtu
	c.ackTimeout = c.route.plt + 1
	n.req(c, pad(p.PrivateData, cmReqPrivateData-cmaHdrSize), 0)
	return nil
}

// reverse is the passive side's route to the active one, from the REQ's
// path (cm_format_paths_from_req): the GIDs swapped, the same hop limit,
// class and flow label.
func (n *cmNet) reverse(c, a *cmID) *cmRoute {
	idx, _ := n.h.sgidIndex(c.src.Addr())
	return &cmRoute{sgidIndex: idx, dgid: gidOf(a.src.Addr()), hopLimit: a.route.hopLimit, tclass: a.route.tclass,
		flowLabel: a.route.flowLabel, mtu: a.route.mtu, plt: a.route.plt}
}

// req delivers a REQ to the listener of the destination (cm_req_handler,
// cma_ib_req_handler): none rejects it (IB_CM_REJ_INVALID_SERVICE_ID); a
// full backlog drops it (ucma returns -ENOMEM, cm_destroy_id does not
// reject), to be sent again; else a connection id is made in the
// listener's file, with no uid, and the listener's file gets
// CONNECT_REQUEST (ucma_connect_event_handler).
func (n *cmNet) req(a *cmID, pd []byte, attempt int) {
	l := n.findListener(a.ps, a.dst)
	if l == nil || l.qpType != a.qpType {
		n.rejReceived(a, rejInvalidServiceID, nil)
		return
	}
	if l.backlog <= 0 {
		if attempt >= reqRetries {
			a.ib = ibIdle
			n.queue(a, seam.CMEvent{Type: cmEvUnreachable, Status: -int32(unix.ETIMEDOUT)})
			return
		}
		a.timer = time.AfterFunc(reqRetryInterval, func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			if a.state == cmaConnect && a.ib == ibReqSent && a.peer == nil {
				a.timer = nil
				n.req(a, pd, attempt+1)
			}
		})
		return
	}
	c := n.newID(l.f, 0, l.ps, a.qpType)
	c.state, c.device, c.hasIB, c.ib = cmaConnect, true, true, ibReqRcvd
	c.src, c.dst = netip.AddrPortFrom(a.dst.Addr(), l.src.Port()), a.src
	c.peer, a.peer = a, c
	c.remoteQPN, c.remoteSeq = a.qpn, a.seq
	c.respRes, c.initDepth = a.initDepth, a.respRes
	c.retryCount, c.rnrRetry, c.pathMTU = a.retryCount, a.rnrRetry, a.pathMTU
	c.route = n.reverse(c, a)
	c.ackTimeout = cmAckTimeout(n.ackDelay(), c.route.plt)
	l.backlog--
	ev := seam.CMEvent{UID: l.uid, ID: c.id, Type: cmEvConnectRequest, Conn: seam.CMConnParam{QPN: a.qpn, PrivateData: pd,
		SRQ: a.srq, ResponderResources: a.initDepth, InitiatorDepth: a.respRes, RetryCount: a.retryCount, RNRRetryCount: a.rnrRetry}}
	n.push(l.f, cmEvent{ev: ev, id: c, listener: l})
}

// sidrReq delivers a SIDR REQ (cm_sidr_req_handler): with no listener
// the requester is answered IB_SIDR_UNSUPPORTED, a full backlog
// IB_SIDR_REJECT (the failed handler's cm_destroy_id); else as req.
func (n *cmNet) sidrReq(a *cmID, pd []byte) {
	l := n.findListener(a.ps, a.dst)
	if l == nil || l.qpType != ibQPTypeUD {
		n.sidrRepReceived(a, sidrUnsupported, nil, 0, 0)
		return
	}
	if l.backlog <= 0 {
		n.sidrRepReceived(a, sidrReject, nil, 0, 0)
		return
	}
	c := n.newID(l.f, 0, l.ps, ibQPTypeUD)
	c.state, c.device, c.hasIB, c.ib = cmaConnect, true, true, ibSIDRReqRcvd
	c.src, c.dst = netip.AddrPortFrom(a.dst.Addr(), l.src.Port()), a.src
	c.peer, a.peer = a, c
	c.route = n.reverse(c, a)
	l.backlog--
	ev := seam.CMEvent{UID: l.uid, ID: c.id, Type: cmEvConnectRequest, UD: seam.CMUDParam{PrivateData: pad(pd, cmSIDRReqPrivateData-cmaHdrSize)}}
	n.push(l.f, cmEvent{ev: ev, id: c, listener: l})
}

// sidrRepReceived is cma_sidr_rep_handler: success is ESTABLISHED with
// the listener's QP, Q_Key and the route's address vector; a status is
// UNREACHABLE with it.
func (n *cmNet) sidrRepReceived(a *cmID, status int32, pd []byte, qpn, qkey uint32) {
	if a.ib != ibSIDRReqSent {
		return
	}
	a.ib = ibIdle
	a.peer = nil
	ud := seam.CMUDParam{PrivateData: pad(pd, cmSIDRRepPrivateData)}
	if status != 0 {
		n.queue(a, seam.CMEvent{Type: cmEvUnreachable, Status: status, UD: ud})
		return
	}
	a.qkey = qkey
	ud.QPN, ud.QKey, ud.AH = qpn, qkey, a.route.ah()
	n.queue(a, seam.CMEvent{Type: cmEvEstablished, UD: ud})
}

// rejReceived is a REJ arriving (cm_rej_handler, cma_ib_handler): the id
// leaves the connection and, while connecting, gets REJECTED with the
// reason and the REJ's private data.
func (n *cmNet) rejReceived(c *cmID, reason int32, pd []byte) {
	switch c.ib {
	case ibReqSent, ibReqRcvd, ibRepSent, ibRepRcvd:
	default:
		return
	}
	c.ib = ibIdle
	c.peer = nil
	if c.state == cmaConnect {
		n.queue(c, seam.CMEvent{Type: cmEvRejected, Status: reason, Conn: seam.CMConnParam{PrivateData: pad(pd, cmRejPrivateData)}})
	}
}

// Accept is ucma_accept. With parameters it is rdma_accept of a connect
// request: a REP (ib_send_cm_rep from REQ_RCVD, its private data within
// the REP's) that the requester gets as CONNECT_RESPONSE, or a SIDR REP
// (Q_Key RDMA_UDP_QKEY: ucma passes none for IP addresses) that it gets
// as ESTABLISHED; the id's events carry uid from then. Without, it is
// the requester's RTU (cma_rep_recv: ib_send_cm_rtu from REP_RCVD), and
// the listener's side gets ESTABLISHED. A failure rejects the
// connection (rdma_accept's error path).
func (f *CMFile) Accept(id uint32, uid uint64, p *seam.CMConnParam) error {
	const call = "accept"
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	c, err := f.lookupDev(call, id)
	if err != nil {
		return err
	}
	if c.state != cmaConnect {
		return kerr(call, unix.EINVAL, "rdma_accept: the id is not connecting")
	}
	fail := func(rule string) error {
		n.reject(c, rejConsumerDefined, nil)
		return kerr(call, unix.EINVAL, rule)
	}
	switch {
	case p == nil && c.qpType == ibQPTypeUD:
		if c.ib != ibSIDRReqRcvd {
			return fail("ib_send_cm_sidr_rep: no SIDR REQ to answer")
		}
		n.sidrRep(c, nil, 0)
		return nil
	case p == nil:
		if c.ib != ibRepRcvd {
			return fail("ib_send_cm_rtu: no REP to answer")
		}
		c.ib = ibEstablished
		if a := c.peer; a != nil && a.ib == ibRepSent {
			a.ib = ibEstablished
			n.queue(a, seam.CMEvent{Type: cmEvEstablished})
		}
		return nil
	}
	c.qpn, c.srq = p.QPN&0xffffff, p.SRQ
	if c.qpType == ibQPTypeUD {
		if c.ib != ibSIDRReqRcvd {
			return fail("ib_send_cm_sidr_rep: no SIDR REQ to answer")
		}
		if len(p.PrivateData) > cmSIDRRepPrivateData {
			return fail("ib_send_cm_sidr_rep: private data exceeds the SIDR REP's")
		}
		c.uid = uid
		n.sidrRep(c, p.PrivateData, c.qpn)
		return nil
	}
	if c.ib != ibReqRcvd {
		return fail("ib_send_cm_rep: no REQ to answer (the requester gave up?)")
	}
	if len(p.PrivateData) > cmRepPrivateData {
		return fail("ib_send_cm_rep: private data exceeds the REP's")
	}
	c.ib, c.uid = ibRepSent, uid
	c.respRes, c.initDepth = p.ResponderResources, p.InitiatorDepth
	a := c.peer
	if a == nil || a.ib != ibReqSent {
		return nil
	}
	// cm_rep_handler: the REP's responder resources are the requester's
	// initiator depth and the other way round.
	a.ib = ibRepRcvd
	a.remoteQPN, a.remoteSeq = c.qpn, c.seq
	a.initDepth, a.respRes = p.ResponderResources, p.InitiatorDepth
	a.rnrRetry = min(p.RNRRetryCount, 7)
	a.ackTimeout = cmAckTimeout(n.ackDelay(), a.route.plt)
	n.queue(a, seam.CMEvent{Type: cmEvConnectResponse, Conn: seam.CMConnParam{QPN: c.qpn, PrivateData: pad(p.PrivateData, cmRepPrivateData),
		SRQ: c.srq, ResponderResources: p.InitiatorDepth, InitiatorDepth: p.ResponderResources, RNRRetryCount: min(p.RNRRetryCount, 7)}})
	return nil
}

// sidrRep answers a SIDR REQ with success (cma_send_sidr_rep).
func (n *cmNet) sidrRep(c *cmID, pd []byte, qpn uint32) {
	if c.qkey == 0 {
		c.qkey = rdmaUDPQKey
	}
	c.ib = ibIdle
	a := c.peer
	c.peer = nil
	if a != nil {
		n.sidrRepReceived(a, 0, pd, qpn, c.qkey)
	}
}

// Reject is ucma_reject: the reason must be IB_CM_REJ_CONSUMER_DEFINED
// (or 0 for it) or IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED; rdma_reject
// sends a REJ (from the states cm_send_rej_locked allows, private data
// within the REJ's) or, for UD, a SIDR REP with IB_SIDR_REJECT.
func (f *CMFile) Reject(id uint32, reason uint8, privateData []byte) error {
	const call = "reject"
	if reason == 0 {
		reason = rejConsumerDefined
	}
	if reason != rejConsumerDefined && reason != rejVendorOption {
		return kerr(call, unix.EINVAL, "ucma_reject: only consumer-defined and vendor-option reasons")
	}
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	c, err := f.lookupDev(call, id)
	if err != nil {
		return err
	}
	if !c.hasIB {
		return kerr(call, unix.EINVAL, "rdma_reject: the id has no connection")
	}
	if c.qpType == ibQPTypeUD {
		if c.ib != ibSIDRReqRcvd {
			return kerr(call, unix.EINVAL, "ib_send_cm_sidr_rep: no SIDR REQ to answer")
		}
		if len(privateData) > cmSIDRRepPrivateData {
			return kerr(call, unix.EINVAL, "ib_send_cm_sidr_rep: private data exceeds the SIDR REP's")
		}
	} else {
		switch c.ib {
		case ibReqSent, ibReqRcvd, ibRepSent, ibRepRcvd:
		default:
			return kerr(call, unix.EINVAL, "cm_send_rej_locked: the connection's state sends no REJ")
		}
		if len(privateData) > cmRejPrivateData {
			return kerr(call, unix.EINVAL, "ib_send_cm_rej: private data exceeds the REJ's")
		}
	}
	n.reject(c, int32(reason), privateData)
	return nil
}

// reject sends a REJ, or a SIDR reject, from c.
func (n *cmNet) reject(c *cmID, reason int32, pd []byte) {
	a := c.peer
	if c.qpType == ibQPTypeUD {
		if c.ib != ibSIDRReqRcvd {
			return
		}
		c.ib, c.peer = ibIdle, nil
		if a != nil {
			n.sidrRepReceived(a, sidrReject, pd, 0, 0)
		}
		return
	}
	switch c.ib {
	case ibReqSent, ibReqRcvd, ibRepSent, ibRepRcvd:
	default:
		return
	}
	c.ib, c.peer = ibIdle, nil
	if a != nil {
		n.rejReceived(a, reason, pd)
	}
}

// Disconnect is ucma_disconnect: rdma_disconnect sends a DREQ from
// ESTABLISHED (the peer gets DISCONNECTED), or a DREP to the peer's DREQ
// (the peer gets DISCONNECTED, both enter timewait); in any other state
// neither is sent and it does nothing, successfully.
func (f *CMFile) Disconnect(id uint32) error {
	const call = "disconnect"
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	c, err := f.lookupDev(call, id)
	if err != nil {
		return err
	}
	if !c.hasIB {
		return kerr(call, unix.EINVAL, "rdma_disconnect: the id has no connection")
	}
	switch c.ib {
	case ibEstablished:
		n.dreq(c)
	case ibDreqRcvd:
		n.drep(c)
	}
	return nil
}

// dreq sends a DREQ: the peer leaves the connection (DISCONNECTED) and
// waits to answer; c waits for the DREP, or times out.
func (n *cmNet) dreq(c *cmID) {
	c.ib = ibDreqSent
	if a := c.peer; a != nil && a.ib == ibEstablished {
		a.ib = ibDreqRcvd
		n.disconnected(a, 0)
	}
	c.timer = time.AfterFunc(dreqTimeout, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if c.ib == ibDreqSent && c.state != cmaDestroying {
			c.timer = nil
			n.timewait(c)
			n.disconnected(c, -int32(unix.ETIMEDOUT))
		}
	})
}

// drep answers the peer's DREQ: both sides enter timewait, and the peer,
// which sent the DREQ, gets DISCONNECTED (ib_send_cm_drep, then
// cm_drep_handler). The peer is read before c's timewait leaves it.
func (n *cmNet) drep(c *cmID) {
	a := c.peer
	n.timewait(c)
	if a != nil && a.ib == ibDreqSent {
		if a.timer != nil {
			a.timer.Stop()
			a.timer = nil
		}
		n.timewait(a)
		n.disconnected(a, 0)
	}
}

// disconnected is cma_ib_handler's DREQ_RECEIVED, DREP_RECEIVED and
// DREQ_ERROR: CONNECT to DISCONNECT, and DISCONNECTED.
func (n *cmNet) disconnected(c *cmID, status int32) {
	if c.state != cmaConnect {
		return
	}
	c.state = cmaDisconnect
	n.queue(c, seam.CMEvent{Type: cmEvDisconnected, Status: status})
}

// timewait is cm_enter_timewait: the id leaves its peer and, after the
// ACK timeout's time, TIMEWAIT_EXIT comes if the id is disconnected.
func (n *cmNet) timewait(c *cmID) {
	c.ib = ibTimewait
	if a := c.peer; a != nil && a.peer == c {
		a.peer = nil
	}
	c.peer = nil
	c.timer = time.AfterFunc(cmConvertToMs(c.ackTimeout), func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if c.ib != ibTimewait || c.state == cmaDestroying {
			return
		}
		c.timer = nil
		c.ib = ibIdle
		if c.state == cmaDisconnect {
			n.queue(c, seam.CMEvent{Type: cmEvTimewaitExit})
		}
	})
}

// ibDestroy is cm_destroy_id: what the IB CM sends when an id goes.
func (n *cmNet) ibDestroy(c *cmID) {
	a := c.peer
	switch c.ib {
	case ibSIDRReqRcvd:
		n.reject(c, sidrReject, nil)
	case ibReqSent:
		c.ib, c.peer = ibIdle, nil
		if a != nil {
			n.rejReceived(a, rejTimeout, nil)
		}
	case ibReqRcvd, ibRepSent, ibRepRcvd:
		n.reject(c, rejConsumerDefined, nil)
	case ibEstablished:
		c.ib = ibDreqSent
		if a != nil && a.ib == ibEstablished {
			a.ib = ibDreqRcvd
			n.disconnected(a, 0)
		}
	case ibDreqRcvd:
		if a != nil && a.ib == ibDreqSent {
			if a.timer != nil {
				a.timer.Stop()
				a.timer = nil
			}
			n.timewait(a)
			n.disconnected(a, 0)
		}
	}
	if a != nil && a.peer == c {
		a.peer = nil
	}
	c.peer = nil
	c.ib = ibIdle
}
