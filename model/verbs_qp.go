package model

import (
	"fmt"
	"math/bits"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// Verbs QPs: UVERBS_METHOD_QP_CREATE (drivers/infiniband/core/
// uverbs_std_types_qp.c) and mlx5_ib_create_qp (drivers/infiniband/hw/
// mlx5/qp.c) with struct mlx5_ib_create_qp: RC, UC, UD, and mlx5's DC
// QPs (IB_QPT_DRIVER with MLX5_QP_FLAG_TYPE_DCI or _DCT).

// QP types the kernel works with: the uverbs ones (seam.QPType*) and
// mlx5_ib's own for the DC QPs (MLX5_IB_QPT_DCI, MLX5_IB_QPT_DCT; their
// values are the model's: only the kernel sees them).
const (
	qpTypeDCI = 0x100
	qpTypeDCT = 0x101
)

// Flags of the create (enum ib_uverbs_qp_create_flags) and of the create
// checks (include/rdma/ib_verbs.h, <rdma/mlx5-abi.h>).
const (
	uverbsQPCreateBlockMcastLoopback = 1 << 1
	uverbsQPCreateScatterFCS         = 1 << 8
	uverbsQPCreateCVLANStripping     = 1 << 9
	uverbsQPCreatePCIWriteEndPadding = 1 << 11
	uverbsQPCreateSQSigAll           = 1 << 12
	uverbsQPTypeRawPacket            = 8
	uverbsQPTypeXRCIni               = 9
	uverbsQPTypeXRCTgt               = 10

	mlx5IBDefaultUIDX        = 0xffffff // MLX5_IB_DEFAULT_UIDX
	mlx5IBInvalidBfreg       = 1 << 31  // MLX5_IB_INVALID_BFREG
	createQPECEOffset        = 48       // offsetof(struct mlx5_ib_create_qp, ece_options)
	createQPReservedOffset   = 54       // offsetof(struct mlx5_ib_create_qp, reserved)
	sizeofMlx5IbCreateQp     = 56
	sizeofMlx5IbCreateQpResp = 40
	srqRQ                    = 0x1 // MLX5_SRQ_RQ
	wqeDataSegSize           = 16  // struct mlx5_wqe_data_seg
	eceVersion1              = 0x10000000
)

// vqp is the kernel's verbs QP (struct mlx5_ib_qp with its
// ib_uqp_object).
type vqp struct {
	d     *Device
	h     seam.Handle
	typ   int    // seam.QPTypeRC, UC, UD, or qpTypeDCI, qpTypeDCT
	qpn   uint32 // ibqp.qp_num: 0 for a DCT (its number comes at RTR)
	state uint8  // qp->state: the IB state the kernel believes
	port  uint8  // qp->port
	user  uint64
	pd    *uobj
	scq   *vcq
	rcq   *vcq
	srq   *vsrq
	cap   seam.QPCap // as granted at create
	// The receive queue as set_rq_size saw it.
	rqCnt, rqMaxGS uint32
	sigAll         bool
	flagsEn        uint32 // the vendor flags mlx5_ib accepted
	uidx           uint32
	// trans_qp state the modify path keeps (atomic_rd_en, resp_depth,
	// alt_port).
	atomicRdEn uint32
	respDepth  uint8
	altPort    uint8
	// The DCT: its access key and ECE until INIT2RTR creates it, its
	// context fields as modify_dct sets them.
	accessKey uint64
	ece       uint32
	dctc      []byte // a qpc holding the dctc fields the model keeps
	// fw is the firmware QP (the DCT once in RTR; nil before).
	fw *qpObj
}

// CreateQP is UVERBS_METHOD_QP_CREATE with struct mlx5_ib_create_qp and
// struct mlx5_ib_create_qp_resp. See docs/MODEL.md "Verbs" for the rules
// and their sources.
func (d *Device) CreateQP(q seam.QPCreate, drvIn, drvOut []byte) (seam.Handle, seam.QPCreated, error) {
	const call = "create qp"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return 0, seam.QPCreated{}, err
	}
	v, err := d.createQP(call, q, drvIn, drvOut)
	if err != nil {
		return 0, seam.QPCreated{}, err
	}
	return v.h, seam.QPCreated{QPN: v.qpn, Cap: v.cap}, nil
}

func (d *Device) createQP(call string, q seam.QPCreate, drvIn, drvOut []byte) (*vqp, error) {
	// The attributes' objects are looked up before the handler runs
	// (uverbs_process_attr): an unknown handle is ENOENT, one of another
	// type EINVAL.
	pd, err := d.lookupKind(call, q.PD, kindPD)
	if err != nil {
		return nil, err
	}
	var so, ro, sr *uobj
	for _, l := range []struct {
		h seam.Handle
		o **uobj
		k uobjKind
	}{{q.SendCQ, &so, kindCQ}, {q.RecvCQ, &ro, kindCQ}, {q.SRQ, &sr, kindSRQ}} {
		if l.h == seam.NoHandle {
			continue
		}
		if *l.o, err = d.lookupKind(call, l.h, l.k); err != nil {
			return nil, err
		}
	}
	// The uverbs handler.
	switch q.Type {
	case seam.QPTypeRC, seam.QPTypeUC, seam.QPTypeUD, seam.QPTypeDriver:
	case uverbsQPTypeRawPacket:
		return nil, kerr(call, unix.EOPNOTSUPP, "raw packet QPs are not modelled")
	case uverbsQPTypeXRCIni, uverbsQPTypeXRCTgt:
		// No profile has the xrc cap (XRC is not modelled): mlx5_ib's
		// check_qp_type refuses XRC QPs without it. (An XRC target needs
		// an XRCD first, which a device without xrc has no command for:
		// mlx5_ib sets alloc_xrcd only with the cap.)
		return nil, kerr(call, unix.EOPNOTSUPP, "check_qp_type: the device has no xrc")
	default:
		return nil, kerr(call, unix.EINVAL, fmt.Sprintf("QP type %d", q.Type))
	}
	if so == nil || ro == nil {
		return nil, kerr(call, unix.ENOENT, "uverbs_attr_get_obj: RC, UC, UD and driver QPs need SEND_CQ_HANDLE and RECV_CQ_HANDLE")
	}
	flags := q.Flags
	if flags&^(uverbsQPCreateBlockMcastLoopback|uverbsQPCreateScatterFCS|uverbsQPCreateCVLANStripping|
		uverbsQPCreatePCIWriteEndPadding|uverbsQPCreateSQSigAll) != 0 {
		return nil, kerr(call, unix.EINVAL, "uverbs_get_flags32: unknown create flags")
	}
	sigAll := q.SigAll || flags&uverbsQPCreateSQSigAll != 0
	flags &^= uverbsQPCreateSQSigAll
	if flags != 0 && q.Type != seam.QPTypeDriver {
		// check_creation_flags: only raw packet and UD QPs take flags,
		// and scatter FCS and CVLAN stripping only raw packet ones.
		if q.Type != seam.QPTypeUD || flags&(uverbsQPCreateScatterFCS|uverbsQPCreateCVLANStripping) != 0 {
			return nil, kerr(call, unix.EINVAL, "check_creation_flags: the QP type takes no such create flags")
		}
	}
	var srq *vsrq
	if sr != nil {
		srq = sr.srq
	}
	scq, rcq := so.cq, ro.cq

	// mlx5_ib_create_qp.
	if q.Type == seam.QPTypeDriver && d.h.prof.cap(prm.CmdHcaCap.Dct) == 0 {
		return nil, kerr(call, unix.EOPNOTSUPP, "check_qp_type: driver QPs need the dct cap")
	}
	if len(drvIn) < createQPECEOffset {
		return nil, kerr(call, unix.EINVAL, "process_udata_size: the driver data is shorter than struct mlx5_ib_create_qp up to ece_options")
	}
	if len(drvIn) > createQPReservedOffset && !zero(drvIn[createQPReservedOffset:]) {
		return nil, kerr(call, unix.EINVAL, "check_ucmd_data: the driver data is not clear after dci_streams")
	}
	var u mlx5abi.Mlx5IbCreateQp
	decodeDrv(drvIn[:min(len(drvIn), sizeofMlx5IbCreateQp)], &u)
	v := &vqp{d: d, typ: int(q.Type), user: q.UserHandle, pd: pd, scq: scq, rcq: rcq, srq: srq, sigAll: sigAll, cap: q.Cap}
	if err := d.processVendorFlags(call, v, u.Flags); err != nil {
		return nil, err
	}
	// get_qp_user_index with the context's cqe_version 1.
	if u.Uidx == mlx5IBDefaultUIDX || u.Uidx&^0xffffff != 0 {
		return nil, kerr(call, unix.EINVAL, "verify_assign_uidx: uidx is MLX5_IB_DEFAULT_UIDX or wider than 24 bits")
	}
	v.uidx = u.Uidx
	// process_create_flags: no profile has block_lb_mc or end_pad.
	if v.typ == qpTypeDCT && flags != 0 {
		return nil, kerr(call, unix.EINVAL, "process_create_flags: a DCT takes no create flags")
	}
	if flags != 0 {
		return nil, kerr(call, unix.EOPNOTSUPP, "process_create_flags: the device has neither block_lb_mc nor end_pad")
	}
	// check_qp_attr.
	switch {
	case v.typ == qpTypeDCT && srq == nil:
		return nil, kerr(call, unix.EINVAL, "check_qp_attr: a DCT needs an SRQ")
	case v.typ == qpTypeDCI && (q.Cap.MaxRecvWR != 0 || q.Cap.MaxRecvSGE != 0):
		return nil, kerr(call, unix.EINVAL, "check_qp_attr: a DCI has no receive queue")
	}
	if v.typ == qpTypeDCT {
		// create_dct: nothing reaches the firmware before INIT2RTR.
		v.accessKey = u.SqBufAddr
		v.ece = u.EceOptions
		v.dctc = prm.Qpc.Layout().New()
		v.state = QPStateReset
	} else if err := d.createUserQP(call, v, &u, q); err != nil {
		return nil, err
	}
	// The response: zeros for a DCT.
	var resp mlx5abi.Mlx5IbCreateQpResp
	if v.typ != qpTypeDCT {
		resp.BfregIndex = mlx5IBInvalidBfreg // UAR_PAGE_INDEX: the bfreg is the library's
		if d.h.prof.cap(prm.CmdHcaCap.EceSupport) != 0 {
			resp.EceOptions = v.ece
		}
	}
	putDrv(drvOut, &resp, sizeofMlx5IbCreateQpResp)
	// ib_qp_usecnt_inc.
	d.h.pds[pd.pdn].refs++
	scq.usecnt++
	rcq.usecnt++
	if srq != nil {
		srq.usecnt++
	}
	o := &uobj{kind: kindQP, qp: v}
	if v.fw != nil {
		v.fw.ib = v
		o.objID = encObjID(prm.MLX5_CMD_OP_CREATE_QP, v.qpn)
	}
	v.h = d.newHandle(o)
	return v, nil
}

// processVendorFlags is process_vendor_flags: the DC type flags make the
// QP a DCI or DCT (an IB_QPT_DRIVER QP needs exactly one), and every flag
// must be one the device takes; the scatter-to-CQE flags are dropped
// without an error (no profile has sctr_data_cqe).
func (d *Device) processVendorFlags(call string, v *vqp, flags uint32) error {
	switch flags & (mlx5abi.MLX5_QP_FLAG_TYPE_DCT | mlx5abi.MLX5_QP_FLAG_TYPE_DCI) {
	case mlx5abi.MLX5_QP_FLAG_TYPE_DCI:
		v.typ = qpTypeDCI
	case mlx5abi.MLX5_QP_FLAG_TYPE_DCT:
		v.typ = qpTypeDCT
	default:
		if v.typ == seam.QPTypeDriver {
			return kerr(call, unix.EINVAL, "process_vendor_flags: a driver QP needs MLX5_QP_FLAG_TYPE_DCI or _DCT")
		}
	}
	take := func(flag uint32, cond bool) {
		if flags&flag != 0 && cond {
			v.flagsEn |= flag
			flags &^= flag
		}
	}
	take(mlx5abi.MLX5_QP_FLAG_TYPE_DCI, true)
	take(mlx5abi.MLX5_QP_FLAG_TYPE_DCT, true)
	take(mlx5abi.MLX5_QP_FLAG_DCI_STREAM, d.h.prof.cap(prm.CmdHcaCap.LogMaxDciStreamChannels) != 0)
	take(mlx5abi.MLX5_QP_FLAG_SIGNATURE, true)
	if d.h.prof.cap(prm.CmdHcaCap.SctrDataCqe) == 0 {
		flags &^= mlx5abi.MLX5_QP_FLAG_SCATTER_CQE | mlx5abi.MLX5_QP_FLAG_ALLOW_SCATTER_CQE
	}
	if v.typ == seam.QPTypeRC {
		take(mlx5abi.MLX5_QP_FLAG_PACKET_BASED_CREDIT_MODE, d.h.prof.cap(prm.CmdHcaCap.QpPacketBased) != 0)
	}
	take(mlx5abi.MLX5_QP_FLAG_BFREG_INDEX, true)
	take(mlx5abi.MLX5_QP_FLAG_UAR_PAGE_INDEX, true)
	if flags != 0 {
		return kerr(call, unix.EINVAL, fmt.Sprintf("process_vendor_flags: unsupported flags %#x", flags))
	}
	return nil
}

// createUserQP is create_user_qp and create_dci: the receive queue from
// the driver data (set_rq_size), the UAR page (_create_user_qp), the
// buffer (set_user_buf_size: RQ then SQ at buf_addr) and the doorbell
// record, then CREATE_QP.
func (d *Device) createUserQP(call string, v *vqp, u *mlx5abi.Mlx5IbCreateQp, q seam.QPCreate) error {
	maxWQ := uint64(1) << d.h.prof.cap(prm.CmdHcaCap.LogMaxQpSz)
	// set_rq_size.
	if uint64(q.Cap.MaxRecvWR) > maxWQ {
		return kerr(call, unix.EINVAL, "set_rq_size: max_recv_wr over 1 << log_max_qp_sz")
	}
	hasRQ := v.srq == nil && q.Cap.MaxRecvWR != 0 && v.typ != qpTypeDCI
	var rqShift uint32
	if hasRQ {
		if u.RqWqeShift > 32 {
			return kerr(call, unix.EINVAL, "set_rq_size: rq_wqe_shift over 32")
		}
		wqSig := uint64(0)
		if v.flagsEn&mlx5abi.MLX5_QP_FLAG_SIGNATURE != 0 {
			wqSig = 1
		}
		segs := (uint64(1) << u.RqWqeShift) / wqeDataSegSize
		if segs < wqSig {
			return kerr(call, unix.EINVAL, "set_rq_size: the receive WQE has no room for the signature")
		}
		v.rqCnt, rqShift, v.rqMaxGS = u.RqWqeCount, u.RqWqeShift, uint32(segs-wqSig)
	} else {
		v.cap.MaxRecvWR, v.cap.MaxRecvSGE = 0, 0
	}
	if u.RqWqeShift != rqShift || u.RqWqeCount != v.rqCnt {
		return kerr(call, unix.EINVAL, "create_user_qp: rq_wqe_shift and rq_wqe_count are not the receive queue set_rq_size made")
	}
	if uint64(u.SqWqeCount) > maxWQ {
		return kerr(call, unix.EINVAL, "create_user_qp: sq_wqe_count over 1 << log_max_qp_sz")
	}
	if errno, rule := d.h.qpTSFormat(v.scq, v.rcq); errno != 0 {
		return kerr(call, errno, rule)
	}
	// _create_user_qp.
	var uarIndex uint32
	switch v.flagsEn & (mlx5abi.MLX5_QP_FLAG_UAR_PAGE_INDEX | mlx5abi.MLX5_QP_FLAG_BFREG_INDEX) {
	case mlx5abi.MLX5_QP_FLAG_UAR_PAGE_INDEX:
		uarIndex = u.BfregIndex
	case mlx5abi.MLX5_QP_FLAG_BFREG_INDEX:
		return kerr(call, unix.EINVAL, "bfregn_to_uar_index: the context's UARs are dynamic (lib_uar_dyn)")
	case 0:
		return kerr(call, unix.EINVAL, "alloc_bfreg: the context's UARs are dynamic (lib_uar_dyn): give MLX5_QP_FLAG_UAR_PAGE_INDEX")
	default:
		return kerr(call, unix.EINVAL, "_create_user_qp: both MLX5_QP_FLAG_UAR_PAGE_INDEX and MLX5_QP_FLAG_BFREG_INDEX")
	}
	// set_user_buf_size.
	if u.SqWqeCount != 0 && u.SqWqeCount&(u.SqWqeCount-1) != 0 {
		return kerr(call, unix.EINVAL, "set_user_buf_size: sq_wqe_count is not a power of two")
	}
	bufSize := uint64(v.rqCnt)<<rqShift + uint64(u.SqWqeCount)<<6
	var mem pinned
	if u.BufAddr != 0 && bufSize != 0 {
		buf, errno := userMem(u.BufAddr, bufSize, false)
		if errno != 0 {
			return kerr(call, errno, "ib_umem_get of the QP buffer")
		}
		if u.BufAddr%bufAlign != 0 {
			return kerr(call, unix.EINVAL, "mlx5_umem_find_best_quantized_pgoff: the QP buffer is not 64-byte aligned")
		}
		mem.buf = buf
	}
	dbr, errno := userMem(u.DbAddr, dbrSize, false)
	if errno != 0 {
		return kerr(call, errno, "mlx5_ib_db_map_user of the doorbell record")
	}
	mem.dbr = dbr

	in := prm.CreateQpIn.Layout().New()
	prm.MboxIn.Opcode.Set(in, prm.MLX5_CMD_OP_CREATE_QP)
	prm.MboxIn.Uid.Set(in, uint64(d.uid))
	if d.h.prof.cap(prm.CmdHcaCap.EceSupport) != 0 {
		prm.CreateQpIn.Ece.Set(in, uint64(u.EceOptions))
	}
	qpc := prm.CreateQpIn.Qpc
	set := func(f prm.Field, x uint64) { f.At(qpc).Set(in, x) }
	st := map[int]uint64{seam.QPTypeRC: stRC, seam.QPTypeUC: stUC, seam.QPTypeUD: stUD, qpTypeDCI: stDCI}[v.typ]
	set(prm.Qpc.St, st)
	set(prm.Qpc.PmState, pmMigrated)
	set(prm.Qpc.Pd, uint64(v.pd.pdn))
	if v.flagsEn&mlx5abi.MLX5_QP_FLAG_SIGNATURE != 0 {
		set(prm.Qpc.WqSignature, 1)
	}
	if v.rqCnt != 0 {
		set(prm.Qpc.LogRqStride, uint64(rqShift)-4)
		set(prm.Qpc.LogRqSize, uint64(bits.Len32(v.rqCnt)-1))
	}
	if v.typ == qpTypeDCI && v.flagsEn&mlx5abi.MLX5_QP_FLAG_DCI_STREAM != 0 {
		set(prm.Qpc.LogNumDciStreamChannels, uint64(u.DciStreams.LogNumConcurent))
		set(prm.Qpc.LogNumDciErroredStreams, uint64(u.DciStreams.LogNumErrored))
	}
	switch {
	case v.srq != nil || v.typ == qpTypeDCI:
		set(prm.Qpc.RqType, srqRQ) // get_rx_type
	case !hasRQ:
		set(prm.Qpc.RqType, zeroLenRQ)
	}
	if u.SqWqeCount != 0 {
		set(prm.Qpc.LogSqSize, uint64(bits.Len32(u.SqWqeCount)-1))
	} else {
		set(prm.Qpc.NoSq, 1)
	}
	if v.srq != nil {
		// Without one the kernel names its own SRQ (devr->s1), which the
		// model does not have: srqn 0.
		set(prm.Qpc.SrqnRmpnXrqn, uint64(v.srq.srqn))
	}
	set(prm.Qpc.CqnSnd, uint64(v.scq.cqn))
	set(prm.Qpc.CqnRcv, uint64(v.rcq.cqn))
	set(prm.Qpc.UarPage, uint64(uarIndex))
	set(prm.Qpc.DbrAddr, u.DbAddr)
	set(prm.Qpc.UserIndex, uint64(v.uidx)) // cqe_version 1
	out := make([]byte, prm.CreateQpOut.Layout().Size)
	if err := d.fwErrno(call, &fwCall{uid: d.uid, ctx: d.id, in: in, out: out, mem: &mem}); err != nil {
		return err
	}
	v.qpn = uint32(prm.CreateQpOut.Qpn.Get(out))
	v.ece = uint32(prm.CreateQpOut.Ece.Get(out))
	v.fw = d.h.qps[v.qpn]
	v.state = QPStateReset
	return nil
}

// Kernel QP states (enum ib_qp_state) under the model's names.
const (
	QPStateReset = seam.QPStateReset
	QPStateInit  = seam.QPStateInit
	QPStateRTR   = seam.QPStateRTR
	QPStateRTS   = seam.QPStateRTS
	QPStateSQD   = seam.QPStateSQD
	QPStateSQE   = seam.QPStateSQE
	QPStateErr   = seam.QPStateErr
)

// pmMigrated is MLX5_QP_PM_MIGRATED (qp.h): the path migration state of
// a QP without an alternate path.
const pmMigrated = 0x3

// DestroyQP is UVERBS_METHOD_QP_DESTROY: destroy_qp_common (2RST if the
// kernel thinks the QP is not in RESET, then DESTROY_QP), or the DCT's
// DESTROY_DCT if it reached RTR; the QP's unread events go.
func (d *Device) DestroyQP(h seam.Handle) error {
	const call = "destroy qp"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	o, err := d.lookupKind(call, h, kindQP)
	if err != nil {
		return err
	}
	d.runPending()
	d.destroyQP(o.qp)
	delete(d.handles, h)
	return nil
}

func (d *Device) destroyQP(v *vqp) {
	if f := v.fw; f != nil && d.h.qps[f.qpn] == f {
		if v.typ != qpTypeDCT && v.state != QPStateReset {
			d.h.toRST(f)
		}
		d.h.releaseQP(f.qpn, f)
	}
	d.h.pds[v.pd.pdn].refs--
	v.scq.usecnt--
	v.rcq.usecnt--
	if v.srq != nil {
		v.srq.usecnt--
	}
	d.async.drop(v)
}
