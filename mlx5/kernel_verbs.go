package mlx5

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// The verbs half of seam.Device over the kernel: the generic verbs objects
// of package uverbs, created with the driver data the caller built, and
// known here by their kernel handles.
//
// The user handles the caller gives are the ones the kernel gets, so the
// async events and completion events name what the caller registered.
// Errors from the kernel are uverbs' CallError (the call and the errno);
// a call uverbs or this file refuses before the kernel wraps EINVAL (bad
// parameters) or ENOENT (an unknown handle).

// kernelVerbs are the verbs objects a kernelDevice made, by handle.
type kernelVerbs struct {
	cqs  handles[*uverbs.CQ]
	qps  handles[*uverbs.QP]
	srqs handles[*uverbs.SRQ]
	ahs  handles[*uverbs.AH]
}

// handles maps kernel handles to the objects made with them.
type handles[T comparable] struct {
	mu sync.Mutex
	m  map[seam.Handle]T
}

func (t *handles[T]) add(h seam.Handle, v T) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[seam.Handle]T{}
	}
	t.m[h] = v
}

func (t *handles[T]) get(h seam.Handle) (T, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.m[h]
	return v, ok
}

// remove forgets h if it still names v: the kernel may have given the
// handle to a new object since.
func (t *handles[T]) remove(h seam.Handle, v T) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w, ok := t.m[h]; ok && w == v {
		delete(t.m, h)
	}
}

// destroy closes the object h names and forgets it. If the kernel refuses
// (a CQ that QPs still use), the object stays, usable and known.
func destroy[T interface {
	comparable
	Close() error
}](op string, t *handles[T], h seam.Handle) error {
	v, ok := t.get(h)
	if !ok {
		return fmt.Errorf("%s: handle %d: %w", op, h, unix.ENOENT)
	}
	if err := v.Close(); err != nil {
		return verbsErr(op, err)
	}
	t.remove(h, v)
	return nil
}

// verbsErr makes err name the call and wrap an errno. The kernel's errors
// (uverbs.CallError) do already; an error that carries an errno or
// uverbs.ErrClosed gains the call's name; anything else is a call uverbs
// refused before the kernel, EINVAL.
func verbsErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *uverbs.CallError
	if errors.As(err, &ce) {
		return err
	}
	var errno unix.Errno
	if errors.As(err, &errno) || errors.Is(err, uverbs.ErrClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, err, unix.EINVAL)
}

func (k *kernelDevice) pd(op string, h seam.Handle) (*uverbs.PD, error) {
	k.mu.Lock()
	pd := k.pds[h]
	k.mu.Unlock()
	if pd == nil {
		return nil, fmt.Errorf("%s: pd handle %d: %w", op, h, unix.ENOENT)
	}
	return pd, nil
}

func (k *kernelDevice) cq(op string, h seam.Handle) (*uverbs.CQ, error) {
	if h == seam.NoHandle {
		return nil, nil
	}
	cq, ok := k.verbs.cqs.get(h)
	if !ok {
		return nil, fmt.Errorf("%s: cq handle %d: %w", op, h, unix.ENOENT)
	}
	return cq, nil
}

// DriverContext is the mlx5_ib_alloc_ucontext_resp the kernel answered
// GET_CONTEXT with when the context opened (uverbs keeps it), a copy.
func (k *kernelDevice) DriverContext() []byte { return k.ctx.DriverResponse() }

// QueryDevice is uverbs' extended query device with mlx5's driver data
// (libibverbs' ibv_cmd_query_device_any as mlx5_query_device_ctx calls
// it).
func (k *kernelDevice) QueryDevice(drvOut []byte) (seam.DeviceAttr, error) {
	da, err := k.ctx.QueryDeviceWithDriverData(drvOut)
	if err != nil {
		return seam.DeviceAttr{}, verbsErr("query device", err)
	}
	return seam.DeviceAttr{AtomicCap: uint32(da.AtomicCap), HCACoreClock: da.HCACoreClock, NodeGUID: da.NodeGUID,
		ODP:               seam.ODPCaps{General: da.ODPCaps.General, RC: da.ODPCaps.RC, UC: da.ODPCaps.UC, UD: da.ODPCaps.UD, XRC: da.XRCODPCaps},
		CQModerationCount: da.CQModerationCaps.MaxCQCount, CQModerationPeriod: da.CQModerationCaps.MaxCQPeriod,
		CapFlags: uint64(da.DeviceCapFlagsEx)}, nil
}

func (k *kernelDevice) QueryPort(port uint8) (seam.PortAttr, error) {
	pa, err := k.ctx.QueryPort(port)
	if err != nil {
		return seam.PortAttr{}, verbsErr("query port", err)
	}
	return seam.PortAttr{State: pa.State, MaxMTU: pa.MaxMTU, ActiveMTU: pa.ActiveMTU, GIDTableLen: pa.GIDTableLen,
		PortCapFlags: pa.PortCapFlags, MaxMsgSz: pa.MaxMsgSize, LID: pa.LID, SMLID: pa.SMLID, LMC: pa.LMC, LinkLayer: pa.LinkLayer, Flags: pa.Flags}, nil
}

// QueryGIDTable is the device's GID table (UVERBS_METHOD_QUERY_GID_TABLE,
// sized from the ports' table lengths). A RoCE GID carries its netdev's
// MAC, looked up by the netdev's index; a GID whose netdev cannot be found
// (gone, or in another network namespace) or has no Ethernet address
// fails the call, naming the GID.
func (k *kernelDevice) QueryGIDTable() ([]seam.GIDEntry, error) {
	const op = "query gid table"
	es, err := k.ctx.QueryGIDTable()
	if err != nil {
		return nil, verbsErr(op, err)
	}
	out := make([]seam.GIDEntry, len(es))
	for i, e := range es {
		out[i] = seam.GIDEntry{GID: e.GID, Index: e.Index, Port: e.Port, Type: uint32(e.Type)}
		if (e.Type != uverbs.GIDTypeRoCEv1 && e.Type != uverbs.GIDTypeRoCEv2) || e.NetdevIfindex == 0 {
			continue
		}
		ifi, err := net.InterfaceByIndex(int(e.NetdevIfindex))
		if err != nil {
			return nil, fmt.Errorf("%s: port %d index %d: netdev %d: %w", op, e.Port, e.Index, e.NetdevIfindex, err)
		}
		if len(ifi.HardwareAddr) != len(out[i].MAC) {
			return nil, fmt.Errorf("%s: port %d index %d: netdev %s has no Ethernet address (%v): %w",
				op, e.Port, e.Index, ifi.Name, ifi.HardwareAddr, unix.EINVAL)
		}
		copy(out[i].MAC[:], ifi.HardwareAddr)
	}
	return out, nil
}

// GIDType is the type of port's GID table entry index
// (UVERBS_METHOD_QUERY_GID_ENTRY, as libibverbs' ibv_query_gid_type reads
// it for libmlx5's mlx5_create_ah): one entry, without its netdev.
func (k *kernelDevice) GIDType(port uint8, index uint32) (uint32, error) {
	e, err := k.ctx.QueryGIDEntry(uint32(port), index)
	if err != nil {
		return 0, verbsErr("query gid entry", err)
	}
	return uint32(e.Type), nil
}

// NextAsyncEvent reads the context's async event file. The element is
// what the kernel reported: the user handle the object was created with,
// or the port number.
func (k *kernelDevice) NextAsyncEvent(ctx context.Context) (seam.AsyncEvent, error) {
	ev, err := k.ctx.NextAsyncEvent(ctx)
	if err != nil {
		if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return seam.AsyncEvent{}, err
		}
		return seam.AsyncEvent{}, verbsErr("async event", err)
	}
	return seam.AsyncEvent{Type: uint32(ev.Type), Element: ev.Element}, nil
}

// kernelCompChannel is a uverbs completion channel; Next returns the user
// handle of the CQ each event is for.
type kernelCompChannel struct{ ch *uverbs.CompChannel }

func (c kernelCompChannel) Next(ctx context.Context) (uint64, error) {
	h, err := c.ch.NextUserHandle(ctx)
	if err != nil && ctx.Err() == nil {
		return 0, verbsErr("completion event", err)
	}
	return h, err
}

func (c kernelCompChannel) Fd() int      { return c.ch.Fd() }
func (c kernelCompChannel) Close() error { return c.ch.Close() }

func (k *kernelDevice) NewCompChannel() (seam.CompChannel, error) {
	ch, err := k.ctx.CreateCompChannel()
	if err != nil {
		return nil, verbsErr("create comp channel", err)
	}
	return kernelCompChannel{ch}, nil
}

// CreateCQ is UVERBS_METHOD_CQ_CREATE with the caller's user handle and
// driver data; it returns the entries the kernel granted.
func (k *kernelDevice) CreateCQ(c seam.CQCreate, drvIn, drvOut []byte) (seam.Handle, uint32, error) {
	const op = "create cq"
	o := uverbs.CQOptions{CQE: c.CQE, CompVector: c.CompVector, Flags: c.Flags, DriverIn: drvIn, DriverOut: drvOut,
		UserHandle: &c.UserHandle}
	if c.Channel != nil {
		kc, ok := c.Channel.(kernelCompChannel)
		if !ok {
			return 0, 0, fmt.Errorf("%s: completion channel %T is not this device's: %w", op, c.Channel, unix.EINVAL)
		}
		o.Channel = kc.ch
	}
	cq, err := k.ctx.CreateCQ(o)
	if err != nil {
		return 0, 0, verbsErr(op, err)
	}
	h := seam.Handle(cq.Handle())
	k.verbs.cqs.add(h, cq)
	return h, cq.CQE, nil
}

func (k *kernelDevice) DestroyCQ(h seam.Handle) error { return destroy("destroy cq", &k.verbs.cqs, h) }

// ResizeCQ is IB_USER_VERBS_CMD_RESIZE_CQ with mlx5's driver data.
func (k *kernelDevice) ResizeCQ(h seam.Handle, cqe uint32, drvIn []byte) (uint32, error) {
	const op = "resize cq"
	cq, err := k.cq(op, h)
	if err == nil && cq == nil {
		err = fmt.Errorf("%s: no cq handle: %w", op, unix.EINVAL)
	}
	if err != nil {
		return 0, err
	}
	n, err := cq.Resize(cqe, drvIn, nil)
	if err != nil {
		return 0, verbsErr(op, err)
	}
	return n, nil
}

// ModifyCQ is IB_USER_VERBS_EX_CMD_MODIFY_CQ with IB_CQ_MODERATE.
func (k *kernelDevice) ModifyCQ(h seam.Handle, count, period uint16) error {
	const op = "modify cq"
	cq, err := k.cq(op, h)
	if err == nil && cq == nil {
		err = fmt.Errorf("%s: no cq handle: %w", op, unix.EINVAL)
	}
	if err != nil {
		return err
	}
	if err := cq.Moderate(count, period); err != nil {
		return verbsErr(op, err)
	}
	return nil
}

// CreateQP is UVERBS_METHOD_QP_CREATE: RC, UC, UD or the driver's own type
// (mlx5's DCT and DCI, which the driver data's flags tell apart), with
// the caller's user handle; NoHandle leaves a CQ or the SRQ out.
func (k *kernelDevice) CreateQP(q seam.QPCreate, drvIn, drvOut []byte) (seam.Handle, seam.QPCreated, error) {
	const op = "create qp"
	pd, err := k.pd(op, q.PD)
	if err != nil {
		return 0, seam.QPCreated{}, err
	}
	scq, err := k.cq(op, q.SendCQ)
	if err != nil {
		return 0, seam.QPCreated{}, err
	}
	rcq, err := k.cq(op, q.RecvCQ)
	if err != nil {
		return 0, seam.QPCreated{}, err
	}
	init := uverbs.QPInit{Type: uverbs.QPType(q.Type), PD: pd, SendCQ: scq, RecvCQ: rcq, Cap: uverbsCap(q.Cap),
		Flags: uverbs.QPCreateFlags(q.Flags), DriverIn: drvIn, DriverOut: drvOut, UserHandle: &q.UserHandle}
	if q.SigAll {
		init.Flags |= uverbs.QPCreateSQSigAll
	}
	if q.SRQ != seam.NoHandle {
		srq, ok := k.verbs.srqs.get(q.SRQ)
		if !ok {
			return 0, seam.QPCreated{}, fmt.Errorf("%s: srq handle %d: %w", op, q.SRQ, unix.ENOENT)
		}
		init.SRQ = srq
	}
	qp, err := k.ctx.CreateQP(init)
	if err != nil {
		return 0, seam.QPCreated{}, verbsErr(op, err)
	}
	h := seam.Handle(qp.Handle())
	k.verbs.qps.add(h, qp)
	return h, seam.QPCreated{QPN: qp.QPN, Cap: seamCap(qp.Cap)}, nil
}

// ModifyQP sends what libmlx5 sends: the legacy MODIFY_QP without driver
// data, or, when there is driver data (mlx5_ib_modify_qp and its
// response: a DCT, ECE) or a rate limit, the extended command with it.
func (k *kernelDevice) ModifyQP(h seam.Handle, a *seam.QPAttr, mask uint32, drvIn, drvOut []byte) error {
	const op = "modify qp"
	qp, ok := k.verbs.qps.get(h)
	if !ok {
		return fmt.Errorf("%s: handle %d: %w", op, h, unix.ENOENT)
	}
	if a == nil {
		return fmt.Errorf("%s: no attributes: %w", op, unix.EINVAL)
	}
	ua := uverbsQPAttr(a)
	m := uverbs.QPAttrMask(mask)
	var err error
	if m&uverbs.QPAttrRateLimit != 0 || len(drvIn) > 0 || len(drvOut) > 0 {
		err = qp.ModifyExtended(&ua, m, drvIn, drvOut)
	} else {
		err = qp.Modify(&ua, m)
	}
	return verbsErr(op, err)
}

func (k *kernelDevice) QueryQP(h seam.Handle, mask uint32) (seam.QPAttr, error) {
	const op = "query qp"
	qp, ok := k.verbs.qps.get(h)
	if !ok {
		return seam.QPAttr{}, fmt.Errorf("%s: handle %d: %w", op, h, unix.ENOENT)
	}
	a, err := qp.Query(uverbs.QPAttrMask(mask))
	if err != nil {
		return seam.QPAttr{}, verbsErr(op, err)
	}
	return seamQPAttr(&a), nil
}

func (k *kernelDevice) DestroyQP(h seam.Handle) error { return destroy("destroy qp", &k.verbs.qps, h) }

// CreateSRQ is UVERBS_METHOD_SRQ_CREATE of a basic SRQ. The kernel reports
// a basic SRQ's number only in the driver data: SRQN is
// mlx5_ib_create_srq_resp.srqn when drvOut holds it.
func (k *kernelDevice) CreateSRQ(s seam.SRQCreate, drvIn, drvOut []byte) (seam.Handle, seam.SRQCreated, error) {
	const op = "create srq"
	pd, err := k.pd(op, s.PD)
	if err != nil {
		return 0, seam.SRQCreated{}, err
	}
	srq, err := pd.CreateSRQ(uverbs.SRQOptions{MaxWR: s.MaxWR, MaxSGE: s.MaxSGE, Limit: s.Limit,
		DriverIn: drvIn, DriverOut: drvOut, UserHandle: &s.UserHandle})
	if err != nil {
		return 0, seam.SRQCreated{}, verbsErr(op, err)
	}
	h := seam.Handle(srq.Handle())
	k.verbs.srqs.add(h, srq)
	got := seam.SRQCreated{SRQN: srq.SRQN, MaxWR: srq.MaxWR, MaxSGE: srq.MaxSGE}
	if len(drvOut) >= 4 {
		got.SRQN = binary.NativeEndian.Uint32(drvOut) // mlx5_ib_create_srq_resp.srqn
	}
	return h, got, nil
}

// ModifySRQ arms the SRQ's limit event (IB_SRQ_LIMIT; max_wr goes as 0,
// as libibverbs sends it from a zeroed attribute).
func (k *kernelDevice) ModifySRQ(h seam.Handle, limit uint32) error {
	const op = "modify srq"
	srq, ok := k.verbs.srqs.get(h)
	if !ok {
		return fmt.Errorf("%s: handle %d: %w", op, h, unix.ENOENT)
	}
	return verbsErr(op, srq.Modify(uverbs.SRQAttrLimit, 0, limit, nil))
}

func (k *kernelDevice) DestroySRQ(h seam.Handle) error {
	return destroy("destroy srq", &k.verbs.srqs, h)
}

// CreateAH is IB_USER_VERBS_CMD_CREATE_AH with the caller's user handle;
// drvOut receives mlx5_ib_create_ah_resp (the destination MAC on RoCE).
func (k *kernelDevice) CreateAH(pdh seam.Handle, a *seam.AHAttr, userHandle uint64, drvOut []byte) (seam.Handle, error) {
	const op = "create ah"
	pd, err := k.pd(op, pdh)
	if err != nil {
		return 0, err
	}
	if a == nil {
		return 0, fmt.Errorf("%s: no address: %w", op, unix.EINVAL)
	}
	ua := uverbsAH(a)
	ah, err := pd.CreateAHWithUserHandle(&ua, userHandle, drvOut)
	if err != nil {
		return 0, verbsErr(op, err)
	}
	h := seam.Handle(ah.Handle())
	k.verbs.ahs.add(h, ah)
	return h, nil
}

func (k *kernelDevice) DestroyAH(h seam.Handle) error { return destroy("destroy ah", &k.verbs.ahs, h) }

// The seam's plain values and uverbs' typed ones: the same fields of the
// same kernel structs.

func uverbsCap(c seam.QPCap) uverbs.QPCap {
	return uverbs.QPCap{MaxSendWR: c.MaxSendWR, MaxRecvWR: c.MaxRecvWR, MaxSendSGE: c.MaxSendSGE,
		MaxRecvSGE: c.MaxRecvSGE, MaxInlineData: c.MaxInlineData}
}

func seamCap(c uverbs.QPCap) seam.QPCap {
	return seam.QPCap{MaxSendWR: c.MaxSendWR, MaxRecvWR: c.MaxRecvWR, MaxSendSGE: c.MaxSendSGE,
		MaxRecvSGE: c.MaxRecvSGE, MaxInlineData: c.MaxInlineData}
}

func uverbsAH(a *seam.AHAttr) uverbs.AHAttr {
	return uverbs.AHAttr{GRH: uverbs.GlobalRoute{DGID: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, SGIDIndex: a.GRH.SGIDIndex,
		HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass}, DLID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits,
		StaticRate: a.StaticRate, IsGlobal: a.IsGlobal, Port: a.Port}
}

func seamAH(a *uverbs.AHAttr) seam.AHAttr {
	return seam.AHAttr{GRH: seam.GlobalRoute{DGID: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, SGIDIndex: a.GRH.SGIDIndex,
		HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass}, DLID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits,
		StaticRate: a.StaticRate, IsGlobal: a.IsGlobal, Port: a.Port}
}

func uverbsQPAttr(a *seam.QPAttr) uverbs.QPAttr {
	return uverbs.QPAttr{State: uverbs.QPState(a.State), CurState: uverbs.QPState(a.CurState),
		PathMTU: uverbs.MTU(a.PathMTU), PathMigState: a.PathMigState, QKey: a.QKey, RQPSN: a.RQPSN, SQPSN: a.SQPSN,
		DestQPN: a.DestQPN, AccessFlags: uverbs.AccessFlags(a.AccessFlags), Cap: uverbsCap(a.Cap),
		AH: uverbsAH(&a.AH), AltAH: uverbsAH(&a.AltAH), PKeyIndex: a.PKeyIndex, AltPKeyIndex: a.AltPKeyIndex,
		EnSQDAsyncNotify: a.EnSQDAsyncNotify, SQDraining: a.SQDraining, MaxRdAtomic: a.MaxRdAtomic,
		MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer, Port: a.Port, Timeout: a.Timeout,
		RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, AltPort: a.AltPort, AltTimeout: a.AltTimeout,
		SQSigAll: a.SQSigAll, RateLimit: a.RateLimit}
}

func seamQPAttr(a *uverbs.QPAttr) seam.QPAttr {
	return seam.QPAttr{State: uint8(a.State), CurState: uint8(a.CurState), PathMTU: uint8(a.PathMTU),
		PathMigState: a.PathMigState, QKey: a.QKey, RQPSN: a.RQPSN, SQPSN: a.SQPSN, DestQPN: a.DestQPN,
		AccessFlags: uint32(a.AccessFlags), Cap: seamCap(a.Cap), AH: seamAH(&a.AH), AltAH: seamAH(&a.AltAH),
		PKeyIndex: a.PKeyIndex, AltPKeyIndex: a.AltPKeyIndex, EnSQDAsyncNotify: a.EnSQDAsyncNotify,
		SQDraining: a.SQDraining, MaxRdAtomic: a.MaxRdAtomic, MaxDestRdAtomic: a.MaxDestRdAtomic,
		MinRNRTimer: a.MinRNRTimer, Port: a.Port, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry,
		AltPort: a.AltPort, AltTimeout: a.AltTimeout, SQSigAll: a.SQSigAll, RateLimit: a.RateLimit}
}
