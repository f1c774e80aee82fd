package doorbell

import "sync/atomic"

// The ordering on amd64 (see docs/DOORBELL.md):
//
// libmlx5 uses udma_to_device_barrier (a compiler barrier on x86-64)
// before the record store, mmio_wc_start (SFENCE) before the first
// write-combining store to the UAR, and mmio_flush_writes (SFENCE) after
// the last one.
//
// Go's atomic.StoreUint32 on amd64 is XCHG, a locked instruction: a
// compiler barrier, and a full fence for the CPU. Stores to write-back
// memory are not reordered with each other (TSO) nor with locked
// instructions, and a locked instruction drains the write-combining
// buffers (Intel SDM vol. 3, "Memory Ordering in P6 and More Recent
// Processor Families" and "Write Combining Buffer"). So publish, an
// XCHG of the record, covers udma_to_device_barrier and mmio_wc_start.
// wcFlush is libmlx5's mmio_flush_writes, SFENCE (barrier_amd64.s): the
// UAR stores before it leave the CPU before any store after it, in
// particular before the next ring and before a lock the caller
// releases. SFENCE, not a second locked instruction: a locked
// instruction also waits for the loads before it and costs two to three
// times as much on Intel cores (docs/PERFORMANCE.md).

// sfence is SFENCE (barrier_amd64.s).
func sfence()

// publish stores the doorbell record word w to p after every earlier store.
func publish(p *uint32, w uint32) { atomic.StoreUint32(p, w) }

// wcStart orders the record store before the UAR stores that follow. On
// amd64 the XCHG of publish already did.
func wcStart() {}

// wcFlush flushes the UAR stores before it, then stores v to p (the
// poster's own bookkeeping word, which no other goroutine reads).
func wcFlush(p *uint32, v uint32) {
	sfence()
	*p = v
}
