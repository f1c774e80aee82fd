package flows

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
)

// DCLoad is what DCScale runs: how long it posts new work (longer, by a
// minute at most, until it has seen a stream error and a reset, which a
// slow machine may not see in the time), how many DCTs an initiator of
// how many DCIs, of 2^LogStreams streams each, reaches. The zero value of
// a field takes its default.
type DCLoad struct {
	Duration   time.Duration // 2 s
	DCTs       int           // 256
	DCIs       int           // 4
	LogStreams int           // 3: 8 streams a DCI
	Seed       uint64
}

// DCScaleStats is what a DCScale run did.
type DCScaleStats struct {
	DCTs, DCIs, Streams int
	// Work is the work items, each completed once; Posted the work
	// requests posted for them (the items and their re-posts), Unsignaled
	// how many of those were unsignaled.
	Work, Posted, Unsignaled int
	// Errors are the remote access errors (a work request that reached a
	// revoked MR), Flushes the work requests flushed behind them on their
	// streams, Resets the streams reset, Revocations the times a target's
	// MR was revoked.
	Errors, Flushes, Resets, Revocations int
	// OutOfOrder counts completions that came after a completion of a
	// work request posted later on the same DCI (of another stream: a
	// stream completes in order): out of send queue order.
	OutOfOrder int
	// Elapsed is the time from the first post to the last completion.
	Elapsed time.Duration
}

func (s DCScaleStats) String() string {
	return fmt.Sprintf("%d DCTs, %d DCIs of %d streams: %d work items in %v (%.0f a second), %d posted (%d unsignaled), "+
		"%d remote access errors, %d flushes, %d stream resets, %d revocations, %d completions out of send queue order",
		s.DCTs, s.DCIs, s.Streams, s.Work, s.Elapsed.Round(time.Millisecond), float64(s.Work)/s.Elapsed.Seconds(),
		s.Posted, s.Unsignaled, s.Errors, s.Flushes, s.Resets, s.Revocations, s.OutOfOrder)
}

// dcScaleMsg is the bytes of each RDMA WRITE and READ; dcScaleWindow the
// work items a DCI may have not yet done (each has its own place in the
// initiator's memory and in each target's).
const (
	dcScaleMsg    = 32
	dcScaleWindow = 256
)

// DCScale is a storage initiator at scale: DCIs of 2^LogStreams streams
// each reach DCTs (256 by default) of their own keys, each target with its
// own MR, one poster and poller goroutine per DCI. Every work item is an
// RDMA WRITE of its own record into its own place of a target, or an RDMA
// READ of the target's header; a target's work always runs on the same
// stream of a DCI (its number modulo the streams), posted in lists of up
// to 32 where only each stream's last and every fourth is signaled (a
// stream's completion says its earlier work is done, and the DCI's ring
// frees its space stream by stream). A
// target fails at random moments: its MR is deregistered, so that work
// reaching it fails with a remote access error (rdma-core's
// test_dc_stream_ids_recovery makes the same error and expects the DCI to
// stay in RTS: a stream error), and is registered again a little later
// under a new rkey. Meanwhile another goroutine keeps doing that to
// another target.
//
// The flow checks what a stream error must do (mlx5dv_dci_stream_id_reset(3)):
// a remote access error only for work sent to a revoked MR; after it,
// only that stream's work is flushed, each flushed work request
// completing once, while every other stream's work completes; when the
// stream's work has all completed, the DCI is queried (RTS), the stream is
// reset, and its failed work is posted again once the target is back.
// Every wr_id posted is accounted for exactly once (by its completion, or,
// unsignaled, by a later completion of its stream), every work item
// completes exactly once, and its data is compared at the target (a
// WRITE) or at the initiator (a READ). It needs DCI streams with errored
// streams to reset, and DEVX for the reset; otherwise it skips.
func DCScale(t *testing.T, c *mlx5.Context, load DCLoad) DCScaleStats {
	if load.Duration == 0 {
		load.Duration = 2 * time.Second
	}
	if load.DCTs == 0 {
		load.DCTs = 256
	}
	if load.DCIs == 0 {
		load.DCIs = 4
	}
	if load.LogStreams == 0 {
		load.LogStreams = 3
	}
	caps, err := c.DCCaps()
	if err != nil {
		t.Fatalf("dc caps: %v", err)
	}
	switch {
	case caps.Streams.LogConcurrent < load.LogStreams:
		t.Skipf("the device's DCIs have up to 2^%d streams (dci_streams max_log_num_concurent), the scenario needs 2^%d", caps.Streams.LogConcurrent, load.LogStreams)
	case !caps.StreamReset:
		t.Skipf("the device cannot reset a DCI stream (errored streams 2^%d, qpc_extension %v)", caps.Streams.LogErrored, caps.QPCExtension)
	case !c.DEVX():
		t.Skip("the stream reset is a DEVX command, and the context has no DEVX")
	}
	r := newDCScaleRig(t, c, load, min(2, caps.Streams.LogErrored))

	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	fail := func(err error) {
		errMu.Lock()
		if first == nil {
			first = err
		}
		errMu.Unlock()
		stop.Store(true)
	}
	start := time.Now()
	deadline := start.Add(load.Duration)
	revocations := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, err := r.chaos(deadline, &stop, load.Seed)
		revocations = n
		if err != nil {
			fail(err)
		}
	}()
	for _, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.run(deadline, &stop); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
	st := DCScaleStats{DCTs: load.DCTs, DCIs: load.DCIs, Streams: 1 << load.LogStreams, Revocations: revocations, Elapsed: time.Since(start)}
	for _, w := range r.workers {
		st.Work += int(w.next)
		st.Posted += w.posted
		st.Unsignaled += w.unsignaled
		st.Errors += w.errors
		st.Flushes += w.flushes
		st.Resets += w.resets
		st.OutOfOrder += w.outOfOrder
	}
	if st.Errors == 0 || st.Resets == 0 || st.Unsignaled == 0 {
		t.Errorf("%v: the run saw no stream error, reset or unsignaled work", st)
	}
	return st
}

// dcScaleRig is the initiator (its PD, AH, memory and DCIs, one CQ each)
// and the targets (their PD, one CQ and one SRQ for all DCTs, and each
// target's DCT, key and memory).
type dcScaleRig struct {
	c       *mlx5.Context
	load    DCLoad
	targets []*dcTarget
	tpd     *mlx5.PD
	workers []*dcWorker
	// errors and resets are the workers' stream errors and resets so
	// far, for making.
	errors, resets atomic.Int64
}

// dcScaleGrace is how long past its Duration a run goes on making work
// until it has seen a stream error and a reset; dcScaleDrain how long
// its work may take to complete once the last is made. Both are bounds
// on what must come, long because a loaded machine or qemu-user is slow:
// there the chaos goroutine, which sleeps a few milliseconds between
// revocations, gets little time (one revocation in 1.4 s under qemu-user,
// where a second natively has about sixty), and the workers too.
const (
	dcScaleGrace = 60 * time.Second
	dcScaleDrain = 60 * time.Second
)

// making reports whether the run still makes new work (and revokes MRs):
// until the deadline, then, for dcScaleGrace more at most, until a stream
// error and a reset have come. It never turns true again once false.
func (r *dcScaleRig) making(deadline time.Time) bool {
	now := time.Now()
	if now.Before(deadline) {
		return true
	}
	return now.Before(deadline.Add(dcScaleGrace)) && (r.errors.Load() == 0 || r.resets.Load() == 0)
}

// dcTarget is one target: its DCT and key, its memory (a header that
// READs read, then a place for each DCI's work items), and its MR, which
// the chaos goroutine revokes and registers again. state is what the
// initiator knows of the MR: its rkey, whether it is revoked (down), and
// its generation (how many times it was registered again).
type dcTarget struct {
	dct   *mlx5.QP
	key   uint64
	mem   []byte
	addr  uint64
	mr    *mlx5.MR // the chaos goroutine's
	state atomic.Uint64
}

func targetState(gen uint32, down bool, rkey uint32) uint64 {
	s := uint64(gen)<<33 | uint64(rkey)
	if down {
		s |= 1 << 32
	}
	return s
}

func splitState(s uint64) (gen uint32, down bool, rkey uint32) {
	return uint32(s >> 33), s&(1<<32) != 0, uint32(s)
}

// dcTargetAccess is the targets' MRs' and DCTs' access.
const dcTargetAccess = mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead

func newDCScaleRig(t *testing.T, c *mlx5.Context, load DCLoad, logErrored int) *dcScaleRig {
	t.Helper()
	r := &dcScaleRig{c: c, load: load}
	var closers []interface{ Close() error }
	t.Cleanup(func() {
		for _, tg := range r.targets {
			if tg.mr != nil {
				closers = append(closers, tg.mr)
			}
		}
		for i := len(closers) - 1; i >= 0; i-- {
			if err := closers[i].Close(); err != nil {
				t.Errorf("close %T: %v", closers[i], err)
			}
		}
	})
	keep := func(x interface{ Close() error }, err error, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		closers = append(closers, x)
	}
	path, err := c.LoopbackPath(1)
	if err != nil {
		t.Fatalf("loopback path: %v", err)
	}

	// The targets.
	r.tpd, err = c.AllocPD()
	keep(r.tpd, err, "alloc target pd")
	tcq, err := c.CreateCQ(mlx5.CQOptions{Entries: 64})
	keep(tcq, err, "create target cq")
	srq, err := c.CreateSRQ(mlx5.SRQOptions{PD: r.tpd, MaxWR: 16, MaxSGE: 1})
	keep(srq, err, "create srq")
	region := dcScaleMsg + load.DCIs*dcScaleWindow*dcScaleMsg
	tbuf, err := mlx5.AllocBuffer(load.DCTs * region)
	keep(tbuf, err, "alloc target memory")
	for k := range load.DCTs {
		tg := &dcTarget{key: uint64(k)*0x9e3779b97f4a7c15 + 1, mem: tbuf.Bytes()[k*region : (k+1)*region]}
		binary.BigEndian.PutUint64(tg.mem, uint64(k))
		copy(tg.mem[8:dcScaleMsg], "the target's header")
		tg.dct, err = c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCT, PD: r.tpd, SendCQ: tcq, RecvCQ: tcq, SRQ: srq, DCAccessKey: tg.key})
		keep(tg.dct, err, fmt.Sprintf("create DCT %d", k))
		modifyQP(t, tg.dct, mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1, Access: dcTargetAccess},
			mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort|mlx5.QPAttrAccessFlags)
		modifyQP(t, tg.dct, mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path, MinRNRTimer: 12},
			mlx5.QPAttrState|mlx5.QPAttrAV|mlx5.QPAttrPathMTU|mlx5.QPAttrMinRNRTimer)
		if tg.mr, err = r.tpd.RegMR(tg.mem, dcTargetAccess); err != nil {
			t.Fatalf("target %d: reg mr: %v", k, err)
		}
		tg.addr = tg.mr.Addr()
		tg.state.Store(targetState(0, false, tg.mr.RKey()))
		r.targets = append(r.targets, tg)
	}

	// The initiator.
	pd, err := c.AllocPD()
	keep(pd, err, "alloc pd")
	ah, err := pd.CreateAH(path)
	keep(ah, err, "create ah")
	local := 2 * dcScaleWindow * dcScaleMsg
	lbuf, err := mlx5.AllocBuffer(load.DCIs * local)
	keep(lbuf, err, "alloc initiator memory")
	lmr, err := pd.RegMR(lbuf.Bytes(), mlx5.AccessLocalWrite)
	keep(lmr, err, "reg initiator mr")
	for i := range load.DCIs {
		cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 512})
		keep(cq, err, fmt.Sprintf("create cq %d", i))
		qp, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCI, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 128,
			SendOps:    mlx5.Opcodes(mlx5.OpRDMAWrite, mlx5.OpRDMARead),
			DCIStreams: &mlx5.DCIStreams{LogConcurrent: load.LogStreams, LogErrored: logErrored}})
		keep(qp, err, fmt.Sprintf("create DCI %d", i))
		modifyQP(t, qp, mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1}, mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort)
		modifyQP(t, qp, mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path}, mlx5.QPAttrState|mlx5.QPAttrPathMTU|mlx5.QPAttrAV)
		modifyQP(t, qp, mlx5.QPAttr{State: mlx5.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			mlx5.QPAttrState|mlx5.QPAttrTimeout|mlx5.QPAttrRetryCnt|mlx5.QPAttrRNRRetry|mlx5.QPAttrSQPSN|mlx5.QPAttrMaxQPRdAtomic)
		mem := lbuf.Bytes()[i*local : (i+1)*local]
		w := &dcWorker{rig: r, i: i, qp: qp, cq: cq, ah: ah, lkey: lmr.LKey(), mem: mem, addr: lmr.Addr() + uint64(i*local),
			streams: make([]dcStream, 1<<load.LogStreams), perStream: make([]int, 1<<load.LogStreams), knownDown: make([]uint32, load.DCTs),
			done: make([]uint64, dcScaleWindow), rng: rand.New(rand.NewPCG(load.Seed, uint64(i)))}
		w.table = make([]dcPosting, 1<<bitsFor(4*qp.Caps().MaxSendWR))
		r.workers = append(r.workers, w)
	}
	return r
}

// bitsFor is the bits of the smallest power of two not below n.
func bitsFor(n int) int {
	b := 0
	for 1<<b < n {
		b++
	}
	return b
}

// chaos revokes a random target's MR at random moments while the run is
// making work (until stop), registers it again under a new rkey after a
// while, and returns how many times it did.
func (r *dcScaleRig) chaos(deadline time.Time, stop *atomic.Bool, seed uint64) (int, error) {
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	n := 0
	for !stop.Load() && r.making(deadline) {
		time.Sleep(time.Duration(1+rng.IntN(5)) * time.Millisecond)
		tg := r.targets[rng.IntN(len(r.targets))]
		gen, _, rkey := splitState(tg.state.Load())
		tg.state.Store(targetState(gen, true, rkey)) // before the rkey dies
		if err := tg.mr.Close(); err != nil {
			return n, fmt.Errorf("revoke a target's MR: %w", err)
		}
		tg.mr = nil
		n++
		time.Sleep(time.Duration(2+rng.IntN(10)) * time.Millisecond)
		mr, err := r.tpd.RegMR(tg.mem, dcTargetAccess)
		if err != nil {
			return n, fmt.Errorf("register a target's MR again: %w", err)
		}
		tg.mr = mr
		tg.state.Store(targetState(gen+1, false, mr.RKey())) // once it works
	}
	return n, nil
}

// dcWork is a work item: a WRITE of its record to its target, or a READ
// of the target's header.
type dcWork struct {
	seq  uint64
	dct  int
	read bool
}

// dcPosting is a work request posted for a work item: with what rkey
// generation of its target, signaled or not; live until accounted for.
type dcPosting struct {
	wrID     uint64
	w        dcWork
	gen      uint32
	stream   uint16
	signaled bool
	live     bool
}

// dcStream is what a worker keeps of one stream: its work requests not
// yet accounted for (wr_ids, in post order), whether it is in error, and
// the work to post again once it is reset.
type dcStream struct {
	fifo    []uint64
	errored bool
	failed  []dcWork
}

// dcWorker posts and polls one DCI.
type dcWorker struct {
	rig     *dcScaleRig
	i       int
	qp      *mlx5.QP
	cq      *mlx5.CQ
	ah      *mlx5.AH
	lkey    uint32
	mem     []byte // records to write, then places READs land on
	addr    uint64
	streams []dcStream
	table   []dcPosting // by wr_id
	pending []dcWork
	// knownDown[k] is 1 + the rkey generation of target k that failed a
	// work request: its work waits for the next generation.
	knownDown []uint32
	// done[seq % dcScaleWindow] is 1 + the last seq done there; low is the
	// oldest work item not done, next the next to make.
	done      []uint64
	low, next uint64
	posts     uint64 // wr_ids given
	rng       *rand.Rand
	perStream []int // build's, per stream

	posted, unsignaled, errors, flushes, resets int
	// outOfOrder counts completions of a wr_id below the highest
	// completed (wr_ids grow in posting order); last is that highest.
	outOfOrder int
	last       uint64
}

// record is the local place of work item seq: a WRITE's record, or where
// a READ lands.
func (w *dcWorker) record(seq uint64, read bool) (off int) {
	off = int(seq%dcScaleWindow) * dcScaleMsg
	if read {
		off += dcScaleWindow * dcScaleMsg
	}
	return off
}

// place is where work item seq of the worker's DCI writes in a target.
func (w *dcWorker) place(seq uint64) int {
	return dcScaleMsg + (w.i*dcScaleWindow+int(seq%dcScaleWindow))*dcScaleMsg
}

// newWork makes the next work item.
func (w *dcWorker) newWork() dcWork {
	it := dcWork{seq: w.next, dct: w.rng.IntN(len(w.rig.targets)), read: w.rng.IntN(4) == 0}
	w.next++
	rec := w.mem[w.record(it.seq, it.read):][:dcScaleMsg]
	if it.read {
		clear(rec)
	} else {
		binary.BigEndian.PutUint64(rec, it.seq)
		binary.BigEndian.PutUint32(rec[8:], uint32(w.i))
		binary.BigEndian.PutUint32(rec[12:], uint32(it.dct))
		copy(rec[16:], "initiator record")
	}
	return it
}

// run posts and polls while the run is making work (until stop), then
// until all work is done.
func (w *dcWorker) run(deadline time.Time, stop *atomic.Bool) error {
	const batch = 32
	wrs := make([]mlx5.SendWR, 0, batch)
	posts := make([]dcPosting, 0, batch)
	wc := make([]mlx5.Completion, 64)
	var drainEnd time.Time
	for {
		if stop.Load() && drainEnd.IsZero() {
			return nil // another goroutine failed
		}
		making := w.rig.making(deadline)
		if !making && drainEnd.IsZero() {
			drainEnd = time.Now().Add(dcScaleDrain)
		}
		if !making && w.low == w.next && len(w.pending) == 0 {
			return w.finish(wc)
		}
		if !drainEnd.IsZero() && time.Now().After(drainEnd) {
			return fmt.Errorf("DCI %d: %d work items not done %v after the last was made (%d waiting, streams %+v)", w.i, w.next-w.low, dcScaleDrain, len(w.pending), w.streams)
		}
		for making && len(w.pending) < batch && w.next-w.low < dcScaleWindow {
			w.pending = append(w.pending, w.newWork())
		}
		wrs, posts = w.build(wrs[:0], posts[:0], batch)
		if len(wrs) > 0 {
			err := w.qp.PostSendList(wrs)
			switch {
			case errors.Is(err, mlx5.ErrQueueFull):
				w.pending = append(w.pending, w.unbuild(posts)...)
			case err != nil:
				return fmt.Errorf("DCI %d: post %d work requests: %w", w.i, len(wrs), err)
			default:
				if err := w.commit(posts); err != nil {
					return err
				}
			}
		}
		n, err := w.cq.Poll(wc)
		if err != nil {
			return fmt.Errorf("DCI %d: poll: %w", w.i, err)
		}
		for k := range n {
			if err := w.complete(&wc[k]); err != nil {
				return err
			}
		}
		if err := w.resetStreams(); err != nil {
			return err
		}
		if n == 0 && len(wrs) == 0 {
			time.Sleep(20 * time.Microsecond)
		} else {
			runtime.Gosched() // the device's goroutine and the failing target's run too
		}
	}
}

// finish checks, once every work item is done, that no work request is
// still outstanding and that no completion comes after.
func (w *dcWorker) finish(wc []mlx5.Completion) error {
	for s := range w.streams {
		if n := len(w.streams[s].fifo); n != 0 {
			return fmt.Errorf("DCI %d stream %d: %d work requests outstanding after every work item was done", w.i, s, n)
		}
	}
	for end := time.Now().Add(time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Microsecond) {
		n, err := w.cq.Poll(wc)
		if err != nil {
			return fmt.Errorf("DCI %d: poll: %w", w.i, err)
		}
		if n != 0 {
			return fmt.Errorf("DCI %d: a completion after every work request was accounted for: %+v", w.i, wc[0])
		}
	}
	return nil
}

// build takes up to max work items that may go now (their stream not in
// error, their target not known to be down) from the pending ones and
// makes their work requests: the last of each stream signaled, and one in
// four of the others.
func (w *dcWorker) build(wrs []mlx5.SendWR, posts []dcPosting, max int) ([]mlx5.SendWR, []dcPosting) {
	nStreams := len(w.streams)
	keep := w.pending[:0]
	for _, it := range w.pending {
		s := uint16(it.dct % nStreams)
		tg := w.rig.targets[it.dct]
		gen, _, rkey := splitState(tg.state.Load())
		if kd := w.knownDown[it.dct]; kd != 0 && gen == kd-1 {
			keep = append(keep, it)
			continue
		}
		w.knownDown[it.dct] = 0
		if len(wrs) == max || w.streams[s].errored {
			keep = append(keep, it)
			continue
		}
		wr := mlx5.SendWR{WrID: uint64(w.i)<<48 | (w.posts+uint64(len(wrs)))&(1<<48-1), Opcode: mlx5.OpRDMAWrite,
			AH: w.ah, RemoteQPN: tg.dct.QPN(), DCAccessKey: tg.key, StreamID: s,
			RemoteAddr: tg.addr + uint64(w.place(it.seq)), RKey: rkey,
			SGL: []mlx5.SGE{{Addr: w.addr + uint64(w.record(it.seq, it.read)), Length: dcScaleMsg, LKey: w.lkey}}}
		if it.read {
			wr.Opcode, wr.RemoteAddr = mlx5.OpRDMARead, tg.addr
		}
		wrs = append(wrs, wr)
		posts = append(posts, dcPosting{wrID: wr.WrID, w: it, gen: gen, stream: s, live: true})
	}
	w.pending = keep
	// Signal the last of each stream, so that every work request has a
	// completion at or after it on its stream, and every fourth.
	run := w.perStream
	clear(run)
	for k := len(posts) - 1; k >= 0; k-- {
		if s := posts[k].stream; run[s] == 0 {
			run[s], posts[k].signaled = 1, true
		}
	}
	clear(run)
	for k := range posts {
		s := posts[k].stream
		if run[s]++; run[s] == 4 {
			posts[k].signaled = true
		}
		if posts[k].signaled {
			wrs[k].Flags = mlx5.SendSignaled
			run[s] = 0
		}
	}
	return wrs, posts
}

// unbuild gives back the work of postings that did not go.
func (w *dcWorker) unbuild(posts []dcPosting) []dcWork {
	var ws []dcWork
	for _, p := range posts {
		ws = append(ws, p.w)
	}
	return ws
}

// commit records postings that went.
func (w *dcWorker) commit(posts []dcPosting) error {
	for _, p := range posts {
		slot := &w.table[p.wrID&uint64(len(w.table)-1)]
		if slot.live {
			return fmt.Errorf("DCI %d: wr_id %#x still outstanding when %#x was posted: more than %d work requests outstanding", w.i, slot.wrID, p.wrID, len(w.table))
		}
		*slot = p
		w.posts++
		w.posted++
		if !p.signaled {
			w.unsignaled++
		}
		st := &w.streams[p.stream]
		st.fifo = append(st.fifo, p.wrID)
	}
	return nil
}

// posting is the live posting of wrID, or nil.
func (w *dcWorker) posting(wrID uint64) *dcPosting {
	p := &w.table[wrID&uint64(len(w.table)-1)]
	if !p.live || p.wrID != wrID {
		return nil
	}
	return p
}

// complete accounts for a completion: the work requests of its stream
// before it (unsignaled: done when it is, in stream order), then its own.
func (w *dcWorker) complete(wc *mlx5.Completion) error {
	p := w.posting(wc.WrID)
	switch {
	case p == nil:
		return fmt.Errorf("DCI %d: a completion of wr_id %#x, which is not outstanding (completed twice, or never posted): %+v", w.i, wc.WrID, *wc)
	case wc.QPN != w.qp.QPN():
		return fmt.Errorf("DCI %d: a completion of wr_id %#x naming QP %#x, not the DCI's %#x", w.i, wc.WrID, wc.QPN, w.qp.QPN())
	}
	if wc.WrID < w.last {
		w.outOfOrder++
	}
	w.last = max(w.last, wc.WrID)
	st := &w.streams[p.stream]
	for len(st.fifo) > 0 && st.fifo[0] != wc.WrID {
		q := w.posting(st.fifo[0])
		switch {
		case q == nil:
			return fmt.Errorf("DCI %d stream %d: wr_id %#x is in the stream's order but not outstanding", w.i, p.stream, st.fifo[0])
		case q.signaled:
			return fmt.Errorf("DCI %d stream %d: wr_id %#x was signaled and has no completion, yet the later %#x completed: %+v", w.i, p.stream, q.wrID, wc.WrID, *wc)
		case st.errored:
			return fmt.Errorf("DCI %d stream %d: unsignaled wr_id %#x after the stream's error was not flushed, yet the later %#x completed", w.i, p.stream, q.wrID, wc.WrID)
		}
		if err := w.success(q); err != nil {
			return err
		}
		st.fifo = st.fifo[1:]
	}
	if len(st.fifo) == 0 {
		return fmt.Errorf("DCI %d stream %d: wr_id %#x completed out of its stream's order", w.i, p.stream, wc.WrID)
	}
	st.fifo = st.fifo[1:]
	switch wc.Status {
	case mlx5.WCSuccess:
		want := mlx5.WCRDMAWrite
		if p.w.read {
			want = mlx5.WCRDMARead
		}
		switch {
		case st.errored:
			return fmt.Errorf("DCI %d stream %d: wr_id %#x succeeded after the stream's error", w.i, p.stream, wc.WrID)
		case wc.Opcode != want || (p.w.read && wc.ByteLen != dcScaleMsg):
			return fmt.Errorf("DCI %d: wr_id %#x: %+v, want opcode %v", w.i, wc.WrID, *wc, want)
		}
		return w.success(p)
	case mlx5.WCRemAccessErr:
		gen, down, _ := splitState(w.rig.targets[p.w.dct].state.Load())
		switch {
		case st.errored:
			return fmt.Errorf("DCI %d stream %d: wr_id %#x: a remote access error after the stream's error, want a flush", w.i, p.stream, wc.WrID)
		case gen == p.gen && !down:
			return fmt.Errorf("DCI %d: wr_id %#x: a remote access error at target %d, whose MR was not revoked", w.i, wc.WrID, p.w.dct)
		}
		st.errored = true
		w.errors++
		w.rig.errors.Add(1)
		w.knownDown[p.w.dct] = p.gen + 1
	case mlx5.WCWRFlushErr:
		if !st.errored {
			return fmt.Errorf("DCI %d stream %d: wr_id %#x flushed on a stream not in error (the error was another stream's)", w.i, p.stream, wc.WrID)
		}
		w.flushes++
	default:
		return fmt.Errorf("DCI %d stream %d: wr_id %#x: %v (vendor syndrome %#x)", w.i, p.stream, wc.WrID, wc.Status, wc.VendorErr)
	}
	st.failed = append(st.failed, p.w)
	p.live = false
	return nil
}

// success accounts for p's work item as done, comparing its data.
func (w *dcWorker) success(p *dcPosting) error {
	p.live = false
	it := p.w
	tg := w.rig.targets[it.dct]
	rec := w.mem[w.record(it.seq, it.read):][:dcScaleMsg]
	if it.read {
		if !bytes.Equal(rec, tg.mem[:dcScaleMsg]) {
			return fmt.Errorf("DCI %d: work item %d read % x from target %d, whose header is % x", w.i, it.seq, rec, it.dct, tg.mem[:dcScaleMsg])
		}
	} else if got := tg.mem[w.place(it.seq):][:dcScaleMsg]; !bytes.Equal(got, rec) {
		return fmt.Errorf("DCI %d: work item %d wrote % x to target %d, which holds % x", w.i, it.seq, rec, it.dct, got)
	}
	d := &w.done[it.seq%dcScaleWindow]
	if *d == it.seq+1 {
		return fmt.Errorf("DCI %d: work item %d completed twice", w.i, it.seq)
	}
	*d = it.seq + 1
	for w.low < w.next && w.done[w.low%dcScaleWindow] == w.low+1 {
		w.low++
	}
	return nil
}

// resetStreams resets each stream in error whose work has all completed,
// after checking that the DCI is still in RTS (mlx5dv_dci_stream_id_reset(3)),
// and gives its failed work back to be posted again.
func (w *dcWorker) resetStreams() error {
	for s := range w.streams {
		st := &w.streams[s]
		if !st.errored || len(st.fifo) > 0 {
			continue
		}
		a, err := w.qp.Query(mlx5.QPAttrState)
		if err != nil {
			return fmt.Errorf("DCI %d: query: %w", w.i, err)
		}
		if a.State != mlx5.QPStateRTS {
			return fmt.Errorf("DCI %d: in %v after an error on stream %d, want RTS (one stream in error)", w.i, a.State, s)
		}
		if err := w.qp.ResetDCIStream(uint16(s)); err != nil {
			return fmt.Errorf("DCI %d: %w", w.i, err)
		}
		w.resets++
		w.rig.resets.Add(1)
		st.errored = false
		w.pending = append(st.failed, w.pending...)
		st.failed = nil
	}
	return nil
}
