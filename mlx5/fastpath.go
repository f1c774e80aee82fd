package mlx5

import (
	"unsafe"

	"github.com/mlx5go/mlx5go/wqe"
)

// The post path's fast lane (Batch.Add's body): the work request
// storage and RPC code posts most, a SEND, SEND with immediate or
// invalidate, RDMA WRITE (with immediate) or RDMA READ of a gather list
// on an RC or UC QP, written with the segment words of package wqe in
// 8-byte stores, checked as BuildSend checks it, without the general
// builder's layout of every operation and QP type. A work request it
// does not take (inline data, a UD, DC or atomic work request,
// LOCAL_INV, NOP, a WQE that crosses the ring's end) or cannot post
// (invalid, or no room: the general path then says why) goes the
// general way, which writes the same bytes (TestFastPathSameWQEs,
// FuzzFastPath).

// fastInfo is what the fast lane needs of an opcode: the table below
// says which opcodes it takes and how their WQE is laid out; init fills in
// the rest from opcodes, so that the two paths share their facts.
type fastInfo struct {
	fast   bool  // the fast lane takes the opcode
	remote uint8 // 1: a remote address segment
	imm    uint8 // the ctrl's imm: fastImm (SendWR.Imm) or fastInv (InvalidateKey)
	// immMask and invMask pick the ctrl's imm: SendWR.Imm&immMask |
	// SendWR.InvalidateKey&invMask.
	immMask, invMask uint32
	ctrl             uint64 // the opcode in the ctrl's first word (wqe.CtrlWords of opcodes[op].mlx5)
	bits             uint8  // the slot's bits (opcodes[op].slot)
	wc               WCOpcode
}

const (
	fastImm = 1
	fastInv = 2
)

// fastOps is indexed by the opcode's low 4 bits (the opcodes of the fast
// lane are below 16: the index needs no bounds check).
var fastOps = [16]fastInfo{
	OpSend:         {fast: true},
	OpSendImm:      {fast: true, imm: fastImm},
	OpSendInv:      {fast: true, imm: fastInv},
	OpRDMAWrite:    {fast: true, remote: 1},
	OpRDMAWriteImm: {fast: true, remote: 1, imm: fastImm},
	OpRDMARead:     {fast: true, remote: 1},
}

// fastFlags is the fast lane's fm_ce_se part of a ctrl segment's second
// word (wqe.CtrlWords's w1 with imm 0), by the flags' low three bits and
// the small fence (fmIndex).
var fastFlags [16]uint64

// fmIndex is the small fence's part of a fastFlags index.
func fmIndex(small bool) wqe.SendFlags {
	if small {
		return 8
	}
	return 0
}

func init() {
	for i := range fastFlags {
		_, fastFlags[i] = wqe.CtrlWords(0, 0, 0, 0, wqe.CtrlFlags(wqe.SendFlags(i&7), i&8 != 0), 0)
	}
	for i := range fastOps {
		if f := &fastOps[i]; f.fast {
			o := &opcodes[i]
			f.ctrl, _ = wqe.CtrlWords(o.mlx5, 0, 0, 0, 0, 0)
			f.bits, f.wc = o.slot, o.wc // what its completion reports, as the general path records it
			switch f.imm {
			case fastImm:
				f.immMask = ^uint32(0)
			case fastInv:
				f.invMask = ^uint32(0)
			}
		}
	}
}

// initFast sets the opcodes the QP posts through the fast lane: on an RC
// or UC QP with a send queue that takes an SGE, those of fastOps its type
// allows. Called once the QP's send queue, type and maximum message are
// set.
func (qp *QP) initFast() {
	qp.fast = 0
	qp.ctrlQPN, _ = wqe.CtrlWords(0, 0, qp.qpn, 0, 0, 0)
	// A WQE of at most wqe.MaxDS segments, and no larger than the
	// largest the QP was created for (the general path's check).
	qp.fastMaxDS = min(wqe.MaxDS, qp.maxWQE*(wqe.WQEBB/16))
	// The longest single SGE: it fits a data segment and the message.
	qp.fastMaxLen = min(qp.sq.maxMsg, wqe.MaxSGELength)
	// The lane's single-SGE case takes for granted that one SGE is
	// allowed and that its WQE (at most 3 segments) is one the QP takes.
	if qp.typ != QPTypeRC && qp.typ != QPTypeUC || len(qp.sq.slots) == 0 || qp.sq.maxMsg == 0 ||
		len(qp.sq.ring) != len(qp.sq.slots)*wqe.WQEBB || len(qp.sq.slots)&(len(qp.sq.slots)-1) != 0 ||
		qp.sq.maxSGE < 1 || qp.fastMaxDS < 3 {
		return
	}
	for op := range numOpcodes {
		if fastOps[op].fast && opcodes[op].types.has(qp.typ) {
			qp.fast |= 1 << op
		}
	}
}

// Add builds one send work request into the batch.
func (b *Batch) Add(wr *SendWR) *Batch {
	// Add's body is the fast lane (PostSend's too): if the batch is
	// ready and wr takes the lane, is valid and its WQE fits below the
	// batch's limit, it writes wr's WQE at the producer counter, records
	// it, advances the counter and notes its doorbell word in the batch;
	// else it writes nothing and hands wr to the general path, add (which
	// then says why). A gather list of other than one SGE goes to
	// addGather.
	if b == nil || !b.ready || wr == nil {
		return b.add(wr)
	}
	qp := b.qp
	// The lane's opcodes are below 16.
	op := wr.Opcode
	if op >= 16 || qp.fast>>(op&15)&1 == 0 || len(wr.Inline)|int(wr.StreamID) != 0 {
		return b.add(wr)
	}
	info := &fastOps[op&15]
	sgl := wr.SGL
	if len(sgl) != 1 {
		return b.addGather(wr, info)
	}
	// The common case, one SGE. It is allowed (initFast); its WQE is at
	// most 3 segments, one WQEBB, which does not cross the ring's end;
	// fastMaxLen covers both the data segment's 31 bits and the
	// message's limit.
	pi := qp.sq.pi
	l0 := sgl[0].Length
	if l0 > qp.fastMaxLen || b.limit == pi {
		return b.add(wr)
	}
	n := 1 + int(info.remote) // the WQE's 16-byte segments
	if l0 != 0 {
		n++
	}
	// The WQEBB at the counter's slot (initFast made sure the ring
	// holds a WQEBB per slot), in 8-byte stores. (addGather writes the
	// same head: a call here would cost more than the lines.)
	slot := int(pi) & (len(qp.sq.slots) - 1)
	w := unsafe.Add(unsafe.Pointer(unsafe.SliceData(qp.sq.ring)), slot*wqe.WQEBB)
	imm := wr.Imm&info.immMask | wr.InvalidateKey&info.invMask
	// wqe.CtrlWords, with the opcode's and the QP's parts made ahead.
	db := uint64(pi)<<40 | info.ctrl | qp.ctrlQPN | uint64(n)
	w1 := fastFlags[wqe.SendFlags(wr.Flags)&7|fmIndex(qp.fmCache)] | uint64(imm)
	putSeg(w, 0, db, w1)
	off := uintptr(wqe.CtrlSegSize)
	if info.remote != 0 {
		r0, r1 := wqe.RaddrWords(wr.RemoteAddr, wr.RKey)
		putSeg(w, off, r0, r1)
		off += wqe.RaddrSegSize
	}
	if l0 != 0 {
		d0, d1 := wqe.DataWords(wqe.SGE(sgl[0]))
		putSeg(w, off, d0, d1)
		off += wqe.DataSegSize
	}
	// The rest of the WQEBB: one to three segments of zeros.
	switch off {
	case 16:
		zeroSeg(w, 16)
		fallthrough
	case 32:
		zeroSeg(w, 32)
	}
	zeroSeg(w, 48)
	qp.fmCache = false
	next := pi + 1
	// track's record.
	sl := (*sqSlot)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(qp.sq.slots)), uintptr(slot)*unsafe.Sizeof(sqSlot{})))
	sl.wrID, sl.next, sl.last, sl.op, sl.bits = wr.WrID, next, pi, info.wc, info.bits
	qp.sq.pi = next
	b.lastDB = db
	b.n++
	return b
}

// addGather is the fast lane for a gather list of other than one SGE: of
// any length up to the QP's, with zero-length SGEs left out, a WQE of
// several WQEBBs that does not cross the ring's end. Not inlined in Add:
// the single SGE's lane keeps its registers.
//
//go:noinline
func (b *Batch) addGather(wr *SendWR, info *fastInfo) *Batch {
	qp := b.qp
	sgl := wr.SGL
	n, ok := qp.fastGather(sgl)
	if !ok {
		return b.add(wr)
	}
	n += 1 + int(info.remote)
	bbs := (n + 3) >> 2
	pi := qp.sq.pi
	slot := int(pi) & (len(qp.sq.slots) - 1)
	// Too large for the QP, no room, or across the ring's end (the
	// general path writes that in two pieces).
	if n > qp.fastMaxDS || bbs > int(b.limit-pi) || slot+bbs > len(qp.sq.slots) {
		return b.add(wr)
	}
	// The WQE's bytes, slot*64 to (slot+bbs)*64 of the ring (checked
	// above), with Add's head.
	w := unsafe.Add(unsafe.Pointer(unsafe.SliceData(qp.sq.ring)), slot*wqe.WQEBB)
	imm := wr.Imm&info.immMask | wr.InvalidateKey&info.invMask
	db := uint64(pi)<<40 | info.ctrl | qp.ctrlQPN | uint64(n)
	_, w1 := wqe.CtrlWords(0, 0, 0, 0, wqe.CtrlFlags(wqe.SendFlags(wr.Flags), qp.fmCache), imm)
	putSeg(w, 0, db, w1)
	off := uintptr(wqe.CtrlSegSize)
	if info.remote != 0 {
		r0, r1 := wqe.RaddrWords(wr.RemoteAddr, wr.RKey)
		putSeg(w, off, r0, r1)
		off += wqe.RaddrSegSize
	}
	for i := range sgl {
		if sgl[i].Length != 0 {
			d0, d1 := wqe.DataWords(wqe.SGE(sgl[i]))
			putSeg(w, off, d0, d1)
			off += wqe.DataSegSize
		}
	}
	// The rest of the last WQEBB: up to three segments of zeros.
	for ; off < uintptr(bbs*wqe.WQEBB); off += 16 {
		zeroSeg(w, off)
	}
	qp.fmCache = false
	qp.track(wr.WrID, info.wc, bbs, pi, info.bits)
	b.lastDB = db
	b.n++
	return b
}

// fastGather is the fast lane's check of a gather list of other than one
// SGE: the data segments it takes (an SGE of length 0 takes none), and
// false for more SGEs than the QP takes, an SGE of 2^31 bytes or more or
// a message longer than the QP sends (the general path refuses them).
func (qp *QP) fastGather(sgl []SGE) (n int, ok bool) {
	var total uint64
	var or uint32
	for i := range sgl {
		l := sgl[i].Length
		if l != 0 {
			n++
		}
		total += uint64(l)
		or |= l
	}
	return n, len(sgl) <= qp.sq.maxSGE && or&wqe.InlineSeg == 0 && total <= uint64(qp.sq.maxMsg)
}

// putSeg writes the 16-byte segment of words w0 and w1 (wqe.PutWords) at
// w+off, which the caller has checked to be in the ring.
func putSeg(w unsafe.Pointer, off uintptr, w0, w1 uint64) {
	wqe.PutWords((*[16]byte)(unsafe.Add(w, off))[:], w0, w1)
}

// zeroSeg writes a 16-byte segment of zeros at w+off, which the caller
// has checked to be in the ring.
func zeroSeg(w unsafe.Pointer, off uintptr) {
	*(*[2]uint64)(unsafe.Add(w, off)) = [2]uint64{}
}
