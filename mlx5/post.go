package mlx5

import (
	"encoding/binary"
	"fmt"

	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// SendOpcode is a send work request's operation.
type SendOpcode uint8

// Send operations (MLX5_OPCODE_*).
const (
	OpRDMAWrite    = SendOpcode(0x08) // RDMA WRITE
	OpRDMAWriteImm = SendOpcode(0x09) // RDMA WRITE with immediate
	OpSend         = SendOpcode(0x0a) // SEND
	OpSendImm      = SendOpcode(0x0b) // SEND with immediate
	OpRDMARead     = SendOpcode(0x10) // RDMA READ
)

// completes returns the completion opcode of a send work request's
// operation; false for an operation PostSend does not take.
func (o SendOpcode) completes() (WCOpcode, bool) {
	switch o {
	case OpRDMAWrite, OpRDMAWriteImm:
		return WCRDMAWrite, true
	case OpSend, OpSendImm:
		return WCSend, true
	case OpRDMARead:
		return WCRDMARead, true
	}
	return 0, false
}

// SendWR is one send work request.
type SendWR struct {
	WrID   uint64
	Opcode SendOpcode
	Flags  wqe.SendFlags // SendSignaled for a completion, SendFence, SendSolicited
	Imm    uint32        // immediate data of OpSendImm and OpRDMAWriteImm
	// RemoteAddr and RKey name the peer's memory of RDMA operations.
	RemoteAddr uint64
	RKey       uint32
	// SGL is the local memory: gathered for sends and writes, scattered
	// into by reads. An SGE may name an Mkey: with a signature block, its
	// addresses and lengths count the mkey's memory domain.
	SGL []wqe.SGE
}

// free is the number of WQEBBs at the producer counter that no posted
// work request still uses, by the consumer counter the poller advances.
func (sq *sendQueue) free() int {
	return len(sq.slots) - int(sq.pi-uint16(sq.tail.Load()))
}

// room is how many WQEBBs a work request may take now: what is free, and
// no more than the largest work request the QP was created for.
func (qp *QP) room() int { return min(qp.sq.free(), qp.maxWQE) }

// buildErr is the error of a work request the builder refused: the queue
// has no room for it now (ErrQueueFull), it is larger than the QP was
// created for, or it is invalid (ErrInvalid, with the builder's reason).
func (qp *QP) buildErr(op postOp, res wqe.Result, err error) error {
	if err == wqe.ErrNoRoom {
		if res.WQEBBs > qp.maxWQE {
			return invalid(postOpNames[op], qp.name, "the work request takes %d WQEBBs, more than the %d of the largest the QP was created for (QPOptions)", res.WQEBBs, qp.maxWQE)
		}
		return qp.errs.full[op]
	}
	return &Error{Op: postOpNames[op], Obj: qp.name, Err: &reasonError{msg: err.Error(), errs: []error{ErrInvalid, unix.EINVAL, err}}}
}

// PostSend posts one send work request and rings the doorbell. It does
// not allocate or make a system call; one goroutine at a time may post on
// a QP.
func (qp *QP) PostSend(wr *SendWR) error {
	if wr == nil {
		return invalid(postOpNames[postSend], qp.name, "nil work request")
	}
	wc, ok := wr.Opcode.completes()
	if !ok {
		return invalid(postOpNames[postSend], qp.name, "opcode %#x", uint8(wr.Opcode))
	}
	if !qp.g.enter() {
		return qp.errs.closed[postSend]
	}
	s := wqe.Send{QPN: qp.qpn, Opcode: uint8(wr.Opcode), Flags: wr.Flags, Imm: wr.Imm,
		RemoteAddr: wr.RemoteAddr, RKey: wr.RKey, SGL: wr.SGL, SmallFence: qp.fmCache, MaxSGE: qp.sq.maxSGE}
	res, err := wqe.BuildSend(qp.sq.ring, qp.sq.pi, qp.room(), &s)
	if err != nil {
		qp.g.exit()
		return qp.buildErr(postSend, res, err)
	}
	qp.fmCache = res.SmallFence
	start := qp.sq.pi
	qp.track(wr.WrID, wc, res.WQEBBs, start)
	err = qp.ring(start, res, 1)
	qp.g.exit()
	return err
}

// track records the work request of wqebbs WQEBBs at the producer counter
// in each of its WQEBBs (a CQE names the WQE that asked for it, which for
// an mkey configure may be its last, or, on error, any of them), with the
// counter of its last WQE, and advances the producer counter.
func (qp *QP) track(wrID uint64, op WCOpcode, wqebbs int, last uint16) {
	mask := len(qp.sq.slots) - 1
	next := qp.sq.pi + uint16(wqebbs)
	rec := sqSlot{wrID: wrID, next: next, last: last, op: op}
	for j := qp.sq.pi; j != next; j++ {
		qp.sq.slots[int(j)&mask] = rec
	}
	qp.sq.pi = next
	qp.sq.sync.publish()
}

// ring rings the send doorbell for the work request of nreq WQEs that
// starts at start: a BlueFlame copy when it is a single WQE of more than
// one segment that fits, as libmlx5 does, else the first 8 bytes of the
// last WQE's control segment (the 8-byte doorbell).
func (qp *QP) ring(start uint16, res wqe.Result, nreq int) error {
	ring := qp.sq.ring
	bbs := len(ring) / wqe.WQEBB
	ds := int(res.DS)
	if qp.dbSQ.UseBlueFlame(nreq, ds) {
		i := int(start) & (bbs - 1)
		end := i + (ds*16+wqe.WQEBB-1)/wqe.WQEBB
		if end <= bbs {
			return qp.dbSQ.RingBF(qp.sq.pi, ring[i*wqe.WQEBB:end*wqe.WQEBB], nil)
		}
		return qp.dbSQ.RingBF(qp.sq.pi, ring[i*wqe.WQEBB:], ring[:(end-bbs)*wqe.WQEBB])
	}
	var db [8]byte
	binary.BigEndian.PutUint64(db[:], res.Doorbell)
	return qp.dbSQ.Ring(qp.sq.pi, db[:])
}

// PostRecv posts one receive work request and rings the receive doorbell.
func (qp *QP) PostRecv(wrID uint64, sgl []wqe.SGE) error {
	const op = postRecv
	n := len(qp.rq.wrID)
	if n == 0 {
		return invalid(postOpNames[op], qp.name, "the QP has no receive queue")
	}
	if len(sgl) > qp.rq.maxSGE {
		return invalid(postOpNames[op], qp.name, "%d SGEs, the queue takes %d", len(sgl), qp.rq.maxSGE)
	}
	if !qp.g.enter() {
		return qp.errs.closed[op]
	}
	if int(qp.rq.pi-uint16(qp.rq.tail.Load())) >= n {
		qp.g.exit()
		return qp.errs.full[op]
	}
	i := int(qp.rq.pi) & (n - 1)
	if err := wqe.PutRecv(qp.rq.ring[i*qp.rq.stride:(i+1)*qp.rq.stride], sgl); err != nil {
		qp.g.exit()
		return &Error{Op: postOpNames[op], Obj: qp.name, Err: &reasonError{msg: err.Error(), errs: []error{ErrInvalid, unix.EINVAL, err}}}
	}
	qp.rq.wrID[i] = wrID
	qp.rq.pi++
	qp.rq.sync.publish()
	qp.dbRQ.Ring(qp.rq.pi)
	qp.g.exit()
	return nil
}

// MkeyConfigureWR configures an Mkey (mlx5dv_wr_mkey_configure with its
// setters): its access rights, its layout and, for a signature mkey, its
// signature block.
type MkeyConfigureWR struct {
	WrID  uint64
	Mkey  *Mkey
	Flags wqe.SendFlags // SendInline is implied
	// Access sets the access rights (mlx5dv_wr_set_mkey_access_flags)
	// when SetAccess.
	SetAccess bool
	Access    wqe.Access
	// List is the layout (mlx5dv_wr_set_mkey_layout_list): the mkey's
	// address space, from 0, is these pieces of memory one after another.
	List []wqe.KLM
	// Interleaved and RepeatCount are the other layout
	// (mlx5dv_wr_set_mkey_layout_interleaved).
	Interleaved []wqe.RepeatEntry
	RepeatCount uint32
	// Sig is the signature block (mlx5dv_wr_set_mkey_sig_block); ResetSig
	// removes it (MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR).
	Sig      *sig.BlockAttr
	ResetSig bool
}

// PostMkeyConfigure posts an mkey configure work request and rings the
// doorbell: a UMR WQE, then a SET_PSV WQE per signature domain when it
// sets a signature block, or when the device reported a signature error
// on the mkey since its last configure (the UMR then also updates the
// mkey's signature error counter, as libmlx5 does). The work request
// completes once, with opcode WCUMR, whatever happened to each of its
// WQEs: the first error, or success. The QP must have been created with
// MkeyConfigure, for mkeys of up to as many layout entries.
func (qp *QP) PostMkeyConfigure(wr *MkeyConfigureWR) error {
	const op = postMkeyConfigure
	if wr == nil {
		return invalid(postOpNames[op], qp.name, "nil work request")
	}
	m := wr.Mkey
	switch {
	case m == nil || m.c != qp.c:
		return invalid(postOpNames[op], qp.name, "no mkey, or an mkey of another context")
	case !qp.mkeyConf:
		return invalid(postOpNames[op], qp.name, "the QP was created without MkeyConfigure")
	case m.dead.Load():
		return opErr(postOpNames[op], qp.name, fmt.Errorf("%s: %w", m.name, ErrClosed))
	}
	if !qp.g.enter() {
		return qp.errs.closed[op]
	}
	mem, wire := m.PSVs()
	errs := m.sigErrs.Load()
	c := wqe.MkeyConfigure{QPN: qp.qpn, Mkey: m.LKey, Flags: wr.Flags | wqe.SendInline, SmallFence: qp.fmCache,
		SetAccess: wr.SetAccess, Access: wr.Access, List: wr.List, Interleaved: wr.Interleaved, RepeatCount: wr.RepeatCount,
		MaxEntries: m.maxEntries, Sig: wr.Sig, MemPSV: mem, WirePSV: wire, SigMkey: m.sigMkey, BSF: m.bsf,
		ResetSig: wr.ResetSig, UpdateSigErr: m.sigMkey && errs != m.sentErrs, SigErrs: errs, Block: m.sigPSV}
	res, err := wqe.BuildMkeyConfigure(qp.sq.ring, qp.sq.pi, qp.room(), &c)
	if err != nil {
		qp.g.exit()
		return qp.buildErr(op, res, err)
	}
	switch {
	case wr.Sig != nil:
		m.bsf = wqe.BSFSet
		m.shape.Store(uint32(shapeOf(wr.Sig)))
		m.sigPSV = wqe.PSVsOf(wr.Sig)
	case wr.ResetSig:
		m.bsf = wqe.BSFReset
		m.shape.Store(0)
		m.sigPSV = wqe.BlockPSVs{}
	}
	m.sentErrs = errs
	qp.fmCache = res.SmallFence
	start := qp.sq.pi
	last := start
	if res.PSVs > 0 {
		last = start + uint16(res.WQEBBs) - 1
	}
	qp.track(wr.WrID, WCUMR, res.WQEBBs, last)
	err = qp.ring(start, res, 1+res.PSVs)
	qp.g.exit()
	return err
}
