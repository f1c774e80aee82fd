package doorbell

import "sync/atomic"

// The ordering on amd64 (see docs/DOORBELL.md):
//
// libmlx5 uses udma_to_device_barrier (a compiler barrier on x86-64)
// before the record store, mmio_wc_start (SFENCE) before the first
// write-combining store to the UAR, and mmio_flush_writes (SFENCE) after
// the last one. x86 stores to write-back memory are not reordered with
// each other (TSO), so a plain record store after the WQE stores is
// ordered for the device as it is; the two SFENCEs order the UAR's
// write-combining stores.
//
// There are two ways to get that ordering here, and which is cheaper
// depends on the core, so the package picks by the CPU's vendor at
// start (fenceBySFENCE):
//
//   - SFENCE, as libmlx5 (Intel): the record is a plain store, wcStart
//     and wcFlush are SFENCE (barrier_amd64.s). A locked instruction on
//     an Intel core waits for the store buffer to drain and costs several
//     times an SFENCE: measured on a Xeon KVM, a one-WQEBB BlueFlame ring
//     36 ns with the two XCHGs below, 30 with one and an SFENCE.
//   - Locked instructions (AMD and the others): the record is
//     atomic.StoreUint32, an XCHG, which is a compiler barrier and a full
//     fence and drains the write-combining buffers (Intel SDM vol. 3,
//     "Memory Ordering in P6 and More Recent Processor Families" and
//     "Write Combining Buffer"; rdma-core relies on the lock of its
//     spinlock the same way), so it covers mmio_wc_start too; wcFlush is
//     a second XCHG on the poster's own word. On AMD EPYC the SFENCE
//     sequence was the slower (docs/DOORBELL.md, issues 11 and 17).
//
// Built with the race detector, the record store is always the atomic
// one: a goroutine that loads the record atomically (the model, a test)
// then has the Go memory model's edge to the WQE bytes written before
// it, which the detector checks; the CPU's ordering, which the plain
// store relies on, it does not see.

// fenceBySFENCE: order the doorbell by SFENCE and plain stores (an Intel
// CPU), not by locked instructions.
var fenceBySFENCE = isIntel()

// isIntel reports whether CPUID's vendor string is "GenuineIntel".
func isIntel() bool {
	ebx, edx, ecx := cpuid0()
	return ebx == 0x756e6547 && edx == 0x49656e69 && ecx == 0x6c65746e
}

// cpuid0 is CPUID leaf 0's vendor registers (barrier_amd64.s).
func cpuid0() (ebx, edx, ecx uint32)

// sfence is SFENCE (barrier_amd64.s).
func sfence()

// publish stores the doorbell record word w to p after every earlier store.
func publish(p *uint32, w uint32) {
	if fenceBySFENCE && !raceEnabled {
		*p = w
		return
	}
	atomic.StoreUint32(p, w)
}

// wcStart orders the record store before the UAR stores that follow: an
// SFENCE, or nothing after publish's XCHG.
func wcStart() {
	if fenceBySFENCE && !raceEnabled {
		sfence()
	}
}

// wcFlush flushes the UAR stores before it, then stores v to p (the
// poster's own bookkeeping word, which no other goroutine reads).
func wcFlush(p *uint32, v uint32) {
	if fenceBySFENCE {
		sfence()
		*p = v
		return
	}
	atomic.StoreUint32(p, v)
}
