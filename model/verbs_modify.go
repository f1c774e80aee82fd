package model

import (
	"fmt"
	"math/bits"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// Modify and query of verbs QPs: the uverbs handler (modify_qp and
// ib_uverbs_query_qp, drivers/infiniband/core/uverbs_cmd.c), the core's
// _ib_modify_qp and ib_modify_qp_is_ok (verbs.c), and mlx5_ib's
// mlx5_ib_modify_qp, __mlx5_ib_modify_qp, mlx5_set_path,
// mlx5_ib_modify_dct, mlx5_ib_query_qp (qp.c).

// enum ib_qp_attr_mask (include/rdma/ib_verbs.h).
const (
	maskState           = 1 << 0
	maskCurState        = 1 << 1
	maskEnSQDAsync      = 1 << 2
	maskAccess          = 1 << 3
	maskPKey            = 1 << 4
	maskPort            = 1 << 5
	maskQKey            = 1 << 6
	maskAV              = 1 << 7
	maskPathMTU         = 1 << 8
	maskTimeout         = 1 << 9
	maskRetryCnt        = 1 << 10
	maskRNRRetry        = 1 << 11
	maskRQPSN           = 1 << 12
	maskMaxQPRdAtomic   = 1 << 13
	maskAltPath         = 1 << 14
	maskMinRNRTimer     = 1 << 15
	maskSQPSN           = 1 << 16
	maskMaxDestRdAtomic = 1 << 17
	maskPathMigState    = 1 << 18
	maskCap             = 1 << 19
	maskDestQPN         = 1 << 20
	maskRateLimit       = 1 << 25
	maskStandardBits    = 1<<21 - 1 // IB_QP_ATTR_STANDARD_BITS
)

// enum ib_access_flags bits of a QP (IB_ACCESS_REMOTE_*).
const (
	ibAccessRemoteWrite  = 1 << 1
	ibAccessRemoteRead   = 1 << 2
	ibAccessRemoteAtomic = 1 << 3
)

// qpTrans is one valid (current, next) state pair of ib_modify_qp_is_ok's
// qp_state_table: the required and optional attributes, by QP type (RC,
// UC, UD).
type qpTrans struct{ req, opt [3]uint32 }

const (
	tRC = iota
	tUC
	tUD
)

var (
	optSQDRTS = [3]uint32{maskCurState | maskAltPath | maskAccess | maskMinRNRTimer | maskPathMigState,
		maskCurState | maskAltPath | maskAccess | maskPathMigState, maskCurState | maskQKey}
	qpStateTable = map[[2]uint8]qpTrans{
		{QPStateReset, QPStateReset}: {},
		{QPStateReset, QPStateInit}: {req: [3]uint32{maskPKey | maskPort | maskAccess, maskPKey | maskPort | maskAccess,
			maskPKey | maskPort | maskQKey}},
		{QPStateInit, QPStateReset}: {},
		{QPStateInit, QPStateErr}:   {},
		{QPStateInit, QPStateInit}: {opt: [3]uint32{maskPKey | maskPort | maskAccess, maskPKey | maskPort | maskAccess,
			maskPKey | maskPort | maskQKey}},
		{QPStateInit, QPStateRTR}: {
			req: [3]uint32{maskAV | maskPathMTU | maskDestQPN | maskRQPSN | maskMaxDestRdAtomic | maskMinRNRTimer,
				maskAV | maskPathMTU | maskDestQPN | maskRQPSN, 0},
			opt: [3]uint32{maskAltPath | maskAccess | maskPKey, maskAltPath | maskAccess | maskPKey, maskPKey | maskQKey}},
		{QPStateRTR, QPStateReset}: {},
		{QPStateRTR, QPStateErr}:   {},
		{QPStateRTR, QPStateRTS}: {
			req: [3]uint32{maskTimeout | maskRetryCnt | maskRNRRetry | maskSQPSN | maskMaxQPRdAtomic, maskSQPSN, maskSQPSN},
			opt: [3]uint32{maskCurState | maskAltPath | maskAccess | maskMinRNRTimer | maskPathMigState,
				maskCurState | maskAltPath | maskAccess | maskPathMigState, maskCurState | maskQKey}},
		{QPStateRTS, QPStateReset}: {},
		{QPStateRTS, QPStateErr}:   {},
		{QPStateRTS, QPStateRTS}: {opt: [3]uint32{maskCurState | maskAccess | maskAltPath | maskPathMigState | maskMinRNRTimer,
			maskCurState | maskAccess | maskAltPath | maskPathMigState, maskCurState | maskQKey}},
		{QPStateRTS, QPStateSQD}:   {opt: [3]uint32{maskEnSQDAsync, maskEnSQDAsync, maskEnSQDAsync}},
		{QPStateSQD, QPStateReset}: {},
		{QPStateSQD, QPStateErr}:   {},
		{QPStateSQD, QPStateRTS}:   {opt: optSQDRTS},
		{QPStateSQD, QPStateSQD}: {opt: [3]uint32{maskPort | maskAV | maskTimeout | maskRetryCnt | maskRNRRetry |
			maskMaxQPRdAtomic | maskMaxDestRdAtomic | maskAltPath | maskAccess | maskPKey | maskMinRNRTimer | maskPathMigState,
			maskAV | maskAltPath | maskAccess | maskPKey | maskPathMigState, maskPKey | maskQKey}},
		{QPStateSQE, QPStateReset}: {},
		{QPStateSQE, QPStateErr}:   {},
		{QPStateSQE, QPStateRTS}:   {opt: [3]uint32{0, maskCurState | maskAccess, maskCurState | maskQKey}},
		{QPStateErr, QPStateReset}: {},
		{QPStateErr, QPStateErr}:   {},
	}
)

// modifyOK is ib_modify_qp_is_ok for RC (t 0), UC (1) and UD (2).
func modifyOK(cur, next uint8, t int, mask uint32) bool {
	if mask&maskCurState != 0 && cur != QPStateRTR && cur != QPStateRTS && cur != QPStateSQD && cur != QPStateSQE {
		return false
	}
	e, ok := qpStateTable[[2]uint8{cur, next}]
	if !ok {
		return false
	}
	return mask&e.req[t] == e.req[t] && mask&^(e.req[t]|e.opt[t]|maskState) == 0
}

// validMask is is_valid_mask.
func validMask(mask, req, opt uint32) bool { return mask&req == req && mask&^(req|opt) == 0 }

// modifyDCIOK is modify_dci_qp_is_ok.
func modifyDCIOK(cur, next uint8, mask uint32) bool {
	req, opt := uint32(maskState), uint32(0)
	switch {
	case next == QPStateReset:
	case cur == QPStateReset && next == QPStateInit:
		req |= maskPKey | maskPort
	case cur == QPStateInit && next == QPStateInit:
		opt = maskPKey | maskPort
	case cur == QPStateInit && next == QPStateRTR:
		req |= maskPathMTU
		opt = maskPKey | maskAV
	case cur == QPStateRTR && next == QPStateRTS:
		req |= maskTimeout | maskRetryCnt | maskRNRRetry | maskMaxQPRdAtomic | maskSQPSN
		opt = maskMinRNRTimer
	case cur == QPStateRTS && next == QPStateRTS:
		opt = maskMinRNRTimer
	case cur != QPStateReset && next == QPStateErr:
	default:
		return false
	}
	return validMask(mask, req, opt)
}

// The PRM transition of each (current, next) pair (__mlx5_ib_modify_qp's
// optab), by IB states: to_mlx5_state maps SQD to MLX5_QP_STATE_SQD and
// SQE to SQER. There is no RTS to SQD: mlx5_ib cannot move a QP there,
// only the device does (a drain after a signature error).
var optab = map[[2]uint8]uint16{
	{QPStateReset, QPStateReset}: prm.MLX5_CMD_OP_2RST_QP,
	{QPStateReset, QPStateErr}:   prm.MLX5_CMD_OP_2ERR_QP,
	{QPStateReset, QPStateInit}:  prm.MLX5_CMD_OP_RST2INIT_QP,
	{QPStateInit, QPStateReset}:  prm.MLX5_CMD_OP_2RST_QP,
	{QPStateInit, QPStateErr}:    prm.MLX5_CMD_OP_2ERR_QP,
	{QPStateInit, QPStateInit}:   prm.MLX5_CMD_OP_INIT2INIT_QP,
	{QPStateInit, QPStateRTR}:    prm.MLX5_CMD_OP_INIT2RTR_QP,
	{QPStateRTR, QPStateReset}:   prm.MLX5_CMD_OP_2RST_QP,
	{QPStateRTR, QPStateErr}:     prm.MLX5_CMD_OP_2ERR_QP,
	{QPStateRTR, QPStateRTS}:     prm.MLX5_CMD_OP_RTR2RTS_QP,
	{QPStateRTS, QPStateReset}:   prm.MLX5_CMD_OP_2RST_QP,
	{QPStateRTS, QPStateErr}:     prm.MLX5_CMD_OP_2ERR_QP,
	{QPStateRTS, QPStateRTS}:     prm.MLX5_CMD_OP_RTS2RTS_QP,
	{QPStateSQD, QPStateReset}:   prm.MLX5_CMD_OP_2RST_QP,
	{QPStateSQD, QPStateErr}:     prm.MLX5_CMD_OP_2ERR_QP,
	{QPStateSQD, QPStateRTS}:     prm.MLX5_CMD_OP_SQD_RTS_QP,
	{QPStateSQE, QPStateReset}:   prm.MLX5_CMD_OP_2RST_QP,
	{QPStateSQE, QPStateErr}:     prm.MLX5_CMD_OP_2ERR_QP,
	{QPStateSQE, QPStateRTS}:     prm.MLX5_CMD_OP_SQERR2RTS_QP,
	{QPStateErr, QPStateReset}:   prm.MLX5_CMD_OP_2RST_QP,
	{QPStateErr, QPStateErr}:     prm.MLX5_CMD_OP_2ERR_QP,
}

// Optional parameters (enum mlx5_qp_optpar, qp.h).
const (
	optAltAddrPath = 1 << 0
	optRRE         = 1 << 1
	optRAE         = 1 << 2
	optRWE         = 1 << 3
	optPKeyIndex   = 1 << 4
	optQKey        = 1 << 5
	optRNRTimeout  = 1 << 6
	optPriAddrPath = 1 << 7
	optSRAMax      = 1 << 8
	optRRAMax      = 1 << 9
	optPMState     = 1 << 10
	optRetryCount  = 1 << 12
	optRNRRetry    = 1 << 13
	optAckTimeout  = 1 << 14
	optLagTxAff    = 1 << 15
	optPriPort     = 1 << 16
	optSRQN        = 1 << 18
	optCQNRcv      = 1 << 19
)

// ibMaskToOpt is ib_nr_to_mlx5_nr, bit by bit.
var ibMaskToOpt = map[uint32]uint32{
	maskAccess:          optRWE | optRRE | optRAE,
	maskPKey:            optPKeyIndex,
	maskPort:            optPriPort,
	maskQKey:            optQKey,
	maskAV:              optPriAddrPath | optPriPort,
	maskTimeout:         optAckTimeout,
	maskRetryCnt:        optRetryCount,
	maskRNRRetry:        optRNRRetry,
	maskMaxQPRdAtomic:   optSRAMax,
	maskAltPath:         optAltAddrPath,
	maskMinRNRTimer:     optRNRTimeout,
	maskMaxDestRdAtomic: optRRAMax | optRWE | optRRE | optRAE,
	maskPathMigState:    optPMState,
}

// optMask is opt_mask, by (current, next) IB state and st (RC, UC, UD; DCI
// has none).
var optMask = map[[2]uint8][3]uint32{
	{QPStateInit, QPStateInit}: {optRRE | optRAE | optRWE | optPKeyIndex | optPriPort | optLagTxAff,
		optRWE | optPKeyIndex | optPriPort | optLagTxAff, optPKeyIndex | optQKey | optPriPort},
	{QPStateInit, QPStateRTR}: {optAltAddrPath | optRRE | optRAE | optRWE | optPKeyIndex | optLagTxAff,
		optAltAddrPath | optRWE | optPKeyIndex | optLagTxAff, optPKeyIndex | optQKey},
	{QPStateRTR, QPStateRTS}: {optAltAddrPath | optRRE | optRAE | optRWE | optPMState | optRNRTimeout,
		optAltAddrPath | optRWE | optPMState, optQKey},
	{QPStateRTS, QPStateRTS}: {optRRE | optRAE | optRWE | optRNRTimeout | optPMState | optAltAddrPath,
		optRWE | optPMState | optAltAddrPath, optQKey | optSRQN | optCQNRcv},
	{QPStateSQE, QPStateRTS}: {optRNRTimeout | optRWE | optRAE | optRRE, optRWE, optQKey},
	{QPStateSQD, QPStateRTS}: {optRNRTimeout | optRWE | optRAE | optRRE, optRWE, optQKey},
}

// tIndex is a QP's column in the tables above (-1 for a DC QP).
func (v *vqp) tIndex() int {
	switch v.typ {
	case seam.QPTypeRC:
		return tRC
	case seam.QPTypeUC:
		return tUC
	case seam.QPTypeUD:
		return tUD
	}
	return -1
}

// Values the modify writes (qp.c, driver.h).
const (
	mlx5IBAckReqFreq = 8  // MLX5_IB_ACK_REQ_FREQ
	atomicModeIBComp = 1  // MLX5_ATOMIC_MODE_IB_COMP
	atomicMode8B     = 3  // MLX5_ATOMIC_MODE_8B
	udLogMsgMax      = 12 // a UD QP's log_msg_max
	sizeofModifyQP   = 16
	eceOffsetEnd     = 12 // offsetofend(struct mlx5_ib_modify_qp, ece_options)
	roceUDPSportMin  = 0xc000
	flowLabelMask    = 0xfffff
)

// ModifyQP is the uverbs modify QP (ib_uverbs_ex_modify_qp) with struct
// mlx5_ib_modify_qp and struct mlx5_ib_modify_qp_resp: see docs/MODEL.md
// "Verbs QPs" for the checks and the translation.
func (d *Device) ModifyQP(h seam.Handle, a *seam.QPAttr, mask uint32, drvIn, drvOut []byte) error {
	const call = "modify qp"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	o, err := d.lookupKind(call, h, kindQP)
	if err != nil {
		return err
	}
	if a == nil {
		return kerr(call, unix.EFAULT, "no attributes")
	}
	attr := *a
	return d.modifyQP(call, o.qp, &attr, mask, drvIn, drvOut)
}

func (d *Device) modifyQP(call string, v *vqp, a *seam.QPAttr, mask uint32, drvIn, drvOut []byte) error {
	// The uverbs handler (modify_qp).
	if mask&^(maskRateLimit<<1-1) != 0 {
		return kerr(call, unix.EOPNOTSUPP, "ib_uverbs_ex_modify_qp: unknown attribute mask bits")
	}
	if mask&maskPort != 0 && !d.h.portValid(a.Port) {
		return kerr(call, unix.EINVAL, "modify_qp: invalid port")
	}
	if mask&maskAV != 0 {
		if !d.h.portValid(a.AH.Port) {
			return kerr(call, unix.EINVAL, "modify_qp: invalid port in the address vector")
		}
		if mask&maskState != 0 && a.State == QPStateRTR {
			if a.AH.Port != v.port {
				return kerr(call, unix.EINVAL, "modify_qp: the address vector's port is not the QP's")
			}
		} else {
			if mask&(maskAV|maskPort) == maskAV|maskPort && a.Port != a.AH.Port {
				return kerr(call, unix.EINVAL, "modify_qp: the port and the address vector's port differ")
			}
			if mask&maskPort == 0 {
				mask |= maskPort
				a.Port = a.AH.Port
			}
		}
	}
	if mask&maskAltPath != 0 && (!d.h.portValid(a.AltPort) || !d.h.portValid(a.AltAH.Port) || a.AltPort != a.AltAH.Port) {
		return kerr(call, unix.EINVAL, "modify_qp: invalid alternate port")
	}
	if (mask&maskCurState != 0 && a.CurState > QPStateErr) || (mask&maskState != 0 && a.State > QPStateErr) {
		return kerr(call, unix.EINVAL, "modify_qp: state out of range")
	}
	if mask&maskQKey != 0 && a.QKey&0x80000000 != 0 {
		return kerr(call, unix.EPERM, "modify_qp: a privileged Q_Key needs CAP_NET_RAW, which the model's contexts do not have")
	}
	// _ib_modify_qp.
	var dmac [6]byte
	if mask&maskAV != 0 {
		sgid, err := d.h.checkAV(call, &a.AH)
		if err != nil {
			return err
		}
		if v.typ == seam.QPTypeRC || v.typ == seam.QPTypeUC {
			// is_qp_type_connected: resolve the destination MAC.
			mac, hop, err := d.h.resolveDMAC(call, sgid, a.AH.GRH.DGID)
			if err != nil {
				return err
			}
			dmac = mac
			if hop >= 0 {
				a.AH.GRH.HopLimit = uint8(hop)
			}
		}
	}
	if mask&maskAltPath != 0 {
		return kerr(call, unix.EINVAL, "_ib_modify_qp: alternate paths only on InfiniBand, the port is RoCE")
	}
	a.RQPSN &= 0xffffff
	a.SQPSN &= 0xffffff

	// mlx5_ib_modify_qp.
	if mask&^(maskStandardBits|maskRateLimit) != 0 {
		return kerr(call, unix.EOPNOTSUPP, "mlx5_ib_modify_qp: attribute mask bits the driver does not take")
	}
	var ucmd mlx5abi.Mlx5IbModifyQp
	if len(drvIn) > 0 {
		switch {
		case len(drvIn) < eceOffsetEnd:
			return kerr(call, unix.EINVAL, "mlx5_ib_modify_qp: the driver data ends before ece_options")
		case len(drvIn) > sizeofModifyQP && !zero(drvIn[sizeofModifyQP:]):
			return kerr(call, unix.EOPNOTSUPP, "mlx5_ib_modify_qp: the driver data is not clear after the struct")
		}
		decodeDrv(drvIn[:min(len(drvIn), sizeofModifyQP)], &ucmd)
		if ucmd.CompMask != 0 || ucmd.BurstInfo.Reserved != 0 {
			return kerr(call, unix.EOPNOTSUPP, "mlx5_ib_modify_qp: comp_mask or reserved bits set")
		}
	}
	if v.typ == qpTypeDCT {
		return d.modifyDCT(call, v, a, mask, &ucmd, drvOut)
	}
	cur := v.state
	if mask&maskCurState != 0 {
		cur = a.CurState
	}
	next := cur
	if mask&maskState != 0 {
		next = a.State
	}
	if v.typ == qpTypeDCI {
		if !modifyDCIOK(cur, next, mask) {
			return kerr(call, unix.EINVAL, fmt.Sprintf("modify_dci_qp_is_ok: %d to %d with mask %#x", cur, next, mask))
		}
	} else if !modifyOK(cur, next, v.tIndex(), mask) {
		return kerr(call, unix.EINVAL, fmt.Sprintf("ib_modify_qp_is_ok: %d to %d with mask %#x", cur, next, mask))
	}
	if mask&maskPKey != 0 && uint64(a.PKeyIndex) >= d.h.prof.cap(prm.CmdHcaCap.PkeyTableSize) {
		return kerr(call, unix.EINVAL, "mlx5_ib_modify_qp: pkey_index past the P_Key table")
	}
	raRes, raReq := d.h.prof.cap(prm.CmdHcaCap.LogMaxRaResQp), d.h.prof.cap(prm.CmdHcaCap.LogMaxRaReqQp)
	if v.typ == qpTypeDCI {
		raRes, raReq = d.h.prof.cap(prm.CmdHcaCap.LogMaxRaResDc), d.h.prof.cap(prm.CmdHcaCap.LogMaxRaReqDc)
	}
	if (mask&maskMaxQPRdAtomic != 0 && uint64(a.MaxRdAtomic) > 1<<raRes) || (mask&maskMaxDestRdAtomic != 0 && uint64(a.MaxDestRdAtomic) > 1<<raReq) {
		return kerr(call, unix.EINVAL, "validate_rd_atomic: over the device's read/atomic depth")
	}
	if cur == next && cur == QPStateReset {
		return nil
	}
	return d.modifyFW(call, v, a, mask, cur, next, dmac, &ucmd, drvOut)
}

// modifyFW is __mlx5_ib_modify_qp: the QP context of the attributes, the
// transition of optab, the optional parameters, MODIFY, and the kernel's
// own state.
func (d *Device) modifyFW(call string, v *vqp, a *seam.QPAttr, mask uint32, cur, next uint8, dmac [6]byte, ucmd *mlx5abi.Mlx5IbModifyQp, drvOut []byte) error {
	op, ok := optab[[2]uint8{cur, next}]
	if !ok {
		return kerr(call, unix.EINVAL, fmt.Sprintf("__mlx5_ib_modify_qp: no PRM transition from %d to %d", cur, next))
	}
	t := transitions[op]
	in := make([]byte, t.minIn)
	prm.MboxIn.Opcode.Set(in, uint64(op))
	prm.MboxIn.Uid.Set(in, uint64(d.uid))
	t.qpn.Set(in, uint64(v.qpn))
	if t.qpc.Width != 0 {
		qpc := t.qpc.Bytes(in)
		if err := d.buildQPC(call, v, qpc, a, mask, dmac); err != nil {
			return err
		}
	}
	var optpar uint32
	for bit := uint32(1); bit != 0 && bit <= mask; bit <<= 1 {
		if mask&bit != 0 {
			optpar |= ibMaskToOpt[bit]
		}
	}
	if i := v.tIndex(); i >= 0 {
		optpar &= optMask[[2]uint8{cur, next}][i]
	} else {
		optpar = 0
	}
	if t.opt.Width != 0 {
		t.opt.Set(in, uint64(optpar))
	}
	ece := uint32(0)
	if d.h.prof.cap(prm.CmdHcaCap.EceSupport) != 0 {
		ece = ucmd.EceOptions
	}
	if t.ece.Width != 0 {
		t.ece.Set(in, uint64(ece))
	}
	out := make([]byte, t.minOut)
	if err := d.fwErrno(call, &fwCall{uid: d.uid, ctx: d.id, in: in, out: out}); err != nil {
		return err
	}
	// get_ece_from_mbox: the answer of the transitions that have one, 0
	// for the others.
	ece = 0
	if t.outECE.Width != 0 {
		ece = uint32(t.outECE.Get(out))
	}
	v.state = next
	if mask&maskAccess != 0 {
		v.atomicRdEn = a.AccessFlags
	}
	if mask&maskMaxDestRdAtomic != 0 {
		v.respDepth = a.MaxDestRdAtomic
	}
	if mask&maskPort != 0 {
		v.port = a.Port
	}
	if mask&maskAltPath != 0 {
		v.altPort = a.AltPort
	}
	// The response (udata is always there): its length is the struct's.
	const sizeofResp = 16
	if len(drvOut) >= sizeofResp {
		putDrv(drvOut, &mlx5abi.Mlx5IbModifyQpResp{ResponseLength: sizeofResp, EceOptions: ece}, sizeofResp)
	}
	return nil
}

// buildQPC fills the QP context of a transition as __mlx5_ib_modify_qp
// does.
func (d *Device) buildQPC(call string, v *vqp, qpc []byte, a *seam.QPAttr, mask uint32, dmac [6]byte) error {
	st := prm.Qpc.St.Get(v.fw.qpc)
	prm.Qpc.St.Set(qpc, st)
	pm := uint64(pmMigrated)
	if mask&maskPathMigState != 0 {
		switch a.PathMigState {
		case 1: // IB_MIG_REARM
			pm = 0x1 // MLX5_QP_PM_REARM
		case 2: // IB_MIG_ARMED
			pm = 0x0 // MLX5_QP_PM_ARMED
		}
	}
	prm.Qpc.PmState.Set(qpc, pm)
	switch {
	case v.typ == seam.QPTypeUD:
		prm.Qpc.Mtu.Set(qpc, ibMTU4096)
		prm.Qpc.LogMsgMax.Set(qpc, udLogMsgMax)
	case mask&maskPathMTU != 0:
		if a.PathMTU < ibMTU256 || a.PathMTU > ibMTU4096 {
			return kerr(call, unix.EINVAL, "__mlx5_ib_modify_qp: invalid path MTU")
		}
		prm.Qpc.Mtu.Set(qpc, uint64(a.PathMTU))
		prm.Qpc.LogMsgMax.Set(qpc, d.h.prof.cap(prm.CmdHcaCap.LogMaxMsg))
	}
	if mask&maskDestQPN != 0 {
		prm.Qpc.RemoteQpn.Set(qpc, uint64(a.DestQPN))
	}
	path := prm.Qpc.PrimaryAddressPath
	if mask&maskPKey != 0 {
		prm.Ads.PkeyIndex.At(path).Set(qpc, uint64(a.PKeyIndex))
	}
	if mask&maskPort != 0 {
		prm.Ads.VhcaPortNum.At(path).Set(qpc, uint64(a.Port))
	}
	if mask&maskAV != 0 {
		port := v.port
		if mask&maskPort != 0 {
			port = a.Port
		}
		if err := d.setPath(call, v, qpc, &a.AH, port, mask, a, dmac); err != nil {
			return err
		}
	}
	if mask&maskTimeout != 0 {
		prm.Ads.AckTimeout.At(path).Set(qpc, uint64(a.Timeout))
	}
	prm.Qpc.Pd.Set(qpc, uint64(v.pd.pdn))
	prm.Qpc.CqnSnd.Set(qpc, uint64(v.scq.cqn))
	prm.Qpc.CqnRcv.Set(qpc, uint64(v.rcq.cqn))
	prm.Qpc.LogAckReqFreq.Set(qpc, mlx5IBAckReqFreq)
	if mask&maskRNRRetry != 0 {
		prm.Qpc.RnrRetry.Set(qpc, uint64(a.RNRRetry))
	}
	if mask&maskRetryCnt != 0 {
		prm.Qpc.RetryCount.Set(qpc, uint64(a.RetryCnt))
	}
	if mask&maskMaxQPRdAtomic != 0 && a.MaxRdAtomic != 0 {
		prm.Qpc.LogSraMax.Set(qpc, uint64(bits.Len8(a.MaxRdAtomic-1)))
	}
	if mask&maskSQPSN != 0 {
		prm.Qpc.NextSendPsn.Set(qpc, uint64(a.SQPSN))
	}
	if mask&maskMaxDestRdAtomic != 0 && a.MaxDestRdAtomic != 0 {
		prm.Qpc.LogRraMax.Set(qpc, uint64(bits.Len8(a.MaxDestRdAtomic-1)))
	}
	if mask&(maskAccess|maskMaxDestRdAtomic) != 0 {
		// set_qpc_atomic_flags.
		depth := v.respDepth
		if mask&maskMaxDestRdAtomic != 0 {
			depth = a.MaxDestRdAtomic
		}
		access := v.atomicRdEn
		if mask&maskAccess != 0 {
			access = a.AccessFlags
		}
		if depth == 0 {
			access &= ibAccessRemoteWrite
		}
		prm.Qpc.Rre.Set(qpc, b2u(access&ibAccessRemoteRead != 0))
		if access&ibAccessRemoteAtomic != 0 {
			mode, ok := d.h.prof.atomicMode(false)
			if !ok {
				return kerr(call, unix.EOPNOTSUPP, "set_qpc_atomic_flags: the device has no atomics (get_atomic_mode)")
			}
			prm.Qpc.Rae.Set(qpc, 1)
			prm.Qpc.AtomicMode.Set(qpc, mode)
		}
		prm.Qpc.Rwe.Set(qpc, b2u(access&ibAccessRemoteWrite != 0))
	}
	if mask&maskMinRNRTimer != 0 {
		prm.Qpc.MinRnrNak.Set(qpc, uint64(a.MinRNRTimer))
	}
	if mask&maskRQPSN != 0 {
		prm.Qpc.NextRcvPsn.Set(qpc, uint64(a.RQPSN))
	}
	if mask&maskQKey != 0 {
		prm.Qpc.QKey.Set(qpc, uint64(a.QKey))
	}
	return nil
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// setPath is mlx5_set_path for the primary path on the RoCE port.
func (d *Device) setPath(call string, v *vqp, qpc []byte, ah *seam.AHAttr, port uint8, mask uint32, a *seam.QPAttr, dmac [6]byte) error {
	path := prm.Qpc.PrimaryAddressPath
	set := func(f prm.Field, x uint64) { f.At(path).Set(qpc, x) }
	if mask&maskPKey != 0 {
		set(prm.Ads.PkeyIndex, uint64(a.PKeyIndex))
	}
	tblLen := d.h.prof.roceCap(prm.RoceCap.RoceAddressTableSize)
	if uint64(ah.GRH.SGIDIndex) >= tblLen {
		return kerr(call, unix.EINVAL, "mlx5_set_path: sgid_index past the GID table")
	}
	sgid, _ := d.h.gid(ah.GRH.SGIDIndex)
	copy(prm.Ads.Rmac4732.At(path).Bytes(qpc), dmac[:2])
	copy(prm.Ads.Rmac310.At(path).Bytes(qpc), dmac[2:])
	if (v.typ == seam.QPTypeRC || v.typ == seam.QPTypeUC) && sgid.Type == gidTypeRoCEv2 && mask&maskDestQPN != 0 {
		fl := ah.GRH.FlowLabel
		if fl == 0 {
			fl = calcFlowLabel(v.qpn, a.DestQPN)
		}
		set(prm.Ads.UdpSport, uint64(flowLabelToUDPSport(fl)))
	}
	set(prm.Ads.EthPrio, uint64(ah.SL&7))
	if sgid.Type == gidTypeRoCEv2 {
		set(prm.Ads.Dscp, uint64(ah.GRH.TrafficClass>>2))
	}
	set(prm.Ads.SrcAddrIndex, uint64(ah.GRH.SGIDIndex))
	set(prm.Ads.HopLimit, uint64(ah.GRH.HopLimit))
	set(prm.Ads.Tclass, uint64(ah.GRH.TrafficClass))
	set(prm.Ads.FlowLabel, uint64(ah.GRH.FlowLabel))
	copy(prm.Ads.RgidRip.At(path).Bytes(qpc), ah.GRH.DGID[:])
	rate, err := rateToMLX5(call, ah.StaticRate)
	if err != nil {
		return err
	}
	set(prm.Ads.StatRate, rate)
	set(prm.Ads.VhcaPortNum, uint64(port))
	if mask&maskTimeout != 0 {
		set(prm.Ads.AckTimeout, uint64(a.Timeout))
	}
	return nil
}

// rateToMLX5 is ib_rate_to_mlx5 on a device whose stat_rate_support is 0
// (every profile): any valid rate falls back to the port's current one.
func rateToMLX5(call string, rate uint8) (uint64, error) {
	if rate != 0 && (rate < ibRate2_5Gbps || rate > ibRate600Gbps) {
		return 0, kerr(call, unix.EINVAL, "ib_rate_to_mlx5: invalid static rate")
	}
	return 0, nil
}

// mlx5ToIBRate is mlx5_to_ib_rate_map: its table (IB_RATE_PORT_CURRENT,
// 56, 25, 100, 200, 50, 400 Gb/s), then rate - MLX5_STAT_RATE_OFFSET.
func mlx5ToIBRate(r uint8) uint8 {
	rates := [...]uint8{0, 12, 15, 16, 17, 20, 21}
	if int(r) < len(rates) {
		return rates[r]
	}
	return r - 5
}

// flowLabelToUDPSport is rdma_flow_label_to_udp_sport.
func flowLabelToUDPSport(fl uint32) uint16 {
	lo, hi := fl&0x3fff, fl&0xfc000
	lo ^= hi >> 14
	return uint16(lo | roceUDPSportMin)
}

// calcFlowLabel is rdma_calc_flow_label.
func calcFlowLabel(lqpn, rqpn uint32) uint32 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v & flowLabelMask)
}

// modifyDCT is mlx5_ib_modify_dct: RESET to INIT sets the access, the
// P_Key index and the port (exactly these, with the state); INIT to RTR
// the RNR timer, the address and the MTU, and creates the DCT in the
// firmware (CREATE_DCT), answering its number in the response (which
// must hold at least up to dctn); no other transition.
func (d *Device) modifyDCT(call string, v *vqp, a *seam.QPAttr, mask uint32, ucmd *mlx5abi.Mlx5IbModifyQp, drvOut []byte) error {
	if mask&maskState == 0 {
		return kerr(call, unix.EINVAL, "mlx5_ib_modify_dct: no state")
	}
	cur, next := v.state, a.State
	ece := d.h.prof.cap(prm.CmdHcaCap.EceSupport) != 0
	if ece && ucmd.EceOptions != 0 {
		v.ece = ucmd.EceOptions
	}
	c := v.dctc
	path := prm.Qpc.PrimaryAddressPath
	switch {
	case cur == QPStateReset && next == QPStateInit:
		if !validMask(mask, maskState|maskAccess|maskPKey|maskPort, 0) {
			return kerr(call, unix.EINVAL, "mlx5_ib_modify_dct: RESET to INIT takes exactly state, access, pkey_index and port")
		}
		if !d.h.portValid(a.Port) {
			return kerr(call, unix.EINVAL, "mlx5_ib_modify_dct: invalid port")
		}
		prm.Qpc.Rre.Set(c, b2u(a.AccessFlags&ibAccessRemoteRead != 0))
		prm.Qpc.Rwe.Set(c, b2u(a.AccessFlags&ibAccessRemoteWrite != 0))
		if a.AccessFlags&ibAccessRemoteAtomic != 0 {
			mode, ok := d.h.prof.atomicMode(true)
			if !ok {
				return kerr(call, unix.EOPNOTSUPP, "mlx5_ib_modify_dct: the device has no atomics (get_atomic_mode)")
			}
			prm.Qpc.AtomicMode.Set(c, mode)
			prm.Qpc.Rae.Set(c, 1)
		}
		prm.Ads.PkeyIndex.At(path).Set(c, uint64(a.PKeyIndex))
		prm.Ads.VhcaPortNum.At(path).Set(c, uint64(a.Port))
		v.port = a.Port
	case cur == QPStateInit && next == QPStateRTR:
		const minResp = 8 // offsetofend(struct mlx5_ib_modify_qp_resp, dctn)
		if len(drvOut) < minResp {
			return kerr(call, unix.EINVAL, "mlx5_ib_modify_dct: the response has no room for the DCT number")
		}
		respLen := uint32(16)
		if len(drvOut) < 16 {
			respLen = minResp
		}
		if !validMask(mask, maskState|maskMinRNRTimer|maskAV|maskPathMTU, 0) {
			return kerr(call, unix.EINVAL, "mlx5_ib_modify_dct: INIT to RTR takes exactly state, min_rnr_timer, the address and the MTU")
		}
		prm.Qpc.MinRnrNak.Set(c, uint64(a.MinRNRTimer))
		prm.Ads.Tclass.At(path).Set(c, uint64(a.AH.GRH.TrafficClass))
		prm.Ads.FlowLabel.At(path).Set(c, uint64(a.AH.GRH.FlowLabel))
		prm.Qpc.Mtu.Set(c, uint64(a.PathMTU))
		prm.Ads.SrcAddrIndex.At(path).Set(c, uint64(a.AH.GRH.SGIDIndex))
		prm.Ads.HopLimit.At(path).Set(c, uint64(a.AH.GRH.HopLimit))
		prm.Ads.EthPrio.At(path).Set(c, uint64(a.AH.SL&7))
		fw, e := d.h.createDCT(d.uid, d.id, v)
		if e != nil {
			ce := &prm.CmdError{Opcode: prm.MLX5_CMD_OP_CREATE_DCT, Status: e.status, Syndrome: e.syndrome}
			return &KernelError{Call: call, Errno: statusErrno(e.status), Rule: "mlx5_core_create_dct", Cmd: ce}
		}
		v.fw = fw
		fw.ib = v
		resp := mlx5abi.Mlx5IbModifyQpResp{ResponseLength: respLen, Dctn: fw.qpn}
		if ece {
			resp.EceOptions = fw.ece
		}
		putDrv(drvOut, &resp, int(respLen))
		d.handles[v.h].objID = encObjID(prm.MLX5_CMD_OP_CREATE_DCT, fw.qpn)
	default:
		return kerr(call, unix.EINVAL, fmt.Sprintf("mlx5_ib_modify_dct: no transition from %d to %d", cur, next))
	}
	v.state = next
	return nil
}

// createDCT is CREATE_DCT: a DCT number from the QP numbers, the PD, the
// receive CQ and the SRQ in use, as the dctc names them.
func (h *hca) createDCT(uid uint16, ctx ctxID, v *vqp) (*qpObj, *fwErr) {
	if v.srq == nil || h.srqs[v.srq.srqn] == nil || h.cqs[v.rcq.cqn] == nil {
		return nil, noObject()
	}
	end := limit(firstQPN, h.prof.cap(prm.CmdHcaCap.LogMaxQp))
	var n uint32
	var ok bool
	if h.reuseQPN {
		n, ok = allocLowest(h.qps, firstQPN, end)
	} else {
		n, ok = alloc(h, "qp", h.qps, firstQPN, end)
	}
	if !ok {
		return nil, limitReached()
	}
	qpc := append([]byte(nil), v.dctc...)
	prm.Qpc.Pd.Set(qpc, uint64(v.pd.pdn))
	prm.Qpc.CqnRcv.Set(qpc, uint64(v.rcq.cqn))
	prm.Qpc.SrqnRmpnXrqn.Set(qpc, uint64(v.srq.srqn))
	prm.Qpc.RqType.Set(qpc, srqRQ)
	prm.Qpc.UserIndex.Set(qpc, uint64(v.uidx))
	prm.Qpc.DcAccessKey.Set(qpc, v.accessKey)
	prm.Qpc.State.Set(qpc, StateRTR)
	s := h.srqs[v.srq.srqn]
	q := &qpObj{uid: uid, ctx: ctx, qpn: n, qpc: qpc, ext: make([]byte, prm.QpcExt.Layout().Size), pdn: v.pd.pdn,
		cqs: []uint32{v.rcq.cqn}, srq: s, dct: true}
	if h.prof.cap(prm.CmdHcaCap.EceSupport) != 0 {
		q.ece = negotiateECE(v.ece)
	}
	h.qps[n] = q
	h.pds[q.pdn].refs++
	h.cqs[v.rcq.cqn].refs++
	s.refs++
	return q, nil
}

// QueryQP is ib_uverbs_query_qp with mlx5_ib_query_qp: QUERY_QP's context
// as query_qp_attr reads it (the kernel's state follows the device's:
// SQ_DRAINING and SQD are both IB SQD, the former with sq_draining), the
// receive caps of the create and no send caps (a user QP's are the
// library's), or for a DCT in RTR its context (mlx5_ib_dct_query_qp: a
// mask beyond state, access, port, RNR timer, address, MTU and P_Key
// index, or a DCT not in RTR, is EINVAL).
func (d *Device) QueryQP(h seam.Handle, mask uint32) (seam.QPAttr, error) {
	const call = "query qp"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return seam.QPAttr{}, err
	}
	o, err := d.lookupKind(call, h, kindQP)
	if err != nil {
		return seam.QPAttr{}, err
	}
	v := o.qp
	var a seam.QPAttr
	if v.typ == qpTypeDCT {
		const supported = maskState | maskAccess | maskPort | maskMinRNRTimer | maskAV | maskPathMTU | maskPKey
		if mask&^supported != 0 || v.state != QPStateRTR || v.fw == nil {
			return seam.QPAttr{}, kerr(call, unix.EINVAL, "mlx5_ib_dct_query_qp: a mask the DCT does not answer, or the DCT is not in RTR")
		}
		c := v.fw.qpc
		path := prm.Qpc.PrimaryAddressPath
		if mask&maskState != 0 {
			a.State = QPStateRTR
		}
		if mask&maskAccess != 0 {
			a.AccessFlags = accessOf(c)
		}
		if mask&maskPort != 0 {
			a.Port = v.port
		}
		if mask&maskMinRNRTimer != 0 {
			a.MinRNRTimer = uint8(prm.Qpc.MinRnrNak.Get(c))
		}
		if mask&maskAV != 0 {
			a.AH.GRH.TrafficClass = uint8(prm.Ads.Tclass.At(path).Get(c))
			a.AH.GRH.FlowLabel = uint32(prm.Ads.FlowLabel.At(path).Get(c))
			a.AH.GRH.SGIDIndex = uint8(prm.Ads.SrcAddrIndex.At(path).Get(c))
			a.AH.GRH.HopLimit = uint8(prm.Ads.HopLimit.At(path).Get(c))
		}
		if mask&maskPathMTU != 0 {
			a.PathMTU = uint8(prm.Qpc.Mtu.Get(c))
		}
		if mask&maskPKey != 0 {
			a.PKeyIndex = uint16(prm.Ads.PkeyIndex.At(path).Get(c))
		}
		return a, nil
	}
	in := prm.QueryQpIn.Layout().New()
	prm.MboxIn.Opcode.Set(in, prm.MLX5_CMD_OP_QUERY_QP)
	prm.MboxIn.Uid.Set(in, uint64(d.uid))
	prm.QueryQpIn.Qpn.Set(in, uint64(v.qpn))
	out := make([]byte, prm.QueryQpOut.Layout().Size)
	if err := d.fwErrno(call, &fwCall{uid: d.uid, ctx: d.id, in: in, out: out}); err != nil {
		return seam.QPAttr{}, err
	}
	c := prm.QueryQpOut.Qpc.Bytes(out)
	st := uint8(prm.Qpc.State.Get(c))
	v.state = ibState(st)
	a.SQDraining = st == StateSQDraining
	a.PathMTU = uint8(prm.Qpc.Mtu.Get(c))
	switch prm.Qpc.PmState.Get(c) {
	case 0x0: // MLX5_QP_PM_ARMED
		a.PathMigState = 2
	case 0x1: // MLX5_QP_PM_REARM
		a.PathMigState = 1
	case pmMigrated:
		a.PathMigState = 0
	default:
		a.PathMigState = 0xff
	}
	a.QKey = uint32(prm.Qpc.QKey.Get(c))
	a.RQPSN = uint32(prm.Qpc.NextRcvPsn.Get(c))
	a.SQPSN = uint32(prm.Qpc.NextSendPsn.Get(c))
	a.DestQPN = uint32(prm.Qpc.RemoteQpn.Get(c))
	a.AccessFlags = accessOf(c)
	a.MaxRdAtomic = 1 << prm.Qpc.LogSraMax.Get(c)
	a.MaxDestRdAtomic = 1 << prm.Qpc.LogRraMax.Get(c)
	a.MinRNRTimer = uint8(prm.Qpc.MinRnrNak.Get(c))
	a.RetryCnt = uint8(prm.Qpc.RetryCount.Get(c))
	a.RNRRetry = uint8(prm.Qpc.RnrRetry.Get(c))
	pri, alt := prm.Qpc.PrimaryAddressPath, prm.Qpc.SecondaryAddressPath
	if v.typ == seam.QPTypeRC || v.typ == seam.QPTypeUC {
		a.AH = d.h.ahOfPath(c, pri)
		a.AltAH = d.h.ahOfPath(c, alt)
		a.AltPKeyIndex = uint16(prm.Ads.PkeyIndex.At(alt).Get(c))
		a.AltPort = uint8(prm.Ads.VhcaPortNum.At(alt).Get(c))
	}
	a.PKeyIndex = uint16(prm.Ads.PkeyIndex.At(pri).Get(c))
	a.Port = uint8(prm.Ads.VhcaPortNum.At(pri).Get(c))
	a.Timeout = uint8(prm.Ads.AckTimeout.At(pri).Get(c))
	a.AltTimeout = uint8(prm.Ads.AckTimeout.At(alt).Get(c))
	a.State, a.CurState = v.state, v.state
	a.Cap = seam.QPCap{MaxRecvWR: v.rqCnt, MaxRecvSGE: v.rqMaxGS}
	a.SQSigAll = v.sigAll
	return a, nil
}

// ibState is to_ib_qp_state.
func ibState(s uint8) uint8 {
	switch s {
	case StateRST:
		return QPStateReset
	case StateINIT:
		return QPStateInit
	case StateRTR:
		return QPStateRTR
	case StateRTS:
		return QPStateRTS
	case StateSQDraining, StateSQD:
		return QPStateSQD
	case StateSQER:
		return QPStateSQE
	case StateERR:
		return QPStateErr
	}
	return 0xff
}

// accessOf reads rre, rwe, rae as IB access flags.
func accessOf(c []byte) uint32 {
	var f uint32
	if prm.Qpc.Rre.Get(c) != 0 {
		f |= ibAccessRemoteRead
	}
	if prm.Qpc.Rwe.Get(c) != 0 {
		f |= ibAccessRemoteWrite
	}
	if prm.Qpc.Rae.Get(c) != 0 {
		f |= ibAccessRemoteAtomic
	}
	return f
}

// ahOfPath is to_rdma_ah_attr for the RoCE port: nothing for a path
// without a valid port; else the port, SL, DLID, path bits, static rate
// and (RoCE always has one) the GRH, and uverbs' is_global.
func (h *hca) ahOfPath(c []byte, path prm.Field) seam.AHAttr {
	port := uint8(prm.Ads.VhcaPortNum.At(path).Get(c))
	if !h.portValid(port) {
		return seam.AHAttr{}
	}
	var ah seam.AHAttr
	ah.Port = port
	ah.SL = uint8(prm.Ads.Sl.At(path).Get(c))
	ah.DLID = uint16(prm.Ads.Rlid.At(path).Get(c))
	ah.SrcPathBits = uint8(prm.Ads.Mlid.At(path).Get(c))
	ah.StaticRate = mlx5ToIBRate(uint8(prm.Ads.StatRate.At(path).Get(c)))
	ah.IsGlobal = true
	ah.GRH.FlowLabel = uint32(prm.Ads.FlowLabel.At(path).Get(c))
	ah.GRH.SGIDIndex = uint8(prm.Ads.SrcAddrIndex.At(path).Get(c))
	ah.GRH.HopLimit = uint8(prm.Ads.HopLimit.At(path).Get(c))
	ah.GRH.TrafficClass = uint8(prm.Ads.Tclass.At(path).Get(c))
	copy(ah.GRH.DGID[:], prm.Ads.RgidRip.At(path).Bytes(c))
	return ah
}

// atomicMode is mlx5_ib's get_atomic_mode for a QP (for a DCT when dct),
// the qpc.atomic_mode a remote-atomic QP gets: with extended atomics the
// mode of the largest atomic size (atomic_size_qp or atomic_size_dc,
// atomic_size_to_mode: up to 8 bytes MLX5_ATOMIC_MODE_8B, above it the
// size's log), else MLX5_ATOMIC_MODE_IB_COMP when both IB atomics exist.
// ok is false without the atomic cap or any mode (the kernel's
// EOPNOTSUPP). Every profile has the IB atomics only: IB_COMP.
func (p *profile) atomicMode(dct bool) (mode uint64, ok bool) {
	if p.cap(prm.CmdHcaCap.Atomic) == 0 {
		return 0, false
	}
	atomic := p.pages[prm.MLX5_CAP_ATOMIC]
	ops := prm.AtomicCaps.AtomicOperations.Get(atomic)
	sizes := prm.AtomicCaps.AtomicSizeQp.Get(atomic)
	if dct {
		sizes = prm.AtomicCaps.AtomicSizeDc.Get(atomic)
	}
	if p.extendedAtomics() && sizes&0x1ff != 0 {
		if l := bits.Len64(sizes&0x1ff) - 1; l > 3 {
			return uint64(l), true
		}
		return atomicMode8B, true
	}
	if ops&mlx5AtomicOpsCmpSwap != 0 && ops&mlx5AtomicOpsFetchAdd != 0 {
		return atomicModeIBComp, true
	}
	return 0, false
}
