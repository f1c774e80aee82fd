package cpio

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestExtractWithSystemCpio checks the archive with GNU cpio, an
// independent reader, when it is installed.
func TestExtractWithSystemCpio(t *testing.T) {
	bin, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("GNU cpio is not installed (apt-get install cpio); layout is still checked by TestLayout")
	}
	var b bytes.Buffer
	w := NewWriter(&b)
	if err := w.Bytes("lab/bin/x", 0o755, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := w.Dir("tmp", 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "-idm", "--quiet")
	cmd.Dir = dir
	cmd.Stdin = &b
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v: %s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "lab/bin/x"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("extracted %q, %v", got, err)
	}
	if st, err := os.Stat(filepath.Join(dir, "tmp")); err != nil || !st.IsDir() {
		t.Fatalf("tmp: %v", err)
	}
}

func TestLayout(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	if err := w.Bytes("a/f", 0o644, []byte("xyz")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	// First entry: the parent directory "a", mode 040755, nlink 2.
	if s[:6] != "070701" || s[14:22] != "000041ed" || s[38:46] != "00000002" {
		t.Fatalf("directory header = %q", s[:110])
	}
	// "a\0" after the 110-byte header: 112, padded to 112.
	f := s[112:]
	if f[14:22] != "000081a4" || f[54:62] != "00000003" || f[94:102] != "00000004" {
		t.Fatalf("file header = %q", f[:110])
	}
	if f[110:114] != "a/f\x00" || f[116:119] != "xyz" {
		t.Fatalf("file name/data = %q", f[110:120])
	}
	if b.Len()%512 != 0 {
		t.Fatalf("archive length %d is not padded to 512", b.Len())
	}
}
