//go:build amd64

package crc

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestLevelAMD64 checks that a CPU with the instructions gets the
// assembly, so that the cross-checks above do not quietly test the tables
// alone, and that the tests run every level below the one in use.
func TestLevelAMD64(t *testing.T) {
	vpclmul256 := cpu.X86.HasAVX2 && cpuid7ECX()&(1<<10) != 0
	want := []int{levelCLMUL}
	switch {
	case cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL:
		if archLevel != levelAVX512 {
			t.Errorf("AVX-512 VPCLMULQDQ CPU runs level %d, want %d", archLevel, levelAVX512)
		}
		want = append(want, levelAVX2, levelAVX512)
	case vpclmul256:
		if archLevel != levelAVX2 {
			t.Errorf("AVX2 VPCLMULQDQ CPU runs level %d, want %d", archLevel, levelAVX2)
		}
		want = append(want, levelAVX2)
	case cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41:
		if archLevel != levelCLMUL {
			t.Errorf("PCLMULQDQ CPU runs level %d, want %d", archLevel, levelCLMUL)
		}
	default:
		t.Skip("no carry-less multiply on this CPU")
	}
	var got []int
	for _, im := range archLevels {
		got = append(got, im.level)
	}
	if len(got) != len(want) {
		t.Fatalf("levels tested: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("levels tested: %v, want %v", got, want)
		}
	}
	if cpu.X86.HasAVX2 && !hasSum16 {
		t.Error("AVX2 CPU does not sum the IP checksum with AVX2")
	}
}
