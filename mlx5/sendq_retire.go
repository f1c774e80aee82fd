package mlx5

// retire is the send queue's side of a requester CQE, a success or an
// error, for the WQE at counter ctr. It returns a copy of the record of
// the work request that WQE belongs to (once the tail has moved past its
// slots the poster may reuse them) and whether that work request's
// completion is still to be reported.
//
// A work request of several WQEs (an mkey configure and its SET_PSVs)
// can have a CQE for more than one of them: the WQE that failed, the ones
// flushed after it, and the last one. The tail moves only on the CQE of
// the last WQE, when every WQEBB of the work request, and of the work
// before it, is done with (done: retireTail). Only the first CQE of a
// work request reports a completion: the queue keeps the end of the last
// work request it reported (reported), and another CQE of the same work
// request reports nothing. Nor does a CQE whose counter the record does
// not cover (its last WQE is not at or after ctr, within the ring: a
// counter never posted, or a record of an earlier lap), or a queue
// without slots (a QP without a send queue).
//
// done is always retireTail, passed rather than called by name so that
// retire fits the inliner's budget (a call of a parameter costs it 17, a
// call of a function 57; go build -gcflags=-m=2 ./mlx5 shows retire's
// cost, 75 of 80 on amd64 and arm64). Poll's loop and QP.complete both
// call retire; it is inlined into both, and retireTail into it there.
// The poller's; no lock.
func (sq *sendQueue) retire(ctr uint16, done func(*sendQueue, uint16, uint16)) (s sqSlot, ok bool) {
	if len(sq.slots) != 0 {
		sq.sync.observe()
		s = sq.slots[int(ctr)&(len(sq.slots)-1)]
		if ctr == s.last {
			done(sq, ctr, s.next)
		}
		if s.next != sq.reported && int(s.last-ctr) < len(sq.slots) {
			sq.reported, ok = s.next, true
		}
	}
	return
}

// retireTail moves the tail over the work request at counter at, which
// ends at next, once the CQE of its last WQE arrived: to next, or on a DCI
// with streams as far as the work that is done (retireStream).
func retireTail(sq *sendQueue, at, next uint16) {
	if sq.streams == nil {
		storeRelease(&sq.tail, uint32(next))
	} else {
		sq.retireStream(at)
	}
}

// retireStream is retire's move of the tail on a DCI with streams: the
// work request at counter at completed (every work request of a DCI is
// one WQE). The tail moves over the work that is done: while the work
// request at the tail belongs to a stream whose completions went past
// it, and no further than the furthest completion so far (reach).
func (sq *sendQueue) retireStream(at uint16) {
	ds := sq.streams
	mask := len(sq.slots) - 1
	tail := uint16(sq.tail.Load())
	if int(at-tail) >= len(sq.slots) {
		return // not outstanding work: nothing to free
	}
	next, st := sq.slots[int(at)&mask].next, ds.stream[int(at)&mask]
	ds.doneTo[st], ds.ahead[st] = next, true
	if next-tail > ds.reach-tail {
		ds.reach = next
	}
	// Every stream ahead is done to at most reach: where no work request
	// of a stream ahead is left, reach at the latest, the walk ends.
	t, end := tail, int(ds.reach-tail)
	for int(t-tail) < end {
		w := int(t) & mask
		s := ds.stream[w]
		if !ds.ahead[s] {
			break
		}
		t = sq.slots[w].next
		if t == ds.doneTo[s] {
			ds.ahead[s] = false // the tail reached it
		}
	}
	if t != tail {
		storeRelease(&sq.tail, uint32(t))
	}
}
