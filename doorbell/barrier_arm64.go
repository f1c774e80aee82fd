package doorbell

import "sync/atomic"

// The ordering on arm64 (see docs/DOORBELL.md):
//
// Go's sync/atomic on arm64 emits load-acquire and store-release (LDAR,
// STLR) and exclusive or LSE atomics; it never emits DMB or DSB. A
// store-release orders earlier accesses before it, but not later ones: a
// UAR store after it may become visible first. And the device is an
// observer in the outer-shareable domain, for which libmlx5 uses explicit
// barriers. So this file uses the same instructions as libmlx5:
//
//   - udma_to_device_barrier = DMB OSHST before the record store (WQEs
//     before the record, for the device);
//   - mmio_wc_start = DSB ST between the record store and the UAR stores;
//   - mmio_flush_writes = DSB ST after the UAR stores.
//
// The record store itself is atomic.StoreUint32 (STLR), which also makes
// it a Go memory model release for goroutines that poll the record.

// dmbOSHST is DMB OSHST (barrier_arm64.s).
func dmbOSHST()

// dsbST is DSB ST (barrier_arm64.s).
func dsbST()

// publish stores the doorbell record word w to p after every earlier store,
// as the device sees them.
func publish(p *uint32, w uint32) {
	dmbOSHST()
	atomic.StoreUint32(p, w)
}

// wcStart orders the record store before the UAR stores that follow.
func wcStart() { dsbST() }

// wcFlush completes the UAR stores before it, then stores v to p (the
// poster's own bookkeeping word).
func wcFlush(p *uint32, v uint32) {
	dsbST()
	atomic.StoreUint32(p, v)
}
