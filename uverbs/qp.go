package uverbs

import (
	"fmt"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// QPType is enum ib_uverbs_qp_type.
type QPType uint8

// QP types. QPTypeDriver is the provider's own (mlx5's DC QPs, which its
// driver data makes a DCT or a DCI).
const (
	QPTypeRC     QPType = 2    // IB_UVERBS_QPT_RC
	QPTypeUC     QPType = 3    // IB_UVERBS_QPT_UC
	QPTypeUD     QPType = 4    // IB_UVERBS_QPT_UD
	QPTypeDriver QPType = 0xff // IB_UVERBS_QPT_DRIVER
)

// QPCreateFlags are a QP's creation flags (enum ib_uverbs_qp_create_flags);
// QPInit.Flags carries them.
type QPCreateFlags uint32

// QPCreateSQSigAll makes every send work request signaled (libibverbs'
// sq_sig_all); the only flag the legacy write() path carries.
const QPCreateSQSigAll QPCreateFlags = 1 << 12 // IB_UVERBS_QP_CREATE_SQ_SIG_ALL

// QPState is the kernel's enum ib_qp_state.
type QPState uint8

// QP states.
const (
	QPStateReset QPState = iota // IB_QPS_RESET
	QPStateInit                 // IB_QPS_INIT
	QPStateRTR                  // IB_QPS_RTR
	QPStateRTS                  // IB_QPS_RTS
	QPStateSQD                  // IB_QPS_SQD
	QPStateSQE                  // IB_QPS_SQE
	QPStateErr                  // IB_QPS_ERR
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// MTU is enum ib_mtu: 1 is 256 bytes up to 5, 4096 bytes.
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// QPAttrMask selects the fields of QPAttr a modify or query uses (the
// kernel's enum ib_qp_attr_mask).
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState            QPAttrMask = 1 << 0  // IB_QP_STATE
	QPAttrCurState         QPAttrMask = 1 << 1  // IB_QP_CUR_STATE
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2  // IB_QP_EN_SQD_ASYNC_NOTIFY
	QPAttrAccessFlags      QPAttrMask = 1 << 3  // IB_QP_ACCESS_FLAGS
	QPAttrPKeyIndex        QPAttrMask = 1 << 4  // IB_QP_PKEY_INDEX
	QPAttrPort             QPAttrMask = 1 << 5  // IB_QP_PORT
	QPAttrQKey             QPAttrMask = 1 << 6  // IB_QP_QKEY
	QPAttrAV               QPAttrMask = 1 << 7  // IB_QP_AV
	QPAttrPathMTU          QPAttrMask = 1 << 8  // IB_QP_PATH_MTU
	QPAttrTimeout          QPAttrMask = 1 << 9  // IB_QP_TIMEOUT
	QPAttrRetryCnt         QPAttrMask = 1 << 10 // IB_QP_RETRY_CNT
	QPAttrRNRRetry         QPAttrMask = 1 << 11 // IB_QP_RNR_RETRY
	QPAttrRQPSN            QPAttrMask = 1 << 12 // IB_QP_RQ_PSN
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13 // IB_QP_MAX_QP_RD_ATOMIC
	QPAttrAltPath          QPAttrMask = 1 << 14 // IB_QP_ALT_PATH
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15 // IB_QP_MIN_RNR_TIMER
	QPAttrSQPSN            QPAttrMask = 1 << 16 // IB_QP_SQ_PSN
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17 // IB_QP_MAX_DEST_RD_ATOMIC
	QPAttrPathMigState     QPAttrMask = 1 << 18 // IB_QP_PATH_MIG_STATE
	QPAttrCap              QPAttrMask = 1 << 19 // IB_QP_CAP
	QPAttrDestQPN          QPAttrMask = 1 << 20 // IB_QP_DEST_QPN
	QPAttrRateLimit        QPAttrMask = 1 << 25 // IB_QP_RATE_LIMIT
	qpStandardAttrMask                = 1<<21 - 1
)

// GlobalRoute is a GRH's addressing (struct ibv_global_route).
type GlobalRoute struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector (struct ibv_ah_attr).
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    bool
	Port        uint8
}

// QPCap are a QP's queue sizes.
type QPCap struct {
	MaxSendWR, MaxRecvWR   uint32
	MaxSendSGE, MaxRecvSGE uint32
	MaxInlineData          uint32
}

// QPAttr are a QP's attributes (struct ibv_qp_attr); QPAttrMask says which
// of them a call uses.
type QPAttr struct {
	State, CurState  QPState
	PathMTU          MTU
	PathMigState     uint8
	QKey             uint32
	RQPSN, SQPSN     uint32
	DestQPN          uint32
	AccessFlags      AccessFlags
	Cap              QPCap
	AH, AltAH        AHAttr
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify bool
	SQDraining       bool // query only
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	Port             uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPort          uint8
	AltTimeout       uint8
	SQSigAll         bool // query only
	RateLimit        uint32
}

// QPInit describes a QP to create.
type QPInit struct {
	Type QPType
	PD   *PD
	// SendCQ and RecvCQ are required, except for QPTypeDriver, where the
	// provider decides (an mlx5 DCT has no send queue).
	SendCQ, RecvCQ *CQ
	SRQ            *SRQ
	Cap            QPCap
	Flags          QPCreateFlags
	// DriverIn and DriverOut are the provider's data (mlx5: struct
	// mlx5_ib_create_qp and mlx5_ib_create_qp_resp).
	DriverIn, DriverOut []byte
	// UserHandle, if set, is the user handle the kernel gets: async
	// events name the QP by it. Nil lets the context number its objects
	// itself.
	UserHandle *uint64
}

// QP is a queue pair.
type QP struct {
	object
	userHandle uint64
	Type       QPType
	// QPN is the QP number; Cap the sizes the kernel granted.
	QPN uint32
	Cap QPCap
}

func (init *QPInit) check(c *Context) error {
	switch init.Type {
	case QPTypeRC, QPTypeUC, QPTypeUD, QPTypeDriver:
	default:
		return fmt.Errorf("QP type %d is not RC, UC, UD or the driver's", init.Type)
	}
	if init.PD == nil {
		return fmt.Errorf("a QP needs a PD")
	}
	if init.Type != QPTypeDriver && (init.SendCQ == nil || init.RecvCQ == nil) {
		return fmt.Errorf("a QP needs a send CQ and a receive CQ")
	}
	if init.PD.ctx != c || (init.SendCQ != nil && init.SendCQ.ctx != c) || (init.RecvCQ != nil && init.RecvCQ.ctx != c) ||
		(init.SRQ != nil && init.SRQ.ctx != c) {
		return fmt.Errorf("PD, CQs and SRQ must belong to the QP's context")
	}
	if init.SRQ != nil && init.Cap.MaxRecvWR != 0 {
		return fmt.Errorf("a QP on an SRQ has no receive queue of its own (MaxRecvWR must be 0)")
	}
	return nil
}

// CreateQP creates a queue pair in the RESET state. The attributes go in
// libibverbs' order (the kernel takes any).
func (c *Context) CreateQP(init QPInit) (*QP, error) {
	if err := init.check(c); err != nil {
		return nil, fmt.Errorf("uverbs: create qp: %w", err)
	}
	qp := &QP{object: object{ctx: c}, userHandle: c.userHandleOf(init.UserHandle), Type: init.Type}
	err := c.ioctlOrWrite(func() error {
		var a Attrs
		cap := uverbsabi.IbUverbsQpCap{MaxSendWr: init.Cap.MaxSendWR, MaxRecvWr: init.Cap.MaxRecvWR,
			MaxSendSge: init.Cap.MaxSendSGE, MaxRecvSge: init.Cap.MaxRecvSGE, MaxInlineData: init.Cap.MaxInlineData}
		var respCap uverbsabi.IbUverbsQpCap
		var qpn [4]byte
		a.IDR(uverbsabi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, init.PD.handle)
		if init.SendCQ != nil {
			a.IDR(uverbsabi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, init.SendCQ.handle)
		}
		if init.RecvCQ != nil {
			a.IDR(uverbsabi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, init.RecvCQ.handle)
		}
		h := a.NewIDR(uverbsabi.UVERBS_ATTR_CREATE_QP_HANDLE)
		a.InUint64(uverbsabi.UVERBS_ATTR_CREATE_QP_TYPE, uint64(init.Type))
		a.InUint64(uverbsabi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, qp.userHandle)
		a.In(uverbsabi.UVERBS_ATTR_CREATE_QP_CAP, asBytes(&cap))
		a.FD(uverbsabi.UVERBS_ATTR_CREATE_QP_EVENT_FD, c.async.Fd())
		if init.Flags != 0 {
			a.InUint32(uverbsabi.UVERBS_ATTR_CREATE_QP_FLAGS, uint32(init.Flags))
		}
		if init.SRQ != nil {
			a.IDR(uverbsabi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, init.SRQ.handle)
		}
		a.Out(uverbsabi.UVERBS_ATTR_CREATE_QP_RESP_CAP, asBytes(&respCap))
		a.Out(uverbsabi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, qpn[:])
		if len(init.DriverIn) > 0 {
			a.In(uverbsabi.UVERBS_ATTR_UHW_IN, init.DriverIn)
		}
		if len(init.DriverOut) > 0 {
			a.Out(uverbsabi.UVERBS_ATTR_UHW_OUT, init.DriverOut)
		}
		if err := c.Invoke("create qp", uverbsabi.UVERBS_OBJECT_QP, uverbsabi.UVERBS_METHOD_QP_CREATE, &a); err != nil {
			return err
		}
		qp.handle = uint32(a.Handle(h))
		qp.QPN = le32(qpn[:])
		qp.Cap = QPCap{respCap.MaxSendWr, respCap.MaxRecvWr, respCap.MaxSendSge, respCap.MaxRecvSge, respCap.MaxInlineData}
		return nil
	}, func() error {
		if init.Flags&^QPCreateSQSigAll != 0 {
			return fmt.Errorf("uverbs: create qp: flags %#x need the ioctl path", init.Flags)
		}
		if init.SendCQ == nil || init.RecvCQ == nil {
			return fmt.Errorf("uverbs: create qp: a QP without a send or receive CQ needs the ioctl path")
		}
		cmd := uverbsabi.IbUverbsCreateQp{UserHandle: qp.userHandle, PdHandle: init.PD.handle,
			SendCqHandle: init.SendCQ.handle, RecvCqHandle: init.RecvCQ.handle,
			MaxSendWr: init.Cap.MaxSendWR, MaxRecvWr: init.Cap.MaxRecvWR, MaxSendSge: init.Cap.MaxSendSGE,
			MaxRecvSge: init.Cap.MaxRecvSGE, MaxInlineData: init.Cap.MaxInlineData, QpType: uint8(init.Type)}
		if init.Flags&QPCreateSQSigAll != 0 {
			cmd.SqSigAll = 1
		}
		if init.SRQ != nil {
			cmd.SrqHandle, cmd.IsSrq = init.SRQ.handle, 1
		}
		var resp uverbsabi.IbUverbsCreateQpResp
		if err := c.write("create qp", uverbsabi.IB_USER_VERBS_CMD_CREATE_QP, asBytes(&cmd), asBytes(&resp), init.DriverIn, init.DriverOut); err != nil {
			return err
		}
		qp.handle, qp.QPN = resp.QpHandle, resp.Qpn
		qp.Cap = QPCap{resp.MaxSendWr, resp.MaxRecvWr, resp.MaxSendSge, resp.MaxRecvSge, resp.MaxInlineData}
		return nil
	})
	if err != nil {
		return nil, c.noteDriverOut(err, outQP, "QPInit.DriverOut", len(init.DriverOut))
	}
	if err := c.adopt(qp); err != nil {
		return nil, err
	}
	c.register(qp.userHandle, qp)
	return qp, nil
}

func encodeAH(ah *AHAttr) uverbsabi.IbUverbsQpDest {
	d := uverbsabi.IbUverbsQpDest{Dgid: ah.GRH.DGID, FlowLabel: ah.GRH.FlowLabel, Dlid: ah.DLID,
		SgidIndex: ah.GRH.SGIDIndex, HopLimit: ah.GRH.HopLimit, TrafficClass: ah.GRH.TrafficClass,
		Sl: ah.SL, SrcPathBits: ah.SrcPathBits, StaticRate: ah.StaticRate, PortNum: ah.Port}
	if ah.IsGlobal {
		d.IsGlobal = 1
	}
	return d
}

func decodeAH(d *uverbsabi.IbUverbsQpDest) AHAttr {
	return AHAttr{GRH: GlobalRoute{DGID: d.Dgid, FlowLabel: d.FlowLabel, SGIDIndex: d.SgidIndex,
		HopLimit: d.HopLimit, TrafficClass: d.TrafficClass}, DLID: d.Dlid, SL: d.Sl,
		SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate, IsGlobal: d.IsGlobal != 0, Port: d.PortNum}
}

// encodeModify fills the legacy command from attr and mask. Like
// libibverbs it copies only the fields mask selects (the alternate path's
// pkey index, port and timeout with QPAttrAltPath) and leaves the others
// zero, so the bytes do not depend on what the caller left in them.
func encodeModify(handle uint32, attr *QPAttr, mask QPAttrMask) uverbsabi.IbUverbsModifyQp {
	m := uverbsabi.IbUverbsModifyQp{QpHandle: handle, AttrMask: uint32(mask &^ QPAttrRateLimit)}
	for _, f := range modifyFields {
		if mask&f.bit != 0 {
			f.copy(&m, attr)
		}
	}
	return m
}

// modifyFields says which command fields each mask bit carries.
var modifyFields = []struct {
	bit  QPAttrMask
	copy func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr)
}{
	{QPAttrState, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.QpState = uint8(a.State) }},
	{QPAttrCurState, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.CurQpState = uint8(a.CurState) }},
	{QPAttrEnSQDAsyncNotify, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) {
		if a.EnSQDAsyncNotify {
			m.EnSqdAsyncNotify = 1
		}
	}},
	{QPAttrAccessFlags, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.QpAccessFlags = uint32(a.AccessFlags) }},
	{QPAttrPKeyIndex, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.PkeyIndex = a.PKeyIndex }},
	{QPAttrPort, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.PortNum = a.Port }},
	{QPAttrQKey, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.Qkey = a.QKey }},
	{QPAttrAV, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.Dest = encodeAH(&a.AH) }},
	{QPAttrPathMTU, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.PathMtu = uint8(a.PathMTU) }},
	{QPAttrTimeout, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.Timeout = a.Timeout }},
	{QPAttrRetryCnt, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.RetryCnt = a.RetryCnt }},
	{QPAttrRNRRetry, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.RnrRetry = a.RNRRetry }},
	{QPAttrRQPSN, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.RqPsn = a.RQPSN }},
	{QPAttrMaxQPRdAtomic, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.MaxRdAtomic = a.MaxRdAtomic }},
	{QPAttrAltPath, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) {
		m.AltPkeyIndex, m.AltPortNum, m.AltTimeout = a.AltPKeyIndex, a.AltPort, a.AltTimeout
		m.AltDest = encodeAH(&a.AltAH)
	}},
	{QPAttrMinRNRTimer, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.MinRnrTimer = a.MinRNRTimer }},
	{QPAttrSQPSN, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.SqPsn = a.SQPSN }},
	{QPAttrMaxDestRdAtomic, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.MaxDestRdAtomic = a.MaxDestRdAtomic }},
	{QPAttrPathMigState, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.PathMigState = a.PathMigState }},
	{QPAttrDestQPN, func(m *uverbsabi.IbUverbsModifyQp, a *QPAttr) { m.DestQpNum = a.DestQPN }},
}

func checkModify(attr *QPAttr, mask QPAttrMask) error {
	if mask == 0 {
		return fmt.Errorf("empty attribute mask")
	}
	if bad := mask &^ (qpStandardAttrMask | QPAttrRateLimit); bad != 0 {
		return fmt.Errorf("unknown attribute mask bits %#x", uint32(bad))
	}
	if mask&QPAttrState != 0 && attr.State > QPStateErr {
		return fmt.Errorf("QP state %d is not a state", attr.State)
	}
	if mask&QPAttrCurState != 0 && attr.CurState > QPStateErr {
		return fmt.Errorf("current QP state %d is not a state", attr.CurState)
	}
	if mask&QPAttrPathMTU != 0 && (attr.PathMTU < MTU256 || attr.PathMTU > MTU4096) {
		return fmt.Errorf("path MTU %d is not 1 (256) to 5 (4096)", attr.PathMTU)
	}
	if mask&QPAttrAccessFlags != 0 {
		if err := attr.AccessFlags.checkKnown(); err != nil {
			return err
		}
	}
	return nil
}

// Modify changes the attributes of the QP that mask selects; the kernel
// checks the state machine (IBA 10.3) and answers EINVAL to a transition
// or attribute it does not allow.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	return qp.ModifyDriver(attr, mask, nil, nil)
}

// ModifyDriver is Modify with the provider's data (mlx5: struct
// mlx5_ib_modify_qp and its response). It sends the legacy command unless
// there is a rate limit or a driver response, which only the extended one
// carries.
func (qp *QP) ModifyDriver(attr *QPAttr, mask QPAttrMask, drvIn, drvOut []byte) error {
	return qp.modify(attr, mask, drvIn, drvOut, mask&QPAttrRateLimit != 0 || len(drvOut) > 0)
}

// ModifyExtended is ModifyDriver with the extended command
// (IB_USER_VERBS_EX_CMD_MODIFY_QP) whatever it carries, as libibverbs'
// ibv_cmd_modify_qp_ex sends it.
func (qp *QP) ModifyExtended(attr *QPAttr, mask QPAttrMask, drvIn, drvOut []byte) error {
	return qp.modify(attr, mask, drvIn, drvOut, true)
}

func (qp *QP) modify(attr *QPAttr, mask QPAttrMask, drvIn, drvOut []byte, extended bool) error {
	if err := checkModify(attr, mask); err != nil {
		return fmt.Errorf("uverbs: modify qp: %w", err)
	}
	if mask&QPAttrRateLimit != 0 && !extended {
		return fmt.Errorf("uverbs: modify qp: a rate limit needs the extended command")
	}
	base := encodeModify(qp.handle, attr, mask)
	if !extended {
		// The legacy command, as libibverbs sends it.
		return qp.ctx.InvokeWrite("modify qp", uverbsabi.IB_USER_VERBS_CMD_MODIFY_QP, asBytes(&base), nil, drvIn, nil)
	}
	// The extended command carries the rate limit and a response.
	ex := uverbsabi.IbUverbsExModifyQp{Base: base, RateLimit: attr.RateLimit}
	if mask&QPAttrRateLimit != 0 {
		ex.Base.AttrMask |= uint32(QPAttrRateLimit)
	}
	var resp uverbsabi.IbUverbsExModifyQpResp
	return qp.ctx.InvokeWrite("modify qp", uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbsabi.IB_USER_VERBS_EX_CMD_MODIFY_QP,
		asBytes(&ex), asBytes(&resp), drvIn, drvOut)
}

// Query returns the QP's attributes that mask selects (the kernel may fill
// in more) and its creation capabilities.
func (qp *QP) Query(mask QPAttrMask) (QPAttr, error) {
	if mask == 0 || mask&^qpStandardAttrMask != 0 {
		return QPAttr{}, fmt.Errorf("uverbs: query qp: attribute mask %#x", uint32(mask))
	}
	cmd := uverbsabi.IbUverbsQueryQp{QpHandle: qp.handle, AttrMask: uint32(mask)}
	var r uverbsabi.IbUverbsQueryQpResp
	if err := qp.ctx.InvokeWrite("query qp", uverbsabi.IB_USER_VERBS_CMD_QUERY_QP, asBytes(&cmd), asBytes(&r), nil, nil); err != nil {
		return QPAttr{}, err
	}
	return QPAttr{
		State: QPState(r.QpState), CurState: QPState(r.CurQpState), PathMTU: MTU(r.PathMtu),
		PathMigState: r.PathMigState, QKey: r.Qkey, RQPSN: r.RqPsn, SQPSN: r.SqPsn, DestQPN: r.DestQpNum,
		AccessFlags: AccessFlags(r.QpAccessFlags),
		Cap:         QPCap{r.MaxSendWr, r.MaxRecvWr, r.MaxSendSge, r.MaxRecvSge, r.MaxInlineData},
		AH:          decodeAH(&r.Dest), AltAH: decodeAH(&r.AltDest),
		PKeyIndex: r.PkeyIndex, AltPKeyIndex: r.AltPkeyIndex, SQDraining: r.SqDraining != 0,
		MaxRdAtomic: r.MaxRdAtomic, MaxDestRdAtomic: r.MaxDestRdAtomic, MinRNRTimer: r.MinRnrTimer,
		Port: r.PortNum, Timeout: r.Timeout, RetryCnt: r.RetryCnt, RNRRetry: r.RnrRetry,
		AltPort: r.AltPortNum, AltTimeout: r.AltTimeout, SQSigAll: r.SqSigAll != 0,
	}, nil
}

// UserHandle is the user handle the kernel got for the QP: the element of
// its async events.
func (qp *QP) UserHandle() uint64 { return qp.userHandle }

// Close destroys the QP. Closing twice is safe.
func (qp *QP) Close() error {
	var resp uverbsabi.IbUverbsDestroyQpResp
	cmd := uverbsabi.IbUverbsDestroyQp{QpHandle: qp.handle}
	return qp.destroy(qp, destroyCall{op: "destroy qp", object: uverbsabi.UVERBS_OBJECT_QP, method: uverbsabi.UVERBS_METHOD_QP_DESTROY,
		handleAttr: uverbsabi.UVERBS_ATTR_DESTROY_QP_HANDLE, respAttr: uverbsabi.UVERBS_ATTR_DESTROY_QP_RESP, resp: asBytes(&resp),
		writeCmd: uverbsabi.IB_USER_VERBS_CMD_DESTROY_QP, cmd: asBytes(&cmd), userHandle: &qp.userHandle})
}
