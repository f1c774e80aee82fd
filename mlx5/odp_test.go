package mlx5_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/mlx5"
	"golang.org/x/sys/unix"
)

// odpMem maps n bytes the test never touches, unmapped at cleanup (the
// part still mapped).
func odpMem(t *testing.T, n int) ([]byte, func(off, length int)) {
	t.Helper()
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	gone := map[int]bool{}
	t.Cleanup(func() {
		for off := 0; off < n; off += 4096 {
			if !gone[off] {
				unix.MunmapPtr(unsafe.Add(p, off), 4096)
			}
		}
	})
	return unsafe.Slice((*byte)(p), n), func(off, length int) {
		if err := unix.MunmapPtr(unsafe.Add(p, off), uintptr(length)); err != nil {
			t.Fatal(err)
		}
		for o := off; o < off+length; o += 4096 {
			gone[o] = true
		}
	}
}

// Hostile input to the ODP calls on the model: every refusal comes before
// anything is sent, with the errno mlx5_ib would answer (ErrInvalid for
// EINVAL);
// sizes at each limit; nil, zero and closed objects.
func TestODPHostile(t *testing.T) {
	c, dev := onModel(t, "cx6dx")
	caps, err := c.ODPCaps()
	if err != nil {
		t.Fatal(err)
	}
	if caps.General != mlx5.ODPSupported|mlx5.ODPImplicit || caps.RC != 0x3f || caps.UD != mlx5.ODPSend {
		t.Errorf("model ODP caps %+v: want ODP and implicit, RC all six, UD send (the profile's odp_cap)", caps)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mem, unmap := odpMem(t, 8*4096)
	rw := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	mr, err := pd.RegMR(mem, rw|mlx5.AccessOnDemand)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := pd.RegMR(mem, mlx5.AccessRemoteRead|mlx5.AccessOnDemand)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := mlx5.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	plain, err := pd.RegMR(buf.Bytes(), rw)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.OnDemand() || !mr.OnDemand() {
		t.Errorf("OnDemand: plain %v, ODP %v", plain.OnDemand(), mr.OnDemand())
	}
	other, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.RegMR(mem, rw|mlx5.AccessOnDemand)
	if err != nil {
		t.Fatal(err)
	}
	base := mr.Addr()
	before := dev.ODPStats()
	if before.Faults != 0 || before.PrefetchedPages != 0 {
		t.Errorf("registration touched the memory: %+v", before)
	}
	many := make([]mlx5.SGE, mlx5.MaxAdviceSGEs+1)
	for i := range many {
		many[i] = mlx5.SGE{Addr: base, Length: 1, LKey: mr.LKey()}
	}
	for _, k := range []struct {
		name  string
		err   error
		errno unix.Errno
	}{
		{"no SGEs", pd.Advise(mlx5.AdvisePrefetch, 0, nil), unix.EINVAL},
		{"MaxAdviceSGEs+1", pd.Advise(mlx5.AdvisePrefetch, 0, many), unix.EINVAL},
		{"unknown advice", mr.Advise(mlx5.AdvisePrefetchNoFault+1, 0, base, 1), unix.EINVAL},
		{"unknown flag", mr.Advise(mlx5.AdvisePrefetch, mlx5.AdviseFlush<<1, base, 1), unix.EINVAL},
		{"empty range", mr.Advise(mlx5.AdvisePrefetch, 0, base, 0), unix.EINVAL},
		{"not an ODP MR", plain.Advise(mlx5.AdvisePrefetch, 0, plain.Addr(), 1), unix.ENOENT},
		{"another PD's MR", pd.Advise(mlx5.AdvisePrefetch, 0, []mlx5.SGE{{Addr: base, Length: 1, LKey: foreign.LKey()}}), unix.ENOENT},
		{"no such lkey", pd.Advise(mlx5.AdvisePrefetch, 0, []mlx5.SGE{{Addr: base, Length: 1, LKey: 0xdead00}}), unix.ENOENT},
		{"PREFETCH_WRITE, read-only MR", ro.Advise(mlx5.AdvisePrefetchWrite, 0, base, 1), unix.ENOENT},
		{"one byte past the MR", mr.Advise(mlx5.AdvisePrefetch, 0, base+8*4096-1, 2), unix.EFAULT},
		{"before the MR", mr.Advise(mlx5.AdvisePrefetch, 0, base-1, 2), unix.EFAULT},
		{"wrapping", mr.Advise(mlx5.AdvisePrefetch, 0, ^uint64(0), 2), unix.EFAULT},
	} {
		if !errors.Is(mlx5.Checked(t, k.err), k.errno) || errors.Is(k.err, mlx5.ErrInvalid) != (k.errno == unix.EINVAL) {
			t.Errorf("%s: %v, want %v (ErrInvalid with EINVAL)", k.name, k.err, k.errno)
		}
	}
	if got := dev.ODPStats(); got != before {
		t.Errorf("refused advice reached the device: %+v, then %+v", before, got)
	}
	// At the limits: the whole MR, MaxAdviceSGEs SGEs, the last byte.
	if err := mr.Advise(mlx5.AdvisePrefetchNoFault, mlx5.AdviseFlush, base, 8*4096); err != nil {
		t.Fatal(err)
	}
	if got := dev.ODPStats(); got.PrefetchedPages != 0 || got.Faults != 0 {
		t.Errorf("no-fault advice on untouched memory mapped %d pages (faults %d), want none", got.PrefetchedPages, got.Faults)
	}
	if err := pd.Advise(mlx5.AdvisePrefetchWrite, mlx5.AdviseFlush, many[:mlx5.MaxAdviceSGEs]); err != nil {
		t.Fatalf("MaxAdviceSGEs SGEs: %v", err)
	}
	if err := mr.Advise(mlx5.AdvisePrefetch, mlx5.AdviseFlush, base+8*4096-1, 1); err != nil {
		t.Fatalf("the MR's last byte: %v", err)
	}
	if err := mr.Advise(mlx5.AdvisePrefetchNoFault, 0, base, 8*4096); err != nil {
		t.Fatal(err)
	}
	if got := dev.ODPStats(); got.PrefetchedPages < 2+2 {
		t.Errorf("after prefetching the first and the last page, no-fault over the MR: %+v", got)
	}
	// A hole: the kernel's answer, EFAULT with FLUSH, none without.
	unmap(4*4096, 4096)
	if err := mr.Advise(mlx5.AdvisePrefetch, mlx5.AdviseFlush, base+4*4096, 100); !errors.Is(mlx5.Checked(t, err), unix.EFAULT) {
		t.Errorf("prefetch of an unmapped page with flush: %v, want EFAULT", err)
	}
	if err := mr.Advise(mlx5.AdvisePrefetch, 0, base+4*4096, 100); err != nil {
		t.Errorf("prefetch of an unmapped page without flush: %v, want nil (the kernel queues it)", err)
	}

	// Implicit ODP: access rules, then nil, zero and closed objects.
	if _, err := pd.RegImplicitODP(mlx5.AccessRemoteWrite); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) {
		t.Errorf("implicit ODP with remote write and no local write: %v", err)
	}
	if _, err := pd.RegImplicitODP(1 << 30); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) {
		t.Errorf("implicit ODP with an unknown flag: %v", err)
	}
	imr, err := pd.RegImplicitODP(rw)
	if err != nil {
		t.Fatal(err)
	}
	if err := imr.Advise(mlx5.AdvisePrefetchWrite, mlx5.AdviseFlush, uint64(uintptr(unsafe.Pointer(&buf.Bytes()[0]))), 4096); err != nil {
		t.Errorf("advise a Buffer through the implicit MR: %v", err)
	}
	if err := imr.Advise(mlx5.AdvisePrefetch, mlx5.AdviseFlush, base+4*4096, 1); !errors.Is(mlx5.Checked(t, err), unix.EFAULT) {
		t.Errorf("advise the hole through the implicit MR: %v, want EFAULT", err)
	}
	var nilPD *mlx5.PD
	if _, err := nilPD.RegImplicitODP(rw); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) {
		t.Errorf("nil PD: %v", err)
	}
	if err := (&mlx5.MR{}).Advise(mlx5.AdvisePrefetch, 0, 0, 1); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) {
		t.Errorf("zero MR: %v", err)
	}
	for _, m := range []*mlx5.MR{imr, mr, ro, foreign} {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := mr.Advise(mlx5.AdvisePrefetch, 0, base, 1); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("closed MR: %v", err)
	}
	if err := pd.Advise(mlx5.AdvisePrefetch, 0, []mlx5.SGE{{Addr: base, Length: 1, LKey: mr.LKey()}}); !errors.Is(mlx5.Checked(t, err), unix.ENOENT) {
		t.Errorf("a closed MR's lkey: %v", err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.RegImplicitODP(rw); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("closed PD: %v", err)
	}
	if err := other.Advise(mlx5.AdvisePrefetch, 0, []mlx5.SGE{{Addr: base, Length: 1, LKey: 1}}); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("advise on a closed PD: %v", err)
	}
}
