package mlx5

import (
	"fmt"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/uverbs"
	"github.com/mlx5go/mlx5go/wqe"
)

// QPOptions describe a reliable-connected QP.
type QPOptions struct {
	PD             *PD
	SendCQ, RecvCQ *CQ
	// MaxSendWR is the number of send work requests of the largest kind
	// the send queue must hold at once; MaxSendSGE bounds their SGEs (0
	// means 1), MaxInlineData their inline bytes (SendWR.Inline).
	MaxSendWR, MaxSendSGE, MaxInlineData int
	// MaxRecvWR and MaxRecvSGE size the receive queue; MaxRecvWR 0 makes
	// a QP without one (it cannot receive SENDs).
	MaxRecvWR, MaxRecvSGE int
	// MkeyConfigure sizes the send queue for PostMkeyConfigure work
	// requests (MLX5DV_QP_EX_WITH_MKEY_CONFIGURE) on mkeys of up to
	// MaxMkeyEntries layout entries (0 means 4), signature included.
	MkeyConfigure  bool
	MaxMkeyEntries int
}

// QP is a reliable-connected queue pair created through DEVX, its work
// queue and doorbell record in memory mlx5go owns. One goroutine at a
// time may post on it (the Post methods take no lock); another may poll
// its CQs, and any may Close it: posts in flight finish first, later ones
// return ErrClosed.
type QP struct {
	c      *Context
	pd     *PD
	obj    *DevxObj
	qpn    uint32
	name   string
	sendCQ *CQ
	recvCQ *CQ

	g       guard // posts inside; Close
	typ     QPType
	batch   Batch
	sq      sendQueue
	rq      recvQueue
	dbSQ    *doorbell.SQ
	dbRQ    *doorbell.RQ
	fmCache bool // the last WQE asked the next one for a small fence
	// maxWQE is the WQEBBs of the largest work request the QP was
	// created for; mkeyConf whether that includes mkey configures.
	maxWQE   int
	mkeyConf bool
	errs     postErrors

	mu     sync.Mutex
	res    resources
	closed bool
}

// sqSlot is the send queue's record of the work request that uses a
// WQEBB; every WQEBB of a work request holds the same record.
type sqSlot struct {
	wrID uint64
	next uint16 // producer counter after the work request
	last uint16 // counter of its last WQE
	op   WCOpcode
}

// sendQueue is the send side's ring and per-WQEBB bookkeeping.
type sendQueue struct {
	ring      wqe.Ring
	pi        uint16 // producer counter, in WQEBBs (the poster's)
	slots     []sqSlot
	maxSGE    int
	maxInline int
	sync      handoff

	_ [64]byte // the poller's fields on their own cache line
	// tail is the consumer counter: the WQEBBs before it are free. The
	// poller advances it past a work request when the CQE of its last WQE
	// arrives (all of its WQEs are then done with).
	tail atomic.Uint32
	// reported is the next of the last work request a completion was
	// reported for: CQEs of its other WQEs complete nothing more.
	reported uint16
}

type recvQueue struct {
	ring   []byte
	stride int
	maxSGE int
	pi     uint16
	wrID   []uint64
	sync   handoff
	_      [64]byte
	tail   atomic.Uint32
}

// postErrors are a QP's errors for a full queue and a closed QP, made at
// creation so that the hot path returns them without allocating.
type postErrors struct {
	full, closed [numPostOps]error
}

type postOp int

const (
	postSend postOp = iota
	postRecv
	postMkeyConfigure
	numPostOps
)

var postOpNames = [numPostOps]string{"post send", "post recv", "post mkey configure"}

func (qp *QP) initErrors() {
	for i, op := range postOpNames {
		qp.errs.full[i] = opErr(op, qp.name, ErrQueueFull)
		qp.errs.closed[i] = opErr(op, qp.name, ErrClosed)
	}
}

// QPType is a QP's transport service type.
type QPType uint8

// QP types.
const (
	QPTypeRC  QPType = iota // reliable connected
	QPTypeUC                // unreliable connected
	QPTypeUD                // unreliable datagram
	QPTypeDCI               // dynamically connected initiator (mlx5dv)
	QPTypeDCT               // dynamically connected target (mlx5dv)
)

var qpTypeNames = [...]string{"RC", "UC", "UD", "DCI", "DCT"}

func (t QPType) String() string {
	if int(t) < len(qpTypeNames) {
		return qpTypeNames[t]
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPN is the QP's number.
func (qp *QP) QPN() uint32 { return qp.qpn }

const (
	dataSegSize   = 16 // struct mlx5_wqe_data_seg
	raddrSegSize  = 16 // struct mlx5_wqe_raddr_seg
	atomicSegSize = 16 // struct mlx5_wqe_atomic_seg
	inlineHdrSize = 4  // struct mlx5_wqe_inline_seg's byte_count
	psvWQEBBs     = 1  // a SET_PSV WQE: control and PSV segments
)

// sendWQEBBs is how many WQEBBs the largest work request of o takes: a
// control, a remote address and an atomic segment, then its SGEs or its
// inline data.
func (o *QPOptions) sendWQEBBs() int {
	sge := max(o.MaxSendSGE, 1)
	data := sge * dataSegSize
	if o.MaxInlineData > 0 {
		data = max(data, (inlineHdrSize+o.MaxInlineData+15)&^15)
	}
	n := (wqe.CtrlSegSize + raddrSegSize + atomicSegSize + data + wqe.WQEBB - 1) / wqe.WQEBB
	if o.MkeyConfigure {
		entries := o.MaxMkeyEntries
		if entries == 0 {
			entries = 4
		}
		umr := wqe.CtrlSegSize + wqe.UMRCtrlSegSize + wqe.MkcSegSize + ((entries+3)&^3)*wqe.KLMSegSize + wqe.BSFSegSize
		n = max(n, (umr+wqe.WQEBB-1)/wqe.WQEBB+2*psvWQEBBs)
	}
	return n
}

func roundPow2(n int) int { return 1 << bits.Len(uint(n-1)) }

// CreateQP creates an RC QP in the RST state.
func (c *Context) CreateQP(o QPOptions) (*QP, error) {
	const op = "create qp"
	if err := c.check(op); err != nil {
		return nil, err
	}
	switch {
	case o.PD == nil || o.SendCQ == nil || o.RecvCQ == nil:
		return nil, invalid(op, "", "PD, SendCQ and RecvCQ are required")
	case o.PD.c != c || o.SendCQ.c != c || o.RecvCQ.c != c:
		return nil, invalid(op, "", "PD or CQ of another context")
	case o.MaxSendWR <= 0 || o.MaxSendWR > 1<<15:
		return nil, invalid(op, "", "MaxSendWR %d (1 to 32768)", o.MaxSendWR)
	case o.MaxSendSGE < 0 || o.MaxSendSGE > 30 || o.MaxRecvSGE < 0 || o.MaxRecvSGE > 30:
		return nil, invalid(op, "", "at most 30 SGEs per work request")
	case o.MaxRecvWR < 0 || o.MaxRecvWR > 1<<15:
		return nil, invalid(op, "", "MaxRecvWR %d (0 to 32768)", o.MaxRecvWR)
	case o.MaxInlineData < 0 || o.MaxInlineData > 1024:
		return nil, invalid(op, "", "MaxInlineData %d (0 to 1024)", o.MaxInlineData)
	case o.MaxMkeyEntries < 0 || o.MaxMkeyEntries > 1<<10:
		return nil, invalid(op, "", "MaxMkeyEntries %d (0 to 1024)", o.MaxMkeyEntries)
	}
	perWR := o.sendWQEBBs()
	sqBBs := roundPow2(o.MaxSendWR * perWR)
	if sqBBs > 1<<15 {
		return nil, invalid(op, "", "%d send WRs of %d WQEBBs exceed the 32768-WQEBB send queue", o.MaxSendWR, perWR)
	}
	// The CQs cannot be destroyed while the QP is being made on them.
	if err := o.SendCQ.ref(); err != nil {
		return nil, err
	}
	if err := o.RecvCQ.ref(); err != nil {
		o.SendCQ.unref()
		return nil, err
	}
	qp := &QP{c: c, pd: o.PD, sendCQ: o.SendCQ, recvCQ: o.RecvCQ, maxWQE: perWR, mkeyConf: o.MkeyConfigure}
	qp.sq.maxSGE, qp.sq.maxInline = max(o.MaxSendSGE, 1), o.MaxInlineData
	err := qp.create(&o, sqBBs)
	if err == nil {
		qp.name = qpName(qp.qpn)
		qp.initErrors()
		// A QP closing on these CQs with the same number (the firmware
		// reuses numbers at once) has cleaned its CQEs out of them before
		// this one is found there.
		unlock := lockCQs(o.SendCQ, o.RecvCQ)
		o.SendCQ.attachLocked(qp)
		o.RecvCQ.attachLocked(qp)
		unlock()
		if err = c.adopt(qp); err != nil {
			qp.Close()
			return nil, opErr(op, "", err)
		}
	}
	if err != nil {
		qp.res.close()
		o.SendCQ.unref()
		o.RecvCQ.unref()
		return nil, opErr(op, "", err)
	}
	return qp, nil
}

func (qp *QP) create(o *QPOptions, sqBBs int) error {
	c := qp.c
	var rqSize, rqStride int
	if o.MaxRecvWR > 0 {
		rqSize = roundPow2(o.MaxRecvWR)
		rqStride = roundPow2(max(o.MaxRecvSGE, 1) * dataSegSize)
	}
	q, err := c.queueMemory(&qp.res, rqSize*rqStride+sqBBs*wqe.WQEBB, UARBlueFlame)
	if err != nil {
		return err
	}
	wq := q.buf
	qp.rq.ring, qp.rq.stride, qp.rq.maxSGE = wq[:rqSize*rqStride], rqStride, max(o.MaxRecvSGE, 1)
	qp.rq.wrID = make([]uint64, rqSize)
	qp.sq.ring = wqe.Ring(wq[rqSize*rqStride:])
	qp.sq.slots = make([]sqSlot, sqBBs)

	in := mailbox(prm.CreateQpIn.Layout().Size, prm.MLX5_CMD_OP_CREATE_QP)
	qpc := prm.CreateQpIn.Qpc
	set := func(f prm.Field, v uint64) { f.At(qpc).Set(in, v) }
	set(prm.Qpc.St, qpcServiceRC)
	set(prm.Qpc.PmState, qpcPMMigrated)
	set(prm.Qpc.Pd, uint64(o.PD.pdn))
	set(prm.Qpc.UarPage, uint64(q.uar.PageID))
	set(prm.Qpc.LogSqSize, uint64(bits.Len(uint(sqBBs))-1))
	if rqSize > 0 {
		set(prm.Qpc.RqType, qpcRQRegular)
		set(prm.Qpc.LogRqSize, uint64(bits.Len(uint(rqSize))-1))
		set(prm.Qpc.LogRqStride, uint64(bits.Len(uint(rqStride))-1-4))
	} else {
		set(prm.Qpc.RqType, qpcRQZeroLength)
	}
	set(prm.Qpc.CqnSnd, uint64(o.SendCQ.cqn))
	set(prm.Qpc.CqnRcv, uint64(o.RecvCQ.cqn))
	set(prm.Qpc.LogPageSize, 0) // 4 KiB pages, log in units of 4 KiB
	set(prm.Qpc.DbrUmemValid, 1)
	set(prm.Qpc.DbrUmemId, uint64(q.dbrID))
	set(prm.Qpc.DbrAddr, 0)
	prm.CreateQpIn.WqUmemValid.Set(in, 1)
	prm.CreateQpIn.WqUmemId.Set(in, uint64(q.bufID))
	out := make([]byte, prm.CreateQpOut.Layout().Size)
	obj, err := c.createObj("devx obj create", in, out)
	if err != nil {
		return err
	}
	qp.res.add(obj)
	qp.obj = obj
	qp.qpn = uint32(prm.CreateQpOut.Qpn.Get(out))

	bf := c.Caps.BFRegSize / 2
	if bf == 0 {
		bf = defaultBFSize
	}
	if qp.dbSQ, err = doorbell.NewSQ(q.dbr, q.uar.Page[doorbell.BlueFlameOffset:], bf); err != nil {
		return err
	}
	qp.dbRQ, err = doorbell.NewRQ(q.dbr)
	return err
}

// defaultBFSize is the BlueFlame buffer size when the context did not say
// (the model): half of libmlx5's usual 512-byte bf_reg_size.
const defaultBFSize = 256

// Values of the QP context (MLX5_QP_ST_RC, MLX5_QP_PM_MIGRATED,
// MLX5_NON_ZERO_RQ / MLX5_ZERO_LEN_RQ in the kernel's qp.h).
const (
	qpcServiceRC    = 0x0
	qpcPMMigrated   = 0x3
	qpcRQRegular    = 0x0
	qpcRQZeroLength = 0x3
)

// AddressPath says how a QP reaches its peer: a LID on InfiniBand, a GID
// and MAC on RoCE.
type AddressPath struct {
	Port uint8 // port number, from 1
	MTU  uint8 // path MTU, enum ibv_mtu: 1 (256) to 5 (4096)
	// InfiniBand.
	LID uint16
	// RoCE (GRH set): the peer's GID and MAC, our GID index, hop limit.
	GRH       bool
	GID       [16]byte
	MAC       [6]byte
	SGIDIndex uint8
	HopLimit  uint8
}

// Connect moves the QP from RST through INIT and RTR to RTS, connected to
// QP remoteQPN over path, with remote read, write and atomic access
// allowed (each mkey still decides its own).
func (qp *QP) Connect(remoteQPN uint32, path AddressPath) error {
	const op = "connect"
	if path.Port == 0 || path.MTU < 1 || path.MTU > 5 || remoteQPN > 0xffffff {
		return invalid(op, qp.name, "port %d, MTU %d, remote QPN %#x: want a port from 1, MTU 1 to 5, a 24-bit QPN", path.Port, path.MTU, remoteQPN)
	}
	if qp.g.closed() {
		return opErr(op, qp.name, ErrClosed)
	}
	caps, err := qp.c.generalCaps()
	if err != nil {
		return opErr(op, qp.name, err)
	}
	capOf := func(f prm.Field) uint64 { return f.Get(caps) }
	ads := prm.Qpc.PrimaryAddressPath

	err = qp.modify("RST2INIT", prm.MLX5_CMD_OP_RST2INIT_QP, prm.Rst2initQpIn.Layout(), prm.Rst2initQpOut.Layout().Size, func(q qpcIn) {
		q.set(prm.Ads.VhcaPortNum.At(ads), uint64(path.Port))
		q.set(prm.Ads.PkeyIndex.At(ads), 0)
		q.set(prm.Qpc.Rre, 1)
		q.set(prm.Qpc.Rwe, 1)
		q.set(prm.Qpc.Rae, 1)
	})
	if err == nil {
		err = qp.modify("INIT2RTR", prm.MLX5_CMD_OP_INIT2RTR_QP, prm.Init2rtrQpIn.Layout(), prm.Init2rtrQpOut.Layout().Size, func(q qpcIn) {
			q.set(prm.Qpc.Mtu, uint64(path.MTU))
			q.set(prm.Qpc.LogMsgMax, capOf(prm.CmdHcaCap.LogMaxMsg))
			q.set(prm.Qpc.RemoteQpn, uint64(remoteQPN))
			q.set(prm.Qpc.NextRcvPsn, 0)
			q.set(prm.Qpc.LogRraMax, min(4, capOf(prm.CmdHcaCap.LogMaxRaResQp)))
			q.set(prm.Qpc.MinRnrNak, 12)
			q.set(prm.Ads.VhcaPortNum.At(ads), uint64(path.Port))
			if path.GRH {
				q.set(prm.Ads.Grh.At(ads), 1)
				q.set(prm.Ads.SrcAddrIndex.At(ads), uint64(path.SGIDIndex))
				q.set(prm.Ads.HopLimit.At(ads), uint64(max(path.HopLimit, 1)))
				q.set(prm.Ads.UdpSport.At(ads), 0xc000|uint64(qp.qpn&0x3fff))
				copy(q.bytes(prm.Ads.RgidRip.At(ads)), path.GID[:])
				q.set(prm.Ads.Rmac4732.At(ads), uint64(path.MAC[0])<<8|uint64(path.MAC[1]))
				q.set(prm.Ads.Rmac310.At(ads), uint64(path.MAC[2])<<24|uint64(path.MAC[3])<<16|uint64(path.MAC[4])<<8|uint64(path.MAC[5]))
			} else {
				q.set(prm.Ads.Rlid.At(ads), uint64(path.LID))
			}
		})
	}
	if err == nil {
		err = qp.modify("RTR2RTS", prm.MLX5_CMD_OP_RTR2RTS_QP, prm.Rtr2rtsQpIn.Layout(), prm.Rtr2rtsQpOut.Layout().Size, func(q qpcIn) {
			q.set(prm.Qpc.LogSraMax, min(4, capOf(prm.CmdHcaCap.LogMaxRaReqQp)))
			q.set(prm.Qpc.RetryCount, 7)
			q.set(prm.Qpc.RnrRetry, 7)
			q.set(prm.Qpc.NextSendPsn, 0)
			q.set(prm.Ads.AckTimeout.At(ads), 14)
		})
	}
	if err != nil {
		return opErr(op, qp.name, err)
	}
	return nil
}

// qpcIn is a modify command's input mailbox and the place of its QP
// context.
type qpcIn struct {
	in  []byte
	qpc prm.Field
}

func (q qpcIn) set(f prm.Field, v uint64) { f.At(q.qpc).Set(q.in, v) }
func (q qpcIn) bytes(f prm.Field) []byte  { return f.At(q.qpc).Bytes(q.in) }

// modify runs one QP state transition command whose QP context fill
// writes.
func (qp *QP) modify(name string, opcode uint16, l *prm.Layout, outSize uint32, fill func(qpcIn)) error {
	qpn, ok1 := l.Field("qpn")
	qpc, ok2 := l.Field("qpc")
	if !ok1 || !ok2 {
		return fmt.Errorf("%s: prm has no layout for it", name)
	}
	in := mailbox(l.Size, opcode)
	qpn.Set(in, uint64(qp.qpn))
	fill(qpcIn{in, qpc})
	if err := qp.obj.Modify(in, make([]byte, outSize)); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Close destroys the QP and frees its queues. Posts in flight finish
// first; later ones return ErrClosed. The QP's completions still in its
// CQs are removed, unread (libmlx5's __mlx5_cq_clean), so that they are
// never reported, in particular not as those of a later QP that gets the
// same number. If the device refuses the destroy, the QP stays as it was
// and usable. Closing twice is safe.
func (qp *QP) Close() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.closed {
		return nil
	}
	unlock := lockCQs(qp.sendCQ, qp.recvCQ)
	defer unlock()
	if err := qp.obj.Close(); err != nil {
		return opErr("destroy", qp.name, err)
	}
	qp.g.close()
	qp.sendCQ.refs-- // one reference per role, as CreateQP took them
	qp.recvCQ.refs--
	cqs := []*CQ{qp.sendCQ, qp.recvCQ}
	if qp.recvCQ == qp.sendCQ {
		cqs = cqs[:1]
	}
	for _, cq := range cqs {
		cq.cleanLocked(qp.qpn)
		cq.detachLocked(qp)
	}
	qp.closed = true
	qp.c.forget(qp)
	if err := qp.res.close(); err != nil {
		return opErr("destroy", qp.name, err)
	}
	return nil
}

// LoopbackPath returns the address path by which a QP on port reaches
// another QP of the same device: the port's LID on InfiniBand; on RoCE its
// first RoCE v2 GID (IPv4-mapped preferred), that GID's netdev MAC and
// index, hop limit 64. The MTU is the port's active MTU. A context without
// a kernel (the software model, which does not route by address) gets an
// InfiniBand path with LID 0 and MTU 1024.
func (c *Context) LoopbackPath(port uint8) (AddressPath, error) {
	const op = "loopback path"
	if err := c.checkOpen(op); err != nil {
		return AddressPath{}, err
	}
	if c.uctx == nil {
		return AddressPath{Port: port, MTU: 3}, nil
	}
	pa, err := c.uctx.QueryPort(port)
	if err != nil {
		return AddressPath{}, fmt.Errorf("mlx5: %s: %w", op, err)
	}
	path := AddressPath{Port: port, MTU: pa.ActiveMTU, LID: pa.LID}
	if pa.LinkLayer != linkLayerEthernet {
		return path, nil
	}
	gids, err := c.uctx.QueryGIDTable()
	if err != nil {
		return AddressPath{}, fmt.Errorf("mlx5: %s: %w", op, err)
	}
	var best *uverbs.GIDEntry
	for i := range gids {
		g := &gids[i]
		if g.Port != uint32(port) || g.Type != uverbs.GIDTypeRoCEv2 {
			continue
		}
		if best == nil || (!ipv4Mapped(best.GID) && ipv4Mapped(g.GID)) {
			best = g
		}
	}
	if best == nil {
		return AddressPath{}, fmt.Errorf("mlx5: %s: port %d has no RoCE v2 GID", op, port)
	}
	ifc, err := net.InterfaceByIndex(int(best.NetdevIfindex))
	if err != nil {
		return AddressPath{}, fmt.Errorf("mlx5: %s: netdev of GID %d: %w", op, best.Index, err)
	}
	if len(ifc.HardwareAddr) != 6 {
		return AddressPath{}, fmt.Errorf("mlx5: %s: netdev %s has no 6-byte MAC", op, ifc.Name)
	}
	path.GRH, path.GID, path.SGIDIndex, path.HopLimit = true, best.GID, uint8(best.Index), 64
	copy(path.MAC[:], ifc.HardwareAddr)
	return path, nil
}

// linkLayerEthernet is IBV_LINK_LAYER_ETHERNET.
const linkLayerEthernet = 2

func ipv4Mapped(g uverbs.GID) bool {
	for _, b := range g[:10] {
		if b != 0 {
			return false
		}
	}
	return g[10] == 0xff && g[11] == 0xff
}

// complete turns a CQE of the QP into a completion; false for a CQE that
// completes nothing more: one of a work request already reported (the
// other WQEs of an mkey configure after its first failed, or were
// flushed), or a receive CQE on a QP without a receive queue.
func (qp *QP) complete(q *wqe.CQE, wc *Completion) bool {
	switch q.Opcode {
	case wqe.CQEReq, wqe.CQEReqErr:
		qp.sq.sync.observe()
		// A copy: once the tail moves past it, the poster reuses the slot.
		s := qp.sq.slots[int(q.WQECounter)&(len(qp.sq.slots)-1)]
		if q.WQECounter == s.last {
			qp.sq.tail.Store(uint32(s.next)) // the work request is done with its WQEBBs
		}
		if s.next == qp.sq.reported {
			return false
		}
		qp.sq.reported = s.next
		*wc = Completion{WrID: s.wrID, Opcode: s.op, QPN: qp.qpn}
		if s.op == WCRDMARead {
			wc.ByteLen = q.ByteCount
		}
	case wqe.CQERespSend, wqe.CQERespSendImm, wqe.CQERespWRImm, wqe.CQERespSendInv, wqe.CQERespErr:
		n := len(qp.rq.wrID)
		if n == 0 {
			return false
		}
		qp.rq.sync.observe()
		*wc = Completion{WrID: qp.rq.wrID[int(q.WQECounter)&(n-1)], Opcode: WCRecv, QPN: qp.qpn, ByteLen: q.ByteCount}
		qp.rq.tail.Add(1)
		switch q.Opcode {
		case wqe.CQERespWRImm:
			wc.Opcode, wc.Imm, wc.WithImm = WCRecvRDMAWithImm, q.Imm, true
		case wqe.CQERespSendImm:
			wc.Imm, wc.WithImm = q.Imm, true
		}
	default:
		return false
	}
	if q.Opcode == wqe.CQEReqErr || q.Opcode == wqe.CQERespErr {
		wc.Status, wc.VendorErr = statusOf(q.Syndrome), q.VendorSyndrome
		wc.ByteLen, wc.Imm, wc.WithImm = 0, 0, false
	}
	return true
}
