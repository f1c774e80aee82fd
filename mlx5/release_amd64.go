//go:build !race

package mlx5

import (
	"sync/atomic"
	"unsafe"
)

// storeRelease stores v to p, for goroutines that load p atomically: what
// they read after seeing v was written before it.
//
// On amd64 every store is a release store: the CPU makes a store visible
// after every earlier load and store (TSO), and the compiler keeps a
// store after the loads and stores before it. So storeRelease is a plain
// MOV. atomic.Uint32's Store is an XCHG instead, a full fence that waits
// for the store buffer to drain: 7 ns a CQE of a poll of 64 and 13 ns a
// poll of one on an Intel Xeon (BenchmarkSideBySide, cpu-ns), where it
// was the costliest instruction of Poll's loop. The race detector does not see a
// plain store as a release: with -race storeRelease is an atomic store
// (release.go).
func storeRelease(p *atomic.Uint32, v uint32) { *(*uint32)(unsafe.Pointer(p)) = v }
