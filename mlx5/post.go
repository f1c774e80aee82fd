package mlx5

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
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

// ErrQueueFull is returned by a post when the queue has no room for the
// work request: poll completions first.
var ErrQueueFull = errors.New("mlx5: work queue full")

// room checks that n more WQEBBs fit in the send queue.
func (qp *QP) room(n int) error {
	if qp.dead.Load() {
		return ErrClosed
	}
	used := int(qp.sq.pi - uint16(qp.sq.tail.Load()))
	if used+n > len(qp.sq.wrID) {
		return ErrQueueFull
	}
	return nil
}

// PostSend posts one send work request and rings the doorbell. It does
// not allocate or make a system call; one goroutine at a time may post on
// a QP.
func (qp *QP) PostSend(wr *SendWR) error {
	wc, ok := wr.Opcode.completes()
	if !ok {
		return fmt.Errorf("mlx5: post send: opcode %#x", uint8(wr.Opcode))
	}
	if err := qp.room(qp.sq.maxWR); err != nil {
		return err
	}
	s := wqe.Send{QPN: qp.qpn, Opcode: uint8(wr.Opcode), Flags: wr.Flags, Imm: wr.Imm,
		RemoteAddr: wr.RemoteAddr, RKey: wr.RKey, SGL: wr.SGL, SmallFence: qp.fmCache, MaxSGE: qp.sq.maxSGE}
	res, err := wqe.BuildSend(qp.sq.ring, qp.sq.pi, len(qp.sq.wrID)-int(qp.sq.pi-uint16(qp.sq.tail.Load())), &s)
	if err != nil {
		return fmt.Errorf("mlx5: post send: %w", err)
	}
	qp.fmCache = res.SmallFence
	qp.track(wr.WrID, wc, res.WQEBBs)
	return qp.ring(qp.sq.pi-uint16(res.WQEBBs), res)
}

// track records the work request of wqebbs WQEBBs at the producer
// counter, in each of its WQEBBs (the CQE names the WQE that asked for it,
// which for an mkey configure may be its last), and advances the counter.
func (qp *QP) track(wrID uint64, op WCOpcode, wqebbs int) {
	mask := len(qp.sq.wrID) - 1
	next := qp.sq.pi + uint16(wqebbs)
	for j := qp.sq.pi; j != next; j++ {
		i := int(j) & mask
		qp.sq.wrID[i], qp.sq.op[i], qp.sq.next[i] = wrID, op, next
	}
	qp.sq.pi = next
}

// ring rings the send doorbell for the WQE at start: a BlueFlame copy when
// it is a single WQE of more than one segment that fits, as libmlx5 does,
// else the control segment's first 8 bytes.
func (qp *QP) ring(start uint16, res wqe.Result) error {
	ring := qp.sq.ring
	bbs := len(ring) / wqe.WQEBB
	// The last WQE: the work request's only one, or its last SET_PSV.
	last := start
	if res.PSVs > 0 {
		last = qp.sq.pi - 1
	}
	i := int(last) & (bbs - 1)
	ds := int(res.DS)
	n := (ds*16 + wqe.WQEBB - 1) / wqe.WQEBB
	if qp.dbSQ.UseBlueFlame(1, ds) {
		end := i + n
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
	if qp.dead.Load() {
		return fmt.Errorf("mlx5: post recv: %w", ErrClosed)
	}
	n := len(qp.rq.wrID)
	if n == 0 {
		return fmt.Errorf("mlx5: post recv: QP %#x has no receive queue", qp.qpn)
	}
	if len(sgl) > qp.rq.maxSGE {
		return fmt.Errorf("mlx5: post recv: %d SGEs, the queue takes %d", len(sgl), qp.rq.maxSGE)
	}
	if int(qp.rq.pi-uint16(qp.rq.tail.Load())) >= n {
		return ErrQueueFull
	}
	i := int(qp.rq.pi) & (n - 1)
	if err := wqe.PutRecv(qp.rq.ring[i*qp.rq.stride:(i+1)*qp.rq.stride], sgl); err != nil {
		return fmt.Errorf("mlx5: post recv: %w", err)
	}
	qp.rq.wrID[i] = wrID
	qp.rq.pi++
	qp.dbRQ.Ring(qp.rq.pi)
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

// PostMkeyConfigure posts an mkey configure work request (a UMR WQE, and a
// SET_PSV WQE per signature domain) and rings the doorbell. Its completion
// has opcode WCUMR.
func (qp *QP) PostMkeyConfigure(wr *MkeyConfigureWR) error {
	m := wr.Mkey
	if m == nil || m.c != qp.c {
		return fmt.Errorf("mlx5: post mkey configure: no mkey, or an mkey of another context")
	}
	if err := qp.room(qp.sq.maxWR); err != nil {
		return err
	}
	mem, wire := m.PSVs()
	c := wqe.MkeyConfigure{QPN: qp.qpn, Mkey: m.LKey, Flags: wr.Flags | wqe.SendInline, SmallFence: qp.fmCache,
		SetAccess: wr.SetAccess, Access: wr.Access, List: wr.List, Interleaved: wr.Interleaved, RepeatCount: wr.RepeatCount,
		MaxEntries: m.maxEntries, Sig: wr.Sig, MemPSV: mem, WirePSV: wire, SigMkey: m.sigMkey, BSF: m.bsf,
		ResetSig: wr.ResetSig, UpdateSigErr: m.updateSigErr, SigErrs: m.sigErrs.Load()}
	res, err := wqe.BuildMkeyConfigure(qp.sq.ring, qp.sq.pi, len(qp.sq.wrID)-int(qp.sq.pi-uint16(qp.sq.tail.Load())), &c)
	if err != nil {
		return fmt.Errorf("mlx5: post mkey configure: %w", err)
	}
	switch {
	case wr.Sig != nil:
		m.bsf = wqe.BSFSet
		m.shape.Store(uint32(shapeOf(wr.Sig)))
	case wr.ResetSig:
		m.bsf = wqe.BSFReset
		m.shape.Store(0)
	}
	m.updateSigErr = false
	qp.fmCache = res.SmallFence
	start := qp.sq.pi
	qp.track(wr.WrID, WCUMR, res.WQEBBs)
	return qp.ring(start, res)
}
