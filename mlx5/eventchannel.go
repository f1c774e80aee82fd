package mlx5

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// EventChannelOptions configures Context.NewEventChannel.
type EventChannelOptions struct {
	// OmitData makes the channel deliver each event's cookie without its
	// EQE (MLX5DV_DEVX_CREATE_EVENT_CHANNEL_FLAGS_OMIT_EV_DATA). The
	// kernel then queues at most one unread event per subscription, so
	// events of one subscription that arrive before Next reads the first
	// are merged into it rather than dropped with an overflow.
	OmitData bool
}

// EventChannel receives the firmware events of DEVX objects that were
// subscribed to it (mlx5dv_devx_event_channel). One goroutine or many may
// call Next; each event goes to exactly one of them.
type EventChannel struct {
	c    *Context
	ch   seam.EventChannel
	name string
	omit bool

	mu     sync.Mutex
	closed bool
}

// DevxEvent is one event read from an EventChannel
// (struct mlx5dv_devx_async_event_hdr).
type DevxEvent struct {
	// Cookie is the value given to Subscribe.
	Cookie uint64
	// EQE is the 64-byte struct mlx5_eqe the device raised, as the device
	// wrote it (big-endian fields; byte 1 is the event type). It is all
	// zero on a channel made with OmitData.
	EQE [64]byte
}

// Type is the event type the EQE names (MLX5_EVENT_TYPE_*). On a channel
// made with OmitData it is 0, which is also the type of a completion
// event: such a channel's user tells events apart by their cookies.
func (e DevxEvent) Type() uint8 { return e.EQE[1] }

// NewEventChannel creates a DEVX event channel
// (mlx5dv_devx_create_event_channel). It needs DEVX. The context's Close
// closes it.
func (c *Context) NewEventChannel(opt EventChannelOptions) (*EventChannel, error) {
	const op = "devx create event channel"
	if err := c.check(op, ""); err != nil {
		return nil, err
	}
	ch, err := c.dev.NewEventChannel(opt.OmitData)
	if err != nil {
		return nil, opErr(op, c.name, err)
	}
	e := &EventChannel{c: c, ch: ch, omit: opt.OmitData, name: "devx event channel"}
	if fd := ch.Fd(); fd >= 0 {
		e.name = fmt.Sprintf("devx event channel %d", fd)
	}
	if err := c.adopt(e); err != nil {
		ch.Close()
		return nil, opErr(op, c.name, err)
	}
	return e, nil
}

// usable fails for a nil EventChannel and one not made by
// Context.NewEventChannel.
func (e *EventChannel) usable(op string) error {
	if e == nil || e.c == nil {
		return unusable(op, "EventChannel", "Context.NewEventChannel", e == nil)
	}
	return nil
}

func (e *EventChannel) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// EventSource is a DEVX object whose events an EventChannel can subscribe
// to: a *DevxObj, or a *CQ created with CQOptions.DEVX.
type EventSource interface {
	devxObj(op string) (*DevxObj, error)
}

func (o *DevxObj) devxObj(op string) (*DevxObj, error) {
	if err := o.usable(op); err != nil {
		return nil, err
	}
	return o, nil
}

func (cq *CQ) devxObj(op string) (*DevxObj, error) {
	if err := cq.usable(op); err != nil {
		return nil, err
	}
	if cq.verbs {
		return nil, invalid(op, cq.name, "a verbs CQ is no DEVX object: its events come through CQOptions.Events and Context.NextEvent")
	}
	return cq.obj, nil
}

// source resolves src to its DEVX object, of the channel's context.
func (e *EventChannel) source(op string, src EventSource) (*DevxObj, error) {
	if err := e.usable(op); err != nil {
		return nil, err
	}
	if e.isClosed() {
		return nil, opErr(op, e.name, ErrClosed)
	}
	if src == nil {
		return nil, invalid(op, e.name, "nil EventSource")
	}
	obj, err := src.devxObj(op)
	if err != nil {
		return nil, err
	}
	if obj.c != e.c {
		return nil, invalid(op, e.name, "%s belongs to another context", obj.name)
	}
	return obj, nil
}

// Subscribe delivers the events of the given types (MLX5_EVENT_TYPE_*,
// e.g. 0x00 for a CQ's completions, 0x04 for its errors) that the device
// raises on src to the channel, each tagged with cookie
// (mlx5dv_devx_subscribe_devx_event). Which types an object may subscribe
// to, and how many in one call (16 in mlx5_ib), is the kernel's to decide.
// The subscription ends when src or the channel is closed. Subscribing
// twice to one event delivers it twice.
func (e *EventChannel) Subscribe(src EventSource, types []uint16, cookie uint64) error {
	const op = "devx subscribe event"
	obj, err := e.source(op, src)
	if err != nil {
		return err
	}
	if len(types) == 0 {
		return invalid(op, e.name, "no event type to subscribe %s to", obj.name)
	}
	return e.subscribe(op, obj, func() error { return e.c.dev.Subscribe(e.ch, obj.handle, types, cookie) })
}

// SubscribeFD has each event of type typ that the device raises on src
// signal the eventfd fd (adding 1 to its counter) instead of arriving on
// the channel (mlx5dv_devx_subscribe_devx_event_fd). The kernel refuses a
// descriptor that is not an eventfd (EINVAL) or not open (EBADF), and
// keeps its own reference to the eventfd until the subscription ends,
// when src or the channel is closed.
func (e *EventChannel) SubscribeFD(src EventSource, typ uint16, fd int) error {
	const op = "devx subscribe event fd"
	obj, err := e.source(op, src)
	if err != nil {
		return err
	}
	if fd < 0 {
		return invalid(op, e.name, "eventfd %d", fd)
	}
	return e.subscribe(op, obj, func() error { return e.c.dev.SubscribeFD(e.ch, obj.handle, typ, fd) })
}

// subscribe runs call, the kernel's subscribe, with the channel and obj
// open: their locks, in that order, keep both from closing until the
// kernel has answered.
func (e *EventChannel) subscribe(op string, obj *DevxObj, call func() error) error {
	if err := e.c.check(op, e.name); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return opErr(op, e.name, ErrClosed)
	}
	obj.mu.Lock()
	defer obj.mu.Unlock()
	if obj.closed {
		return opErr(op, obj.name, ErrClosed)
	}
	if err := call(); err != nil {
		return opErr(op, obj.name, err)
	}
	return nil
}

// Next waits in the Go runtime's netpoller for the next event
// (mlx5dv_devx_get_event) until ctx is done; the error then wraps ctx's.
// When the kernel had to drop events for want of room, Next returns one
// error wrapping unix.EOVERFLOW and reading goes on after it. Closing the
// channel or its context ends a wait with ErrClosed.
func (e *EventChannel) Next(ctx context.Context) (DevxEvent, error) {
	const op = "devx get event"
	if err := e.usable(op); err != nil {
		return DevxEvent{}, err
	}
	if e.isClosed() {
		return DevxEvent{}, opErr(op, e.name, ErrClosed)
	}
	if ctx == nil {
		return DevxEvent{}, invalid(op, e.name, "nil context.Context")
	}
	var buf [seam.EventHeaderSize + seam.EQESize]byte
	n, err := e.ch.Next(ctx, buf[:])
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return DevxEvent{}, opErr(op, e.name, ctx.Err())
	case e.isClosed(), errors.Is(err, unix.EIO):
		// EIO: the kernel destroyed the channel with its context.
		return DevxEvent{}, opErr(op, e.name, ErrClosed)
	default:
		return DevxEvent{}, opErr(op, e.name, err)
	}
	want := seam.EventHeaderSize + seam.EQESize
	if e.omit {
		want = seam.EventHeaderSize
	}
	if n != want {
		return DevxEvent{}, opErr(op, e.name, fmt.Errorf("an event of %d bytes, not %d", n, want))
	}
	ev := DevxEvent{Cookie: binary.NativeEndian.Uint64(buf[:])}
	copy(ev.EQE[:], buf[seam.EventHeaderSize:n])
	return ev, nil
}

// Close closes the channel and ends its subscriptions; a Next waiting
// returns ErrClosed. Closing twice is safe.
func (e *EventChannel) Close() error {
	const op = "devx destroy event channel"
	if err := e.usable(op); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	e.c.forget(e)
	if err := e.ch.Close(); err != nil {
		return opErr(op, e.name, err)
	}
	return nil
}

// devxCompChannel makes a DEVX CQ's completion channel, the counterpart
// of the kernel's for a verbs CQ: a DEVX event channel without event data
// subscribed to the completion event of the CQ, obj, with cqn as the
// cookie. Without event data the kernel keeps one unread event for the
// subscription at most, as one armed CQ raises.
func (c *Context) devxCompChannel(obj *DevxObj, cqn uint32) (seam.CompChannel, error) {
	ch, err := c.dev.NewEventChannel(true)
	if err != nil {
		return nil, fmt.Errorf("its completion channel: %w", err)
	}
	if err := c.dev.Subscribe(ch, obj.handle, []uint16{mlx5abi.MLX5_EVENT_TYPE_COMP}, uint64(cqn)); err != nil {
		ch.Close()
		return nil, fmt.Errorf("subscribe to its completions: %w", err)
	}
	return devxCompChannel{ch}, nil
}

// devxCompChannel is a DEVX event channel read as a completion channel:
// Next returns the cookie, the CQ's number.
type devxCompChannel struct{ ch seam.EventChannel }

func (d devxCompChannel) Next(ctx context.Context) (uint64, error) {
	var buf [seam.EventHeaderSize]byte
	if _, err := d.ch.Next(ctx, buf[:]); err != nil {
		return 0, err
	}
	return binary.NativeEndian.Uint64(buf[:]), nil
}

func (d devxCompChannel) Fd() int      { return d.ch.Fd() }
func (d devxCompChannel) Close() error { return d.ch.Close() }
