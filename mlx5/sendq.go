package mlx5

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/wqe"
)

// sendQueue is a QP's send side: the ring and its per-WQEBB records, the
// producer and consumer counters, the limits a work request is checked
// against, and the doorbell. Its post (Batch.Add's body) writes the
// common work request, ringDoorbell rings for what was posted, and
// retire (sendq_retire.go) frees what completed. The QP keeps the lifecycle and the verbs around it.
type sendQueue struct {
	ring  wqe.Ring
	slots []sqSlot
	pi    uint16 // producer counter, in WQEBBs (the poster's)
	// fm: the last WQE asked the next one for a small fence (libmlx5's
	// fm_cache).
	fm bool
	// av is the address vector every post's WQE carries: avNone on RC
	// and UC, avUD, avDC.
	av uint8
	// maxStream is the last stream channel a work request may name
	// (SendWR.StreamID): 2^LogConcurrent - 1 on a DCI made with
	// DCIStreams, else 0.
	maxStream uint16
	// anyHeads are the control segments' heads of the opcodes post
	// writes, by opcode: those of postOps the QP's type allows (setPost);
	// 0 for the others (no head is 0: no opcode post writes is).
	// heads are anyHeads on a QP whose WQEs have no address vector (the
	// common case's), all 0 on the others.
	heads, anyHeads [16]wqe.CtrlHead
	// maxDS is the largest WQE post writes, in 16-byte segments: what a
	// control segment can describe, and no larger than maxWQE.
	maxDS int
	// maxLen is the longest single SGE post takes: the shorter of the
	// longest message and a data segment's limit; maxTotal the longest
	// message (maxMsg, or the IB spec's 2^31 where it is 0, as for
	// wqe.Send).
	maxLen   uint32
	maxTotal uint64
	// maxWQE is the WQEBBs of the largest work request the QP was
	// created for.
	maxWQE    int
	maxSGE    int
	maxInline int
	// maxMsg is the longest message a work request may send or read
	// (Context.maxMessage; on UD the port's active MTU too). setPost
	// derives post's limits from it: call it after a change.
	maxMsg  uint32
	streams *streamBook // a DCI with streams' (retireStream); nil for others
	bell    *doorbell.SQ
	sync    handoff

	_ [64]byte // the poller's fields on their own cache line
	// tail is the consumer counter: the WQEBBs before it are free. The
	// poller advances it past a work request when the CQE of its last WQE
	// arrives (all of its WQEs are then done with).
	tail atomic.Uint32
	// reported is the next of the last work request a completion was
	// reported for: CQEs of its other WQEs complete nothing more.
	reported uint16
}

// sqSlot is the send queue's record of the work request that uses a
// WQEBB; every WQEBB of a work request holds the same record.
type sqSlot struct {
	wrID uint64
	next uint16 // producer counter after the work request
	last uint16 // counter of its last WQE
	op   WCOpcode
	bits uint8 // what its completion reports beyond WrID, Opcode and QPN: slotImm...
}

// What a successful requester completion reports beyond the common case
// (libmlx5's handle_good_req): IBV_WC_WITH_IMM for a SEND or RDMA WRITE
// with immediate; the CQE's byte count for an RDMA READ; 8 bytes (the old
// value) for an atomic.
const (
	slotImm       = 1 << 0
	slotByteCount = 1 << 1
	slotAtomic    = 1 << 2
)

// The address vector of a send queue's WQEs (sendQueue.av).
const (
	avNone = iota
	avUD   // a datagram segment: the AH's vector, the QP number and Q_Key
	avDC   // a DC address: the AH's vector, the DCT's number and access key
)

// postInfo is what post needs of an opcode: the table below says which
// opcodes it writes and whether their WQE has a remote address segment;
// init fills in the rest from opcodes.
type postInfo struct {
	remote bool
	segs   uint8 // the control segment, and the remote address segment if remote
	// immMask and invMask pick the ctrl's imm: SendWR.Imm&immMask |
	// SendWR.InvalidateKey&invMask.
	immMask, invMask uint32
	mlx5             uint8 // the control segment's opcode
	bits             uint8 // the slot's bits
	wc               WCOpcode
}

// postOps is indexed by the opcode's low 4 bits: post's opcodes are
// below 16, so the index needs no bounds check. The work requests post
// does not write (atomics, LOCAL_INV, NOP, inline data) are the general
// path's.
var postOps = [16]postInfo{
	OpSend:         {},
	OpSendImm:      {immMask: ^uint32(0)},
	OpSendInv:      {invMask: ^uint32(0)},
	OpRDMAWrite:    {remote: true},
	OpRDMAWriteImm: {remote: true, immMask: ^uint32(0)},
	OpRDMARead:     {remote: true},
}

// postOpSet is the opcodes of postOps.
const postOpSet = 1<<OpSend | 1<<OpSendImm | 1<<OpSendInv | 1<<OpRDMAWrite | 1<<OpRDMAWriteImm | 1<<OpRDMARead

func init() {
	for op := range numOpcodes {
		if postOpSet>>op&1 != 0 {
			f, o := &postOps[op], &opcodes[op]
			f.mlx5, f.bits, f.wc = o.mlx5, o.slot, o.wc
			f.segs = 1
			if f.remote {
				f.segs++
			}
		}
	}
}

// setPost sets what post takes on a send queue of a QP of type typ and
// number qpn: the opcodes of postOps the type allows, the address vector,
// the limits. Called once the ring, the limits and the QP's number are
// set, and again when one changes.
func (sq *sendQueue) setPost(typ QPType, qpn uint32) {
	sq.heads, sq.anyHeads, sq.av = [16]wqe.CtrlHead{}, [16]wqe.CtrlHead{}, avNone
	sq.maxDS = min(wqe.MaxDS, sq.maxWQE*(wqe.WQEBB/16))
	sq.maxTotal = uint64(sq.maxMsg)
	if sq.maxTotal == 0 {
		sq.maxTotal = wqe.MaxMessage
	}
	sq.maxLen = uint32(min(sq.maxTotal, wqe.MaxSGELength))
	switch typ {
	case QPTypeUD:
		sq.av = avUD
	case QPTypeDCI:
		sq.av = avDC
	case QPTypeDCT:
		return // it has no send queue
	}
	if len(sq.slots) == 0 || len(sq.slots)&(len(sq.slots)-1) != 0 || len(sq.ring) != len(sq.slots)*wqe.WQEBB || sq.maxSGE < 1 ||
		sq.maxStream&(sq.maxStream+1) != 0 || sq.maxDS < 3+int(min(sq.av, 1))*wqe.DatagramSegSize/16 {
		return
	}
	for op := range numOpcodes {
		if postOpSet>>op&1 != 0 && opcodes[op].types.has(typ) {
			sq.anyHeads[op] = wqe.CtrlHeadOf(0, postOps[op].mlx5, qpn)
		}
	}
	if sq.av == avNone {
		sq.heads = sq.anyHeads
	}
}

// Add builds one send work request into the batch. Its body is the send
// queue's post: if the batch is ready and wr is one post writes (a SEND,
// SEND with immediate or invalidate, RDMA WRITE with or without
// immediate or RDMA READ of a gather list, on any QP type that allows
// it), is valid and fits, it writes wr's WQE at the producer counter: the
// control segment, the address vector (UD and DCI), the remote address
// segment and a data segment for each SGE of non-zero length, in whole
// WQEBBs up to the batch's limit that do not cross the ring's end. It
// records the work request and notes its doorbell word in the batch.
// Otherwise it writes nothing and hands wr to the general path
// (Batch.add), which builds it with package wqe's builders or says why it
// cannot. (post is Add itself, not a call from it: a call costs a post
// about 30 instructions.)
func (b *Batch) Add(wr *SendWR) *Batch {
	if b == nil || !b.ready || wr == nil {
		return b.add(wr)
	}
	sq := &b.qp.sq
	op := wr.Opcode
	head := sq.heads[op&15]
	sgl := wr.SGL
	if op >= 16 || head == 0 || len(wr.Inline)|int(wr.StreamID) != 0 || len(sgl) != 1 {
		return b.postAny(wr)
	}
	info := &postOps[op&15]
	// The common case: no address vector (heads), stream 0, one SGE, no
	// longer than a data segment and a message take (setPost made sure
	// the QP takes one): a WQE of at most three segments, one WQEBB.
	pi := sq.pi
	l := sgl[0].Length
	at := int(pi) & (len(sq.slots) - 1) * wqe.WQEBB
	if l > sq.maxLen || b.limit == pi || at+wqe.WQEBB > len(sq.ring) {
		return b.add(wr)
	}
	n := int(info.segs)
	if l != 0 {
		n++
	}
	// Recorded first: track then reads the counter and the slots as the
	// tests above did, before the WQE's stores, which the compiler
	// cannot tell from stores to them.
	sq.track(wr.WrID, info.wc, 1, pi, info.bits)
	// The WQEBB is sq.ring[at:at+64] (checked above).
	w := unsafe.Add(unsafe.Pointer(unsafe.SliceData(sq.ring)), at)
	imm := wr.Imm&info.immMask | wr.InvalidateKey&info.invMask
	fm := wqe.CtrlFlags(wqe.SendFlags(wr.Flags), sq.fm)
	db := wqe.StoreCtrl(seg(w, 0), head, pi, uint8(n), 0, 0, fm, imm)
	off := uintptr(wqe.CtrlSegSize)
	if info.remote {
		wqe.StoreRaddr(seg(w, off), wr.RemoteAddr, wr.RKey)
		off += wqe.RaddrSegSize
	}
	if l != 0 {
		wqe.StoreData(seg(w, off), wqe.SGE(sgl[0]))
		off += wqe.DataSegSize
	}
	switch off {
	case 16:
		*seg(w, 16) = [16]byte{}
		fallthrough
	case 32:
		*seg(w, 32) = [16]byte{}
	}
	*seg(w, 48) = [16]byte{}
	sq.fm = false
	b.lastDB = db
	b.n++
	return b
}

// postAny is post for the work requests that are not the common case's:
// a gather list of other than one SGE, a stream, an address vector (UD,
// DCI), a WQE of several WQEBBs. Those post does not write at all (by
// opcode, QP type or inline data) go on to the general path. Not inlined
// in Add: the common case keeps its registers.
//
//go:noinline
func (b *Batch) postAny(wr *SendWR) *Batch {
	sq := &b.qp.sq
	op := wr.Opcode
	// maxStream is a power of two less one (setPost): a stream past it
	// has a bit outside it.
	if op >= 16 || sq.anyHeads[op&15] == 0 || len(wr.Inline) != 0 || wr.StreamID&^sq.maxStream != 0 {
		return b.add(wr)
	}
	info := &postOps[op&15]
	n := int(info.segs) // the WQE's 16-byte segments
	if sq.av != avNone {
		// The nil test alone: joined to the others it makes the compiler
		// materialize dead's load as a flag and test it again.
		ah := wr.AH
		if ah == nil {
			return b.add(wr)
		}
		if !ah.postableOn(b.qp.c) || wr.RemoteQPN > 0xffffff {
			return b.add(wr)
		}
		n += wqe.DatagramSegSize / 16
	}
	sgl := wr.SGL
	if len(sgl) == 1 {
		// One SGE, no longer than a data segment and a message take
		// (setPost made sure the QP takes one, in a WQE of up to maxDS
		// segments).
		l := sgl[0].Length
		if l > sq.maxLen {
			return b.add(wr)
		}
		if l != 0 {
			n++
		}
	} else {
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
		if len(sgl) > sq.maxSGE || or&wqe.InlineSeg != 0 || total > sq.maxTotal || n > sq.maxDS {
			return b.add(wr)
		}
	}
	pi := sq.pi
	bbs := (n + 3) >> 2
	at := int(pi) & (len(sq.slots) - 1) * wqe.WQEBB
	end := at + bbs*wqe.WQEBB
	if bbs > int(b.limit-pi) || end > len(sq.ring) {
		return b.add(wr) // too large, no room, or across the ring's end
	}
	// The WQE's bytes are sq.ring[at:end] (checked above): n segments in
	// bbs WQEBBs, written by 16-byte segment at w+off, off < end-at.
	w := unsafe.Add(unsafe.Pointer(unsafe.SliceData(sq.ring)), at)
	imm := wr.Imm&info.immMask | wr.InvalidateKey&info.invMask
	fm := wqe.CtrlFlags(wqe.SendFlags(wr.Flags), sq.fm)
	db := wqe.StoreCtrl(seg(w, 0), sq.anyHeads[op&15], pi, uint8(n), 0, wr.StreamID, fm, imm)
	off := uintptr(wqe.CtrlSegSize)
	if sq.av != avNone {
		// The AH's encoded vector, with a datagram segment's Q_Key on
		// UD and the DC access key on a DCI.
		key := wr.DCAccessKey
		if sq.av == avUD {
			key = uint64(wr.QKey) << 32
		}
		wqe.StoreAV((*[wqe.DatagramSegSize]byte)(unsafe.Add(w, off)), key, wr.RemoteQPN|wqe.ExtendedUDAV, &wr.AH.img)
		off += wqe.DatagramSegSize
	}
	if info.remote {
		wqe.StoreRaddr(seg(w, off), wr.RemoteAddr, wr.RKey)
		off += wqe.RaddrSegSize
	}
	if len(sgl) == 1 {
		if sgl[0].Length != 0 {
			wqe.StoreData(seg(w, off), wqe.SGE(sgl[0]))
			off += wqe.DataSegSize
		}
	} else {
		for i := range sgl {
			if sgl[i].Length != 0 {
				wqe.StoreData(seg(w, off), wqe.SGE(sgl[i]))
				off += wqe.DataSegSize
			}
		}
	}
	// The rest of the last WQEBB: up to three segments of zeros.
	switch off & (wqe.WQEBB - 1) {
	case 16:
		*seg(w, off) = [16]byte{}
		off += 16
		fallthrough
	case 32:
		*seg(w, off) = [16]byte{}
		off += 16
		fallthrough
	case 48:
		*seg(w, off) = [16]byte{}
	}
	sq.fm = false
	if ds := sq.streams; ds != nil {
		ds.stream[int(pi)&(len(ds.stream)-1)] = wr.StreamID
	}
	sq.track(wr.WrID, info.wc, bbs, pi, info.bits)
	b.lastDB = db
	b.n++
	return b
}

// seg is the 16-byte segment at w+off, which the caller has checked to
// be in the ring.
func seg(w unsafe.Pointer, off uintptr) *[16]byte { return (*[16]byte)(unsafe.Add(w, off)) }

// limit is the producer counter up to which a post may write: the
// producer counter plus the WQEBBs no posted work request still uses,
// which is the consumer counter the poller advances plus the ring's
// WQEBBs (a send queue has fewer than 65536).
func (sq *sendQueue) limit() uint16 {
	return uint16(sq.tail.Load()) + uint16(len(sq.slots))
}

// track records the work request of wqebbs WQEBBs at the producer counter
// in each of its WQEBBs (a CQE names the WQE that asked for it, which for
// an mkey configure may be its last, or, on error, any of them), with the
// counter of its last WQE, and advances the producer counter.
func (sq *sendQueue) track(wrID uint64, op WCOpcode, wqebbs int, last uint16, bits uint8) {
	slots, j := sq.slots, sq.pi
	mask := len(slots) - 1
	// A work request has a WQEBB at least. (The loop tests at its end,
	// and stops after the first record for one WQEBB: where track is
	// inlined with a constant 1, the compiler leaves no loop.)
	next := j + uint16(max(wqebbs, 1))
	for {
		// Field by field: a record built whole is copied from the stack,
		// whose narrow stores its 16-byte load waits for.
		s := &slots[int(j)&mask]
		s.wrID, s.next, s.last, s.op, s.bits = wrID, next, last, op, bits
		if j++; wqebbs <= 1 || j == next {
			break
		}
	}
	sq.pi = next
}

// ringDoorbell rings the send doorbell for what was posted, nreq WQEs,
// the last of which has the doorbell word doorbell (the first 8 bytes of
// its control segment): a BlueFlame copy of a single WQE of more than one
// segment that fits, as libmlx5 does, else the 8-byte doorbell. A WQE of
// one or two WQEBBs that does not cross the ring's end (every post of
// one SGE, RC's or DC's) is copied straight (RingBF1, RingBF2).
func (sq *sendQueue) ringDoorbell(doorbell uint64, nreq int) error {
	// Several WQEs, or one of one segment: the 8-byte doorbell
	// (doorbell.SQ.UseBlueFlame).
	ds := doorbell & 0x3f
	if nreq != 1 || ds <= 1 {
		sq.bell.RingWord(sq.pi, doorbell)
		return nil
	}
	// The WQE's first WQEBB: the ring is a power of two of WQEBBs
	// (CreateQP), so the counter's slot is in it; the conversions below
	// check the WQEBBs after it all the same.
	ring := sq.ring
	at := (uint(doorbell>>40) & (uint(len(ring))/wqe.WQEBB - 1)) * wqe.WQEBB
	if bf := sq.bell.BlueFlameSize(); ds <= 4 && bf >= wqe.WQEBB && at+wqe.WQEBB <= uint(len(ring)) {
		return sq.bell.RingBF1(sq.pi, (*[wqe.WQEBB]byte)(ring[at:]))
	} else if ds <= 8 && bf >= 2*wqe.WQEBB && at+2*wqe.WQEBB <= uint(len(ring)) {
		return sq.bell.RingBF2(sq.pi, (*[2 * wqe.WQEBB]byte)(ring[at:]))
	}
	return sq.ringAny(doorbell, nreq)
}

// ringAny is ringDoorbell for any post.
func (sq *sendQueue) ringAny(doorbell uint64, nreq int) error {
	// The doorbell word is the last WQE's control segment's first 8
	// bytes: its counter in bits 40 to 55, its ds in the low 6 bits.
	last, lastDS := uint16(doorbell>>40), uint8(doorbell&0x3f)
	ring := sq.ring
	bbs := len(ring) / wqe.WQEBB
	ds := int(lastDS)
	if sq.bell.UseBlueFlame(nreq, ds) {
		i := int(last) & (bbs - 1)
		end := i + (ds*16+wqe.WQEBB-1)/wqe.WQEBB
		if end <= bbs {
			return sq.bell.RingBF(sq.pi, ring[i*wqe.WQEBB:end*wqe.WQEBB], nil)
		}
		return sq.bell.RingBF(sq.pi, ring[i*wqe.WQEBB:], ring[:(end-bbs)*wqe.WQEBB])
	}
	var db [8]byte
	binary.BigEndian.PutUint64(db[:], doorbell)
	return sq.bell.Ring(sq.pi, db[:])
}
