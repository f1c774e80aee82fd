package mlx5

import (
	"fmt"
	"math/bits"

	"github.com/mlx5go/mlx5go/wqe"
)

// Queue sizing as libmlx5 44.0 does it (providers/mlx5 verbs.c:
// _sq_overhead, mlx5_calc_send_wqe, mlx5_calc_sq_size, mlx5_calc_rcv_wqe,
// mlx5_calc_rq_size), so that a QP made here has the geometry and the
// granted capabilities a C program's would (the oracle's create and query
// records pin them).

// OpcodeSet is a set of send operations a QP will post
// (IBV_QP_INIT_ATTR_SEND_OPS_FLAGS): it sizes the largest WQE.
type OpcodeSet uint32

// Opcodes returns the set of the given operations.
func Opcodes(ops ...Opcode) OpcodeSet {
	var s OpcodeSet
	for _, o := range ops {
		s |= 1 << o
	}
	return s
}

func (s OpcodeSet) has(ops ...Opcode) bool {
	for _, o := range ops {
		if s&(1<<o) != 0 {
			return true
		}
	}
	return false
}

// defaultOps are the operations libmlx5 sizes a QP for when the caller
// names none (sq_overhead without send_ops_flags).
func defaultOps(t QPType) OpcodeSet {
	if t == QPTypeUD {
		return Opcodes(OpSend, OpSendImm)
	}
	return Opcodes(OpSend, OpSendInv, OpSendImm, OpRDMAWrite, OpRDMAWriteImm, OpRDMARead, OpAtomicCAS, OpAtomicFAA, OpLocalInv)
}

// Segment sizes the overheads add up (mlx5dv.h).
const (
	umrCtrlSegSize  = 48 // struct mlx5_wqe_umr_ctrl_seg
	mkcSegSize      = 64 // struct mlx5_wqe_mkey_context_seg
	datagramSegSize = 48 // struct mlx5_wqe_datagram_seg
)

// sqOverhead is the bytes of a send WQE before its data (_sq_overhead):
// the largest control-and-address part of the operations, plus the
// transport's segment.
func sqOverhead(t QPType, ops OpcodeSet) (int, error) {
	size := wqe.CtrlSegSize
	if ops.has(OpRDMAWrite, OpRDMAWriteImm, OpRDMARead) {
		size = max(size, wqe.CtrlSegSize+raddrSegSize)
	}
	if ops.has(OpAtomicCAS, OpAtomicFAA) {
		size = max(size, wqe.CtrlSegSize+raddrSegSize+atomicSegSize)
	}
	if ops.has(OpLocalInv) {
		size = max(size, wqe.CtrlSegSize+umrCtrlSegSize+mkcSegSize+64)
	}
	switch t {
	case QPTypeRC, QPTypeUC:
	case QPTypeUD, QPTypeDCI:
		size += datagramSegSize
	default:
		return 0, fmt.Errorf("%v QPs have no send queue", t)
	}
	return size, nil
}

// deviceLimits are the context's limits the sizing checks
// (mlx5_ib_alloc_ucontext_resp).
type deviceLimits struct {
	maxSQDesc, maxRQDesc int // max_sq_desc_sz, max_rq_desc_sz: bytes of a WQE
	maxSendWQEBB         int // max_send_wqebb
	maxRecvWR            int // max_recv_wr
}

// sqGeometry is a send queue's size and what libmlx5 grants.
type sqGeometry struct {
	wqeSize   int // bytes of the largest WQE, whole WQEBBs
	wqeCnt    int // WQEBBs in the ring
	maxPost   int // granted max_send_wr: work requests of wqeSize that fit
	maxInline int // granted max_inline_data
	maxSGE    int
}

// sqSize is mlx5_calc_sq_size for maxWR work requests of up to maxSGE SGEs
// or maxInline inline bytes of the operations ops. Every size is checked against the device's limits before any
// arithmetic is done with it: none can overflow.
func sqSize(lim *deviceLimits, t QPType, ops OpcodeSet, maxWR, maxSGE, maxInline int) (sqGeometry, error) {
	var g sqGeometry
	switch {
	case maxWR < 0 || maxSGE < 0 || maxInline < 0:
		return g, fmt.Errorf("%d send work requests of %d SGEs or %d inline bytes", maxWR, maxSGE, maxInline)
	case maxWR == 0:
		return g, nil
	case maxInline > lim.maxSQDesc:
		return g, fmt.Errorf("%d inline bytes: a WQE takes at most %d bytes", maxInline, lim.maxSQDesc)
	}
	over, err := sqOverhead(t, ops)
	if err != nil {
		return g, err
	}
	inl := 0
	if maxInline > 0 {
		inl = over + align(inlineHdrSize+maxInline, 16)
	}
	if maxSGE > (lim.maxSQDesc-over)/dataSegSize {
		return g, fmt.Errorf("%d send SGEs: a WQE takes at most %d", maxSGE, (lim.maxSQDesc-over)/dataSegSize)
	}
	size := max(over+maxSGE*dataSegSize, inl)
	if size > lim.maxSQDesc {
		return g, fmt.Errorf("a WQE of %d bytes: the device takes at most %d (fewer SGEs or less inline data)", size, lim.maxSQDesc)
	}
	g.wqeSize = align(size, wqe.WQEBB)
	if maxWR > 0x7fffffff/max(lim.maxSQDesc, 1) {
		return g, fmt.Errorf("%d send work requests", maxWR)
	}
	ring := roundPow2(maxWR * g.wqeSize)
	g.wqeCnt = ring / wqe.WQEBB
	if g.wqeCnt > lim.maxSendWQEBB {
		return g, fmt.Errorf("%d send work requests of %d bytes: a send queue holds at most %d WQEBBs", maxWR, g.wqeSize, lim.maxSendWQEBB)
	}
	g.maxInline = g.wqeSize - over - inlineHdrSize
	g.maxPost = ring / g.wqeSize
	g.maxSGE = maxSGE
	return g, nil
}

// rqGeometry is a receive queue's size and what libmlx5 grants.
type rqGeometry struct {
	wqeCnt, wqeShift int
	maxPost, maxSGE  int
}

// rqSize is mlx5_calc_rq_size (no WQE signature): receive WQEs of
// maxSGE data segments rounded up to a power of two, at least a WQEBB of
// them. Both sizes are checked against the device's limits before any
// arithmetic (libmlx5's mlx5_calc_rcv_wqe multiplies first, in 32 bits:
// its check that the WQE fits max_rq_desc_sz is the same for every count
// whose product does not wrap).
func rqSize(lim *deviceLimits, maxWR, maxSGE int) (rqGeometry, error) {
	var g rqGeometry
	switch {
	case maxWR < 0 || maxSGE < 0:
		return g, fmt.Errorf("%d receive work requests of %d SGEs", maxWR, maxSGE)
	case maxWR == 0:
		return g, nil
	case maxWR > lim.maxRecvWR:
		return g, fmt.Errorf("%d receive work requests: the device takes at most %d", maxWR, lim.maxRecvWR)
	case maxSGE > lim.maxRQDesc/dataSegSize:
		return g, fmt.Errorf("%d receive SGEs: a receive WQE takes at most %d", maxSGE, lim.maxRQDesc/dataSegSize)
	}
	size := roundPow2(dataSegSize * max(maxSGE, 1))
	ring := max(roundPow2(maxWR)*size, wqe.WQEBB)
	g.wqeCnt = ring / size
	g.wqeShift = bits.Len(uint(size - 1))
	g.maxPost = 1 << bits.Len(uint(ring/size-1))
	g.maxSGE = size / dataSegSize
	return g, nil
}

func align(n, a int) int { return (n + a - 1) &^ (a - 1) }

// An mkey configure carries its translations and a new signature block's
// BSF as the UMR's inline data, which libmlx5 bounds by what the QP
// granted: max_inline_data + 4 bytes, the inline segment's header
// included (rdma-core 44.0 providers/mlx5/qp.c). mlx5_send_wr_set_mkey_layout
// refuses more layout entries than that holds, 16 bytes each (an
// interleaved layout's repeat block takes one), and umr_wqe_finalize
// translations and a BSF that together exceed it, both with ENOMEM.
// The QP's WQE size is libmlx5's for its caps alone: mkey configures add
// nothing to it (_sq_overhead), so a QP that is to configure more must
// ask for more inline data (mlx5dv_wr_mkey_configure(3): "Default WQE
// size can fit only 4 SGE entries. To allow more the QP should be created
// with a larger WQE size ... using the max_inline_data attribute").

// umrFits reports whether a configure fits a QP that granted maxInline
// bytes of inline data: a layout of n entries (0: none), interleaved or a
// list, and bsf bytes of BSFs (wqe.MkeyConfigure.BSFBytes: a new
// signature block's, and a crypto mkey's crypto BSF).
func umrFits(maxInline, n int, interleaved bool, bsf int) bool {
	room := maxInline + inlineHdrSize
	xlat := n * wqe.KLMSegSize
	if interleaved {
		room -= wqe.KLMSegSize // the repeat block
		if n > 0 {
			xlat += wqe.KLMSegSize
		}
	}
	if n*wqe.KLMSegSize > room {
		return false
	}
	return bsf == 0 || align(xlat, wqe.WQEBB)+bsf <= maxInline+inlineHdrSize
}

// umrLargest is the WQEBBs of the largest mkey configure a QP that granted
// maxInline bytes of inline data takes: a UMR of its control segments and
// as many whole 64-byte blocks of translations and BSF as fit (no more
// than a WQE's 63 16-byte units), and a SET_PSV per domain.
func umrLargest(maxInline int) int {
	umr := wqe.CtrlSegSize + wqe.UMRCtrlSegSize + wqe.MkcSegSize + (maxInline+inlineHdrSize)&^(wqe.WQEBB-1)
	umr = min(umr, wqe.MaxDS*16)
	return (umr+wqe.WQEBB-1)/wqe.WQEBB + 2*psvWQEBBs
}

// umrInline is the inline data a QP must grant for mkey configures of
// lists of up to entries entries with a signature block and crypto: the
// translations and both BSFs, less the inline segment's header
// (QPOptions.MaxMkeyEntries).
func umrInline(entries int) int {
	return ((entries+3)&^3)*wqe.KLMSegSize + wqe.BSFSegSize + wqe.CryptoBSFSize - inlineHdrSize
}
