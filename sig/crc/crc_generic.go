//go:build !amd64

package crc

// archLevel is the implementation T10DIF and CRC64 use: the slicing tables.
const archLevel = levelGeneric

// archLevels lists the implementations this machine can run besides the
// tables, best last, with their names.
var archLevels = []struct {
	level int
	name  string
}{}

// foldArch is the assembly entry point; without assembly it leaves all of
// p to the tables.
func foldArch(lvl int, k *foldKeys, reg uint64, p []byte) (uint64, []byte) {
	return reg, p
}
