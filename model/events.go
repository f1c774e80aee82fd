package model

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// DEVX events: the firmware writes an EQE on the kernel's event queue, and
// mlx5_ib's devx_event_notifier hands it to every subscription of its
// event type and object (drivers/infiniband/hw/mlx5/devx.c). A reader gets
// the subscription's cookie and the 64-byte EQE (struct
// mlx5_ib_uapi_devx_async_event_hdr, then struct mlx5_eqe).

// Event types (enum mlx5_event, include/linux/mlx5/device.h).
const (
	evComp            = 0x00
	evPathMig         = 0x01
	evCommEst         = 0x02
	evSQDrained       = 0x03
	evCQError         = 0x04
	evWQCatasError    = 0x05
	evPathMigFailed   = 0x07
	evWQInvalReqError = 0x10
	evWQAccessError   = 0x11
	evSRQCatasError   = 0x12
	evSRQLastWQE      = 0x13
	evSRQRQLimit      = 0x14
	evXRQError        = 0x18
	evDCTDrained      = 0x1c
	evDCTKeyViolation = 0x1d
)

// Queue types of a QP/SRQ event's EQE (MLX5_EVENT_QUEUE_TYPE_*,
// device.h).
const (
	queueTypeQP  = 0x0
	queueTypeRQ  = 0x1
	queueTypeSQ  = 0x2
	queueTypeDCT = 0x6
	// queueTypeSRQ is the type the model writes in an SRQ event's EQE:
	// device.h names none for SRQs, srq_event_notifier reads only the
	// number, and 0 is what devx.c files a subscription on an SRQ or RMP
	// under (get_legacy_obj_type).
	queueTypeSRQ = 0x0
)

// cqErrorCQOverrun is MLX5_CQ_ERROR_SYNDROME_CQ_OVERRUN (mlx5_ifc.h), the
// syndrome of a CQ_ERROR event for an overrun.
const cqErrorCQOverrun = 0x1

// maxSubscribeEvents is MAX_NUM_EVENTS in devx.c: event types a
// subscribe call may list.
const maxSubscribeEvents = 16

// The EQE's layout (struct mlx5_eqe and the members of union ev_data the
// model writes, include/linux/mlx5/device.h), as byte offsets.
const (
	eqeType       = 0x01 // mlx5_eqe.type
	eqeSubType    = 0x03 // mlx5_eqe.sub_type
	eqeData       = 0x20 // mlx5_eqe.data
	eqeSignature  = 0x3e // mlx5_eqe.signature
	eqeOwner      = 0x3f // mlx5_eqe.owner
	cqErrCQN      = 0x00 // mlx5_eqe_cq_err.cqn (24 bits)
	cqErrSyndrome = 0x0b // mlx5_eqe_cq_err.syndrome
	qpSrqType     = 0x14 // mlx5_eqe_qp_srq.type: MLX5_EVENT_QUEUE_TYPE_*
	qpSrqN        = 0x18 // mlx5_eqe_qp_srq.qp_srq_n (24 bits)
	compCQN       = 0x18 // mlx5_eqe_comp.cqn (24 bits)
)

// legacyObjEvents are the events devx.c lets a context subscribe to on an
// object when the device has no event_cap (is_legacy_obj_event_num); every
// profile's event_cap is 0, so is_valid_events_legacy is the rule. It does
// not look at the object's type: any of them on any DEVX object is valid.
var legacyObjEvents = map[uint16]bool{
	evPathMig: true, evCommEst: true, evSQDrained: true, evSRQLastWQE: true, evSRQRQLimit: true,
	evCQError: true, evWQCatasError: true, evPathMigFailed: true, evWQInvalReqError: true,
	evWQAccessError: true, evSRQCatasError: true, evDCTDrained: true, evComp: true,
	evDCTKeyViolation: true, evXRQError: true,
}

// legacyObjType is get_legacy_obj_type: the queue type a legacy event of
// the object carries, by the opcode that created it; 0 for every other
// object (a CQ's, a PD's...).
func legacyObjType(objID uint64) uint8 {
	switch uint16(objID >> 32) {
	case prm.MLX5_CMD_OP_CREATE_RQ:
		return queueTypeRQ
	case prm.MLX5_CMD_OP_CREATE_SQ:
		return queueTypeSQ
	case prm.MLX5_CMD_OP_CREATE_DCT:
		return queueTypeDCT
	}
	return queueTypeQP // MLX5_CMD_OP_CREATE_QP, and 0 for the rest
}

// subKey is where devx.c files a subscription: its first-level key, the
// event type | the object type << 16, and the object's number.
type subKey struct {
	level1 uint32
	objID  uint32
}

// subscription is one event type of one object on one channel (struct
// devx_event_subscription).
type subscription struct {
	key    subKey
	cookie uint64
	ch     *eventChannel
	obj    *uobj
	efd    int // with SubscribeFD: the model's own duplicate of the eventfd; else -1
}

// eventChannel is the model's DEVX event channel (struct
// devx_async_event_file): events queue in memory, each the 8-byte cookie
// and the 64-byte EQE, or with omitData the cookie alone, at most one
// unread per subscription (deliver_event).
type eventChannel struct {
	d        *Device
	subs     []*subscription // guarded by the HCA's lock
	omitData bool

	mu        sync.Mutex
	queue     [][]byte
	pending   map[*subscription]bool // with omitData: the subscriptions queued
	qsubs     []*subscription        // with omitData: whose each queued event is
	closed    bool                   // Close was called
	destroyed bool                   // the context was closed
	wake      chan struct{}
}

// NewEventChannel is MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC, with
// MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA if omitData. Its handler
// reads no uid: a context without DEVX gets one too, on which it cannot
// subscribe.
func (d *Device) NewEventChannel(omitData bool) (seam.EventChannel, error) {
	const call = "devx async event fd alloc"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return nil, err
	}
	c := &eventChannel{d: d, omitData: omitData, wake: make(chan struct{}, 1)}
	if omitData {
		c.pending = map[*subscription]bool{}
	}
	d.chans[c] = true
	return c, nil
}

// Subscribe is MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT on a DEVX object, with
// a cookie: the uverbs layer looks up the channel (EBADF) and the object
// (ENOENT, or EINVAL for another kind of handle) and checks that the list
// is not empty; the method needs the context's DEVX uid, allows 16 events
// a call and, without event_cap, only the legacy object events. Subscribing twice to one
// event delivers it twice, as in devx.c.
func (d *Device) Subscribe(ch seam.EventChannel, h seam.Handle, types []uint16, cookie uint64) error {
	const call = "devx subscribe event"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	c, o, err := d.subscribeTarget(call, ch, h)
	if err != nil {
		return err
	}
	if len(types) == 0 {
		return kerr(call, unix.EINVAL, "UVERBS_ATTR_MIN_SIZE: the event list holds at least one u16")
	}
	if err := d.checkEvents(call, types); err != nil {
		return err
	}
	for _, t := range types {
		d.h.file(&subscription{key: objSubKey(t, o), cookie: cookie, ch: c, obj: o, efd: -1})
	}
	return nil
}

// subscribeTarget is the uverbs layer's part of a subscribe call, under
// the HCA's lock: the context open, the channel one of its open channels
// (EBADF), the handle a DEVX object (ENOENT, EINVAL).
func (d *Device) subscribeTarget(call string, ch seam.EventChannel, h seam.Handle) (*eventChannel, *uobj, error) {
	if err := d.enter(call); err != nil {
		return nil, nil, err
	}
	c, ok := ch.(*eventChannel)
	if !ok || c == nil || c.d != d || !d.chans[c] {
		return nil, nil, kerr(call, unix.EBADF, "lookup_get_fd_uobject: not a DEVX event channel of this context")
	}
	o, err := d.lookupKind(call, h, kindDevxObj)
	if err != nil {
		return nil, nil, err
	}
	return c, o, nil
}

// checkEvents is the handler's check of the event list: the context's
// DEVX uid, then, without event_cap, at most 16 types, each a legacy
// object event.
func (d *Device) checkEvents(call string, types []uint16) error {
	switch {
	case d.uid == 0:
		// The handler's first check, after the attributes. Unreachable
		// through the seam, which subscribes on DEVX objects only: a
		// context without DEVX has none, and the lookup fails first.
		return kerr(call, unix.EINVAL, "MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT: the context has no DEVX uid (c->devx_uid is 0)")
	case len(types) > maxSubscribeEvents:
		return kerr(call, unix.EINVAL, fmt.Sprintf("MAX_NUM_EVENTS: %d events, at most %d a call", len(types), maxSubscribeEvents))
	}
	for _, t := range types {
		if !legacyObjEvents[t] {
			return kerr(call, unix.EINVAL, fmt.Sprintf("is_valid_events_legacy: event %#x is not an object event", t))
		}
	}
	return nil
}

// objSubKey is where a subscription to event typ of object o is filed.
func objSubKey(typ uint16, o *uobj) subKey {
	return subKey{uint32(typ) | uint32(legacyObjType(o.objID))<<16, uint32(o.objID)}
}

// file records subscription s with the HCA, its channel and its object.
func (h *hca) file(s *subscription) {
	h.subs[s.key] = append(h.subs[s.key], s)
	s.ch.subs = append(s.ch.subs, s)
	s.obj.subs = append(s.obj.subs, s)
}

// SubscribeFD is MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT with FD_NUM: the
// checks of Subscribe, with the one event type, then
// eventfd_ctx_fdget's: EBADF for a descriptor that is not open, EINVAL
// for one that is not an eventfd. The subscription keeps its own
// reference (a duplicate descriptor, as the kernel keeps the eventfd_ctx)
// and signals it with 1 for each event instead of queueing on ch.
func (d *Device) SubscribeFD(ch seam.EventChannel, h seam.Handle, typ uint16, fd int) error {
	const call = "devx subscribe event fd"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	c, o, err := d.subscribeTarget(call, ch, h)
	if err != nil {
		return err
	}
	if err := d.checkEvents(call, []uint16{typ}); err != nil {
		return err
	}
	if fd < 0 {
		return kerr(call, unix.EBADF, fmt.Sprintf("eventfd_ctx_fdget: fd %d", fd))
	}
	link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	switch {
	case err != nil:
		return kerr(call, unix.EBADF, fmt.Sprintf("eventfd_ctx_fdget: fd %d is not open", fd))
	case link != "anon_inode:[eventfd]":
		return kerr(call, unix.EINVAL, fmt.Sprintf("eventfd_ctx_fdget: fd %d is %s, not an eventfd", fd, link))
	}
	efd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return kerr(call, err.(unix.Errno), "eventfd_ctx_fdget")
	}
	d.h.file(&subscription{key: objSubKey(typ, o), ch: c, obj: o, efd: efd})
	return nil
}

// Next waits for an event, as read(2) on the channel
// (devx_async_event_read): EINVAL if buf cannot hold it (it stays
// queued), EIO once the context is closed, EBADF after Close, and ctx's
// error if ctx is done first.
func (c *eventChannel) Next(ctx context.Context, buf []byte) (int, error) {
	const call = "devx async event read"
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return 0, kerr(call, unix.EBADF, "the channel is closed")
		case len(c.queue) > 0:
			ev := c.queue[0]
			if len(buf) < len(ev) {
				c.mu.Unlock()
				return 0, kerr(call, unix.EINVAL, fmt.Sprintf("devx_async_event_read: an event of %d bytes, a buffer of %d", len(ev), len(buf)))
			}
			c.queue = c.queue[1:]
			if c.omitData {
				delete(c.pending, c.qsubs[0])
				c.qsubs = c.qsubs[1:]
			}
			c.mu.Unlock()
			return copy(buf, ev), nil
		case c.destroyed:
			c.mu.Unlock()
			return 0, kerr(call, unix.EIO, "devx_async_event_read: the context is closed")
		}
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Fd returns -1: the model's channel is no kernel descriptor.
func (c *eventChannel) Fd() int { return -1 }

// Close releases the channel: its subscriptions end and what it holds is
// dropped (devx_async_event_destroy_uobj). Closing twice returns nil.
func (c *eventChannel) Close() error {
	h := c.d.h
	h.mu.Lock()
	if c.d.chans[c] {
		delete(c.d.chans, c)
		h.unsubscribeChannel(c)
	}
	h.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.queue, c.qsubs = nil, nil
		close(c.wake)
	}
	return nil
}

// destroy is devx_async_event_destroy_uobj when the context closes:
// readers wake with EIO. Called under the HCA's lock.
func (c *eventChannel) destroy() {
	c.d.h.unsubscribeChannel(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.destroyed = true
	c.queue, c.qsubs = nil, nil
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// deliver queues one event of subscription s (deliver_event): with
// omitData only its cookie, and nothing while one is unread.
func (c *eventChannel) deliver(s *subscription, eqe *[seam.EQESize]byte) {
	if s.efd >= 0 {
		// eventfd_signal; an eventfd at its limit refuses the add, and
		// the event is lost as it is in the kernel.
		unix.Write(s.efd, binary.NativeEndian.AppendUint64(nil, 1))
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.destroyed {
		return
	}
	if c.omitData {
		if c.pending[s] {
			return
		}
		c.pending[s] = true
		c.qsubs = append(c.qsubs, s)
		c.queue = append(c.queue, binary.NativeEndian.AppendUint64(nil, s.cookie))
	} else {
		ev := make([]byte, seam.EventHeaderSize+seam.EQESize)
		binary.NativeEndian.PutUint64(ev, s.cookie)
		copy(ev[seam.EventHeaderSize:], eqe[:])
		c.queue = append(c.queue, ev)
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// unsubscribeChannel ends every subscription of channel c.
func (h *hca) unsubscribeChannel(c *eventChannel) {
	for _, s := range c.subs {
		h.dropSub(s)
		s.obj.subs = slices.DeleteFunc(s.obj.subs, func(x *subscription) bool { return x == s })
	}
	c.subs = nil
}

// unsubscribeObject ends every subscription on object o, once it is
// destroyed (devx_obj_cleanup).
func (h *hca) unsubscribeObject(o *uobj) {
	for _, s := range o.subs {
		h.dropSub(s)
		s.ch.subs = slices.DeleteFunc(s.ch.subs, func(x *subscription) bool { return x == s })
	}
	o.subs = nil
}

func (h *hca) dropSub(s *subscription) {
	if s.efd >= 0 {
		unix.Close(s.efd)
		s.efd = -1
	}
	l := slices.DeleteFunc(h.subs[s.key], func(x *subscription) bool { return x == s })
	if len(l) == 0 {
		delete(h.subs, s.key)
		return
	}
	h.subs[s.key] = l
}

// dispatch hands an EQE to its subscribers as devx_event_notifier does:
// the object type is get_event_obj_type's (0 for CQ_ERROR, the EQE's
// qp_srq.type for the QP and SRQ events), the number
// devx_get_obj_id_from_event's. Only the events the model raises are
// decoded. Completion events are not devx_event_notifier's: see compEvent.
func (h *hca) dispatch(eqe *[seam.EQESize]byte) {
	typ := eqe[eqeType]
	var objType uint8
	var id uint32
	switch typ {
	case evCQError:
		id = binary.BigEndian.Uint32(eqe[eqeData+cqErrCQN:]) & 0xffffff
	case evSQDrained, evCommEst, evSRQLastWQE, evWQCatasError, evWQInvalReqError, evWQAccessError, evSRQRQLimit:
		objType = eqe[eqeData+qpSrqType]
		id = binary.BigEndian.Uint32(eqe[eqeData+qpSrqN:]) & 0xffffff
	default:
		return
	}
	h.deliverSubs(subKey{uint32(typ) | uint32(objType)<<16, id}, eqe)
}

func (h *hca) deliverSubs(k subKey, eqe *[seam.EQESize]byte) {
	for _, s := range h.subs[k] {
		s.ch.deliver(s, eqe)
	}
}

// raise is the firmware writing an EQE: mlx5_core's notifier chain hands
// it to DEVX (dispatch) and to mlx5_ib's handler of the kernel object it
// names, which raises the verbs event on the object's async event file
// (rsc_event_notifier and mlx5_ib_qp_event for QPs, srq_event_notifier
// and mlx5_ib_srq_event for SRQs, mlx5_ib_cq_event for CQs).
func (h *hca) raise(eqe *[seam.EQESize]byte) {
	h.dispatch(eqe)
	typ := eqe[eqeType]
	switch typ {
	case evCQError:
		cq, ok := h.cqs[binary.BigEndian.Uint32(eqe[eqeData+cqErrCQN:])&0xffffff]
		if ok && cq.ib != nil {
			cq.ib.d.asyncEvent(ibEventCQErr, cq.ib.user, cq.ib)
		}
		return
	case evSRQRQLimit:
		srq, ok := h.srqs[binary.BigEndian.Uint32(eqe[eqeData+qpSrqN:])&0xffffff]
		if ok && srq.ib != nil {
			srq.ib.d.asyncEvent(ibEventSRQLimitReached, srq.ib.user, srq.ib)
		}
		return
	}
	ev, ok := qpEvents[typ]
	if !ok || eqe[eqeData+qpSrqType] != queueTypeQP {
		return
	}
	q, ok := h.qps[binary.BigEndian.Uint32(eqe[eqeData+qpSrqN:])&0xffffff]
	if ok && q.ib != nil {
		q.ib.d.asyncEvent(ev, q.ib.user, q.ib)
	}
}

// qpEvents is mlx5_ib_qp_event's mapping of firmware events to verbs
// events (the QP events qp_allowed_event_types lets through).
var qpEvents = map[uint8]uint32{
	evPathMig:         ibEventPathMig,
	evCommEst:         ibEventCommEst,
	evSQDrained:       ibEventSQDrained,
	evSRQLastWQE:      ibEventQPLastWQEReached,
	evWQCatasError:    ibEventQPFatal,
	evPathMigFailed:   ibEventPathMigErr,
	evWQInvalReqError: ibEventQPReqErr,
	evWQAccessError:   ibEventQPAccessErr,
}

// cqError raises MLX5_EVENT_TYPE_CQ_ERROR for CQ cqn (struct
// mlx5_eqe_cq_err: the CQ number and the syndrome).
func (h *hca) cqError(cqn uint32, syndrome uint8) {
	var e [seam.EQESize]byte
	e[eqeType] = evCQError
	binary.BigEndian.PutUint32(e[eqeData+cqErrCQN:], cqn&0xffffff)
	e[eqeData+cqErrSyndrome] = syndrome
	h.raise(&e)
}

// qpEvent raises a QP event of type typ (struct mlx5_eqe_qp_srq: the
// queue type QP and the QP number).
func (h *hca) qpEvent(typ uint8, q *qpObj) {
	h.raise(qpSrqEQE(typ, queueTypeQP, q.qpn))
}

// sqDrained raises MLX5_EVENT_TYPE_SQ_DRAINED for QP q.
func (h *hca) sqDrained(q *qpObj) { h.qpEvent(evSQDrained, q) }

// qpSrqEQE is an EQE of a QP or SRQ event (struct mlx5_eqe_qp_srq).
func qpSrqEQE(typ, queueType uint8, n uint32) *[seam.EQESize]byte {
	var e [seam.EQESize]byte
	e[eqeType] = typ
	e[eqeData+qpSrqType] = queueType
	binary.BigEndian.PutUint32(e[eqeData+qpSrqN:], n&0xffffff)
	return &e
}

// compEvent is a completion event of CQ cq, cqn: mlx5_ib_cq_comp hands a
// verbs CQ's to ib_uverbs_comp_handler, which queues the CQ's user handle
// on its completion channel (none: dropped); devx_cq_comp hands a DEVX
// CQ's completion EQE (MLX5_EVENT_TYPE_COMP, struct mlx5_eqe_comp: the
// CQN) to the subscribers of COMP on it.
func (h *hca) compEvent(cq *cqObj, cqn uint32) {
	if cq.ib != nil {
		if ch := cq.ib.ch; ch != nil {
			ch.q.push(cq.ib.user, cq.ib)
		}
		return
	}
	var e [seam.EQESize]byte
	e[eqeType] = evComp
	binary.BigEndian.PutUint32(e[eqeData+compCQN:], cqn&0xffffff)
	h.deliverSubs(subKey{evComp, cqn}, &e)
}
