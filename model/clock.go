package model

import (
	"math/bits"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// deviceClock is the HCA's free-running core clock: it counts
// device_frequency_khz ticks a millisecond from the HCA's making, on the
// monotonic clock, so it moves while anyone looks.
type deviceClock struct {
	start time.Time // with its monotonic reading
	khz   uint64    // 0: the profile has no device frequency, and no clock
}

func newDeviceClock(p *profile) deviceClock {
	return deviceClock{start: time.Now(), khz: p.cap(prm.CmdHcaCap.DeviceFrequencyKhz)}
}

// cycles is the counter at t (t after start).
func (c deviceClock) cycles(t time.Time) uint64 {
	hi, lo := bits.Mul64(uint64(t.Sub(c.start)), c.khz)
	q, _ := bits.Div64(hi%1e6, lo, 1e6)
	return q
}

// now is the counter now, as a CQE's timestamp reads it.
func (c deviceClock) now() uint64 { return c.cycles(time.Now()) }

// realTime is the device's real-time clock now, as a CQE of a CQ made for
// real-time timestamps reads it: seconds since the Unix epoch in the
// upper 32 bits, nanoseconds in the lower (the kernel's
// mlx5_real_time_cyc2time reads it so: REAL_TIME_TO_NS(hi, low)). The
// model's real-time clock is the host's (the PTP-synchronised clock a
// ConnectX keeps is not modelled).
func realTime() uint64 {
	t := time.Now()
	return uint64(t.Unix())<<32 | uint64(t.Nanosecond())
}

// The timecounter mlx5_core keeps over the clock (mlx5_timecounter_init):
// a 41-bit counter, and a cycle of mult / 2^shift nanoseconds.
const (
	clockMaskBits = 41
	clockShift    = 23
)

// clockInfo is mlx5_update_clock_info_page's page for the clock at t: the
// counter, the wall time the counter stands for (frac 0), the counter's
// mult (clocksource_khz2mult) and mask, and overflow_period, the
// nanoseconds after which delta*mult would overflow or the counter pass a
// third of its range, whichever first, rounded down to a 1 ms tick
// (HZ 1000).
func (c deviceClock) clockInfo(t time.Time) (nsec, cycles uint64, mult uint32, mask, period uint64) {
	mask = 1<<clockMaskBits - 1
	mult = uint32((uint64(1e6)<<clockShift + c.khz/2) / c.khz)
	cycles = c.cycles(t)
	// The wall time of the tick cycles counts: start's wall clock plus
	// cycles * 1e6 / khz nanoseconds.
	hi, lo := bits.Mul64(cycles, 1e6)
	el, _ := bits.Div64(hi%c.khz, lo, c.khz)
	nsec = uint64(c.start.UnixNano()) + el
	overflow := min((^uint64(0)>>1)/uint64(mult), mask/3)
	period = overflow * uint64(mult) >> clockShift
	period -= period % uint64(time.Millisecond)
	return nsec, cycles & mask, mult, mask, period
}

// clockPage is one mapping of the clock-info page; the timer rewrites it
// every overflow period, as mlx5_core's overflow work does.
type clockPage struct {
	mem   []byte
	timer *time.Timer
}

// write rewrites the page for now under its sign word, as
// mlx5_update_clock_info_page does: the updating bit set, the fields,
// then the sign advanced past it.
func (p *clockPage) write(c deviceClock) uint64 {
	nsec, cycles, mult, mask, period := c.clockInfo(time.Now())
	b := unsafe.Pointer(unsafe.SliceData(p.mem))
	u32 := func(off uintptr) *uint32 { return (*uint32)(unsafe.Add(b, off)) }
	u64 := func(off uintptr) *uint64 { return (*uint64)(unsafe.Add(b, off)) }
	sign := atomic.LoadUint32(u32(0))
	atomic.StoreUint32(u32(0), sign|clockInfoUpdating)
	atomic.StoreUint64(u64(8), nsec)
	atomic.StoreUint64(u64(16), cycles)
	atomic.StoreUint64(u64(24), 0) // frac
	atomic.StoreUint32(u32(32), mult)
	atomic.StoreUint32(u32(36), clockShift)
	atomic.StoreUint64(u64(40), mask)
	atomic.StoreUint64(u64(48), period)
	atomic.StoreUint32(u32(0), sign+2*clockInfoUpdating)
	return period
}

// clockInfoUpdating is MLX5_IB_CLOCK_INFO_KERNEL_UPDATING.
const clockInfoUpdating = 1

var _ seam.ClockMapper = (*Device)(nil)

// MapClockInfo is mmap of MLX5_IB_MMAP_CLOCK_INFO: mlx5_ib maps its
// clock-info page for a device with a device frequency (the versions
// GET_CONTEXT offered), read-only. The model's page is anonymous memory
// outside the Go heap that a timer rewrites every overflow period.
func (d *Device) MapClockInfo() ([]byte, error) {
	const call = "mmap clock info"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return nil, err
	}
	c := d.h.clock
	if c.khz == 0 {
		return nil, kerr(call, unix.EOPNOTSUPP, "mlx5_ib_mmap_clock_info_page: the device has no clock info page")
	}
	mem, err := unix.Mmap(-1, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, kerr(call, err.(unix.Errno), "mmap")
	}
	p := &clockPage{mem: mem}
	period := p.write(c)
	tick := func() {
		d.h.mu.Lock()
		defer d.h.mu.Unlock()
		if d.clocks[unsafe.SliceData(mem)] == p {
			p.timer.Reset(time.Duration(p.write(c)))
		}
	}
	p.timer = time.AfterFunc(time.Duration(period), tick)
	if d.clocks == nil {
		d.clocks = map[*byte]*clockPage{}
	}
	d.clocks[unsafe.SliceData(mem)] = p
	return mem, nil
}

// UnmapClockInfo releases a mapping MapClockInfo made; like munmap, it
// works after the context is closed.
func (d *Device) UnmapClockInfo(page []byte) error {
	d.h.mu.Lock()
	p, ok := d.clocks[unsafe.SliceData(page)]
	if ok && len(page) == len(p.mem) {
		delete(d.clocks, unsafe.SliceData(page))
	}
	d.h.mu.Unlock()
	if !ok || len(page) != len(p.mem) {
		return kerr("munmap clock info", unix.EINVAL, "not a clock info mapping of this context")
	}
	p.timer.Stop()
	return unix.Munmap(p.mem)
}

// Timestamp formats (MLX5_TIMESTAMP_FORMAT_CAP_*) a device's qp_ts_format
// reports.
const (
	tsCapFreeRunning = 0
	tsCapRealTime    = 1
	tsCapBoth        = 2
)

// rtSupported is mlx5_ib's rt_supported: a timestamp format cap with
// real-time timestamps.
func rtSupported(ts uint64) bool { return ts == tsCapRealTime || ts == tsCapBoth }

// qpTSFormat is get_qp_ts_format's refusal for a verbs QP on scq and rcq:
// a CQ made for free-running timestamps needs a device whose RoCE caps'
// qp_ts_format has them, one made for real-time timestamps one that has
// those, and a QP whose CQs ask for different formats is refused.
func (h *hca) qpTSFormat(scq, rcq *vcq) (unix.Errno, string) {
	ts := h.prof.roceCap(prm.RoceCap.QpTsFormat)
	fr, rt := ts == tsCapFreeRunning || ts == tsCapBoth, rtSupported(ts)
	const fmtDefault, fmtFree, fmtReal = 1, 0, 2 // MLX5_TIMESTAMP_FORMAT_DEFAULT, _FREE_RUNNING, _REAL_TIME
	format := func(cq *vcq) (int, bool) {
		switch {
		case cq == nil:
		case cq.realTime:
			return fmtReal, rt
		case cq.timestamp:
			return fmtFree, fr
		}
		if fr {
			return fmtFree, true
		}
		return fmtDefault, true
	}
	s, sok := format(scq)
	r, rok := format(rcq)
	if !sok || !rok {
		return unix.EOPNOTSUPP, "get_qp_ts_format: a CQ asks for completion timestamps in a format the device does not have (qp_ts_format)"
	}
	if s != fmtDefault && r != fmtDefault && s != r {
		return unix.EOPNOTSUPP, "get_qp_ts_format: the send CQ's timestamp format is not the receive CQ's"
	}
	return 0, ""
}
