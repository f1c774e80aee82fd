//go:build amd64

package crc

import "golang.org/x/sys/cpu"

// hasSum16 is whether IPChecksum sums with AVX2.
var hasSum16 = cpu.X86.HasAVX2

// sum16 returns the integer sum of the little-endian 16-bit words of p;
// len(p) is a multiple of 128 and at most 1 MiB.
func sum16(p []byte) uint64 { return sum16AVX2(p) }

//go:noescape
func sum16AVX2(p []byte) uint64
