package main

import (
	"context"
	"strings"
	"testing"
)

// Without QEMU the lab fails at once, saying what to install.
func TestMissingQEMU(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := run(context.Background(), config{accel: "tcg", cache: t.TempDir(), pkgs: []string{"./..."}})
	if err == nil || !strings.Contains(err.Error(), "qemu-system-x86_64 not found") || !strings.Contains(err.Error(), "apt-get install -y qemu-system-x86") {
		t.Fatalf("err = %v", err)
	}
}
