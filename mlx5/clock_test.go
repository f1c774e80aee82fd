package mlx5_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"github.com/mlx5go/mlx5go/model"
)

// TestClockInfoModel reads the model's clock-info page: a snapshot taken
// now (Nsec near the wall clock), a cycle as long as CoreClockKHz says
// (Mult / 2^Shift ns), mlx5_core's 41-bit mask, and an update period
// within that range; conversions of cycles after the snapshot advance at
// the device frequency.
func TestClockInfoModel(t *testing.T) {
	for _, prof := range mlx5test.Profiles() {
		t.Run(prof, func(t *testing.T) {
			c := mlx5test.New(t, prof)
			khz := c.Caps().CoreClockKHz
			ci, err := c.ClockInfo()
			if khz == 0 {
				if !errors.Is(err, mlx5.ErrUnsupported) {
					t.Fatalf("ClockInfo without a device frequency: %v, want ErrUnsupported", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(ci.Time(ci.LastCycles)); d < 0 || d > ci.MaxUpdate {
				t.Errorf("snapshot %v old, want within [0, %v]", d, ci.MaxUpdate)
			}
			if ci.Mask != 1<<41-1 || ci.MaxUpdate <= 0 {
				t.Errorf("mask %#x, update period %v", ci.Mask, ci.MaxUpdate)
			}
			// A second of cycles later is a second later, to a
			// nanosecond per 2^Shift of rounding in Mult.
			sec := khz * 1000
			if d := ci.Duration(ci.LastCycles, ci.LastCycles+sec); d < time.Second-time.Microsecond || d > time.Second+time.Microsecond {
				t.Errorf("%d cycles at %d kHz convert to %v, want 1s", sec, khz, d)
			}
			again, err := c.ClockInfo()
			if err != nil || again != ci {
				t.Errorf("second read %+v, %v; want the same snapshot %+v", again, err, ci)
			}
		})
	}
}

// TestClockInfoHostile: a nil context and one not opened are refused
// (ErrInvalid); a closed one, and one closed while other goroutines read
// the page, report ErrClosed and never fault.
func TestClockInfoHostile(t *testing.T) {
	var nilCtx *mlx5.Context
	if _, err := nilCtx.ClockInfo(); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("nil context: %v, want ErrInvalid", err)
	}
	if _, err := new(mlx5.Context).ClockInfo(); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("zero context: %v, want ErrInvalid", err)
	}
	c, err := mlx5test.Open("cx7")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, err := c.ClockInfo(); err != nil {
					if !errors.Is(err, mlx5.ErrClosed) {
						t.Errorf("ClockInfo racing Close: %v, want ErrClosed", err)
					}
					return
				}
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := c.ClockInfo(); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("closed context: %v, want ErrClosed", err)
	}
}

// stampedRig is a rig whose CQ is made with CQOptions.Timestamps as
// stamps says, and two QPs connected on it.
func stampedRig(t *testing.T, stamps bool) (r *rig, a, b *mlx5.QP) {
	return optsRig(t, mlx5.CQOptions{Entries: 64, Timestamps: stamps})
}

// optsRig is a cx7 rig whose CQ is made with o, and two QPs connected on
// it.
func optsRig(t *testing.T, o mlx5.CQOptions) (r *rig, a, b *mlx5.QP) {
	r = newRig(t, "cx7", model.Options{}, 64)
	var err error
	if r.cq, err = r.c.CreateCQ(o); err != nil {
		t.Fatal(err)
	}
	a, b = r.pair(t, r.pd)
	return r, a, b
}

// sendAndPoll posts n SENDs from a to b's n receives and returns the 2n
// completions.
func sendAndPoll(t *testing.T, r *rig, a, b *mlx5.QP, n int) []mlx5.Completion {
	for i := range n {
		if err := b.PostRecv(uint64(100+i), []mlx5.SGE{{Addr: r.mr.Addr() + 4096, Length: 64, LKey: r.mr.LKey()}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if err := a.PostSend(&mlx5.SendWR{WrID: uint64(i + 1), Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled,
			SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: 16, LKey: r.mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.poll(t, 2*n, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCompletionTimestamps: on a CQ made with Timestamps every completion
// carries the model's free-running clock, in the order the device wrote
// the CQEs, and ClockInfo puts each between the post and the poll's end;
// a CQ made without reports 0.
func TestCompletionTimestamps(t *testing.T) {
	r, a, b := stampedRig(t, true)
	before := time.Now()
	got := sendAndPoll(t, r, a, b, 4)
	after := time.Now()
	ci, err := r.c.ClockInfo()
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for _, wc := range got {
		if wc.Status != mlx5.WCSuccess || wc.Timestamp == 0 || wc.Timestamp < last {
			t.Errorf("completion %+v: want success with a timestamp after %d", wc, last)
		}
		last = wc.Timestamp
		// A millisecond either way: the model's clock runs on the
		// monotonic clock, ClockInfo's Nsec is wall time.
		if at := ci.Time(wc.Timestamp); at.Before(before.Add(-time.Millisecond)) || at.After(after.Add(time.Millisecond)) {
			t.Errorf("wr %d completed at %v, not within [%v, %v]", wc.WrID, at, before, after)
		}
	}

	r2, a, b := stampedRig(t, false)
	for _, wc := range sendAndPoll(t, r2, a, b, 2) {
		if wc.Timestamp != 0 {
			t.Errorf("completion on a CQ without Timestamps: %+v", wc)
		}
	}
	if _, err := r.c.CreateCQ(mlx5.CQOptions{Entries: 8, DEVX: true, Timestamps: true}); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("DEVX CQ with Timestamps: %v, want ErrInvalid", err)
	}
}

// TestRealTimeTimestamps: on a cx7 (real-time timestamp formats, so
// Caps.RealTimeTimestamps) a CQ made with RealTimeTimestamps carries the
// device's real-time clock, seconds and nanoseconds, which RealTime puts
// between the post and the poll's end; a cx5 has none (ErrUnsupported,
// nothing made), and the option excludes Timestamps and DEVX CQs.
func TestRealTimeTimestamps(t *testing.T) {
	r, a, b := optsRig(t, mlx5.CQOptions{Entries: 64, RealTimeTimestamps: true})
	if !r.c.Caps().RealTimeTimestamps {
		t.Fatal("cx7: no Caps.RealTimeTimestamps")
	}
	before := time.Now()
	got := sendAndPoll(t, r, a, b, 3)
	after := time.Now()
	for _, wc := range got {
		if wc.Status != mlx5.WCSuccess || wc.Timestamp&0xffffffff >= 1e9 {
			t.Errorf("completion %+v: want success, nanoseconds below 1e9 in the low word", wc)
		}
		if at := mlx5.RealTime(wc.Timestamp); at.Before(before.Truncate(time.Microsecond)) || at.After(after) {
			t.Errorf("wr %d completed at %v, not within [%v, %v]", wc.WrID, at, before, after)
		}
	}
	for _, o := range []mlx5.CQOptions{{Entries: 8, RealTimeTimestamps: true, Timestamps: true}, {Entries: 8, RealTimeTimestamps: true, DEVX: true}} {
		if _, err := r.c.CreateCQ(o); !errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", o, err)
		}
	}
	c5 := newRig(t, "cx5", model.Options{}, 8)
	if c5.c.Caps().RealTimeTimestamps {
		t.Error("cx5 reports real-time timestamps")
	}
	n := c5.dev.Objects()
	if _, err := c5.c.CreateCQ(mlx5.CQOptions{Entries: 8, RealTimeTimestamps: true}); !errors.Is(err, mlx5.ErrUnsupported) {
		t.Errorf("cx5: %v, want ErrUnsupported", err)
	}
	if m := c5.dev.Objects(); m != n {
		t.Errorf("cx5: %d objects after the refused CQ, %d before", m, n)
	}
}

// TestRealTime: RealTime adds the seconds and nanoseconds words as the
// kernel's REAL_TIME_TO_NS does, even for a low word past 1e9.
func TestRealTime(t *testing.T) {
	for _, tc := range []struct {
		ts   uint64
		want int64 // ns since the epoch
	}{{0, 0}, {1<<32 | 5, 1e9 + 5}, {1700000000<<32 | 999999999, 1700000000*1e9 + 999999999}, {3<<32 | 0xffffffff, 3e9 + 0xffffffff}} {
		if got := mlx5.RealTime(tc.ts).UnixNano(); got != tc.want {
			t.Errorf("RealTime(%#x) = %d ns, want %d", tc.ts, got, tc.want)
		}
	}
}
