package cm

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/uverbs"
)

// VerbsDevice is an RDMA device that is not an mlx5 one, rxe (the
// kernel's soft RoCE) above all, opened through the kernel's generic
// verbs (package uverbs) to make QPs the connection manager can connect:
// it lets cm run, and be tested, on rxe and against librdmacm's peers
// (rdmacm-utils' ucmatose, udaddy, cmtime) where no ConnectX is.
//
// Its QPs carry connections, not data: mlx5go's data path (post, poll,
// doorbells) is mlx5's, and a VerbsQP has none. What cm does with one is
// what it does with an *mlx5.QP: Dial and Request.Accept take it from
// RESET to RTS with the connection manager's attributes, and the kernel's
// CM exchanges its number with the peer's.
//
// It knows the driver data its provider's kernel driver requires
// (uverbs.DriverOutSizesOf: rxe's), and refuses a device whose provider
// it does not know, and an mlx5 device, which mlx5.Open opens with the
// data path. A VerbsDevice may be used from any number of goroutines.
type VerbsDevice struct {
	name   string
	c      *uverbs.Context
	pd     *uverbs.PD
	cq     *uverbs.CQ
	sizes  uverbs.DriverOutSizes
	guid   uint64
	closed atomic.Bool
}

// verbsCQE is the size of the CQ a VerbsDevice's QPs share: they post
// nothing, so it only has to exist.
const verbsCQE = 64

// verbsCap are a VerbsQP's queue sizes: it posts nothing, so the least
// the providers take.
var verbsCap = uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}

// OpenVerbs opens the named RDMA device ("rxe0") through the kernel's
// generic verbs, with a protection domain and a completion queue for the
// QPs CreateQP makes. Close releases them and every QP.
func OpenVerbs(name string) (*VerbsDevice, error) {
	const op = "open verbs device"
	id, err := uverbs.DriverIDOf(name)
	if err != nil {
		return nil, opErr(op, name, err)
	}
	sizes, err := verbsDriver(op, name, id)
	if err != nil {
		return nil, err
	}
	c, err := uverbs.Open(name, &uverbs.Options{DriverID: id})
	if err != nil {
		return nil, opErr(op, name, err)
	}
	d, err := newVerbsDevice(name, c, sizes)
	if err != nil {
		c.Close()
		return nil, opErr(op, name, err)
	}
	return d, nil
}

// verbsDriver returns the driver data sizes of a device's kernel driver,
// or why OpenVerbs does not open it.
func verbsDriver(op, name string, id uverbs.DriverID) (uverbs.DriverOutSizes, error) {
	if id == uverbs.DriverMLX5 {
		return uverbs.DriverOutSizes{}, invalid(op, name, "an mlx5 device: open it with mlx5.Open, whose QPs (*mlx5.QP) cm drives")
	}
	sizes, ok := uverbs.DriverOutSizesOf(id)
	if !ok {
		return uverbs.DriverOutSizes{}, unsupported(op, name, "its kernel driver (rdma_driver_id %d) is not one whose driver data mlx5go knows (rxe's)", id)
	}
	return sizes, nil
}

// newVerbsDevice makes the device's PD and CQ on an open context.
func newVerbsDevice(name string, c *uverbs.Context, sizes uverbs.DriverOutSizes) (*VerbsDevice, error) {
	d := &VerbsDevice{name: name, c: c, sizes: sizes}
	a, err := c.QueryDevice()
	if err != nil {
		return nil, err
	}
	d.guid = a.NodeGUID
	if d.pd, err = c.AllocPD(nil); err != nil {
		return nil, err
	}
	if d.cq, err = c.CreateCQ(uverbs.CQOptions{CQE: verbsCQE, DriverOut: make([]byte, sizes.CQ)}); err != nil {
		return nil, err
	}
	return d, nil
}

// Name is the device's name, as OpenVerbs was given it.
func (d *VerbsDevice) Name() string {
	if d == nil {
		return ""
	}
	return d.name
}

// NodeGUID is the device's node GUID, the one Request.NodeGUID names for
// a request that came in on it.
func (d *VerbsDevice) NodeGUID() uint64 {
	if d == nil {
		return 0
	}
	return d.guid
}

// CreateQP makes a QP in RESET for a connection: mlx5.QPTypeRC for a
// "tcp" one, mlx5.QPTypeUD for "udp".
func (d *VerbsDevice) CreateQP(typ mlx5.QPType) (*VerbsQP, error) {
	const op = "create qp"
	if d == nil || d.c == nil {
		return nil, invalid(op, "VerbsDevice", "a nil or zero VerbsDevice: OpenVerbs makes one")
	}
	if d.closed.Load() {
		return nil, closedErr(op, d.name)
	}
	var ut uverbs.QPType
	switch typ {
	case mlx5.QPTypeRC:
		ut = uverbs.QPTypeRC
	case mlx5.QPTypeUD:
		ut = uverbs.QPTypeUD
	default:
		return nil, invalid(op, d.name, "a %v QP: a connection is RC (tcp) or UD (udp)", typ)
	}
	qp, err := d.c.CreateQP(uverbs.QPInit{Type: ut, PD: d.pd, SendCQ: d.cq, RecvCQ: d.cq, Cap: verbsCap,
		DriverOut: make([]byte, d.sizes.QP)})
	if err != nil {
		return nil, verbsErr(op, d.name, err)
	}
	return &VerbsQP{qp: qp, typ: typ, dev: d}, nil
}

// Close closes the device and every QP made on it (close their
// connections first: the connection manager moves a connection's QP to
// ERR when it ends). Closing twice is safe.
func (d *VerbsDevice) Close() error {
	if d == nil || d.c == nil || d.closed.Swap(true) {
		return nil
	}
	if err := d.c.Close(); err != nil {
		return opErr("close verbs device", d.name, err)
	}
	return nil
}

// VerbsQP is a QP of a VerbsDevice: a QP (this package's interface) that
// Dial and Request.Accept drive as they drive an *mlx5.QP, and that is
// checked to be on the device the address resolves to. It has no data
// path. Close releases it; the connection does not.
type VerbsQP struct {
	qp  *uverbs.QP
	typ mlx5.QPType
	dev *VerbsDevice
}

// made reports whether VerbsDevice.CreateQP made q (not nil, not a
// zero VerbsQP).
func (q *VerbsQP) made() bool { return q != nil && q.qp != nil }

// unmade is the error of a call on a QP CreateQP did not make.
func unmade(op string) error {
	return invalid(op, "VerbsQP", "a nil or zero VerbsQP: VerbsDevice.CreateQP makes one")
}

// QPN is the QP's number; 0 for a nil or zero VerbsQP.
func (q *VerbsQP) QPN() uint32 {
	if !q.made() {
		return 0
	}
	return q.qp.QPN
}

// Type is RC or UD, as CreateQP was given it.
func (q *VerbsQP) Type() mlx5.QPType {
	if !q.made() {
		return 0
	}
	return q.typ
}

func (q *VerbsQP) String() string {
	if !q.made() {
		return "VerbsQP"
	}
	return fmt.Sprintf("%s QP %#x", q.dev.name, q.qp.QPN)
}

// Modify moves the QP with the attributes mask selects, as mlx5.QP.Modify
// does: the mask bits are the same (enum ib_qp_attr_mask), and the
// address path is the verbs address vector.
func (q *VerbsQP) Modify(a *mlx5.QPAttr, mask mlx5.QPAttrMask) error {
	if !q.made() {
		return unmade("modify qp")
	}
	if a == nil {
		return invalid("modify qp", q.String(), "no attributes")
	}
	p := &a.Path
	ua := uverbs.QPAttr{State: uverbs.QPState(a.State), CurState: uverbs.QPState(a.CurState), PathMTU: uverbs.MTU(p.MTU),
		QKey: a.QKey, RQPSN: a.RQPSN, SQPSN: a.SQPSN, DestQPN: a.DestQPN, AccessFlags: uverbs.AccessFlags(a.Access),
		AH: uverbs.AHAttr{GRH: uverbs.GlobalRoute{DGID: p.GID, FlowLabel: p.FlowLabel, SGIDIndex: p.SGIDIndex, HopLimit: p.HopLimit,
			TrafficClass: p.TrafficClass}, DLID: p.LID, SL: p.SL, SrcPathBits: p.SrcPathBits, StaticRate: p.StaticRate,
			IsGlobal: p.GRH, Port: p.Port},
		PKeyIndex: a.PKeyIndex, MaxRdAtomic: a.MaxRdAtomic, MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer,
		Port: a.Port, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, EnSQDAsyncNotify: a.EnSQDAsyncNotify,
		RateLimit: a.RateLimit}
	if err := q.qp.Modify(&ua, uverbs.QPAttrMask(mask)); err != nil {
		return verbsErr("modify qp", q.String(), err)
	}
	return nil
}

// Query returns the QP's attributes (the state always, and what mask
// selects; the kernel may fill in more).
func (q *VerbsQP) Query(mask mlx5.QPAttrMask) (mlx5.QPAttr, error) {
	if !q.made() {
		return mlx5.QPAttr{}, unmade("query qp")
	}
	a, err := q.qp.Query(uverbs.QPAttrMask(mask) | uverbs.QPAttrState)
	if err != nil {
		return mlx5.QPAttr{}, verbsErr("query qp", q.String(), err)
	}
	ah := &a.AH
	return mlx5.QPAttr{State: mlx5.QPState(a.State), CurState: mlx5.QPState(a.CurState), Access: mlx5.AccessFlags(a.AccessFlags),
		PKeyIndex: a.PKeyIndex, Port: a.Port, QKey: a.QKey,
		Path: mlx5.AddressPath{Port: ah.Port, MTU: uint8(a.PathMTU), LID: ah.DLID, SrcPathBits: ah.SrcPathBits, SL: ah.SL,
			StaticRate: ah.StaticRate, GRH: ah.IsGlobal, GID: ah.GRH.DGID, SGIDIndex: ah.GRH.SGIDIndex, HopLimit: ah.GRH.HopLimit,
			TrafficClass: ah.GRH.TrafficClass, FlowLabel: ah.GRH.FlowLabel},
		Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, RQPSN: a.RQPSN, SQPSN: a.SQPSN,
		MaxRdAtomic: a.MaxRdAtomic, MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer, DestQPN: a.DestQPN,
		SQDraining: a.SQDraining,
		Caps: mlx5.QPCaps{MaxSendWR: int(a.Cap.MaxSendWR), MaxSendSGE: int(a.Cap.MaxSendSGE), MaxInlineData: int(a.Cap.MaxInlineData),
			MaxRecvWR: int(a.Cap.MaxRecvWR), MaxRecvSGE: int(a.Cap.MaxRecvSGE)}}, nil
}

// Close destroys the QP. Closing twice, or after the device, is safe,
// and so is closing a nil or zero VerbsQP.
func (q *VerbsQP) Close() error {
	if !q.made() {
		return nil
	}
	if err := q.qp.Close(); err != nil {
		return verbsErr("destroy qp", q.String(), err)
	}
	return nil
}

// verbsErr wraps a uverbs failure: a closed object is mlx5.ErrClosed too.
func verbsErr(op, obj string, err error) error {
	if errors.Is(err, uverbs.ErrClosed) {
		return opErr(op, obj, &causeError{msg: err.Error(), errs: []error{mlx5.ErrClosed, err}})
	}
	return opErr(op, obj, err)
}
