//go:build !amd64

package crc

// checksum64 is c.Checksum(p) with the implementation lvl; amd64 has it
// in assembly.
func checksum64(c *CRC64, lvl int, p []byte) uint64 { return checksum64Slow(c, lvl, p) }

// fold32 continues reg, the register of CRC32C or CRC32 (k), over p with
// the implementation lvl; amd64 has it in assembly.
func fold32(k *kernel32, lvl int, reg uint64, p []byte) uint64 {
	return fold32Slow(k, lvl, reg, p)
}
