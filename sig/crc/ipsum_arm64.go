//go:build arm64

package crc

// hasSum16 is whether IPChecksum sums with NEON: always on arm64.
const hasSum16 = true

// sum16 returns the integer sum of the little-endian 16-bit words of p;
// len(p) is a multiple of 128 and at most 1 MiB.
func sum16(p []byte) uint64 { return sum16NEON(p) }

//go:noescape
func sum16NEON(p []byte) uint64
