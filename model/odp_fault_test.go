package model

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

// TestPageFaultHandler: an ODP prefetch of pages this process does not
// map asks Options.PageFault, then looks again; with no handler, or one
// that maps nothing, the fault is not resolved (EFAULT with the flush
// flag, as pagefault_mr answers).
func TestPageFaultHandler(t *testing.T) {
	// Two pages the process maps PROT_NONE: not readable, so no ODP
	// access can be resolved until the handler grants it.
	p, _, e := unix.Syscall6(unix.SYS_MMAP, 0, 2*pageSize, unix.PROT_NONE, unix.MAP_ANON|unix.MAP_PRIVATE, ^uintptr(0), 0)
	if e != 0 {
		t.Fatal(e)
	}
	defer unix.Syscall(unix.SYS_MUNMAP, p, 2*pageSize, 0)
	base := uint64(p)

	type call struct {
		addr, length uint64
		write        bool
	}
	for _, c := range []struct {
		name    string
		handler bool
		grant   bool
		want    error
	}{
		{"no handler", false, false, unix.EFAULT},
		{"a handler that maps nothing", true, false, unix.EFAULT},
		{"a handler that maps the pages", true, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls []call
			var opt Options
			if c.handler {
				opt.PageFault = func(addr, length uint64, write bool) {
					calls = append(calls, call{addr, length, write})
					if c.grant {
						unix.Syscall(unix.SYS_MPROTECT, uintptr(addr), uintptr(length), unix.PROT_READ|unix.PROT_WRITE)
					}
				}
			}
			d, err := NewWithOptions("cx6dx", opt)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			defer unix.Syscall(unix.SYS_MPROTECT, p, 2*pageSize, unix.PROT_NONE)
			pd, _, err := d.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			mr, err := d.RegImplicitODP(pd, uverbsabi.IB_UVERBS_ACCESS_LOCAL_WRITE|uverbsabi.IB_UVERBS_ACCESS_ON_DEMAND)
			if err != nil {
				t.Fatal(err)
			}
			before := d.ODPStats().PrefetchedPages
			err = d.AdviseMR(pd, advisePrefetchWrite, adviseFlagFlush,
				[]seam.AdviceSGE{{Addr: base + 100, Length: pageSize, LKey: mr.LKey}})
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("prefetch: %v, want %v", err, c.want)
			}
			// The range is the pages the SGE touches, whole: two.
			wantCalls := []call(nil)
			if c.handler {
				wantCalls = []call{{base, 2 * pageSize, true}}
			}
			if len(calls) != len(wantCalls) || len(calls) == 1 && calls[0] != wantCalls[0] {
				t.Errorf("handler calls %+v, want %+v", calls, wantCalls)
			}
			if got := d.ODPStats().PrefetchedPages - before; c.want == nil && got != 2 || c.want != nil && got != 0 {
				t.Errorf("%d pages prefetched", got)
			}
			if c.grant {
				// Faulted in: the process's access works too.
				*(*byte)(unsafe.Add(unsafe.Pointer(nil), p)) = 1
			}
		})
	}
}
