package crc

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"math/bits"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// The bit-at-a-time references: the definitions, written for clarity, the
// oracle every fast path is compared with.

func refT10DIF(crc uint16, p []byte) uint16 {
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

// refCRC64 continues crc, an output value of the CRC-64 prm defines, over p.
func refCRC64(prm Params64, crc uint64, p []byte) uint64 {
	reg := crc ^ prm.XorOut
	if prm.RefOut {
		reg = bits.Reverse64(reg)
	}
	for _, b := range p {
		if prm.RefIn {
			b = bits.Reverse8(b)
		}
		reg ^= uint64(b) << 56
		for range 8 {
			if reg&(1<<63) != 0 {
				reg = reg<<1 ^ prm.Poly
			} else {
				reg <<= 1
			}
		}
	}
	if prm.RefOut {
		reg = bits.Reverse64(reg)
	}
	return reg ^ prm.XorOut
}

// refCRC64Start is the output value of no data.
func refCRC64Start(prm Params64) uint64 {
	reg := prm.Init
	if prm.RefOut {
		reg = bits.Reverse64(reg)
	}
	return reg ^ prm.XorOut
}

func refIPChecksum(p []byte) uint16 {
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

// impls are the implementations this machine runs: the tables always.
func impls() []impl {
	return append([]impl{{levelGeneric, "tables"}}, archLevels...)
}

var catalogue = []Params64{CRC64ECMA182, CRC64XZ, CRC64GoISO, CRC64WE, CRC64NVMe, CRC64Redis, CRC64MS}

var check = []byte("123456789")

func TestT10DIFCheck(t *testing.T) {
	inUse := "?"
	for _, im := range impls() {
		if im.level == archLevel {
			inUse = im.name
		}
	}
	// scripts/bench reads this line.
	t.Logf("implementations: %v, in use: %s", impls(), inUse)
	if got := T10DIF(0, check); got != 0xD0DB {
		t.Errorf("T10DIF(0, 123456789) = %#04x, want 0xd0db", got)
	}
	if got := refT10DIF(0, check); got != 0xD0DB {
		t.Errorf("reference: %#04x, want 0xd0db", got)
	}
}

// TestT10DIFSBC checks the CRC test cases of T10 SBC-3 (the LOGICAL BLOCK
// GUARD of 32-byte blocks), and the same blocks repeated to lengths that
// reach every fold path, against the reference.
func TestT10DIFSBC(t *testing.T) {
	inc, dec, ff00 := make([]byte, 32), make([]byte, 32), make([]byte, 32)
	for i := range 32 {
		inc[i] = byte(i)
		dec[i] = byte(0xff - i)
	}
	ff00[0], ff00[1] = 0xff, 0xff
	for _, tc := range []struct {
		name string
		data []byte
		want uint16
	}{
		{"32 bytes 00h", make([]byte, 32), 0x0000},
		{"32 bytes FFh", bytes.Repeat([]byte{0xff}, 32), 0xA293},
		{"32 bytes 00h..1Fh", inc, 0x0224},
		{"FFh FFh then 30 bytes 00h", ff00, 0x21B8},
		{"32 bytes FFh..E0h", dec, 0xA0B7},
	} {
		for _, im := range impls() {
			if got := t10difWith(im.level, 0, tc.data); got != tc.want {
				t.Errorf("%s: %s: %#04x, want %#04x", im.name, tc.name, got, tc.want)
			}
			for _, n := range []int{2, 3, 8, 16, 33, 128, 129} {
				long := bytes.Repeat(tc.data, n)
				if got, want := t10difWith(im.level, 0xffff, long), refT10DIF(0xffff, long); got != want {
					t.Errorf("%s: %s ×%d: %#04x, want %#04x", im.name, tc.name, n, got, want)
				}
			}
		}
	}
}

func TestCRC64Check(t *testing.T) {
	for _, p := range catalogue {
		if got := refCRC64(p, refCRC64Start(p), check); got != p.Check {
			t.Errorf("%s: reference %#016x, want %#016x", p.Name, got, p.Check)
		}
		c := NewCRC64(p)
		if got := c.Checksum(check); got != p.Check {
			t.Errorf("%s: %#016x, want %#016x", p.Name, got, p.Check)
		}
		if got := c.Update(c.Update(c.Checksum0(), check[:4]), check[4:]); got != p.Check {
			t.Errorf("%s in two pieces: %#016x, want %#016x", p.Name, got, p.Check)
		}
		if got, want := c.Checksum0(), refCRC64Start(p); got != want {
			t.Errorf("%s: Checksum0 %#016x, want %#016x", p.Name, got, want)
		}
	}
}

// TestCRC64NVMe checks the 64b CRC test cases of the NVM Express NVM
// Command Set Specification (section "64b CRC Test Cases"): 4 KiB of 00h,
// of FFh, of incrementing and of decrementing bytes.
func TestCRC64NVMe(t *testing.T) {
	zero, ones, inc, dec := make([]byte, 4096), bytes.Repeat([]byte{0xff}, 4096), make([]byte, 4096), make([]byte, 4096)
	for i := range 4096 {
		inc[i] = byte(i)
		dec[i] = 0xff - byte(i)
	}
	c := NewCRC64(CRC64NVMe)
	for _, tc := range []struct {
		name string
		data []byte
		want uint64
	}{
		{"00h", zero, 0x6482D367EB22B64E},
		{"FFh", ones, 0xC0DDBA7302ECA3AC},
		{"incrementing", inc, 0x3E729F5F6750449C},
		{"decrementing", dec, 0x9A2DF64B8E9E517E},
	} {
		for _, im := range impls() {
			if got := checksumWith(c, im.level, tc.data); got != tc.want {
				t.Errorf("%s: 4 KiB %s: %#016x, want %#016x", im.name, tc.name, got, tc.want)
			}
		}
	}
}

// checksumWith is c.Checksum with the implementation lvl.
func checksumWith(c *CRC64, lvl int, p []byte) uint64 {
	return updateWith(c, lvl, c.Checksum0(), p)
}

func updateWith(c *CRC64, lvl int, crc uint64, p []byte) uint64 {
	return c.finish(c.k.update(lvl, c.unfinish(crc), p))
}

// TestCRC64HashCRC64 compares with hash/crc64, an independent
// implementation of CRC-64/XZ (its ECMA table) and CRC-64/GO-ISO.
func TestCRC64HashCRC64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 20000)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	long := buffer(rng, 4<<20+77, 0)
	for _, tc := range []struct {
		p   Params64
		tab *crc64.Table
	}{{CRC64XZ, crc64.MakeTable(crc64.ECMA)}, {CRC64GoISO, crc64.MakeTable(crc64.ISO)}} {
		c := NewCRC64(tc.p)
		for _, im := range impls() {
			for n := 0; n < len(data); n += 1 + n/7 {
				if got, want := checksumWith(c, im.level, data[:n]), crc64.Checksum(data[:n], tc.tab); got != want {
					t.Fatalf("%s: %s: %d bytes: %#016x, want %#016x", im.name, tc.p.Name, n, got, want)
				}
			}
			// Across assembly chunks.
			for _, n := range []int{3*foldChunk - 16, 3*foldChunk + 5, 4<<20 + 77} {
				if got, want := checksumWith(c, im.level, long[:n]), crc64.Checksum(long[:n], tc.tab); got != want {
					t.Fatalf("%s: %s: %d bytes: %#016x, want %#016x", im.name, tc.p.Name, n, got, want)
				}
			}
		}
	}
}

func TestIPChecksum(t *testing.T) {
	// RFC 1071's example words 0001 f203 f4f5 f6f7 sum to 0xddf2 after the
	// end-around carry; the checksum is its complement.
	if got := IPChecksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}); got != ^uint16(0xddf2) {
		t.Errorf("IPChecksum = %#04x, want %#04x", got, ^uint16(0xddf2))
	}
	for _, tc := range []struct {
		data []byte
		want uint16
	}{
		{nil, 0xffff},
		{[]byte{0x12}, ^uint16(0x1200)},
		{bytes.Repeat([]byte{0xff}, 64), 0x0000},
		{bytes.Repeat([]byte{0xff}, 63), 0x00ff},
		{make([]byte, 4096), 0xffff},
	} {
		for _, vec := range ipImpls() {
			if got := ipChecksumWith(vec, tc.data); got != tc.want {
				t.Errorf("IPChecksum(% x), vector %v = %#04x, want %#04x", tc.data, vec, got, tc.want)
			}
		}
		if got := refIPChecksum(tc.data); got != tc.want {
			t.Errorf("reference(% x) = %#04x, want %#04x", tc.data, got, tc.want)
		}
	}
}

// lengths are the buffer lengths the deterministic tests sweep: all up to
// 1100, the neighbourhoods of the fold step sizes beyond, and a few that
// take more than one assembly call.
func lengths() []int {
	var ns []int
	for n := 0; n <= 1100; n++ {
		ns = append(ns, n)
	}
	for _, m := range []int{1536, 2048, 4096, 4160, 8192, 65536} {
		for d := -17; d <= 17; d++ {
			ns = append(ns, m+d)
		}
	}
	// Across the assembly's chunks.
	return append(ns, foldChunk-16, foldChunk, foldChunk+17, 2*foldChunk+3)
}

// buffer returns n random bytes starting off bytes into a new allocation.
func buffer(rng *rand.Rand, n, off int) []byte {
	b := make([]byte, n+off+64)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b[off : off+n]
}

func TestT10DIFLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range lengths() {
		p := buffer(rng, n, n%64)
		seed := uint16(rng.Uint32())
		want := refT10DIF(seed, p)
		for _, im := range impls() {
			if got := t10difWith(im.level, seed, p); got != want {
				t.Fatalf("%s: %d bytes at offset %d, seed %#04x: %#04x, want %#04x", im.name, n, n%64, seed, got, want)
			}
		}
	}
}

// randomParams returns a CRC-64 definition with random polynomial, init,
// xorout and reflections.
func randomParams(rng *rand.Rand) Params64 {
	return Params64{Name: "random", Poly: rng.Uint64() | 1, Init: rng.Uint64(), RefIn: rng.IntN(2) == 0, RefOut: rng.IntN(2) == 0, XorOut: rng.Uint64()}
}

func TestCRC64Lengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	params := append([]Params64{}, catalogue...)
	for range 8 {
		params = append(params, randomParams(rng))
	}
	// Polynomials without the x^0 term (like T10-DIF's shifted one) too.
	params = append(params, Params64{Name: "even", Poly: 0x8BB7 << 48, RefIn: true, RefOut: true})
	params = append(params, Params64{Name: "even", Poly: 0x8BB7 << 48, Init: 0x1234 << 48})
	for _, prm := range params {
		c := NewCRC64(prm)
		for _, n := range lengths() {
			if n > 5000 && prm.Name == "random" {
				continue
			}
			p := buffer(rng, n, (n/3)%64)
			crc := rng.Uint64()
			want := refCRC64(prm, crc, p)
			for _, im := range impls() {
				if got := updateWith(c, im.level, crc, p); got != want {
					t.Fatalf("%s: %+v: %d bytes, crc %#x: %#016x, want %#016x", im.name, prm, n, crc, got, want)
				}
			}
		}
	}
}

func TestIPChecksumLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range lengths() {
		p := buffer(rng, n, n%64)
		checkIPChecksum(t, p, 0)
		for i := range p {
			p[i] = 0xff
		}
		checkIPChecksum(t, p, 0)
	}
}

// TestIPChecksumLong sums buffers long enough for the vector sum to widen
// its 32-bit lanes more than once, with every word at its maximum.
func TestIPChecksumLong(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{2<<20 - 128, 2 << 20, 2<<20 + 128, 5<<20 + 131} {
		p := bytes.Repeat([]byte{0xff}, n)
		checkIPChecksum(t, p, 0)
		p[n/2] = 0xfe
		checkIPChecksum(t, p, 3)
		checkIPChecksum(t, buffer(rng, n, 0), 0)
	}
}

// TestSum16 checks the vector sum against integer sums, up to the most it
// takes (1 MiB) with every word at its maximum, where its 32-bit lanes
// come nearest to overflowing.
func TestSum16(t *testing.T) {
	if !hasSum16 {
		t.Skip("no vector sum on this architecture")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{0, 128, 256, 1024, 4096 + 128, 1 << 20} {
		for _, p := range [][]byte{bytes.Repeat([]byte{0xff}, n), buffer(rng, n, 0)} {
			var want uint64
			for i := 0; i < n; i += 2 {
				want += uint64(p[i]) | uint64(p[i+1])<<8
			}
			if got := sum16(p); got != want {
				t.Errorf("%d bytes: %#x, want %#x", n, got, want)
			}
		}
	}
}

func TestAllocs(t *testing.T) {
	p := make([]byte, 4096)
	c := NewCRC64(CRC64XZ)
	var sink uint64
	for name, f := range map[string]func(){
		"T10DIF":     func() { sink += uint64(T10DIF(0, p)) },
		"CRC64":      func() { sink += c.Update(c.Checksum0(), p) },
		"Checksum":   func() { sink += c.Checksum(p[:100]) },
		"IPChecksum": func() { sink += uint64(IPChecksum(p)) },
		"CRC32C":     func() { sink += uint64(CRC32C(0, p)) },
		"CRC32":      func() { sink += uint64(CRC32(0, p[:1000])) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
	_ = sink
}

// clmul returns the 128-bit carry-less product of a and b as hi, lo.
func clmul(a, b uint64) (hi, lo uint64) {
	for i := range 64 {
		if b>>i&1 != 0 {
			lo ^= a << i
			if i > 0 {
				hi ^= a >> (64 - i)
			}
		}
	}
	return hi, lo
}

// mulmod returns a·b mod P, P = x^64 + poly.
func mulmod(a, b, poly uint64) uint64 {
	hi, lo := clmul(a, b)
	for i := 63; i >= 0; i-- { // reduce x^(64+i) terms from the top
		if hi>>i&1 != 0 {
			hi ^= 1 << i
			phi, plo := clmul(poly, 1<<i)
			hi ^= phi
			lo ^= plo
		}
	}
	return lo
}

// TestKeys checks the fold and Barrett constants against their
// definitions: x^(a+b) = x^a·x^b mod P, and mu = floor(x^128 / P), that
// is x^128 - (x^64 + mu)·P has degree below 64.
func TestKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for range 50 {
		poly := rng.Uint64()
		a, b := rng.IntN(3000), rng.IntN(3000)
		if got, want := xpowmod(a+b, poly), mulmod(xpowmod(a, poly), xpowmod(b, poly), poly); got != want {
			t.Fatalf("poly %#x: x^%d = %#x, want x^%d·x^%d = %#x", poly, a+b, got, a, b, want)
		}
		mu := barrettMu(poly)
		// (x^64 + mu)·(x^64 + poly) = x^128 + (mu + poly)·x^64 + mu·poly
		hi, lo := clmul(mu, poly)
		hi ^= mu ^ poly
		if hi != 0 {
			t.Fatalf("poly %#x: mu %#x: x^128 - (x^64+mu)·P = %#x·x^64 + %#x", poly, mu, hi, lo)
		}
	}
	if got := xpowmod(64, 0x1B); got != 0x1B {
		t.Errorf("x^64 mod (x^64 + 0x1B) = %#x", got)
	}
}

func TestKernelShared(t *testing.T) {
	a, b := NewCRC64(CRC64XZ), NewCRC64(CRC64ECMA182)
	if a.k == b.k {
		t.Error("XZ (reflected) and ECMA-182 (not) share a kernel")
	}
	if NewCRC64(CRC64XZ).k != a.k {
		t.Error("two CRC-64/XZ do not share their kernel")
	}
}

// fuzzLengths are the seed lengths of the fuzz targets: every fold
// boundary and its neighbours.
var fuzzLengths = []int{0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 319, 320, 511, 512, 513, 1023, 1024, 1025, 4095, 4096, 4097, 4104, 4160}

func fuzzSeed(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + n)
	}
	return b
}

func FuzzT10DIF(f *testing.F) {
	for i, n := range fuzzLengths {
		f.Add(fuzzSeed(n), uint16(i*0x1111), uint8(i), uint16(n/2))
	}
	f.Fuzz(checkT10DIF)
}

// checkT10DIF compares every implementation with the reference over data
// placed off%64 bytes into a buffer, whole and split at split.
func checkT10DIF(t *testing.T, data []byte, seed uint16, off uint8, split uint16) {
	p := aligned(data, int(off%64))
	want := refT10DIF(seed, p)
	s := int(split) % (len(p) + 1)
	for _, im := range impls() {
		if got := t10difWith(im.level, seed, p); got != want {
			t.Fatalf("%s: %d bytes at offset %d, seed %#04x: %#04x, want %#04x", im.name, len(p), off%64, seed, got, want)
		}
		if got := t10difWith(im.level, t10difWith(im.level, seed, p[:s]), p[s:]); got != want {
			t.Fatalf("%s: %d bytes split at %d: %#04x, want %#04x", im.name, len(p), s, got, want)
		}
	}
}

// aligned copies data off bytes into a new allocation, so the fast paths
// see every alignment relative to the (at least 8-byte aligned) start.
func aligned(data []byte, off int) []byte {
	b := make([]byte, len(data)+off)
	copy(b[off:], data)
	return b[off:]
}

func FuzzCRC64(f *testing.F) {
	for i, n := range fuzzLengths {
		f.Add(fuzzSeed(n), uint8(i), uint64(i)*0x9E3779B97F4A7C15, uint8(i*5), uint16(n/3), uint64(0))
	}
	f.Add(fuzzSeed(300), uint8(200), uint64(1), uint8(3), uint16(100), uint64(0x8BB7<<48))
	f.Fuzz(checkCRC64)
}

// checkCRC64 compares every implementation with the reference: which
// picks a catalogue entry, or beyond the catalogue a definition with
// polynomial poly, init and xorout from crc and reflections from which's
// low bits.
func checkCRC64(t *testing.T, data []byte, which uint8, crc uint64, off uint8, split uint16, poly uint64) {
	var prm Params64
	if int(which) < len(catalogue) {
		prm = catalogue[which]
	} else {
		// Any polynomial and model: which picks the reflections.
		prm = Params64{Name: "fuzz", Poly: poly, Init: crc, RefIn: which&1 != 0, RefOut: which&2 != 0, XorOut: crc * 3}
	}
	p := aligned(data, int(off%64))
	c := NewCRC64(prm)
	want := refCRC64(prm, crc, p)
	s := int(split) % (len(p) + 1)
	for _, im := range impls() {
		if got := updateWith(c, im.level, crc, p); got != want {
			t.Fatalf("%s: %+v: %d bytes at offset %d, crc %#x: %#016x, want %#016x", im.name, prm, len(p), off%64, crc, got, want)
		}
		if got := updateWith(c, im.level, updateWith(c, im.level, crc, p[:s]), p[s:]); got != want {
			t.Fatalf("%s: %+v: %d bytes split at %d: %#016x, want %#016x", im.name, prm, len(p), s, got, want)
		}
	}
}

func FuzzIPChecksum(f *testing.F) {
	for i, n := range fuzzLengths {
		f.Add(fuzzSeed(n), uint8(i))
	}
	f.Add(bytes.Repeat([]byte{0xff}, 100), uint8(1))
	f.Fuzz(checkIPChecksum)
}

// ipImpls are the IP checksum implementations this machine runs.
func ipImpls() []bool {
	if hasSum16 {
		return []bool{false, true}
	}
	return []bool{false}
}

// checkIPChecksum compares every implementation with the reference over
// data placed off%64 bytes into a buffer.
func checkIPChecksum(t *testing.T, data []byte, off uint8) {
	p := aligned(data, int(off%64))
	want := refIPChecksum(p)
	for _, vec := range ipImpls() {
		if got := ipChecksumWith(vec, p); got != want {
			t.Fatalf("%d bytes at offset %d, vector %v: %#04x, want %#04x", len(p), off%64, vec, got, want)
		}
	}
}

// TestRandomized runs the fuzz targets' checks over random inputs, so
// that every run (and a cross-architecture run under emulation, which
// cannot fuzz) covers more than the seed corpus.
func TestRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		size := rng.IntN(5000)
		if rng.IntN(4) == 0 {
			size = rng.IntN(600)
		}
		data := buffer(rng, size, 0)
		off, split := uint8(rng.IntN(256)), uint16(rng.Uint32())
		checkT10DIF(t, data, uint16(rng.Uint32()), off, split)
		checkCRC64(t, data, uint8(rng.IntN(len(catalogue)+8)), rng.Uint64(), off, split, rng.Uint64())
		checkIPChecksum(t, data, off)
		checkCRC32(t, data, uint8(rng.IntN(2)), rng.Uint32(), off, split)
	}
}

func ExampleCRC64() {
	// The NVMe 64b guard of a 4 KiB block of zeros (the NVM Command Set
	// specification's first 64b CRC test case).
	nvme := NewCRC64(CRC64NVMe)
	fmt.Printf("%#016x\n", nvme.Checksum(make([]byte, 4096)))
	// Output: 0x6482d367eb22b64e
}

func ExampleCRC64_Update() {
	// A block summed in two pieces, as a scatter list delivers it.
	xz := NewCRC64(CRC64XZ)
	crc := xz.Update(xz.Checksum0(), []byte("1234"))
	crc = xz.Update(crc, []byte("56789"))
	fmt.Println(crc == CRC64XZ.Check)
	// Output: true
}

func ExampleIPChecksum() {
	// RFC 1071's example words; the guard is stored big-endian.
	fmt.Printf("%#04x\n", IPChecksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}))
	// Output: 0x220d
}

func ExampleT10DIF() {
	block := make([]byte, 512)
	copy(block, "hello")
	fmt.Printf("%#04x\n", T10DIF(0, block))
	// Output: 0x0cc5
}

// TestKeysAligned checks that the fold constants start on a cache line,
// so that no vector load of them splits one.
func TestKeysAligned(t *testing.T) {
	for name, k := range map[string]*foldKeys{
		"T10DIF": t10difKeys, "CRC32C": castagnoli.keys, "CRC32": ieee.keys,
		"CRC64XZ": &NewCRC64(CRC64XZ).k.keys, "CRC64 random": &NewCRC64(Params64{Poly: 0x1234567}).k.keys,
	} {
		if a := uintptr(unsafe.Pointer(k)) % 64; a != 0 {
			t.Errorf("%s: fold constants %d bytes past a cache line", name, a)
		}
	}
}

// entryLengths are the lengths TestEntries sweeps: all up to 2048, and
// around the assembly's chunk.
func entryLengths() []int {
	var ns []int
	for n := 0; n <= 2048; n++ {
		ns = append(ns, n)
	}
	return append(ns, foldChunk-16, foldChunk-1, foldChunk, foldChunk+1, foldChunk+16, 2*foldChunk+3)
}

// TestEntries checks the one calls that Checksum, T10DIF, CRC32C and
// CRC32 are (checksum64, t10dif64 and fold32: on amd64, assembly that
// folds or goes on to the Go path) at every level, the tables' too, over the lengths and
// definitions (reversed outputs among them) the assembly takes and those
// it leaves to Go, against the tables.
func TestEntries(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	params := append([]Params64{}, catalogue...)
	params = append(params,
		Params64{Name: "swap", Poly: 0x42F0E1EBA9EA3693, Init: 0x0123456789ABCDEF, RefIn: true, XorOut: 0x55},
		Params64{Name: "swap", Poly: 0x42F0E1EBA9EA3693, RefOut: true, XorOut: 0xAA << 56})
	ns := entryLengths()
	long := buffer(rng, ns[len(ns)-1], 5)
	for _, prm := range params {
		c := NewCRC64(prm)
		for _, n := range ns {
			p := long[:n]
			want := checksumWith(c, levelGeneric, p)
			for _, im := range impls() {
				if got := checksum64(c, im.level, p); got != want {
					t.Fatalf("checksum64: %s: %s: %d bytes: %#016x, want %#016x", prm.Name, im.name, n, got, want)
				}
			}
			if got := c.Checksum(p); got != want {
				t.Fatalf("Checksum: %s: %d bytes: %#016x, want %#016x", prm.Name, n, got, want)
			}
		}
	}
	for _, n := range ns {
		p := long[:n]
		crc := uint16(rng.Uint32())
		want := t10difWith(levelGeneric, crc, p)
		for _, im := range impls() {
			if got := uint16(t10dif64(im.level, uint64(crc)<<48, p) >> 48); got != want {
				t.Fatalf("t10dif64: %s: %d bytes, crc %#04x: %#04x, want %#04x", im.name, n, crc, got, want)
			}
		}
		if got := T10DIF(crc, p); got != want {
			t.Fatalf("T10DIF: %d bytes, crc %#04x: %#04x, want %#04x", n, crc, got, want)
		}
	}
	for _, k := range crc32Kinds {
		for _, n := range ns {
			p := long[:n]
			crc := rng.Uint32()
			want := crc32.Update(crc, k.tab, p)
			for _, im := range impls() {
				if got := ^uint32(fold32(k.k, im.level, uint64(^crc), p)); got != want {
					t.Fatalf("fold32: %s: %s: %d bytes, crc %#08x: %#08x, want %#08x", k.name, im.name, n, crc, got, want)
				}
			}
			got := CRC32C(crc, p)
			if k.k == ieee {
				got = CRC32(crc, p)
			}
			if got != want {
				t.Fatalf("%s: %d bytes, crc %#08x: %#08x, want %#08x", k.name, n, crc, got, want)
			}
		}
	}
}
