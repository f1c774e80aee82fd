package model

import (
	"fmt"
	"slices"
	"time"

	"github.com/mlx5go/mlx5go/prm"
)

// A DCI with streams runs its stream channels apart (docs/MODEL.md, "DC",
// "Channels run apart"). mlx5dv_create_qp(3): log_num_concurent "Defines
// the number of parallel different streams that could be handled by HW.
// All work request of a specific stream_id are handled in order";
// mlx5dv_dci_stream_id_reset(3): "Work requested for other stream_id's
// will continue to be processed by the QP"; mlx5dv_wr_post(3): the stream
// id lets the HW "choose one of the multiple concurrent DCI resources".
//
//   - Fetch. The device fetches WQEs in send queue order, as far as the
//     doorbell record's send counter, and files each on its stream
//     channel; it reads the control segment then (ds: where the next WQE
//     starts; dci_stream_channel_id: the channel).
//   - Run. Each channel runs its WQEs in order; a channel whose first WQE
//     waits (an RNR NAK: the DCT's timer) does not stop the others. Which
//     of the channels that can run goes next is Options.DCIStreamOrder's:
//     the one whose WQE comes first in the send queue, or one drawn from
//     a seeded PCG. A WQE that ran has completed (its CQE, if any, is
//     written then); hw_sq_wqebb_counter is the earliest WQE not run.
//   - When the rest of a WQE is read is not public. By default the model
//     reads it when the WQE runs (each RNR retry too), and reads the
//     control segment again: a WQE whose control segment changed since
//     the fetch is a fault, and the QP goes to ERR (what a device would
//     run then is unknowable), so a driver that frees WQEBBs before their
//     WQEs ran and writes over them is caught. The ring is the device's
//     from its earliest WQE not run: a send counter more than the ring
//     past it is a fault. With Options.DCIReadAtFetch the WQE is copied
//     out of the ring at the fetch: the ring is the device's from the
//     fetch counter, and later writes change nothing that runs.
//   - A stream error flushes its channel's WQEs as they come to run (an
//     errored channel's WQEs complete with WR_FLUSH_ERR, dc.go); a QP in
//     ERR (the errored-stream limit, a QP error, 2ERR) flushes every WQE
//     not run, of every channel, in send queue order, then the WQEs not
//     fetched yet.

// DCIStreamPolicy says which of a DCI's stream channels runs next, among
// those whose next WQE can run (Options.DCIStreamOrder).
type DCIStreamPolicy uint8

const (
	// DCIStreamsInOrder runs the WQE that comes first in the send queue
	// among the channels that can run: the send queue's order, but for
	// channels that wait. The default.
	DCIStreamsInOrder DCIStreamPolicy = iota
	// DCIStreamsSeeded runs a channel drawn uniformly, among those that
	// can run, from a PCG seeded with DCIStreamOrder.Seed, one draw per
	// WQE: the same seed and the same work, rung the same way, give the
	// same order.
	DCIStreamsSeeded
)

var dciStreamPolicyNames = [...]string{"in order", "seeded"}

// String names the policy: in order or seeded.
func (p DCIStreamPolicy) String() string {
	return policyName(dciStreamPolicyNames[:], p, "DCIStreamPolicy")
}

// DCIStreamOrder is Options.DCIStreamOrder: which stream channel of a
// DCI with streams runs next. The zero value is DCIStreamsInOrder.
type DCIStreamOrder struct {
	Policy DCIStreamPolicy
	Seed   uint64 // DCIStreamsSeeded's seed
}

// dciOrderStream is the PCG's second word for DCIStreamsSeeded.
const dciOrderStream = 0xdc15_0de5

// check refuses a policy the model does not know.
func (o DCIStreamOrder) check() error {
	if o.Policy > DCIStreamsSeeded {
		return fmt.Errorf("model: Options.DCIStreamOrder: unknown policy %v", o.Policy)
	}
	return nil
}

// dciRun is the send queue of a DCI with streams as the device runs it.
type dciRun struct {
	// fetched is the fetch counter: the next WQEBB to fetch.
	fetched uint16
	// chans are the stream channels, by channel id.
	chans []dciChan
	// can is scratch: the channels that can run.
	can []uint16
}

// dciChan is one stream channel.
type dciChan struct {
	// wqes[head:] are the WQEs fetched and not run, in send queue order.
	wqes []fetchedWQE
	head int
	rnr  *rnrWait // the RNR wait of its first WQE; nil when none
}

// first is the channel's first WQE not run; nil when there is none.
func (ch *dciChan) first() *fetchedWQE {
	if ch.head == len(ch.wqes) {
		return nil
	}
	return &ch.wqes[ch.head]
}

// pop takes the first WQE off the channel, and its RNR wait.
func (ch *dciChan) pop() {
	ch.head++
	ch.rnr = nil
	switch {
	case ch.head == len(ch.wqes):
		ch.wqes, ch.head = ch.wqes[:0], 0
	case ch.head >= 64 && 2*ch.head >= len(ch.wqes):
		ch.wqes, ch.head = append(ch.wqes[:0], ch.wqes[ch.head:]...), 0
	}
}

// empty takes every WQE off the channel and returns them, appended to
// to.
func (ch *dciChan) empty(to []fetchedWQE) []fetchedWQE {
	to = append(to, ch.wqes[ch.head:]...)
	ch.wqes, ch.head, ch.rnr = ch.wqes[:0], 0, nil
	return to
}

// fetchedWQE is a WQE a DCI with streams fetched.
type fetchedWQE struct {
	at  uint16   // its counter
	ch  uint16   // its stream channel
	hdr sendWQE  // its control segment, as fetched (no bytes)
	w   *sendWQE // Options.DCIReadAtFetch: the WQE as copied at the fetch
}

// streamed reports whether q runs its stream channels apart: a DCI with
// more than one (log_num_dci_stream_channels, from the create).
func streamed(q *qpObj) bool {
	return isDCI(q) && prm.Qpc.LogNumDciStreamChannels.Get(q.qpc) > 0
}

// dciRunOf returns q's run state, made on first use from the hardware's
// consumer counter.
func dciRunOf(q *qpObj) *dciRun {
	s := dcOf(q)
	if s.run == nil {
		s.run = &dciRun{fetched: q.sqCI, chans: make([]dciChan, 1<<prm.Qpc.LogNumDciStreamChannels.Get(q.qpc))}
	}
	return s.run
}

// runStreams is runSQ for a DCI with streams: it fetches what the doorbell
// record covers and runs the channels while one can run and the QP is in
// RTS (in ERR it flushes; in another state the WQEs wait).
func (h *hca) runStreams(q *qpObj) {
	s := dciRunOf(q)
	d := h.ctxs[q.ctx]
	var opt Options
	if d != nil {
		opt = d.opt
	}
	defer h.streamWaits(q, s)
	for {
		if !h.sqRuns(q) {
			return
		}
		if !h.fetchStreams(q, s, opt.DCIReadAtFetch) {
			return
		}
		c, ok := h.nextChannel(q, s, d)
		if !ok {
			return
		}
		if !h.runChannel(q, s, c) {
			return
		}
	}
}

// fetchStreams fetches the WQEs from the fetch counter to the doorbell
// record's send counter onto their channels; false after a fault.
func (h *hca) fetchStreams(q *qpObj, s *dciRun, atFetch bool) bool {
	pi := uint16(dbrWord(q.dbr, 1))
	from, what := q.sqCI, "the earliest WQE not run"
	if atFetch {
		from, what = s.fetched, "the fetch counter"
	}
	switch {
	case pi-q.sqCI < s.fetched-q.sqCI:
		h.fault(q.ctx, "QP %#x: the send counter %d went back before the WQEs fetched up to %d", q.qpn, pi, s.fetched)
		return false
	case int(pi-from) > q.sq.entries:
		h.fault(q.ctx, "QP %#x: the send counter %d is %d WQEBBs past %s, %d; the ring has %d", q.qpn, pi, pi-from, what, from, q.sq.entries)
		return false
	}
	for s.fetched != pi {
		c := s.fetched
		e := fetchedWQE{at: c, hdr: *wqeHeader(q, c)}
		if !h.fits(q, c, &e.hdr, pi-c) {
			return false
		}
		if atFetch {
			w, ok := h.readWQEAt(q, c, pi-c)
			if !ok {
				return false
			}
			e.w = w
		} else {
			h.checkIndex(q, c, &e.hdr)
		}
		e.ch = dciChannel(q, &e.hdr)
		s.chans[e.ch].wqes = append(s.chans[e.ch].wqes, e)
		s.fetched += e.hdr.bbs
	}
	return true
}

// nextChannel picks the channel whose first WQE runs next: among those
// that have one and do not wait, the one Options.DCIStreamOrder says.
func (h *hca) nextChannel(q *qpObj, s *dciRun, d *Device) (uint16, bool) {
	s.can = s.can[:0]
	var now time.Time
	for c := range s.chans {
		ch := &s.chans[c]
		if ch.first() == nil {
			continue
		}
		if ch.rnr != nil {
			if now.IsZero() {
				now = time.Now()
			}
			if now.Before(ch.rnr.next) {
				continue
			}
		}
		s.can = append(s.can, uint16(c))
	}
	if len(s.can) == 0 {
		return 0, false
	}
	if d != nil && d.dciOrder != nil {
		return s.can[d.dciOrder.IntN(len(s.can))], true
	}
	best := s.can[0]
	for _, c := range s.can[1:] {
		if s.chans[c].first().at-q.sqCI < s.chans[best].first().at-q.sqCI {
			best = c
		}
	}
	return best, true
}

// runChannel runs the first WQE of channel c; false when the send queue
// stops (the QP left RTS).
func (h *hca) runChannel(q *qpObj, s *dciRun, c uint16) bool {
	e := *s.chans[c].first()
	w, r := e.w, result{}
	if w == nil {
		w, r.fail = h.rereadWQE(q, &e)
	}
	if r.fail == nil {
		r = h.execWQE(q, w)
	}
	if r.rnr {
		// The channel waits for the responder's timer; the others go on.
		ch := &s.chans[c]
		if ch.rnr == nil {
			ch.rnr = newRNRWait(q)
		}
		if ch.rnr.nak(r.rnrDelay) {
			return true
		}
		r = rnrExhausted()
	}
	h.retire(q, s, c)
	if len(r.sigs) > 0 && prm.Qpc.DrainSigerr.Get(q.qpc) != 0 {
		h.fault(q.ctx, "QP %#x WQE %d: a signature error on a DCI with streams and drain_sigerr: its stop is not modelled, the channels go on", q.qpn, e.at)
	}
	return h.complete(q, w, e.at, r)
}

// rereadWQE reads fetched WQE e out of the ring to run it. When its
// control segment is not the one fetched, the driver wrote over a WQE the
// device had not run: a fault, and the WQE as fetched fails with a local
// QP operation error (what a device would run then is unknowable).
func (h *hca) rereadWQE(q *qpObj, e *fetchedWQE) (*sendWQE, *wqeFail) {
	now, why := headerChanged(q, e)
	if why != "" {
		h.fault(q.ctx, "QP %#x: the WQE at counter %d %s since the device fetched it: the driver wrote over a WQE the device had not run; the QP goes to ERR", q.qpn, e.at, why)
		return &e.hdr, qpOpErr("overwritten before it ran")
	}
	now.copyOut(q, e.at)
	return now, nil
}

// headerChanged reads the control segment of fetched WQE e again and
// says what changed since the fetch ("" when nothing the fetch read).
func headerChanged(q *qpObj, e *fetchedWQE) (*sendWQE, string) {
	now := wqeHeader(q, e.at)
	switch f := &e.hdr; {
	case now.index != f.index:
		return now, fmt.Sprintf("has wqe_index %d, not %d,", now.index, f.index)
	case now.ds != f.ds:
		return now, fmt.Sprintf("has ds %d, not %d,", now.ds, f.ds)
	case now.qpn != f.qpn:
		return now, fmt.Sprintf("names QP %#x, not %#x,", now.qpn, f.qpn)
	case dciChannel(q, now) != e.ch:
		return now, fmt.Sprintf("is on stream channel %d, not %d,", dciChannel(q, now), e.ch)
	}
	return now, ""
}

// retire takes channel c's first WQE off it (it ran, or completed in
// error) and moves the hardware's consumer counter to the earliest WQE
// not run.
func (h *hca) retire(q *qpObj, s *dciRun, c uint16) {
	s.chans[c].pop()
	ci := s.fetched
	for i := range s.chans {
		if e := s.chans[i].first(); e != nil && e.at-q.sqCI < ci-q.sqCI {
			ci = e.at
		}
	}
	q.sqCI = ci
	prm.Qpc.HwSqWqebbCounter.Set(q.qpc, uint64(ci))
}

// streamWaits keeps q's RNR wait (what the doorbell goroutine looks for)
// as the earliest of its channels' waits.
func (h *hca) streamWaits(q *qpObj, s *dciRun) {
	var next time.Time
	for c := range s.chans {
		if r := s.chans[c].rnr; r != nil && s.chans[c].first() != nil && (next.IsZero() || r.next.Before(next)) {
			next = r.next
		}
	}
	if next.IsZero() {
		h.clearRNR(q)
		return
	}
	if q.rnr == nil {
		q.rnr = &rnrWait{}
		h.rnrWaiting.Add(1)
	}
	q.rnr.next = next
}

// flushFetched completes the WQEs a DCI in ERR fetched and did not run,
// of every channel, with WR_FLUSH_ERR in send queue order, and leaves the
// hardware's consumer counter at the fetch counter, from where flushSQ
// flushes the rest.
func (h *hca) flushFetched(q *qpObj, s *dciRun, atFetch bool) {
	var all []fetchedWQE
	for c := range s.chans {
		all = s.chans[c].empty(all)
	}
	slices.SortFunc(all, func(a, b fetchedWQE) int { return int(a.at-q.sqCI) - int(b.at-q.sqCI) })
	for i := range all {
		e := &all[i]
		if !atFetch {
			if _, why := headerChanged(q, e); why != "" {
				h.fault(q.ctx, "QP %#x: the WQE at counter %d %s since the device fetched it: the driver wrote over a WQE the device had not run (flushed)", q.qpn, e.at, why)
			}
		}
		h.errCQE(q, q.sendCQ(), cqeReqErr, SyndromeWRFlush, e.hdr.opcode, e.at)
	}
	q.sqCI = s.fetched
	prm.Qpc.HwSqWqebbCounter.Set(q.qpc, uint64(q.sqCI))
}
