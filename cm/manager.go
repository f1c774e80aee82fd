package cm

import (
	"context"
	"errors"
	"sync"

	"github.com/mlx5go/mlx5go/internal/cmhook"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/mlx5"
)

func init() {
	cmhook.NewManager = func(s seam.CM) any { return newManager(s) }
}

// Manager is a connection manager: one event channel of the kernel's RDMA
// CM (an open /dev/infiniband/rdma_cm, librdmacm's rdma_event_channel),
// with the listeners and connections made on it. One goroutine reads its
// events in the Go runtime's netpoller and hands each to its listener or
// connection; the calls that wait (Dial, Listener.Accept,
// Request.Accept, Conn.NextEvent) wait for theirs with a context.
//
// A Manager may be used from any number of goroutines. Close ends every
// listener and connection on it.
type Manager struct {
	s      seam.CM
	cancel context.CancelFunc
	done   chan struct{} // closed when the reader ends

	mu      sync.Mutex
	ids     map[uint64]*cmID // by uid: the ids events can name
	owners  map[closer]bool  // what Close must end
	nextUID uint64
	closed  bool
	readErr error

	// smu orders every call on s before s.Close: a call holds it shared
	// (use), Close exclusively, and once sClosed no call is made, for the
	// closed file's descriptor number may by then be another file's.
	smu     sync.RWMutex
	sClosed bool
}

type closer interface {
	close(managerClosing bool) error
}

// Open opens a Manager on the kernel's RDMA connection manager
// (/dev/infiniband/rdma_cm; the rdma_ucm module). The software device
// model has its own: mlx5test.OpenCM.
func Open() (*Manager, error) {
	s, err := openKernel()
	if err != nil {
		return nil, opErr("open", "rdma_cm", err)
	}
	return newManager(s), nil
}

func newManager(s seam.CM) *Manager {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{s: s, cancel: cancel, done: make(chan struct{}), ids: map[uint64]*cmID{}, owners: map[closer]bool{}}
	go m.read(ctx)
	return m
}

// Close closes every listener and connection of the manager (each
// connection is disconnected, each pending request rejected), stops its
// reader and closes the event channel. Calls waiting on the manager
// return mlx5.ErrClosed, and so do calls under way (a Dial, a Listen, an
// Accept racing Close): Close waits for the commands they have in flight
// to the event channel, and none is issued after it. Closing twice is
// safe.
func (m *Manager) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	owners := make([]closer, 0, len(m.owners))
	for o := range m.owners {
		owners = append(owners, o)
	}
	m.mu.Unlock()
	for _, o := range owners {
		o.close(true)
	}
	m.cancel()
	<-m.done
	m.smu.Lock()
	m.sClosed = true
	err := m.s.Close()
	m.smu.Unlock()
	if err != nil {
		return opErr("close", "rdma_cm", err)
	}
	return nil
}

// use runs fn, a call on the event channel, unless Close closed the
// channel: then it is mlx5.ErrClosed, and nothing is issued.
func (m *Manager) use(fn func() error) error {
	m.smu.RLock()
	defer m.smu.RUnlock()
	if m.sClosed {
		return mlx5.ErrClosed
	}
	return fn()
}

// read takes the events of the channel until the manager closes.
func (m *Manager) read(ctx context.Context) {
	defer close(m.done)
	for {
		ev, err := m.s.NextEvent(ctx)
		if err != nil {
			if ctx.Err() == nil {
				m.mu.Lock()
				m.readErr = err
				m.mu.Unlock()
			}
			return
		}
		m.dispatch(ev)
	}
}

// dispatch hands an event to the id it names: a connect request to its
// listener, anything else to the id of its uid (an id destroyed meanwhile
// drops it, as librdmacm drops events of unknown ids).
func (m *Manager) dispatch(ev seam.CMEvent) {
	m.mu.Lock()
	id := m.ids[ev.UID]
	m.mu.Unlock()
	if ev.Type == evConnectRequest {
		if id == nil || !id.request(ev) {
			// Nobody takes it: destroying the new id rejects it.
			m.use(func() error { return m.s.DestroyID(ev.ID) })
		}
		return
	}
	if id != nil {
		id.deliver(ev)
	}
}

// track makes o end with the manager; it fails if the manager is closed.
func (m *Manager) track(o closer) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.owners[o] = true
	return true
}

func (m *Manager) untrack(o closer) {
	m.mu.Lock()
	delete(m.owners, o)
	m.mu.Unlock()
}

// isClosed reports whether Close began.
func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// gone is the error of a wait the manager's end interrupted.
func (m *Manager) gone() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.readErr != nil && !m.closed {
		return m.readErr
	}
	return mlx5.ErrClosed
}

// enum rdma_cm_event_type.
const (
	evAddrResolved    = 0
	evAddrError       = 1
	evRouteResolved   = 2
	evRouteError      = 3
	evConnectRequest  = 4
	evConnectResponse = 5
	evConnectError    = 6
	evUnreachable     = 7
	evRejected        = 8
	evEstablished     = 9
	evDisconnected    = 10
	evDeviceRemoval   = 11
	evAddrChange      = 14
	evTimewaitExit    = 15
)

// enum ib_qp_state, as init_qp_attr takes it.
const (
	stateInit = 1
	stateRTR  = 2
	stateRTS  = 3
)

// RDMA_OPTION_ID and its options.
const (
	optLevelID    = 0
	optTOS        = 0
	optReuseAddr  = 1
	optAFOnly     = 2
	optAckTimeout = 3
)

// cmID is one id of the manager: the kernel's handle, and the events
// delivered to it until its owner takes them.
type cmID struct {
	m   *Manager
	kid uint32
	uid uint64 // 0 until registered
	ps  PortSpace

	// mu serializes the calls on kid with its destruction: kernel ids
	// are reused, so nothing may name kid after DestroyID.
	mu        sync.Mutex
	destroyed bool

	qmu     sync.Mutex
	queue   []seam.CMEvent
	wake    chan struct{}
	handler func(seam.CMEvent) // set once established: events go there
	onReq   func(seam.CMEvent) bool
}

var errIDGone = errors.New("the connection's id was destroyed")

// newID creates an id in port space ps and registers it for its events.
func (m *Manager) newID(ps PortSpace) (*cmID, error) {
	id := &cmID{m: m, ps: ps, wake: make(chan struct{}, 1)}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, mlx5.ErrClosed
	}
	m.nextUID++
	id.uid = m.nextUID
	m.ids[id.uid] = id
	m.mu.Unlock()
	qpType := uint8(mlx5.QPTypeRC)
	if ps == UDP {
		qpType = uint8(mlx5.QPTypeUD)
	}
	var kid uint32
	err := m.use(func() (err error) { kid, err = m.s.CreateID(id.uid, uint16(ps), qpType); return })
	if err != nil {
		m.forget(id)
		return nil, err
	}
	id.kid = kid
	return id, nil
}

// adopt makes an id the kernel made for a connect request, which has no
// uid until it is accepted.
func (m *Manager) adopt(kid uint32, ps PortSpace) *cmID {
	return &cmID{m: m, kid: kid, ps: ps, wake: make(chan struct{}, 1)}
}

// register gives an adopted id its uid, so that its events find it.
func (m *Manager) register(id *cmID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.nextUID++
	id.uid = m.nextUID
	m.ids[id.uid] = id
	return true
}

func (m *Manager) forget(id *cmID) {
	m.mu.Lock()
	if id.uid != 0 && m.ids[id.uid] == id {
		delete(m.ids, id.uid)
	}
	m.mu.Unlock()
}

// call runs fn on the kernel id unless it was destroyed (errIDGone) or
// the manager's channel closed (mlx5.ErrClosed).
func (id *cmID) call(fn func(kid uint32) error) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.destroyed {
		return errIDGone
	}
	return id.m.use(func() error { return fn(id.kid) })
}

// destroy destroys the kernel id once and stops its events. Once the
// manager's channel is closed there is nothing to destroy: closing it
// destroyed its ids.
func (id *cmID) destroy() error {
	id.mu.Lock()
	if id.destroyed {
		id.mu.Unlock()
		return nil
	}
	id.destroyed = true
	err := id.m.use(func() error { return id.m.s.DestroyID(id.kid) })
	if errors.Is(err, mlx5.ErrClosed) {
		err = nil
	}
	id.mu.Unlock()
	id.m.forget(id)
	id.signal()
	return err
}

func (id *cmID) signal() {
	select {
	case id.wake <- struct{}{}:
	default:
	}
}

// deliver queues an event for the id's waiter, or hands it to the
// handler of an established connection.
func (id *cmID) deliver(ev seam.CMEvent) {
	id.qmu.Lock()
	defer id.qmu.Unlock()
	if id.handler != nil {
		id.handler(ev)
		return
	}
	id.queue = append(id.queue, ev)
	id.signal()
}

// request hands a connect request to a listening id.
func (id *cmID) request(ev seam.CMEvent) bool {
	id.qmu.Lock()
	h := id.onReq
	id.qmu.Unlock()
	return h != nil && h(ev)
}

// handOver makes h the id's handler, first giving it the events queued
// meanwhile, in order.
func (id *cmID) handOver(h func(seam.CMEvent)) {
	id.qmu.Lock()
	defer id.qmu.Unlock()
	for _, ev := range id.queue {
		h(ev)
	}
	id.queue = nil
	id.handler = h
}

// next waits for the id's next event, until ctx is done or the manager
// or the id ends.
func (id *cmID) next(ctx context.Context) (seam.CMEvent, error) {
	for {
		id.qmu.Lock()
		if len(id.queue) > 0 {
			ev := id.queue[0]
			id.queue = id.queue[1:]
			id.qmu.Unlock()
			return ev, nil
		}
		id.qmu.Unlock()
		id.mu.Lock()
		gone := id.destroyed
		id.mu.Unlock()
		if gone {
			return seam.CMEvent{}, mlx5.ErrClosed
		}
		select {
		case <-id.wake:
		case <-ctx.Done():
			return seam.CMEvent{}, ctx.Err()
		case <-id.m.done:
			return seam.CMEvent{}, id.m.gone()
		}
	}
}

// waitFor waits for one of the wanted events; ADDR_CHANGE is skipped and
// anything else is returned for the caller to turn into its error.
func (id *cmID) waitFor(ctx context.Context) (seam.CMEvent, error) {
	for {
		ev, err := id.next(ctx)
		if err != nil || ev.Type != evAddrChange {
			return ev, err
		}
	}
}

func (id *cmID) initQPAttr(state uint8) (seam.QPAttr, uint32, error) {
	var a seam.QPAttr
	var mask uint32
	err := id.call(func(kid uint32) error {
		var err error
		a, mask, err = id.m.s.InitQPAttr(kid, state)
		return err
	})
	return a, mask, err
}
