//go:build race

package model

// dmaCopy copies src to dst as the device's DMA does, to or from memory a
// registration names. A ConnectX's DMA is invisible to the race
// detector, and what orders it with the program is the doorbell before
// and the CQE after, atomics on mmap'd memory the detector does not
// track. Under -race the model's copies are invisible too (go:norace):
// otherwise Go memory a program registered (PD.RegMR pins it) would be
// reported as raced by the model's goroutine. Without -race this is copy.
//
//go:norace
func dmaCopy(dst, src []byte) int {
	n := min(len(dst), len(src))
	for i := 0; i < n; i++ {
		dst[i] = src[i]
	}
	return n
}
