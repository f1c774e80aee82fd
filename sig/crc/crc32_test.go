package crc

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// refCRC32 is the bit-at-a-time reflected CRC-32 with the normal-form
// polynomial poly, continued from crc in hash/crc32.Update's convention.
func refCRC32(poly uint32, crc uint32, p []byte) uint32 {
	rpoly := bits.Reverse32(poly)
	reg := ^crc
	for _, b := range p {
		reg ^= uint32(b)
		for range 8 {
			if reg&1 != 0 {
				reg = reg>>1 ^ rpoly
			} else {
				reg >>= 1
			}
		}
	}
	return ^reg
}

// crc32Kinds are the CRC-32s of the package with their polynomials and
// hash/crc32 tables, the independent implementation they are compared
// with.
var crc32Kinds = []struct {
	name string
	k    *kernel32
	poly uint32
	tab  *crc32.Table
}{
	{"CRC32C", castagnoli, 0x1EDC6F41, crc32.MakeTable(crc32.Castagnoli)},
	{"CRC32", ieee, 0x04C11DB7, crc32.IEEETable},
}

func TestCRC32Check(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(uint32, []byte) uint32
		want uint32
	}{{"CRC32C", CRC32C, 0xE3069283}, {"CRC32", CRC32, 0xCBF43926}} {
		if got := tc.f(0, check); got != tc.want {
			t.Errorf("%s(0, 123456789) = %#08x, want %#08x", tc.name, got, tc.want)
		}
		if got := tc.f(tc.f(0, check[:4]), check[4:]); got != tc.want {
			t.Errorf("%s in two pieces: %#08x, want %#08x", tc.name, got, tc.want)
		}
	}
	for _, c := range crc32Kinds {
		if got, want := refCRC32(c.poly, 0, check), crc32.Checksum(check, c.tab); got != want {
			t.Errorf("%s: reference %#08x, hash/crc32 %#08x", c.name, got, want)
		}
	}
}

// TestCRC32CPublished checks the CRC32C test cases of the NVM Express NVM
// Command Set Specification ("32b CRC Test Cases": 4 KiB of 00h, FFh,
// incrementing and decrementing bytes) and of RFC 3720 (iSCSI), appendix
// B.4 (32 bytes of 00h, FFh, incrementing and decrementing bytes), with
// every implementation, and the RFC's blocks repeated to lengths that
// reach every fold path against the reference.
func TestCRC32CPublished(t *testing.T) {
	// ramp counts up from 00h or down to 00h, wrapping after FFh.
	ramp := func(n int, down bool) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
			if down {
				b[i] = byte(n - 1 - i)
			}
		}
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want uint32
	}{
		{"NVMe: 4 KiB 00h", make([]byte, 4096), 0x98F94189},
		{"NVMe: 4 KiB FFh", bytes.Repeat([]byte{0xff}, 4096), 0x25C1FE13},
		{"NVMe: 4 KiB incrementing", ramp(4096, false), 0x9C71FE32},
		{"NVMe: 4 KiB decrementing", ramp(4096, true), 0x214941A8},
		{"RFC 3720: 32 bytes 00h", make([]byte, 32), 0x8A9136AA},
		{"RFC 3720: 32 bytes FFh", bytes.Repeat([]byte{0xff}, 32), 0x62A8AB43},
		{"RFC 3720: 32 bytes 00h..1Fh", ramp(32, false), 0x46DD794E},
		{"RFC 3720: 32 bytes 1Fh..00h", ramp(32, true), 0x113FDB5C},
	} {
		for _, im := range impls() {
			if got := crc32With(castagnoli, im.level, 0, tc.data); got != tc.want {
				t.Errorf("%s: %s: %#08x, want %#08x", im.name, tc.name, got, tc.want)
			}
			for _, n := range []int{2, 3, 4, 5, 8, 9, 16, 33, 128, 129} {
				long := bytes.Repeat(tc.data, n)
				if got, want := crc32With(castagnoli, im.level, 0, long), refCRC32(0x1EDC6F41, 0, long); got != want {
					t.Errorf("%s: %s ×%d: %#08x, want %#08x", im.name, tc.name, n, got, want)
				}
			}
		}
	}
}

func TestCRC32Lengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, c := range crc32Kinds {
		for _, n := range lengths() {
			p := buffer(rng, n, n%64)
			crc := rng.Uint32()
			want := crc32.Update(crc, c.tab, p)
			for _, im := range impls() {
				if got := crc32With(c.k, im.level, crc, p); got != want {
					t.Fatalf("%s: %s: %d bytes at offset %d, crc %#08x: %#08x, want %#08x", c.name, im.name, n, n%64, crc, got, want)
				}
			}
		}
	}
}

// TestCRC32Long checks buffers that take more than one assembly call
// against the bit-at-a-time reference, which hash/crc32 is not.
func TestCRC32Long(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	long := buffer(rng, 3*foldChunk+77, 0)
	for _, c := range crc32Kinds {
		for _, n := range []int{foldChunk, foldChunk + 16, 3*foldChunk - 16, 3*foldChunk + 77} {
			want := refCRC32(c.poly, 0, long[:n])
			for _, im := range impls() {
				if got := crc32With(c.k, im.level, 0, long[:n]); got != want {
					t.Fatalf("%s: %s: %d bytes: %#08x, want %#08x", c.name, im.name, n, got, want)
				}
			}
		}
	}
}

func FuzzCRC32(f *testing.F) {
	for i, n := range fuzzLengths {
		f.Add(fuzzSeed(n), uint8(i), uint32(i)*0x9E3779B9, uint8(i*5), uint16(n/3))
	}
	f.Fuzz(checkCRC32)
}

// checkCRC32 compares every implementation of the CRC-32 which picks with
// the bit-at-a-time reference and hash/crc32, over data placed off%64
// bytes into a buffer, whole and split at split.
func checkCRC32(t *testing.T, data []byte, which uint8, crc uint32, off uint8, split uint16) {
	c := crc32Kinds[int(which)%len(crc32Kinds)]
	p := aligned(data, int(off%64))
	want := refCRC32(c.poly, crc, p)
	if got := crc32.Update(crc, c.tab, p); got != want {
		t.Fatalf("%s: hash/crc32 %#08x, reference %#08x", c.name, got, want)
	}
	s := int(split) % (len(p) + 1)
	for _, im := range impls() {
		if got := crc32With(c.k, im.level, crc, p); got != want {
			t.Fatalf("%s: %s: %d bytes at offset %d, crc %#08x: %#08x, want %#08x", c.name, im.name, len(p), off%64, crc, got, want)
		}
		if got := crc32With(c.k, im.level, crc32With(c.k, im.level, crc, p[:s]), p[s:]); got != want {
			t.Fatalf("%s: %s: %d bytes split at %d: %#08x, want %#08x", c.name, im.name, len(p), s, got, want)
		}
	}
}

func ExampleCRC32C() {
	// The NVMe 32b guard of a 4 KiB block of zeros (the NVM Command Set
	// specification's first 32b CRC test case), summed in two pieces.
	block := make([]byte, 4096)
	fmt.Printf("%#08x\n", CRC32C(CRC32C(0, block[:1000]), block[1000:]))
	// Output: 0x98f94189
}
