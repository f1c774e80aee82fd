//go:build !amd64

package crc

// checksum64 is c.Checksum(p) with the implementation lvl; amd64 has it
// in assembly.
func checksum64(c *CRC64, lvl int, p []byte) uint64 { return checksum64Slow(c, lvl, p) }

// t10dif64 is T10DIF with the implementation lvl, the CRC in the top 16
// bits of reg and of the result; amd64 has it in assembly.
func t10dif64(lvl int, reg uint64, p []byte) uint64 { return t10dif64Slow(lvl, reg, p) }

// fold32 continues reg, the register of CRC32C or CRC32 (k), over p with
// the implementation lvl; amd64 has it in assembly.
func fold32(k *kernel32, lvl int, reg uint64, p []byte) uint64 {
	return fold32Slow(k, lvl, reg, p)
}

// foldBlocks sets sums[i] to the register after folding block i of p (n
// bytes, one every stride) into reg, xored with xor; amd64 has it in
// assembly. The caller has checked the blocks.
func foldBlocks(k *foldKeys, lvl int, reg, xor uint64, p []byte, n, stride int, sums []uint64) {
	for i := range sums {
		sums[i] = fold(k, lvl, reg, p[i*stride:i*stride+n]) ^ xor
	}
}
