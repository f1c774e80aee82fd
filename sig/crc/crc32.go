package crc

import "hash/crc32"

// CRC32C continues a CRC-32C (Castagnoli, the iSCSI and NVMe 32b guard
// CRC) over p from crc, the value so far, as hash/crc32.Update does with
// the Castagnoli table: 0 starts a checksum, and the result is final (the
// register complemented). CRC32C(0, "123456789") is 0xE3069283.
func CRC32C(crc uint32, p []byte) uint32 {
	// The reflected register is the complement of the value.
	return ^uint32(fold32(castagnoli, archLevel, uint64(^crc), p))
}

// CRC32 is CRC32C for the IEEE 802.3 polynomial (hash/crc32's IEEE, the
// CRC of Ethernet and gzip). CRC32(0, "123456789") is 0xCBF43926.
func CRC32(crc uint32, p []byte) uint32 { return ^uint32(fold32(ieee, archLevel, uint64(^crc), p)) }

// kernel32 is what a reflected CRC-32 needs: the fold constants of its
// polynomial times x^32, run as a CRC-64 whose register holds the 32-bit
// register in its low half (see keys.go), and hash/crc32's table, which
// takes the buffers too short to fold, the last bytes beyond a multiple of
// 16, and everything below fold32Level.
type kernel32 struct {
	keys *foldKeys
	tab  *crc32.Table
}

var (
	castagnoli = &kernel32{newFoldKeys(0x1EDC6F41<<32, true), crc32.MakeTable(crc32.Castagnoli)}
	ieee       = &kernel32{newFoldKeys(0x04C11DB7<<32, true), crc32.IEEETable}
)

// fold32Slow is fold32 (the register of CRC32C or CRC32, k, continued
// over p with the implementation lvl) in Go: amd64's fold32 goes on with
// it when the assembly does not take p whole, and the other
// architectures' is it.
func fold32Slow(k *kernel32, lvl int, reg uint64, p []byte) uint64 {
	return uint64(^crc32With(k, lvl, ^uint32(reg), p))
}

// crc32With is CRC32C or CRC32 (k) with the implementation lvl.
func crc32With(k *kernel32, lvl int, crc uint32, p []byte) uint32 {
	if lvl < fold32Level || len(p) < foldMin {
		return crc32.Update(crc, k.tab, p)
	}
	// The reflected register is the complement of the value.
	if foldsWhole(len(p)) {
		return ^uint32(fold(k.keys, lvl, uint64(^crc), p))
	}
	reg := uint64(^crc)
	for len(p) >= foldMin {
		n := min(len(p), foldChunk) &^ 15
		reg = fold(k.keys, lvl, reg, p[:n])
		p = p[n:]
	}
	crc = ^uint32(reg)
	if len(p) == 0 {
		return crc
	}
	return crc32.Update(crc, k.tab, p)
}
