//go:build amd64 || arm64

package doorbell

import "math/bits"

// be32 returns the word whose in-memory bytes are v big-endian, so that an
// atomic 32-bit store of it writes v as the device reads it. On these
// little-endian machines, one byte swap (endian_other.go has the portable
// form, which the compiler does not always reduce to one).
func be32(v uint32) uint32 { return bits.ReverseBytes32(v) }

// fromBE32 is the inverse of be32.
func fromBE32(w uint32) uint32 { return bits.ReverseBytes32(w) }
