package uverbs

import (
	"fmt"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// AccessFlags are memory access rights (enum ib_uverbs_access_flags).
type AccessFlags uint32

// Access rights.
const (
	AccessLocalWrite      AccessFlags = 1 << 0  // IB_UVERBS_ACCESS_LOCAL_WRITE
	AccessRemoteWrite     AccessFlags = 1 << 1  // IB_UVERBS_ACCESS_REMOTE_WRITE
	AccessRemoteRead      AccessFlags = 1 << 2  // IB_UVERBS_ACCESS_REMOTE_READ
	AccessRemoteAtomic    AccessFlags = 1 << 3  // IB_UVERBS_ACCESS_REMOTE_ATOMIC
	AccessMWBind          AccessFlags = 1 << 4  // IB_UVERBS_ACCESS_MW_BIND
	AccessZeroBased       AccessFlags = 1 << 5  // IB_UVERBS_ACCESS_ZERO_BASED
	AccessOnDemand        AccessFlags = 1 << 6  // IB_UVERBS_ACCESS_ON_DEMAND
	AccessHugeTLB         AccessFlags = 1 << 7  // IB_UVERBS_ACCESS_HUGETLB
	AccessRelaxedOrdering AccessFlags = 1 << 20 // IB_UVERBS_ACCESS_RELAXED_ORDERING
)

const knownAccess = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic |
	AccessMWBind | AccessZeroBased | AccessOnDemand | AccessHugeTLB | AccessRelaxedOrdering

// check applies the rules every verbs provider applies: no unknown bits,
// and remote write or atomic access needs local write (IBA 10.6.3.1).
func (f AccessFlags) check() error {
	if err := f.checkKnown(); err != nil {
		return err
	}
	if f&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && f&AccessLocalWrite == 0 {
		return fmt.Errorf("remote write or atomic access requires local write")
	}
	return nil
}

// checkKnown refuses unknown bits only: a QP's access flags say what
// remote peers may do (REMOTE_WRITE alone is usual), and the kernel puts
// no local-write rule on them as it does on MRs.
func (f AccessFlags) checkKnown() error {
	if f&^knownAccess != 0 {
		return fmt.Errorf("unknown access flags %#x", uint32(f&^knownAccess))
	}
	return nil
}

// MR is a registered memory region.
type MR struct {
	object
	LKey, RKey uint32
	Addr       uintptr
	Length     uint64
}

// RegMR registers mem for the device with the given access rights. The
// kernel keeps only its address: mem must be memory the garbage
// collector neither frees nor moves while the MR lives (mmap'd memory, or
// Go memory the caller pins with a runtime.Pinner until Close, as
// mlx5.PD.RegMR does). iova is the address
// the device uses for the first byte; pass uint64 of &mem[0] for the usual
// identity mapping. drvIn and drvOut are provider data (may be nil).
func (p *PD) RegMR(mem []byte, iova uint64, access AccessFlags, drvIn, drvOut []byte) (*MR, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("uverbs: reg mr: empty region")
	}
	if err := access.check(); err != nil {
		return nil, fmt.Errorf("uverbs: reg mr: %w", err)
	}
	addr := uintptr(unsafe.Pointer(&mem[0]))
	cmd := uverbsabi.IbUverbsRegMr{Start: uint64(addr), Length: uint64(len(mem)), HcaVa: iova, PdHandle: p.handle, AccessFlags: uint32(access)}
	var resp uverbsabi.IbUverbsRegMrResp
	if err := p.ctx.InvokeWrite("reg mr", uverbsabi.IB_USER_VERBS_CMD_REG_MR, asBytes(&cmd), asBytes(&resp), drvIn, drvOut); err != nil {
		return nil, err
	}
	m := &MR{object: object{ctx: p.ctx, handle: resp.MrHandle}, LKey: resp.Lkey, RKey: resp.Rkey, Addr: addr, Length: uint64(len(mem))}
	if err := p.ctx.adopt(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Close deregisters the MR. Closing twice is safe.
func (m *MR) Close() error {
	cmd := uverbsabi.IbUverbsDeregMr{MrHandle: m.handle}
	return m.destroy(m, destroyCall{op: "dereg mr", object: uverbsabi.UVERBS_OBJECT_MR, method: uverbsabi.UVERBS_METHOD_MR_DESTROY,
		handleAttr: uverbsabi.UVERBS_ATTR_DESTROY_MR_HANDLE, writeCmd: uverbsabi.IB_USER_VERBS_CMD_DEREG_MR, cmd: asBytes(&cmd)})
}
