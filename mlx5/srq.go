package mlx5

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// SRQOptions describe a shared receive queue.
type SRQOptions struct {
	PD *PD
	// MaxWR receive work requests of up to MaxSGE SGEs at once; the SRQ
	// grants what libmlx5 would (SRQ.Caps).
	MaxWR, MaxSGE int
	// Limit is ibv_create_srq's srq_limit, passed to the kernel as
	// libmlx5 passes it. mlx5_ib does not arm it (mlx5_ib_create_srq
	// reads no limit; ibv_create_srq(3): "irrelevant for
	// ibv_create_srq"): use Arm for EventSRQLimitReached.
	Limit int
}

// SRQ is a shared receive queue (ibv_srq): receive work requests that the
// QPs attached to it consume, created through the kernel with mlx5's
// driver data as libmlx5 does. Its WQEs form a linked list in memory
// mlx5go owns: each begins with the index of the next free one. One
// goroutine posts on it; the pollers of its QPs' CQs give WQEs back
// through a lock-free ring that only the poster links in.
type SRQ struct {
	c      *Context
	pd     *PD
	handle seam.Handle
	srqn   uint32
	name   string
	user   uint64
	g      guard

	ring   []byte
	shift  uint // log2 of the WQE stride
	maxSGE int
	wrID   []uint64
	db     *doorbell.RQ
	caps   SRQCaps

	// The poster's: the list from head (the next WQE to post) to tail
	// (the last free one), how many may be posted (the list's length
	// less the one it keeps), and the counter the doorbell record holds.
	head, tail uint16
	avail      int
	counter    uint16
	sync       handoff

	// freed are the WQEs the pollers gave back, for the poster to link:
	// a ring of index+1 (0: empty) that any poller appends to (freedTail
	// reserves a slot) and the poster empties from freedHead. A WQE is
	// given back once before it is posted again, so the ring never holds
	// more than the SRQ has.
	freed     []atomic.Uint32
	freedHead uint32 // the poster's
	freedTail atomic.Uint32

	mu     sync.Mutex
	res    resources
	refs   int // QPs on it
	closed bool
}

// SRQCaps are what an SRQ grants: receive work requests at once and SGEs
// each.
type SRQCaps struct {
	MaxWR, MaxSGE int
}

// srqNextSegSize is struct mlx5_wqe_srq_next_seg, the head of every SRQ
// WQE.
const srqNextSegSize = 16

// maxSRQWR is the most receive work requests an SRQ takes here: its ring
// of at most 2^16 WQEs (pow2(MaxWR+1) without the wait queue) holds them.
const maxSRQWR = 1 << 15

// CreateSRQ creates a shared receive queue (ibv_create_srq), as libmlx5's
// mlx5_create_srq and mlx5_alloc_srq_buf do: WQEs of a next segment and
// MaxSGE data segments, rounded up to a power of two (at least 32 bytes),
// twice the receives asked for plus one of them when the device allows (a
// wait queue), the free ones linked in order.
func (c *Context) CreateSRQ(o SRQOptions) (*SRQ, error) {
	const op = "create srq"
	if err := c.checkOpen(op); err != nil {
		return nil, err
	}
	obj := c.name
	lim := c.Caps.limits()
	maxSRQ := c.Caps.MaxSRQRecvWR
	if maxSRQ == 0 {
		maxSRQ = 1<<15 - 1
	}
	// An SRQ's WQEs are named by 16-bit indexes (the next segment's
	// next_wqe_index, a CQE's wqe_counter): its ring, wait queue included,
	// holds at most 2^16 of them, whatever the device says.
	maxSRQ = min(maxSRQ, maxSRQWR)
	switch {
	case !c.speaksVerbs():
		return nil, unsupported(op, obj, "the device makes no verbs objects")
	case o.PD == nil || o.PD.c != c:
		return nil, invalid(op, obj, "a PD of this context is required")
	case o.PD.isClosed():
		return nil, opErr(op, pdName(o.PD.pdn), ErrClosed)
	case o.MaxWR <= 0 || o.MaxWR > maxSRQ:
		return nil, invalid(op, obj, "MaxWR %d (1 to %d)", o.MaxWR, maxSRQ)
	case o.MaxSGE < 0 || o.MaxSGE > lim.maxRQDesc/dataSegSize:
		return nil, invalid(op, obj, "MaxSGE %d (0 to %d)", o.MaxSGE, lim.maxRQDesc/dataSegSize)
	case o.Limit < 0 || o.Limit > o.MaxWR:
		return nil, invalid(op, obj, "Limit %d (0 to MaxWR)", o.Limit)
	}
	// libmlx5 tells the kernel the size of its ring and the SGEs its
	// rounded-up WQE holds, and mlx5_ib_create_srq refuses a max_wr of
	// max_srq_recv_wr (1 << log_max_srq_sz) or more, and more SGEs than
	// max_wqe_sz_rq / 16 (EINVAL): MaxWR = max_srq_recv_wr makes a ring
	// twice that, 32 SGEs a 1024-byte WQE of 63. Refused here first.
	switch g := srqSize(maxSRQ, o.MaxWR, o.MaxSGE); {
	case g.wqes-1 > maxSRQ:
		return nil, invalid(op, obj, "MaxWR %d: its ring of %d WQEs is more than the kernel takes (%d)", o.MaxWR, g.wqes, maxSRQ)
	case g.maxSGE > lim.maxRQDesc/dataSegSize:
		return nil, invalid(op, obj, "MaxSGE %d: its %d-byte WQE holds %d SGEs, more than the kernel takes (%d)", o.MaxSGE, g.stride, g.maxSGE, lim.maxRQDesc/dataSegSize)
	}
	s := &SRQ{c: c, pd: o.PD}
	err := s.create(&o, srqSize(maxSRQ, o.MaxWR, o.MaxSGE))
	if err == nil {
		s.name = fmt.Sprintf("SRQ %#x", s.srqn)
		s.g.open()
		err = c.adopt(s)
		if err != nil {
			c.dev.DestroySRQ(s.handle)
		}
	}
	if err != nil {
		s.release()
		return nil, wrapAs(op, obj, "", err)
	}
	return s, nil
}

// srqGeometry is an SRQ's ring as libmlx5 sizes it (mlx5_alloc_srq_buf).
type srqGeometry struct {
	wqes      int // WQEs in the ring, a power of two; the kernel is told wqes-1
	stride    int // bytes of a WQE, a power of two
	maxSGE    int // data segments a WQE holds, granted and sent to the kernel
	maxPost   int // granted max_wr: the free list's length less one
	waitQueue bool
}

// srqSize sizes an SRQ of maxWR receives of maxSGE SGEs: a ring with a
// wait queue as large as the SRQ when maxSRQ (the device's
// max_srq_recv_wr) allows, WQEs of a next segment and the SGEs rounded up
// to a power of two of at least 32 bytes.
func srqSize(maxSRQ, maxWR, maxSGE int) srqGeometry {
	wrs, waitQueue := maxWR*2+1, true
	if wrs > maxSRQ {
		wrs, waitQueue = maxWR+1, false
	}
	stride := roundPow2(max(32, srqNextSegSize+maxSGE*dataSegSize))
	return srqGeometry{wqes: roundPow2(wrs), stride: stride, maxSGE: (stride - srqNextSegSize) / dataSegSize,
		maxPost: roundPow2(maxWR+1) - 1, waitQueue: waitQueue}
}

func (s *SRQ) create(o *SRQOptions, g srqGeometry) error {
	c := s.c
	s.maxSGE, s.shift = g.maxSGE, uint(bits.Len(uint(g.stride-1)))
	n, size := g.wqes, g.stride
	buf, err := allocBuffer(n * size)
	if err != nil {
		return err
	}
	s.res.add(buf)
	dbr, err := allocBuffer(4096)
	if err != nil {
		return err
	}
	s.res.add(dbr)
	s.ring, s.wrID = buf.mem, make([]uint64, n)
	s.freed = make([]atomic.Uint32, n)
	// The free list from 0 to tail, and the wait queue after it (WQEs
	// libmlx5 keeps for ODP page faults; linked as libmlx5 links them).
	s.head, s.tail = 0, uint16(g.maxPost)
	s.avail = g.maxPost
	s.linkRange(0, int(s.tail))
	if g.waitQueue {
		s.linkRange(int(s.tail)+1, n-1)
	}
	s.caps = SRQCaps{MaxWR: int(s.tail), MaxSGE: s.maxSGE}
	if s.db, err = doorbell.NewRQ(dbr.mem[:doorbell.RecordSize]); err != nil {
		return err
	}
	s.user = c.newHandle(s)
	drv := mlx5abi.Mlx5IbCreateSrq{BufAddr: addrOf(s.ring), DbAddr: addrOf(dbr.mem)}
	var resp mlx5abi.Mlx5IbCreateSrqResp
	h, made, err := c.dev.CreateSRQ(seam.SRQCreate{PD: o.PD.handle, MaxWR: uint32(n - 1), MaxSGE: uint32(g.maxSGE),
		Limit: uint32(o.Limit), UserHandle: s.user}, bytesOf(&drv), bytesOf(&resp))
	if err != nil {
		return err
	}
	s.handle, s.srqn = h, made.SRQN
	return nil
}

// linkRange links WQEs from..to-1 each to the next.
func (s *SRQ) linkRange(from, to int) {
	for i := from; i < to; i++ {
		binary.BigEndian.PutUint16(s.wqe(uint16(i))[2:], uint16(i+1))
	}
}

// wqe is WQE i of the ring.
func (s *SRQ) wqe(i uint16) []byte {
	size := 1 << s.shift
	at := int(i) & (len(s.wrID) - 1) * size
	return s.ring[at : at+size : at+size]
}

// SRQN is the SRQ's number.
func (s *SRQ) SRQN() uint32 {
	if s == nil {
		return 0
	}
	return s.srqn
}

// Caps returns what the SRQ grants.
func (s *SRQ) Caps() SRQCaps {
	if s == nil {
		return SRQCaps{}
	}
	return s.caps
}

// usable fails for a nil SRQ and one not made by CreateSRQ.
func (s *SRQ) usable(op string) error {
	if s == nil || s.c == nil {
		return unusable(op, "SRQ", "Context.CreateSRQ", s == nil)
	}
	return nil
}

// PostRecv posts one receive work request to the SRQ.
func (s *SRQ) PostRecv(wrID uint64, sgl []SGE) error {
	wr := [1]RecvWR{{WrID: wrID, SGL: sgl}}
	return s.PostRecvList(wr[:])
}

// PostRecvList posts receive work requests to the SRQ and writes its
// doorbell record once, all or none (mlx5_post_srq_recv posts those
// before a bad one).
func (s *SRQ) PostRecvList(wrs []RecvWR) error {
	const op = "post srq recv"
	if err := s.usable(op); err != nil {
		return err
	}
	for i := range wrs {
		if err := wqe.CheckRecv(wqeSGL(wrs[i].SGL), s.maxSGE); err != nil {
			return recvErr(op, s.name, "SRQ", i, &wrs[i], s.maxSGE, err)
		}
	}
	if !s.g.enter() {
		return opErr(op, s.name, ErrClosed)
	}
	defer s.g.exit()
	s.link()
	if len(wrs) > s.avail {
		return opErr(op, s.name, fmt.Errorf("%d work requests, room for %d: %w", len(wrs), s.avail, ErrQueueFull))
	}
	for i := range wrs {
		w := s.wqe(s.head)
		_ = wqe.WriteRecv(w[srqNextSegSize:], wqeSGL(wrs[i].SGL)) // checked above
		s.wrID[int(s.head)&(len(s.wrID)-1)] = wrs[i].WrID
		s.head = binary.BigEndian.Uint16(w[2:])
	}
	s.avail -= len(wrs)
	s.counter += uint16(len(wrs))
	if len(wrs) > 0 {
		s.sync.publish()
		s.db.Ring(s.counter)
	}
	return nil
}

// link appends the WQEs the pollers gave back to the free list's tail
// (mlx5_free_srq_wqe, done by the poster here).
func (s *SRQ) link() {
	mask := uint32(len(s.freed) - 1)
	for h := s.freedHead; ; h++ {
		v := s.freed[h&mask].Load()
		if v == 0 {
			s.freedHead = h
			return
		}
		s.freed[h&mask].Store(0)
		i := uint16(v - 1)
		binary.BigEndian.PutUint16(s.wqe(s.tail)[2:], i)
		s.tail = i
		s.avail++
	}
}

// complete is a receive CQE of the SRQ's WQE i (a poller's): the work
// request's id, and the WQE back to the poster.
func (s *SRQ) complete(i uint16) uint64 {
	s.sync.observe()
	id := s.wrID[int(i)&(len(s.wrID)-1)]
	s.free(i)
	return id
}

// free gives WQE i back to the poster (mlx5_free_srq_wqe): when its
// receive completed, or its CQE was cleaned from a CQ. Lock-free: a
// slot reserved, then filled.
func (s *SRQ) free(i uint16) {
	mask := uint32(len(s.freed) - 1)
	t := s.freedTail.Add(1) - 1
	s.freed[t&mask].Store(uint32(i)&mask + 1)
}

// Arm arms the SRQ's limit event (ibv_modify_srq with IBV_SRQ_LIMIT): when
// fewer than limit receives remain, EventSRQLimitReached, once.
func (s *SRQ) Arm(limit int) error {
	const op = "arm srq"
	if err := s.usable(op); err != nil {
		return err
	}
	if s.g.closed() {
		return opErr(op, s.name, ErrClosed)
	}
	if limit < 0 || limit > s.caps.MaxWR {
		return invalid(op, s.name, "limit %d (0 to %d)", limit, s.caps.MaxWR)
	}
	if err := s.c.dev.ModifySRQ(s.handle, uint32(limit)); err != nil {
		return opErr(op, s.name, err)
	}
	return nil
}

// ref and unref count the QPs attached: Close is EBUSY while there are.
func (s *SRQ) ref() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return opErr("create qp", s.name, ErrClosed)
	}
	s.refs++
	return nil
}

func (s *SRQ) unref() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs--
}

// Close destroys the SRQ; the QPs on it must be closed first (EBUSY).
// Receives posted to it that no QP consumed go with it: they never
// complete (QP.Close says what becomes of those a QP consumed). Closing
// twice is safe.
func (s *SRQ) Close() error {
	const op = "destroy srq"
	if err := s.usable(op); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.refs > 0 && !s.c.closedNow() {
		users := fmt.Sprintf("%d QPs use it", s.refs)
		if s.refs == 1 {
			users = "a QP uses it"
		}
		return opErr(op, s.name, fmt.Errorf("%s: %w", users, unix.EBUSY))
	}
	if !s.c.closedNow() {
		if err := s.c.dev.DestroySRQ(s.handle); err != nil {
			return opErr(op, s.name, err)
		}
	}
	s.g.close()
	s.closed = true
	s.c.forget(s)
	s.release()
	return nil
}

func (s *SRQ) release() {
	s.res.close()
	if s.user != 0 {
		s.c.dropHandle(s.user)
		s.user = 0
	}
}
