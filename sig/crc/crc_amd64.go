//go:build amd64

package crc

import "golang.org/x/sys/cpu"

// The amd64 implementations, best last.
const (
	levelCLMUL  = 1 // PCLMULQDQ on XMM registers, 128 bytes a step
	levelAVX2   = 2 // VPCLMULQDQ on YMM registers, 128 bytes a step
	levelAVX512 = 3 // VPCLMULQDQ on ZMM registers, 256 bytes a step
)

var (
	hasCLMUL = cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSSE3 && cpu.X86.HasSSE41
	// golang.org/x/sys/cpu reports VPCLMULQDQ only on CPUs with AVX-512
	// (HasAVX512VPCLMULQDQ), but the VEX-encoded 256-bit form needs only
	// AVX and the CPUID bit (Intel SDM, VPCLMULQDQ: CPUID.(EAX=07H,
	// ECX=0):ECX[bit 10]), which CPUs without AVX-512 have too. AVX2
	// implies that leaf 7 exists and that the OS saves the YMM state.
	hasAVX2 = hasCLMUL && cpu.X86.HasAVX2 && cpuid7ECX()&(1<<10) != 0
	// The ZMM path uses the YMM one below 256 bytes.
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW &&
		cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ
)

// archLevel is the implementation the checksums use.
var archLevel = func() int {
	switch {
	case hasAVX512:
		return levelAVX512
	case hasAVX2:
		return levelAVX2
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
	if hasAVX2 {
		l = append(l, impl{levelAVX2, "avx2"})
	}
	if hasAVX512 {
		l = append(l, impl{levelAVX512, "avx512"})
	}
	return l
}()

// fold folds p into the register reg with the assembly of level lvl
// (levelCLMUL, levelAVX2 or levelAVX512) and returns the register after
// it. len(p) is at least 16 and a multiple of 16. It is the assembly of
// foldBlocks on one block, entered with the arguments in registers as
// checksum64, fold32 and t10dif64 enter it: a Go call of foldBlocks with
// a one-element result slice made a 512-byte CRC32C about 6% slower on
// an Intel Xeon with AVX-512.
//
//go:noescape
func fold(k *foldKeys, lvl int, reg uint64, p []byte) uint64

// foldBlocks sets sums[i] to the register after folding block i of p (n
// bytes, one every stride) into reg with the assembly of level lvl, xored
// with xor, all in one call. The caller has checked the
// blocks (at least one), the level and n as fold requires.
//
//go:noescape
func foldBlocks(k *foldKeys, lvl int, reg, xor uint64, p []byte, n, stride int, sums []uint64)

// checksum64 is c.Checksum(p) with the implementation lvl: the assembly
// when it takes p whole (lvl at least levelCLMUL, foldsWhole) and the
// output is not the register reversed, else checksum64Slow. Checksum is
// this one call, so that the compiler inlines it and its callers call the
// assembly straight (docs/PERFORMANCE.md).
//
//go:noescape
func checksum64(c *CRC64, lvl int, p []byte) uint64

// fold32 continues reg, the register of CRC32C or CRC32 (k), over p with
// the implementation lvl: the assembly when it takes p whole (lvl at
// least fold32Level, foldsWhole), else fold32Slow.
//
//go:noescape
func fold32(k *kernel32, lvl int, reg uint64, p []byte) uint64

// t10dif64 is T10DIF with the implementation lvl, the CRC in the top 16
// bits of reg and of the result: the assembly when it takes p whole, else
// t10dif64Slow.
//
//go:noescape
func t10dif64(lvl int, reg uint64, p []byte) uint64

// The assembly of checksum64, fold32 and t10dif64 goes on with these (a
// tail call), a use that staticcheck does not see.
var _, _, _ = checksum64Slow, fold32Slow, t10dif64Slow

// cpuid7ECX returns ECX of CPUID leaf 7, sub-leaf 0.
func cpuid7ECX() uint32

// fold32Level is the lowest level CRC32 and CRC32C fold at. Below it
// hash/crc32 is as fast: its CRC32C runs three streams of the SSE4.2
// CRC32 instruction, which outruns the XMM fold (measured on an AMD EPYC,
// docs/PERFORMANCE.md), and its CRC32 folds in XMM registers as levelCLMUL
// does.
const fold32Level = levelAVX2
