package model

import (
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// The verbs objects the seam carries: a protection domain (ibv_alloc_pd)
// and memory regions (ibv_reg_mr). They sit in the same tables as DEVX's
// ALLOC_PD and CREATE_MKEY. mlx5_ib creates the PD with the context's DEVX
// uid (mlx5_ib_alloc_pd sets alloc_pd_in.uid: 0 without DEVX), so DEVX
// objects of the context may name it. A user MR's mkey has uid 0 whatever
// the context (Linux 6.1's mr.c sets no uid: reg_create and the mkey
// cache's mlx5_ib_create_mkey_cb create it as the kernel's), so DEVX
// commands cannot name it; WQEs use its keys all the same (the key checks
// compare PDs, not uids).

// ib_uverbs_access_flags (rdma/ib_user_ioctl_verbs.h).
const (
	accessRemoteAtomic = 1 << 3
	accessMWBind       = 1 << 4
	accessZeroBased    = 1 << 5
	accessOnDemand     = 1 << 6
	accessHugeTLB      = 1 << 7
	// IB_UVERBS_ACCESS_OPTIONAL_RANGE: bits 20..29, hints a device may
	// ignore (relaxed ordering).
	accessOptionalRange = (1<<30 - 1) &^ (1<<20 - 1)
)

// AllocPD is ibv_alloc_pd: ALLOC_PD with the context's uid, owned by a new
// handle.
func (d *Device) AllocPD() (seam.Handle, uint32, error) {
	const call = "alloc pd"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return 0, 0, err
	}
	n, ok := alloc(d.h, "pd", d.h.pds, firstPDN, limit(firstPDN, d.h.prof.cap(prm.CmdHcaCap.LogMaxPd)))
	if !ok {
		return 0, 0, kerr(call, unix.ENOMEM, "ALLOC_PD: log_max_pd PDs exist")
	}
	d.h.pds[n] = &pdObj{uid: d.uid, ctx: d.id}
	return d.newHandle(&uobj{kind: kindPD, pdn: n}), n, nil
}

// DeallocPD is ibv_dealloc_pd. A PD that MRs, mkeys, PSVs or QPs still use
// is not freed: EBUSY (ib_dealloc_pd_user's usecnt check; the firmware
// refuses DEALLOC_PD too).
func (d *Device) DeallocPD(h seam.Handle) error {
	const call = "dealloc pd"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	o, err := d.lookupKind(call, h, kindPD)
	if err != nil {
		return err
	}
	if pd, ok := d.h.pds[o.pdn]; ok {
		if pd.refs > 0 {
			return kerr(call, unix.EBUSY, "the PD is in use")
		}
		delete(d.h.pds, o.pdn)
	}
	delete(d.handles, h)
	return nil
}

// RegMR is ibv_reg_mr with iova = &mem[0]: an MTT mkey over mem in the
// PD, with local read always and the access flags asked for; lkey and
// rkey are the same key (mkey index << 8 | the key's variant byte).
func (d *Device) RegMR(pd seam.Handle, mem []byte, access uint32) (seam.MR, error) {
	const call = "reg mr"
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
	switch {
	case access&accessZeroBased != 0:
		return seam.MR{}, kerr(call, unix.EOPNOTSUPP, "zero-based MRs are not modelled")
	case len(mem) == 0:
		return seam.MR{}, kerr(call, unix.EINVAL, "ib_umem_get: empty region")
	}
	start := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	if access&accessOnDemand != 0 {
		return d.regODP(call, o.pdn, start, uint64(len(mem)), access)
	}
	return d.verbsMkey(call, &mkeyObj{pdn: o.pdn, mem: mem}, start, uint64(len(mem)), access)
}

// verbsMkey makes the MTT mkey of a verbs MR (mk: its PD and, for a
// pinned one, mem, and unmap, a mapping the model made for it, a
// dma-buf's, which goes with the mkey; for an ODP one, odp) over
// [start, start+length), length 0 for 2^64 bytes, with local read always
// and the access flags asked for; lkey and rkey are the same key (mkey
// index << 8 | the key's variant byte). The caller holds h.mu.
func (d *Device) verbsMkey(call string, mk *mkeyObj, start, length uint64, access uint32) (seam.MR, error) {
	if _, ok := d.h.pds[mk.pdn]; !ok {
		return seam.MR{}, kerr(call, unix.EINVAL, "the PD is gone")
	}
	n, ok := alloc(d.h, "mkey", d.h.mkeys, firstMkey, limit(firstMkey, d.h.prof.cap(prm.CmdHcaCap.LogMaxMkey)))
	if !ok {
		return seam.MR{}, kerr(call, unix.ENOMEM, "CREATE_MKEY: log_max_mkey mkeys exist")
	}
	d.h.variant++
	mkc := prm.Mkc.Layout().New()
	prm.Mkc.AccessMode10.Set(mkc, accessModeMTT)
	prm.Mkc.Lr.Set(mkc, 1)
	prm.Mkc.Lw.Set(mkc, uint64(access&accessLocalWrite))
	prm.Mkc.Rw.Set(mkc, uint64(access&accessRemoteWrite)>>1)
	prm.Mkc.Rr.Set(mkc, uint64(access&accessRemoteRead)>>2)
	prm.Mkc.A.Set(mkc, uint64(access&accessRemoteAtomic)>>3)
	prm.Mkc.Qpn.Set(mkc, 0xffffff)
	prm.Mkc.Mkey70.Set(mkc, uint64(d.h.variant))
	prm.Mkc.Pd.Set(mkc, uint64(mk.pdn))
	prm.Mkc.StartAddr.Set(mkc, start)
	if length == 0 {
		prm.Mkc.Length64.Set(mkc, 1)
	} else {
		prm.Mkc.Len.Set(mkc, length)
	}
	mk.uid, mk.ctx, mk.mkc, mk.verbs, mk.access = 0, d.id, mkc, true, access // mr.c: no uid
	d.h.mkeys[n] = mk
	d.h.pds[mk.pdn].refs++
	key := n<<8 | uint32(d.h.variant)
	h := d.newHandle(&uobj{kind: kindMR, mkey: n})
	return seam.MR{Handle: h, LKey: key, RKey: key}, nil
}

// checkAccess is ib_check_mr_access's rule on the flags: known bits only,
// and remote write or atomic needs local write.
func checkAccess(call string, access uint32) error {
	known := uint32(accessLocalWrite | accessRemoteWrite | accessRemoteRead | accessRemoteAtomic |
		accessMWBind | accessZeroBased | accessOnDemand | accessHugeTLB | accessOptionalRange)
	switch {
	case access&^known != 0:
		return kerr(call, unix.EINVAL, "ib_check_mr_access: unknown access flags")
	case access&(accessRemoteWrite|accessRemoteAtomic) != 0 && access&accessLocalWrite == 0:
		return kerr(call, unix.EINVAL, "ib_check_mr_access: remote write or atomic needs local write")
	}
	return nil
}

// DeregMR is ibv_dereg_mr: the MR's mkey is destroyed.
func (d *Device) DeregMR(h seam.Handle) error {
	const call = "dereg mr"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	o, err := d.lookupKind(call, h, kindMR)
	if err != nil {
		return err
	}
	d.h.dropVerbsMkey(o.mkey)
	delete(d.handles, h)
	return nil
}

// dropVerbsMkey destroys RegMR's mkey n, if it is still there.
func (h *hca) dropVerbsMkey(n uint32) {
	if mk, ok := h.mkeys[n]; ok && mk.verbs {
		h.releaseMkey(n, mk)
	}
}
