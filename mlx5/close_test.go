package mlx5_test

import (
	"bytes"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
)

// Issue 23 item 1: Context.Close while other goroutines close the
// context's children. Close used to sort its children by the map
// forget deletes from, after releasing the lock: "fatal error:
// concurrent map read and map write". Each child is closed once (its
// own Close returns nil, whoever closed it first), none is left: no
// model object, no mapping.
func TestContextCloseRacesChildren(t *testing.T) {
	const mrs, qps, closers = 160, 20, 4
	for round := range 5 {
		before := mlx5.LiveBuffers()
		r := newRig(t, "cx7", model.Options{}, 1024)
		var kids []interface{ Close() error }
		for range mrs {
			mr, err := r.pd.RegMR(r.buf.Bytes()[:4096], mlx5.AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			kids = append(kids, mr)
		}
		for range qps {
			kids = append(kids, r.qp(t, mlx5.QPOptions{MaxSendWR: 8, MaxRecvWR: 8}, true))
		}
		kids = append(kids, r.mr)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, len(kids)+1)
		for g := range closers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := g; i < len(kids); i += closers {
					if err := kids[i].Close(); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := r.c.Close(); err != nil {
				errs <- err
			}
		}()
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
		for i, x := range kids {
			if err := x.Close(); err != nil {
				t.Errorf("round %d: child %d (%T) closed again: %v", round, i, x, err)
			}
		}
		if n := r.dev.Objects(); n != 0 {
			t.Errorf("round %d: %d model objects left", round, n)
		}
		if got := mlx5.LiveBuffers(); got != before+1 { // the rig's own buffer
			t.Errorf("round %d: %d buffer mappings left, want %d", round, got, before+1)
		}
		if t.Failed() {
			return
		}
	}
}

// within runs f in a goroutine and fails the test if it has not
// returned after d; unblock (if not nil) then lets it finish, so that the
// test ends rather than go test's timeout.
func within(t *testing.T, what string, d time.Duration, f func() error, unblock func()) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		if unblock != nil {
			unblock()
		}
		<-done
		t.Fatalf("%s did not return within %v", what, d)
		return nil
	}
}

// Issue 23 item 3: a batch begun and never committed made QP.Close and
// Context.Close wait for ever. Close returns at once; the batch ends
// with it: its work requests are never rung (the write never lands,
// nothing completes), Commit after Close is ErrClosed, and nothing
// leaks: no model object, and the work queue's mapping goes when the
// batch ends, or, for a batch nobody ends, when the QP is unreachable.
func TestCloseEndsAbandonedBatch(t *testing.T) {
	const wait = mustCome
	for _, tc := range []struct {
		name string
		// end is what the poster does after Close, with the batch;
		// nil: nothing ever (the QP is dropped).
		end func(t *testing.T, qp *mlx5.QP, b *mlx5.Batch, w *mlx5.SendWR)
		ctx bool // Context.Close rather than QP.Close
	}{
		{name: "Commit after QP.Close", end: func(t *testing.T, _ *mlx5.QP, b *mlx5.Batch, w *mlx5.SendWR) {
			if err := b.Add(w).Commit(); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
				t.Errorf("Add and Commit after Close: %v, want ErrClosed", err)
			}
		}},
		{name: "Commit after Context.Close", ctx: true, end: func(t *testing.T, _ *mlx5.QP, b *mlx5.Batch, w *mlx5.SendWR) {
			if err := b.Commit(); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
				t.Errorf("Commit after Context.Close: %v, want ErrClosed", err)
			}
		}},
		{name: "Abort after QP.Close", end: func(t *testing.T, _ *mlx5.QP, b *mlx5.Batch, _ *mlx5.SendWR) {
			b.Abort()
			if err := b.Commit(); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) {
				t.Errorf("Commit after Abort: %v, want ErrInvalid (no batch)", err)
			}
		}},
		{name: "Begin after QP.Close", end: func(t *testing.T, qp *mlx5.QP, _ *mlx5.Batch, w *mlx5.SendWR) {
			if err := qp.Begin().Add(w).Commit(); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
				t.Errorf("a new batch after Close: %v, want ErrClosed", err)
			}
			if err := qp.PostSend(w); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
				t.Errorf("PostSend after Close: %v, want ErrClosed", err)
			}
		}},
		{name: "recovered panic, then QP.Close"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := mlx5.LiveBuffers()
			r := newRig(t, "cx7", model.Options{}, 64)
			mem := r.buf.Bytes()
			for i := range 64 {
				mem[i] = 0xab
			}
			clear(mem[4096 : 4096+64])
			// A first QP takes the context's shared pieces (a BlueFlame
			// page): the one below adds only its own.
			if err := r.qp(t, mlx5.QPOptions{MaxSendWR: 8}, false).Close(); err != nil {
				t.Fatal(err)
			}
			buffers, objects := mlx5.LiveBuffers(), r.dev.Objects()
			if tc.ctx {
				buffers = base + 1 // the rig's own buffer
			}
			qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 8}, true)
			var b *mlx5.Batch
			func() {
				defer func() { recover() }()
				b = qp.Begin()
				b.Add(r.write(1, mlx5.SendSignaled, r.mr.RKey()))
				if tc.end == nil {
					panic("between Begin and Commit")
				}
			}()
			closeIt, what := qp.Close, "QP.Close with a batch open"
			if tc.ctx {
				closeIt, what = r.c.Close, "Context.Close with a batch open"
			}
			if err := within(t, what, wait, closeIt, b.Abort); err != nil {
				t.Fatal(err)
			}
			if tc.end != nil {
				tc.end(t, qp, b, r.write(2, mlx5.SendSignaled, r.mr.RKey()))
			}
			if !tc.ctx {
				if got, _ := r.poll(t, -1, 50*time.Millisecond); len(got) != 0 {
					t.Errorf("completions of a batch never committed: %+v", got)
				}
			}
			time.Sleep(20 * time.Millisecond) // what the model would have done with a doorbell
			if !bytes.Equal(mem[4096:4096+64], make([]byte, 64)) {
				t.Error("the batch's RDMA WRITE landed: its doorbell was rung")
			}
			if f := r.dev.Faults(); len(f) > 0 {
				t.Errorf("%d model faults, the first %q", len(f), f[0])
			}
			if !tc.ctx {
				if got := r.dev.Objects(); got != objects {
					t.Errorf("%d model objects, want %d", got, objects)
				}
			}
			if tc.end == nil {
				qp, b = nil, nil // the poster lets go of both
				for i := 0; i < 200 && mlx5.LiveBuffers() != buffers; i++ {
					runtime.GC()
					time.Sleep(time.Millisecond)
				}
			}
			if got := mlx5.LiveBuffers(); got != buffers {
				t.Errorf("%d buffer mappings, want %d: the work queue leaked", got, buffers)
			}
			runtime.KeepAlive(b)
		})
	}
}

// Issue 23 item 3: a poster in the middle of a batch (its Adds writing
// the work queue) while QP.Close or Context.Close runs: no fault, no
// race, Close returns, the poster's Commit gets ErrClosed once Close has
// begun, and the work queue's mapping goes when the batch ends.
func TestBatchRacesClose(t *testing.T) {
	for round := range 40 {
		base := mlx5.LiveBuffers()
		r := newRig(t, "cx7", model.Options{}, 1024)
		qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 64}, true)
		ctx := round%2 == 1
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		var bad error
		go func() { // the poster: batches of 4 until Close
			defer wg.Done()
			for j := uint64(0); ; j += 4 {
				b := qp.Begin()
				for k := range uint64(4) {
					b.Add(r.write(j+k, mlx5.SendSignaled, r.mr.RKey()))
					runtime.Gosched()
				}
				err := b.Commit()
				if errors.Is(err, mlx5.ErrClosed) {
					return
				}
				if err != nil && !errors.Is(err, mlx5.ErrQueueFull) {
					bad = err
					return
				}
			}
		}()
		go func() { // the poller
			defer wg.Done()
			wc := make([]mlx5.Completion, 16)
			for {
				select {
				case <-stop:
					return
				default:
				}
				r.cq.Poll(wc)
			}
		}()
		time.Sleep(time.Duration(round%5) * 200 * time.Microsecond)
		closeIt := qp.Close
		if ctx {
			closeIt = r.c.Close
		}
		if err := within(t, "Close with a poster in a batch", mustCome, closeIt, nil); err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		if bad != nil {
			t.Fatalf("round %d: the poster: %v", round, bad)
		}
		if f := r.dev.Faults(); len(f) > 0 {
			t.Fatalf("round %d: %d model faults, the first %q", round, len(f), f[0])
		}
		r.c.Close()
		if got := mlx5.LiveBuffers(); got != base+1 { // the rig's own buffer
			t.Fatalf("round %d: %d buffer mappings, want %d", round, got, base+1)
		}
	}
}

// Begin racing Close: a Begin that Close refuses must not look like an
// open batch to Close, which would leave the work queue's mapping to a
// batch that never was (until a GC found the QP). Right after Close and
// the poster's last Commit, every mapping of the QP is gone.
func TestBeginRacesClose(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	if err := r.qp(t, mlx5.QPOptions{MaxSendWR: 8}, false).Close(); err != nil { // the context's shared pieces
		t.Fatal(err)
	}
	for round := range 200 {
		before := mlx5.LiveBuffers()
		qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 8}, false)
		done, stop := make(chan struct{}), make(chan struct{})
		go func() { // Begins as fast as it can, refused from Close on
			defer close(done)
			for {
				qp.Begin().Commit()
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		time.Sleep(50 * time.Microsecond)
		if err := qp.Close(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		<-done
		if got := mlx5.LiveBuffers(); got != before {
			t.Fatalf("round %d: %d buffer mappings after Close, want %d", round, got, before)
		}
	}
}
