package mlx5

import (
	"fmt"

	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// Opcode is a send work request's operation (enum ibv_wr_opcode, and
// the mlx5 NOP). The zero Opcode is none: a work request must name one.
type Opcode uint8

// Send operations.
const (
	_              Opcode = iota
	OpSend                // SEND
	OpSendImm             // SEND with immediate data
	OpSendInv             // SEND that invalidates the responder's key InvalidateKey
	OpRDMAWrite           // RDMA WRITE
	OpRDMAWriteImm        // RDMA WRITE with immediate data (consumes a receive)
	OpRDMARead            // RDMA READ
	OpAtomicCAS           // atomic compare and swap of 8 bytes
	OpAtomicFAA           // atomic fetch and add of 8 bytes
	OpLocalInv            // LOCAL_INV: invalidate the local key InvalidateKey
	OpNOP                 // a NOP WQE: completes, moves nothing
	numOpcodes
)

// opInfo is what an Opcode is: its mlx5 opcode, its completion's opcode,
// and the QP types it is allowed on.
type opInfo struct {
	name  string
	mlx5  uint8
	wc    WCOpcode
	types qpTypeSet
	slot  uint8 // what its completion reports beyond the common case (sqSlot.bits)
}

// qpTypeSet is a set of QP types, one bit each.
type qpTypeSet uint8

func (s qpTypeSet) has(t QPType) bool { return s&(1<<t) != 0 }

// A DCI takes RC's operations: libmlx5 44.0's mlx5_qp_fill_wr_pfns
// offers a DCI MLX5_SUPPORTED_SEND_OPS_FLAGS_DCI, which is the RC set.
const (
	onRC  = 1 << QPTypeRC
	onUC  = 1 << QPTypeUC
	onUD  = 1 << QPTypeUD
	onDCI = 1 << QPTypeDCI
)

var opcodes = [numOpcodes]opInfo{
	OpSend:         {"SEND", wqe.OpcodeSend, WCSend, onRC | onDCI | onUC | onUD, 0},
	OpSendImm:      {"SEND_IMM", wqe.OpcodeSendImm, WCSend, onRC | onDCI | onUC | onUD, slotImm},
	OpSendInv:      {"SEND_INV", wqe.OpcodeSendInval, WCSend, onRC | onDCI, 0},
	OpRDMAWrite:    {"RDMA_WRITE", wqe.OpcodeRDMAWrite, WCRDMAWrite, onRC | onDCI | onUC, 0},
	OpRDMAWriteImm: {"RDMA_WRITE_IMM", wqe.OpcodeRDMAWriteImm, WCRDMAWrite, onRC | onDCI | onUC, slotImm},
	OpRDMARead:     {"RDMA_READ", wqe.OpcodeRDMARead, WCRDMARead, onRC | onDCI, slotByteCount},
	OpAtomicCAS:    {"ATOMIC_CAS", wqe.OpcodeAtomicCS, WCCompSwap, onRC | onDCI, slotAtomic},
	OpAtomicFAA:    {"ATOMIC_FAA", wqe.OpcodeAtomicFA, WCFetchAdd, onRC | onDCI, slotAtomic},
	OpLocalInv:     {"LOCAL_INV", wqe.OpcodeUMR, WCLocalInv, onRC | onDCI | onUC, 0},
	OpNOP:          {"NOP", wqe.OpcodeNOP, WCNOP, onRC | onDCI | onUC | onUD, 0},
}

func (o Opcode) String() string {
	if o > 0 && o < numOpcodes {
		return opcodes[o].name
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

// SendWR is one send work request (struct ibv_send_wr, or one ibv_wr_*
// call with its setters).
type SendWR struct {
	WrID   uint64
	Opcode Opcode
	Flags  SendFlags // SendSignaled, SendFence, SendSolicited
	// Imm is the immediate data of OpSendImm and OpRDMAWriteImm, written
	// as ibv_send_wr.imm_data holds it: its big-endian bytes go on the
	// wire (pass the value after htobe32, as C callers do).
	Imm uint32
	// InvalidateKey is the key OpSendInv invalidates at the responder, or
	// OpLocalInv locally.
	InvalidateKey uint32
	// RemoteAddr and RKey name the peer's memory of RDMA and atomic
	// operations.
	RemoteAddr uint64
	RKey       uint32
	// Compare and SwapAdd are the operands of the atomics: OpAtomicCAS
	// swaps in SwapAdd if the remote 8 bytes equal Compare; OpAtomicFAA
	// adds SwapAdd. The old value lands in the (8-byte) SGE.
	Compare, SwapAdd uint64
	// SGL is the local memory: gathered for sends and writes, scattered
	// into by reads and atomics. Its lengths add up to at most the port's
	// max_msg_sz (1 GiB on ConnectX), a datagram's to the port's MTU; each
	// is less than 2^31 (SGE). An SGE may name an Mkey: with a signature
	// block, its addresses and lengths count the bytes of the wire domain
	// (the message's), whatever the memory layout's length; the same holds
	// for RemoteAddr through a peer's signature mkey. For example a 512-byte
	// layout with a T10-DIF wire signature sends 520 bytes with an SGE of
	// length 520, and a 516-byte layout with a CRC32 memory signature sends
	// 512 with an SGE of length 512.
	SGL []SGE
	// Inline, when it holds bytes, is copied into the WQE instead of an
	// SGL (ibv_wr_set_inline_data_list), up to the QP's MaxInlineData.
	Inline [][]byte
	// AH, RemoteQPN and QKey address a send on a UD QP.
	//
	// On a DCI, AH, RemoteQPN and DCAccessKey are the DC address every work
	// request but OpLocalInv and OpNOP needs (mlx5dv_wr_set_dc_addr): the
	// AH that reaches the DCT's port, the DCT's number (its QP.QPN, 24
	// bits) and its access key (the DCT's QPOptions.DCAccessKey). StreamID
	// is the DCI stream channel the work request runs on
	// (mlx5dv_wr_set_dc_addr_stream; 0, the default, is
	// mlx5dv_wr_set_dc_addr's): below 2^LogConcurrent of the DCI's
	// QPOptions.DCIStreams, and 0 on a DCI without streams. An error on a
	// stream flushes that stream's work only, and QP.ResetDCIStream brings
	// it back. A DCI work request without an AH, with an AH of another
	// context, with a DCT number over 24 bits or with a stream the DCI
	// does not have is refused with ErrInvalid before anything is written
	// (libmlx5 checks none of these: docs/MLX5.md); a closed AH, as on a
	// UD QP, with ErrClosed.
	// LOCAL_INV and NOP on a DCI take no DC address and run on stream 0,
	// as libmlx5 builds LOCAL_INV. Other QPs take StreamID 0 only.
	AH          *AH
	RemoteQPN   uint32
	QKey        uint32
	DCAccessKey uint64
	StreamID    uint16
}

// PostSend posts one send work request and rings the doorbell: a batch
// of one. It does not allocate or make a system call; one goroutine at a
// time may post on a QP.
func (qp *QP) PostSend(wr *SendWR) error {
	// A work request that post writes goes without a batch: Begin, Add
	// and Commit's bookkeeping is for rolling back several. The QP's
	// batch, not open, is post's scratch: its limit, the doorbell word it
	// notes and its count. Add takes wr by post or not at all (its
	// general path does nothing in a batch that is not open); then the
	// batch of one below says why.
	// One poster at a time (the doc above): it enters the guard as a
	// CQ's poller does (enterOne), with one locked instruction, where
	// enter and exit make two.
	if qp != nil && !qp.batch.open && qp.g.enterOne() {
		b := &qp.batch
		b.qp, b.limit, b.ready, b.n = qp, qp.sq.limit(), true, 0
		b.Add(wr)
		b.ready = false
		if b.n == 1 {
			qp.sq.sync.publish()
			err := qp.sq.ringDoorbell(b.lastDB, 1)
			qp.g.exitOne()
			if err != nil {
				return qp.ringErr(err)
			}
			return nil
		}
		qp.g.exitOne()
	}
	return qp.Begin().Add(wr).Commit()
}

// PostSendList posts the work requests in order with one doorbell, all or
// none: if one is invalid or does not fit, nothing is posted and the error
// names it (ibv_post_send posts those before the bad one; a batch is all
// or nothing).
func (qp *QP) PostSendList(wrs []SendWR) error {
	b := qp.Begin()
	for i := range wrs {
		b.Add(&wrs[i])
	}
	return b.Commit()
}

// RecvWR is one receive work request (struct ibv_recv_wr): where an
// incoming SEND (or the immediate of an RDMA WRITE) lands.
type RecvWR struct {
	WrID uint64
	SGL  []SGE
}

// PostRecv posts one receive work request and writes the receive
// doorbell record.
func (qp *QP) PostRecv(wrID uint64, sgl []SGE) error {
	wr := [1]RecvWR{{WrID: wrID, SGL: sgl}}
	return qp.PostRecvList(wr[:])
}

// PostRecvList posts the receive work requests in order and writes the
// receive doorbell record once, all or none: a list with an invalid work
// request, or more than the queue has room for, posts nothing and the
// error names the work request (ibv_post_recv posts those before it). An
// SGE of 2^31 bytes or more is found as the list is written (a full queue
// is reported first): the WQEs written are zeroed again.
func (qp *QP) PostRecvList(wrs []RecvWR) error {
	const op = postRecv
	if qp == nil || len(qp.rq.wrID) == 0 {
		return qp.noRecvQueue()
	}
	n := len(qp.rq.wrID)
	for i := range wrs {
		if len(wrs[i].SGL) > qp.rq.maxSGE {
			return recvErr(postOpNames[op], qp.name, "queue", i, &wrs[i], qp.rq.maxSGE, wqe.ErrTooManySGEs)
		}
	}
	// The SGEs' lengths are checked as they are written, in one pass
	// (a check before the writes costs the single receive 5%): a list
	// with one too long for a data segment is zeroed again and refused.
	if !qp.g.enter() {
		return qp.refused(op)
	}
	if int(qp.rq.pi-uint16(qp.rq.tail.Load()))+len(wrs) > n {
		qp.g.exit()
		if len(wrs) == 1 {
			return qp.errs.full[op]
		}
		return &Error{Op: postOpNames[op], Obj: qp.name, Err: fmt.Errorf("%d work requests: %w", len(wrs), ErrQueueFull)}
	}
	pi := qp.rq.pi
	for i := range wrs {
		j := int(pi) & (n - 1)
		// The stride and the SGE count are checked (above, and at create).
		if !wqe.WriteRecv(qp.rq.ring[j*qp.rq.stride:(j+1)*qp.rq.stride], wqeSGL(wrs[i].SGL)) {
			for k := qp.rq.pi; k != pi+1; k++ {
				j := int(k) & (n - 1)
				clear(qp.rq.ring[j*qp.rq.stride : (j+1)*qp.rq.stride])
			}
			qp.g.exit()
			return recvErr(postOpNames[op], qp.name, "queue", i, &wrs[i], qp.rq.maxSGE, wqe.ErrSGELength)
		}
		qp.rq.wrID[j] = wrs[i].WrID
		pi++
	}
	if len(wrs) > 0 {
		qp.rq.pi = pi
		qp.rq.sync.publish()
		qp.dbRQ.Ring(pi)
	}
	qp.g.exit()
	return nil
}

// recvErr is the error of receive work request i of a list: more SGEs
// than the queue (named so) takes (wqe.ErrTooManySGEs), or one too long
// for a data segment (wqe.ErrSGELength).
func recvErr(op, obj, queue string, i int, wr *RecvWR, maxSGE int, err error) error {
	if err == wqe.ErrTooManySGEs {
		return invalid(op, obj, "work request %d (wr_id %#x): %d SGEs, the %s takes %d", i, wr.WrID, len(wr.SGL), queue, maxSGE)
	}
	return &Error{Op: op, Obj: obj, Err: &reasonError{msg: fmt.Sprintf("work request %d (wr_id %#x): %v", i, wr.WrID, err), errs: []error{ErrInvalid, unix.EINVAL, err}}}
}

// noRecvQueue is PostRecvList's error for a QP without a receive queue:
// a nil QP, one CreateQP did not make, a closed one (none has a receive
// queue then), or one made without (MaxRecvWR 0, or an SRQ).
func (qp *QP) noRecvQueue() error {
	const op = postRecv
	if qp == nil || !qp.g.opened() || qp.g.closed() {
		return qp.refused(op)
	}
	return invalid(postOpNames[op], qp.name, "the QP has no receive queue")
}

// MkeyConfigureWR configures an Mkey (mlx5dv_wr_mkey_configure with its
// setters): its access rights, its layout and, for a signature mkey, its
// signature block.
type MkeyConfigureWR struct {
	WrID  uint64
	Mkey  *Mkey
	Flags SendFlags // SendInline is implied
	// Access sets the access rights (mlx5dv_wr_set_mkey_access_flags)
	// when SetAccess: local write and the remote rights.
	SetAccess bool
	Access    AccessFlags
	// List is the layout (mlx5dv_wr_set_mkey_layout_list): the mkey's
	// address space, from 0, is these pieces of memory one after another.
	List []KLM
	// Interleaved and RepeatCount are the other layout
	// (mlx5dv_wr_set_mkey_layout_interleaved).
	Interleaved []RepeatEntry
	RepeatCount uint32
	// Sig is the signature block (mlx5dv_wr_set_mkey_sig_block); ResetSig
	// removes it (MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR).
	Sig      *sig.BlockAttr
	ResetSig bool
	// Crypto sets the mkey's crypto (mlx5dv_wr_set_mkey_crypto); the mkey
	// must have been created with MkeyOptions.Crypto.
	Crypto *CryptoAttr
}

// PostMkeyConfigure posts an mkey configure work request and rings the
// doorbell: a batch of one (see Batch.AddMkeyConfigure).
func (qp *QP) PostMkeyConfigure(wr *MkeyConfigureWR) error {
	return qp.Begin().AddMkeyConfigure(wr).Commit()
}
