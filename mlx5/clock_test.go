package mlx5_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
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
