//go:build !amd64 && !arm64

package doorbell

import "sync/atomic"

// Other architectures get the Go memory model's ordering only: sequentially
// consistent atomics on the record and the poster's word, no device
// barrier. That is enough for the software model and for tests, and
// unverified for a device; mlx5go supports ConnectX hosts on amd64 and
// arm64.

func publish(p *uint32, w uint32) { atomic.StoreUint32(p, w) }

func wcStart() {}

func wcFlush(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
