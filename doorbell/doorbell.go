package doorbell

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"unsafe"
)

// Layout facts, from rdma-core's <infiniband/mlx5dv.h> and the kernel's
// <linux/mlx5/doorbell.h> and <linux/mlx5/cq.h>.
const (
	// RecordSize is the size of a QP's or a CQ's doorbell record: two
	// big-endian 32-bit words.
	RecordSize = 8

	// RecvOffset and SendOffset are the byte offsets of the receive and
	// send counters in a QP's doorbell record (MLX5_RCV_DBR = 0 and
	// MLX5_SND_DBR = 1, in 32-bit words).
	RecvOffset = 0
	SendOffset = 4

	// CQSetCIOffset and CQArmOffset are the byte offsets of the consumer
	// index and of the arm word in a CQ's doorbell record (set_ci_db is
	// word 0, arm_db word 1).
	CQSetCIOffset = 0
	CQArmOffset   = 4

	// UARSize is the size of one UAR page (MLX5_ADAPTER_PAGE_SIZE).
	UARSize = 4096

	// BlueFlameOffset is the offset of the first BlueFlame register in a
	// UAR page (MLX5_BF_OFFSET). A register is two buffers ("halves") of
	// the BlueFlame size each, which posts use alternately.
	BlueFlameOffset = 0x800

	// CQDoorbellOffset is the offset of the CQ arm doorbell in a UAR page
	// (MLX5_CQ_DOORBELL).
	CQDoorbellOffset = 0x20

	// WQEBB is the send WQE basic block (MLX5_SEND_WQE_BB); BlueFlame
	// copies are made of whole WQEBBs.
	WQEBB = 64

	// ciMask: the CQ consumer index in the record is 24 bits wide.
	ciMask = 0xffffff
)

// Errors for bad arguments. The hot-path methods return them instead of
// panicking; they never allocate.
var (
	ErrRecord    = errors.New("doorbell: record is not 8 bytes aligned to 4")
	ErrRegister  = errors.New("doorbell: register is too short or not 8-byte aligned")
	ErrBFSize    = errors.New("doorbell: BlueFlame size must be a multiple of 64")
	ErrShortCtrl = errors.New("doorbell: control segment shorter than 8 bytes")
	ErrBFLength  = errors.New("doorbell: BlueFlame copy must be whole WQEBBs, at most the BlueFlame size")
)

// word returns the 32-bit word at b[off:], which the caller has checked to
// be in range and 4-byte aligned.
func word(b []byte, off int) *uint32 {
	return (*uint32)(unsafe.Pointer(&b[off]))
}

func aligned(b []byte, n uintptr) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%n == 0
}

// recordWords checks a doorbell record and returns its two words.
func recordWords(rec []byte) (w0, w1 *uint32, err error) {
	if len(rec) < RecordSize || !aligned(rec, 4) {
		return nil, nil, ErrRecord
	}
	return word(rec, 0), word(rec, 4), nil
}

// store64 writes the 8 bytes b[0:8] to the register at p with one 64-bit
// store, so the device sees them in one write (PCIe TLP). p is 8-byte
// aligned. It is an ordinary store on purpose: a locked or exclusive
// instruction on MMIO would read the register.
func store64(p unsafe.Pointer, b []byte) {
	*(*uint64)(p) = binary.NativeEndian.Uint64(b)
}

// RQ is a receive queue's doorbell: the receive counter of the QP's (or
// SRQ's) doorbell record. Receive queues have no UAR doorbell; the device
// reads the record.
//
// An RQ has a single poster: Ring is not safe for concurrent use, as
// libmlx5's per-RQ lock is its caller's.
type RQ struct {
	rec *uint32
}

// NewRQ returns the RQ doorbell of the 8-byte doorbell record rec (its
// receive counter is at RecvOffset). rec is memory the device reads:
// off-heap, mapped or registered by the caller, and alive as long as the RQ.
func NewRQ(rec []byte) (*RQ, error) {
	w, _, err := recordWords(rec)
	if err != nil {
		return nil, err
	}
	return &RQ{rec: w}, nil
}

// Ring publishes the receive producer counter (the 16-bit head, after the
// last WQE posted) once every earlier store to receive WQEs is visible to
// the device.
func (q *RQ) Ring(counter uint16) {
	publish(q.rec, be32(uint32(counter)))
}

// Counter returns the receive counter in the record.
func (q *RQ) Counter() uint16 {
	return uint16(fromBE32(atomic.LoadUint32(q.rec)))
}

// SQ is a send queue's doorbell: the send counter of the QP's doorbell
// record and the QP's BlueFlame register in a UAR page.
//
// A ring publishes the producer counter in the record, then writes to the
// current half of the register either the first 8 bytes of the last WQE's
// control segment (Ring) or a BlueFlame copy of the whole WQE (RingBF), and
// switches halves for the next ring.
//
// An SQ has a single poster: its methods are not safe for concurrent use.
// libmlx5 takes a per-QP lock around building WQEs and ringing; in mlx5go
// that lock, or the proof that one goroutine owns the QP, is the caller's.
// Two posters sharing one BlueFlame register (a shared bfreg) need one lock
// around the ring, so that the halves alternate and the copies of two
// posts do not interleave.
type SQ struct {
	rec    *uint32
	reg    unsafe.Pointer // BlueFlame register, 2*bfSize bytes
	bfSize uint32
	half   uint32 // offset of the half the next ring writes: 0 or bfSize
}

// NewSQ returns the SQ doorbell of the 8-byte doorbell record rec (its send
// counter is at SendOffset) and of the BlueFlame register reg: both
// halves, 2*bfSize bytes, for bfreg 0 of a UAR page
// uar[BlueFlameOffset:BlueFlameOffset+2*bfSize]. bfSize is the BlueFlame
// buffer size (mlx5dv_qp.bf.size; half of the context's bf_reg_size), or 0
// for a register without BlueFlame buffers: every ring is then the 8-byte
// doorbell (UseBlueFlame is false), as libmlx5 does with a zero bf size.
// The first ring writes the first half.
func NewSQ(rec, reg []byte, bfSize int) (*SQ, error) {
	_, w, err := recordWords(rec)
	if err != nil {
		return nil, err
	}
	if bfSize < 0 || bfSize%WQEBB != 0 || bfSize > 1<<20 {
		return nil, ErrBFSize
	}
	if len(reg) < max(2*bfSize, 8) || !aligned(reg, 8) {
		return nil, ErrRegister
	}
	return &SQ{rec: w, reg: unsafe.Pointer(unsafe.SliceData(reg)), bfSize: uint32(bfSize)}, nil
}

// BlueFlameSize returns the size of one half of the register.
func (q *SQ) BlueFlameSize() int { return int(q.bfSize) }

// Half returns the offset in the register of the half the next ring
// writes: 0 or BlueFlameSize.
func (q *SQ) Half() int { return int(q.half) }

// SetHalf makes the next ring write the half at offset off (0 or
// BlueFlameSize; anything else is taken as BlueFlameSize if non-zero).
// It is for adopting a register another poster has used.
func (q *SQ) SetHalf(off int) {
	if off != 0 {
		q.half = q.bfSize
	} else {
		q.half = 0
	}
}

// Reset sets the send counter in the record to 0, as after the QP moved to
// RESET (the device's counter starts over there too). It rings nothing.
func (q *SQ) Reset() {
	publish(q.rec, 0)
}

// Counter returns the send counter in the record.
func (q *SQ) Counter() uint16 {
	return uint16(fromBE32(atomic.LoadUint32(q.rec)))
}

// UseBlueFlame reports whether a post should ring with a BlueFlame copy, as
// libmlx5 44.0 does by default (MLX5_POST_SEND_PREFER_BF on): a post of one
// WQE of more than one 16-byte segment (ds > 1) that fits in one half.
// Posts of several WQEs, and larger WQEs, ring with Ring.
func (q *SQ) UseBlueFlame(nreq, ds int) bool {
	return nreq == 1 && ds > 1 && ds*16 <= int(q.bfSize)
}

// Ring publishes the send producer counter (the 16-bit counter after the
// last WQE posted) and writes the first 8 bytes of the last WQE's control
// segment, ctrl[0:8], to the register: the doorbell. It returns ErrShortCtrl,
// and writes nothing, if ctrl is shorter than 8 bytes.
func (q *SQ) Ring(counter uint16, ctrl []byte) error {
	if len(ctrl) < 8 {
		return ErrShortCtrl
	}
	publish(q.rec, be32(uint32(counter)))
	wcStart()
	store64(unsafe.Add(q.reg, q.half), ctrl)
	wcFlush(&q.half, q.half^q.bfSize)
	return nil
}

// RingWord is Ring with the control segment's first 8 bytes given as the
// big-endian word they hold (a WQE builder's
// doorbell word).
func (q *SQ) RingWord(counter uint16, ctrl uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], ctrl)
	publish(q.rec, be32(uint32(counter)))
	wcStart()
	store64(unsafe.Add(q.reg, q.half), b[:])
	wcFlush(&q.half, q.half^q.bfSize)
}

// RingBF publishes the send producer counter and copies the posted WQE to
// the register (BlueFlame), so the device need not read it from the ring.
// The WQE is wqe followed by wrap: wrap holds the WQEBBs that continue at
// the start of the ring when the WQE crosses its end (nil otherwise). Both
// are whole WQEBBs, together at most BlueFlameSize bytes and at least one
// WQEBB; otherwise RingBF returns ErrBFLength and writes nothing.
func (q *SQ) RingBF(counter uint16, wqe, wrap []byte) error {
	n := len(wqe) + len(wrap)
	if len(wqe) == 0 || len(wqe)%WQEBB != 0 || len(wrap)%WQEBB != 0 || n > int(q.bfSize) {
		return ErrBFLength
	}
	publish(q.rec, be32(uint32(counter)))
	wcStart()
	dst := unsafe.Add(q.reg, q.half)
	copy64(dst, wqe)
	if len(wrap) > 0 { // a WQE that crosses the ring's end: rare
		copy64(unsafe.Add(dst, len(wqe)), wrap)
	}
	wcFlush(&q.half, q.half^q.bfSize)
	return nil
}

// RingBF1 is RingBF of a WQE of one WQEBB, which cannot cross the
// ring's end: it publishes the send producer counter and copies wqe to the
// register. It returns ErrBFLength, and writes nothing, if the register
// has no BlueFlame buffers (BlueFlameSize 0) or wqe is nil.
func (q *SQ) RingBF1(counter uint16, wqe *[WQEBB]byte) error {
	if q.bfSize < WQEBB || wqe == nil {
		return ErrBFLength
	}
	q.ringBlocks(counter, unsafe.Pointer(wqe), false)
	return nil
}

// RingBF2 is RingBF of a WQE of two WQEBBs that does not cross the ring's
// end (a DCI's or a UD QP's RDMA WRITE or SEND of one SGE). It returns
// ErrBFLength, and writes nothing, if a half of the register is shorter
// than two WQEBBs or wqe is nil.
func (q *SQ) RingBF2(counter uint16, wqe *[2 * WQEBB]byte) error {
	if q.bfSize < 2*WQEBB || wqe == nil {
		return ErrBFLength
	}
	q.ringBlocks(counter, unsafe.Pointer(wqe), true)
	return nil
}

// ringBlocks is the ring of RingBF1 and RingBF2: it publishes the
// counter and copies the WQEBB at src, and the one after it if two, to
// the current half (the caller has checked that they fit in it).
func (q *SQ) ringBlocks(counter uint16, src unsafe.Pointer, two bool) {
	publish(q.rec, be32(uint32(counter)))
	wcStart()
	dst := unsafe.Add(q.reg, q.half)
	copyWQEBB((*[WQEBB / 8]uint64)(dst), (*[WQEBB / 8]uint64)(src))
	if two {
		copyWQEBB((*[WQEBB / 8]uint64)(unsafe.Add(dst, WQEBB)), (*[WQEBB / 8]uint64)(unsafe.Add(src, WQEBB)))
	}
	wcFlush(&q.half, q.half^q.bfSize)
}

// copyWQEBB copies the WQEBB at src to the register at dst: eight 8-byte
// loads and stores in ascending order (separate assignments, which the
// compiler neither merges into wider stores nor reorders). Inlined.
func copyWQEBB(d, s *[WQEBB / 8]uint64) {
	d[0] = s[0]
	d[1] = s[1]
	d[2] = s[2]
	d[3] = s[3]
	d[4] = s[4]
	d[5] = s[5]
	d[6] = s[6]
	d[7] = s[7]
}

// copy64 copies src, a multiple of 8 bytes, to the register at dst in
// ascending 64-bit stores, so that write-combining can merge each WQEBB
// into one write.
func copy64(dst unsafe.Pointer, src []byte) {
	// A WQEBB at a time: one bounds check, then copyWQEBB.
	for len(src) >= WQEBB {
		copyWQEBB((*[WQEBB / 8]uint64)(dst), (*[WQEBB / 8]uint64)(unsafe.Pointer(unsafe.SliceData(src))))
		dst, src = unsafe.Add(dst, WQEBB), src[WQEBB:]
	}
	for i := 0; i+8 <= len(src); i += 8 {
		store64(unsafe.Add(dst, i), src[i:i+8])
	}
}

// CQ is a completion queue's doorbell: the consumer index and arm words of
// its doorbell record, and the CQ doorbell register in a UAR page.
//
// A CQ has a single poller: its methods are not safe for concurrent use.
type CQ struct {
	ci  *uint32
	arm *uint32
	db  unsafe.Pointer // uar + CQDoorbellOffset
	cqn uint32
	n   uint32 // arms rung; its store flushes the write
}

// ArmCmd is the request of a CQ arm: which completions raise an event.
type ArmCmd uint32

// Arm requests (MLX5_CQ_DB_REQ_NOT, MLX5_CQ_DB_REQ_NOT_SOL).
const (
	ArmNext      ArmCmd = 0 << 24 // an event for the next completion
	ArmSolicited ArmCmd = 1 << 24 // an event for the next solicited completion
)

// NewCQ returns the doorbell of CQ cqn with the 8-byte doorbell record rec
// and the UAR page uar (at least CQDoorbellOffset+8 bytes, 8-byte aligned).
func NewCQ(rec, uar []byte, cqn uint32) (*CQ, error) {
	ci, arm, err := recordWords(rec)
	if err != nil {
		return nil, err
	}
	if len(uar) < CQDoorbellOffset+8 || !aligned(uar, 8) {
		return nil, ErrRegister
	}
	return &CQ{ci: ci, arm: arm, db: unsafe.Pointer(&uar[CQDoorbellOffset]), cqn: cqn}, nil
}

// SetCI publishes the consumer index (its low 24 bits): the CQEs before it
// are free for the device to reuse. Every earlier read of them is done
// (the caller read them before calling), and the store comes after them.
func (c *CQ) SetCI(ci uint32) {
	release(c.ci, be32(ci&ciMask))
}

// Arm requests an event for the next completion (cmd) after consumer
// index ci (24 bits). sn is the arm sequence number (2 bits), which the
// poller advances on every CQ event it acknowledges. Arm writes the word
// sn<<28 | cmd | ci to the record's arm word, then that word and the cqn,
// big-endian, with one 8-byte store to the UAR's CQ doorbell.
func (c *CQ) Arm(sn uint32, cmd ArmCmd, ci uint32) {
	w := (sn&3)<<28 | uint32(cmd)&(1<<24) | ci&ciMask
	publish(c.arm, be32(w))
	var b [8]byte
	binary.BigEndian.PutUint32(b[0:], w)
	binary.BigEndian.PutUint32(b[4:], c.cqn)
	wcStart()
	store64(c.db, b[:])
	wcFlush(&c.n, c.n+1)
}

// CI returns the consumer index in the record.
func (c *CQ) CI() uint32 { return fromBE32(atomic.LoadUint32(c.ci)) }

// ArmWord returns the arm word in the record.
func (c *CQ) ArmWord() uint32 { return fromBE32(atomic.LoadUint32(c.arm)) }
