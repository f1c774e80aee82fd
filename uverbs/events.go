package uverbs

import (
	"context"
	"errors"
	"fmt"

	"github.com/mlx5go/mlx5go/internal/pollfd"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

// EventFile is one of the kernel's uverbs event files: the async event file
// or a completion channel. Reads wait in the Go runtime's netpoller, not in
// a blocked thread, and honour a context.
type EventFile struct {
	p *pollfd.File
}

func newEventFile(fd int, name string) (*EventFile, error) {
	p, err := pollfd.New(fd, name)
	if err != nil {
		return nil, fmt.Errorf("uverbs: %w", err)
	}
	return &EventFile{p: p}, nil
}

// Fd returns the file descriptor, owned by the EventFile.
func (e *EventFile) Fd() int { return e.p.Fd() }

// Close closes the file, waking a reader. Closing twice is safe.
func (e *EventFile) Close() error { return e.p.Close() }

// read fills buf with one event, waiting until one arrives or ctx is done.
func (e *EventFile) read(ctx context.Context, buf []byte) error {
	n, err := e.p.Read(ctx, buf)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return fmt.Errorf("uverbs: read %s: %w", e.p.Name(), err)
	}
	if n != len(buf) {
		return fmt.Errorf("uverbs: read %s: %d-byte event, want %d", e.p.Name(), n, len(buf))
	}
	return nil
}

// EventType is the kernel's enum ib_event_type (libibverbs' enum
// ibv_event_type has the same values).
type EventType uint32

// Event types, enum ib_event_type in the kernel's <rdma/ib_verbs.h>.
const (
	EventCQErr            EventType = 0  // IB_EVENT_CQ_ERR
	EventQPFatal          EventType = 1  // IB_EVENT_QP_FATAL
	EventQPReqErr         EventType = 2  // IB_EVENT_QP_REQ_ERR
	EventQPAccessErr      EventType = 3  // IB_EVENT_QP_ACCESS_ERR
	EventCommEst          EventType = 4  // IB_EVENT_COMM_EST
	EventSQDrained        EventType = 5  // IB_EVENT_SQ_DRAINED
	EventPathMig          EventType = 6  // IB_EVENT_PATH_MIG
	EventPathMigErr       EventType = 7  // IB_EVENT_PATH_MIG_ERR
	EventDeviceFatal      EventType = 8  // IB_EVENT_DEVICE_FATAL
	EventPortActive       EventType = 9  // IB_EVENT_PORT_ACTIVE
	EventPortErr          EventType = 10 // IB_EVENT_PORT_ERR
	EventLIDChange        EventType = 11 // IB_EVENT_LID_CHANGE
	EventPKeyChange       EventType = 12 // IB_EVENT_PKEY_CHANGE
	EventSMChange         EventType = 13 // IB_EVENT_SM_CHANGE
	EventSRQErr           EventType = 14 // IB_EVENT_SRQ_ERR
	EventSRQLimitReached  EventType = 15 // IB_EVENT_SRQ_LIMIT_REACHED
	EventQPLastWQEReached EventType = 16 // IB_EVENT_QP_LAST_WQE_REACHED
	EventClientReregister EventType = 17 // IB_EVENT_CLIENT_REREGISTER
	EventGIDChange        EventType = 18 // IB_EVENT_GID_CHANGE
	EventWQFatal          EventType = 19 // IB_EVENT_WQ_FATAL
)

var eventNames = [...]string{
	"CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST", "SQ_DRAINED",
	"PATH_MIG", "PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR",
	"LID_CHANGE", "PKEY_CHANGE", "SM_CHANGE", "SRQ_ERR", "SRQ_LIMIT_REACHED",
	"QP_LAST_WQE_REACHED", "CLIENT_REREGISTER", "GID_CHANGE", "WQ_FATAL",
}

func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint32(t))
}

// Subject says what kind of object an event is about.
func (t EventType) Subject() string {
	switch t {
	case EventCQErr:
		return "cq"
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained,
		EventPathMig, EventPathMigErr, EventQPLastWQEReached:
		return "qp"
	case EventSRQErr, EventSRQLimitReached:
		return "srq"
	case EventWQFatal:
		return "wq"
	case EventDeviceFatal:
		return "device"
	}
	return "port"
}

// AsyncEvent is one async event. For object events exactly one of QP, CQ
// and SRQ is set (nil if the object was closed meanwhile); for port events
// Port is the port number.
type AsyncEvent struct {
	Type EventType
	// Element is what the kernel reported: the object's user handle, or
	// the port number.
	Element uint64
	Port    uint8
	QP      *QP
	CQ      *CQ
	SRQ     *SRQ
}

func (ev AsyncEvent) String() string {
	return fmt.Sprintf("%v (%s %d)", ev.Type, ev.Type.Subject(), ev.Element)
}

// decodeAsyncEvent turns the kernel's event record into an AsyncEvent,
// resolving object handles through lookup.
func decodeAsyncEvent(d uverbsabi.IbUverbsAsyncEventDesc, lookup func(uint64) any) AsyncEvent {
	ev := AsyncEvent{Type: EventType(d.EventType), Element: d.Element}
	switch ev.Type.Subject() {
	case "port":
		ev.Port = uint8(d.Element)
	case "qp", "cq", "srq":
		if lookup == nil {
			break
		}
		switch o := lookup(d.Element).(type) {
		case *QP:
			ev.QP = o
		case *CQ:
			ev.CQ = o
		case *SRQ:
			ev.SRQ = o
		}
	}
	return ev
}

// NextAsyncEvent waits for the context's next async event, until ctx is
// done.
func (c *Context) NextAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	var d uverbsabi.IbUverbsAsyncEventDesc
	if err := c.async.read(ctx, asBytes(&d)); err != nil {
		return AsyncEvent{}, err
	}
	return decodeAsyncEvent(d, c.lookup), nil
}

// CompChannel is a completion channel: CQs created on it report their
// completion events here once armed.
type CompChannel struct {
	ctx *Context
	ev  *EventFile
}

// CreateCompChannel creates a completion channel.
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	var cmd uverbsabi.IbUverbsCreateCompChannel
	var resp uverbsabi.IbUverbsCreateCompChannelResp
	if err := c.InvokeWrite("create comp channel", uverbsabi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, asBytes(&cmd), asBytes(&resp), nil, nil); err != nil {
		return nil, err
	}
	ev, err := newEventFile(int(resp.Fd), "completion channel")
	if err != nil {
		unix.Close(int(resp.Fd))
		return nil, err
	}
	ch := &CompChannel{ctx: c, ev: ev}
	if err := c.adopt(ch); err != nil {
		ev.Close()
		return nil, err
	}
	return ch, nil
}

// Fd returns the channel's file descriptor, owned by the channel.
func (ch *CompChannel) Fd() int { return ch.ev.Fd() }

// NextCQ waits for the next completion event and returns the CQ it is
// for. The CQ must be armed again (its provider's request-notify) to
// report more.
func (ch *CompChannel) NextCQ(ctx context.Context) (*CQ, error) {
	var d uverbsabi.IbUverbsCompEventDesc
	if err := ch.ev.read(ctx, asBytes(&d)); err != nil {
		return nil, err
	}
	cq, _ := ch.ctx.lookup(d.CqHandle).(*CQ)
	if cq == nil {
		return nil, fmt.Errorf("uverbs: completion event for unknown CQ handle %d", d.CqHandle)
	}
	return cq, nil
}

// NextUserHandle waits for the next completion event and returns what the
// kernel reported: the user handle of the CQ it is for, whether or not
// this context knows the CQ (it may have been destroyed meanwhile).
func (ch *CompChannel) NextUserHandle(ctx context.Context) (uint64, error) {
	var d uverbsabi.IbUverbsCompEventDesc
	if err := ch.ev.read(ctx, asBytes(&d)); err != nil {
		return 0, err
	}
	return d.CqHandle, nil
}

func (ch *CompChannel) markClosed() { ch.ev.Close() }

// Close closes the channel. The kernel keeps it alive until its CQs are
// destroyed. Closing twice is safe.
func (ch *CompChannel) Close() error {
	err := ch.ev.Close()
	ch.ctx.release(ch)
	return err
}
