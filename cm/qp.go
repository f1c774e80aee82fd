package cm

import (
	"fmt"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/mlx5"
)

// QP is the queue pair a connection carries. *mlx5.QP is one: create it
// in RESET on the device the address resolves to and hand it to Dial or
// Request.Accept, which move it through INIT, RTR and RTS with the
// attributes the connection manager gives (init_qp_attr), as librdmacm's
// rdma_connect and rdma_accept do, and an RC QP to ERR when the
// connection ends (a UD QP, which may serve many connections, stays in
// RTS when one closes). The QP stays the caller's: closing the
// connection does not close it.
//
// Type must be RC for a TCP address and UD for a UDP one. A QP that also
// has a Context() *mlx5.Context method (as *mlx5.QP has), and a *VerbsQP
// (a QP on a device that is not mlx5, rxe's), is checked to be on the
// device the address resolves to; one with DEVX() bool reporting a
// DEVX QP is refused (the connection manager does not give the peer's MAC,
// which a DEVX QP on RoCE needs); one with SRQ() *mlx5.SRQ tells the peer
// whether it receives from an SRQ.
//
// While a connection holds the QP, it changes the QP's state from the
// manager's goroutine (to ERR when the peer disconnects, as an
// application's event thread does with rdma_disconnect): the application
// does not modify the QP itself until the connection is closed.
type QP interface {
	QPN() uint32
	Type() mlx5.QPType
	Modify(a *mlx5.QPAttr, mask mlx5.QPAttrMask) error
	Query(mask mlx5.QPAttrMask) (mlx5.QPAttr, error)
}

// The attribute mask bits mlx5.QP.Modify takes are enum ib_qp_attr_mask's
// (the kernel's init_qp_attr answer) bit for bit; these two it does not
// take, and the connection manager sets them only for an alternate path,
// which RoCE has not.
const (
	maskAltPath      = 1 << 14 // IB_QP_ALT_PATH
	maskPathMigState = 1 << 18 // IB_QP_PATH_MIG_STATE
)

// remoteAccess are the access rights a connection's QP takes from the
// connection manager: remote write, and read and atomics when the peer
// has responder resources (cm_init_qp_init_attr). Kernels from 6.2 add
// IB_ACCESS_FLUSH_GLOBAL and IB_ACCESS_FLUSH_PERSISTENT (bits 8 and 9)
// for a device that can FLUSH (rxe): mlx5go posts no FLUSH, and mlx5's
// verbs refuse bits they do not know, so those are left out.
const remoteAccess = mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead | mlx5.AccessRemoteAtomic

// qpAttrOf converts the connection manager's attributes to mlx5's.
func qpAttrOf(a *seam.QPAttr, mask uint32) (mlx5.QPAttr, mlx5.QPAttrMask, error) {
	if mask&(maskAltPath|maskPathMigState) != 0 {
		return mlx5.QPAttr{}, 0, fmt.Errorf("the connection manager gave an alternate path (mask %#x), which mlx5go does not set", mask)
	}
	ah := &a.AH
	return mlx5.QPAttr{
		State: mlx5.QPState(a.State), CurState: mlx5.QPState(a.CurState), Access: mlx5.AccessFlags(a.AccessFlags) & remoteAccess,
		PKeyIndex: a.PKeyIndex, Port: a.Port, QKey: a.QKey,
		Path: mlx5.AddressPath{Port: ah.Port, MTU: a.PathMTU, LID: ah.DLID, SrcPathBits: ah.SrcPathBits, SL: ah.SL,
			StaticRate: ah.StaticRate, GRH: ah.IsGlobal, GID: ah.GRH.DGID, SGIDIndex: ah.GRH.SGIDIndex,
			HopLimit: ah.GRH.HopLimit, TrafficClass: ah.GRH.TrafficClass, FlowLabel: ah.GRH.FlowLabel},
		Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, RQPSN: a.RQPSN, SQPSN: a.SQPSN,
		MaxRdAtomic: a.MaxRdAtomic, MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer, DestQPN: a.DestQPN,
		EnSQDAsyncNotify: a.EnSQDAsyncNotify,
	}, mlx5.QPAttrMask(mask), nil
}

// pathOf is the address path of a UD peer's address vector.
func pathOf(ah *seam.AHAttr) mlx5.AddressPath {
	return mlx5.AddressPath{Port: ah.Port, LID: ah.DLID, SrcPathBits: ah.SrcPathBits, SL: ah.SL, StaticRate: ah.StaticRate,
		GRH: ah.IsGlobal, GID: ah.GRH.DGID, SGIDIndex: ah.GRH.SGIDIndex, HopLimit: ah.GRH.HopLimit,
		TrafficClass: ah.GRH.TrafficClass, FlowLabel: ah.GRH.FlowLabel}
}

// checkQP checks a QP for a connection in port space ps before anything
// is sent: it is there, of the port space's type, a verbs QP, in RESET
// (or, for UD, already in RTS: one UD QP serves many peers).
func checkQP(qp QP, ps PortSpace) (ready bool, err error) {
	if qp == nil {
		return false, fmt.Errorf("no QP: Options.QP must name the QP the connection carries")
	}
	want := mlx5.QPTypeRC
	if ps == UDP {
		want = mlx5.QPTypeUD
	}
	if t := qp.Type(); t != want {
		return false, fmt.Errorf("a %v QP cannot carry a %v connection (want %v)", t, ps, want)
	}
	if d, ok := qp.(interface{ DEVX() bool }); ok && d.DEVX() {
		return false, errDEVX
	}
	a, err := qp.Query(mlx5.QPAttrState)
	if err != nil {
		return false, err
	}
	switch {
	case a.State == mlx5.QPStateReset:
		return false, nil
	case ps == UDP && a.State == mlx5.QPStateRTS:
		return true, nil
	}
	return false, fmt.Errorf("the QP is in %v: a connection starts from RESET (a UD QP may be in RTS already)", a.State)
}

var errDEVX = fmt.Errorf("a DEVX QP: the connection manager does not give the peer's MAC, which a DEVX QP on RoCE needs; use a verbs QP")

// hasSRQ reports whether the QP receives from an SRQ, if it can say.
func hasSRQ(qp QP) bool {
	if s, ok := qp.(interface{ SRQ() *mlx5.SRQ }); ok {
		return s.SRQ() != nil
	}
	return false
}

// qpDevice is the node GUID of the QP's device, if the QP can say.
func qpDevice(qp QP) (uint64, bool, error) {
	if v, ok := qp.(*VerbsQP); ok {
		if !v.made() {
			return 0, false, nil // its Modify says what is wrong
		}
		return v.dev.guid, true, nil
	}
	c, ok := qp.(interface{ Context() *mlx5.Context })
	if !ok || c.Context() == nil {
		return 0, false, nil
	}
	g, err := c.Context().NodeGUID()
	if err != nil {
		return 0, false, err
	}
	return g, true, nil
}

// modifyTo asks the connection manager for the attributes that take the
// QP to state and applies them, with adjust changing them first (as
// librdmacm overrides max_dest_rd_atomic and max_rd_atomic).
func (id *cmID) modifyTo(qp QP, state uint8, adjust func(*mlx5.QPAttr)) error {
	sa, mask, err := id.initQPAttr(state)
	if err != nil {
		return err
	}
	a, m, err := qpAttrOf(&sa, mask)
	if err != nil {
		return err
	}
	if adjust != nil {
		adjust(&a)
	}
	return qp.Modify(&a, m)
}

// toError moves the QP to ERR, flushing its work requests, as
// rdma_disconnect's ucma_shutdown and a failed accept do. A QP already
// closed is fine.
func toError(qp QP) {
	if qp != nil {
		qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState)
	}
}
