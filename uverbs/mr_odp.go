package uverbs

import (
	"fmt"
	"math"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// On-demand paging (ODP): a memory region whose pages the kernel does not
// pin at registration; the device faults them in when it touches them
// (ib_umem_odp). An ordinary RegMR with AccessOnDemand is one; an
// implicit ODP MR covers the whole address space. ibv_advise_mr asks the
// kernel to fault a range in ahead of use.

// ODP capability bits: ODPCaps.General holds the general ones (enum
// ib_odp_general_cap_bits), the per-transport masks the others (enum
// ib_odp_transport_cap_bits).
const (
	ODPSupport         = 1 << 0 // IB_ODP_SUPPORT: ODP MRs exist
	ODPSupportImplicit = 1 << 1 // IB_ODP_SUPPORT_IMPLICIT: an MR over the whole address space

	ODPSupportSend    = 1 << 0 // IB_ODP_SUPPORT_SEND
	ODPSupportRecv    = 1 << 1 // IB_ODP_SUPPORT_RECV
	ODPSupportWrite   = 1 << 2 // IB_ODP_SUPPORT_WRITE
	ODPSupportRead    = 1 << 3 // IB_ODP_SUPPORT_READ
	ODPSupportAtomic  = 1 << 4 // IB_ODP_SUPPORT_ATOMIC
	ODPSupportSRQRecv = 1 << 5 // IB_ODP_SUPPORT_SRQ_RECV
)

// RegImplicitODP registers the whole address space of the process as one
// ODP memory region (ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND
// | ...)): the legacy REG_MR command with start 0, length 2^64-1 and
// hca_va 0, as libibverbs sends it. access must hold AccessOnDemand; the
// kernel's driver decides the rest (mlx5_ib: EINVAL unless its ODP caps
// have IB_ODP_SUPPORT_IMPLICIT). The MR's Addr is 0 and its Length
// math.MaxUint64.
func (p *PD) RegImplicitODP(access AccessFlags, drvIn, drvOut []byte) (*MR, error) {
	if err := access.check(); err != nil {
		return nil, fmt.Errorf("uverbs: reg implicit odp mr: %w", err)
	}
	if access&AccessOnDemand == 0 {
		return nil, fmt.Errorf("uverbs: reg implicit odp mr: access %#x lacks ON_DEMAND: %w", uint32(access), unix.EINVAL)
	}
	cmd := uverbsabi.IbUverbsRegMr{Start: 0, Length: math.MaxUint64, HcaVa: 0, PdHandle: p.handle, AccessFlags: uint32(access)}
	var resp uverbsabi.IbUverbsRegMrResp
	if err := p.ctx.InvokeWrite("reg implicit odp mr", uverbsabi.IB_USER_VERBS_CMD_REG_MR, asBytes(&cmd), asBytes(&resp), drvIn, drvOut); err != nil {
		return nil, err
	}
	m := &MR{object: object{ctx: p.ctx, handle: resp.MrHandle}, LKey: resp.Lkey, RKey: resp.Rkey, Addr: 0, Length: math.MaxUint64}
	if err := p.ctx.adopt(m); err != nil {
		return nil, err
	}
	return m, nil
}

// AdviseMRAdvice is what an advice asks for (enum
// ib_uverbs_advise_mr_advice).
type AdviseMRAdvice uint32

// Advices.
const (
	// AdvisePrefetch faults the range in for reading
	// (IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH).
	AdvisePrefetch AdviseMRAdvice = 0
	// AdvisePrefetchWrite faults it in for writing
	// (IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE).
	AdvisePrefetchWrite AdviseMRAdvice = 1
	// AdvisePrefetchNoFault maps only the pages already present, faulting
	// none (IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT).
	AdvisePrefetchNoFault AdviseMRAdvice = 2
)

// AdviseMRFlags modify an advice (enum ib_uverbs_advise_mr_flag).
type AdviseMRFlags uint32

// AdviseFlush makes the call return once the advice is carried out, not
// merely queued (IB_UVERBS_ADVISE_MR_FLAG_FLUSH).
const AdviseFlush AdviseMRFlags = 1 << 0

// SGE is one range of an advice (struct ib_uverbs_sge, 16 bytes): Length
// bytes at Addr of the MR whose lkey is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// The attributes of UVERBS_METHOD_ADVISE_MR (enum
// uverbs_attrs_advise_mr_cmd_attr_ids), checked against BTF by
// TestLabBTFAdviseMR.
const (
	attrAdviseMRPDHandle = 0 // UVERBS_ATTR_ADVISE_MR_PD_HANDLE
	attrAdviseMRAdvice   = 1 // UVERBS_ATTR_ADVISE_MR_ADVICE
	attrAdviseMRFlags    = 2 // UVERBS_ATTR_ADVISE_MR_FLAGS
	attrAdviseMRSGEList  = 3 // UVERBS_ATTR_ADVISE_MR_SGE_LIST
)

// MaxAdviseSGEs is the most SGEs one advice carries: the SGE list is one
// attribute, whose length field has 16 bits (struct ib_uverbs_attr.len),
// so 65535/16 entries.
const MaxAdviseSGEs = 0xffff / int(unsafe.Sizeof(SGE{}))

// AdviseMR gives the kernel an advice about ranges of ODP MRs of the PD
// (ibv_advise_mr): UVERBS_METHOD_ADVISE_MR on UVERBS_OBJECT_MR with the
// PD's handle, the advice (8 bytes inline), the flags (4 bytes inline)
// and the SGE list by pointer, as libibverbs 44.0's ibv_cmd_advise_mr
// sends them. The kernel refuses a driver without advise_mr with
// EOPNOTSUPP; mlx5_ib an lkey that is no ODP MR of the PD (or
// PREFETCH_WRITE on a read-only one) with ENOENT, and a range outside the
// MR with EFAULT.
func (p *PD) AdviseMR(advice AdviseMRAdvice, flags AdviseMRFlags, sges []SGE) error {
	const op = "advise mr"
	switch {
	case len(sges) == 0:
		return fmt.Errorf("uverbs: %s: no SGEs: %w", op, unix.EINVAL)
	case len(sges) > MaxAdviseSGEs:
		return fmt.Errorf("uverbs: %s: %d SGEs, at most %d fit in an attribute: %w", op, len(sges), MaxAdviseSGEs, unix.EINVAL)
	case advice > AdvisePrefetchNoFault:
		return fmt.Errorf("uverbs: %s: unknown advice %d: %w", op, advice, unix.EINVAL)
	case flags&^AdviseFlush != 0:
		return fmt.Errorf("uverbs: %s: unknown flags %#x: %w", op, uint32(flags&^AdviseFlush), unix.EINVAL)
	}
	var a Attrs
	a.IDR(attrAdviseMRPDHandle, p.handle)
	a.InUint64(attrAdviseMRAdvice, uint64(advice))
	a.InUint32(attrAdviseMRFlags, uint32(flags))
	a.In(attrAdviseMRSGEList, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(sges))), len(sges)*int(unsafe.Sizeof(SGE{}))))
	return p.ctx.Invoke(op, uverbsabi.UVERBS_OBJECT_MR, uverbsabi.UVERBS_METHOD_ADVISE_MR, &a)
}
