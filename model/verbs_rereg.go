package model

import (
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// The flags of ibv_rereg_mr as the kernel takes them (enum
// ib_mr_rereg_flags, rdma/ib_verbs.h; libibverbs' IBV_REREG_MR_CHANGE_*
// have the same values).
const (
	ReregTranslation = 1 << 0 // IB_MR_REREG_TRANS: new memory (mem, iova)
	ReregPD          = 1 << 1 // IB_MR_REREG_PD: a new PD
	ReregAccess      = 1 << 2 // IB_MR_REREG_ACCESS: new access flags

	reregSupported = ReregTranslation | ReregPD | ReregAccess
)

// accessUMRReconfig are the access flags a UMR can change on an existing
// mkey (mlx5_ib's can_use_umr_rereg_access: local write, remote write,
// remote read, relaxed ordering; the model keeps no relaxed-ordering bits
// in the mkey, so mlx5r_umr_can_reconfig's relaxed-ordering caps never
// refuse).
const accessUMRReconfig = accessLocalWrite | accessRemoteWrite | accessRemoteRead | accessRelaxedOrdering

// ReregMR is ibv_rereg_mr (IB_USER_VERBS_CMD_REREG_MR) on the MR of handle
// mr: flags (ReregTranslation, ReregPD, ReregAccess, at least one) say
// which of pd, mem with iova (the new translation; iova must be
// &mem[0], as RegMR's) and access replace the MR's. It returns the MR's
// keys after the change; the handle stays.
//
// The kernel's rules (ib_uverbs_rereg_mr): no flags or unknown ones are
// EINVAL, as is a translation whose address and iova differ in their
// offset in the page; new access flags pass ib_check_mr_access; the new
// PD must be a PD of the context. Then mlx5_ib_rereg_user_mr: a change of
// PD or of the access bits a UMR can change (local write, remote write,
// remote read) is made on the mkey in place, and the keys stay. Any other
// change makes a new mkey (new keys) in the new PD before the old one goes
// (create_real_mr over the MR's pinned memory without a translation,
// mlx5_ib_reg_user_mr with one; the model does not model the mkey cache,
// whose UMR can sometimes load a new translation in place). The PD's
// references move with the MR. On an error the MR is as it was.
//
// Not modelled (EOPNOTSUPP): a change that needs a new mkey on an ODP or
// dma-buf MR without a new translation (mlx5_ib re-registers it from the
// command's address and length), and an iova other than the address.
func (d *Device) ReregMR(mr seam.Handle, flags uint32, pd seam.Handle, mem []byte, iova uint64, access uint32) (lkey, rkey uint32, err error) {
	const call = "rereg mr"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return 0, 0, err
	}
	start := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	const pageMask = 4096 - 1
	switch {
	case flags == 0:
		return 0, 0, kerr(call, unix.EINVAL, "ib_uverbs_rereg_mr: no flags")
	case flags&^reregSupported != 0:
		return 0, 0, kerr(call, unix.EINVAL, "ib_uverbs_rereg_mr: unknown flags")
	case flags&ReregTranslation != 0 && start&pageMask != iova&pageMask:
		return 0, 0, kerr(call, unix.EINVAL, "ib_uverbs_rereg_mr: the address and the iova differ in their page offset")
	}
	o, err := d.lookupKind(call, mr, kindMR)
	if err != nil {
		return 0, 0, err
	}
	mk, ok := d.h.mkeys[o.mkey]
	if !ok || !mk.verbs {
		return 0, 0, kerr(call, unix.EINVAL, "the MR's mkey is gone")
	}
	if flags&ReregAccess != 0 {
		if err := checkAccess(call, access); err != nil {
			return 0, 0, err
		}
	} else {
		access = mk.access
	}
	pdn := mk.pdn
	if flags&ReregPD != 0 {
		p, err := d.lookupKind(call, pd, kindPD)
		if err != nil {
			// uobj_get_obj_read's NULL: EINVAL, whatever the lookup said.
			return 0, 0, kerr(call, unix.EINVAL, "ib_uverbs_rereg_mr: pd_handle names no PD of the context")
		}
		pdn = p.pdn
	}
	if _, ok := d.h.pds[pdn]; !ok {
		return 0, 0, kerr(call, unix.EINVAL, "the PD is gone")
	}
	key := o.mkey<<8 | uint32(prm.Mkc.Mkey70.Get(mk.mkc))
	if flags&ReregTranslation == 0 && (mk.access^access)&^uint32(accessUMRReconfig) == 0 {
		// umr_rereg_pd_access: a UMR on the mkey, the keys stay.
		prm.Mkc.Lw.Set(mk.mkc, uint64(access&accessLocalWrite))
		prm.Mkc.Rw.Set(mk.mkc, uint64(access&accessRemoteWrite)>>1)
		prm.Mkc.Rr.Set(mk.mkc, uint64(access&accessRemoteRead)>>2)
		prm.Mkc.Pd.Set(mk.mkc, uint64(pdn))
		d.h.pds[mk.pdn].refs--
		d.h.pds[pdn].refs++
		mk.pdn, mk.access = pdn, access
		return key, key, nil
	}
	var made seam.MR
	switch {
	case flags&ReregTranslation != 0:
		switch {
		case access&accessZeroBased != 0:
			return 0, 0, kerr(call, unix.EOPNOTSUPP, "zero-based MRs are not modelled")
		case len(mem) == 0:
			return 0, 0, kerr(call, unix.EINVAL, "ib_umem_get: empty region")
		case iova != start:
			return 0, 0, kerr(call, unix.EOPNOTSUPP, "an iova other than the address is not modelled")
		case access&accessOnDemand != 0:
			made, err = d.regODP(call, pdn, start, uint64(len(mem)), access)
		default:
			made, err = d.verbsMkey(call, &mkeyObj{pdn: pdn, mem: mem}, start, uint64(len(mem)), access)
		}
	case mk.mem == nil || mk.odp != nil || mk.unmap != nil || access&accessOnDemand != 0:
		return 0, 0, kerr(call, unix.EOPNOTSUPP, "mlx5_ib_rereg_user_mr: re-registering an ODP or dma-buf MR without a new translation is not modelled")
	default:
		// create_real_mr over the MR's umem, at its iova.
		old := prm.Mkc.StartAddr.Get(mk.mkc)
		made, err = d.verbsMkey(call, &mkeyObj{pdn: pdn, mem: mk.mem}, old, uint64(len(mk.mem)), access)
	}
	if err != nil {
		return 0, 0, err
	}
	// The new mkey takes the MR's handle (rdma_assign_uobject); the old
	// one is destroyed.
	n := d.handles[made.Handle].mkey
	delete(d.handles, made.Handle)
	d.h.releaseMkey(o.mkey, mk)
	o.mkey = n
	return made.LKey, made.RKey, nil
}
