//go:build !amd64 && !arm64

package doorbell

import "encoding/binary"

// be32 returns the word whose in-memory bytes are v big-endian, so that an
// atomic 32-bit store of it writes v as the device reads it.
func be32(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return binary.NativeEndian.Uint32(b[:])
}

// fromBE32 is the inverse of be32.
func fromBE32(w uint32) uint32 {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], w)
	return binary.BigEndian.Uint32(b[:])
}
