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

func TestParseKernels(t *testing.T) {
	got, err := parseKernels("all")
	if err != nil || len(got) != 3 || got[0].Suite != "bookworm" || got[1].Suite != "trixie" || got[2].Suite != "sid" {
		t.Errorf("all: %+v, %v", got, err)
	}
	got, err = parseKernels("trixie, linux-image-6.1.0-56-amd64=6.1.192-2")
	if err != nil || len(got) != 2 || got[0].Suite != "trixie" || got[1].Package != "linux-image-6.1.0-56-amd64" || got[1].Version != "6.1.192-2" {
		t.Errorf("list: %+v, %v", got, err)
	}
	if _, err := parseKernels("bookworm,Trixie"); err == nil || !strings.Contains(err.Error(), `"Trixie"`) {
		t.Errorf("bad suite: %v", err)
	}
}
