package rdmacm

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// Addresses, ports and routes of the connection manager: cma.c's
// rdma_bind_addr, rdma_resolve_addr and rdma_resolve_route over the IP
// layer of a host whose netdevs are lo and the HCA's (the addresses of
// the HCA's GID table, on a /24, a /64 and the link-local prefix of
// interface 2), and ucma.c's query and init_qp_attr. cma takes a loopback
// address as it takes the unspecified one (cma_any_addr): a bind to it
// binds no device, a listener on it listens on every device, and
// resolving it binds the first active port's default GID
// (cma_resolve_loopback), with no netdev to route through (the lab's
// kernels answer so).

// addrKind is what the host's IP layer makes of an address.
type addrKind int

const (
	addrNone      addrKind = iota // no netdev holds it
	addrNetdev                    // the HCA's netdev holds it: an RDMA device
	addrNeighbour                 // in the netdev's subnet, another host's
)

// anyAddr is cma_any_addr: the unspecified or a loopback address.
func anyAddr(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	return a.IsUnspecified() || a.IsLoopback()
}

// classify is the host's view of an address that is not anyAddr. A
// link-local IPv6 address needs its interface as the zone.
func (n *Net) classify(a netip.Addr) addrKind {
	a = a.Unmap()
	zone := a.Zone()
	plain := a.WithZone("")
	switch {
	case plain == n.v4 || plain == n.v6:
		return addrNetdev
	case plain == n.ll && zone == fmt.Sprint(netdevIndex):
		return addrNetdev
	case plain.Is4() && netip.PrefixFrom(n.v4, netdevPrefV4).Contains(plain),
		plain.Is6() && netip.PrefixFrom(n.v6, netdevPrefV6).Contains(plain),
		plain.IsLinkLocalUnicast() && zone == fmt.Sprint(netdevIndex):
		return addrNeighbour
	}
	return addrNone
}

// gidOf is rdma_ip2gid: an IPv4 address mapped into IPv6, an IPv6 one as
// it is.
func gidOf(a netip.Addr) [16]byte { return a.Unmap().WithZone("").As16() }

// sgidIndex is the index of the RoCE v2 GID of a netdev address (cma
// prefers RoCE v2: CMA_PREFERRED_ROCE_GID_TYPE).
func (n *Net) sgidIndex(a netip.Addr) (uint8, bool) {
	g := gidOf(a)
	for _, e := range n.h.GIDTable() {
		if e.GID == g && e.Type == gidTypeRoCEv2 {
			return uint8(e.Index), true
		}
	}
	return 0, false
}

// Bind is ucma_bind: rdma_bind_addr from IDLE.
func (f *File) Bind(id uint32, a netip.AddrPort) error {
	return f.with("bind", id, anyID, func(c *cmID) error { return f.n.bind(c, a) })
}

// bind is rdma_bind_addr_dst: the address must be this host's and, unless
// unspecified, have the RDMA device behind it (cma_translate_addr,
// cma_acquire_dev_by_src_ip); then a port (cma_get_port).
func (n *Net) bind(c *cmID, a netip.AddrPort) error {
	const call = "bind"
	if !a.Addr().IsValid() {
		return kerr(call, unix.EINVAL, "rdma_addr_size_kss: no address")
	}
	if c.state != cmaIdle {
		return kerr(call, unix.EINVAL, "rdma_bind_addr_dst: the id is not IDLE")
	}
	ip := a.Addr().Unmap()
	if ip.Is6() && ip.WithZone("").IsLinkLocalUnicast() && ip.Zone() == "" {
		return kerr(call, unix.EINVAL, "cma_check_linklocal: a link-local address needs its scope id")
	}
	device := false
	if !anyAddr(ip) {
		if n.classify(ip) != addrNetdev {
			return kerr(call, unix.EADDRNOTAVAIL, "rdma_translate_ip: no netdev of this host holds the address")
		}
		if n.removed {
			return kerr(call, unix.ENODEV, "cma_acquire_dev_by_src_ip: the RDMA device was removed")
		}
		device = true
	}
	c.src = netip.AddrPortFrom(ip, a.Port())
	if !c.afSet {
		c.afonly = ip.Is4() // AF_INET ids take their family only; IPv6 net.ipv6.bindv6only (0)
	}
	if err := n.getPort(c); err != nil {
		c.src = netip.AddrPort{}
		return err
	}
	c.device = device
	c.state = cmaAddrBound
	return nil
}

// The ephemeral port range (inet_get_local_port_range's default).
const (
	portLow  = 32768
	portHigh = 60999
)

// getPort is cma_get_port: a free ephemeral port for port 0
// (cma_alloc_any_port), else the port if cma_check_port allows it
// (cma_use_port). The model's process may bind any port (CAP_NET_BIND_SERVICE).
func (n *Net) getPort(c *cmID) error {
	if c.src.Port() == 0 {
		span := portHigh - portLow + 1
		start := n.rnd.IntN(span)
		for i := range span {
			p := uint16(portLow + (start+i)%span)
			if _, used := n.binds[bindKey{c.ps, p}]; !used {
				n.takePort(c, p)
				return nil
			}
		}
		return kerr("bind", unix.EADDRNOTAVAIL, "cma_alloc_any_port: no free port")
	}
	p := c.src.Port()
	if bl := n.binds[bindKey{c.ps, p}]; bl != nil {
		if err := n.checkPort(bl, c, c.reuseaddr); err != nil {
			return err
		}
	}
	n.takePort(c, p)
	return nil
}

// checkPort is cma_check_port: c may share the port unless an owner
// holds the same address (EADDRINUSE) or either is unspecified
// (EADDRNOTAVAIL), where reuse on both sides or different families of
// AF-only ids allow it.
func (n *Net) checkPort(bl *bindList, c *cmID, reuse bool) error {
	for _, o := range bl.owners {
		if o == c || (reuse && o.reuseaddr) {
			continue
		}
		if c.afonly && o.afonly && c.src.Addr().Is4() != o.src.Addr().Is4() {
			continue
		}
		if anyAddr(c.src.Addr()) || anyAddr(o.src.Addr()) {
			return kerr("bind", unix.EADDRNOTAVAIL, "cma_check_port: the port is bound to the unspecified (or a loopback) address")
		}
		if c.src.Addr() == o.src.Addr() {
			return kerr("bind", unix.EADDRINUSE, "cma_check_port: the address and port are in use")
		}
	}
	return nil
}

func (n *Net) takePort(c *cmID, p uint16) {
	k := bindKey{c.ps, p}
	bl := n.binds[k]
	if bl == nil {
		bl = &bindList{}
		n.binds[k] = bl
	}
	bl.owners = append(bl.owners, c)
	c.bind = bl
	c.src = netip.AddrPortFrom(c.src.Addr(), p)
}

// releasePort is cma_release_port.
func (n *Net) releasePort(c *cmID) {
	bl := c.bind
	if bl == nil {
		return
	}
	c.bind = nil
	for i, o := range bl.owners {
		if o == c {
			bl.owners = append(bl.owners[:i], bl.owners[i+1:]...)
			break
		}
	}
	if len(bl.owners) == 0 {
		delete(n.binds, bindKey{c.ps, c.src.Port()})
	}
}

// ResolveAddr is ucma_resolve_addr: rdma_resolve_addr binds an IDLE id
// first (resolve_prepare_src), then resolves dst. The unspecified and the
// loopback addresses resolve to the first active port
// (cma_resolve_loopback: the source becomes the loopback address, both
// GIDs the port's default GID), with no netdev to route through. Others
// go through the IP layer (rdma_resolve_ip, addr.c): a destination off
// the netdev's subnets has no route (ENETUNREACH, returned at once); the
// netdev's own addresses resolve at once, with the source of the same
// address; another host of the subnet never answers the neighbour lookup
// (ADDR_ERROR -ETIMEDOUT after timeoutMs).
func (f *File) ResolveAddr(id uint32, src, dst netip.AddrPort, timeoutMs uint32) error {
	const call = "resolve addr"
	return f.with(call, id, anyID, func(c *cmID) error {
		n := f.n
		if !dst.Addr().IsValid() {
			return kerr(call, unix.EINVAL, "ucma_resolve_addr: no destination")
		}
		dip := dst.Addr().Unmap()
		dst = netip.AddrPortFrom(dip, dst.Port())
		switch c.state {
		case cmaAddrBound:
		case cmaIdle:
			s := src
			if !s.Addr().IsValid() {
				s = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
				if dip.Is6() {
					s = netip.AddrPortFrom(netip.IPv6Unspecified().WithZone(dip.Zone()), 0)
				}
			}
			if err := n.bind(c, s); err != nil {
				return err
			}
		default:
			return kerr(call, unix.EINVAL, "rdma_bind_addr_dst: the id is not IDLE")
		}
		if c.src.Addr().Is4() != dip.Is4() {
			return kerr(call, unix.EINVAL, "resolve_prepare_src: the source and the destination are of different families")
		}
		c.dst = dst
		if anyAddr(dip) {
			if !c.device && n.removed {
				return kerr(call, unix.ENODEV, "cma_bind_loopback: no RDMA device")
			}
			if !c.device {
				// cma_bind_loopback: the port's default GID, the source the
				// loopback address (cma_set_loopback).
				lo := netip.IPv6Loopback()
				if dip.Is4() {
					lo = netip.AddrFrom4([4]byte{127, 0, 0, 1})
				}
				c.src = netip.AddrPortFrom(lo, c.src.Port())
				c.device, c.loopback = true, true
			}
			c.state = cmaAddrResolved
			n.queue(c, seam.CMEvent{Type: cmEvAddrResolved})
			return nil
		}
		kind := n.classify(dip)
		if kind == addrNone {
			return kerr(call, unix.ENETUNREACH, "addr4_resolve/addr6_resolve: no route to the destination")
		}
		c.state = cmaAddrQuery
		switch kind {
		case addrNetdev:
			if n.removed {
				return n.addrError(c, -int32(unix.ENODEV))
			}
			if !c.device {
				if !c.src.Addr().IsUnspecified() {
					// Bound to a loopback address: addr_handler's
					// cma_acquire_dev_by_src_ip finds no device for it.
					return n.addrError(c, -int32(unix.ENODEV))
				}
				c.src = netip.AddrPortFrom(dip, c.src.Port())
				c.device = true
			}
			c.state = cmaAddrResolved
			n.queue(c, seam.CMEvent{Type: cmEvAddrResolved})
		case addrNeighbour:
			c.timer = time.AfterFunc(time.Duration(timeoutMs)*time.Millisecond, func() {
				n.mu.Lock()
				defer n.mu.Unlock()
				if c.state == cmaAddrQuery {
					c.timer = nil
					n.addrError(c, -int32(unix.ETIMEDOUT))
				}
			})
		}
		return nil
	})
}

// addrError is addr_handler's failure: back to ADDR_BOUND, ADDR_ERROR.
func (n *Net) addrError(c *cmID, status int32) error {
	c.state = cmaAddrBound
	n.queue(c, seam.CMEvent{Type: cmEvAddrError, Status: status})
	return nil
}

// cmaIBOEPacketLifetime is CMA_IBOE_PACKET_LIFETIME (cma.c).
const cmaIBOEPacketLifetime = 18

// ResolveRoute is ucma_resolve_route: rdma_resolve_route from
// ADDR_RESOLVED builds the RoCE path (cma_resolve_iboe_route): the GIDs
// of the two addresses, P_Key 0xffff, the netdev's MTU, hop limit 64,
// the type of service as traffic class, packet life time 18 (or the ACK
// timeout set, less one), and RoCE v2's flow label from the ports.
func (f *File) ResolveRoute(id uint32, timeoutMs uint32) error {
	const call = "resolve route"
	return f.with(call, id, devID, func(c *cmID) error {
		n := f.n
		if timeoutMs == 0 {
			return kerr(call, unix.EINVAL, "rdma_resolve_route: timeout_ms 0")
		}
		if c.state != cmaAddrResolved {
			return kerr(call, unix.EINVAL, "rdma_resolve_route: the id's address is not resolved")
		}
		if c.loopback {
			return kerr(call, unix.ENODEV, "cma_iboe_set_path_rec_l2_fields: a loopback-resolved id has no netdev to route through")
		}
		idx, ok := n.sgidIndex(c.src.Addr())
		if !ok {
			return kerr(call, unix.ENODEV, "cma_iboe_set_path_rec_l2_fields: no GID of the source address")
		}
		r := &cmRoute{sgidIndex: idx, dgid: gidOf(c.dst.Addr()), hopLimit: 64, tclass: c.tos, mtu: n.h.PathMTU(),
			plt: cmaIBOEPacketLifetime}
		if c.timeSet && c.timeout != 0 {
			r.plt = c.timeout - 1
		}
		// cma_get_roce_udp_flow_label: no IPv6 flow info, so the ports' hash.
		r.flowLabel = (uint32(c.src.Port())*31 + uint32(c.dst.Port())) & 0xfffff
		c.route = r
		c.state = cmaRouteResolved
		n.queue(c, seam.CMEvent{Type: cmEvRouteResolved})
		return nil
	})
}

// QueryAddr is ucma_query_addr.
func (f *File) QueryAddr(id uint32) (a seam.CMAddr, err error) {
	err = f.with("query addr", id, anyID, func(c *cmID) error {
		a = seam.CMAddr{Src: c.src, Dst: c.dst}
		if c.device {
			a.NodeGUID, a.Port = f.n.h.NodeGUID(), 1
		}
		return nil
	})
	return a, err
}

// ah is the address vector to the peer: the route's GRH
// (ib_init_ah_attr_from_path for RoCE).
func (r *cmRoute) ah() seam.AHAttr {
	return seam.AHAttr{IsGlobal: true, Port: 1, GRH: seam.GlobalRoute{DGID: r.dgid, SGIDIndex: r.sgidIndex, HopLimit: r.hopLimit,
		TrafficClass: r.tclass, FlowLabel: r.flowLabel}}
}

// QP attribute mask bits (enum ib_qp_attr_mask) and access flags.
const (
	qpMaskState      = 1 << 0
	qpMaskAccess     = 1 << 3
	qpMaskPKeyIndex  = 1 << 4
	qpMaskPort       = 1 << 5
	qpMaskQKey       = 1 << 6
	qpMaskAV         = 1 << 7
	qpMaskPathMTU    = 1 << 8
	qpMaskTimeout    = 1 << 9
	qpMaskRetryCnt   = 1 << 10
	qpMaskRNRRetry   = 1 << 11
	qpMaskRQPSN      = 1 << 12
	qpMaskMaxRdAtom  = 1 << 13
	qpMaskMinRNR     = 1 << 15
	qpMaskSQPSN      = 1 << 16
	qpMaskMaxDestRd  = 1 << 17
	qpMaskDestQPN    = 1 << 20
	accessRemoteWr   = 1 << 1
	accessRemoteRd   = 1 << 2
	accessRemoteAtom = 1 << 3
	rdmaUDPQKey      = 0x01234567 // RDMA_UDP_QKEY
)

// InitQPAttr is ucma_init_qp_attr: rdma_init_qp_attr gives, before the
// IB CM has a connection or for UD, cma_ib_init_qp_attr's INIT
// attributes (P_Key index, port; the UD Q_Key or no access); then
// ib_cm_init_qp_attr's for INIT, RTR and RTS in the connection's states
// (cm_init_qp_init_attr, cm_init_qp_rtr_attr, cm_init_qp_rts_attr), the
// RTR's RQ PSN being this side's own start (cma), and the ACK timeout
// set by option.
func (f *File) InitQPAttr(id uint32, state uint8) (a seam.QPAttr, mask uint32, err error) {
	const call = "init qp attr"
	if state > seam.QPStateErr {
		return seam.QPAttr{}, 0, kerr(call, unix.EINVAL, "ucma_init_qp_attr: qp_state > IB_QPS_ERR")
	}
	err = f.with(call, id, devID, func(c *cmID) (err error) {
		a, mask, err = initQPAttr(call, c, state)
		return err
	})
	return a, mask, err
}

// initQPAttr is rdma_init_qp_attr for InitQPAttr.
func initQPAttr(call string, c *cmID, state uint8) (seam.QPAttr, uint32, error) {
	a := seam.QPAttr{State: state}
	var mask uint32
	if !c.hasIB || c.qpType == ibQPTypeUD {
		a.PKeyIndex, a.Port = 0, 1
		mask = qpMaskState | qpMaskPKeyIndex | qpMaskPort
		if c.qpType == ibQPTypeUD {
			if c.qkey == 0 {
				c.qkey = rdmaUDPQKey // cma_set_default_qkey
			}
			a.QKey = c.qkey
			mask |= qpMaskQKey
		} else {
			mask |= qpMaskAccess
		}
	} else {
		switch state {
		case seam.QPStateInit:
			if c.ib < ibReqSent || c.ib > ibEstablished {
				return seam.QPAttr{}, 0, kerr(call, unix.EINVAL, "cm_init_qp_init_attr: the connection's state has no INIT attributes")
			}
			a.AccessFlags = accessRemoteWr
			if c.respRes != 0 {
				a.AccessFlags |= accessRemoteRd | accessRemoteAtom
			}
			a.PKeyIndex, a.Port = 0, 1
			mask = qpMaskState | qpMaskAccess | qpMaskPKeyIndex | qpMaskPort
		case seam.QPStateRTR:
			if c.ib < ibReqRcvd || c.ib > ibEstablished {
				return seam.QPAttr{}, 0, kerr(call, unix.EINVAL, "cm_init_qp_rtr_attr: no REQ or REP yet")
			}
			a.AH = c.route.ah()
			a.PathMTU, a.DestQPN = c.pathMTU, c.remoteQPN
			a.MaxDestRdAtomic, a.MinRNRTimer = c.respRes, 0
			mask = qpMaskState | qpMaskAV | qpMaskPathMTU | qpMaskDestQPN | qpMaskRQPSN | qpMaskMaxDestRd | qpMaskMinRNR
		case seam.QPStateRTS:
			if c.ib < ibReqRcvd || c.ib > ibEstablished {
				return seam.QPAttr{}, 0, kerr(call, unix.EINVAL, "cm_init_qp_rts_attr: no REQ or REP yet")
			}
			a.SQPSN, a.RetryCnt, a.RNRRetry = c.remoteSeq, c.retryCount, c.rnrRetry
			a.MaxRdAtomic, a.Timeout = c.initDepth, c.ackTimeout
			mask = qpMaskState | qpMaskSQPSN | qpMaskRetryCnt | qpMaskRNRRetry | qpMaskMaxRdAtom | qpMaskTimeout
		default:
			return seam.QPAttr{}, 0, kerr(call, unix.EINVAL, fmt.Sprintf("ib_cm_init_qp_attr: state %d", state))
		}
	}
	if state == seam.QPStateRTR {
		a.RQPSN = c.seq
	}
	if mask&qpMaskTimeout != 0 && c.timeSet {
		a.Timeout = c.timeout
	}
	return a, mask, nil
}
