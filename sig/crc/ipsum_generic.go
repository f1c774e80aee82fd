//go:build !amd64 && !arm64

package crc

// hasSum16 is whether IPChecksum has a vector sum: not here.
const hasSum16 = false

// sum16 is the vector sum of the architectures that have one.
func sum16(p []byte) uint64 { panic("crc: no vector sum on this architecture") }
