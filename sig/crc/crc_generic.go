//go:build !amd64 && !arm64

package crc

// archLevel is the implementation T10DIF and CRC64 use: the slicing tables.
const archLevel = levelGeneric

// archLevels lists the implementations this machine can run besides the
// tables, best last, with their names.
var archLevels []impl

// fold is the assembly entry point; without assembly no level calls it.
func fold(k *foldKeys, lvl int, reg uint64, p []byte) uint64 {
	panic("crc: no assembly on this architecture")
}

// fold32Level is above every level here: CRC32 and CRC32C are hash/crc32's.
const fold32Level = 1
