// Package rdmacm is the RDMA connection manager of the software
// ConnectX's host: what a process gets from /dev/infiniband/rdma_cm on a
// host whose one RDMA device is the model's HCA. It follows Linux 6.1's
// drivers/infiniband/core/ucma.c (the commands, their checks and errnos,
// the event file, the backlog, uids), cma.c (the id's states, binding and
// ports, address and route resolution over RoCE, the QP attributes, the
// CM header in a request's private data) and cm.c (the IB CM's connection
// states, REQ, REP, RTU, REJ, DREQ, DREP, SIDR, the private data sizes,
// what destroying an id sends, timewait). The messages between two ids go
// through memory, not a network: an id connects to a listener of the same
// HCA through the addresses of its netdev (loopback, as two processes on
// one host connect through rxe or a ConnectX). docs/MODEL.md ("Connection
// manager") lists the rules and the model's own choices.
//
// Package model makes one Net for each HCA and opens its Files for
// (*model.Device).OpenCM. The HCA is reached only through the HCA
// interface; the package imports internal/seam for the types of seam.CM,
// which File implements, and nothing else of the repository.
package rdmacm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// The netdev under the port: its index (the IPv6 link-local scope id) and
// prefixes. lo is index 1.
const (
	netdevIndex  = 2
	netdevPrefV4 = 24
	netdevPrefV6 = 64
)

// cma states (enum rdma_cm_state, cma_priv.h).
type cmaState int

const (
	cmaIdle cmaState = iota
	cmaAddrQuery
	cmaAddrResolved
	cmaRouteQuery
	cmaRouteResolved
	cmaConnect
	cmaDisconnect
	cmaAddrBound
	cmaListen
	cmaDestroying
)

// IB CM states (enum ib_cm_state, ib_cm.h); MRA states are folded into
// the ones they acknowledge.
type cmIBState int

const (
	ibIdle cmIBState = iota
	ibReqSent
	ibReqRcvd // and MRA_REQ_SENT: cma sends the MRA with the event
	ibRepSent
	ibRepRcvd // and MRA_REP_SENT
	ibEstablished
	ibDreqSent
	ibDreqRcvd
	ibTimewait
	ibSIDRReqSent
	ibSIDRReqRcvd
)

// Port spaces, event types, options (<rdma/rdma_user_cm.h>,
// <rdma/rdma_cm.h>).
const (
	psTCP   = 0x0106
	psUDP   = 0x0111
	psIB    = 0x013f
	psIPoIB = 0x0002

	cmEvAddrResolved    = 0
	cmEvAddrError       = 1
	cmEvRouteResolved   = 2
	cmEvRouteError      = 3
	cmEvConnectRequest  = 4
	cmEvConnectResponse = 5
	cmEvUnreachable     = 7
	cmEvRejected        = 8
	cmEvEstablished     = 9
	cmEvDisconnected    = 10
	cmEvDeviceRemoval   = 11
	cmEvTimewaitExit    = 15

	cmOptLevelID    = 0
	cmOptTOS        = 0
	cmOptReuseAddr  = 1
	cmOptAFOnly     = 2
	cmOptAckTimeout = 3

	ibQPTypeRC = 2
	ibQPTypeUD = 4
)

// Net is the connection manager of one HCA: every id of every file
// (ucma's ctx_table) and the bound ports (cma's per-port-space bind
// lists), under one lock.
type Net struct {
	h  HCA
	mu sync.Mutex

	// v4, v6 and ll are the netdev's addresses (see HCA.GIDTable).
	v4, v6, ll netip.Addr

	ids    map[uint32]*cmID
	nextID uint32
	binds  map[bindKey]*bindList
	rnd    *rand.Rand
	// removed: the device was removed (RemoveDevice).
	removed bool
}

// New returns the connection manager of h, with no file open. The
// netdev's addresses are read from h's GID table now, the rest of h when
// a command needs it.
func New(h HCA) *Net {
	n := &Net{h: h, ids: map[uint32]*cmID{}, binds: map[bindKey]*bindList{}, rnd: rand.New(rand.NewPCG(h.NodeGUID(), 0x636d))}
	for _, e := range h.GIDTable() {
		if e.Type != gidTypeRoCEv2 {
			continue
		}
		switch a := netip.AddrFrom16(e.GID); {
		case a.Is4In6():
			n.v4 = a.Unmap()
		case a.IsLinkLocalUnicast():
			n.ll = a
		default:
			n.v6 = a
		}
	}
	return n
}

type bindKey struct {
	ps   uint16
	port uint16
}

// bindList is struct rdma_bind_list: the ids bound to one port.
type bindList struct {
	owners []*cmID
}

// cmEvent is a queued event (struct ucma_event): the id it is about and,
// for a connect request, the listener whose backlog it holds.
type cmEvent struct {
	ev       seam.CMEvent
	id       *cmID
	listener *cmID
}

// File is an open rdma_cm (struct ucma_file): a seam.CM. Its ids connect
// to those of every other File of the same Net.
type File struct {
	n      *Net
	events []cmEvent // under n.mu
	ids    map[*cmID]bool
	wake   chan struct{}
	closed bool
}

// Open opens a file on the connection manager, as a process opens
// /dev/infiniband/rdma_cm.
func (n *Net) Open() *File {
	return &File{n: n, ids: map[*cmID]bool{}, wake: make(chan struct{}, 1)}
}

// IDs counts the ids alive: made by CreateID or for a connect request,
// not yet destroyed (an id in timewait that was destroyed is gone).
func (n *Net) IDs() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.ids)
}

// cmID is an id: ucma's context, cma's rdma_id_private and the IB CM's
// cm_id in one.
type cmID struct {
	f      *File
	id     uint32
	uid    uint64
	ps     uint16
	qpType uint8
	state  cmaState

	src, dst  netip.AddrPort
	device    bool // attached to the HCA (cma_attach_to_dev)
	loopback  bool // attached by cma_bind_loopback: no netdev
	bind      *bindList
	reuseaddr bool
	afonly    bool
	afSet     bool
	tos       uint8
	tosSet    bool
	timeout   uint8
	timeSet   bool
	seq       uint32 // the PSN this side starts from
	qkey      uint32
	route     *cmRoute

	// The IB CM side.
	ib         cmIBState
	hasIB      bool
	peer       *cmID
	qpn        uint32 // this side's QP, from connect or accept
	srq        bool
	remoteQPN  uint32
	remoteSeq  uint32
	respRes    uint8 // cm_id_priv->responder_resources
	initDepth  uint8 // cm_id_priv->initiator_depth
	retryCount uint8
	rnrRetry   uint8
	ackTimeout uint8 // av.timeout
	pathMTU    uint8

	// A listener's: the connect requests it may hold undelivered
	// (ucma_context.backlog).
	backlog int
	// timer is the id's pending timeout: a neighbour lookup, a REQ's
	// retransmission, a DREQ's wait, timewait.
	timer *time.Timer
	// removed: the device went; ucma's close_work released the cm_id.
	removed bool
}

// stopTimer cancels the id's pending timeout, if it has one.
func (c *cmID) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// cmRoute is the resolved route (the RoCE path record cma builds in
// cma_resolve_iboe_route): this side's GID index, the peer's GID.
type cmRoute struct {
	sgidIndex uint8
	dgid      [16]byte
	hopLimit  uint8
	tclass    uint8
	flowLabel uint32
	mtu       uint8
	plt       uint8 // packet life time
}

// What a command needs of its id: to be the file's (ucma_get_ctx), and
// for some to have a device too (ucma_get_ctx_dev).
const (
	anyID = false
	devID = true
)

// with runs a command on an id of the file under the manager's lock,
// once the id is found: op's error is the command's.
func (f *File) with(call string, id uint32, dev bool, op func(c *cmID) error) error {
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	c, err := f.lookup(call, id, dev)
	if err != nil {
		return err
	}
	return op(c)
}

// lookup is ucma_get_ctx, or with dev ucma_get_ctx_dev.
func (f *File) lookup(call string, id uint32, dev bool) (*cmID, error) {
	if f.closed {
		return nil, kerr(call, unix.EBADF, "the file is closed")
	}
	c := f.n.ids[id]
	switch {
	case c == nil:
		return nil, kerr(call, unix.ENOENT, "_ucma_find_context: no such id")
	case c.f != f:
		return nil, kerr(call, unix.EINVAL, "_ucma_find_context: the id is another file's")
	case c.removed && call != "destroy id":
		return nil, kerr(call, unix.ENXIO, "ucma_get_ctx: the device was removed and the id's cm_id released (ucma_close_id)")
	case dev && !c.device:
		return nil, kerr(call, unix.EINVAL, "ucma_get_ctx_dev: the id has no device (bind it to an address or resolve one first)")
	}
	return c, nil
}

// RemoveDevice does what the device's removal does (cma_process_remove,
// ucma_event_handler): every id on the device gets DEVICE_REMOVAL, its
// connection ends with no message to the peer (the peer is on the same
// device), and later commands on it fail with ENXIO, DestroyID excepted
// (ucma_close_id released its cm_id); addresses of the netdev then have
// no RDMA device behind them (ENODEV).
func (n *Net) RemoveDevice() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.removed = true
	for _, c := range n.ids {
		if !c.device || c.removed {
			continue
		}
		c.stopTimer()
		c.ib, c.peer, c.removed = ibIdle, nil, true
		n.queue(c, seam.CMEvent{Type: cmEvDeviceRemoval})
	}
}

// queue is ucma_event_handler: the event goes to the id's file unless
// the id has no uid yet (a connection not accepted: ucma drops its
// events until the accept sets one).
func (n *Net) queue(c *cmID, ev seam.CMEvent) {
	if c.uid == 0 || c.state == cmaDestroying || c.f.closed {
		return
	}
	ev.UID, ev.ID = c.uid, c.id
	n.push(c.f, cmEvent{ev: ev, id: c})
}

func (n *Net) push(f *File, e cmEvent) {
	f.events = append(f.events, e)
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// NextEvent is ucma_get_event: the oldest event; a connect request gives
// its listener's backlog back.
func (f *File) NextEvent(ctx context.Context) (seam.CMEvent, error) {
	n := f.n
	for {
		n.mu.Lock()
		if f.closed {
			n.mu.Unlock()
			return seam.CMEvent{}, kerr("get event", unix.EBADF, "the file is closed")
		}
		if len(f.events) > 0 {
			e := f.events[0]
			f.events = f.events[1:]
			if e.listener != nil {
				e.listener.backlog++
			}
			n.mu.Unlock()
			return e.ev, nil
		}
		n.mu.Unlock()
		select {
		case <-f.wake:
		case <-ctx.Done():
			return seam.CMEvent{}, ctx.Err()
		}
	}
}

// Close is ucma_close: every id of the file is destroyed.
func (f *File) Close() error {
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if f.closed {
		return nil
	}
	for len(f.ids) > 0 {
		for c := range f.ids {
			n.destroy(c)
			break
		}
	}
	f.closed = true
	f.events = nil
	close(f.wake)
	return nil
}

// CreateID is ucma_create_id: the port space picks the QP type
// (ucma_get_qp_type).
func (f *File) CreateID(uid uint64, ps uint16, qpType uint8) (uint32, error) {
	const call = "create id"
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if f.closed {
		return 0, kerr(call, unix.EBADF, "the file is closed")
	}
	switch ps {
	case psTCP:
		qpType = ibQPTypeRC
	case psUDP, psIPoIB:
		qpType = ibQPTypeUD
	case psIB:
	default:
		return 0, kerr(call, unix.EINVAL, fmt.Sprintf("ucma_get_qp_type: port space %#x", ps))
	}
	c := n.newID(f, uid, ps, qpType)
	return c.id, nil
}

func (n *Net) newID(f *File, uid uint64, ps uint16, qpType uint8) *cmID {
	n.nextID++
	c := &cmID{f: f, id: n.nextID, uid: uid, ps: ps, qpType: qpType, seq: n.rnd.Uint32() & 0xffffff}
	n.ids[c.id] = c
	f.ids[c] = true
	return c
}

// DestroyID is ucma_destroy_id.
func (f *File) DestroyID(id uint32) error {
	return f.with("destroy id", id, anyID, func(c *cmID) error {
		f.n.destroy(c)
		return nil
	})
}

// destroy is ucma_destroy_private_ctx with rdma_destroy_id: the IB CM
// side ends as cm_destroy_id ends it (a REJ, a DREQ or DREP, a SIDR
// reject), the port is released, the id's undelivered events are
// dropped and the connections of a listener's undelivered requests are
// destroyed too.
func (n *Net) destroy(c *cmID) {
	if c.state == cmaDestroying {
		return
	}
	c.state = cmaDestroying
	c.stopTimer()
	n.ibDestroy(c)
	n.releasePort(c)
	var orphans []*cmID
	c.f.events = slices.DeleteFunc(c.f.events, func(e cmEvent) bool {
		if e.id == c {
			return true
		}
		if e.listener == c {
			orphans = append(orphans, e.id)
			return true
		}
		return false
	})
	delete(n.ids, c.id)
	delete(c.f.ids, c)
	for _, o := range orphans {
		n.destroy(o)
	}
}

// SetOption is ucma_set_option at level RDMA_OPTION_ID
// (ucma_set_option_id): TOS (a byte), REUSEADDR and AFONLY (ints),
// ACK_TIMEOUT (a byte); others are ENOSYS.
func (f *File) SetOption(id uint32, level, name uint32, value []byte) error {
	const call = "set option"
	return f.with(call, id, anyID, func(c *cmID) error {
		if level != cmOptLevelID {
			return kerr(call, unix.ENOSYS, fmt.Sprintf("ucma_set_option_level: level %d", level))
		}
		intVal := func() (bool, error) {
			if len(value) != 4 {
				return false, kerr(call, unix.EINVAL, "ucma_set_option_id: optlen != sizeof(int)")
			}
			return value[0]|value[1]|value[2]|value[3] != 0, nil
		}
		switch name {
		case cmOptTOS:
			if len(value) != 1 {
				return kerr(call, unix.EINVAL, "ucma_set_option_id: TOS optlen != 1")
			}
			c.tos, c.tosSet = value[0], true
		case cmOptReuseAddr:
			v, err := intVal()
			if err != nil {
				return err
			}
			// rdma_set_reuseaddr: off only while IDLE, on unless listening.
			if !(v && c.state != cmaListen) && c.state != cmaIdle {
				return kerr(call, unix.EINVAL, "rdma_set_reuseaddr: the id is past IDLE (or listening)")
			}
			c.reuseaddr = v
		case cmOptAFOnly:
			v, err := intVal()
			if err != nil {
				return err
			}
			if c.state != cmaIdle && c.state != cmaAddrBound {
				return kerr(call, unix.EINVAL, "rdma_set_afonly: the id is past ADDR_BOUND")
			}
			c.afonly, c.afSet = v, true
		case cmOptAckTimeout:
			if len(value) != 1 {
				return kerr(call, unix.EINVAL, "ucma_set_option_id: ACK_TIMEOUT optlen != 1")
			}
			if c.qpType != ibQPTypeRC {
				return kerr(call, unix.EINVAL, "rdma_set_ack_timeout: not an RC id")
			}
			c.timeout, c.timeSet = value[0], true
		default:
			return kerr(call, unix.ENOSYS, fmt.Sprintf("ucma_set_option_id: option %d", name))
		}
		return nil
	})
}
