//go:build amd64

package crc

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestLevelAMD64 checks that a CPU with the instructions gets the
// assembly, so that the cross-checks above do not quietly test the tables
// alone.
func TestLevelAMD64(t *testing.T) {
	switch {
	case cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL:
		if archLevel != levelAVX512 {
			t.Errorf("AVX-512 VPCLMULQDQ CPU runs level %d, want %d", archLevel, levelAVX512)
		}
	case cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41:
		if archLevel != levelCLMUL {
			t.Errorf("PCLMULQDQ CPU runs level %d, want %d", archLevel, levelCLMUL)
		}
	default:
		t.Skip("no carry-less multiply on this CPU")
	}
	if cpu.X86.HasAVX2 && !hasSum16 {
		t.Error("AVX2 CPU does not sum the IP checksum with AVX2")
	}
}
