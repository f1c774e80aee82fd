//go:build !amd64 || race

package mlx5

import (
	"sync/atomic"
	"unsafe"
)

// storeRelease stores v to p, for goroutines that load p atomically: what
// they read after seeing v was written before it. Here it is an atomic
// store (on arm64 a store-release, STLR), written as atomic.StoreUint32
// rather than p.Store, which costs the inliner 5 more and would push
// sendQueue.retire over its budget on arm64. On amd64 without the race
// detector it is a plain store (release_amd64.go).
func storeRelease(p *atomic.Uint32, v uint32) { atomic.StoreUint32((*uint32)(unsafe.Pointer(p)), v) }
