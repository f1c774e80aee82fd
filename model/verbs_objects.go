package model

import (
	"fmt"
	"math/bits"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// The verbs objects of seam.Verbs, as ib_uverbs (drivers/infiniband/core)
// and mlx5_ib (drivers/infiniband/hw/mlx5) of Linux 6.1 create them from
// mlx5's driver data: the kernel side checks what they check and sends
// the firmware the commands they send, with the context's uid (the PD's
// uid is the DEVX uid, mlx5_ib_alloc_pd), so DEVX commands of the context
// can name them. A verbs object's queues live in user memory the kernel
// pins (usermem.go): the firmware commands carry that memory where the
// real ones carry its page addresses.

// Limits and flags of the core (include/rdma/ib_verbs.h,
// <rdma/ib_user_ioctl_verbs.h>).
const (
	uverbsCQFlagsTimestamp     = 1 << 0 // IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION
	uverbsCQFlagsIgnoreOverrun = 1 << 1 // IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN
	mlx5CQESizeSmall           = 64
	mlx5CQESizeLarge           = 128
	mlx5CreateCQFlagsKnown     = mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD | mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX | mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS
	createCQFlagsOffset        = 22 // offsetof(struct mlx5_ib_create_cq, flags)
	bufAlign                   = 64 // the page-offset quantum of a 4 KiB page (mlx5_umem_find_best_quantized_pgoff, scale 64)
	dbrSize                    = 8  // a doorbell record the device reads: two big-endian words
	sizeofCreateCQRespCqn      = 4  // create_cq copies the cqn alone (ib_copy_to_udata of a __u32)
)

// vcq is the kernel's verbs CQ (struct mlx5_ib_cq with its ib_ucq_object).
type vcq struct {
	d      *Device
	h      seam.Handle
	cqn    uint32
	user   uint64       // the user handle: events name the CQ by it
	ch     *compChannel // where completion events go; nil for none
	usecnt int          // QPs using it (ib_cq usecnt)
	// timestamp: created with IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION;
	// realTime: with MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS. A QP on it
	// needs the device's timestamp formats for them (get_ts_format).
	timestamp, realTime bool
}

// roundPow2 is roundup_pow_of_two (0 stays 0... as 1 << 0 does not: it is
// only called with n >= 1).
func roundPow2(n uint64) uint64 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len64(n-1)
}

// fwErrno runs a command the kernel sends for a verbs call and returns
// the errno mlx5_cmd_exec makes of a failed status (cmd_status_to_err),
// with the firmware's failure in the error chain.
func (d *Device) fwErrno(call string, c *fwCall) error {
	st, syn := d.h.execCall(c)
	if st == prm.MLX5_CMD_STAT_OK {
		return nil
	}
	ce := &prm.CmdError{Opcode: uint16(prm.MboxIn.Opcode.Get(c.in)), OpMod: uint16(prm.MboxIn.OpMod.Get(c.in)), Status: st, Syndrome: syn}
	return &KernelError{Call: call, Errno: statusErrno(st), Rule: "mlx5_cmd_exec", Cmd: ce}
}

// CreateCQ is UVERBS_METHOD_CQ_CREATE with struct mlx5_ib_create_cq: the
// core's checks (flags, completion vector, channel), mlx5_ib_create_cq's
// and create_cq_user's, then CREATE_CQ with the pinned ring and doorbell
// record. The CQ has 1 << log entries of cqe_size bytes, log the
// power of two above the CQEs asked for (roundup_pow_of_two(cqe + 1));
// the kernel answers entries - 1 and the CQN (drvOut: struct
// mlx5_ib_create_cq_resp's cqn).
func (d *Device) CreateCQ(c seam.CQCreate, drvIn, drvOut []byte) (seam.Handle, uint32, error) {
	const call = "create cq"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return 0, 0, err
	}
	ch, err := d.channelOf(call, c.Channel) // an attribute: looked up first
	if err != nil {
		return 0, 0, err
	}
	if c.Flags&^(uverbsCQFlagsTimestamp|uverbsCQFlagsIgnoreOverrun) != 0 {
		return 0, 0, kerr(call, unix.EINVAL, "uverbs_get_flags32: unknown CQ flags")
	}
	if c.CompVector >= d.h.prof.compVectors {
		return 0, 0, kerr(call, unix.EINVAL, fmt.Sprintf("comp_vector %d: the device has %d completion vectors", c.CompVector, d.h.prof.compVectors))
	}
	maxCQ := uint64(1) << d.h.prof.cap(prm.CmdHcaCap.LogMaxCqSz)
	if int32(c.CQE) < 0 || uint64(c.CQE) > maxCQ {
		return 0, 0, kerr(call, unix.EINVAL, "mlx5_ib_create_cq: entries over 1 << log_max_cq_sz")
	}
	entries := roundPow2(uint64(c.CQE) + 1)
	if entries > maxCQ {
		return 0, 0, kerr(call, unix.EINVAL, "mlx5_ib_create_cq: roundup_pow_of_two(entries + 1) over 1 << log_max_cq_sz")
	}
	// create_cq_user.
	if len(drvIn) < createCQFlagsOffset {
		return 0, 0, kerr(call, unix.EINVAL, "create_cq_user: the driver data ends before flags")
	}
	var u mlx5abi.Mlx5IbCreateCq
	decodeDrv(drvIn, &u)
	switch {
	case u.Flags&^mlx5CreateCQFlagsKnown != 0:
		return 0, 0, kerr(call, unix.EINVAL, "create_cq_user: unknown flags")
	case u.CqeSize != mlx5CQESizeSmall && u.CqeSize != mlx5CQESizeLarge:
		return 0, 0, kerr(call, unix.EINVAL, "create_cq_user: cqe_size is neither 64 nor 128")
	case u.Reserved0 != 0 || u.Reserved1 != 0:
		return 0, 0, kerr(call, unix.EINVAL, "create_cq_user: reserved fields set")
	}
	buf, errno := userMem(u.BufAddr, entries*uint64(u.CqeSize), true)
	if errno != 0 {
		return 0, 0, kerr(call, errno, "ib_umem_get of the CQ buffer")
	}
	if u.BufAddr%bufAlign != 0 {
		return 0, 0, kerr(call, unix.EINVAL, "mlx5_umem_find_best_cq_quantized_pgoff: the buffer is not 64-byte aligned")
	}
	dbr, errno := userMem(u.DbAddr, dbrSize, false)
	if errno != 0 {
		return 0, 0, kerr(call, errno, "mlx5_ib_db_map_user of the doorbell record")
	}
	if u.Flags&mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX == 0 {
		// The context has no static UAR pages (lib_uar_dyn).
		return 0, 0, kerr(call, unix.EINVAL, "create_cq_user: no uar_page_index and the context's UARs are dynamic")
	}
	if u.CqeCompEn == 1 {
		return 0, 0, kerr(call, unix.EOPNOTSUPP, "create_cq_user: CQE compression (no profile has cqe_compression)")
	}
	if u.Flags&mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD != 0 {
		return 0, 0, kerr(call, unix.EOPNOTSUPP, "create_cq_user: 128-byte CQE padding (no profile has cqe_128_always)")
	}
	eqn := d.h.prof.firstCompEQN + c.CompVector // mlx5_vector2eqn
	in := prm.CreateCqIn.Layout().New()
	prm.MboxIn.Opcode.Set(in, prm.MLX5_CMD_OP_CREATE_CQ)
	prm.MboxIn.Uid.Set(in, uint64(d.uid))
	cqc := prm.CreateCqIn.CqContext
	if u.CqeSize == mlx5CQESizeLarge {
		prm.Cqc.CqeSz.At(cqc).Set(in, 1)
	}
	prm.Cqc.LogCqSize.At(cqc).Set(in, uint64(bits.Len64(entries)-1))
	prm.Cqc.UarPage.At(cqc).Set(in, uint64(u.UarPageIndex))
	prm.Cqc.CEqnOrApuElement.At(cqc).Set(in, uint64(eqn))
	prm.Cqc.DbrAddr.At(cqc).Set(in, u.DbAddr)
	if c.Flags&uverbsCQFlagsIgnoreOverrun != 0 {
		prm.Cqc.Oi.At(cqc).Set(in, 1)
	}
	out := make([]byte, prm.CreateCqOut.Layout().Size)
	if err := d.fwErrno(call, &fwCall{uid: d.uid, ctx: d.id, in: in, out: out, mem: &pinned{buf: buf, dbr: dbr}}); err != nil {
		return 0, 0, err
	}
	cqn := uint32(prm.CreateCqOut.Cqn.Get(out))
	if len(drvOut) < sizeofCreateCQRespCqn {
		d.h.releaseCQ(cqn, d.h.cqs[cqn])
		return 0, 0, kerr(call, unix.EFAULT, "ib_copy_to_udata: the response has no room for the cqn")
	}
	putDrv(drvOut, &mlx5abi.Mlx5IbCreateCqResp{Cqn: cqn}, sizeofCreateCQRespCqn)
	v := &vcq{d: d, cqn: cqn, user: c.UserHandle, ch: ch,
		timestamp: c.Flags&uverbsCQFlagsTimestamp != 0, realTime: u.Flags&mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS != 0}
	d.h.cqs[cqn].ib = v
	v.h = d.newHandle(&uobj{kind: kindCQ, cq: v, objID: encObjID(prm.MLX5_CMD_OP_CREATE_CQ, cqn)})
	return v.h, uint32(entries - 1), nil
}

// DestroyCQ is UVERBS_METHOD_CQ_DESTROY: EBUSY while QPs use the CQ
// (ib_destroy_cq_user), then DESTROY_CQ; the CQ's unread events go
// (ib_uverbs_release_ucq).
func (d *Device) DestroyCQ(h seam.Handle) error {
	const call = "destroy cq"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	o, err := d.enterCQ(call, h)
	if err != nil {
		return err
	}
	d.runPending()
	if err := d.destroyCQ(o.cq); err != nil {
		return err
	}
	delete(d.handles, h)
	return nil
}

func (d *Device) destroyCQ(v *vcq) error {
	const call = "destroy cq"
	if v.usecnt > 0 {
		return kerr(call, unix.EBUSY, "ib_destroy_cq_user: QPs use the CQ")
	}
	in := prm.DestroyCqIn.Layout().New()
	prm.MboxIn.Opcode.Set(in, prm.MLX5_CMD_OP_DESTROY_CQ)
	prm.MboxIn.Uid.Set(in, uint64(d.uid))
	prm.DestroyCqIn.Cqn.Set(in, uint64(v.cqn))
	if err := d.fwErrno(call, &fwCall{uid: d.uid, ctx: d.id, in: in, out: make([]byte, hdrLen)}); err != nil {
		return err
	}
	if v.ch != nil {
		v.ch.q.drop(v)
	}
	d.async.drop(v)
	return nil
}
