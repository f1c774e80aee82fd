package model

import (
	"testing"
	"time"
)

// TestDeviceClockMoves: the device clock advances at the profile's
// frequency, and the clock-info page's snapshot converts its counter back
// to the wall time it was taken at (to the wall clock's drift from the
// monotonic one since the HCA was made).
func TestDeviceClockMoves(t *testing.T) {
	for _, name := range Profiles() {
		c := newDeviceClock(profiles[name])
		if c.khz == 0 {
			continue
		}
		a := c.now()
		time.Sleep(2 * time.Millisecond)
		b := c.now()
		if b-a < 2*c.khz {
			t.Errorf("%s: %d cycles in 2ms at %d kHz", name, b-a, c.khz)
		}
		at := time.Now()
		nsec, cycles, mult, mask, period := c.clockInfo(at)
		if cycles != c.cycles(at)&mask || mask != 1<<41-1 || period == 0 || period%uint64(time.Millisecond) != 0 {
			t.Errorf("%s: cycles %d, mask %#x, period %d", name, cycles, mask, period)
		}
		// Within a millisecond: the counter runs on the monotonic clock,
		// which the wall clock's adjustments leave alone.
		if d := at.UnixNano() - int64(nsec); d < -int64(time.Millisecond) || d > int64(time.Millisecond) {
			t.Errorf("%s: snapshot %dns off the wall clock", name, d)
		}
		// overflow_period keeps delta*mult within 63 bits.
		if cyc := period * c.khz / 1e6; cyc*uint64(mult)>>63 != 0 {
			t.Errorf("%s: period %dns is %d cycles, whose product with mult %d overflows", name, period, cyc, mult)
		}
	}
}
