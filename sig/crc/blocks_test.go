package crc

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// blockCases are the layouts TestBlocks runs: block sizes the assembly
// folds whole and ones it leaves to Go, contiguous and spaced out, and
// enough 4096-byte blocks that the assembly takes them in two calls.
var blockCases = []struct{ n, stride, count int }{
	{0, 0, 3}, {0, 8, 2}, {1, 1, 5}, {15, 19, 4}, {16, 16, 1}, {16, 20, 7},
	{48, 56, 3}, {512, 512, 9}, {512, 520, 17}, {512, 516, 16}, {520, 528, 5},
	{4048, 4056, 3}, {4096, 4104, 70}, {4160, 4168, 2}, {100, 150, 0},
}

// TestBlocks checks every Blocks function at every level against its
// one-buffer function on the tables, block by block.
func TestBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	params := append([]Params64{}, catalogue...)
	params = append(params, Params64{Name: "swap", Poly: 0x42F0E1EBA9EA3693, Init: 0x0123456789ABCDEF, RefIn: true, XorOut: 0x55})
	for _, bc := range blockCases {
		p := buffer(rng, max(0, (bc.count-1)*bc.stride+bc.n), 3)
		block := func(i int) []byte { return p[i*bc.stride : i*bc.stride+bc.n] }
		name := fmt.Sprintf("%d blocks of %d every %d", bc.count, bc.n, bc.stride)
		sums := make([]uint64, bc.count)
		for _, im := range impls() {
			crc16 := uint16(rng.Uint32())
			fill(sums)
			t10difBlocksWith(im.level, sums, crc16, p, bc.n, bc.stride)
			for i := range sums {
				if want := uint64(t10difWith(levelGeneric, crc16, block(i))); sums[i] != want {
					t.Fatalf("T10DIF: %s: %s: block %d: %#x, want %#x", im.name, name, i, sums[i], want)
				}
			}
			for _, prm := range params {
				c := NewCRC64(prm)
				fill(sums)
				c.blocksWith(im.level, sums, p, bc.n, bc.stride)
				for i := range sums {
					if want := checksumWith(c, levelGeneric, block(i)); sums[i] != want {
						t.Fatalf("%s: %s: %s: block %d: %#x, want %#x", prm.Name, im.name, name, i, sums[i], want)
					}
				}
			}
			for _, k := range crc32Kinds {
				crc := rng.Uint32()
				fill(sums)
				crc32BlocksWith(k.k, im.level, sums, crc, p, bc.n, bc.stride)
				for i := range sums {
					if want := uint64(crc32.Update(crc, k.tab, block(i))); sums[i] != want {
						t.Fatalf("%s: %s: %s: block %d: %#x, want %#x", k.name, im.name, name, i, sums[i], want)
					}
				}
			}
		}
		// The exported functions, at the level in use.
		fill(sums)
		T10DIFBlocks(sums, 0xffff, p, bc.n, bc.stride)
		for i := range sums {
			if want := uint64(T10DIF(0xffff, block(i))); sums[i] != want {
				t.Fatalf("T10DIFBlocks: %s: block %d: %#x, want %#x", name, i, sums[i], want)
			}
		}
		xz := NewCRC64(CRC64XZ)
		xz.ChecksumBlocks(sums, p, bc.n, bc.stride)
		for i := range sums {
			if want := xz.Checksum(block(i)); sums[i] != want {
				t.Fatalf("ChecksumBlocks: %s: block %d: %#x, want %#x", name, i, sums[i], want)
			}
		}
		CRC32CBlocks(sums, 0, p, bc.n, bc.stride)
		for i := range sums {
			if want := uint64(CRC32C(0, block(i))); sums[i] != want {
				t.Fatalf("CRC32CBlocks: %s: block %d: %#x, want %#x", name, i, sums[i], want)
			}
		}
		CRC32Blocks(sums, 0, p, bc.n, bc.stride)
		for i := range sums {
			if want := uint64(CRC32(0, block(i))); sums[i] != want {
				t.Fatalf("CRC32Blocks: %s: block %d: %#x, want %#x", name, i, sums[i], want)
			}
		}
	}
}

// fill sets every sum to a value no CRC of these tests returns, so that a
// sum left unwritten shows.
func fill(sums []uint64) {
	for i := range sums {
		sums[i] = 0xdeadbeefdeadbeef
	}
}

// TestBlocksPanic checks that a buffer too short for the blocks, or a
// stride below the block size, panics rather than reading past it.
func TestBlocksPanic(t *testing.T) {
	p := make([]byte, 2*520+511)
	sums := make([]uint64, 3)
	for name, f := range map[string]func(){
		"short":        func() { T10DIFBlocks(sums, 0, p, 512, 520) },
		"stride":       func() { CRC32CBlocks(sums[:2], 0, p, 512, 500) },
		"negative":     func() { CRC32Blocks(sums[:1], 0, p, -1, 0) },
		"short CRC-64": func() { NewCRC64(CRC64XZ).ChecksumBlocks(sums, p[:40], 16, 16) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	// Exactly long enough: the last block needs no stride after it.
	T10DIFBlocks(sums[:2], 0, p[:520+512], 512, 520)
}

func TestBlocksAllocs(t *testing.T) {
	p := make([]byte, 16*4104)
	sums := make([]uint64, 16)
	xz := NewCRC64(CRC64XZ)
	if n := testing.AllocsPerRun(100, func() {
		T10DIFBlocks(sums, 0, p, 4096, 4104)
		xz.ChecksumBlocks(sums, p, 512, 520)
		CRC32CBlocks(sums, 0, p, 512, 516)
	}); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}
