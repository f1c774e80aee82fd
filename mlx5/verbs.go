package mlx5

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/mlx5go/mlx5go/doorbell"
	"golang.org/x/sys/unix"
)

// What a context keeps for its verbs objects (CQs, QPs, SRQs made through
// the kernel with mlx5's driver data), as libmlx5 keeps it in struct
// mlx5_context: the non-cached UAR page of CQ doorbells, the BlueFlame
// registers QPs ring, the user indexes CQEs name QPs by, the user handles
// events name objects by, and the reader of the async event file.
type verbsState struct {
	mu      sync.Mutex
	ncUAR   *UAR
	bfFree  []bfReg
	bfPages []*UAR
	uidx    map[uint32]bool
	handles map[uint64]any // QP, CQ or SRQ by user handle
	next    uint64

	ev asyncEvents
}

// bfReg is one BlueFlame register: its UAR page and offset there.
type bfReg struct {
	uar *UAR
	off int // from the page's start: 0x800 + index * BFRegSize
}

// bfRegsPerUAR is MLX5_NUM_NON_FP_BFREGS_PER_UAR: the BlueFlame registers a
// QP may own in one UAR page.
const bfRegsPerUAR = 2

// ncPage returns the context's non-cached UAR page, which CQs ring their
// arm doorbell through (libmlx5's nc_uar), allocating it the first time.
func (c *Context) ncPage() (*UAR, error) {
	v := &c.vr
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ncUAR == nil {
		u, err := c.newUAR(UARNonCached)
		if err != nil {
			return nil, err
		}
		v.ncUAR = u
	}
	return v.ncUAR, nil
}

// getBFReg hands a QP a BlueFlame register of its own, as libmlx5's
// mlx5_get_qp_uar does with dynamic UARs (its dedicated registers): the
// free list is a queue, a QP takes the register at its head, else the
// registers of a new BlueFlame UAR page join its tail
// (mlx5_insert_dyn_uuars) and the first of them is taken.
func (c *Context) getBFReg() (bfReg, error) {
	v := &c.vr
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.bfFree) == 0 {
		u, err := c.newUAR(UARBlueFlame)
		if err != nil {
			return bfReg{}, err
		}
		v.bfPages = append(v.bfPages, u)
		size := c.caps.BFRegSize
		if size == 0 {
			size = uarBFRegStride
		}
		for i := range bfRegsPerUAR {
			v.bfFree = append(v.bfFree, bfReg{uar: u, off: doorbell.BlueFlameOffset + i*size})
		}
	}
	r := v.bfFree[0]
	v.bfFree = v.bfFree[1:]
	return r, nil
}

// putBFReg gives a QP's register back to the tail of the free list
// (mlx5_put_qp_uar).
func (c *Context) putBFReg(r bfReg) {
	v := &c.vr
	v.mu.Lock()
	defer v.mu.Unlock()
	v.bfFree = append(v.bfFree, r)
}

// newUIdx returns the lowest free user index (libmlx5's mlx5_store_uidx):
// with CQE version 1 the device writes it into the QP's CQEs.
func (c *Context) newUIdx() (uint32, error) {
	v := &c.vr
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.uidx == nil {
		v.uidx = map[uint32]bool{}
	}
	for i := uint32(0); i < 1<<24; i++ {
		if !v.uidx[i] {
			v.uidx[i] = true
			return i, nil
		}
	}
	return 0, fmt.Errorf("no free user index: %w", unix.ENOMEM)
}

func (c *Context) freeUIdx(i uint32) {
	v := &c.vr
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.uidx, i)
}

// newHandle registers obj for the events that name it and returns the user
// handle the kernel gets for it.
func (c *Context) newHandle(obj any) uint64 {
	v := &c.vr
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.handles == nil {
		v.handles = map[uint64]any{}
	}
	v.next++
	v.handles[v.next] = obj
	return v.next
}

// dropHandle forgets a destroyed object: the events that name it, which
// the reader may have taken from the kernel before the destroy dropped
// the unread ones (ib_uverbs_release_uevent), go too. The reader looks
// an event's object up and queues the event under the same lock, so none
// can name the object after this.
func (c *Context) dropHandle(h uint64) {
	e := &c.vr.ev
	e.mu.Lock()
	defer e.mu.Unlock()
	v := &c.vr
	v.mu.Lock()
	obj, ok := v.handles[h]
	delete(v.handles, h)
	v.mu.Unlock()
	if ok {
		e.queue = slices.DeleteFunc(e.queue, func(ev Event) bool { return ev.names(obj) })
	}
}

func (c *Context) objectOf(h uint64) any {
	v := &c.vr
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.handles[h]
}

// closeVerbs releases the shared UAR pages, after every object that used
// them, in libmlx5's order (clean_dyn_uars): it walks the free list of
// BlueFlame registers and frees a page where it meets the page's first
// register, then the non-cached page. A page whose first register a QP
// still holds (its destroy failed) goes after the others.
func (c *Context) closeVerbs() {
	v := &c.vr
	v.mu.Lock()
	pages, free, nc := v.bfPages, v.bfFree, v.ncUAR
	v.bfPages, v.bfFree, v.ncUAR = nil, nil, nil
	v.mu.Unlock()
	done := map[*UAR]bool{}
	for _, r := range free {
		if r.off == doorbell.BlueFlameOffset && !done[r.uar] {
			done[r.uar] = true
			r.uar.Close()
		}
	}
	for _, u := range pages {
		if !done[u] {
			u.Close()
		}
	}
	if nc != nil {
		nc.Close()
	}
}

// EventType is an asynchronous event's kind (enum ibv_event_type; the
// kernel's enum ib_event_type has the same values).
type EventType uint32

// Event types.
const (
	EventCQErr            EventType = 0  // IBV_EVENT_CQ_ERR: the CQ overran or failed
	EventQPFatal          EventType = 1  // IBV_EVENT_QP_FATAL
	EventQPReqErr         EventType = 2  // IBV_EVENT_QP_REQ_ERR: the peer sent an invalid request
	EventQPAccessErr      EventType = 3  // IBV_EVENT_QP_ACCESS_ERR: the peer broke an access right
	EventCommEst          EventType = 4  // IBV_EVENT_COMM_EST: the first message arrived at an RTR QP
	EventSQDrained        EventType = 5  // IBV_EVENT_SQ_DRAINED: a QP in SQD has drained its send queue
	EventPathMig          EventType = 6  // IBV_EVENT_PATH_MIG
	EventPathMigErr       EventType = 7  // IBV_EVENT_PATH_MIG_ERR
	EventDeviceFatal      EventType = 8  // IBV_EVENT_DEVICE_FATAL
	EventPortActive       EventType = 9  // IBV_EVENT_PORT_ACTIVE
	EventPortErr          EventType = 10 // IBV_EVENT_PORT_ERR
	EventLIDChange        EventType = 11 // IBV_EVENT_LID_CHANGE
	EventPKeyChange       EventType = 12 // IBV_EVENT_PKEY_CHANGE
	EventSMChange         EventType = 13 // IBV_EVENT_SM_CHANGE
	EventSRQErr           EventType = 14 // IBV_EVENT_SRQ_ERR
	EventSRQLimitReached  EventType = 15 // IBV_EVENT_SRQ_LIMIT_REACHED
	EventQPLastWQEReached EventType = 16 // IBV_EVENT_QP_LAST_WQE_REACHED
	EventClientReregister EventType = 17 // IBV_EVENT_CLIENT_REREGISTER
	EventGIDChange        EventType = 18 // IBV_EVENT_GID_CHANGE
	EventWQFatal          EventType = 19 // IBV_EVENT_WQ_FATAL
	numEventTypes                   = 20
)

var eventTypeNames = [numEventTypes]string{"CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST",
	"SQ_DRAINED", "PATH_MIG", "PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR", "LID_CHANGE",
	"PKEY_CHANGE", "SM_CHANGE", "SRQ_ERR", "SRQ_LIMIT_REACHED", "QP_LAST_WQE_REACHED", "CLIENT_REREGISTER",
	"GID_CHANGE", "WQ_FATAL"}

func (t EventType) String() string {
	if t < numEventTypes {
		return eventTypeNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint32(t))
}

// Event is an asynchronous event of the device: about a QP, a CQ, an SRQ
// or a port (whichever is set).
type Event struct {
	Type EventType
	QP   *QP
	CQ   *CQ
	SRQ  *SRQ
	Port int
}

// names reports whether the event is about obj.
func (e *Event) names(obj any) bool {
	switch o := obj.(type) {
	case *QP:
		return e.QP == o
	case *CQ:
		return e.CQ == o
	case *SRQ:
		return e.SRQ == o
	}
	return false
}

func (e Event) String() string {
	switch {
	case e.QP != nil:
		return fmt.Sprintf("%v on %s", e.Type, e.QP.name)
	case e.CQ != nil:
		return fmt.Sprintf("%v on %s", e.Type, e.CQ.name)
	case e.SRQ != nil:
		return fmt.Sprintf("%v on SRQ %#x", e.Type, e.SRQ.srqn)
	}
	return fmt.Sprintf("%v on port %d", e.Type, e.Port)
}

// asyncEvents reads the context's async event file in one goroutine (in
// the netpoller) from the context's first verbs object on: a CQ's error
// marks the CQ for Poll, and every event waits in a queue for NextEvent.
type asyncEvents struct {
	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
	queue   []Event
	dropped int
	wake    chan struct{} // closed and replaced when an event arrives
	err     error         // why the reader stopped
}

// maxQueuedEvents bounds the events nobody reads: past it the oldest go.
const maxQueuedEvents = 4096

// startEvents starts the reader once, unless the context is closing:
// Close sets closing before it stops the reader, so a reader starts only
// if stopEvents will stop it.
func (c *Context) startEvents() {
	e := &c.vr.ev
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return
	}
	e.started = true
	if c.closingNow() {
		e.err = ErrClosed
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done, e.wake = cancel, make(chan struct{}), make(chan struct{})
	go c.readEvents(ctx)
}

func (c *Context) readEvents(ctx context.Context) {
	e := &c.vr.ev
	defer close(e.done)
	for {
		ev, err := c.dev.NextAsyncEvent(ctx)
		if err != nil {
			e.mu.Lock()
			e.err = err
			close(e.wake)
			e.wake = make(chan struct{})
			e.mu.Unlock()
			return
		}
		out := Event{Type: EventType(ev.Type)}
		// The lookup and the queueing under e.mu: dropHandle cannot come
		// in between.
		e.mu.Lock()
		switch o := c.objectOf(ev.Element).(type) {
		case *QP:
			out.QP = o
		case *CQ:
			out.CQ = o
			if out.Type == EventCQErr {
				o.failedEvent()
			}
		case *SRQ:
			out.SRQ = o
		default:
			if out.Type >= EventDeviceFatal && out.Type != EventSRQErr && out.Type != EventSRQLimitReached && out.Type != EventQPLastWQEReached && out.Type != EventWQFatal {
				out.Port = int(ev.Element)
			} else {
				e.mu.Unlock()
				continue // an object already closed
			}
		}
		if len(e.queue) == maxQueuedEvents {
			e.queue = e.queue[1:]
			e.dropped++
		}
		e.queue = append(e.queue, out)
		close(e.wake)
		e.wake = make(chan struct{})
		e.mu.Unlock()
	}
}

// NextEvent returns the context's next asynchronous event (ibv_get_async_event):
// SQ_DRAINED, QP errors, COMM_EST, LAST_WQE_REACHED, a CQ's error (which Poll
// reports too), SRQ limits, port changes. It waits until one arrives or ctx
// is done (the error then wraps ctx's). Events of objects already closed
// are left out; past 4096 unread events the oldest are dropped.
func (c *Context) NextEvent(ctx context.Context) (Event, error) {
	const op = "next event"
	if err := c.checkOpen(op); err != nil {
		return Event{}, err
	}
	if ctx == nil {
		return Event{}, invalid(op, c.name, "nil context.Context")
	}
	c.startEvents()
	e := &c.vr.ev
	for {
		e.mu.Lock()
		if len(e.queue) > 0 {
			ev := e.queue[0]
			e.queue = e.queue[1:]
			e.mu.Unlock()
			return ev, nil
		}
		wake, stopped := e.wake, e.err
		e.mu.Unlock()
		if stopped != nil {
			if errors.Is(stopped, context.Canceled) {
				stopped = ErrClosed
			}
			return Event{}, opErr(op, c.name, stopped)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return Event{}, opErr(op, c.name, ctx.Err())
		}
	}
}

// stopEvents ends the reader.
func (c *Context) stopEvents() {
	e := &c.vr.ev
	e.mu.Lock()
	started, cancel, done := e.started, e.cancel, e.done
	e.mu.Unlock()
	if started {
		cancel()
		<-done
	}
}
