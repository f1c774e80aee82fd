package model

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

// CQE opcodes (op_own >> 4) and error syndromes, from include/linux/mlx5/
// cq.h (MLX5_CQE_*, MLX5_CQE_SYNDROME_*).
const (
	cqeReq        = 0
	cqeRespWRImm  = 1
	cqeRespSend   = 2
	cqeRespSendIm = 3
	cqeRespSendIn = 4
	cqeResizeCQ   = 5 // the last CQE of a resized CQ's old ring
	cqeSigErr     = 12
	cqeReqErr     = 13
	cqeRespErr    = 14

	SyndromeLocalLength      = 0x01
	SyndromeLocalQPOp        = 0x02
	SyndromeLocalProt        = 0x04
	SyndromeWRFlush          = 0x05
	SyndromeRemoteInvalReq   = 0x12
	SyndromeRemoteAccess     = 0x13
	SyndromeRemoteOp         = 0x14
	SyndromeTransportRetry   = 0x15
	SyndromeRNRRetryExceeded = 0x16
)

// CQ status values of cqc.status (MLX5_CQC_STATUS_*, mlx5_ifc.h).
const cqStatusOverflow = 0x9

// The 64-byte CQE layouts the model writes, as byte offsets. struct
// mlx5_cqe64 (mlx5dv.h and include/linux/mlx5/device.h) for completions,
// struct mlx5_err_cqe for errors (its srqn, s_wqe_opcode_qpn and
// wqe_counter sit where mlx5_cqe64 has srqn_uidx, sop_drop_qpn and
// wqe_counter), struct mlx5_sig_err_cqe for signature errors.
const (
	cqeFlagsRQPN   = 24 // flags_rqpn: the remote QP (responder CQEs)
	cqeSrqnUidx    = 32 // srqn_uidx: the QP's user_index
	cqeImmInval    = 36 // imm_inval_pkey
	cqeByteCnt     = 44 // byte_cnt
	cqeVendorSynd  = 54 // mlx5_err_cqe.vendor_err_synd
	cqeSyndrome    = 55 // mlx5_err_cqe.syndrome
	cqeSopDropQPN  = 56 // sop_drop_qpn: the send opcode (requester CQEs) << 24 | qpn
	cqeTimestamp   = 48 // timestamp (success CQEs of a CQ made for timestamps)
	cqeWQECounter  = 60 // wqe_counter
	cqeOpOwn       = 63 // op_own: opcode << 4 | owner
	sigCQEExpTrans = 16 // mlx5_sig_err_cqe.expected_trans_sig
	sigCQEActTrans = 20 // actual_trans_sig
	sigCQEExpRef   = 24 // expected_reftag
	sigCQEActRef   = 28 // actual_reftag
	sigCQESyndrome = 32 // syndrome
	sigCQESigType  = 34 // sig_type (libmlx5's mlx5_sigerr_cqe; reserved in the kernel's)
	sigCQEDomain   = 35 // domain
	sigCQEMkey     = 36 // mkey
	sigCQEOffset   = 40 // err_offset
	sigCQEQPN      = 56 // qpn
)

// cqe is one CQE being built.
type cqe [64]byte

func (c *cqe) put32(off int, v uint32) { binary.BigEndian.PutUint32(c[off:], v) }

// postCQE writes c as the next CQE of CQ cqn: all bytes but the last word
// first, then the last word (wqe_counter, signature, op_own with the
// owner bit) in one atomic store, so a driver that reads op_own first
// sees either the old CQE or the whole new one. The owner bit is the
// producer counter's wrap bit: (pi >> log_cq_size) & 1. A CQ without a
// buffer, or one that overran, takes nothing; an overrun (more CQEs
// outstanding than the CQ holds, by the consumer counter in its doorbell
// record) is a fault, the CQ's status becomes CQ_OVERFLOW, it raises one
// CQ_ERROR event (syndrome CQ_OVERRUN) and takes no more CQEs.
func (h *hca) postCQE(cqn uint32, c *cqe) {
	op := c[cqeOpOwn] >> 4
	h.postCQESol(cqn, c, op == cqeReqErr || op == cqeRespErr)
}

// postCQESol is postCQE for a CQE that is solicited (a receive of a
// message with the solicited event bit, or an error) or not: a CQ armed
// for solicited completions fires only for those (see arm.go).
func (h *hca) postCQESol(cqn uint32, c *cqe, solicited bool) {
	cq, ok := h.cqs[cqn]
	if !ok || cq.overrun {
		return
	}
	if cq.buf == nil {
		h.fault(cq.ctx, "CQ %#x: a CQE is due but the CQ has no UMEM buffer", cqn)
		return
	}
	logSize := prm.Cqc.LogCqSize.Get(cq.cqc)
	size := uint32(1) << logSize
	if cq.dbr != nil && prm.Cqc.Oi.Get(cq.cqc) == 0 {
		ci := load32(cq.dbr[0:4]) & 0xffffff
		if (cq.pi+1-ci)&0xffffff > size {
			h.fault(cq.ctx, "CQ %#x overran: producer counter %d, consumer counter %d, %d entries", cqn, cq.pi&0xffffff, ci, size)
			cq.overrun = true
			prm.Cqc.Status.Set(cq.cqc, cqStatusOverflow)
			h.cqError(cqn, cqErrorCQOverrun)
			return
		}
	}
	stride := uint64(64) << prm.Cqc.CqeSz.Get(cq.cqc)
	// A 128-byte CQE carries the 64-byte one in its second half.
	off := uint64(cq.pi&(size-1))*stride + stride - 64
	slot := cq.buf[off : off+64 : off+64]
	if cq.ib != nil && cq.ib.timestamp && c[cqeOpOwn]>>4 <= cqeRespSendIn {
		// A completion's time, on the free-running clock or, for a CQ
		// made with MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS (its QPs'
		// ts_format REAL_TIME), the real-time one (error CQEs have
		// their syndromes there).
		ts := h.clock.now()
		if cq.ib.realTime {
			ts = realTime()
		}
		binary.BigEndian.PutUint64(c[cqeTimestamp:], ts)
	}
	c[cqeOpOwn] = c[cqeOpOwn]&^1 | uint8(cq.pi>>logSize)&1
	copy(slot[:60], c[:60])
	store32(slot[60:64], c[60:64])
	cq.pi++
	prm.Cqc.ProducerCounter.Set(cq.cqc, uint64(cq.pi&0xffffff))
	if solicited {
		cq.solPI, cq.hasSol = cq.pi, true
	}
	h.cqWritten(cq, cqn, solicited)
}

// load32 reads a big-endian 32-bit word the driver writes, atomically when
// it is aligned.
func load32(b []byte) uint32 {
	_ = b[3]
	p := unsafe.Pointer(&b[0])
	if uintptr(p)%4 != 0 {
		return binary.BigEndian.Uint32(b)
	}
	var w [4]byte
	binary.NativeEndian.PutUint32(w[:], atomic.LoadUint32((*uint32)(p)))
	return binary.BigEndian.Uint32(w[:])
}

// store32 copies 4 bytes into b, atomically when b is aligned.
func store32(b, v []byte) {
	_ = b[3]
	p := unsafe.Pointer(&b[0])
	if uintptr(p)%4 != 0 {
		copy(b, v[:4])
		return
	}
	atomic.StoreUint32((*uint32)(p), binary.NativeEndian.Uint32(v))
}

// reqCQE is a requester completion of WQE w of q: the send opcode and the
// WQE's counter, byte_cnt for RDMA READ.
func (h *hca) reqCQE(q *qpObj, w *sendWQE, byteCnt uint32) {
	var c cqe
	c.put32(cqeSrqnUidx, uint32(prm.Qpc.UserIndex.Get(q.qpc)))
	c.put32(cqeByteCnt, byteCnt)
	c.put32(cqeSopDropQPN, uint32(w.opcode)<<24|q.qpn)
	binary.BigEndian.PutUint16(c[cqeWQECounter:], w.index)
	c[cqeOpOwn] = cqeReq << 4
	h.postCQE(q.sendCQ(), &c)
}

// errCQE is an error completion (struct mlx5_err_cqe) on cqn: REQ_ERR
// with the send opcode and WQE counter, or RESP_ERR with the receive
// WQE's counter. vendor_err_synd is 0: the firmware's vendor syndromes are
// not public.
func (h *hca) errCQE(q *qpObj, cqn uint32, op, syndrome, sop uint8, counter uint16) {
	var c cqe
	c.put32(cqeSrqnUidx, uint32(prm.Qpc.UserIndex.Get(q.qpc)))
	c[cqeSyndrome] = syndrome
	c.put32(cqeSopDropQPN, uint32(sop)<<24|q.qpn)
	binary.BigEndian.PutUint16(c[cqeWQECounter:], counter)
	c[cqeOpOwn] = op << 4
	h.postCQE(cqn, &c)
}

// respCQE is a responder completion of receive WQE counter of q for a
// message of byteCnt bytes from QP remote, with the flags of flags_rqpn
// above the QPN (a UD receive's GRH and network header type) and the
// solicited event bit of the message.
func (h *hca) respCQE(q *qpObj, op uint8, counter uint16, byteCnt, immInval, remote, flags uint32, solicited bool) {
	var c cqe
	c.put32(cqeFlagsRQPN, flags|remote&0xffffff)
	c.put32(cqeSrqnUidx, uint32(prm.Qpc.UserIndex.Get(q.qpc)))
	c.put32(cqeImmInval, immInval)
	c.put32(cqeByteCnt, byteCnt)
	c.put32(cqeSopDropQPN, q.qpn)
	binary.BigEndian.PutUint16(c[cqeWQECounter:], counter)
	c[cqeOpOwn] = op << 4
	h.postCQESol(q.recvCQ(), &c, solicited)
}

// sigErrCQE is a signature error CQE (struct mlx5_sig_err_cqe) for the
// check failure e found through mkey key by QP q, on cqn. The fields are
// what mlx5dv_mkey_check decodes into e (see sigErrFields).
func (h *hca) sigErrCQE(q *qpObj, cqn, key uint32, e sig.MkeyErr) {
	var c cqe
	putSigErr(&c, key, q.qpn, e)
	h.postCQE(cqn, &c)
}

// putSigErr fills a SIG_ERR CQE.
func putSigErr(c *cqe, key, qpn uint32, e sig.MkeyErr) {
	f := e.SigErrCQE()
	c.put32(sigCQEExpTrans, f.ExpectedTransSig)
	c.put32(sigCQEActTrans, f.ActualTransSig)
	c.put32(sigCQEExpRef, f.ExpectedRefTag)
	c.put32(sigCQEActRef, f.ActualRefTag)
	binary.BigEndian.PutUint16(c[sigCQESyndrome:], f.Syndrome)
	c[sigCQESigType] = f.SigType
	c[sigCQEDomain] = f.Domain
	c.put32(sigCQEMkey, key)
	binary.BigEndian.PutUint64(c[sigCQEOffset:], f.Offset)
	c.put32(sigCQEQPN, qpn)
	c[cqeOpOwn] = cqeSigErr << 4
}

func (q *qpObj) sendCQ() uint32 { return uint32(prm.Qpc.CqnSnd.Get(q.qpc)) }
func (q *qpObj) recvCQ() uint32 { return uint32(prm.Qpc.CqnRcv.Get(q.qpc)) }
