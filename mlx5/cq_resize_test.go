package mlx5_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
)

// waitCQEs waits until the CQ's ring holds n CQEs not yet polled.
func waitWaiting(t *testing.T, cq *mlx5.CQ, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); mlx5.CQWaiting(cq) < n; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(end) {
			t.Fatalf("%d CQEs waiting, want %d", mlx5.CQWaiting(cq), n)
		}
	}
}

// pollIDs polls until it has n completions, and checks that they are
// successful RDMA WRITEs with wr_ids first, first+1, and so on.
func pollIDs(t *testing.T, cq *mlx5.CQ, first uint64, n int) {
	t.Helper()
	wc := make([]mlx5.Completion, n+1)
	got := 0
	for end := time.Now().Add(10 * time.Second); got < n; {
		k, err := cq.Poll(wc[got:])
		if err != nil {
			t.Fatal(err)
		}
		got += k
		if time.Now().After(end) {
			t.Fatalf("%d of %d completions", got, n)
		}
	}
	if k, _ := cq.Poll(wc[got:]); k != 0 {
		t.Fatalf("%d completions more than the %d work requests", k, n)
	}
	for i, c := range wc[:n] {
		if c.WrID != first+uint64(i) || c.Status != mlx5.WCSuccess || c.Opcode != mlx5.WCRDMAWrite {
			t.Fatalf("completion %d: %+v, want wr_id %d", i, c, first+uint64(i))
		}
	}
}

// TestCQResize: the CQEs a CQ holds when it grows, or shrinks, are
// polled after the resize in the order the device wrote them, each once,
// and the device's CQEs after the resize follow them in the new ring.
func TestCQResize(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 7)
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 64, MaxSendSGE: 1}, true)
	post := func(first uint64, n int) {
		for i := range n {
			if err := qp.PostSend(r.write(first+uint64(i), mlx5.SendSignaled, r.mr.RKey())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r.cq.Size() != 8 {
		t.Fatalf("size %d", r.cq.Size())
	}
	post(1, 5)
	waitWaiting(t, r.cq, 5)
	if err := r.cq.Resize(100); err != nil {
		t.Fatal(err)
	}
	if r.cq.Size() != 128 || mlx5.CQWaiting(r.cq) != 5 {
		t.Fatalf("after the resize: size %d, %d CQEs waiting", r.cq.Size(), mlx5.CQWaiting(r.cq))
	}
	post(6, 60)
	waitWaiting(t, r.cq, 65)
	pollIDs(t, r.cq, 1, 65)
	// Shrink, with CQEs waiting, twice across the new ring's wrap.
	for round, first := 0, uint64(100); round < 4; round++ {
		post(first, 3)
		waitWaiting(t, r.cq, 3)
		want := []int{3, 20, 5, 64}[round]
		if err := r.cq.Resize(want); err != nil {
			t.Fatalf("resize to %d: %v", want, err)
		}
		post(first+3, 2)
		pollIDs(t, r.cq, first, 5)
		first += 5
	}
	if err := r.cq.Resize(64); err != nil { // the size it has: no command
		t.Fatal(err)
	}
	if f := r.dev.Faults(); len(f) != 0 {
		t.Fatalf("model faults: %q", f)
	}
}

// TestCQResizeRefused: a resize the CQ cannot take fails and leaves the
// CQ as it was.
func TestCQResizeRefused(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 7)
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 64, MaxSendSGE: 1}, true)
	var nilCQ *mlx5.CQ
	for _, cq := range []*mlx5.CQ{nilCQ, {}} {
		if err := cq.Resize(8); !errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("%p: %v", cq, err)
		}
		if err := cq.Moderate(1, 1); !errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("%p: %v", cq, err)
		}
	}
	for _, n := range []int{0, -1, 1 << 22} {
		if err := r.cq.Resize(n); !errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("resize to %d: %v", n, err)
		}
	}
	for i := range 5 {
		if err := qp.PostSend(r.write(uint64(i), mlx5.SendSignaled, r.mr.RKey())); err != nil {
			t.Fatal(err)
		}
	}
	waitWaiting(t, r.cq, 5)
	if err := r.cq.Resize(3); !errors.Is(err, unix.EBUSY) {
		t.Errorf("resize to 3 below 5 CQEs: %v", err)
	}
	for i := 5; i < 8; i++ {
		if err := qp.PostSend(r.write(uint64(i), mlx5.SendSignaled, r.mr.RKey())); err != nil {
			t.Fatal(err)
		}
	}
	waitWaiting(t, r.cq, 8)
	if err := r.cq.Resize(100); !errors.Is(err, unix.EBUSY) {
		t.Errorf("resize of a full ring: %v", err)
	}
	if r.cq.Size() != 8 {
		t.Errorf("size %d after refused resizes", r.cq.Size())
	}
	pollIDs(t, r.cq, 0, 8)

	d, err := r.c.CreateCQ(mlx5.CQOptions{Entries: 8, DEVX: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Resize(32); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("DEVX CQ resize: %v", err)
	}
	for _, cq := range []*mlx5.CQ{r.cq, d} {
		if err := qp.Close(); err != nil {
			t.Fatal(err)
		}
		if err := cq.Close(); err != nil {
			t.Fatal(err)
		}
		if err := cq.Resize(32); !errors.Is(err, mlx5.ErrClosed) {
			t.Errorf("resize of a closed CQ: %v", err)
		}
		if err := cq.Moderate(1, 1); !errors.Is(err, mlx5.ErrClosed) {
			t.Errorf("moderate of a closed CQ: %v", err)
		}
	}
}

// TestCQModerate: moderation within the limits reaches the CQ context,
// through the kernel's command for a verbs CQ and MODIFY_CQ for a DEVX
// one; outside them it is refused before anything is sent.
func TestCQModerate(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 7)
	d, err := r.c.CreateCQ(mlx5.CQOptions{Entries: 8, DEVX: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, cq := range []*mlx5.CQ{r.cq, d} {
		for _, m := range [][2]int{{0, 0}, {mlx5.MaxCQModerationCount, mlx5.MaxCQModerationPeriod}, {16, 8}} {
			if err := cq.Moderate(m[0], m[1]); err != nil {
				t.Fatalf("CQ %#x: moderate %v: %v", cq.CQN(), m, err)
			}
			in := make([]byte, prm.QueryCqIn.Layout().Size)
			prm.MboxIn.Opcode.Set(in, prm.MLX5_CMD_OP_QUERY_CQ)
			prm.QueryCqIn.Cqn.Set(in, uint64(cq.CQN()))
			out := make([]byte, prm.QueryCqOut.Layout().Size)
			if err := cq.DevxQuery(in, out); err != nil {
				t.Fatal(err)
			}
			cqc := prm.QueryCqOut.CqContext
			if c, p := prm.Cqc.CqMaxCount.At(cqc).Get(out), prm.Cqc.CqPeriod.At(cqc).Get(out); c != uint64(m[0]) || p != uint64(m[1]) {
				t.Errorf("CQ %#x: cq_max_count %d, cq_period %d after moderate %v", cq.CQN(), c, p, m)
			}
		}
		for _, m := range [][2]int{{-1, 0}, {0, -1}, {mlx5.MaxCQModerationCount + 1, 0}, {0, mlx5.MaxCQModerationPeriod + 1}} {
			if err := cq.Moderate(m[0], m[1]); !errors.Is(err, mlx5.ErrInvalid) {
				t.Errorf("CQ %#x: moderate %v: %v", cq.CQN(), m, err)
			}
		}
	}
}

// TestCQModerationDelaysEvents: on the model an armed CQ raises its event
// as the moderation says: with a count of 4 and no period, not for 3
// CQEs (all written, so the device has decided) but for the 4th; with a
// period of 3 ms and no count, not before 3 ms after the CQE it holds;
// without moderation at once. Each wait is bounded by mustCome.
func TestCQModerationDelaysEvents(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 7)
	var err error
	if r.cq, err = r.c.CreateCQ(mlx5.CQOptions{Entries: 64, Events: true}); err != nil {
		t.Fatal(err)
	}
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 64, MaxSendSGE: 1}, true)
	next := uint64(1)
	post := func(n int) {
		for range n {
			if err := qp.PostSend(r.write(next, mlx5.SendSignaled, r.mr.RKey())); err != nil {
				t.Fatal(err)
			}
			next++
		}
	}
	wait := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return r.cq.Wait(ctx)
	}
	drain := func(n int) {
		waitWaiting(t, r.cq, n)
		pollIDs(t, r.cq, next-uint64(n), n)
	}

	if err := r.cq.Moderate(4, 0); err != nil {
		t.Fatal(err)
	}
	arm(t, r.cq, false)
	post(3)
	waitWaiting(t, r.cq, 3)
	if err := wait(20 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("count 4, 3 CQEs: %v, want no event", err)
	}
	post(1)
	if err := wait(mustCome); err != nil {
		t.Fatalf("count 4, 4 CQEs: %v", err)
	}
	drain(4)

	const period = 3000 // µs
	if err := r.cq.Moderate(0, period); err != nil {
		t.Fatal(err)
	}
	arm(t, r.cq, false)
	start := time.Now()
	post(1)
	if err := wait(mustCome); err != nil {
		t.Fatalf("period %d µs: %v", period, err)
	}
	if d := time.Since(start); d < period*time.Microsecond {
		t.Errorf("period %d µs: the event came %v after the post", period, d)
	}
	drain(1)

	if err := r.cq.Moderate(0, 0); err != nil {
		t.Fatal(err)
	}
	arm(t, r.cq, false)
	post(1)
	if err := wait(mustCome); err != nil {
		t.Fatalf("no moderation: %v", err)
	}
	drain(1)
	if f := r.dev.Faults(); len(f) != 0 {
		t.Fatalf("model faults: %q", f)
	}
}
