package model

import (
	"math/bits"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
)

// mlx5MaxCQPeriod is MLX5_MAX_CQ_PERIOD: the largest cq_period the CQ
// context holds (12 bits), in microseconds.
const mlx5MaxCQPeriod = 1<<12 - 1

// mlx5MaxCQCount is MLX5_MAX_CQ_COUNT: the largest cq_max_count (16
// bits).
const mlx5MaxCQCount = 1<<16 - 1

// ResizeCQ is IB_USER_VERBS_CMD_RESIZE_CQ with struct mlx5_ib_resize_cq,
// as mlx5_ib_resize_cq does it for a user CQ: the cq_resize cap
// (ENOSYS without), the entries within 1 << log_max_cq_sz and rounded to
// the power of two above cqe + 1, nothing sent when that is the size the
// CQ has, then the new ring pinned and MODIFY_CQ with op_mod resize. The
// device ends the old ring with a resize CQE (postResizeCQE) and writes
// what follows to the new one. The model keeps the CQE size: a cqe_size
// other than the CQ's is EINVAL.
func (d *Device) ResizeCQ(h seam.Handle, cqe uint32, drvIn []byte) (uint32, error) {
	const call = "resize cq"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	o, err := d.enterCQ(call, h)
	if err != nil {
		return 0, err
	}
	if d.h.prof.cap(prm.CmdHcaCap.CqResize) == 0 {
		return 0, kerr(call, unix.ENOSYS, "mlx5_ib_resize_cq: the device has no cq_resize")
	}
	maxCQ := uint64(1) << d.h.prof.cap(prm.CmdHcaCap.LogMaxCqSz)
	if cqe < 1 || uint64(cqe) > maxCQ {
		return 0, kerr(call, unix.EINVAL, "mlx5_ib_resize_cq: entries below 1 or over 1 << log_max_cq_sz")
	}
	entries := roundPow2(uint64(cqe) + 1)
	if entries > maxCQ {
		return 0, kerr(call, unix.EINVAL, "mlx5_ib_resize_cq: roundup_pow_of_two(entries + 1) over 1 << log_max_cq_sz")
	}
	// Doorbells rung before the command reach the device before it: the
	// CQEs they complete count among the outstanding ones (modifyCQ).
	d.runPending()
	cq := d.h.cqs[o.cq.cqn]
	if entries == uint64(1)<<prm.Cqc.LogCqSize.Get(cq.cqc) {
		return uint32(entries - 1), nil
	}
	// resize_user.
	if len(drvIn) < mlx5abi.SizeofMlx5IbResizeCq {
		return 0, kerr(call, unix.EINVAL, "resize_user: ib_copy_from_udata of a short mlx5_ib_resize_cq")
	}
	var u mlx5abi.Mlx5IbResizeCq
	decodeDrv(drvIn, &u)
	stride := uint64(64) << prm.Cqc.CqeSz.Get(cq.cqc)
	switch {
	case u.Reserved0 != 0 || u.Reserved1 != 0:
		return 0, kerr(call, unix.EINVAL, "resize_user: reserved fields set")
	case uint64(u.CqeSize) != stride:
		return 0, kerr(call, unix.EINVAL, "resize_user: cqe_size is not the CQ's (the model keeps the CQE size)")
	}
	buf, errno := userMem(u.BufAddr, entries*stride, true)
	if errno != 0 {
		return 0, kerr(call, errno, "ib_umem_get of the new CQ buffer")
	}
	if u.BufAddr%bufAlign != 0 {
		return 0, kerr(call, unix.EINVAL, "mlx5_umem_find_best_cq_quantized_pgoff: the buffer is not 64-byte aligned")
	}
	in := prm.ModifyCqIn.Layout().New()
	prm.MboxIn.Opcode.Set(in, prm.MLX5_CMD_OP_MODIFY_CQ)
	prm.MboxIn.OpMod.Set(in, cqOpModResize)
	prm.MboxIn.Uid.Set(in, uint64(d.uid))
	prm.ModifyCqIn.Cqn.Set(in, uint64(o.cq.cqn))
	prm.ModifyCqIn.ModifyFieldSelectResizeFieldSelect.Set(in, cqResizeLogSize|cqResizePageOffset|cqResizePageSize)
	prm.Cqc.LogCqSize.At(prm.ModifyCqIn.CqContext).Set(in, uint64(bits.Len64(entries)-1))
	out := make([]byte, prm.ModifyCqOut.Layout().Size)
	if err := d.fwErrno(call, &fwCall{uid: d.uid, ctx: d.id, in: in, out: out, mem: &pinned{buf: buf}}); err != nil {
		return 0, err
	}
	return uint32(entries - 1), nil
}

// ModifyCQ is IB_USER_VERBS_EX_CMD_MODIFY_CQ with IB_CQ_MODERATE, as
// mlx5_ib_modify_cq does it: EOPNOTSUPP without the cq_moderation cap,
// EINVAL for a period over MLX5_MAX_CQ_PERIOD, then MODIFY_CQ setting
// cq_period and cq_max_count.
func (d *Device) ModifyCQ(h seam.Handle, count, period uint16) error {
	const call = "modify cq"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	o, err := d.enterCQ(call, h)
	if err != nil {
		return err
	}
	if d.h.prof.cap(prm.CmdHcaCap.CqModeration) == 0 {
		return kerr(call, unix.EOPNOTSUPP, "mlx5_ib_modify_cq: the device has no cq_moderation")
	}
	if period > mlx5MaxCQPeriod {
		return kerr(call, unix.EINVAL, "mlx5_ib_modify_cq: cq_period over MLX5_MAX_CQ_PERIOD")
	}
	in := prm.ModifyCqIn.Layout().New()
	prm.MboxIn.Opcode.Set(in, prm.MLX5_CMD_OP_MODIFY_CQ)
	prm.MboxIn.Uid.Set(in, uint64(d.uid))
	prm.ModifyCqIn.Cqn.Set(in, uint64(o.cq.cqn))
	prm.ModifyCqIn.ModifyFieldSelectResizeFieldSelect.Set(in, cqModifyPeriod|cqModifyCount)
	cqc := prm.ModifyCqIn.CqContext
	prm.Cqc.CqPeriod.At(cqc).Set(in, uint64(period))
	prm.Cqc.CqMaxCount.At(cqc).Set(in, uint64(count))
	return d.fwErrno(call, &fwCall{uid: d.uid, ctx: d.id, in: in, out: make([]byte, prm.ModifyCqOut.Layout().Size)})
}

// enterCQ is the start of a method on a CQ handle: the device usable,
// and the handle a CQ's. d.h.mu is held.
func (d *Device) enterCQ(call string, h seam.Handle) (*uobj, error) {
	if err := d.enter(call); err != nil {
		return nil, err
	}
	return d.lookupKind(call, h, kindCQ)
}
