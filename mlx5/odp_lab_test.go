package mlx5

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLabODPContext: a Context over rxe0 reports the kernel's ODP caps
// (no DEVX, so DC none), and its PD.RegMR with AccessOnDemand, MR.Advise
// and PD.RegImplicitODP pass on the kernel's answer: success where the
// caps have it, else ErrUnsupported with EOPNOTSUPP and the kernel's
// errno (an ODP MR: EINVAL on 6.1; advise_mr), or ErrUnsupported before anything is sent (implicit ODP
// without IB_ODP_SUPPORT_IMPLICIT). RC traffic through an ODP MR is
// uverbs' TestLabODPTraffic: mlx5go's data path is mlx5's, and rxe's
// queues are rxe's.
func TestLabODPContext(t *testing.T) {
	uctx := labRXE(t)
	c := newContext(&kernelDevice{ctx: uctx})
	defer c.Close()
	caps, err := c.ODPCaps()
	if err != nil {
		t.Fatal(err)
	}
	da, err := uctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(caps.General) != da.ODPCaps.General || uint32(caps.RC) != da.ODPCaps.RC || uint32(caps.UD) != da.ODPCaps.UD ||
		uint32(caps.XRC) != da.XRCODPCaps || caps.DC != 0 {
		t.Errorf("ODPCaps %+v; the kernel says %+v, xrc %#x (and no DC without DEVX)", caps, da.ODPCaps, da.XRCODPCaps)
	}
	t.Logf("rxe0 ODP caps: %+v", caps)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	b, err := AllocBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mr, err := pd.RegMR(b.Bytes(), AccessLocalWrite|AccessRemoteRead|AccessOnDemand)
	if caps.General&ODPSupported == 0 {
		if !errors.Is(err, ErrUnsupported) || !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatalf("ODP MR without ODP: %v, want ErrUnsupported and EOPNOTSUPP", err)
		}
		t.Logf("ODP MR refused: %v", err)
	} else {
		if err != nil {
			t.Fatal(err)
		}
		defer mr.Close()
		for _, adv := range []Advice{AdvisePrefetch, AdvisePrefetchWrite, AdvisePrefetchNoFault} {
			for _, fl := range []AdviceFlags{0, AdviseFlush} {
				err := mr.Advise(adv, fl, mr.Addr(), 4096)
				t.Logf("advise %d flags %d: %v", adv, fl, err)
				if err != nil && !(errors.Is(err, ErrUnsupported) && errors.Is(err, unix.EOPNOTSUPP)) {
					t.Errorf("advise %d flags %d: %v, want success or ErrUnsupported with EOPNOTSUPP", adv, fl, err)
				}
			}
		}
	}
	imr, err := pd.RegImplicitODP(AccessLocalWrite)
	t.Logf("implicit ODP: %v", err)
	if caps.General&ODPImplicit == 0 {
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("implicit ODP without the cap: %v, want ErrUnsupported", err)
		}
	} else if err != nil {
		t.Errorf("implicit ODP with the cap: %v", err)
	} else {
		imr.Close()
	}
}
