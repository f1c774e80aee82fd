package mlx5

// NewContext is newContext for the package's tests, which make contexts
// on the software device model and on fakes of the seam (outside the
// repository, mlx5test does).
var NewContext = newContext

// LiveBuffers is the number of Buffer mappings (the user's and the
// queues') not yet unmapped.
func LiveBuffers() int64 { return liveBuffers.Load() }

// QueuedEvents is the number of asynchronous events the context's reader
// has taken from the kernel and holds for NextEvent.
func QueuedEvents(c *Context) int {
	e := &c.vr.ev
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.queue)
}

// DroppedEvents is the number of events the reader dropped, the oldest
// unread, to keep at most 4096.
func DroppedEvents(c *Context) int {
	e := &c.vr.ev
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dropped
}

// QueueBytes is the bytes of the mappings a QP owns (its work queue and
// doorbell record; a DEVX QP's UMEM memory too).
func QueueBytes(qp *QP) int {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	n := 0
	for _, r := range qp.res {
		if b, ok := r.(*Buffer); ok {
			n += len(b.mapped)
		}
	}
	return n
}

// free is the number of WQEBBs at the producer counter that no posted
// work request still uses (the room a post has: limit less the producer
// counter).
func (sq *sendQueue) free() int { return int(sq.limit() - sq.pi) }
