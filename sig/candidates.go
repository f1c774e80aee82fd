package sig

import (
	"encoding/binary"

	"github.com/mlx5go/mlx5go/sig/crc"
)

// CRC64_XP10 is documented only as "a 64-bit CRC defined in Microsoft XP10
// compression standard"; no public source we found gives its polynomial,
// reflection, initial value or final xor. Until a ConnectX settles it (see
// MatchCRC64 and docs/SIG.md), the engine's CRC-64 is a parameter and
// every parameter set below is unverified.

// Candidate is one guess at CRC64_XP10's parameters.
type Candidate struct {
	crc.Params64
	// Guess is true for a parameter set that no catalogue publishes: a
	// catalogued CRC-64 with its initial value changed to the other seed
	// (0 for all ones, all ones for 0), which is what the device would
	// compute if its seed replaces the catalogue's initial value. False
	// means the parameters are a catalogued CRC-64 as published (its Check
	// is the published check value); that it is CRC64_XP10 is still
	// unverified.
	Guess bool
}

// Candidates are the parameter sets the CRC64_XP10 hardware test tries,
// none verified: ECMA-182, WE, XZ, GO-ISO and NVMe's Rocksoft CRC-64, each
// with initial value 0 and all ones (the two seeds the device accepts).
var Candidates = candidates()

func candidates() []Candidate {
	var list []Candidate
	for _, p := range []crc.Params64{crc.CRC64ECMA182, crc.CRC64WE, crc.CRC64XZ, crc.CRC64GoISO, crc.CRC64NVMe} {
		list = append(list, Candidate{Params64: p})
		g := p
		g.Init = ^p.Init
		g.Check = 0
		if g.Init == 0 {
			g.Name += " init 0"
		} else {
			g.Name += " init all-ones"
		}
		list = append(list, Candidate{Params64: g, Guess: true})
	}
	return list
}

// DefaultCRC64XP10 is the CRC-64 engines use for CRC64_XP10 unless
// WithCRC64 says otherwise: CRC-64/XZ's polynomial, reflection and final
// xor, with the domain's seed as initial value. It is an arbitrary choice
// among the Candidates, not a fact about the device.
var DefaultCRC64XP10 = crc.CRC64XZ

// ByteOrder is how a signature's bytes were found stored.
type ByteOrder uint8

const (
	BigEndian    ByteOrder = iota // most significant byte first, as this package stores signatures
	LittleEndian                  // least significant byte first
)

func (o ByteOrder) String() string {
	if o == LittleEndian {
		return "little-endian"
	}
	return "big-endian"
}

// Match is a candidate whose CRC of the data equals the signature read in
// Order.
type Match struct {
	Candidate Candidate
	Order     ByteOrder
}

// MatchCRC64 returns the Candidates whose CRC-64 of data equals signature,
// the 8 bytes a device stored after a block of data, read big-endian or
// little-endian. A hardware test configures a CRC64_XP10 domain with each
// seed, lets the device generate signatures over known blocks and keeps
// the candidates that match every block; exactly one (with one byte order)
// settles the parameters.
func MatchCRC64(data []byte, signature [8]byte) []Match {
	be := binary.BigEndian.Uint64(signature[:])
	le := binary.LittleEndian.Uint64(signature[:])
	var out []Match
	for _, c := range Candidates {
		sum := crc.NewCRC64(c.Params64).Checksum(data)
		if sum == be {
			out = append(out, Match{c, BigEndian})
		}
		if sum == le && le != be {
			out = append(out, Match{c, LittleEndian})
		}
	}
	return out
}

// CRC32Variant is one reading of a CRC32 or CRC32C signature a device
// stored: the initial register, the final xor and the byte order. With
// seed 0xFFFFFFFF the device is expected to compute the standard CRC
// (Init and XorOut all ones); what seed 0 means, and the byte order, are
// not documented (docs/SIG.md).
type CRC32Variant struct {
	Init, XorOut uint32
	Order        ByteOrder
}

// MatchCRC32 returns the variants (initial register 0 or all ones, final
// xor 0 or all ones, either byte order) under which the CRC32 or CRC32C
// (typ) of data equals signature, the 4 bytes a device stored after a
// block. Like MatchCRC64 it is for the hardware test that settles how the
// seed and the byte order work; the engine assumes Init = seed, XorOut all
// ones, big-endian. A typ other than the two 32-bit CRCs matches nothing.
func MatchCRC32(typ CRCType, data []byte, signature [4]byte) []CRC32Variant {
	sum32 := crc.CRC32
	switch typ {
	case CRCTypeCRC32:
	case CRCTypeCRC32C:
		sum32 = crc.CRC32C
	default:
		return nil
	}
	be := binary.BigEndian.Uint32(signature[:])
	le := binary.LittleEndian.Uint32(signature[:])
	var out []CRC32Variant
	for _, init := range []uint32{0, ^uint32(0)} {
		// crc.CRC32 and CRC32C (as hash/crc32.Update) start from the
		// complement of their argument and complement the result: that is
		// XorOut all ones.
		std := sum32(^init, data)
		for _, xor := range []uint32{0, ^uint32(0)} {
			sum := std ^ ^uint32(0) ^ xor
			if sum == be {
				out = append(out, CRC32Variant{init, xor, BigEndian})
			}
			if sum == le && le != be {
				out = append(out, CRC32Variant{init, xor, LittleEndian})
			}
		}
	}
	return out
}
