package mlx5

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// ClockInfo is a snapshot of the parameters that turn device clock
// cycles (hca_core_clock ticks, as completion timestamps count them) into
// nanoseconds (struct mlx5dv_clock_info). The driver takes a new
// snapshot at least every MaxUpdate: a conversion is right for
// timestamps within half the mask's range of LastCycles.
type ClockInfo struct {
	// Nsec is the time, in nanoseconds since the Unix epoch, at which
	// the device clock read LastCycles.
	Nsec       uint64
	LastCycles uint64
	// Frac is the fraction of a nanosecond, in units of 2^-Shift, that
	// Nsec left out.
	Frac uint64
	// A cycle lasts Mult / 2^Shift nanoseconds.
	Mult, Shift uint32
	// Mask is the counter's range: cycles wrap at Mask+1.
	Mask uint64
	// MaxUpdate is the longest the driver waits between snapshots
	// (overflow_period; mlx5dv_query_device's
	// max_clock_info_update_nsec).
	MaxUpdate time.Duration
}

// Nanos converts a device timestamp to nanoseconds since the Unix epoch,
// with mlx5dv_ts_to_ns's arithmetic: the cycles from LastCycles, modulo
// the mask, are after it if fewer than half the mask, before it
// otherwise. The arithmetic is modulo 2^64, as in C.
func (ci ClockInfo) Nanos(ts uint64) uint64 {
	delta := (ts - ci.LastCycles) & ci.Mask
	if delta > ci.Mask/2 {
		delta = (ci.LastCycles - ts) & ci.Mask
		return ci.Nsec - (delta*uint64(ci.Mult)-ci.Frac)>>ci.Shift
	}
	return ci.Nsec + (delta*uint64(ci.Mult)+ci.Frac)>>ci.Shift
}

// Time is Nanos as a time.Time.
func (ci ClockInfo) Time(ts uint64) time.Time { return time.Unix(0, int64(ci.Nanos(ts))) }

// Duration is the time from device timestamp from to device timestamp
// to, both converted by Nanos; it is negative if to is the older.
func (ci ClockInfo) Duration(from, to uint64) time.Duration {
	return time.Duration(ci.Nanos(to) - ci.Nanos(from))
}

// RealTime converts the timestamp of a completion on a CQ made with
// CQOptions.RealTimeTimestamps: the device's real-time clock keeps
// seconds since the Unix epoch in the upper 32 bits and nanoseconds in
// the lower, which the kernel's mlx5_real_time_cyc2time adds up as
// hi * 1e9 + lo. (libmlx5 44.0's ibv_wc_read_completion_wallclock_ns
// returns the raw word for such a CQ.)
func RealTime(ts uint64) time.Time { return time.Unix(int64(ts>>32), int64(ts&0xffffffff)) }

// The offsets of struct mlx5_ib_clock_info's fields (sign, resv, nsec,
// cycles, frac, mult, shift, mask, overflow_period; seam.ClockInfoSize
// bytes), which readClockInfo reads; TestLabBTFClockInfo checks them
// against the lab kernel's BTF.
const (
	ciSign           = 0
	ciNsec           = 8
	ciCycles         = 16
	ciFrac           = 24
	ciMult           = 32
	ciShift          = 36
	ciMask           = 40
	ciOverflowPeriod = 48
)

// clockInfoUpdating is MLX5_IB_CLOCK_INFO_KERNEL_UPDATING: the sign word's
// bit that says the driver is rewriting the page.
const clockInfoUpdating = 1

// clockInfoV1 is BIT(MLX5_IB_CLOCK_INFO_V1), the page's only version, in
// GET_CONTEXT's clock_info_versions.
const clockInfoV1 = 1 << 0

// clockInfoRetries is how many times ClockInfo reads a sign word that
// says the driver is rewriting the page before it gives up (libmlx5's
// count), for each copy it tries.
const clockInfoRetries = 10

// clockInfoRead, when not nil, runs between the reads of the sign word
// and the copy of the fields (tests rewrite the page there).
var clockInfoRead func()

// clock is the context's clock-info page: mapped at the first
// ClockInfo, unmapped by Close.
type clock struct {
	// offered: GET_CONTEXT's clock_info_versions has
	// MLX5_IB_CLOCK_INFO_V1.
	offered bool
	mu      sync.RWMutex // ClockInfo reads the page under RLock, Close unmaps it under Lock
	page    []byte
	mapper  seam.ClockMapper
	gone    bool // Close unmapped the page, or is about to
}

// ClockInfo reads the clock-info page the kernel keeps for the device
// (mlx5dv_get_clock_info): a consistent copy, taken while the sign word
// stays the same and does not say the driver is rewriting it. After ten
// reads that say it is, it fails with EBUSY, as libmlx5 does. A device
// without the page (GET_CONTEXT offered no MLX5_IB_CLOCK_INFO_V1, or the
// mmap failed) fails with ErrUnsupported; a closed context with
// ErrClosed. The page is mapped at the first call and stays until
// Context.Close.
func (c *Context) ClockInfo() (ClockInfo, error) {
	const op = "clock info"
	if err := c.checkOpen(op); err != nil {
		return ClockInfo{}, err
	}
	k := &c.clock
	if err := k.mapPage(c); err != nil {
		return ClockInfo{}, err
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.gone {
		return ClockInfo{}, opErr(op, c.name, ErrClosed)
	}
	ci, ok := readClockInfo(k.page)
	if !ok {
		return ClockInfo{}, opErr(op, c.name, unix.EBUSY)
	}
	return ci, nil
}

// mapPage maps the page if it is not yet.
func (k *clock) mapPage(c *Context) error {
	const op = "clock info"
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gone {
		return opErr(op, c.name, ErrClosed)
	}
	if k.page != nil {
		return nil
	}
	m, ok := c.dev.(seam.ClockMapper)
	if !k.offered || !ok {
		return unsupported(op, c.name, "the kernel offers no clock info page (clock_info_versions has no MLX5_IB_CLOCK_INFO_V1)")
	}
	b, err := m.MapClockInfo()
	if err != nil {
		return &Error{Op: op, Obj: c.name, Err: errors.Join(ErrUnsupported, err)}
	}
	if len(b) < seam.ClockInfoSize || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 != 0 {
		m.UnmapClockInfo(b)
		return unsupported(op, c.name, "the clock info page is %d bytes", len(b))
	}
	k.page, k.mapper = b, m
	return nil
}

// unmap releases the page, once no ClockInfo reads it; ClockInfo fails
// with ErrClosed after.
func (k *clock) unmap() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gone = true
	if k.page != nil {
		k.mapper.UnmapClockInfo(k.page)
		k.page = nil
	}
}

// readClockInfo copies struct mlx5_ib_clock_info from page (8-byte
// aligned, at least seam.ClockInfoSize bytes) under its sign word, as a
// seqlock reader: it retries while the driver is rewriting the page and
// when the word changed during the copy. It returns false after
// clockInfoRetries reads in a row that say the driver is rewriting.
func readClockInfo(page []byte) (ClockInfo, bool) {
	p := unsafe.Pointer(unsafe.SliceData(page))
	u32 := func(off uintptr) uint32 { return atomic.LoadUint32((*uint32)(unsafe.Add(p, off))) }
	u64 := func(off uintptr) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Add(p, off))) }
	for {
		var sign uint32
		for try := 0; ; try++ {
			if try == clockInfoRetries {
				return ClockInfo{}, false
			}
			if sign = u32(ciSign); sign&clockInfoUpdating == 0 {
				break
			}
		}
		if clockInfoRead != nil {
			clockInfoRead()
		}
		ci := ClockInfo{Nsec: u64(ciNsec), LastCycles: u64(ciCycles), Frac: u64(ciFrac), Mult: u32(ciMult), Shift: u32(ciShift),
			Mask: u64(ciMask), MaxUpdate: time.Duration(u64(ciOverflowPeriod))}
		if u32(ciSign) == sign {
			return ci, true
		}
	}
}
