//go:build amd64

package crc

import "golang.org/x/sys/cpu"

// The amd64 implementations, best last.
const (
	levelCLMUL  = 1 // PCLMULQDQ on XMM registers, 64 bytes a step
	levelAVX512 = 2 // VPCLMULQDQ on ZMM registers, 256 bytes a step
)

var (
	hasCLMUL  = cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSSE3 && cpu.X86.HasSSE41
	hasAVX512 = hasCLMUL && cpu.X86.HasAVX2 && cpu.X86.HasAVX512F &&
		cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ
)

// archLevel is the implementation T10DIF and CRC64 use.
var archLevel = func() int {
	switch {
	case hasAVX512:
		return levelAVX512
	case hasCLMUL:
		return levelCLMUL
	}
	return levelGeneric
}()

// archLevels lists the implementations this machine can run besides the
// tables, best last, with their names.
var archLevels = func() []impl {
	var l []impl
	if hasCLMUL {
		l = append(l, impl{levelCLMUL, "pclmul"})
	}
	if hasAVX512 {
		l = append(l, impl{levelAVX512, "avx512"})
	}
	return l
}()

// fold folds p into the register reg with the assembly of level lvl
// (levelCLMUL or levelAVX512) and returns the register after it. len(p)
// is at least 16 and a multiple of 16.
//
//go:noescape
func fold(k *foldKeys, lvl int, reg uint64, p []byte) uint64
