package mlx5

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"golang.org/x/sys/unix"
)

// Buffer is memory for the device: queues, doorbell records and data
// buffers. It is mmap'd anonymous memory outside the Go heap, so the
// garbage collector never moves or frees it under the device, and marked
// MADV_DONTFORK so a fork does not make the parent's pages copy-on-write
// while the device writes them.
//
// A registration of its memory (PD.RegMR, Context.RegUMem, of all of it,
// part of it, or a range across adjacent Buffers) keeps the Buffer: as
// the kernel keeps a registration's pages pinned, the mapping stays until
// the last registration covering it is closed. Close gives the Buffer up:
// Bytes returns nil at once, and the memory is unmapped then, or when the
// last registration closes, whichever is later. A Buffer that becomes
// unreachable is unmapped by a cleanup, so a forgotten one does not leak
// its mapping, but never while a registration covers it. The slice from
// Bytes does not keep the Buffer reachable: keep the Buffer, or a
// registration of it, while you use the memory.
type Buffer struct {
	mu     sync.Mutex
	mem    []byte // what the caller asked for; nil after Close
	mapped []byte // the whole mapping
	// st is the mapping's state: registrations and whether the Buffer is
	// open. nil for allocBuffer's, which their object unmaps itself.
	st      *mapState
	cleanup runtime.Cleanup
	closed  bool // Close ran: a Buffer with no memory is a closed one, or a zero one
}

// mapState is what decides when a Buffer's mapping goes: the Buffer's
// owner (until Close, or until the Buffer is unreachable) and the
// registrations covering it. It is apart from the Buffer so that the
// cleanup can use it once the Buffer is gone.
type mapState struct {
	mu     sync.Mutex
	mapped []byte // nil once unmapped
	regs   int    // registrations (MRs, UMEMs) covering the mapping
	open   bool   // neither closed nor collected
}

// AllocBuffer maps n bytes (rounded up to whole pages), zeroed.
func AllocBuffer(n int) (*Buffer, error) {
	b, err := allocBuffer(n)
	if err != nil {
		return nil, err
	}
	b.st = &mapState{mapped: b.mapped, open: true}
	buffers.add(b)
	b.cleanup = runtime.AddCleanup(b, func(s *mapState) { s.giveUp() }, b.st)
	return b, nil
}

// liveBuffers counts the mappings of Buffers not yet unmapped, for tests.
var liveBuffers atomic.Int64

// allocBuffer is AllocBuffer without the cleanup, for memory an object
// owns and unmaps in its own Close (a queue the device may still use).
func allocBuffer(n int) (*Buffer, error) {
	const op = "alloc buffer"
	obj := fmt.Sprintf("of %d bytes", n)
	if n <= 0 {
		return nil, invalid(op, obj, "the size must be positive")
	}
	page := unix.Getpagesize()
	size := (n + page - 1) &^ (page - 1)
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, opErr(op, obj, fmt.Errorf("mmap %d bytes: %w", size, err))
	}
	if err := unix.Madvise(mem, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(mem)
		return nil, opErr(op, obj, fmt.Errorf("madvise DONTFORK: %w", err))
	}
	liveBuffers.Add(1)
	return &Buffer{mem: mem[:n:n], mapped: mem}, nil
}

// Bytes returns the buffer's memory; nil after Close.
func (b *Buffer) Bytes() []byte {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mem
}

// Close gives the buffer up and unmaps it, or, while registrations (MRs,
// UMEMs) cover it, leaves the unmap to the last of them to close: the
// device may still use the memory through them. Bytes returns nil after
// Close, and the memory takes no new registration. Closing twice is safe.
func (b *Buffer) Close() error {
	const op = "free buffer"
	if b == nil {
		return unusable(op, "Buffer", "AllocBuffer", true)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		if !b.closed {
			return unusable(op, "Buffer", "AllocBuffer", false)
		}
		return nil
	}
	mapped := b.mapped
	b.mem, b.mapped, b.closed = nil, nil, true
	obj := fmt.Sprintf("buffer at %#x", addrOf(mapped))
	if b.st == nil {
		if err := unix.Munmap(mapped); err != nil {
			return opErr(op, obj, err)
		}
		liveBuffers.Add(-1)
		return nil
	}
	b.cleanup.Stop()
	if err := b.st.giveUp(); err != nil {
		return opErr(op, obj, err)
	}
	return nil
}

// giveUp is the owner's end: Close, or the cleanup of an unreachable
// Buffer. The mapping goes unless registrations cover it.
func (s *mapState) giveUp() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = false
	if s.regs > 0 {
		return nil
	}
	return s.unmap()
}

// hold counts a registration of the mapping; false if the Buffer was
// given up.
func (s *mapState) hold() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open {
		return false
	}
	s.regs++
	return true
}

// unhold ends a registration; the last one unmaps a given-up Buffer.
func (s *mapState) unhold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regs--
	if s.regs == 0 && !s.open {
		s.unmap()
	}
}

// unmap removes the mapping from the registry, then unmaps it: a new
// mapping at its addresses is another Buffer's. s.mu is held.
func (s *mapState) unmap() error {
	if s.mapped == nil {
		return nil
	}
	buffers.remove(addrOf(s.mapped))
	if err := unix.Munmap(s.mapped); err != nil {
		return err
	}
	s.mapped = nil
	liveBuffers.Add(-1)
	return nil
}

// buffers are the mappings of AllocBuffer's Buffers, by address, so that a
// registration finds the Buffers its memory lies in. They are held
// weakly: a Buffer is kept by its owner or its registrations, not by
// being listed.
var buffers bufferList

type bufferList struct {
	mu sync.Mutex
	// l is sorted by start; mappings do not overlap.
	l []listedBuffer
}

type listedBuffer struct {
	start, end uint64
	b          weak.Pointer[Buffer]
}

func (bl *bufferList) add(b *Buffer) {
	start := addrOf(b.mapped)
	e := listedBuffer{start: start, end: start + uint64(len(b.mapped)), b: weak.Make(b)}
	bl.mu.Lock()
	defer bl.mu.Unlock()
	i := sort.Search(len(bl.l), func(i int) bool { return bl.l[i].start >= start })
	bl.l = append(bl.l, listedBuffer{})
	copy(bl.l[i+1:], bl.l[i:])
	bl.l[i] = e
}

func (bl *bufferList) remove(start uint64) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	i := sort.Search(len(bl.l), func(i int) bool { return bl.l[i].start >= start })
	if i < len(bl.l) && bl.l[i].start == start {
		bl.l = append(bl.l[:i], bl.l[i+1:]...)
	}
}

// in returns the Buffers whose mappings [lo, hi) overlaps; gone is true
// if one of them is unreachable (its cleanup is due).
func (bl *bufferList) in(lo, hi uint64) (bufs []*Buffer, gone bool) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	i := sort.Search(len(bl.l), func(i int) bool { return bl.l[i].end > lo })
	for ; i < len(bl.l) && bl.l[i].start < hi; i++ {
		b := bl.l[i].b.Value()
		if b == nil {
			return nil, true
		}
		bufs = append(bufs, b)
	}
	return bufs, false
}

// memHold is what a registration (MR, UMEM) keeps while the device may
// use its memory, as the kernel keeps the pages pinned (ib_umem_get):
// the Buffers the memory lies in, which stay mapped, and a pin on Go
// memory, which the garbage collector then neither frees nor moves.
type memHold struct {
	bufs []*Buffer
	pin  runtime.Pinner
}

// holds keeps every memHold, and so its Pinner, reachable until release:
// the runtime panics when a Pinner with pinned objects is collected, and
// a registration leaked with its context must not do that. Its memory
// stays pinned, as the kernel keeps the pages of a context that was never
// closed.
var holds = struct {
	mu sync.Mutex
	m  map[*memHold]struct{}
}{m: map[*memHold]struct{}{}}

// holdMem takes hold of mem for a registration: the Buffers it lies in
// (ErrClosed if one is closed or unreachable) and, if it is Go memory, a
// pin on the object (Pin does nothing for memory outside the Go heap,
// such as the program's own mmap).
func holdMem(op, obj string, mem []byte) (*memHold, error) {
	lo := addrOf(mem)
	bufs, gone := buffers.in(lo, lo+uint64(len(mem)))
	if gone {
		return nil, opErr(op, obj, fmt.Errorf("the memory is an unreachable Buffer's, about to be unmapped (keep the *Buffer while you use its memory): %w", ErrClosed))
	}
	h := &memHold{}
	for _, b := range bufs {
		if !b.st.hold() {
			h.release()
			return nil, opErr(op, obj, fmt.Errorf("the memory is a closed Buffer's: %w", ErrClosed))
		}
		h.bufs = append(h.bufs, b)
	}
	h.pin.Pin(unsafe.SliceData(mem))
	holds.mu.Lock()
	holds.m[h] = struct{}{}
	holds.mu.Unlock()
	return h, nil
}

// release lets go of what holdMem took: the device no longer uses the
// memory. Releasing twice, or a nil hold, does nothing.
func (h *memHold) release() {
	if h == nil {
		return
	}
	holds.mu.Lock()
	delete(holds.m, h)
	holds.mu.Unlock()
	h.pin.Unpin()
	for _, b := range h.bufs {
		b.st.unhold()
	}
	h.bufs = nil
}
