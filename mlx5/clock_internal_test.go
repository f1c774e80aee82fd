package mlx5

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestClockInfoNanos checks Nanos against mlx5dv_ts_to_ns's arithmetic
// (mlx5dv.h, rdma-core v44.0), the expected values worked out from that
// formula in arbitrary precision reduced modulo 2^64: timestamps after
// and before last_cycles, across the 41-bit counter's wrap in both
// directions, at half the mask (the side the formula's > picks), with a
// fraction, a result below zero (wraps, as the C does) and a product
// delta*mult that overflows 64 bits.
func TestClockInfoNanos(t *testing.T) {
	const mask41 = 1<<41 - 1
	for i, v := range []struct {
		nsec, last, frac uint64
		mult, shift      uint32
		mask, ts, want   uint64
	}{
		{1700000000000000000, 123456789, 0, 8388608, 23, mask41, 0x75bcd15, 1700000000000000000},
		{1700000000000000000, 123456789, 0, 8388608, 23, mask41, 0x75bd0fd, 1700000000000001000},
		{1700000000000000000, 123456789, 0, 8388608, 23, mask41, 0x75bc92d, 1699999999999999000},
		{1700000000000000000, 5, 4194304, 53687091, 23, mask41, 0x1fffffffffb, 1699999999999999937},
		{1700000000000000000, 2199023255547, 4194304, 53687091, 23, mask41, 0x5, 1700000000000000064},
		{1700000000000000000, 1099511627776, 123, 53687091, 23, mask41, 0x0, 1699999560195375105},
		{1700000000000000000, 0, 0, 53687091, 23, mask41, 0xffffffffff, 1700000439804624889},
		{10, 1000, 0, 8388608, 23, mask41, 0x0, 18446744073709550626},
		{1700000000000000000, 0, 0, 8388608, 23, ^uint64(0), 0x4000000000000000, 1700000000000000000},
		{1700000000000000000, 100, 8388607, 53687091, 23, mask41, 0x63, 1699999999999999995},
	} {
		ci := ClockInfo{Nsec: v.nsec, LastCycles: v.last, Frac: v.frac, Mult: v.mult, Shift: v.shift, Mask: v.mask}
		if got := ci.Nanos(v.ts); got != v.want {
			t.Errorf("%d: Nanos(%#x) = %d, want %d", i, v.ts, got, v.want)
		}
	}
	ci := ClockInfo{Nsec: 1700000000000000000, LastCycles: 1000, Mult: 8388608, Shift: 23, Mask: mask41}
	if got, want := ci.Time(1500), time.Unix(1700000000, 500); !got.Equal(want) {
		t.Errorf("Time = %v, want %v", got, want)
	}
	if d := ci.Duration(1500, 900); d != -600 {
		t.Errorf("Duration(1500, 900) = %v, want -600ns", d)
	}
}

// clockPageFor is an 8-byte aligned clock-info page holding ci under
// sign.
func clockPageFor(sign uint32, ci ClockInfo) []byte {
	w := make([]uint64, 512)
	w[0] = uint64(sign) // little-endian: sign at 0, resv at 4
	w[1], w[2], w[3] = ci.Nsec, ci.LastCycles, ci.Frac
	w[4] = uint64(ci.Mult) | uint64(ci.Shift)<<32
	w[5], w[6] = ci.Mask, uint64(ci.MaxUpdate)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}

// TestReadClockInfoSeqlock: a copy that the driver rewrote meanwhile (the
// sign word moved on) is taken again, and the second copy is returned; a
// page that stays in the updating state for ten reads is given up
// (libmlx5's EBUSY), and read once the driver is done.
func TestReadClockInfoSeqlock(t *testing.T) {
	old := ClockInfo{Nsec: 1, LastCycles: 2, Frac: 3, Mult: 4, Shift: 5, Mask: 6, MaxUpdate: 7}
	upd := ClockInfo{Nsec: 11, LastCycles: 12, Frac: 13, Mult: 14, Shift: 15, Mask: 16, MaxUpdate: 17}
	page := clockPageFor(2, old)
	sign := (*uint32)(unsafe.Pointer(&page[0]))
	copies := 0
	clockInfoRead = func() {
		if copies++; copies == 1 {
			// The driver's update, between the sign's read and the copy.
			n := clockPageFor(4, upd)
			copy(page[8:], n[8:64])
			atomic.StoreUint32(sign, 4)
		}
	}
	defer func() { clockInfoRead = nil }()
	got, ok := readClockInfo(page)
	if !ok || got != upd || copies != 2 {
		t.Fatalf("readClockInfo = %+v, %v after %d copies; want %+v after 2", got, ok, copies, upd)
	}

	// While the driver is rewriting, refused after clockInfoRetries
	// reads; once it is done, the page reads again.
	atomic.StoreUint32(sign, 5)
	if _, ok := readClockInfo(page); ok {
		t.Error("readClockInfo of a page being rewritten succeeded")
	}
	atomic.StoreUint32(sign, 6)
	if got, ok = readClockInfo(page); !ok || got != upd {
		t.Errorf("after the update: %+v, %v; want %+v", got, ok, upd)
	}
}
