package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeUserland unpacks a small userland as Debian 12's packages lay it
// out: a program in /usr/bin, libc in the top-level /lib, the loader as
// an absolute symbolic link in /lib64, a library's version link, and a
// file the guest does not need. The ELF files are the host's own.
func fakeUserland(t *testing.T, withLibc bool) *Userland {
	t.Helper()
	prog, libc := "/usr/bin/true", "/lib/x86_64-linux-gnu/libc.so.6"
	for _, p := range []string{prog, libc} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("needs the host's %s: %v", p, err)
		}
	}
	root := t.TempDir()
	put := func(rel, src string) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(rel, target string) {
		t.Helper()
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	put("usr/bin/ucmatose", prog)
	if withLibc {
		put("lib/x86_64-linux-gnu/libc.so.6", libc)
	}
	put("lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", libc) // any ELF will do
	link("lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
	put("usr/lib/x86_64-linux-gnu/libnl-3.so.200.26.0", libc)
	link("usr/lib/x86_64-linux-gnu/libnl-3.so.200", "libnl-3.so.200.26.0")
	put("usr/share/doc/rdmacm-utils/copyright", "/dev/null")
	os.MkdirAll(filepath.Join(root, "etc/libibverbs.d"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/libibverbs.d/rxe.driver"), []byte("driver rxe\n"), 0o644)
	return &Userland{Suite: "bookworm", Root: root}
}

func TestGuestFiles(t *testing.T) {
	u := fakeUserland(t, true)
	files, err := u.GuestFiles()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]GuestFile{}
	for _, f := range files {
		got[f.Path] = f
	}
	for _, want := range []string{
		"usr/bin/ucmatose",
		"usr/lib/x86_64-linux-gnu/libc.so.6", // /lib merged under /usr
		"usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"usr/lib64/ld-linux-x86-64.so.2", // the absolute link resolved in the root
		"lib64/ld-linux-x86-64.so.2",     // where programs name the loader
		"usr/lib/x86_64-linux-gnu/libnl-3.so.200",
		"etc/libibverbs.d/rxe.driver",
	} {
		if _, ok := got[want]; !ok {
			t.Errorf("no %s in %v", want, files)
		}
	}
	if f := got["usr/lib/x86_64-linux-gnu/libnl-3.so.200"]; !strings.HasSuffix(f.Src, "libnl-3.so.200.26.0") {
		t.Errorf("the version link's source is %s, want its target", f.Src)
	}
	if f := got["lib64/ld-linux-x86-64.so.2"]; !strings.HasPrefix(f.Src, u.Root) {
		t.Errorf("the loader comes from %s, outside the unpacked root", f.Src)
	}
	for p := range got {
		if strings.HasPrefix(p, "usr/share/") {
			t.Errorf("%s is not needed in the guest", p)
		}
	}
}

// TestGuestFilesNamesMissingLibraries: a program whose library is not in
// the userland fails the build, naming both.
func TestGuestFilesNamesMissingLibraries(t *testing.T) {
	u := fakeUserland(t, false)
	_, err := u.GuestFiles()
	if err == nil || !strings.Contains(err.Error(), "usr/bin/ucmatose needs libc.so.6") {
		t.Fatalf("GuestFiles without libc: %v", err)
	}
}

func TestCachedUserland(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "userland-trixie-abc")
	os.MkdirAll(d, 0o755)
	os.WriteFile(filepath.Join(d, userlandMarker), []byte("suite=trixie\npackage=rdmacm-utils=56.1-1\npackage=librdmacm1t64=56.1-1\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "userland-trixie-incomplete"), 0o755)
	us := cachedUserlands(dir, "trixie")
	if len(us) != 1 || us[0].Suite != "trixie" || len(us[0].Packages) != 2 || us[0].Packages[1] != "librdmacm1t64=56.1-1" {
		t.Errorf("cached: %+v", us)
	}
	if us := cachedUserlands(dir, "sid"); len(us) != 0 {
		t.Errorf("sid's: %+v", us)
	}
}
