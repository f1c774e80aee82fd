package flows

import (
	"errors"
	"slices"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/mlx5"
	"golang.org/x/sys/unix"
)

// ODP is on-demand paging on a loopback pair: an ODP MR over memory
// mapped but never touched, RDMA WRITE into it and READ back, the
// advices, an implicit ODP MR reaching the same memory where the device
// has it, and last an RDMA WRITE into a page unmapped after registration,
// which must complete in error (REM_ACCESS_ERR at the requester), not
// reach other memory. A device without ODP refuses the MR with
// ErrUnsupported (the kernel's EOPNOTSUPP), and the flow ends there.
func ODP(t *testing.T, c *mlx5.Context) {
	caps, err := c.ODPCaps()
	if err != nil {
		t.Fatal(err)
	}
	l := NewLoopback(t, c, VerbsObjects)
	const pages = 4
	const n = pages * 4096
	// Mapped by hand (not unix.Mmap, which unmaps only whole mappings), and
	// never touched before the device reaches it.
	p, err := unix.MmapPtr(-1, 0, nil, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	mem := unsafe.Slice((*byte)(p), n)
	mapped := uintptr(n)
	t.Cleanup(func() { unix.MunmapPtr(p, mapped) })
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	mr, err := l.PD.RegMR(mem, all|mlx5.AccessOnDemand)
	if caps.General&mlx5.ODPSupported == 0 {
		if !errors.Is(err, mlx5.ErrUnsupported) || !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatalf("ODP MR on a device without ODP: %v, want ErrUnsupported and EOPNOTSUPP", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, mr)
	if !mr.OnDemand() {
		t.Error("an AccessOnDemand MR does not report OnDemand")
	}
	src, srcMR := buffer(t, l.PD, n, mlx5.AccessLocalWrite)
	back, backMR := buffer(t, l.PD, n, mlx5.AccessLocalWrite)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}

	for _, a := range []struct {
		advice mlx5.Advice
		flags  mlx5.AdviceFlags
	}{{mlx5.AdvisePrefetch, 0}, {mlx5.AdvisePrefetchWrite, mlx5.AdviseFlush}, {mlx5.AdvisePrefetchNoFault, mlx5.AdviseFlush}} {
		if err := mr.Advise(a.advice, a.flags, mr.Addr(), 4096); err != nil {
			t.Errorf("advise %d flags %d: %v", a.advice, a.flags, err)
		}
	}

	write(t, l, mlx5.SendWR{WrID: 1, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: mr.Addr(), RKey: mr.RKey(),
		SGL: []mlx5.SGE{{Addr: srcMR.Addr(), Length: n, LKey: srcMR.LKey()}}})
	if !slices.Equal(mem, src) {
		t.Errorf("RDMA WRITE into the ODP MR: data differs")
	}
	write(t, l, mlx5.SendWR{WrID: 2, Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled, RemoteAddr: mr.Addr(), RKey: mr.RKey(),
		SGL: []mlx5.SGE{{Addr: backMR.Addr(), Length: n, LKey: backMR.LKey()}}})
	if !slices.Equal(back, src) {
		t.Errorf("RDMA READ from the ODP MR: data differs")
	}

	if caps.General&mlx5.ODPImplicit != 0 {
		imr, err := l.PD.RegImplicitODP(all)
		if err != nil {
			t.Fatal(err)
		}
		if imr.Addr() != 0 || imr.Len() != ^uint64(0) || !imr.OnDemand() {
			t.Errorf("implicit ODP MR: addr %#x len %#x on-demand %v", imr.Addr(), imr.Len(), imr.OnDemand())
		}
		if err := imr.Advise(mlx5.AdvisePrefetchWrite, mlx5.AdviseFlush, mr.Addr()+4096, 4096); err != nil {
			t.Errorf("advise the implicit MR: %v", err)
		}
		clear(back)
		write(t, l, mlx5.SendWR{WrID: 3, Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled, RemoteAddr: mr.Addr() + 100, RKey: imr.RKey(),
			SGL: []mlx5.SGE{{Addr: backMR.Addr(), Length: 3000, LKey: backMR.LKey()}}})
		if !slices.Equal(back[:3000], src[100:3100]) {
			t.Errorf("RDMA READ through the implicit ODP MR: data differs")
		}
		closeAll(t, imr)
	} else if _, err := l.PD.RegImplicitODP(all); !errors.Is(err, mlx5.ErrUnsupported) {
		t.Errorf("implicit ODP without the cap: %v, want ErrUnsupported", err)
	}

	// The last page goes away: the device's fault cannot be resolved.
	if err := unix.MunmapPtr(unsafe.Add(p, n-4096), 4096); err != nil {
		t.Fatal(err)
	}
	mapped = n - 4096
	if err := l.A.PostSend(&mlx5.SendWR{WrID: 4, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: mr.Addr() + n - 4096, RKey: mr.RKey(),
		SGL: []mlx5.SGE{{Addr: srcMR.Addr(), Length: 64, LKey: srcMR.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	for {
		wc := l.Wait(t, 1)[0]
		if wc.QPN != l.A.QPN() {
			continue // B's receive queue flushes as it enters the error state
		}
		if wc.WrID != 4 || wc.Status != mlx5.WCRemAccessErr {
			t.Errorf("RDMA WRITE into an unmapped ODP page: %+v, want a remote access error", wc)
		}
		break
	}
}
