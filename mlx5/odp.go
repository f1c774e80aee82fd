package mlx5

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// On-demand paging (ODP; docs/MLX5.md, "On-demand paging"). An ODP memory
// region is one whose pages the kernel does not pin at registration: the
// device faults them in when it first touches them, and the kernel
// unmaps them from the device again when the process's mapping changes
// (ib_umem_odp and its MMU notifier). What that changes for mlx5go:
// memory the program mapped itself may be unmapped, remapped or swapped
// while the MR lives, and a device access to a page not mapped at that
// moment completes in error instead of reaching other memory. What it
// does not change: Go memory is still pinned (runtime.Pinner) and a
// Buffer still kept mapped until the MR is closed, because the device
// may reach it through the keys as long as they exist, and the garbage
// collector must not give it to other objects meanwhile.

// AccessOnDemand registers a memory region for on-demand paging
// (IBV_ACCESS_ON_DEMAND): PD.RegMR does not have the kernel pin its
// pages; the device faults them in when it touches them.
const AccessOnDemand AccessFlags = 1 << 6

// ODPGeneralCaps are a device's general on-demand paging caps (enum
// ibv_odp_general_caps).
type ODPGeneralCaps uint64

// General ODP caps.
const (
	ODPSupported ODPGeneralCaps = 1 << 0 // IBV_ODP_SUPPORT: AccessOnDemand MRs
	ODPImplicit  ODPGeneralCaps = 1 << 1 // IBV_ODP_SUPPORT_IMPLICIT: PD.RegImplicitODP
)

// ODPTransportCaps are the operations one transport may perform on ODP
// memory (enum ibv_odp_transport_cap_bits).
type ODPTransportCaps uint32

// Per-transport ODP caps.
const (
	ODPSend    ODPTransportCaps = 1 << 0 // IBV_ODP_SUPPORT_SEND
	ODPRecv    ODPTransportCaps = 1 << 1 // IBV_ODP_SUPPORT_RECV
	ODPWrite   ODPTransportCaps = 1 << 2 // IBV_ODP_SUPPORT_WRITE
	ODPRead    ODPTransportCaps = 1 << 3 // IBV_ODP_SUPPORT_READ
	ODPAtomic  ODPTransportCaps = 1 << 4 // IBV_ODP_SUPPORT_ATOMIC
	ODPSRQRecv ODPTransportCaps = 1 << 5 // IBV_ODP_SUPPORT_SRQ_RECV
)

// ODPCaps are a device's on-demand paging caps: the odp_caps and
// xrc_odp_caps of ibv_query_device_ex, and mlx5dv_query_device's
// dc_odp_caps (MLX5DV_CONTEXT_MASK_DC_ODP_CAPS).
type ODPCaps struct {
	General ODPGeneralCaps
	RC      ODPTransportCaps
	UC      ODPTransportCaps
	UD      ODPTransportCaps
	XRC     ODPTransportCaps
	// DC is read as libmlx5 reads it: the current ODP HCA caps'
	// dc_odp_caps (QUERY_HCA_CAP), zero without DEVX or where the query
	// fails.
	DC ODPTransportCaps
}

// ODPCaps asks the device for its on-demand paging caps (the extended
// device query, and on a context with DEVX the ODP HCA caps for DC).
func (c *Context) ODPCaps() (ODPCaps, error) {
	const op = "query odp caps"
	if err := c.checkOpen(op); err != nil {
		return ODPCaps{}, err
	}
	a, err := c.QueryDevice()
	if err != nil {
		return ODPCaps{}, wrapAs(op, c.name, "", err)
	}
	caps := ODPCaps{General: ODPGeneralCaps(a.ODPCaps.General), RC: ODPTransportCaps(a.ODPCaps.RC),
		UC: ODPTransportCaps(a.ODPCaps.UC), UD: ODPTransportCaps(a.ODPCaps.UD), XRC: ODPTransportCaps(a.XRCODPCaps)}
	if c.dev.DEVX() {
		if b, err := c.QueryHCACap(prm.MLX5_CAP_ODP, true); err == nil {
			caps.DC = dcODPCaps(b)
		}
	}
	return caps, nil
}

// dcODPCaps are the dc_odp_caps of the ODP HCA caps b, bit by bit as
// libmlx5's get_dc_odp_caps turns them into IBV_ODP_SUPPORT_* bits.
func dcODPCaps(b []byte) ODPTransportCaps {
	t := prm.OdpPerTransportServiceCap
	var caps ODPTransportCaps
	for _, f := range []struct {
		field prm.Field
		bit   ODPTransportCaps
	}{{t.Send, ODPSend}, {t.Receive, ODPRecv}, {t.Write, ODPWrite}, {t.Read, ODPRead}, {t.Atomic, ODPAtomic}, {t.SrqReceive, ODPSRQRecv}} {
		if f.field.At(prm.OdpCap.DcOdpCaps).Get(b) != 0 {
			caps |= f.bit
		}
	}
	return caps
}

// odpInfo is what an ODP MR keeps for advice: its PD and its access.
type odpInfo struct {
	pd       *PD
	access   AccessFlags
	implicit bool
}

// odpMRs are a PD's live ODP MRs by lkey, which PD.Advise checks SGEs
// against.
type odpMRs struct {
	mu sync.Mutex
	m  map[uint32]*MR
}

func (o *odpMRs) add(mr *MR) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[uint32]*MR{}
	}
	o.m[mr.lkey] = mr
}

func (o *odpMRs) remove(lkey uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, lkey)
}

func (o *odpMRs) lookup(lkey uint32) *MR {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[lkey]
}

// checkMRAccess is the access rule of every memory registration
// (ib_check_mr_access): known bits only, and remote write or atomic
// access needs local write. A dma-buf MR takes no AccessOnDemand
// (RegDmabufMR refuses it itself, as ib_uverbs' reg_dmabuf_mr handler
// does).
func checkMRAccess(op, obj string, access AccessFlags) error {
	if access&^(AccessLocalWrite|remoteAccess|AccessRelaxedOrdering|AccessOnDemand) != 0 {
		return invalid(op, obj, "access %#x", uint32(access))
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return invalid(op, obj, "remote write or atomic access needs local write (IB spec 10.6.3.1)")
	}
	return nil
}

// regErr is a registration's error from the device. An ODP registration
// the kernel refused with EOPNOTSUPP or EINVAL (ib_check_mr_access
// without IBK_ON_DEMAND_PAGING: EINVAL up to Linux 6.1, EOPNOTSUPP later)
// on a device whose caps lack ODPSupported is also ErrUnsupported and
// EOPNOTSUPP; the caps are read only then.
func (c *Context) regErr(op, obj string, access AccessFlags, err error) error {
	if access&AccessOnDemand != 0 && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)) {
		if caps, qerr := c.ODPCaps(); qerr == nil && caps.General&ODPSupported == 0 {
			return opErr(op, obj, &reasonError{msg: fmt.Sprintf("the device has no on-demand paging: %v", err),
				errs: []error{ErrUnsupported, unix.EOPNOTSUPP, err}})
		}
	}
	return opErr(op, obj, err)
}

// RegImplicitODP registers the whole address space of the process as one
// ODP memory region (implicit ODP: ibv_reg_mr(pd, NULL, SIZE_MAX,
// IBV_ACCESS_ON_DEMAND | access)): any address of the process is
// reachable through its keys, faulted in when the device touches it, and
// an address not mapped at that moment completes in error. Its Addr is 0
// and its Len math.MaxUint64. access is as for RegMR; AccessOnDemand is
// implied. Nothing is pinned or kept: the program keeps what the device
// should reach mapped (and Go memory reachable) while it is in use.
//
// The device must report ODPImplicit (ODPCaps): otherwise the call fails
// with ErrUnsupported before anything is sent (mlx5_ib would answer
// EINVAL).
func (p *PD) RegImplicitODP(access AccessFlags) (*MR, error) {
	const op = "reg implicit odp mr"
	if err := p.checkOpen(op); err != nil {
		return nil, err
	}
	obj := pdName(p.pdn)
	access |= AccessOnDemand
	if err := checkMRAccess(op, obj, access); err != nil {
		return nil, err
	}
	od, ok := p.c.dev.(seam.ODPDevice)
	if !ok {
		return nil, unsupported(op, obj, "the device has no implicit ODP")
	}
	caps, err := p.c.ODPCaps()
	if err != nil {
		return nil, wrapAs(op, obj, "", err)
	}
	if caps.General&ODPImplicit == 0 {
		return nil, unsupported(op, obj, "the device's ODP caps %#x lack IBV_ODP_SUPPORT_IMPLICIT", uint64(caps.General))
	}
	m, err := od.RegImplicitODP(p.handle, uint32(access))
	if err != nil {
		return nil, p.c.regErr(op, obj, access, err)
	}
	mr := &MR{c: p.c, handle: m.Handle, lkey: m.LKey, rkey: m.RKey, addr: 0, length: math.MaxUint64,
		odp: &odpInfo{pd: p, access: access, implicit: true}}
	return p.adoptODP(op, obj, mr)
}

// adoptODP adopts an ODP MR into its context and PD.
func (p *PD) adoptODP(op, obj string, mr *MR) (*MR, error) {
	if err := p.c.adopt(mr); err != nil {
		mr.Close()
		return nil, opErr(op, obj, err)
	}
	p.odp.add(mr)
	return mr, nil
}

// Advice is what MR.Advise and PD.Advise ask of the device (enum
// ibv_advise_mr_advice).
type Advice uint32

// Advices.
const (
	// AdvisePrefetch faults the range in for reading
	// (IBV_ADVISE_MR_ADVICE_PREFETCH).
	AdvisePrefetch Advice = Advice(uverbs.AdvisePrefetch)
	// AdvisePrefetchWrite faults it in for writing, which the MR must
	// allow (IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE).
	AdvisePrefetchWrite Advice = Advice(uverbs.AdvisePrefetchWrite)
	// AdvisePrefetchNoFault maps for the device only the pages already
	// present, faulting none (IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT).
	AdvisePrefetchNoFault Advice = Advice(uverbs.AdvisePrefetchNoFault)
)

// AdviceFlags modify an advice (enum ibv_advise_mr_flags).
type AdviceFlags uint32

// AdviseFlush makes the call return once the advice is carried out
// rather than queued (IBV_ADVISE_MR_FLAG_FLUSH): only then does a fault
// that fails (a range not mapped) fail the call.
const AdviseFlush AdviceFlags = AdviceFlags(uverbs.AdviseFlush)

// MaxAdviceSGEs is the most SGEs one PD.Advise carries: the kernel takes
// them as one attribute, whose length field has 16 bits.
const MaxAdviceSGEs = uverbs.MaxAdviseSGEs

// Advise advises the device about [addr, addr+length) of the ODP MR
// (ibv_advise_mr with one SGE): PD.Advise with the MR's lkey.
func (m *MR) Advise(advice Advice, flags AdviceFlags, addr uint64, length uint32) error {
	const op = "advise mr"
	if m == nil || m.c == nil {
		return unusable(op, "MR", "PD.RegMR", m == nil)
	}
	if m.isClosed() {
		return opErr(op, mrName(m.lkey), ErrClosed)
	}
	if m.odp == nil {
		return adviceErr(op, mrName(m.lkey), unix.ENOENT, "not an ODP MR (mlx5_ib_advise_mr finds no ODP mkey)")
	}
	return m.odp.pd.Advise(advice, flags, []SGE{{Addr: addr, Length: length, LKey: m.lkey}})
}

// Advise advises the device about the ranges of sgl, each in an ODP MR of
// this PD named by its lkey (ibv_advise_mr). Before anything is sent it
// refuses, with the errno the kernel would answer: with ErrInvalid
// (EINVAL) an empty or over-long list (more than MaxAdviceSGEs), an
// unknown advice or flag, an empty range; with ENOENT (as mlx5_ib's
// get_prefetchable_mr) an lkey that is no live ODP MR of the PD, or
// PREFETCH_WRITE on an MR without write access; with EFAULT (as
// pagefault_mr) a range outside its MR. A device without advise_mr answers
// EOPNOTSUPP, reported as ErrUnsupported too.
func (p *PD) Advise(advice Advice, flags AdviceFlags, sgl []SGE) error {
	const op = "advise mr"
	if err := p.checkOpen(op); err != nil {
		return err
	}
	obj := pdName(p.pdn)
	switch {
	case len(sgl) == 0:
		return invalid(op, obj, "no SGEs")
	case len(sgl) > MaxAdviceSGEs:
		return invalid(op, obj, "%d SGEs, at most %d", len(sgl), MaxAdviceSGEs)
	case advice > AdvisePrefetchNoFault:
		return invalid(op, obj, "unknown advice %d", advice)
	case flags&^AdviseFlush != 0:
		return invalid(op, obj, "unknown flags %#x", uint32(flags))
	}
	sges := make([]seam.AdviceSGE, len(sgl))
	for i, s := range sgl {
		if s.Length == 0 {
			return invalid(op, obj, "SGE %d: empty range", i)
		}
		mr := p.odp.lookup(s.LKey)
		if mr == nil || mr.isClosed() {
			return adviceErr(op, obj, unix.ENOENT, fmt.Sprintf("SGE %d: lkey %#x is no ODP MR of the PD", i, s.LKey))
		}
		if advice == AdvisePrefetchWrite && mr.odp.access&(AccessLocalWrite|AccessRemoteWrite|AccessRemoteAtomic) == 0 {
			return adviceErr(op, obj, unix.ENOENT, fmt.Sprintf("SGE %d: PREFETCH_WRITE on the read-only MR %#x", i, s.LKey))
		}
		if end := s.Addr + uint64(s.Length); end < s.Addr || s.Addr < mr.addr || (!mr.odp.implicit && end-mr.addr > mr.length) {
			return adviceErr(op, obj, unix.EFAULT, fmt.Sprintf("SGE %d: [%#x, +%#x) is outside the MR's [%#x, +%#x)", i, s.Addr, s.Length, mr.addr, mr.length))
		}
		sges[i] = seam.AdviceSGE{Addr: s.Addr, Length: s.Length, LKey: s.LKey}
	}
	od, ok := p.c.dev.(seam.ODPDevice)
	if !ok {
		return unsupported(op, obj, "the device takes no advice")
	}
	if err := od.AdviseMR(p.handle, uint32(advice), uint32(flags), sges); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return opErr(op, obj, &reasonError{msg: fmt.Sprintf("advise_mr: %v", err), errs: []error{ErrUnsupported, err}})
		}
		return opErr(op, obj, err)
	}
	return nil
}

// adviceErr is an advice refused before it is sent with the errno the
// kernel would have answered (ENOENT, EFAULT: not ErrInvalid, which is
// EINVAL).
func adviceErr(op, obj string, errno unix.Errno, why string) error {
	return opErr(op, obj, &reasonError{msg: why, errs: []error{errno}})
}

func mrName(lkey uint32) string { return fmt.Sprintf("MR lkey %#x", lkey) }

// isClosed reports whether Close succeeded.
func (m *MR) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// OnDemand reports whether the MR was registered for on-demand paging
// (AccessOnDemand, or RegImplicitODP); false for a nil MR.
func (m *MR) OnDemand() bool { return m != nil && m.odp != nil }

// forgetODP drops a closed ODP MR from its PD's table.
func (m *MR) forgetODP() {
	if m.odp != nil {
		m.odp.pd.odp.remove(m.lkey)
	}
}

// RegImplicitODP is mlx5_ib's implicit ODP registration: REG_MR with
// start 0, length U64_MAX (uverbs.PD.RegImplicitODP).
func (k *kernelDevice) RegImplicitODP(pdh seam.Handle, access uint32) (seam.MR, error) {
	pd, err := k.pd("reg implicit odp mr", pdh)
	if err != nil {
		return seam.MR{}, err
	}
	return k.keepMR(pd.RegImplicitODP(uverbs.AccessFlags(access), nil, nil))
}

// AdviseMR is UVERBS_METHOD_ADVISE_MR (uverbs.PD.AdviseMR).
func (k *kernelDevice) AdviseMR(pdh seam.Handle, advice, flags uint32, sges []seam.AdviceSGE) error {
	pd, err := k.pd("advise mr", pdh)
	if err != nil {
		return err
	}
	us := make([]uverbs.SGE, len(sges))
	for i, s := range sges {
		us[i] = uverbs.SGE{Addr: s.Addr, Length: s.Length, LKey: s.LKey}
	}
	return pd.AdviseMR(uverbs.AdviseMRAdvice(advice), uverbs.AdviseMRFlags(flags), us)
}

var _ seam.ODPDevice = (*kernelDevice)(nil)
