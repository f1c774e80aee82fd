// Package crc holds the checksums of block signatures: CRC-16/T10-DIF,
// CRC32C and CRC32, the IP checksum guard of T10-DIF, and a parameterised
// CRC-64.
//
// Each function follows hash/crc32's convention: Update continues from a
// value a previous call returned, so a buffer may be summed in pieces.
//
// The Blocks functions (T10DIFBlocks, CRC32CBlocks, CRC32Blocks,
// CRC64.ChecksumBlocks) compute the CRCs of a run of equal blocks laid out
// at a fixed stride, as protection information lays out data, in one
// call. Each block's CRC is the one the function of one buffer returns; on
// amd64, for blocks of a multiple of 16 bytes, the assembly loops over the
// blocks itself, with no call between them.
//
// # Implementations
//
// The CRCs pick their implementation once, at package initialisation, from
// the CPU the program runs on (golang.org/x/sys/cpu, and CPUID for
// VPCLMULQDQ without AVX-512); all give the same results:
//
//   - amd64 with AVX-512 (F, BW, VL) and VPCLMULQDQ: carry-less multiply
//     folding in ZMM registers, 256 bytes a step, for buffers of 256 bytes
//     or more; as below under that.
//   - amd64 with AVX2 and VPCLMULQDQ (and no AVX-512): folding in YMM
//     registers, 128 bytes a step, for buffers of 128 bytes or more;
//     PCLMULQDQ in XMM registers under that.
//   - amd64 with PCLMULQDQ, SSSE3 and SSE4.1: folding in XMM registers, 64
//     bytes a step.
//   - arm64 with PMULL: folding in NEON registers, 128 bytes a step.
//   - Otherwise, and for buffers shorter than 16 bytes and the last bytes
//     of a buffer beyond a multiple of 16: slicing-by-16 tables.
//
// The fold and Barrett constants of a CRC-64 are derived from its
// polynomial in NewCRC64 (with its tables, shared between CRC64 values of
// the same polynomial and reflection), so every definition, reflected or
// not, takes the fast path; CRC-16/T10-DIF runs as a CRC-64 with its
// polynomial times x^48, and CRC32C and CRC32 as reflected CRC-64s with
// theirs times x^32. CRC32C and CRC32 fold at the YMM and ZMM levels and
// with PMULL; elsewhere, for buffers shorter than 16 bytes and for the
// last bytes beyond a multiple of 16 they are hash/crc32's (whose CRC32C
// uses the CPU's CRC32 instruction on amd64 and arm64).
//
// IPChecksum adds 16-bit words in vector registers, AVX2 on amd64 with
// AVX2 and NEON on arm64, over the longest prefix that is a multiple of
// 128 bytes; it adds 64-bit words with end-around carry in plain Go
// everywhere else and for the rest.
//
// docs/PERFORMANCE.md measures them against ISA-L.
//
// The package imports the standard library and golang.org/x/sys/cpu only.
package crc

import (
	"math/bits"
	"sync"
)

// T10DIFPoly is the CRC-16/T10-DIF generator polynomial (normal form).
const T10DIFPoly = 0x8BB7

// T10DIF continues a CRC-16/T10-DIF over p from crc, the value so far: the
// bg seed (0 or 0xFFFF) to start a block. The CRC is not reflected and has
// no final xor, so crc is the register itself. T10DIF(0, "123456789") is
// 0xD0DB.
func T10DIF(crc uint16, p []byte) uint16 {
	// One call, which the compiler inlines (see checksum64).
	return uint16(t10dif64(archLevel, uint64(crc)<<48, p) >> 48)
}

// t10dif64Slow is t10dif64 (T10DIF with the implementation lvl, the CRC
// in the top 16 bits of reg and of the result) in Go: amd64's t10dif64
// goes on with it when its assembly does not take the work, and the other
// architectures' is it.
func t10dif64Slow(lvl int, reg uint64, p []byte) uint64 {
	return uint64(t10difWith(lvl, uint16(reg>>48), p)) << 48
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

// Catalogued CRC-64s with published check values (Greg Cook's catalogue of
// parametrised CRC algorithms; GO-ISO is hash/crc64's ISO table).
var (
	CRC64ECMA182 = Params64{Name: "CRC-64/ECMA-182", Poly: 0x42F0E1EBA9EA3693, Check: 0x6C40DF5F0B497347}
	CRC64XZ      = Params64{Name: "CRC-64/XZ", Poly: 0x42F0E1EBA9EA3693, Init: ^uint64(0), RefIn: true, RefOut: true, XorOut: ^uint64(0), Check: 0x995DC9BBDF1939FA}
	CRC64GoISO   = Params64{Name: "CRC-64/GO-ISO", Poly: 0x000000000000001B, Init: ^uint64(0), RefIn: true, RefOut: true, XorOut: ^uint64(0), Check: 0xB90956C775A41001}
	CRC64WE      = Params64{Name: "CRC-64/WE", Poly: 0x42F0E1EBA9EA3693, Init: ^uint64(0), XorOut: ^uint64(0), Check: 0x62EC59E3F1A4F00A}
	// CRC64NVMe is the NVMe CRC-64 guard (NVM Command Set, 64b guard
	// protection information; the Linux kernel's crc64_nvme, formerly
	// crc64_rocksoft).
	CRC64NVMe  = Params64{Name: "CRC-64/NVME", Poly: 0xAD93D23594C93659, Init: ^uint64(0), RefIn: true, RefOut: true, XorOut: ^uint64(0), Check: 0xAE8B14860A799888}
	CRC64Redis = Params64{Name: "CRC-64/REDIS", Poly: 0xAD93D23594C935A9, RefIn: true, RefOut: true, Check: 0xE9C6D914C4B8D9CA}
	CRC64MS    = Params64{Name: "CRC-64/MS", Poly: 0x259C84CBA6426349, Init: ^uint64(0), RefIn: true, RefOut: true, Check: 0x75D4B74F024ECEEA}
)

// CRC64 computes one CRC-64 definition. It is safe for concurrent use.
type CRC64 struct {
	p    Params64
	k    *kernel64
	init uint64 // the kernel's register at the start
	swap bool   // RefIn != RefOut: the output is the register reversed
}

// NewCRC64 returns the CRC-64 that p defines.
func NewCRC64(p Params64) *CRC64 {
	c := &CRC64{p: p, k: kernelFor(p.Poly, p.RefIn), init: p.Init, swap: p.RefIn != p.RefOut}
	if p.RefIn {
		c.init = bits.Reverse64(p.Init)
	}
	return c
}

// Params returns the definition.
func (c *CRC64) Params() Params64 { return c.p }

// Checksum returns the CRC-64 of p.
func (c *CRC64) Checksum(p []byte) uint64 {
	// One call, which the compiler inlines (see checksum64).
	return checksum64(c, archLevel, p)
}

// Checksum0 is the checksum of no data: the value to start Update from.
func (c *CRC64) Checksum0() uint64 { return c.finish(c.init) }

// Update continues crc, a value Checksum, Checksum0 or Update returned,
// over p.
func (c *CRC64) Update(crc uint64, p []byte) uint64 {
	return c.finish(c.k.update(archLevel, c.unfinish(crc), p))
}

// The kernel keeps the register MSB-first (the Rocksoft model's) when RefIn
// is false and bit-reversed (LSB-first, the reflected algorithm's register)
// when RefIn is true; finish and unfinish convert it to and from the
// output value.

func (c *CRC64) finish(reg uint64) uint64 {
	if c.swap {
		reg = bits.Reverse64(reg)
	}
	return reg ^ c.p.XorOut
}

func (c *CRC64) unfinish(crc uint64) uint64 {
	crc ^= c.p.XorOut
	if c.swap {
		crc = bits.Reverse64(crc)
	}
	return crc
}

// kernel64 is what a CRC-64 computation needs of a polynomial in one bit
// order: the slicing tables and, where the architecture folds with
// carry-less multiplication, the fold constants.
type kernel64 struct {
	keys foldKeys // first: the allocation (of its size class) is 64-byte aligned
	tab  [16][256]uint64
	refl bool
}

type kernelKey struct {
	poly uint64
	refl bool
}

var kernels struct {
	sync.Mutex
	m map[kernelKey]*kernel64
}

// kernelFor returns the kernel of poly in the given bit order, shared
// with earlier calls when it can be.
func kernelFor(poly uint64, refl bool) *kernel64 {
	kernels.Lock()
	defer kernels.Unlock()
	key := kernelKey{poly, refl}
	if k := kernels.m[key]; k != nil {
		return k
	}
	k := &kernel64{refl: refl}
	k.tab = makeTable64(poly, refl)
	k.keys = makeFoldKeys(poly, refl)
	if kernels.m == nil {
		kernels.m = make(map[kernelKey]*kernel64)
	}
	if len(kernels.m) < maxKernels {
		kernels.m[key] = k
	}
	return k
}

// maxKernels bounds the kernels kept for sharing (about 33 KiB each);
// beyond it each NewCRC64 builds its own.
const maxKernels = 64

// update continues the kernel register reg over p with the implementation
// lvl (levelGeneric, or an architecture's level).
func (k *kernel64) update(lvl int, reg uint64, p []byte) uint64 {
	if lvl != levelGeneric && foldsWhole(len(p)) {
		return fold(&k.keys, lvl, reg, p)
	}
	return k.updateAny(lvl, reg, p)
}

// checksum64Slow is checksum64 (c.Checksum with the implementation lvl)
// in Go: amd64's checksum64 goes on with it when its assembly does not
// take the work, and the other architectures' is it.
func checksum64Slow(c *CRC64, lvl int, p []byte) uint64 {
	return c.finish(c.k.update(lvl, c.init, p))
}

// updateAny is update for any length.
func (k *kernel64) updateAny(lvl int, reg uint64, p []byte) uint64 {
	if lvl != levelGeneric {
		for len(p) >= foldMin {
			n := min(len(p), foldChunk) &^ 15
			reg = fold(&k.keys, lvl, reg, p[:n])
			p = p[n:]
		}
		if len(p) == 0 {
			return reg
		}
	}
	if k.refl {
		return updateTableRefl(&k.tab, reg, p)
	}
	return updateTable(&k.tab, reg, p)
}

// levelGeneric is the pure-Go implementation, available everywhere.
const levelGeneric = 0

// impl names an implementation level.
type impl struct {
	level int
	name  string
}

// foldMin is the shortest buffer the assembly takes; it folds the longest
// prefix that is a multiple of 16 bytes and leaves the rest to the tables.
const foldMin = 16

// foldChunk bounds the bytes one assembly call takes (a few microseconds'
// work), so that a long buffer does not hold off goroutine preemption.
const foldChunk = 256 << 10

// foldsWhole reports whether one assembly call takes a buffer of n bytes
// whole, with nothing left for the tables: the common case of block
// sizes, which takes the shortest way to fold.
func foldsWhole(n int) bool { return uint(n)&15 == 0 && uint(n)-foldMin <= foldChunk-foldMin }

// t10difWith is T10DIF with the implementation lvl.
func t10difWith(lvl int, crc uint16, p []byte) uint16 {
	if lvl != levelGeneric && foldsWhole(len(p)) {
		return uint16(fold(t10difKeys, lvl, uint64(crc)<<48, p) >> 48)
	}
	return t10difAny(lvl, crc, p)
}

// t10difAny is t10difWith for any length.
func t10difAny(lvl int, crc uint16, p []byte) uint16 {
	if lvl != levelGeneric {
		for len(p) >= foldMin {
			n := min(len(p), foldChunk) &^ 15
			crc = uint16(fold(t10difKeys, lvl, uint64(crc)<<48, p[:n]) >> 48)
			p = p[n:]
		}
		if len(p) == 0 {
			return crc
		}
	}
	return updateT10DIFTable(crc, p)
}
