package crc

import "math/bits"

// Protection information lays data out as equal blocks, each followed by
// its signature. The Blocks functions take such a run of blocks in one
// call: n bytes of data, one block every stride bytes of p, the CRC of
// block i into sums[i]. Where the assembly folds a block whole it loops
// over the blocks itself (foldBody on amd64), so that a block costs no
// call, and the ZMM path keeps its constants in registers from one block
// to the next.

// T10DIFBlocks sets sums[i] to T10DIF(crc, p[i*stride:i*stride+n]) for
// every i below len(sums). It panics if p does not hold the blocks (the
// last one needs only its n bytes) or if stride is below n.
func T10DIFBlocks(sums []uint64, crc uint16, p []byte, n, stride int) {
	t10difBlocksWith(archLevel, sums, crc, p, n, stride)
}

func t10difBlocksWith(lvl int, sums []uint64, crc uint16, p []byte, n, stride int) {
	checkBlocks(len(sums), p, n, stride)
	if lvl != levelGeneric && foldsWhole(n) {
		foldBlocksWith(t10difKeys, lvl, uint64(crc)<<48, 0, p, n, stride, sums)
		for i := range sums {
			sums[i] >>= 48
		}
		return
	}
	for i := range sums {
		sums[i] = uint64(t10difWith(lvl, crc, p[i*stride:i*stride+n]))
	}
}

// ChecksumBlocks sets sums[i] to c.Checksum(p[i*stride:i*stride+n]) for
// every i below len(sums). It panics as T10DIFBlocks does.
func (c *CRC64) ChecksumBlocks(sums []uint64, p []byte, n, stride int) {
	c.blocksWith(archLevel, sums, p, n, stride)
}

func (c *CRC64) blocksWith(lvl int, sums []uint64, p []byte, n, stride int) {
	checkBlocks(len(sums), p, n, stride)
	if lvl != levelGeneric && !c.swap && foldsWhole(n) {
		foldBlocksWith(&c.k.keys, lvl, c.init, c.p.XorOut, p, n, stride, sums)
		return
	}
	for i := range sums {
		sums[i] = c.finish(c.k.update(lvl, c.init, p[i*stride:i*stride+n]))
	}
}

// CRC32CBlocks sets sums[i] to CRC32C(crc, p[i*stride:i*stride+n]) for
// every i below len(sums). It panics as T10DIFBlocks does.
func CRC32CBlocks(sums []uint64, crc uint32, p []byte, n, stride int) {
	crc32BlocksWith(castagnoli, archLevel, sums, crc, p, n, stride)
}

// CRC32Blocks is CRC32CBlocks for CRC32.
func CRC32Blocks(sums []uint64, crc uint32, p []byte, n, stride int) {
	crc32BlocksWith(ieee, archLevel, sums, crc, p, n, stride)
}

func crc32BlocksWith(k *kernel32, lvl int, sums []uint64, crc uint32, p []byte, n, stride int) {
	checkBlocks(len(sums), p, n, stride)
	if lvl >= fold32Level && foldsWhole(n) {
		// The register is the complement of the value, in the low 32
		// bits (see kernel32).
		foldBlocksWith(k.keys, lvl, uint64(^crc), 0xffffffff, p, n, stride, sums)
		return
	}
	for i := range sums {
		sums[i] = uint64(crc32With(k, lvl, crc, p[i*stride:i*stride+n]))
	}
}

// checkBlocks panics unless p holds count blocks of n bytes, one every
// stride bytes.
func checkBlocks(count int, p []byte, n, stride int) {
	if count == 0 {
		return
	}
	// No division: the check stands before every call of a PI loop.
	hi, span := bits.Mul64(uint64(count-1), uint64(stride))
	if n < 0 || stride < n || len(p) < n || hi != 0 || span > uint64(len(p)-n) {
		panic("crc: the buffer does not hold the blocks")
	}
}

// foldBlocksWith is foldBlocks for any number of blocks: it calls the
// assembly on at most foldChunk bytes at a time, as update does, so that
// many blocks do not hold off goroutine preemption. lvl is an
// architecture's level and n a length the assembly folds whole.
func foldBlocksWith(k *foldKeys, lvl int, reg, xor uint64, p []byte, n, stride int, sums []uint64) {
	// The common case without a division; checkBlocks has bounded the
	// product by len(p) + stride.
	switch {
	case len(sums) == 0:
		return
	case len(sums)*stride <= foldChunk:
		foldBlocks(k, lvl, reg, xor, p, n, stride, sums)
		return
	}
	per := max(1, foldChunk/stride)
	for len(sums) > per {
		foldBlocks(k, lvl, reg, xor, p, n, stride, sums[:per])
		sums, p = sums[per:], p[per*stride:]
	}
	foldBlocks(k, lvl, reg, xor, p, n, stride, sums)
}
