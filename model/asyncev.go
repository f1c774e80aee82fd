package model

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// The verbs event files (drivers/infiniband/core/uverbs_main.c): the
// context's async event file, which ib_uverbs_async_handler fills with the
// affiliated events of the context's CQs, QPs and SRQs (element: the
// object's user handle), and completion channels, which
// ib_uverbs_comp_handler fills with one entry per completion event of a CQ
// created on them (the CQ's user handle). Entries of an object are
// dropped when it is destroyed (ib_uverbs_release_ucq,
// ib_uverbs_release_uevent), and nothing coalesces: every event is an
// entry.

// IB events (enum ib_event_type, include/rdma/ib_verbs.h).
const (
	ibEventCQErr            = 0
	ibEventQPFatal          = 1
	ibEventQPReqErr         = 2
	ibEventQPAccessErr      = 3
	ibEventCommEst          = 4
	ibEventSQDrained        = 5
	ibEventPathMig          = 6
	ibEventPathMigErr       = 7
	ibEventSRQErr           = 14
	ibEventSRQLimitReached  = 15
	ibEventQPLastWQEReached = 16
)

// evQueue is one event file's queue (struct ib_uverbs_event_queue).
type evQueue[T any] struct {
	mu        sync.Mutex
	entries   []evEntry[T]
	closed    bool // its file was closed
	destroyed bool // the context was closed
	wake      chan struct{}
}

// evEntry is one queued event and the object it came from.
type evEntry[T any] struct {
	v   T
	obj any
}

func newEvQueue[T any]() *evQueue[T] { return &evQueue[T]{wake: make(chan struct{}, 1)} }

// push queues an event of obj, unless the file is closed (the handlers'
// is_closed check).
func (q *evQueue[T]) push(v T, obj any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.destroyed {
		return
	}
	q.entries = append(q.entries, evEntry[T]{v, obj})
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// drop removes the unread events of obj, which is being destroyed.
func (q *evQueue[T]) drop(obj any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.entries = slices.DeleteFunc(q.entries, func(e evEntry[T]) bool { return e.obj == obj })
}

// next is ib_uverbs_event_read: the oldest event, waiting for one; EBADF
// once the file is closed, EIO once the context is, ctx's error if ctx is
// done first.
func (q *evQueue[T]) next(ctx context.Context, call string) (T, error) {
	var zero T
	for {
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		q.mu.Lock()
		switch {
		case q.closed:
			q.mu.Unlock()
			return zero, kerr(call, unix.EBADF, "the file is closed")
		case len(q.entries) > 0:
			e := q.entries[0]
			q.entries = q.entries[1:]
			q.mu.Unlock()
			return e.v, nil
		case q.destroyed:
			q.mu.Unlock()
			return zero, kerr(call, unix.EIO, "ib_uverbs_event_read: the context is closed")
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

// close is the release of the event file: its events are dropped, readers
// get EBADF.
func (q *evQueue[T]) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		q.entries = nil
		close(q.wake)
	}
}

// destroy is ib_uverbs_free_event_queue when the context is closed:
// readers get EIO.
func (q *evQueue[T]) destroy() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.destroyed = true
	q.entries = nil
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// NextAsyncEvent reads the context's async event file (the file libmlx5
// opens with ASYNC_EVENT_ALLOC at ibv_open_device): EIO once the context
// is closed.
func (d *Device) NextAsyncEvent(ctx context.Context) (seam.AsyncEvent, error) {
	return d.async.next(ctx, "async event read")
}

// asyncEvent queues an affiliated event of a verbs object on its
// context's async event file (uverbs_uobj_event).
func (d *Device) asyncEvent(typ uint32, element uint64, obj any) {
	d.async.push(seam.AsyncEvent{Type: typ, Element: element}, obj)
}

// compChannel is a completion channel (ib_uverbs_completion_event_file).
type compChannel struct {
	d *Device
	q *evQueue[uint64]
}

var _ seam.CompChannel = (*compChannel)(nil)

// NewCompChannel is ibv_create_comp_channel
// (UVERBS_METHOD_COMP_CHANNEL): a channel of the context, counted by
// Objects until closed.
func (d *Device) NewCompChannel() (seam.CompChannel, error) {
	const call = "create comp channel"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return nil, err
	}
	c := &compChannel{d: d, q: newEvQueue[uint64]()}
	d.comps[c] = true
	return c, nil
}

// Next waits for a completion event and returns the user handle of its
// CQ: EBADF after Close, EIO once the context is closed.
func (c *compChannel) Next(ctx context.Context) (uint64, error) {
	return c.q.next(ctx, "comp channel read")
}

// Fd returns -1: the model's channel is no kernel descriptor.
func (c *compChannel) Fd() int { return -1 }

// Close closes the channel. CQs created on it keep working; their events
// go nowhere, as ib_uverbs_comp_handler drops them on a closed queue.
// Closing twice returns nil.
func (c *compChannel) Close() error {
	c.d.h.mu.Lock()
	delete(c.d.comps, c)
	c.d.h.mu.Unlock()
	c.q.close()
	return nil
}

// channelOf is the lookup of a CQ's COMP_CHANNEL attribute
// (lookup_get_fd_uobject): EBADF for a channel that is not an open one of
// this context.
func (d *Device) channelOf(call string, ch seam.CompChannel) (*compChannel, error) {
	if ch == nil {
		return nil, nil
	}
	c, ok := ch.(*compChannel)
	if !ok || c == nil || c.d != d || !d.comps[c] {
		return nil, kerr(call, unix.EBADF, fmt.Sprintf("lookup_get_fd_uobject: %T is not an open completion channel of this context", ch))
	}
	return c, nil
}
