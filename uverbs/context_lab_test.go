package uverbs

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"golang.org/x/sys/unix"
)

func openLab(t testing.TB) *Context {
	t.Helper()
	labenv.Require(t)
	c, err := Open(labenv.RXEDevice, &Options{DriverID: DriverRXE})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func sysfsPort(t *testing.T, attr string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", labenv.RXEDevice, "ports/1", attr))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func leadingInt(t *testing.T, s string) uint64 {
	t.Helper()
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == ' ' })
	v, err := strconv.ParseUint(f[0], 0, 64)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v
}

// Query port agrees with what the kernel publishes in sysfs.
func TestLabQueryPortMatchesSysfs(t *testing.T) {
	c := openLab(t)
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("port 1: %+v; context: %d completion vectors, core support %#x", pa, c.NumCompVectors, c.CoreSupport)
	if got, want := uint64(pa.State), leadingInt(t, sysfsPort(t, "state")); got != want {
		t.Errorf("state %d, sysfs %d", got, want)
	}
	if got, want := uint64(pa.PhysState), leadingInt(t, sysfsPort(t, "phys_state")); got != want {
		t.Errorf("phys_state %d, sysfs %d", got, want)
	}
	if got, want := uint64(pa.LID), leadingInt(t, sysfsPort(t, "lid")); got != want {
		t.Errorf("lid %d, sysfs %d", got, want)
	}
	if got, want := uint64(pa.PortCapFlags), leadingInt(t, sysfsPort(t, "cap_mask")); got != want {
		t.Errorf("port_cap_flags %#x, sysfs cap_mask %#x", got, want)
	}
	if pa.LinkLayer != 2 || sysfsPort(t, "link_layer") != "Ethernet" {
		t.Errorf("link layer %d (sysfs %q), want 2 = Ethernet", pa.LinkLayer, sysfsPort(t, "link_layer"))
	}
	gids, _ := os.ReadDir(filepath.Join("/sys/class/infiniband", labenv.RXEDevice, "ports/1/gids"))
	if int(pa.GIDTableLen) != len(gids) {
		t.Errorf("gid_tbl_len %d, sysfs has %d GID entries", pa.GIDTableLen, len(gids))
	}
	if pa.ActiveMTU == 0 || pa.ActiveMTU > pa.MaxMTU {
		t.Errorf("active MTU %d, max MTU %d", pa.ActiveMTU, pa.MaxMTU)
	}
}

func TestLabPDLifecycle(t *testing.T) {
	c := openLab(t)
	p, err := c.AllocPD(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Closing the context with live objects releases them; their Close is
	// then a no-op.
	p1, err := c.AllocPD(nil)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.AllocPD(nil)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Handle() == p2.Handle() {
		t.Errorf("two PDs share handle %d", p1.Handle())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second context Close: %v", err)
	}
	if err := p1.Close(); err != nil {
		t.Fatalf("PD Close after context Close: %v", err)
	}
	if _, err := c.AllocPD(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("AllocPD on closed context: %v, want ErrClosed", err)
	}
}

// Errors name the call and wrap the errno the kernel returned.
func TestLabErrors(t *testing.T) {
	c := openLab(t)
	_, err := c.QueryPort(2) // rxe has one port
	var ce *CallError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "query port") {
		t.Fatalf("QueryPort(2) = %v, want a CallError naming the call", err)
	}
	t.Logf("query port 2: %v", err)
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryPort(2): %v, want EINVAL", err)
	}
	bogus := &PD{object{ctx: c, handle: 0x7fff}}
	err = bogus.Close()
	t.Logf("dealloc bogus pd: %v", err)
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "dealloc pd") || ce.Errno == 0 {
		t.Fatalf("dealloc of a bogus handle = %v, want a CallError naming dealloc pd", err)
	}
	if !errors.Is(err, unix.ENOENT) {
		t.Errorf("dealloc of a bogus handle: %v, want ENOENT (no such object in the ucontext)", err)
	}
	if _, err := c.QueryPort(0); err == nil {
		t.Fatal("QueryPort(0) succeeded")
	}
}

func BenchmarkLabAllocDeallocPD(b *testing.B) {
	c := openLab(b)
	b.ReportAllocs()
	for b.Loop() {
		p, err := c.AllocPD(nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLabQueryPort(b *testing.B) {
	c := openLab(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.QueryPort(1); err != nil {
			b.Fatal(err)
		}
	}
}
