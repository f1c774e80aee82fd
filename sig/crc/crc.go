// Package crc holds the checksums of block signatures: CRC-16/T10-DIF, the
// IP checksum guard of T10-DIF, and a parameterised CRC-64. CRC32 and
// CRC32C are hash/crc32's.
//
// Each function follows hash/crc32's convention: Update continues from a
// value a previous call returned, so a buffer may be summed in pieces.
package crc

import "math/bits"

// T10DIFPoly is the CRC-16/T10-DIF generator polynomial (normal form).
const T10DIFPoly = 0x8BB7

// T10DIF continues a CRC-16/T10-DIF over p from crc, the value so far: the
// bg seed (0 or 0xFFFF) to start a block. The CRC is not reflected and has
// no final xor, so crc is the register itself. T10DIF(0, "123456789") is
// 0xD0DB.
func T10DIF(crc uint16, p []byte) uint16 {
	for _, b := range p {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ T10DIFPoly
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// IPChecksum is the T10-DIF IP checksum guard of p as Linux's t10_pi_ip_fn
// computes it: the 16-bit ones' complement of the ones' complement sum of p
// taken as big-endian 16-bit words (an odd final byte is padded with zero).
// The result is in host order; it is stored big-endian in the tuple.
func IPChecksum(p []byte) uint16 {
	var sum uint64
	for len(p) >= 2 {
		sum += uint64(p[0])<<8 | uint64(p[1])
		p = p[2:]
	}
	if len(p) == 1 {
		sum += uint64(p[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// Params64 defines a CRC-64 in the Rocksoft model (as the CRC catalogue
// gives them).
type Params64 struct {
	Name   string
	Poly   uint64 // normal (MSB-first) form, x^64 implied
	Init   uint64
	RefIn  bool
	RefOut bool
	XorOut uint64
	Check  uint64 // the CRC of "123456789", 0 if unknown
}

// Catalogued CRC-64s with published check values.
var (
	CRC64ECMA182 = Params64{Name: "CRC-64/ECMA-182", Poly: 0x42F0E1EBA9EA3693, Check: 0x6C40DF5F0B497347}
	CRC64XZ      = Params64{Name: "CRC-64/XZ", Poly: 0x42F0E1EBA9EA3693, Init: ^uint64(0), RefIn: true, RefOut: true, XorOut: ^uint64(0), Check: 0x995DC9BBDF1939FA}
	CRC64GoISO   = Params64{Name: "CRC-64/GO-ISO", Poly: 0x000000000000001B, Init: ^uint64(0), RefIn: true, RefOut: true, XorOut: ^uint64(0), Check: 0xB90956C775A41001}
	CRC64WE      = Params64{Name: "CRC-64/WE", Poly: 0x42F0E1EBA9EA3693, Init: ^uint64(0), XorOut: ^uint64(0), Check: 0x62EC59E3F1A4F00A}
)

// CRC64 computes one CRC-64 definition.
type CRC64 struct {
	p Params64
}

// NewCRC64 returns the CRC-64 that p defines.
func NewCRC64(p Params64) *CRC64 { return &CRC64{p: p} }

// Params returns the definition.
func (c *CRC64) Params() Params64 { return c.p }

// Checksum returns the CRC-64 of p.
func (c *CRC64) Checksum(p []byte) uint64 { return c.Update(c.Checksum0(), p) }

// Checksum0 is the checksum of no data: the value to start Update from.
func (c *CRC64) Checksum0() uint64 { return c.finish(c.p.Init) }

// Update continues crc, a value Checksum, Checksum0 or Update returned,
// over p.
func (c *CRC64) Update(crc uint64, p []byte) uint64 {
	reg := c.unfinish(crc)
	for _, b := range p {
		if c.p.RefIn {
			b = bits.Reverse8(b)
		}
		reg ^= uint64(b) << 56
		for range 8 {
			if reg&(1<<63) != 0 {
				reg = reg<<1 ^ c.p.Poly
			} else {
				reg <<= 1
			}
		}
	}
	return c.finish(reg)
}

// finish maps the MSB-first register to the output value.
func (c *CRC64) finish(reg uint64) uint64 {
	if c.p.RefOut {
		reg = bits.Reverse64(reg)
	}
	return reg ^ c.p.XorOut
}

func (c *CRC64) unfinish(crc uint64) uint64 {
	crc ^= c.p.XorOut
	if c.p.RefOut {
		crc = bits.Reverse64(crc)
	}
	return crc
}
