package mlx5

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Buffer is memory for the device: queues, doorbell records and data
// buffers. It is mmap'd anonymous memory outside the Go heap, so the
// garbage collector never moves or frees it under the device, and marked
// MADV_DONTFORK so a fork does not make the parent's pages copy-on-write
// while the device writes them.
//
// Close unmaps it. A Buffer that becomes unreachable is unmapped by a
// cleanup, so a forgotten one does not leak its mapping; the slice from
// Bytes does not keep the Buffer reachable, so keep the Buffer itself (or
// call runtime.KeepAlive) while you or the device use the memory.
type Buffer struct {
	mu      sync.Mutex
	mem     []byte // what the caller asked for
	mapped  []byte // the whole mapping
	cleanup runtime.Cleanup
}

// AllocBuffer maps n bytes (rounded up to whole pages), zeroed.
func AllocBuffer(n int) (*Buffer, error) {
	b, err := allocBuffer(n)
	if err != nil {
		return nil, err
	}
	b.cleanup = runtime.AddCleanup(b, func(m []byte) {
		if unix.Munmap(m) == nil {
			liveBuffers.Add(-1)
		}
	}, b.mapped)
	return b, nil
}

// liveBuffers counts the mappings of Buffers not yet unmapped, for tests.
var liveBuffers atomic.Int64

// allocBuffer is AllocBuffer without the cleanup, for memory an object
// owns and unmaps in its own Close (a queue the device may still use).
func allocBuffer(n int) (*Buffer, error) {
	if n <= 0 {
		return nil, invalid("alloc buffer", "", "size %d", n)
	}
	page := unix.Getpagesize()
	size := (n + page - 1) &^ (page - 1)
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mlx5: alloc buffer: mmap %d bytes: %w", size, err)
	}
	if err := unix.Madvise(mem, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("mlx5: alloc buffer: madvise DONTFORK: %w", err)
	}
	liveBuffers.Add(1)
	return &Buffer{mem: mem[:n:n], mapped: mem}, nil
}

// Bytes returns the buffer's memory; nil after Close.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mem
}

// Close unmaps the buffer. The device must no longer use it: close the
// objects that point into it first. Closing twice is safe.
func (b *Buffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil
	}
	mapped := b.mapped
	b.mem, b.mapped = nil, nil
	b.cleanup.Stop()
	if err := unix.Munmap(mapped); err != nil {
		return opErr("free buffer", "", err)
	}
	liveBuffers.Add(-1)
	return nil
}
