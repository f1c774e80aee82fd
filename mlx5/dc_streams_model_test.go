package mlx5_test

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
)

// A DCI's streams run apart on the model (docs/MODEL.md, "DC", "Channels
// run apart"): completions of different streams come out of send queue
// order, and a stream whose target stalls holds only its own work. The
// driver frees the ring stream by stream (docs/MLX5.md, "DC"): never a
// WQE the device has not run, whatever order the completions come in.

// TestDCIStreamStallOnModel: a DCI of 4 streams on a ring of 16 work
// requests. In each round one stream's target stalls: its DCT's SRQ is
// empty, so the stream's SEND waits for RNR retries (forever), with an
// unsignaled RDMA WRITE before it and one after; meanwhile the other
// streams post batches of RDMA WRITEs to another DCT, the last of each
// batch signaled and the others not, and complete, until the ring is full
// of their done work and the stalled SEND; one round in three, one
// stream's first write uses a bad rkey: a remote access error, its later
// work flushed (signaled or not), then the stream reset. Only then does
// the target get a receive WQE. Every work request is accounted for
// exactly once, with its own status (by its completion, or, unsignaled,
// by a later completion of its stream), every write's data is at its
// target, no completion comes for work that is not outstanding, and the
// model never sees a WQE changed before it ran (by default it reads a
// WQE when it runs it: docs/MODEL.md). In order and under several seeds
// of the model's interleaving (model.Options.DCIStreamOrder), and with a
// model that copies each WQE when it fetches it (DCIReadAtFetch), where
// a too-early free would show as a wrong wr_id instead.
func TestDCIStreamStallOnModel(t *testing.T) {
	for _, o := range []struct {
		name string
		opt  model.Options
	}{
		{"in order", model.Options{}},
		{"seed1", model.Options{DCIStreamOrder: model.DCIStreamOrder{Policy: model.DCIStreamsSeeded, Seed: 1}}},
		{"seed2", model.Options{DCIStreamOrder: model.DCIStreamOrder{Policy: model.DCIStreamsSeeded, Seed: 2}}},
		{"seed3", model.Options{DCIStreamOrder: model.DCIStreamOrder{Policy: model.DCIStreamsSeeded, Seed: 3}}},
		{"seed1, read at fetch", model.Options{DCIStreamOrder: model.DCIStreamOrder{Policy: model.DCIStreamsSeeded, Seed: 1}, DCIReadAtFetch: true}},
	} {
		t.Run(o.name, func(t *testing.T) {
			st := dciStall(t, o.opt, 9)
			t.Logf("%+v", st)
			if st.aheadOfStall == 0 || st.outOfOrder == 0 || st.unsignaled == 0 || st.errors == 0 || st.flushes == 0 || st.laps < 4 {
				t.Errorf("%+v: want completions ahead of a stalled stream's, unsignaled work, errors and flushes, and several laps of the ring", st)
			}
		})
	}
}

// stallStats is what dciStall did.
type stallStats struct {
	posted, unsignaled, errors, flushes int
	// aheadOfStall counts completions that came while a stalled stream's
	// SEND, earlier in the send queue, had not completed; outOfOrder
	// completions that came after one of a later work request.
	aheadOfStall, outOfOrder int
	// laps is how many times the ring was posted over.
	laps int
}

// stallWR is a posted work request as the test expects it to complete.
type stallWR struct {
	id       uint64
	stream   uint16
	signaled bool
	bad      bool // a bad rkey: a remote access error
	send     bool // the SEND to the stalling target
}

// stallStream is one stream's outstanding work, in order, and its state.
type stallStream struct {
	fifo    []*stallWR
	errored bool
}

// Where the rig's buffer holds what: each work request's 8-byte record
// (its wr_id) at its wr_id's place, the targets' copies, the SEND's
// message and the stalling target's receive buffers.
const (
	stallLocal = 0x0000
	stallPlace = 0x4000
	stallMsg   = 0x6000
	stallRecv  = 0x8000
	stallSlots = 0x200
)

func dciStall(t *testing.T, opt model.Options, rounds int) stallStats {
	r := newDCRig(t, "cx7", opt)
	const key, slowKey = 0x1234, 0x5678
	fast := r.dct(t, key, mlx5.AccessRemoteWrite)
	// The stalling target: a DCT on an SRQ of its own, empty but for one
	// receive WQE a round, posted once the ring is full.
	slowSRQ, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slowSRQ.Close() })
	slow := dctOn(t, r, r.cq, slowSRQ, slowKey)
	const nStreams = 4
	// SEND and RDMA WRITE only: WQEs of 128 bytes, a ring of 32 WQEBBs
	// (mlx5_calc_sq_size), 16 of these work requests of 2 WQEBBs each.
	dci := r.dci(t, mlx5.QPOptions{MaxSendWR: 16, SendOps: mlx5.Opcodes(mlx5.OpSend, mlx5.OpRDMAWrite),
		DCIStreams: &mlx5.DCIStreams{LogConcurrent: 2, LogErrored: 2}})

	buf := r.buf.Bytes()
	var (
		st      stallStats
		streams [nStreams]stallStream
		live    = map[uint64]*stallWR{}
		nextID  = uint64(1)
		wc      = make([]mlx5.Completion, 32)
		recvs   = 0 // receive completions at the stalling target
		stalled *stallWR
		lastID  uint64 // the latest wr_id (in send queue order) completed
	)
	wr := func(w *stallWR) mlx5.SendWR {
		s := mlx5.SendWR{WrID: w.id, Opcode: mlx5.OpRDMAWrite, StreamID: w.stream, AH: r.ah, RemoteQPN: fast.QPN(), DCAccessKey: key,
			RemoteAddr: r.addr(stallPlace + 8*(w.id%stallSlots)), RKey: r.mr.RKey(),
			SGL: []mlx5.SGE{{Addr: r.addr(stallLocal + 8*(w.id%stallSlots)), Length: 8, LKey: r.mr.LKey()}}}
		binary.BigEndian.PutUint64(buf[stallLocal+8*(w.id%stallSlots):], w.id)
		if w.signaled {
			s.Flags = mlx5.SendSignaled
		}
		if w.bad {
			s.RKey ^= 0xff
		}
		if w.send {
			s.Opcode, s.RemoteQPN, s.DCAccessKey = mlx5.OpSend, slow.QPN(), slowKey
			s.RemoteAddr, s.RKey, s.SGL = 0, 0, []mlx5.SGE{{Addr: r.addr(stallMsg), Length: 64, LKey: r.mr.LKey()}}
		}
		return s
	}
	// postList posts ws in order, all or none; false when the ring is
	// full.
	postList := func(ws ...*stallWR) bool {
		t.Helper()
		list := make([]mlx5.SendWR, len(ws))
		for i, w := range ws {
			list[i] = wr(w)
		}
		err := dci.PostSendList(list)
		if errors.Is(err, mlx5.ErrQueueFull) {
			return false
		}
		if err != nil {
			t.Fatalf("post %d work requests: %v", len(ws), err)
		}
		for _, w := range ws {
			live[w.id] = w
			streams[w.stream].fifo = append(streams[w.stream].fifo, w)
			st.posted++
			if !w.signaled {
				st.unsignaled++
			}
		}
		return true
	}
	newWR := func(s uint16, signaled bool) *stallWR {
		w := &stallWR{id: nextID, stream: s, signaled: signaled}
		nextID++
		return w
	}
	// done accounts for w's success: its record is at its target.
	done := func(w *stallWR) {
		t.Helper()
		delete(live, w.id)
		if w.send {
			return
		}
		if got := binary.BigEndian.Uint64(buf[stallPlace+8*(w.id%stallSlots):]); got != w.id {
			t.Fatalf("wr_id %d completed, but its target holds %d", w.id, got)
		}
	}
	// complete accounts for one completion of the DCI: first its stream's
	// unsignaled work before it (done, in the stream's order), then itself.
	complete := func(c *mlx5.Completion) {
		t.Helper()
		if c.QPN == slow.QPN() {
			if c.Status != mlx5.WCSuccess || c.Opcode != mlx5.WCRecv || c.ByteLen != 64 || c.SrcQP != dci.QPN() {
				t.Fatalf("the stalling target's receive: %+v", *c)
			}
			recvs++
			return
		}
		w := live[c.WrID]
		switch {
		case c.QPN != dci.QPN():
			t.Fatalf("a completion of QP %#x: %+v", c.QPN, *c)
		case w == nil:
			t.Fatalf("a completion of wr_id %d, which is not outstanding (completed twice, or never posted): %+v", c.WrID, *c)
		}
		if stalled != nil && w != stalled && live[stalled.id] != nil {
			st.aheadOfStall++
		}
		if w.id < lastID {
			st.outOfOrder++
		}
		lastID = max(lastID, w.id)
		s := &streams[w.stream]
		for len(s.fifo) > 0 && s.fifo[0] != w {
			e := s.fifo[0]
			switch {
			case e.signaled:
				t.Fatalf("stream %d: wr_id %d was signaled and has no completion, yet the later %d completed: %+v", w.stream, e.id, w.id, *c)
			case s.errored:
				t.Fatalf("stream %d: unsignaled wr_id %d after the stream's error was not flushed, yet the later %d completed", w.stream, e.id, w.id)
			}
			done(e)
			s.fifo = s.fifo[1:]
		}
		if len(s.fifo) == 0 {
			t.Fatalf("stream %d: wr_id %d completed out of its stream's order", w.stream, w.id)
		}
		s.fifo = s.fifo[1:]
		want, op := mlx5.WCSuccess, mlx5.WCRDMAWrite
		switch {
		case s.errored:
			want = mlx5.WCWRFlushErr
			st.flushes++
		case w.bad:
			want = mlx5.WCRemAccessErr
			s.errored = true
			st.errors++
		case w.send:
			op = mlx5.WCSend
		}
		if c.Status != want || (want == mlx5.WCSuccess && c.Opcode != op) {
			t.Fatalf("stream %d: wr_id %d: %v, opcode %v; want %v, %v", w.stream, w.id, c.Status, c.Opcode, want, op)
		}
		if want == mlx5.WCSuccess {
			done(w)
		} else {
			delete(live, w.id)
		}
	}
	// poll takes the completions there are; it fails the test on a
	// model fault (a WQE changed before it ran, a send counter past the
	// ring).
	poll := func() int {
		t.Helper()
		n, err := r.cq.Poll(wc)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		for i := range n {
			complete(&wc[i])
		}
		if f := r.dev.Faults(); len(f) > 0 {
			t.Fatalf("the model saw the driver's ring go wrong: %q", f)
		}
		return n
	}
	// resetStreams resets each stream in error whose work has all
	// completed, the DCI found in RTS (mlx5dv_dci_stream_id_reset(3)).
	resetStreams := func() {
		t.Helper()
		for s := range streams {
			if !streams[s].errored || len(streams[s].fifo) > 0 {
				continue
			}
			a, err := dci.Query(mlx5.QPAttrState)
			if err != nil || a.State != mlx5.QPStateRTS {
				t.Fatalf("after the error on stream %d: %v, %v; want RTS", s, a.State, err)
			}
			if err := dci.ResetDCIStream(uint16(s)); err != nil {
				t.Fatal(err)
			}
			streams[s].errored = false
		}
	}
	// others are the streams that do not stall this round.
	others := func(stall uint16) []uint16 {
		var o []uint16
		for s := range uint16(nStreams) {
			if s != stall && !streams[s].errored {
				o = append(o, s)
			}
		}
		return o
	}
	// tryPost posts the work requests mk makes; false, their wr_ids given
	// back, when the ring has no room for them.
	tryPost := func(mk func() []*stallWR) bool {
		t.Helper()
		save := nextID
		if postList(mk()...) {
			return true
		}
		nextID = save
		return false
	}
	for round := range rounds {
		stall, posted := uint16(round%nStreams), st.posted
		if streams[stall].errored {
			t.Fatalf("round %d: stream %d still in error", round, stall)
		}
		// The stalled stream: an unsignaled WRITE (it runs; its WQEBBs are
		// freed only by the stream's next completion), the SEND that
		// waits, an unsignaled WRITE behind it and a signaled one.
		deadline := time.Now().Add(mustCome)
		for !tryPost(func() []*stallWR {
			before := newWR(stall, false)
			stalled = newWR(stall, true)
			stalled.send = true
			return []*stallWR{before, stalled, newWR(stall, false), newWR(stall, true)}
		}) {
			poll()
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no room for the stalling stream's work", round)
			}
		}
		// The others fill the ring and complete, the stalled SEND
		// outstanding: batches of two work requests on each of two streams,
		// interleaved, each stream's second signaled (one round in three,
		// the first has a bad rkey); when that does not fit, two on one
		// stream, then one.
		for k := 0; ; {
			resetStreams()
			full := false
			if o := others(stall); len(o) > 0 {
				s, s2 := o[k%len(o)], o[(k+1)%len(o)]
				if tryPost(func() []*stallWR {
					b := []*stallWR{newWR(s, false), newWR(s2, false), newWR(s, true), newWR(s2, true)}
					b[0].bad = round%3 == 1 && k == 0
					return b
				}) || tryPost(func() []*stallWR { return []*stallWR{newWR(s, false), newWR(s, true)} }) ||
					tryPost(func() []*stallWR { return []*stallWR{newWR(s, true)} }) {
					k++
					poll()
					continue
				}
				full = true
			}
			poll()
			if full && len(live) == len(streams[stall].fifo) {
				break // the ring holds done work and the stalled stream's
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: stream %d stalls; the others' work did not all complete within 10 s: %d outstanding (%d on the stalled stream); faults %q",
					round, stall, len(live), len(streams[stall].fifo), r.dev.Faults())
			}
			time.Sleep(20 * time.Microsecond)
		}
		if n := st.posted - posted; n != 16 {
			t.Errorf("round %d: %d work requests went into the ring of 16 before it was full", round, n)
		}
		if live[stalled.id] == nil {
			t.Fatalf("round %d: the stalled SEND completed before its target had a receive WQE", round)
		}
		// The target comes back: the stream runs, in order.
		if err := slowSRQ.PostRecv(uint64(round), []mlx5.SGE{{Addr: r.addr(stallRecv + 256*uint64(round%16)), Length: 64, LKey: r.mr.LKey()}}); err != nil {
			t.Fatal(err)
		}
		for len(streams[stall].fifo) > 0 || recvs <= round {
			if poll() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("round %d: the stalled stream's work did not complete after its target got a receive WQE: %d outstanding; faults %q",
						round, len(streams[stall].fifo), r.dev.Faults())
				}
				time.Sleep(20 * time.Microsecond)
			}
		}
		resetStreams()
	}
	st.laps = st.posted / 16 // the ring holds 16 work requests
	// Everything posted is accounted for; nothing else comes.
	for end := time.Now().Add(mustCome); len(live) > 0; time.Sleep(20 * time.Microsecond) {
		if poll() == 0 && time.Now().After(end) {
			t.Fatalf("%d work requests outstanding at the end", len(live))
		}
	}
	time.Sleep(time.Millisecond)
	if n := poll(); n != 0 {
		t.Fatalf("%d completions after every work request was accounted for", n)
	}
	return st
}
