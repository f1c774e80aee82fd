//go:build race

package mlx5

import "sync/atomic"

// handoff tells the race detector about the ordering the device provides
// between a poster and a poller. The poster writes its bookkeeping (work
// request ids) in Go memory, then rings the doorbell; the device reads
// the WQE, writes the CQE; the poller reads the CQE, then the
// bookkeeping. The doorbell and the CQE are atomics on mmap'd memory,
// which orders the two goroutines (and is all hardware needs) but which
// the race detector does not track outside the Go heap. Under -race the
// poster publishes with an atomic add on a Go-heap word and the poller
// loads it; without -race these are empty and cost nothing.
type handoff struct{ v atomic.Uint32 }

func (h *handoff) publish() { h.v.Add(1) }
func (h *handoff) observe() { h.v.Load() }
