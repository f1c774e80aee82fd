//go:build arm64

package crc

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestLevelARM64 checks that a CPU with PMULL gets the assembly, so that
// the cross-checks above do not quietly test the tables alone.
func TestLevelARM64(t *testing.T) {
	if !cpu.ARM64.HasPMULL {
		t.Skip("no PMULL on this CPU")
	}
	if archLevel != levelPMULL {
		t.Errorf("PMULL CPU runs level %d, want %d", archLevel, levelPMULL)
	}
}
