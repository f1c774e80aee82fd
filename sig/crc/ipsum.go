package crc

import (
	"encoding/binary"
	"math/bits"
)

// IPChecksum is the T10-DIF IP checksum guard of p as Linux's t10_pi_ip_fn
// computes it: the 16-bit ones' complement of the ones' complement sum of p
// taken as big-endian 16-bit words (an odd final byte is padded with zero).
// The result is in host order; it is stored big-endian in the tuple.
func IPChecksum(p []byte) uint16 { return ipChecksumWith(hasSum16, p) }

// ipChecksumWith is IPChecksum, summing with sum16 (the architecture's
// vector sum) when vec is set.
func ipChecksumWith(vec bool, p []byte) uint16 {
	// The ones' complement sum does not depend on the byte order the words
	// are read in, as long as the result is read in the same order (RFC
	// 1071, section 2(B)): sum little-endian 64-bit words with end-around
	// carry, fold to 16 bits, and swap the two bytes at the end.
	var s, c uint64
	if vec {
		// An integer sum of 16-bit words is congruent to their ones'
		// complement sum modulo 0xFFFF, and 2^64-1 is a multiple of
		// 0xFFFF, so it adds into the 64-bit ones' complement sum as is.
		// Chunks bound the time in assembly (see foldChunk) and keep
		// within what sum16 takes.
		for len(p) >= 128 {
			n := min(len(p), sumChunk) &^ 127
			s, c = bits.Add64(s, sum16(p[:n]), c)
			p = p[n:]
		}
	}
	for len(p) >= 32 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(p), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(p[8:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(p[16:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(p[24:]), c)
		p = p[32:]
	}
	for len(p) >= 8 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(p), c)
		p = p[8:]
	}
	if len(p) > 0 {
		var last [8]byte
		copy(last[:], p)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(last[:]), c)
	}
	s, c = bits.Add64(s, 0, c)
	s += c // cannot carry again: adding 1 carried out only if s was all ones
	// Fold 64 -> 32 -> 16 bits with end-around carry.
	s = s>>32 + s&0xffffffff
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return ^bits.ReverseBytes16(uint16(s))
}

// sumChunk is the most sum16 takes at once (it takes up to 1 MiB).
const sumChunk = foldChunk

const _ uint = 1<<20 - sumChunk // sumChunk <= 1 MiB
