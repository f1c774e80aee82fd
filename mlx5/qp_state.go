package mlx5

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// QPState is a QP's state (enum ibv_qp_state).
type QPState uint8

// QP states.
const (
	QPStateReset QPState = iota // RESET
	QPStateInit                 // INIT
	QPStateRTR                  // RTR: ready to receive
	QPStateRTS                  // RTS: ready to send
	QPStateSQD                  // SQD: send queue drained (or draining)
	QPStateSQE                  // SQE: send queue error
	QPStateErr                  // ERR
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// QPAttrMask says which fields of a QPAttr a Modify or Query uses (enum
// ibv_qp_attr_mask).
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState            QPAttrMask = 1 << 0  // State
	QPAttrCurState         QPAttrMask = 1 << 1  // CurState
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2  // EnSQDAsyncNotify
	QPAttrAccessFlags      QPAttrMask = 1 << 3  // Access
	QPAttrPKeyIndex        QPAttrMask = 1 << 4  // PKeyIndex
	QPAttrPort             QPAttrMask = 1 << 5  // Port
	QPAttrQKey             QPAttrMask = 1 << 6  // QKey
	QPAttrAV               QPAttrMask = 1 << 7  // Path
	QPAttrPathMTU          QPAttrMask = 1 << 8  // Path.MTU
	QPAttrTimeout          QPAttrMask = 1 << 9  // Timeout
	QPAttrRetryCnt         QPAttrMask = 1 << 10 // RetryCnt
	QPAttrRNRRetry         QPAttrMask = 1 << 11 // RNRRetry
	QPAttrRQPSN            QPAttrMask = 1 << 12 // RQPSN
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13 // MaxRdAtomic
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15 // MinRNRTimer
	QPAttrSQPSN            QPAttrMask = 1 << 16 // SQPSN
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17 // MaxDestRdAtomic
	QPAttrCap              QPAttrMask = 1 << 19 // Caps (query)
	QPAttrDestQPN          QPAttrMask = 1 << 20 // DestQPN
	QPAttrRateLimit        QPAttrMask = 1 << 25 // RateLimit
	qpAttrKnown                       = QPAttrState | QPAttrCurState | QPAttrEnSQDAsyncNotify | QPAttrAccessFlags |
		QPAttrPKeyIndex | QPAttrPort | QPAttrQKey | QPAttrAV | QPAttrPathMTU | QPAttrTimeout | QPAttrRetryCnt |
		QPAttrRNRRetry | QPAttrRQPSN | QPAttrMaxQPRdAtomic | QPAttrMinRNRTimer | QPAttrSQPSN | QPAttrMaxDestRdAtomic |
		QPAttrCap | QPAttrDestQPN | QPAttrRateLimit
)

// QPAttr are a QP's attributes (struct ibv_qp_attr); a QPAttrMask says
// which a Modify sets or a Query reads.
type QPAttr struct {
	State, CurState QPState
	// Access are the rights a peer has through this QP: remote read,
	// write, atomic (each mkey and MR still decides its own).
	Access    AccessFlags
	PKeyIndex uint16
	Port      uint8
	QKey      uint32 // UD
	// Path is the primary address path (RC, UC; its MTU with
	// QPAttrPathMTU).
	Path            AddressPath
	Timeout         uint8 // local ACK timeout: 4.096 µs × 2^Timeout
	RetryCnt        uint8
	RNRRetry        uint8 // 7 retries forever
	RQPSN, SQPSN    uint32
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	MinRNRTimer     uint8 // enum ib_rnr timer encoding
	DestQPN         uint32
	// EnSQDAsyncNotify asks for EventSQDrained when a move to SQD
	// completes.
	EnSQDAsyncNotify bool
	SQDraining       bool   // query: the QP is still draining in SQD
	Caps             QPCaps // query
	RateLimit        uint32 // kbit/s; 0 none
}

// AddressPath says how a QP reaches its peer: a LID on InfiniBand, a GID
// (and on DEVX QPs a MAC) on RoCE.
type AddressPath struct {
	Port uint8 // port number, from 1
	MTU  uint8 // path MTU, enum ibv_mtu: 1 (256) to 5 (4096)
	// InfiniBand: the destination LID and our path bits.
	LID         uint16
	SrcPathBits uint8
	SL          uint8
	// StaticRate limits the injection rate (enum ibv_rate; 0 for none).
	StaticRate uint8
	// RoCE (GRH set): the peer's GID and MAC (the kernel resolves the MAC
	// of verbs QPs itself), our GID index, hop limit, traffic class, flow
	// label.
	GRH          bool
	GID          [16]byte
	MAC          [6]byte
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
}

func (p *AddressPath) ah() seam.AHAttr {
	a := seam.AHAttr{DLID: p.LID, SL: p.SL, SrcPathBits: p.SrcPathBits, StaticRate: p.StaticRate, IsGlobal: p.GRH, Port: p.Port}
	if p.GRH {
		a.GRH = seam.GlobalRoute{DGID: p.GID, FlowLabel: p.FlowLabel, SGIDIndex: p.SGIDIndex, HopLimit: p.HopLimit, TrafficClass: p.TrafficClass}
	}
	return a
}

func pathOf(a *seam.AHAttr, mtu uint8) AddressPath {
	return AddressPath{Port: a.Port, MTU: mtu, LID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate, GRH: a.IsGlobal, GID: a.GRH.DGID,
		SGIDIndex: a.GRH.SGIDIndex, HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass, FlowLabel: a.GRH.FlowLabel}
}

// Modify moves the QP to a.State (with QPAttrState) and sets the
// attributes mask names (ibv_modify_qp): any legal transition of the QP's
// type with the attributes the IB specification asks for, checked by the
// kernel for a verbs QP. After a move to RESET the QP's completions are
// cleaned out of its CQs and its queues start over, as libmlx5 does (the
// receives of its SRQ it consumed still complete: QP.Close); a
// signature-pipelining QP moved to INIT gets drain_sigerr; a DCT gets its
// number (QPN) when it reaches RTR. A DEVX QP takes
// the transitions its commands have (RESET, INIT, RTR, RTS, SQE to RTS,
// ERR): a move into or out of SQD is ErrUnsupported, a move the IB spec
// has not (RTS to INIT) ErrInvalid.
func (qp *QP) Modify(a *QPAttr, mask QPAttrMask) error {
	const op = "modify"
	if err := qp.usable(op); err != nil {
		return err
	}
	if qp.g.closed() {
		return opErr(op, qp.name, ErrClosed)
	}
	if a == nil {
		return invalid(op, qp.name, "nil attributes")
	}
	if mask&^qpAttrKnown != 0 || mask&QPAttrCap != 0 {
		return invalid(op, qp.name, "attribute mask %#x", uint32(mask))
	}
	if mask&QPAttrState != 0 && a.State > QPStateErr {
		return invalid(op, qp.name, "state %v", a.State)
	}
	var err error
	udMax := uint32(0)
	if qp.typ == QPTypeUD && mask&QPAttrPort != 0 {
		if udMax, err = qp.c.datagramMax(a.Port); err != nil {
			return opErr(op, qp.name, err)
		}
	}
	switch {
	case qp.verbs && qp.typ == QPTypeDCT:
		err = qp.modifyDCT(a, mask)
	case qp.verbs:
		sa := seamAttr(a)
		err = qp.c.dev.ModifyQP(qp.handle, &sa, uint32(mask), nil, nil)
	default:
		err = qp.modifyDEVX(a, mask)
	}
	if err != nil {
		return wrapAs(op, qp.name, "", err)
	}
	if udMax != 0 {
		qp.sq.maxMsg = udMax
		qp.sq.setPost(qp.typ, qp.qpn)
	}
	if mask&QPAttrState == 0 {
		return nil
	}
	qp.state = a.State
	switch a.State {
	case QPStateReset:
		qp.restart()
	case QPStateInit:
		if qp.sigPipelining {
			if err := qp.drainSigErr(); err != nil {
				return wrapAs(op, qp.name, "INIT2INIT drain_sigerr", err)
			}
		}
	}
	return nil
}

// maxMTUBytes is the largest MTU, IB_MTU_4096: no datagram is longer (and
// mlx5_ib gives UD QPs log_msg_max 12).
const maxMTUBytes = 4096

// datagramMax is the longest datagram a UD QP on port sends: the port's
// active MTU (a datagram fits one packet) as the context learned it at
// open (asked now if it did not), and no more than the context's maximum
// message. The IB spec (C10-93.1.1, as rxe_req.c quotes it) has the
// device send nothing for a longer one and complete it successfully; the
// driver refuses it instead.
func (c *Context) datagramMax(port uint8) (uint32, error) {
	var mtu uint8
	if port >= 1 && int(port) <= len(c.ports) && c.ports[port-1].linkLayer != 0 {
		mtu = c.ports[port-1].activeMTU
	} else {
		pa, err := c.dev.QueryPort(port)
		if err != nil {
			return 0, err
		}
		mtu = pa.ActiveMTU
	}
	n := uint32(maxMTUBytes)
	if mtu >= 1 && mtu <= 5 { // enum ib_mtu: 256 << (mtu-1)
		n = 128 << mtu
	}
	return min(n, c.maxMessage()), nil
}

// restart is a move to RESET: the device's counters start over, and so
// must the driver's, its doorbell record and what its CQs hold of it.
func (qp *QP) restart() {
	for _, cq := range qp.cqs() {
		cq.mu.Lock()
		cq.cleanLocked(qp.qpn, qp.srq)
		cq.mu.Unlock()
	}
	if qp.sq.slots != nil {
		qp.sq.pi, qp.sq.reported = 0, 0
		qp.sq.tail.Store(0)
		clear(qp.sq.slots)
		if ds := qp.sq.streams; ds != nil {
			clear(ds.stream)
			clear(ds.ahead)
			ds.reach = 0
		}
		qp.sq.bell.Reset()
	}
	if qp.rq.wrID != nil {
		qp.rq.pi = 0
		qp.rq.tail.Store(0)
		qp.dbRQ.Ring(0)
	}
}

// cqs returns the QP's CQs, each once.
func (qp *QP) cqs() []*CQ {
	if qp.sendCQ == qp.recvCQ {
		return []*CQ{qp.sendCQ}
	}
	return []*CQ{qp.sendCQ, qp.recvCQ}
}

// modifyDCT is libmlx5's modify_dct: a DCT always moves with the extended
// MODIFY_QP, mlx5's driver data (struct mlx5_ib_modify_qp; no ECE options
// to set) and its response. The kernel creates the DCT in the device when
// it reaches RTR, and the response's dctn is then its number (the create
// answered none): the QP takes it, and its CQs know it by it.
func (qp *QP) modifyDCT(a *QPAttr, mask QPAttrMask) error {
	var drv mlx5abi.Mlx5IbModifyQp
	var resp mlx5abi.Mlx5IbModifyQpResp
	sa := seamAttr(a)
	if err := qp.c.dev.ModifyQP(qp.handle, &sa, uint32(mask), bytesOf(&drv), bytesOf(&resp)); err != nil {
		return err
	}
	if mask&QPAttrState == 0 || a.State != QPStateRTR {
		return nil
	}
	if n := unsafe.Offsetof(resp.Dctn) + unsafe.Sizeof(resp.Dctn); uintptr(resp.ResponseLength) < n {
		return fmt.Errorf("the kernel's response to the DCT's RTR (%d bytes) has no DCT number (%d): %w", resp.ResponseLength, n, unix.EINVAL)
	}
	unlock := lockCQs(qp.sendCQ, qp.recvCQ)
	defer unlock()
	for _, cq := range qp.cqs() {
		cq.detachLocked(qp)
	}
	qp.qpn, qp.name = resp.Dctn, qpName(resp.Dctn)
	qp.initErrors()
	qp.sq.setPost(qp.typ, qp.qpn) // its QP number in ctrl segments (a DCT posts none)
	for _, cq := range qp.cqs() {
		cq.attachLocked(qp)
	}
	return nil
}

// mlx5QPCOptMaskDrainSigErr is MLX5_QPC_OPT_MASK_INIT2INIT_DRAIN_SIGERR
// (rdma-core's mlx5_ifc.h; the oracle's modify_qp_reset_to_init record).
const mlx5QPCOptMaskDrainSigErr = 1 << 11

// drainSigErr is libmlx5's mlx5_modify_qp_drain_sigerr: a DEVX INIT2INIT
// on the verbs QP that sets qpc.drain_sigerr, so that a signature error
// stops the send queue (signature pipelining).
func (qp *QP) drainSigErr() error {
	l := prm.Init2initQpIn.Layout()
	in := mailbox(l.Size, prm.MLX5_CMD_OP_INIT2INIT_QP)
	prm.Init2initQpIn.Qpn.Set(in, uint64(qp.qpn))
	prm.Init2initQpIn.OptParamMask.Set(in, mlx5QPCOptMaskDrainSigErr)
	prm.Qpc.DrainSigerr.At(prm.Init2initQpIn.Qpc).Set(in, 1)
	return qp.c.modifyObj("modify", qp.name, qp.handle, in, make([]byte, prm.Init2initQpOut.Layout().Size))
}

func seamAttr(a *QPAttr) seam.QPAttr {
	return seam.QPAttr{State: uint8(a.State), CurState: uint8(a.CurState), PathMTU: a.Path.MTU, QKey: a.QKey,
		RQPSN: a.RQPSN, SQPSN: a.SQPSN, DestQPN: a.DestQPN, AccessFlags: uint32(a.Access), AH: a.Path.ah(),
		PKeyIndex: a.PKeyIndex, EnSQDAsyncNotify: a.EnSQDAsyncNotify, MaxRdAtomic: a.MaxRdAtomic,
		MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer, Port: a.Port, Timeout: a.Timeout,
		RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, RateLimit: a.RateLimit}
}

// Query reads the QP's attributes mask names (ibv_query_qp), with its
// state as the device has it. With QPAttrState the QP keeps the state it
// read, as libibverbs keeps it in ibv_qp.state: ResetDCIStream checks it.
func (qp *QP) Query(mask QPAttrMask) (QPAttr, error) {
	const op = "query"
	if err := qp.usable(op); err != nil {
		return QPAttr{}, err
	}
	if qp.g.closed() {
		return QPAttr{}, opErr(op, qp.name, ErrClosed)
	}
	if mask&^qpAttrKnown != 0 {
		return QPAttr{}, invalid(op, qp.name, "attribute mask %#x", uint32(mask))
	}
	if !qp.verbs {
		a, err := qp.queryDEVX()
		if err != nil {
			return QPAttr{}, wrapAs(op, qp.name, "", err)
		}
		a.Caps = qp.caps
		if mask&QPAttrState != 0 {
			qp.state = a.State
		}
		return a, nil
	}
	sa, err := qp.c.dev.QueryQP(qp.handle, uint32(mask))
	if err != nil {
		return QPAttr{}, opErr(op, qp.name, err)
	}
	a := QPAttr{State: QPState(sa.State), CurState: QPState(sa.CurState), Access: AccessFlags(sa.AccessFlags),
		PKeyIndex: sa.PKeyIndex, Port: sa.Port, QKey: sa.QKey, Path: pathOf(&sa.AH, sa.PathMTU), Timeout: sa.Timeout,
		RetryCnt: sa.RetryCnt, RNRRetry: sa.RNRRetry, RQPSN: sa.RQPSN, SQPSN: sa.SQPSN, MaxRdAtomic: sa.MaxRdAtomic,
		MaxDestRdAtomic: sa.MaxDestRdAtomic, MinRNRTimer: sa.MinRNRTimer, DestQPN: sa.DestQPN,
		EnSQDAsyncNotify: sa.EnSQDAsyncNotify, SQDraining: sa.SQDraining, RateLimit: sa.RateLimit,
		Caps: qp.caps} // the send caps libmlx5 enforces, as ibv_query_qp reports them
	if mask&QPAttrState != 0 {
		qp.state = a.State
	}
	return a, nil
}

// Connect moves an RC or UC QP from RESET through INIT and RTR to RTS,
// connected to QP remoteQPN over path, with remote read, write and atomic
// access allowed (each mkey and MR still decides its own): 7 retries, RNR
// retries forever, PSNs 0.
func (qp *QP) Connect(remoteQPN uint32, path AddressPath) error {
	const op = "connect"
	if err := qp.usable(op); err != nil {
		return err
	}
	if qp.g.closed() {
		return opErr(op, qp.name, ErrClosed)
	}
	if qp.typ != QPTypeRC && qp.typ != QPTypeUC {
		return invalid(op, qp.name, "a %v QP is not connected", qp.typ)
	}
	if path.Port == 0 || path.MTU < 1 || path.MTU > 5 || remoteQPN > 0xffffff {
		return invalid(op, qp.name, "port %d, MTU %d, remote QPN %#x: want a port from 1, MTU 1 to 5, a 24-bit QPN", path.Port, path.MTU, remoteQPN)
	}
	access := AccessRemoteWrite
	if qp.typ == QPTypeRC {
		access |= AccessRemoteRead | AccessRemoteAtomic
	}
	steps := []struct {
		a    QPAttr
		mask QPAttrMask
	}{
		{QPAttr{State: QPStateInit, Port: path.Port, Access: access},
			QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
		{QPAttr{State: QPStateRTR, Path: path, DestQPN: remoteQPN, MaxDestRdAtomic: 16, MinRNRTimer: 12},
			QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer},
		{QPAttr{State: QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			QPAttrState | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN | QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if qp.typ == QPTypeUC {
			s.mask &^= QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic
		}
		if err := qp.Modify(&s.a, s.mask); err != nil {
			return wrapAs(op, qp.name, "to "+s.a.State.String(), err)
		}
	}
	return nil
}

// Ready moves a UD QP from RESET through INIT and RTR to RTS on port, with
// Q_Key qkey: what it takes to send and receive datagrams.
func (qp *QP) Ready(port uint8, qkey uint32) error {
	const op = "ready"
	if err := qp.usable(op); err != nil {
		return err
	}
	if qp.g.closed() {
		return opErr(op, qp.name, ErrClosed)
	}
	if qp.typ != QPTypeUD {
		return invalid(op, qp.name, "a %v QP is connected, not readied", qp.typ)
	}
	steps := []struct {
		a    QPAttr
		mask QPAttrMask
	}{
		{QPAttr{State: QPStateInit, Port: port, QKey: qkey}, QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey},
		{QPAttr{State: QPStateRTR}, QPAttrState},
		{QPAttr{State: QPStateRTS}, QPAttrState | QPAttrSQPSN},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.a, s.mask); err != nil {
			return wrapAs(op, qp.name, "to "+s.a.State.String(), err)
		}
	}
	return nil
}

// modifyDEVX is Modify of a DEVX QP: the PRM transition command for the
// move, with the QP context fields of the attributes, as mlx5_ib's
// __mlx5_ib_modify_qp fills them.
func (qp *QP) modifyDEVX(a *QPAttr, mask QPAttrMask) error {
	from, to := qp.state, qp.state
	if mask&QPAttrCurState != 0 {
		from = a.CurState
	}
	if mask&QPAttrState != 0 {
		to = a.State
	}
	type cmd struct {
		name       string
		opcode     uint16
		in         *prm.Layout
		outSize    uint32
		hasContext bool
	}
	var c cmd
	switch {
	case to == QPStateReset:
		c = cmd{"2RST", prm.MLX5_CMD_OP_2RST_QP, prm.Qp2rstIn.Layout(), prm.Qp2rstOut.Layout().Size, false}
	case to == QPStateErr:
		c = cmd{"2ERR", prm.MLX5_CMD_OP_2ERR_QP, prm.Qp2errIn.Layout(), prm.Qp2errOut.Layout().Size, false}
	case from == QPStateReset && to == QPStateInit:
		c = cmd{"RST2INIT", prm.MLX5_CMD_OP_RST2INIT_QP, prm.Rst2initQpIn.Layout(), prm.Rst2initQpOut.Layout().Size, true}
	case from == QPStateInit && to == QPStateInit:
		c = cmd{"INIT2INIT", prm.MLX5_CMD_OP_INIT2INIT_QP, prm.Init2initQpIn.Layout(), prm.Init2initQpOut.Layout().Size, true}
	case from == QPStateInit && to == QPStateRTR:
		c = cmd{"INIT2RTR", prm.MLX5_CMD_OP_INIT2RTR_QP, prm.Init2rtrQpIn.Layout(), prm.Init2rtrQpOut.Layout().Size, true}
	case from == QPStateRTR && to == QPStateRTS:
		c = cmd{"RTR2RTS", prm.MLX5_CMD_OP_RTR2RTS_QP, prm.Rtr2rtsQpIn.Layout(), prm.Rtr2rtsQpOut.Layout().Size, true}
	case from == QPStateRTS && to == QPStateRTS:
		c = cmd{"RTS2RTS", prm.MLX5_CMD_OP_RTS2RTS_QP, prm.Rts2rtsQpIn.Layout(), prm.Rts2rtsQpOut.Layout().Size, true}
	case from == QPStateSQE && to == QPStateRTS:
		c = cmd{"SQERR2RTS", prm.MLX5_CMD_OP_SQERR2RTS_QP, prm.Sqerr2rtsQpIn.Layout(), prm.Sqerr2rtsQpOut.Layout().Size, true}
	case sqdMove(from, to):
		return &reasonError{msg: fmt.Sprintf("a DEVX QP does not move from %v to %v: SQD needs a verbs QP", from, to),
			errs: []error{ErrUnsupported, unix.EOPNOTSUPP}}
	default:
		return &reasonError{msg: fmt.Sprintf("%v to %v is not a QP state transition (IB spec: ib_modify_qp_is_ok refuses it with EINVAL)", from, to),
			errs: []error{ErrInvalid, unix.EINVAL}}
	}
	caps, err := qp.c.generalCaps()
	if err != nil {
		return err
	}
	capOf := func(f prm.Field) uint64 { return f.Get(caps) }
	ads := prm.Qpc.PrimaryAddressPath
	return qp.modify(c.name, c.opcode, c.in, c.outSize, func(q qpcIn) {
		if !c.hasContext {
			return
		}
		if mask&QPAttrPort != 0 {
			q.set(prm.Ads.VhcaPortNum.At(ads), uint64(a.Port))
		}
		if mask&QPAttrPKeyIndex != 0 {
			q.set(prm.Ads.PkeyIndex.At(ads), uint64(a.PKeyIndex))
		}
		if mask&QPAttrAccessFlags != 0 {
			q.set(prm.Qpc.Rre, b2u64(a.Access&AccessRemoteRead != 0))
			q.set(prm.Qpc.Rwe, b2u64(a.Access&AccessRemoteWrite != 0))
			q.set(prm.Qpc.Rae, b2u64(a.Access&AccessRemoteAtomic != 0))
		}
		if mask&QPAttrPathMTU != 0 {
			q.set(prm.Qpc.Mtu, uint64(a.Path.MTU))
			q.set(prm.Qpc.LogMsgMax, capOf(prm.CmdHcaCap.LogMaxMsg))
		}
		if mask&QPAttrDestQPN != 0 {
			q.set(prm.Qpc.RemoteQpn, uint64(a.DestQPN))
		}
		if mask&QPAttrRQPSN != 0 {
			q.set(prm.Qpc.NextRcvPsn, uint64(a.RQPSN))
		}
		if mask&QPAttrMaxDestRdAtomic != 0 && a.MaxDestRdAtomic > 0 {
			q.set(prm.Qpc.LogRraMax, min(uint64(bits.Len8(a.MaxDestRdAtomic-1)), capOf(prm.CmdHcaCap.LogMaxRaResQp)))
		}
		if mask&QPAttrMinRNRTimer != 0 {
			q.set(prm.Qpc.MinRnrNak, uint64(a.MinRNRTimer))
		}
		if mask&QPAttrAV != 0 {
			p := &a.Path
			q.set(prm.Ads.VhcaPortNum.At(ads), uint64(p.Port))
			q.set(prm.Ads.Sl.At(ads), uint64(p.SL))
			if p.GRH {
				q.set(prm.Ads.Grh.At(ads), 1)
				q.set(prm.Ads.SrcAddrIndex.At(ads), uint64(p.SGIDIndex))
				q.set(prm.Ads.HopLimit.At(ads), uint64(max(p.HopLimit, 1)))
				q.set(prm.Ads.Tclass.At(ads), uint64(p.TrafficClass))
				q.set(prm.Ads.FlowLabel.At(ads), uint64(p.FlowLabel))
				q.set(prm.Ads.UdpSport.At(ads), 0xc000|uint64(qp.qpn&0x3fff))
				copy(q.bytes(prm.Ads.RgidRip.At(ads)), p.GID[:])
				q.set(prm.Ads.Rmac4732.At(ads), uint64(p.MAC[0])<<8|uint64(p.MAC[1]))
				q.set(prm.Ads.Rmac310.At(ads), uint64(p.MAC[2])<<24|uint64(p.MAC[3])<<16|uint64(p.MAC[4])<<8|uint64(p.MAC[5]))
			} else {
				q.set(prm.Ads.Rlid.At(ads), uint64(p.LID))
			}
		}
		if mask&QPAttrMaxQPRdAtomic != 0 && a.MaxRdAtomic > 0 {
			q.set(prm.Qpc.LogSraMax, min(uint64(bits.Len8(a.MaxRdAtomic-1)), capOf(prm.CmdHcaCap.LogMaxRaReqQp)))
		}
		if mask&QPAttrRetryCnt != 0 {
			q.set(prm.Qpc.RetryCount, uint64(a.RetryCnt))
		}
		if mask&QPAttrRNRRetry != 0 {
			q.set(prm.Qpc.RnrRetry, uint64(a.RNRRetry))
		}
		if mask&QPAttrSQPSN != 0 {
			q.set(prm.Qpc.NextSendPsn, uint64(a.SQPSN))
		}
		if mask&QPAttrTimeout != 0 {
			q.set(prm.Ads.AckTimeout.At(ads), uint64(a.Timeout))
		}
	})
}

// sqdMove reports whether from to to is one of the IB spec's moves into
// or out of SQD (the kernel's qp_state_table: RTS to SQD, SQD to SQD,
// SQD to RTS), which a DEVX QP has no command for; a move to RESET or ERR
// it has.
func sqdMove(from, to QPState) bool {
	return from == QPStateRTS && to == QPStateSQD || from == QPStateSQD && (to == QPStateSQD || to == QPStateRTS)
}

// queryDEVX reads a DEVX QP's state and attributes with QUERY_QP.
func (qp *QP) queryDEVX() (QPAttr, error) {
	in := mailbox(prm.QueryQpIn.Layout().Size, prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(in, uint64(qp.qpn))
	out := make([]byte, prm.QueryQpOut.Layout().Size)
	if err := qp.c.queryObj("query", qp.name, qp.obj.handle, in, out); err != nil {
		return QPAttr{}, err
	}
	qpc := prm.QueryQpOut.Qpc
	get := func(f prm.Field) uint64 { return f.At(qpc).Get(out) }
	ads := prm.Qpc.PrimaryAddressPath
	a := QPAttr{DestQPN: uint32(get(prm.Qpc.RemoteQpn)), RQPSN: uint32(get(prm.Qpc.NextRcvPsn)),
		SQPSN: uint32(get(prm.Qpc.NextSendPsn)), RetryCnt: uint8(get(prm.Qpc.RetryCount)), RNRRetry: uint8(get(prm.Qpc.RnrRetry)),
		MinRNRTimer: uint8(get(prm.Qpc.MinRnrNak)), Port: uint8(get(prm.Ads.VhcaPortNum.At(ads)))}
	a.Path.MTU, a.Path.Port = uint8(get(prm.Qpc.Mtu)), a.Port
	if get(prm.Qpc.Rre) != 0 {
		a.Access |= AccessRemoteRead
	}
	if get(prm.Qpc.Rwe) != 0 {
		a.Access |= AccessRemoteWrite
	}
	if get(prm.Qpc.Rae) != 0 {
		a.Access |= AccessRemoteAtomic
	}
	// The PRM's states (MLX5_QPC_STATE_*): SQ_DRAINING 7 and SQD 5 are both
	// SQD, as mlx5_ib's to_ib_qp_state has it.
	switch st := get(prm.Qpc.State); st {
	case 0, 1, 2, 3, 4:
		a.State = QPState(st)
	case 5:
		a.State = QPStateSQD
	case 7:
		a.State, a.SQDraining = QPStateSQD, true
	default:
		a.State = QPStateErr
	}
	return a, nil
}

func b2u64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
