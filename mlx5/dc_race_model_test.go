package mlx5_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
)

// TestDCIStreamsPosterPoller runs the documented concurrency of a DCI
// with streams, one poster goroutine and one poller goroutine, on the
// model, for the race detector (go test -race): the poster posts RDMA
// WRITEs over 4 streams of a 16-request ring as fast as the ring frees,
// a third of them unsignaled; one round in four, the round's first write
// on one stream has a bad rkey (a stream error: its later work flushed),
// and the poster, once the poller has seen all of that stream's work
// complete, checks the DCI is in RTS and resets the stream
// (ResetDCIStream) while the poller goes on polling. In send queue order
// and under the model's seeded interleaving of streams (completions out
// of order). Every signaled work request is reported exactly once with
// its status, no unsignaled one is reported, and the race detector sees
// nothing (the poller's ring walk reads only what the poster published).
func TestDCIStreamsPosterPoller(t *testing.T) {
	for _, o := range []struct {
		name string
		opt  model.Options
	}{
		{"in order", model.Options{}},
		{"seed1", model.Options{DCIStreamOrder: model.DCIStreamOrder{Policy: model.DCIStreamsSeeded, Seed: 1}}},
	} {
		t.Run(o.name, func(t *testing.T) { dciPosterPoller(t, o.opt) })
	}
}

func dciPosterPoller(t *testing.T, opt model.Options) {
	r := newDCRig(t, "cx7", opt)
	const key = 0x5eed
	dct := r.dct(t, key, mlx5.AccessRemoteWrite)
	const nStreams, rounds, perRound = 4, 100, 64
	dci := r.dci(t, mlx5.QPOptions{MaxSendWR: 256, SendOps: mlx5.Opcodes(mlx5.OpRDMAWrite),
		DCIStreams: &mlx5.DCIStreams{LogConcurrent: 2, LogErrored: 2}})

	const total = rounds * perRound
	// Not statuses: what the poster expects of a work request beyond one
	// status. The round qpErrRound puts every stream in error: the work
	// requests with a bad rkey fail or are flushed, the others complete
	// or are flushed (whichever the streams' order makes them).
	const unsignaled, errOrFlush, doneOrFlush = mlx5.WCStatus(0xff), mlx5.WCStatus(0xfe), mlx5.WCStatus(0xfd)
	const qpErrRound = 21
	// want[seq] is the status the poster expects of work request seq, or
	// unsignaled for one that succeeds unsignaled (no completion); the
	// poster's until both goroutines are done.
	want := make([]mlx5.WCStatus, total)
	// got[seq] counts the completions of seq, status[seq] is the last
	// one's status: the poller's until both are done.
	got := make([]int, total)
	status := make([]mlx5.WCStatus, total)
	// failed[s] counts the poller's error completions on stream s (the
	// wr_id's low bits): the poster waits on it before a reset.
	var failed [nStreams]atomic.Int64
	// committed counts the signaled work requests of committed batches,
	// seen the completions the poller has taken.
	var committed, seen atomic.Int64
	var stop atomic.Bool
	deadline := time.Now().Add(60 * time.Second)
	waitSeen := func(n int64) error {
		for seen.Load() < n {
			if time.Now().After(deadline) {
				return errors.New("completions missing at the deadline")
			}
			runtime.Gosched()
		}
		return nil
	}

	var wg sync.WaitGroup
	wg.Add(2)
	var posterErr, pollerErr error
	go func() { // the poster
		defer wg.Done()
		defer stop.Store(true)
		var wantFailed [nStreams]int64
		wrs := make([]mlx5.SendWR, perRound)
		for round := range rounds {
			bad := -1
			if round%4 == 3 {
				bad = round / 4 % nStreams
			}
			qpErr := round == qpErrRound
			for i := range perRound {
				seq := round*perRound + i
				s := i % nStreams
				wrs[i] = mlx5.SendWR{WrID: uint64(seq)<<4 | uint64(s), Opcode: mlx5.OpRDMAWrite, StreamID: uint16(s),
					AH: r.ah, RemoteQPN: dct.QPN(), DCAccessKey: key,
					RemoteAddr: r.addr(0x4000 + 8*uint64(seq%256)), RKey: r.mr.RKey(),
					SGL: []mlx5.SGE{{Addr: r.addr(8 * uint64(seq%256)), Length: 8, LKey: r.mr.LKey()}}}
				want[seq] = mlx5.WCSuccess
				switch {
				case qpErr && i < nStreams:
					wrs[i].RKey ^= 0xff
					want[seq] = errOrFlush
				case qpErr:
					want[seq] = doneOrFlush
				case s == bad && i == bad:
					wrs[i].RKey ^= 0xff
					want[seq] = mlx5.WCRemAccessErr
				case s == bad:
					want[seq] = mlx5.WCWRFlushErr
				case i%3 == 1 && perRound-i > nStreams:
					// Unsignaled: a later one of its stream is signaled,
					// the last of each stream in a round is.
					want[seq] = unsignaled
				}
				if want[seq] != unsignaled {
					wrs[i].Flags = mlx5.SendSignaled
				}
				if s == bad {
					wantFailed[s]++
				}
			}
			signaled := func(batch []mlx5.SendWR) (n int64) {
				for j := range batch {
					if batch[j].Flags&mlx5.SendSignaled != 0 {
						n++
					}
				}
				return n
			}
			// The round's first batch is built while the poller takes
			// the completions of all the work before it: its first work
			// request is written, then the poller's ring walk catches
			// up with the producer counter, then the batch is committed.
			first := wrs[:8]
			if err := waitSeen(committed.Load() - nStreams); err != nil {
				posterErr = err
				return
			}
			b := dci.Begin()
			b.Add(&first[0])
			if err := waitSeen(committed.Load()); err != nil {
				b.Abort()
				posterErr = err
				return
			}
			for j := 1; j < len(first); j++ {
				b.Add(&first[j])
			}
			if err := b.Commit(); err != nil {
				posterErr = err
				return
			}
			committed.Add(signaled(first))
			// Then batches of 1 to 8 (PostSend for 1, Begin, Add and
			// Commit for more), each posted again while the ring is
			// full.
			for i, n := len(first), 1; i < perRound; i, n = i+n, n%8+1 {
				batch := wrs[i:min(i+n, perRound)]
				for {
					var err error
					if len(batch) == 1 {
						err = dci.PostSend(&batch[0])
					} else {
						b := dci.Begin()
						for j := range batch {
							b.Add(&batch[j])
						}
						err = b.Commit()
					}
					if err == nil {
						break
					}
					if !errors.Is(err, mlx5.ErrQueueFull) || time.Now().After(deadline) {
						posterErr = err
						return
					}
					runtime.Gosched()
				}
				committed.Add(signaled(batch))
			}
			if qpErr {
				// Every stream in error: the DCI in ERR, everything
				// flushed; once all completed, RESET and RTS again.
				if err := waitSeen(committed.Load()); err != nil {
					posterErr = err
					return
				}
				if a, err := dci.Query(mlx5.QPAttrState); err != nil || a.State != mlx5.QPStateErr {
					posterErr = errors.Join(errors.New("with every stream in error the DCI is not in ERR: "+a.State.String()), err)
					return
				}
				if posterErr = dciRecover(dci, r.path); posterErr != nil {
					return
				}
				continue
			}
			if bad < 0 {
				continue
			}
			// The man page's rule: the stream's work all completed (the
			// rest flushed), the QP still in RTS, then the reset.
			for failed[bad].Load() < wantFailed[bad] {
				if time.Now().After(deadline) {
					posterErr = errors.New("the errored stream's work never all completed")
					return
				}
				runtime.Gosched()
			}
			if a, err := dci.Query(mlx5.QPAttrState); err != nil || a.State != mlx5.QPStateRTS {
				posterErr = errors.Join(errors.New("after a stream error the DCI is not in RTS: "+a.State.String()), err)
				return
			}
			if err := dci.ResetDCIStream(uint16(bad)); err != nil {
				posterErr = err
				return
			}
		}
	}()
	go func() { // the poller
		defer wg.Done()
		wc := make([]mlx5.Completion, 8)
		for !stop.Load() || seen.Load() < committed.Load() {
			n, err := r.cq.Poll(wc)
			if err != nil {
				pollerErr = err
				return
			}
			for _, c := range wc[:n] {
				seq, s := int(c.WrID>>4), int(c.WrID&0xf)
				if c.QPN != dci.QPN() || seq >= total || s >= nStreams {
					pollerErr = errors.New("a completion of no work request posted")
					return
				}
				got[seq]++
				status[seq] = c.Status
				if round := seq / perRound; c.Status != mlx5.WCSuccess && round%4 == 3 && round != qpErrRound {
					failed[s].Add(1)
				}
			}
			seen.Add(int64(n))
			if n == 0 {
				if time.Now().After(deadline) {
					pollerErr = errors.New("completions missing at the deadline")
					return
				}
				runtime.Gosched()
			}
		}
	}()
	wg.Wait()
	if posterErr != nil || pollerErr != nil {
		t.Fatalf("poster: %v; poller: %v", posterErr, pollerErr)
	}
	for seq := range total {
		switch w := want[seq]; {
		case w == unsignaled && got[seq] != 0:
			t.Errorf("unsignaled work request %d reported %d times (%v)", seq, got[seq], status[seq])
		case w == errOrFlush || w == doneOrFlush:
			ok := mlx5.WCSuccess
			if w == errOrFlush {
				ok = mlx5.WCRemAccessErr
			}
			if st := status[seq]; got[seq] != 1 || (st != ok && st != mlx5.WCWRFlushErr) {
				t.Errorf("work request %d of the round that takes the DCI to ERR: %d completions, the last %v; want one, %v or flushed", seq, got[seq], st, ok)
			}
		case w != unsignaled && (got[seq] != 1 || status[seq] != w):
			t.Errorf("work request %d: %d completions, the last %v; want one, %v", seq, got[seq], status[seq], w)
		}
	}
}

// dciRecover takes a DCI in ERR through RESET back to RTS (dcRig.toRTS,
// returning the error rather than failing the test: for a goroutine).
func dciRecover(q *mlx5.QP, path mlx5.AddressPath) error {
	for _, m := range []struct {
		a    mlx5.QPAttr
		mask mlx5.QPAttrMask
	}{
		{mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState},
		{mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1}, mlx5.QPAttrState | mlx5.QPAttrPKeyIndex | mlx5.QPAttrPort},
		{mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path}, mlx5.QPAttrState | mlx5.QPAttrPathMTU | mlx5.QPAttrAV},
		{mlx5.QPAttr{State: mlx5.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			mlx5.QPAttrState | mlx5.QPAttrTimeout | mlx5.QPAttrRetryCnt | mlx5.QPAttrRNRRetry | mlx5.QPAttrSQPSN | mlx5.QPAttrMaxQPRdAtomic},
	} {
		if err := q.Modify(&m.a, m.mask); err != nil {
			return err
		}
	}
	return nil
}
