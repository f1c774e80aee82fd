package crc

import (
	"math/bits"
	"unsafe"
)

// Folding with carry-less multiplication (Intel, "Fast CRC Computation for
// Generic Polynomials Using PCLMULQDQ Instruction", 2009).
//
// The CRC of a message M with register value I is (I·x^n + M·x^64) mod P
// for P = x^64 + poly; xoring the register into the first 64 message bits
// leaves M'·x^64 mod P. The assembly keeps 128-bit remainders X = Xh·x^64 +
// Xl of the message read so far and moves them d bits forward with
// X·x^d ≡ Xh·(x^(d+64) mod P) + Xl·(x^d mod P), two 64×64 carry-less
// products whose sum, xored with the next 128 data bits, is again a 128-bit
// remainder. At the end X·x^64 ≡ Xh·(x^128 mod P) + Xl·x^64 is a 128-bit T,
// and Barrett reduction takes T mod P: q = floor(Th·mu / x^64) with
// mu = floor(x^128 / P), T mod P = Tl + (q·P mod x^64).
//
// The reflected (LSB-first) CRCs keep every 64-bit value bit-reversed. A
// carry-less product of two bit-reversed 64-bit values is the bit-reversed
// 127-bit product, that is the product times x in a bit-reversed 128-bit
// register, so their constants are one power lower (x^(d+63), x^(d-1),
// x^127), and the halves swap places (the low qword holds Xh).
//
// The reflected Barrett step needs no bit shift when its two multipliers
// are 65-bit values reversed: for a = rev64(A) and b = rev65(B) (bit j of b
// the coefficient of x^(64-j)), bit k of their product is the coefficient
// of x^(127-k) of A·B, with no extra x. With b = rev65(x^64 + mu), the low
// qword of the product is rev64(q); with b = rev65(P), the high qword of
// the product with rev64(q) is rev64(q·P mod x^64). Only 64 bits of b fit:
// bit 64 (the x^0 term) is dropped. In the first product it only reaches
// the high qword, which is not used; in the second it adds rev64(q) to the
// high qword when P has an x^0 term, which rp0 puts back.
//
// CRC-16/T10-DIF uses the non-reflected path with P' = (x^16 + 0x8BB7)·x^48:
// for a register r·x^48 the CRC-64 with P' is x^48 times the CRC-16 with
// the T10-DIF polynomial.

// foldKeys are the constants of one polynomial in one bit order, laid out
// for the assembly (go_asm.h gives it the field offsets). Each pair holds
// the multiplier of the low qword of a 128-bit lane, then that of the high
// qword. It is 512 bytes long, so that new(foldKeys) is 64-byte aligned
// (the heap's 512-byte size class) and no vector load of it splits a cache
// line.
type foldKeys struct {
	// fin takes the accumulators that end the data straight to T: 4 ZMM
	// (rows 0-15), 4 YMM or 8 XMM (rows 8-15), 4 XMM (rows 12-15). Row r
	// moves a lane (15-r)·128 + 64 bits, its distance to the end plus 64.
	fin   [16][2]uint64
	k384  [2]uint64 // 4 lanes -> 1: k384, k256, k128 and a zero pair are
	k256  [2]uint64 // one ZMM row; k256: 1 YMM, 32 bytes a step
	k128  [2]uint64 // 1 XMM, 16 bytes a step
	_     [2]uint64 // zero: the fourth lane of that row
	k2048 [2]uint64 // 4 ZMM accumulators, 256 bytes a step
	k1536 [2]uint64 // 4 ZMM -> 1 ZMM
	k1024 [2]uint64 // 4 YMM or 8 XMM accumulators, 128 bytes a step; 8 NEON (arm64)
	k768  [2]uint64 // 4 YMM -> 1 YMM
	k512  [2]uint64 // 4 XMM accumulators (64 bytes a step); 8 XMM -> 4; 1 ZMM; 4 YMM -> 1
	final uint64    // x^128 mod P; reflected, x^127 mod P
	mu    uint64    // floor(x^128 / P) - x^64
	poly  uint64    // P - x^64
	refl  uint64    // 1 for the reflected (LSB-first) bit order
	shuf  [16]byte
	// The reflected Barrett reduction of amd64 (see below): M and P
	// reversed as 65-bit values, each without its last bit, and the mask
	// that adds back what P's dropped bit (its x^0 term) would have.
	rbar [2]uint64
	rp0  [2]uint64
	_    [4]uint64
}

const _ uintptr = 512 - unsafe.Sizeof(foldKeys{}) // foldKeys is 512 bytes long
const _ uintptr = unsafe.Sizeof(foldKeys{}) - 512

// The rows the assembly loads whole into ZMM registers (fin's and the one
// k384 starts) begin on a cache line: a negative constant does not
// compile.
const _ uintptr = -(unsafe.Offsetof(foldKeys{}.fin) % 64)
const _ uintptr = -(unsafe.Offsetof(foldKeys{}.k384) % 64)

// xpowmod returns x^n mod P, P = x^64 + poly, in normal form.
func xpowmod(n int, poly uint64) uint64 {
	r := uint64(1)
	for range n {
		if r&(1<<63) != 0 {
			r = r<<1 ^ poly
		} else {
			r <<= 1
		}
	}
	return r
}

// barrettMu returns floor(x^128 / P) - x^64, P = x^64 + poly.
func barrettMu(poly uint64) uint64 {
	// x^(k+1) = x·q·P + x·r for x^k = q·P + r; when x·r reaches degree
	// 64 it is P + (r<<1 ^ poly), adding 1 to the quotient.
	q, r := uint64(1), poly // x^64 = 1·P + poly
	for range 64 {
		q <<= 1
		if r&(1<<63) != 0 {
			q |= 1
			r = r<<1 ^ poly
		} else {
			r <<= 1
		}
	}
	return q // the x^64 term has been shifted out
}

func reverse64(v uint64) uint64 { return bits.Reverse64(v) }

// makeFoldKeys computes the fold and Barrett constants of P = x^64 + poly.
func makeFoldKeys(poly uint64, refl bool) foldKeys {
	var k foldKeys
	pair := func(d int) [2]uint64 {
		if refl {
			return [2]uint64{reverse64(xpowmod(d+63, poly)), reverse64(xpowmod(d-1, poly))}
		}
		return [2]uint64{xpowmod(d, poly), xpowmod(d+64, poly)}
	}
	k.k2048 = pair(2048)
	k.k1536 = pair(1536)
	k.k1024 = pair(1024)
	k.k768 = pair(768)
	k.k512 = pair(512)
	k.k384 = pair(384)
	k.k256 = pair(256)
	k.k128 = pair(128)
	for i := range k.fin {
		k.fin[i] = pair((15-i)*128 + 64)
	}
	if refl {
		k.final = reverse64(xpowmod(127, poly))
		k.mu = reverse64(barrettMu(poly))
		k.poly = reverse64(poly)
		k.refl = 1
		k.rbar = [2]uint64{k.mu<<1 | 1, k.poly << 1}
		if poly&1 != 0 {
			k.rp0[1] = ^uint64(0)
		}
		for i := range k.shuf {
			k.shuf[i] = byte(i)
		}
	} else {
		k.final = xpowmod(128, poly)
		k.mu = barrettMu(poly)
		k.poly = poly
		for i := range k.shuf {
			k.shuf[i] = byte(15 - i)
		}
	}
	return k
}

// newFoldKeys returns the constants of P = x^64 + poly in a 64-byte aligned
// allocation of their own.
func newFoldKeys(poly uint64, refl bool) *foldKeys {
	k := new(foldKeys)
	*k = makeFoldKeys(poly, refl)
	return k
}

// t10difKeys are the constants of CRC-16/T10-DIF (see above).
var t10difKeys = newFoldKeys(T10DIFPoly<<48, false)
