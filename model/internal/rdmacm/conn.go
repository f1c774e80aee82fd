package rdmacm

import (
	"net/netip"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
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

// Listen is ucma_listen: the backlog (0 or beyond max_backlog is
// max_backlog), then rdma_listen from ADDR_BOUND (an IDLE id binds to
// 0.0.0.0 first); a listener's port is its own even with REUSEADDR
// (cma_check_port without reuse).
func (f *File) Listen(id uint32, backlog int) error {
	const call = "listen"
	return f.with(call, id, anyID, func(c *cmID) error {
		n := f.n
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
	})
}

// findListener is cma_find_listener: a listening id of the port space on
// the port whose address is the destination, or unspecified (or
// loopback: cma_any_addr) of its family, an IPv6 one that is not AF-only
// taking IPv4 too (cma_match_private_data).
func (n *Net) findListener(ps uint16, dst netip.AddrPort) *cmID {
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
func (f *File) Connect(id uint32, p *seam.CMConnParam) error {
	const call = "connect"
	if p == nil {
		return kerr(call, unix.EINVAL, "ucma_connect: conn_param.valid is 0")
	}
	return f.with(call, id, devID, func(c *cmID) error {
		n := f.n
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
	})
}

// reverse is the passive side's route to the active one, from the REQ's
// path (cm_format_paths_from_req): the GIDs swapped, the same hop limit,
// class and flow label.
func (n *Net) reverse(c, a *cmID) *cmRoute {
	idx, _ := n.sgidIndex(c.src.Addr())
	return &cmRoute{sgidIndex: idx, dgid: gidOf(a.src.Addr()), hopLimit: a.route.hopLimit, tclass: a.route.tclass,
		flowLabel: a.route.flowLabel, mtu: a.route.mtu, plt: a.route.plt}
}

// listenerFor is the listener a request from a reaches: a listener of
// the destination (findListener) with a's QP type, or nil.
func (n *Net) listenerFor(a *cmID) *cmID {
	l := n.findListener(a.ps, a.dst)
	if l == nil || l.qpType != a.qpType {
		return nil
	}
	return l
}

// passive is the id a request from a makes in listener l's file
// (cma_ib_new_conn_id, cma_ib_new_udp_id): connecting, on the device,
// a's peer on the route back to it, with no uid until the accept. The
// listener gets ev as CONNECT_REQUEST, which holds one of its backlog
// until NextEvent takes it.
func (n *Net) passive(l, a *cmID, ib cmIBState, ev seam.CMEvent) *cmID {
	c := n.newID(l.f, 0, l.ps, a.qpType)
	c.state, c.device, c.hasIB, c.ib = cmaConnect, true, true, ib
	c.src, c.dst = netip.AddrPortFrom(a.dst.Addr(), l.src.Port()), a.src
	c.peer, a.peer = a, c
	c.route = n.reverse(c, a)
	l.backlog--
	ev.UID, ev.ID, ev.Type = l.uid, c.id, cmEvConnectRequest
	n.push(l.f, cmEvent{ev: ev, id: c, listener: l})
	return c
}

// req delivers a REQ to the listener of the destination (cm_req_handler,
// cma_ib_req_handler): none rejects it (IB_CM_REJ_INVALID_SERVICE_ID); a
// full backlog drops it (ucma returns -ENOMEM, cm_destroy_id does not
// reject), to be sent again; else the listener's file gets
// CONNECT_REQUEST (ucma_connect_event_handler) for a passive id.
func (n *Net) req(a *cmID, pd []byte, attempt int) {
	l := n.listenerFor(a)
	if l == nil {
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
	c := n.passive(l, a, ibReqRcvd, seam.CMEvent{Conn: seam.CMConnParam{QPN: a.qpn, PrivateData: pd, SRQ: a.srq,
		ResponderResources: a.initDepth, InitiatorDepth: a.respRes, RetryCount: a.retryCount, RNRRetryCount: a.rnrRetry}})
	c.remoteQPN, c.remoteSeq = a.qpn, a.seq
	c.respRes, c.initDepth = a.initDepth, a.respRes
	c.retryCount, c.rnrRetry, c.pathMTU = a.retryCount, a.rnrRetry, a.pathMTU
	c.ackTimeout = cmAckTimeout(n.h.CAAckDelay(), c.route.plt)
}

// sidrReq delivers a SIDR REQ (cm_sidr_req_handler): with no listener
// the requester is answered IB_SIDR_UNSUPPORTED, a full backlog
// IB_SIDR_REJECT (the failed handler's cm_destroy_id); else as req.
func (n *Net) sidrReq(a *cmID, pd []byte) {
	l := n.listenerFor(a)
	switch {
	case l == nil:
		n.sidrRepReceived(a, sidrUnsupported, nil, 0, 0)
	case l.backlog <= 0:
		n.sidrRepReceived(a, sidrReject, nil, 0, 0)
	default:
		n.passive(l, a, ibSIDRReqRcvd, seam.CMEvent{UD: seam.CMUDParam{PrivateData: pad(pd, cmSIDRReqPrivateData-cmaHdrSize)}})
	}
}

// sidrRepReceived is cma_sidr_rep_handler: success is ESTABLISHED with
// the listener's QP, Q_Key and the route's address vector; a status is
// UNREACHABLE with it.
func (n *Net) sidrRepReceived(a *cmID, status int32, pd []byte, qpn, qkey uint32) {
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

// sendsREJ: the IB CM sends a REJ from these states, between the REQ and
// the RTU (cm_send_rej_locked), and takes one in them (cm_rej_handler).
func (s cmIBState) sendsREJ() bool {
	switch s {
	case ibReqSent, ibReqRcvd, ibRepSent, ibRepRcvd:
		return true
	}
	return false
}

// rejReceived is a REJ arriving (cm_rej_handler, cma_ib_handler): the id
// leaves the connection and, while connecting, gets REJECTED with the
// reason and the REJ's private data.
func (n *Net) rejReceived(c *cmID, reason int32, pd []byte) {
	if !c.ib.sendsREJ() {
		return
	}
	c.ib = ibIdle
	c.peer = nil
	if c.state == cmaConnect {
		n.queue(c, seam.CMEvent{Type: cmEvRejected, Status: reason, Conn: seam.CMConnParam{PrivateData: pad(pd, cmRejPrivateData)}})
	}
}

// sidrRepRule is why c cannot answer with a SIDR REP carrying pd
// (ib_send_cm_sidr_rep), or "" when it can.
func (c *cmID) sidrRepRule(pd []byte) string {
	switch {
	case c.ib != ibSIDRReqRcvd:
		return "ib_send_cm_sidr_rep: no SIDR REQ to answer"
	case len(pd) > cmSIDRRepPrivateData:
		return "ib_send_cm_sidr_rep: private data exceeds the SIDR REP's"
	}
	return ""
}

// Accept is ucma_accept. With parameters it is rdma_accept of a connect
// request: a REP (ib_send_cm_rep from REQ_RCVD, its private data within
// the REP's) that the requester gets as CONNECT_RESPONSE, or a SIDR REP
// (Q_Key RDMA_UDP_QKEY: ucma passes none for IP addresses) that it gets
// as ESTABLISHED; the id's events carry uid from then. Without, it is
// the requester's RTU (cma_rep_recv: ib_send_cm_rtu from REP_RCVD), and
// the listener's side gets ESTABLISHED. A failure rejects the
// connection (rdma_accept's error path).
func (f *File) Accept(id uint32, uid uint64, p *seam.CMConnParam) error {
	const call = "accept"
	return f.with(call, id, devID, func(c *cmID) error {
		n := f.n
		if c.state != cmaConnect {
			return kerr(call, unix.EINVAL, "rdma_accept: the id is not connecting")
		}
		fail := func(rule string) error {
			n.reject(c, rejConsumerDefined, nil)
			return kerr(call, unix.EINVAL, rule)
		}
		switch {
		case p == nil && c.qpType == ibQPTypeUD:
			if rule := c.sidrRepRule(nil); rule != "" {
				return fail(rule)
			}
			n.sidrRep(c, 0, nil, 0)
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
			if rule := c.sidrRepRule(p.PrivateData); rule != "" {
				return fail(rule)
			}
			c.uid = uid
			n.sidrRep(c, 0, p.PrivateData, c.qpn)
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
		a.ackTimeout = cmAckTimeout(n.h.CAAckDelay(), a.route.plt)
		n.queue(a, seam.CMEvent{Type: cmEvConnectResponse, Conn: seam.CMConnParam{QPN: c.qpn, PrivateData: pad(p.PrivateData, cmRepPrivateData),
			SRQ: c.srq, ResponderResources: p.InitiatorDepth, InitiatorDepth: p.ResponderResources, RNRRetryCount: min(p.RNRRetryCount, 7)}})
		return nil
	})
}

// sidrRep answers a SIDR REQ (cma_send_sidr_rep): status 0 with c's QP
// and Q_Key (RDMA_UDP_QKEY if none was set), or a SIDR status.
func (n *Net) sidrRep(c *cmID, status int32, pd []byte, qpn uint32) {
	if status == 0 && c.qkey == 0 {
		c.qkey = rdmaUDPQKey
	}
	a := c.peer
	c.ib, c.peer = ibIdle, nil
	if a != nil {
		n.sidrRepReceived(a, status, pd, qpn, c.qkey)
	}
}

// Reject is ucma_reject: the reason must be IB_CM_REJ_CONSUMER_DEFINED
// (or 0 for it) or IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED; rdma_reject
// sends a REJ (from the states cm_send_rej_locked allows, private data
// within the REJ's) or, for UD, a SIDR REP with IB_SIDR_REJECT.
func (f *File) Reject(id uint32, reason uint8, privateData []byte) error {
	const call = "reject"
	if reason == 0 {
		reason = rejConsumerDefined
	}
	if reason != rejConsumerDefined && reason != rejVendorOption {
		return kerr(call, unix.EINVAL, "ucma_reject: only consumer-defined and vendor-option reasons")
	}
	return f.with(call, id, devID, func(c *cmID) error {
		if !c.hasIB {
			return kerr(call, unix.EINVAL, "rdma_reject: the id has no connection")
		}
		rule := ""
		switch {
		case c.qpType == ibQPTypeUD:
			rule = c.sidrRepRule(privateData)
		case !c.ib.sendsREJ():
			rule = "cm_send_rej_locked: the connection's state sends no REJ"
		case len(privateData) > cmRejPrivateData:
			rule = "ib_send_cm_rej: private data exceeds the REJ's"
		}
		if rule != "" {
			return kerr(call, unix.EINVAL, rule)
		}
		f.n.reject(c, int32(reason), privateData)
		return nil
	})
}

// reject sends a REJ with reason from c, or for UD a SIDR REP with
// IB_SIDR_REJECT, if c's state sends one.
func (n *Net) reject(c *cmID, reason int32, pd []byte) {
	switch {
	case c.qpType == ibQPTypeUD && c.ib == ibSIDRReqRcvd:
		n.sidrRep(c, sidrReject, pd, 0)
	case c.qpType != ibQPTypeUD && c.ib.sendsREJ():
		a := c.peer
		c.ib, c.peer = ibIdle, nil
		if a != nil {
			n.rejReceived(a, reason, pd)
		}
	}
}

// Disconnect is ucma_disconnect: rdma_disconnect sends a DREQ from
// ESTABLISHED (the peer gets DISCONNECTED), or a DREP to the peer's DREQ
// (the peer gets DISCONNECTED, both enter timewait); in any other state
// neither is sent and it does nothing, successfully.
func (f *File) Disconnect(id uint32) error {
	const call = "disconnect"
	return f.with(call, id, devID, func(c *cmID) error {
		if !c.hasIB {
			return kerr(call, unix.EINVAL, "rdma_disconnect: the id has no connection")
		}
		switch c.ib {
		case ibEstablished:
			f.n.dreq(c)
		case ibDreqRcvd:
			f.n.drep(c)
		}
		return nil
	})
}

// dreq sends a DREQ and waits for the DREP, or times out.
func (n *Net) dreq(c *cmID) {
	n.sendDREQ(c)
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

// sendDREQ sends a DREQ from c: an established peer leaves the
// connection (DISCONNECTED) and waits to answer (cm_dreq_handler).
func (n *Net) sendDREQ(c *cmID) {
	c.ib = ibDreqSent
	if a := c.peer; a != nil && a.ib == ibEstablished {
		a.ib = ibDreqRcvd
		n.disconnected(a, 0)
	}
}

// drep answers the peer's DREQ (ib_send_cm_drep): c enters timewait and
// the peer receives the DREP. The peer is read before c's timewait
// leaves it.
func (n *Net) drep(c *cmID) {
	a := c.peer
	n.timewait(c)
	n.drepReceived(a)
}

// drepReceived is cm_drep_handler: a, waiting for the answer to its
// DREQ, stops waiting, enters timewait and gets DISCONNECTED.
func (n *Net) drepReceived(a *cmID) {
	if a == nil || a.ib != ibDreqSent {
		return
	}
	a.stopTimer()
	n.timewait(a)
	n.disconnected(a, 0)
}

// disconnected is cma_ib_handler's DREQ_RECEIVED, DREP_RECEIVED and
// DREQ_ERROR: CONNECT to DISCONNECT, and DISCONNECTED.
func (n *Net) disconnected(c *cmID, status int32) {
	if c.state != cmaConnect {
		return
	}
	c.state = cmaDisconnect
	n.queue(c, seam.CMEvent{Type: cmEvDisconnected, Status: status})
}

// part ends the pairing of c with a, its peer: neither is the other's
// peer any more.
func part(c, a *cmID) {
	if a != nil && a.peer == c {
		a.peer = nil
	}
	c.peer = nil
}

// timewait is cm_enter_timewait: the id leaves its peer and, after the
// ACK timeout's time, TIMEWAIT_EXIT comes if the id is disconnected.
func (n *Net) timewait(c *cmID) {
	c.ib = ibTimewait
	part(c, c.peer)
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

// ibDestroy is cm_destroy_id: what the IB CM sends when an id goes. A
// requester still waiting for the reply rejects with IB_CM_REJ_TIMEOUT.
func (n *Net) ibDestroy(c *cmID) {
	a := c.peer
	switch c.ib {
	case ibSIDRReqRcvd:
		n.reject(c, sidrReject, nil)
	case ibReqSent:
		n.reject(c, rejTimeout, nil)
	case ibReqRcvd, ibRepSent, ibRepRcvd:
		n.reject(c, rejConsumerDefined, nil)
	case ibEstablished:
		n.sendDREQ(c)
	case ibDreqRcvd:
		n.drepReceived(a)
	}
	part(c, a)
	c.ib = ibIdle
}
