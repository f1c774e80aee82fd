package model

import (
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// On-demand paging (docs/MODEL.md, "On-demand paging"). An ODP MR's
// pages are not pinned or touched at registration; the device faults
// them in when a WQE reaches them. The model does what mlx5_ib's page
// fault handler does for a ConnectX (odp.c: pagefault_mr faults the range
// in through hmm_range_fault): at the access it faults the range in as
// the process's own access would (mapped(), madvise MADV_POPULATE_READ or
// _WRITE, which fails for a hole or a missing permission and never
// raises a signal). A range that cannot be faulted in fails the access:
// the kernel resumes the fault with error (mlx5_ib_page_fault_resume with
// error 1), and the device completes the WQE in error as it does for a
// key violation (a local access: LOC_PROT_ERR; a responder's: a NAK, so
// REM_ACCESS_ERR at the requester), its QP moving to the error state.
// An implicit ODP MR (start 0, length 2^64) reaches every address of
// the process, each checked the same way.

// ib_uverbs_advise_mr_advice and ib_uverbs_advise_mr_flag
// (rdma/ib_user_ioctl_verbs.h).
const (
	advisePrefetch        = 0
	advisePrefetchWrite   = 1
	advisePrefetchNoFault = 2
	adviseFlagFlush       = 1 << 0
)

// ib_odp_general_cap_bits and ib_odp_transport_cap_bits (rdma/ib_verbs.h).
const (
	odpSupport         = 1 << 0
	odpSupportImplicit = 1 << 1
	odpSend            = 1 << 0
	odpRecv            = 1 << 1
	odpWrite           = 1 << 2
	odpRead            = 1 << 3
	odpAtomic          = 1 << 4
	odpSRQRecv         = 1 << 5
)

// odpMkey is what an ODP mkey keeps.
type odpMkey struct {
	implicit bool
	writable bool // ib_access_writable: local or remote write, atomic, MW bind
}

// ODPStats counts what the device did for ODP MRs since the Device was
// made (all its contexts).
type ODPStats struct {
	// Faults counts the accesses to ODP memory that faulted their range
	// in, FaultErrors those that could not (the WQE completed in error).
	Faults, FaultErrors uint64
	// PrefetchedPages counts the pages advice mapped (prefetch,
	// prefetch-write, and with no-fault only those present).
	PrefetchedPages uint64
}

// ODPStats returns the device's ODP counts.
func (d *Device) ODPStats() ODPStats {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	return d.h.odp
}

// odpCaps are the ODP caps as mlx5_ib_internal_fill_odp_caps derives them
// from the HCA caps: none without pg; RC, UD, XRC per the ODP page's
// per-transport bits; implicit with fixed_buffer_size, null_mkey and
// umr_extended_translation_offset, and umr_indirect_mkey_disabled clear.
func (p *profile) odpCaps() seam.ODPCaps {
	var c seam.ODPCaps
	if p.cap(prm.CmdHcaCap.Pg) == 0 {
		return c
	}
	c.General = odpSupport
	page := p.pages[prm.MLX5_CAP_ODP]
	t := prm.OdpPerTransportServiceCap
	bits := []struct {
		f   prm.Field
		bit uint32
	}{{t.Send, odpSend}, {t.Receive, odpRecv}, {t.Write, odpWrite}, {t.Read, odpRead}, {t.Atomic, odpAtomic}, {t.SrqReceive, odpSRQRecv}}
	of := func(transport prm.Field, only uint32) uint32 {
		var v uint32
		for _, b := range bits {
			if b.bit&only != 0 && b.f.At(transport).Get(page) != 0 {
				v |= b.bit
			}
		}
		return v
	}
	all := uint32(odpSend | odpRecv | odpWrite | odpRead | odpAtomic | odpSRQRecv)
	c.UD = of(prm.OdpCap.UdOdpCaps, odpSend|odpSRQRecv) // the kernel reads only these two for UD
	c.RC = of(prm.OdpCap.RcOdpCaps, all)
	c.XRC = of(prm.OdpCap.XrcOdpCaps, all)
	if p.cap(prm.CmdHcaCap.FixedBufferSize) != 0 && p.cap(prm.CmdHcaCap.NullMkey) != 0 &&
		p.cap(prm.CmdHcaCap.UmrExtendedTranslationOffset) != 0 && p.cap(prm.CmdHcaCap.UmrIndirectMkeyDisabled) == 0 {
		c.General |= odpSupportImplicit
	}
	return c
}

// faultIn reports whether [lo, hi), page-aligned, is mapped (writable
// with write), after the page-fault handler (Options.PageFault), if
// there is one, had the chance to map it. The caller holds h.mu.
func (h *hca) faultIn(lo, hi uint64, write bool) bool {
	if mapped(lo, hi, write) {
		return true
	}
	if h.pageFault == nil {
		return false
	}
	h.pageFault(lo, hi-lo, write)
	return mapped(lo, hi, write)
}

// odpAccessible faults in [addr, addr+n) of the ODP mkey mk for access a
// and returns it.
func (h *hca) odpSpan(spans [][]byte, mk *mkeyObj, key uint32, addr, n uint64, a access) ([][]byte, *keyErr) {
	write := a == accLocalWrite || a == accRemoteWrite || a == accRemoteAtomic
	lo, hi := addr&^(pageSize-1), (addr+n+pageSize-1)&^(pageSize-1)
	if hi < lo || hi > 1<<63 || !h.faultIn(lo, hi, write) {
		h.odp.FaultErrors++
		return spans, keyFail("key %#x: ODP page fault on [%#x, +%#x) could not be resolved (not mapped, or not writable)", key, addr, n)
	}
	h.odp.Faults++
	p := unsafe.Add(unsafe.Pointer(nil), uintptr(addr))
	return append(spans, unsafe.Slice((*byte)(p), int(n))), nil
}

// regODP makes the verbs MTT mkey of an ODP MR over [start, start+length)
// (length 0: the implicit one, 2^64 bytes). mlx5_ib refuses ODP where its
// ODP caps lack it (ib_check_mr_access: EOPNOTSUPP without
// IBK_ON_DEMAND_PAGING) and an implicit MR without IB_ODP_SUPPORT_IMPLICIT
// (mlx5_ib_reg_user_mr: EINVAL). The caller holds h.mu and has checked
// the PD and the access flags.
func (d *Device) regODP(call string, pdn uint32, start, length uint64, access uint32) (seam.MR, error) {
	caps := d.h.prof.odpCaps()
	switch {
	case caps.General&odpSupport == 0:
		return seam.MR{}, kerr(call, unix.EOPNOTSUPP, "ib_check_mr_access: the device has no on-demand paging")
	case length == 0 && caps.General&odpSupportImplicit == 0:
		return seam.MR{}, kerr(call, unix.EINVAL, "mlx5_ib_reg_user_mr: implicit ODP without IB_ODP_SUPPORT_IMPLICIT")
	}
	writable := access&(accessLocalWrite|accessRemoteWrite|accessRemoteAtomic|accessMWBind) != 0
	return d.verbsMkey(call, &mkeyObj{pdn: pdn, odp: &odpMkey{implicit: length == 0, writable: writable}}, start, length, access)
}

// RegImplicitODP is ibv_reg_mr(pd, NULL, SIZE_MAX, access): an implicit
// ODP MR over the whole address space.
func (d *Device) RegImplicitODP(pd seam.Handle, access uint32) (seam.MR, error) {
	const call = "reg implicit odp mr"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return seam.MR{}, err
	}
	o, err := d.lookupKind(call, pd, kindPD)
	if err != nil {
		return seam.MR{}, err
	}
	if err := checkAccess(call, access); err != nil {
		return seam.MR{}, err
	}
	if access&accessOnDemand == 0 {
		return seam.MR{}, kerr(call, unix.EINVAL, "mlx5_ib_reg_user_mr: an MR over the whole address space needs IB_ACCESS_ON_DEMAND")
	}
	return d.regODP(call, o.pdn, 0, 0, access)
}

// AdviseMR is UVERBS_METHOD_ADVISE_MR as mlx5_ib_advise_mr answers it:
// EOPNOTSUPP without ODP (mlx5_ib sets advise_mr only with ODP caps) or
// for an unknown advice; EINVAL for unknown flags (the uverbs flags
// attribute); per SGE, ENOENT for an lkey that is no ODP MR of the PD or
// PREFETCH_WRITE on one that is not writable (get_prefetchable_mr),
// EFAULT for a range outside the MR or, with FLUSH, one that cannot be
// faulted in. Without FLUSH the kernel queues the work and answers 0
// before it runs, so a fault that fails is not reported.
func (d *Device) AdviseMR(pd seam.Handle, advice, flags uint32, sges []seam.AdviceSGE) error {
	const call = "advise mr"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	o, err := d.lookupKind(call, pd, kindPD)
	if err != nil {
		return err
	}
	switch {
	case d.h.prof.odpCaps().General&odpSupport == 0:
		return kerr(call, unix.EOPNOTSUPP, "the device has no advise_mr (no ODP)")
	case advice > advisePrefetchNoFault:
		return kerr(call, unix.EOPNOTSUPP, "mlx5_ib_advise_mr: unknown advice")
	case flags&^adviseFlagFlush != 0:
		return kerr(call, unix.EINVAL, "unknown advise flags")
	case len(sges) == 0:
		return kerr(call, unix.EINVAL, "no SGEs")
	}
	for _, s := range sges {
		mk, ok := d.h.mkeys[s.LKey>>8]
		switch {
		case !ok || mk.odp == nil || uint8(s.LKey) != uint8(prm.Mkc.Mkey70.Get(mk.mkc)) || mk.pdn != o.pdn:
			return kerr(call, unix.ENOENT, "get_prefetchable_mr: no ODP MR of the PD has the lkey")
		case advice == advisePrefetchWrite && !mk.odp.writable:
			return kerr(call, unix.ENOENT, "get_prefetchable_mr: PREFETCH_WRITE on an MR that is not writable")
		}
		if _, e := inRange(mk, s.LKey, s.Addr, uint64(s.Length)); e != nil {
			return kerr(call, unix.EFAULT, "pagefault_mr: "+e.why)
		}
	}
	for _, s := range sges {
		lo, hi := s.Addr&^(pageSize-1), (s.Addr+uint64(s.Length)+pageSize-1)&^(pageSize-1)
		if advice == advisePrefetchNoFault {
			d.h.odp.PrefetchedPages += presentPages(lo, hi)
			continue
		}
		if !d.h.faultIn(lo, hi, advice == advisePrefetchWrite) {
			if flags&adviseFlagFlush != 0 {
				return kerr(call, unix.EFAULT, "pagefault_mr: the range cannot be faulted in")
			}
			continue
		}
		d.h.odp.PrefetchedPages += (hi - lo) / pageSize
	}
	return nil
}

// presentPages counts the resident pages of [lo, hi), page-aligned, with
// mincore(2), which faults nothing in; a hole counts none.
func presentPages(lo, hi uint64) uint64 {
	var n uint64
	vec := make([]byte, 64)
	for a := lo; a < hi; {
		pages := min((hi-a)/pageSize, uint64(len(vec)))
		_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(a), uintptr(pages*pageSize), uintptr(unsafe.Pointer(&vec[0])))
		if e != 0 {
			// ENOMEM: part of the range is not mapped; count page by page.
			if pages > 1 {
				for p := uint64(0); p < pages; p++ {
					n += presentPages(a+p*pageSize, a+(p+1)*pageSize)
				}
			}
			a += pages * pageSize
			continue
		}
		for _, v := range vec[:pages] {
			n += uint64(v & 1)
		}
		a += pages * pageSize
	}
	return n
}
