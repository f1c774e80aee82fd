package cm

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/mlx5"
)

// EventType is an event of a connection's life (enum
// rdma_cm_event_type).
type EventType int

// Events of an established connection, in the order they can come.
// Dial's and Request.Accept's outcomes are the events that end the
// connecting (ESTABLISHED, or REJECTED, UNREACHABLE, CONNECT_ERROR,
// ADDR_ERROR, ROUTE_ERROR as errors); the connection's NextEvent starts
// with EventEstablished.
const (
	EventEstablished   EventType = evEstablished
	EventDisconnected  EventType = evDisconnected  // the peer or this side disconnected
	EventDeviceRemoval EventType = evDeviceRemoval // the RDMA device went away
	EventAddrChange    EventType = evAddrChange    // the address's netdev changed (bonding failover)
	EventTimewaitExit  EventType = evTimewaitExit  // the QP may be reused
)

func (t EventType) String() string {
	switch t {
	case EventEstablished:
		return "ESTABLISHED"
	case EventDisconnected:
		return "DISCONNECTED"
	case EventDeviceRemoval:
		return "DEVICE_REMOVAL"
	case EventAddrChange:
		return "ADDR_CHANGE"
	case EventTimewaitExit:
		return "TIMEWAIT_EXIT"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one event of a connection. Err is set for a disconnect the
// peer never answered (its DREQ timed out: ETIMEDOUT).
type Event struct {
	Type EventType
	Err  error
}

func (e Event) String() string {
	if e.Err != nil {
		return e.Type.String() + ": " + e.Err.Error()
	}
	return e.Type.String()
}

// UDPeer is how to reach the other side of a UD connection: its QP
// number and Q_Key, and the address path to make an address handle for
// (pd.CreateAH(peer.Path)).
type UDPeer struct {
	QPN  uint32
	QKey uint32
	Path mlx5.AddressPath
}

type connState int

const (
	connEstablished connState = iota
	connDisconnecting
	connDisconnected
	connClosed
)

// Conn is an established connection: a QP connected to the peer's (RC),
// or a UD QP with the peer's QP number and Q_Key (UD). The connection
// manager moved the QP to RTS; the application posts on it and polls its
// CQs as usual. An RC connection moves its QP to ERR when it ends. A UD
// QP may serve many connections (many peers): closing one leaves the QP
// as it is, as librdmacm's rdma_destroy_id does; only its device's
// removal moves it to ERR.
type Conn struct {
	m           *Manager
	id          *cmID
	qp          QP
	local       Addr
	remote      Addr
	privateData []byte
	peer        UDPeer
	nodeGUID    uint64
	port        uint8
	name        string

	mu     sync.Mutex
	state  connState
	err    error
	done   chan struct{}
	events []Event
	wake   chan struct{}
}

func newConn(m *Manager, id *cmID, qp QP, local, remote Addr, pd []byte, guid uint64, port uint8) *Conn {
	c := &Conn{m: m, id: id, qp: qp, local: local, remote: remote, privateData: pd, nodeGUID: guid, port: port,
		name: fmt.Sprintf("%v to %v", local, remote), done: make(chan struct{}), wake: make(chan struct{}, 1),
		events: []Event{{Type: EventEstablished}}}
	return c
}

// start makes the connection the id's event handler and the manager's to
// close; a manager closing meanwhile closes it.
func (c *Conn) start() error {
	if !c.m.track(c) {
		c.close(true)
		return mlx5.ErrClosed
	}
	c.id.handOver(c.onEvent)
	return nil
}

// LocalAddr is this side's address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// QP is the queue pair the connection carries.
func (c *Conn) QP() QP { return c.qp }

// PrivateData is what the peer sent when the connection was made: the
// accept's data for the side that dialed, the request's for the side that
// accepted. The IB CM carries private data at a fixed size (a reply 196
// bytes, a request 56, a UD reply 136, a UD request 180): the peer's bytes
// followed by zeros. A protocol that needs the length carries it.
func (c *Conn) PrivateData() []byte { return c.privateData }

// UDPeer is the peer of a UD connection, as its listener answered the
// side that dialed. The side that accepted learns nothing of the peer's
// QP from the CM (a SIDR request carries none): it answers the datagrams
// it receives.
func (c *Conn) UDPeer() UDPeer { return c.peer }

// NodeGUID is the node GUID of the RDMA device the connection goes
// through, and Port its port.
func (c *Conn) NodeGUID() uint64 { return c.nodeGUID }

// Port is the device port the connection goes through.
func (c *Conn) Port() uint8 { return c.port }

func (c *Conn) String() string { return c.name }

// Done is closed when the connection ends: disconnected (by either
// side), its device removed, or closed. Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is nil while the connection is up, then why it ended:
// ErrDisconnected, ErrDeviceRemoved or mlx5.ErrClosed.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// NextEvent returns the connection's next event, waiting until one comes
// or ctx is done: EventEstablished first, then EventDisconnected,
// EventTimewaitExit and the others as they happen. After Close it
// returns mlx5.ErrClosed.
func (c *Conn) NextEvent(ctx context.Context) (Event, error) {
	const op = "next event"
	for {
		c.mu.Lock()
		if c.state == connClosed {
			c.mu.Unlock()
			return Event{}, closedErr(op, c.name)
		}
		if len(c.events) > 0 {
			ev := c.events[0]
			c.events = c.events[1:]
			c.mu.Unlock()
			return ev, nil
		}
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-ctx.Done():
			return Event{}, opErr(op, c.name, ctx.Err())
		case <-c.m.done:
			return Event{}, opErr(op, c.name, c.m.gone())
		}
	}
}

// onEvent handles an event of the established connection, in the
// manager's reader.
func (c *Conn) onEvent(ev seam.CMEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == connClosed {
		return
	}
	e := Event{Type: EventType(ev.Type)}
	switch ev.Type {
	case evDisconnected:
		if ev.Status < 0 {
			e.Err = statusErr(ErrDisconnected, "the peer did not answer the disconnect", ev.Status)
		}
		if c.state == connEstablished {
			// The peer disconnected: flush the QP and answer its DREQ,
			// as an application answers DISCONNECTED with
			// rdma_disconnect.
			toError(c.qp)
			c.id.call(func(kid uint32) error { return c.m.s.Disconnect(kid) })
		}
		c.end(ErrDisconnected)
	case evDeviceRemoval:
		toError(c.qp)
		c.end(ErrDeviceRemoved)
	case evTimewaitExit, evAddrChange:
	default:
		// ESTABLISHED again (a COMM_EST notify), or an event of a state
		// the connection left: nothing to do.
		return
	}
	c.events = append(c.events, e)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// end records why the connection ended and closes Done, once.
func (c *Conn) end(err error) {
	if c.state == connDisconnected || c.state == connClosed {
		return
	}
	c.state = connDisconnected
	c.err = err
	close(c.done)
}

// Disconnect disconnects the connection: the QP goes to ERR (its
// outstanding work requests complete with flush errors) and the CM sends
// the peer a disconnect request; Done closes when the peer answers
// (EventDisconnected). A UD connection has no disconnect: Close it.
// Disconnecting a connection that is disconnecting or disconnected does
// nothing.
func (c *Conn) Disconnect() error {
	const op = "disconnect"
	if c == nil || c.id == nil {
		return invalid(op, "Conn", "a nil or zero Conn, not made by Dial or Request.Accept")
	}
	if c.local.Space == UDP {
		return invalid(op, c.name, "a UD connection has no disconnect: Close it")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case connClosed:
		return closedErr(op, c.name)
	case connDisconnecting, connDisconnected:
		return nil
	}
	toError(c.qp)
	if err := c.id.call(func(kid uint32) error { return c.m.s.Disconnect(kid) }); err != nil {
		return opErr(op, c.name, err)
	}
	c.state = connDisconnecting
	return nil
}

// Close ends the connection: an established RC one is disconnected (its
// QP moved to ERR), and the CM's id is destroyed, so no more events come.
// A UD connection's QP is left as it is, serving the others. The QP is
// the caller's to close. Closing twice is safe.
func (c *Conn) Close() error {
	if c == nil || c.id == nil {
		return nil
	}
	return c.close(false)
}

func (c *Conn) close(managerClosing bool) error {
	c.mu.Lock()
	if c.state == connClosed {
		c.mu.Unlock()
		return nil
	}
	if (c.state == connEstablished || c.state == connDisconnecting) && c.local.Space != UDP {
		toError(c.qp)
	}
	if c.state != connDisconnected {
		c.err = mlx5.ErrClosed
		close(c.done)
	}
	c.state = connClosed
	c.mu.Unlock()
	err := c.id.destroy()
	if !managerClosing {
		c.m.untrack(c)
	}
	if err != nil && !c.m.isClosed() {
		return opErr("close", c.name, err)
	}
	return nil
}
