package uverbs

import (
	"errors"
	"math"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
	"golang.org/x/sys/unix"
)

// TestLabBTFAdviseMR checks mr_odp.go's hand-written ABI against the
// kernel's BTF: the attribute ids of UVERBS_METHOD_ADVISE_MR, the advice
// and flag enums and the SGE (the ODP cap bits, enums no kernel type
// uses, are not in BTF).
func TestLabBTFAdviseMR(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("ib_uverbs", "ib_core", "vmlinux")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, []btfcheck.Const{
		{Enum: "uverbs_attrs_advise_mr_cmd_attr_ids", Name: "UVERBS_ATTR_ADVISE_MR_PD_HANDLE", Value: attrAdviseMRPDHandle},
		{Enum: "uverbs_attrs_advise_mr_cmd_attr_ids", Name: "UVERBS_ATTR_ADVISE_MR_ADVICE", Value: attrAdviseMRAdvice},
		{Enum: "uverbs_attrs_advise_mr_cmd_attr_ids", Name: "UVERBS_ATTR_ADVISE_MR_FLAGS", Value: attrAdviseMRFlags},
		{Enum: "uverbs_attrs_advise_mr_cmd_attr_ids", Name: "UVERBS_ATTR_ADVISE_MR_SGE_LIST", Value: attrAdviseMRSGEList},
		{Enum: "ib_uverbs_advise_mr_advice", Name: "IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH", Value: uint64(AdvisePrefetch)},
		{Enum: "ib_uverbs_advise_mr_advice", Name: "IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE", Value: uint64(AdvisePrefetchWrite)},
		{Enum: "ib_uverbs_advise_mr_advice", Name: "IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT", Value: uint64(AdvisePrefetchNoFault)},
		{Enum: "ib_uverbs_advise_mr_flag", Name: "IB_UVERBS_ADVISE_MR_FLAG_FLUSH", Value: uint64(AdviseFlush)},
	})
	var sge SGE
	// The kernel sizes the list by struct ib_sge (the uapi ib_uverbs_sge,
	// which no kernel type uses, is not in BTF).
	btfcheck.CheckLayouts(t, s, []btfcheck.Layout{{Struct: "ib_sge", Size: unsafe.Sizeof(sge), Fields: []btfcheck.Field{
		{Name: "addr", Offset: unsafe.Offsetof(sge.Addr)}, {Name: "length", Offset: unsafe.Offsetof(sge.Length)},
		{Name: "lkey", Offset: unsafe.Offsetof(sge.LKey)}}}})
}

// TestLabODP: rxe0's ODP caps, an ODP MR over memory never touched, the
// advices, and an implicit ODP MR, each either done or refused with the
// kernel's errno, as the caps say: an ODP MR needs IB_ODP_SUPPORT
// (ib_check_mr_access refuses it otherwise: EINVAL in Linux 6.1,
// EOPNOTSUPP in later kernels).
func TestLabODP(t *testing.T) {
	labenv.Require(t)
	c, err := Open(labenv.RXEDevice, &Options{DriverID: DriverRXE})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rxe0 odp caps: %+v (xrc %#x), device cap flags ex %#x", a.ODPCaps, a.XRCODPCaps, uint64(a.DeviceCapFlagsEx))
	pd, err := c.AllocPD(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	mem := labMem(t, 1<<16)
	mr, err := pd.RegMR(mem, uint64(unsafePointer(mem)), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessOnDemand, nil, nil)
	if a.ODPCaps.General&ODPSupport == 0 {
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EINVAL) {
			t.Fatalf("ODP MR without IB_ODP_SUPPORT: %v, want EOPNOTSUPP or EINVAL", err)
		}
		t.Logf("ODP MR: refused, %v", err)
		return
	}
	if err != nil {
		t.Fatalf("ODP MR with IB_ODP_SUPPORT: %v", err)
	}
	defer mr.Close()
	t.Logf("ODP MR: lkey %#x", mr.LKey)
	for _, adv := range []AdviseMRAdvice{AdvisePrefetch, AdvisePrefetchWrite, AdvisePrefetchNoFault} {
		for _, fl := range []AdviseMRFlags{0, AdviseFlush} {
			err := pd.AdviseMR(adv, fl, []SGE{{Addr: uint64(unsafePointer(mem)), Length: 8192, LKey: mr.LKey}})
			t.Logf("advise %d flags %d: %v", adv, fl, err)
			if err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
				t.Errorf("advise %d flags %d: %v, want success or EOPNOTSUPP (no advise_mr)", adv, fl, err)
			}
		}
	}
	imr, err := pd.RegImplicitODP(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessOnDemand, nil, nil)
	t.Logf("implicit ODP: %v", err)
	switch {
	case a.ODPCaps.General&ODPSupportImplicit != 0 && err != nil:
		t.Errorf("implicit ODP with IB_ODP_SUPPORT_IMPLICIT: %v", err)
	case err == nil:
		if imr.Length != math.MaxUint64 || a.ODPCaps.General&ODPSupportImplicit == 0 {
			t.Errorf("implicit ODP MR %+v registered; caps %#x", imr, a.ODPCaps.General)
		}
		imr.Close()
	case !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP):
		t.Errorf("implicit ODP without the cap: %v, want EINVAL or EOPNOTSUPP", err)
	}
}
