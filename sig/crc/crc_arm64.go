//go:build arm64

package crc

import "golang.org/x/sys/cpu"

// levelPMULL is the arm64 implementation: PMULL on NEON registers, 128
// bytes a step.
const levelPMULL = 1

var hasPMULL = cpu.ARM64.HasPMULL

// archLevel is the implementation T10DIF and CRC64 use.
var archLevel = func() int {
	if hasPMULL {
		return levelPMULL
	}
	return levelGeneric
}()

// archLevels lists the implementations this machine can run besides the
// tables, best last, with their names.
var archLevels = func() []impl {
	var l []impl
	if hasPMULL {
		l = append(l, impl{levelPMULL, "pmull"})
	}
	return l
}()

// fold folds p into the register reg and returns the register after it.
// len(p) is at least 16 and a multiple of 16; lvl is levelPMULL.
//
//go:noescape
func fold(k *foldKeys, lvl int, reg uint64, p []byte) uint64

// fold32Level is the lowest level CRC32 and CRC32C fold at. hash/crc32
// uses the CRC32 instructions, 8 bytes at a time in one dependency chain;
// PMULL folds eight independent lanes. Not measured (no arm64 machine).
const fold32Level = levelPMULL
