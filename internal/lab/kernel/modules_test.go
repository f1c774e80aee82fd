package kernel

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func touch(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The three layouts of Debian's kernel packages.
func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		name, image, mods, release string
	}{
		{"Debian 12", "boot/vmlinuz-6.1.0-56-amd64", "lib/modules/6.1.0-56-amd64", "6.1.0-56-amd64"},
		{"Debian 13", "boot/vmlinuz-6.12.57+deb13-amd64", "usr/lib/modules/6.12.57+deb13-amd64", "6.12.57+deb13-amd64"},
		{"Debian 14", "usr/lib/modules/7.2.13+deb14-amd64/vmlinuz", "usr/lib/modules/7.2.13+deb14-amd64", "7.2.13+deb14-amd64"},
	} {
		root := t.TempDir()
		touch(t, filepath.Join(root, tc.image), nil)
		touch(t, filepath.Join(root, tc.mods, "kernel", "x.ko"), nil)
		img, mods, rel, err := layout(root)
		if err != nil || img != tc.image || mods != tc.mods || rel != tc.release {
			t.Errorf("%s: layout = %q %q %q, %v", tc.name, img, mods, rel, err)
		}
	}
	if _, _, _, err := layout(t.TempDir()); err == nil || !strings.Contains(err.Error(), "0 kernel images") {
		t.Errorf("empty root: %v", err)
	}
}

// ModuleOrder loads dependencies first, skips modules built into the
// image, takes the first alternative the kernel has, and decompresses
// compressed modules into the cache entry.
func TestModuleOrder(t *testing.T) {
	root := t.TempDir()
	k := &Kernel{Package: "linux-image-test", Release: "9.9.9", Root: root, modDir: "usr/lib/modules/9.9.9"}
	md := k.ModuleDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("rdma_rxe module bytes"))
	zw.Close()
	touch(t, filepath.Join(md, "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.gz"), gz.Bytes())
	touch(t, filepath.Join(md, "kernel/drivers/infiniband/core/ib_core.ko"), []byte("ib_core"))
	touch(t, filepath.Join(md, "kernel/crypto/crc32-cryptoapi.ko"), []byte("crc"))
	touch(t, filepath.Join(md, "kernel/net/ipv4/udp_tunnel.ko"), []byte("udp"))
	touch(t, filepath.Join(md, "modules.builtin"), []byte("kernel/drivers/pci/controller/pci-hyperv-intf.ko\nkernel/lib/crc/crc32.ko\n"))
	deps := map[string][]string{
		"rdma_rxe.ko": {"ib_core", "udp_tunnel", "crc32"}, "ib_core.ko": nil, "crc32_cryptoapi.ko": nil, "udp_tunnel.ko": nil,
	}
	k.depends = func(path string) ([]string, error) {
		return deps[strings.ReplaceAll(filepath.Base(path), "-", "_")], nil
	}
	mods, builtin, err := k.ModuleOrder([]string{"crc32_generic|crc32_cryptoapi", "rdma_rxe", "pci-hyperv-intf"})
	if err != nil {
		t.Fatal(err)
	}
	var names, rels []string
	for _, m := range mods {
		names = append(names, m.Name)
		rels = append(rels, m.Rel)
	}
	if got := strings.Join(names, " "); got != "crc32_cryptoapi ib_core udp_tunnel rdma_rxe" {
		t.Errorf("order %q", got)
	}
	if got := strings.Join(builtin, " "); got != "crc32 pci_hyperv_intf" {
		t.Errorf("built in %q", got)
	}
	if rels[3] != "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko" {
		t.Errorf("rdma_rxe at %q", rels[3])
	}
	if b, err := os.ReadFile(mods[3].Path); err != nil || string(b) != "rdma_rxe module bytes" || !strings.HasPrefix(mods[3].Path, filepath.Join(root, "lab-ko")) {
		t.Errorf("decompressed rdma_rxe at %s: %q, %v", mods[3].Path, b, err)
	}
	if _, _, err := k.ModuleOrder([]string{"mlx5_ib"}); err == nil || !strings.Contains(err.Error(), "mlx5_ib is neither in linux-image-test nor built in") {
		t.Errorf("missing module: %v", err)
	}
	deps["ib_core.ko"] = []string{"ib_uverbs"}
	if _, _, err := k.ModuleOrder([]string{"rdma_rxe"}); err == nil || !strings.Contains(err.Error(), "ib_uverbs (needed by ib_core)") {
		t.Errorf("missing dependency: %v", err)
	}
}

// Debian 13 and later ship .ko.xz: the host's xz decompresses them.
func TestModuleXZ(t *testing.T) {
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("xz is not installed (apt-get install xz-utils)")
	}
	root := t.TempDir()
	k := &Kernel{Package: "linux-image-test", Release: "9.9.9", Root: root, modDir: "usr/lib/modules/9.9.9"}
	src := filepath.Join(k.ModuleDir(), "kernel/net/core/dummy.ko")
	touch(t, src, []byte("dummy module"))
	if out, err := exec.Command("xz", src).CombinedOutput(); err != nil {
		t.Fatalf("xz: %v %s", err, out)
	}
	k.depends = func(string) ([]string, error) { return nil, nil }
	mods, _, err := k.ModuleOrder([]string{"dummy"})
	if err != nil || len(mods) != 1 {
		t.Fatalf("%v %v", mods, err)
	}
	if b, err := os.ReadFile(mods[0].Path); err != nil || string(b) != "dummy module" || mods[0].Rel != "kernel/net/core/dummy.ko" {
		t.Errorf("%+v: %q %v", mods[0], b, err)
	}
}

// Offline, a suite's newest cached kernel is used; an entry written before
// the matrix (no suite in its marker) gets its suite when first found.
func TestCachedFallback(t *testing.T) {
	cache := t.TempDir()
	for _, e := range []struct{ dir, marker string }{
		{"linux-image-6.1.0-55-amd64_6.1.190-1", "suite=bookworm\npackage=linux-image-6.1.0-55-amd64\nversion=6.1.190-1\nrelease=6.1.0-55-amd64\n"},
		{"linux-image-6.1.0-56-amd64_6.1.192-2", "suite=bookworm\npackage=linux-image-6.1.0-56-amd64\nversion=6.1.192-2\nrelease=6.1.0-56-amd64\n"},
		{"linux-image-6.12.57+deb13-amd64_6.12.57-1", "suite=trixie\npackage=linux-image-6.12.57+deb13-amd64\nversion=6.12.57-1\nrelease=6.12.57+deb13-amd64\nvmlinuz=boot/vmlinuz-6.12.57+deb13-amd64\nmoddir=usr/lib/modules/6.12.57+deb13-amd64\n"},
	} {
		touch(t, filepath.Join(cache, e.dir, marker), []byte(e.marker))
		rel, _, _ := strings.Cut(strings.Split(e.marker, "release=")[1], "\n")
		touch(t, filepath.Join(cache, e.dir, "boot", "vmlinuz-"+rel), nil)
	}
	k, err := fallback(cache, Choice{Suite: "bookworm"}, func(string, ...any) {}, os.ErrNotExist)
	if err != nil || k.Release != "6.1.0-56-amd64" || k.Vmlinuz() != filepath.Join(cache, "linux-image-6.1.0-56-amd64_6.1.192-2", "boot", "vmlinuz-6.1.0-56-amd64") {
		t.Errorf("bookworm fallback: %v, %v", k, err)
	}
	k, err = fallback(cache, Choice{Suite: "trixie"}, func(string, ...any) {}, os.ErrNotExist)
	if err != nil || k.ModuleDir() != filepath.Join(cache, "linux-image-6.12.57+deb13-amd64_6.12.57-1", "usr/lib/modules/6.12.57+deb13-amd64") {
		t.Errorf("trixie fallback: %v, %v", k, err)
	}
	if _, err := fallback(cache, Choice{Suite: "sid"}, func(string, ...any) {}, os.ErrNotExist); err == nil || !strings.Contains(err.Error(), "cannot get the sid kernel") {
		t.Errorf("sid, nothing cached: %v", err)
	}

	// An entry of the old format: fetch finds it by package and version
	// and records the suite.
	old := "linux-image-6.1.0-57-amd64_6.1.193-1"
	touch(t, filepath.Join(cache, old, marker), []byte("package=linux-image-6.1.0-57-amd64\nversion=6.1.193-1\nrelease=6.1.0-57-amd64\n"))
	touch(t, filepath.Join(cache, old, "boot", "vmlinuz-6.1.0-57-amd64"), nil)
	k, err = fetch(t.Context(), &aptDir{suite: "bookworm"}, cache, "linux-image-6.1.0-57-amd64", "6.1.193-1", func(string, ...any) {})
	if err != nil || k.Suite != "bookworm" {
		t.Fatalf("old entry: %v, %v", k, err)
	}
	if k, err := fallback(cache, Choice{Suite: "bookworm"}, func(string, ...any) {}, os.ErrNotExist); err != nil || k.Release != "6.1.0-57-amd64" {
		t.Errorf("after the old entry got its suite: %v, %v", k, err)
	}
}
