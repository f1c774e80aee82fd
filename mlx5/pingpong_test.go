package mlx5_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
)

// The ping-pong acceptance test of issue 11: mixed operations between two
// verbs RC QPs, between two UD QPs, and between RC QPs on an SRQ, on the
// software ConnectX. Every work request's wr_id completes exactly once
// with the right status, opcode, QP, length and immediate, and every
// byte arrives intact; a forced error completes every outstanding work
// request exactly once, the first with its error and the rest flushed.
//
// One goroutine drives both ends: A pings (SEND, SEND with immediate,
// RDMA WRITE with immediate: the operations that consume a receive) and
// adds RDMA WRITEs and READs; B answers every ping it receives with a
// message of its own, and RDMA operations now and then. Posts are single
// (PostSend), lists (PostSendList) and batches (Begin/Add/Commit) of 1 to
// 16, signaled or not (the last of a group always signaled, so that the
// unsignaled ones before it complete through it), inline or gathered from
// up to 4 pieces with canary gaps between them. Receives are posted single
// (PostRecv) and in lists (PostRecvList), scattered over up to 4 pieces.
// Senders never have more work requests outstanding than QP.Caps grants,
// nor more messages in flight than the receiver has receives posted.
//
// Every message's bytes are a function of its wr_id and its sequence
// number in its direction (a header with both and a CRC32 of the rest
// when it is long enough): the receiver regenerates them, so corruption,
// duplication, reordering (RC and the model's UD deliver in order) or
// loss is caught, and so is a byte written outside the message (the
// canary). RDMA WRITEs are checked in the responder's memory and READs
// in the requester's when they complete, the unsignaled ones when the
// signaled work request after them does. Atomics are not modelled
// (docs/MODEL.md, "What it does not do") and are left out.

var (
	ppSeedFlag = flag.Uint64("pingpong.seed", 0, "seed of the ping-pong tests (0: from the clock; the seed is logged)")
	ppOpsFlag  = flag.Int("pingpong.ops", 0, "send work requests per ping-pong test (0: 1,000,000, fewer with -short, -race or under qemu-user)")
)

// ppOps is the number of send work requests a ping-pong run posts: the
// flag, else full the million, or what the suite's time allows under
// -short, -race or qemu-user (the data path is about ten times slower
// under the first two, more under qemu-user, where the million took 406 s
// in TestPingPongRC).
func ppOps(full int) int {
	if *ppOpsFlag > 0 {
		return *ppOpsFlag
	}
	switch {
	case raceEnabled || underQEMUUser:
		return full / 50
	case testing.Short():
		return full / 10
	}
	return full
}

func ppSeed(t testing.TB) uint64 {
	s := *ppSeedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -pingpong.seed %d)", s, s)
	return s
}

const (
	ppMaxSGE   = 4    // SGEs of a send or receive work request, at most
	ppGroupMax = 16   // work requests of a list or a batch, at most
	ppListMax  = 64   // ... and of the poisoned list of TestPingPongForcedError
	ppGap      = 16   // canary bytes around an SGL's pieces
	ppCanary   = 0xa5 // what no device write may touch
	ppGRH      = 40   // struct ib_grh: what a UD receive buffer starts with
	ppQKey     = 0x5a5a1234

	// A wr_id: bit 63 set for a send; bit 62 the side (send) or the
	// receive pool; a serial number from bit 20; the slot below.
	ppWRSend  = 1 << 63
	ppWRSerSh = 20
	ppWRSlot  = 1<<ppWRSerSh - 1
)

var ppCanaryBytes = bytes.Repeat([]byte{ppCanary}, 1<<14)

func isCanary(b []byte) bool { return bytes.Equal(b, ppCanaryBytes[:len(b)]) }

func canary(b []byte) { copy(b, ppCanaryBytes[:len(b)]) }

// ppContent fills b with the bytes of the message of wr_id id and
// sequence number seq: a header (wr_id, seq, CRC32 of the rest) when b has
// room for it, and a stream only they determine.
func ppContent(b []byte, id uint64, seq uint32) {
	x := id*0x9e3779b97f4a7c15 ^ uint64(seq)<<32 ^ 0x2545f4914f6cdd1d
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(w[:], x)
		copy(b[i:], w[:])
	}
	if len(b) >= 16 {
		binary.LittleEndian.PutUint64(b, id)
		binary.LittleEndian.PutUint32(b[8:], seq)
		binary.LittleEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[16:]))
	}
}

// diff describes how got differs from want ("" if it does not).
func diff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	s := fmt.Sprintf("byte %d of %d differs (got %#02x, want %#02x)", i, len(want), got[i], want[i])
	if len(got) >= 16 {
		s += fmt.Sprintf("; the header found names wr_id %#x seq %d (crc ok %v)", binary.LittleEndian.Uint64(got),
			binary.LittleEndian.Uint32(got[8:]), binary.LittleEndian.Uint32(got[12:]) == crc32.ChecksumIEEE(got[16:]))
	}
	return s
}

// ppPieces is an SGL's layout in a slot: k pieces, canary around them.
type ppPieces struct {
	off, n [ppMaxSGE]int
	k      int
}

// collect reads total bytes from the pieces of slot into dst, and checks
// that every other byte of the slot is still canary.
func (pc *ppPieces) collect(slot []byte, total int, dst []byte) string {
	pos, end := 0, 0
	for j := range pc.k {
		off, n := pc.off[j], pc.n[j]
		if !isCanary(slot[end:off]) {
			return fmt.Sprintf("the gap before piece %d (bytes %d to %d) was written", j, end, off)
		}
		m := min(n, total-pos)
		copy(dst[pos:], slot[off:off+m])
		if !isCanary(slot[off+m : off+n]) {
			return fmt.Sprintf("piece %d was written past the message's end (%d of its %d bytes hold the message)", j, m, n)
		}
		pos += m
		end = off + n
	}
	if !isCanary(slot[end:]) {
		return fmt.Sprintf("the slot was written after its last piece (byte %d on)", end)
	}
	if pos != total {
		return fmt.Sprintf("the pieces hold %d bytes, the message has %d", pos, total)
	}
	return ""
}

// A fifo is a queue of T.
type fifo[T any] struct {
	buf     []T
	head, n int
}

func (f *fifo[T]) push(v T) {
	if f.n == len(f.buf) {
		b := make([]T, max(16, 2*len(f.buf)))
		for i := range f.n {
			b[i] = *f.at(i)
		}
		f.buf, f.head = b, 0
	}
	f.buf[(f.head+f.n)%len(f.buf)] = v
	f.n++
}

func (f *fifo[T]) at(i int) *T { return &f.buf[(f.head+i)%len(f.buf)] }

func (f *fifo[T]) pop() T {
	v := f.buf[f.head]
	f.head = (f.head + 1) % len(f.buf)
	f.n--
	return v
}

func (f *fifo[T]) len() int { return f.n }

// ppSend is a send work request, from its post until it retires.
type ppSend struct {
	wrID     uint64
	op       mlx5.Opcode
	signaled bool
	inline   bool
	consume  bool // SEND, SEND_IMM, RDMA_WRITE_IMM: a receive at the peer
	ping     bool // A's: B answers it
	n        int
	seq      uint32 // the message's number in its direction
	imm      uint32
	roff     int // READ: where in the peer's read region
	pcs      ppPieces
	poisoned bool          // made to fail
	want     mlx5.WCStatus // how, if poisoned
	refs     int           // the slot is free at 0 (a WRITE_IMM's waits for the receive too)
}

// ppMsg is a message a receiver expects, in its direction's order.
type ppMsg struct {
	wrID uint64
	op   mlx5.Opcode
	n    int
	seq  uint32
	imm  uint32
	slot int // the sender's slot: a WRITE_IMM's place in the receiver's write region
	ping bool
}

// ppRecv is a receive work request, from its post until it completes.
type ppRecv struct {
	wrID   uint64
	posted bool
	pcs    ppPieces
}

// ppPool is where a side's receives are posted: its QP's receive queue,
// or an SRQ (shared by both sides, and by later QPs).
type ppPool struct {
	p        *pingpong
	id       int
	name     string
	srq      *mlx5.SRQ
	qp       *mlx5.QP
	buf      *mlx5.Buffer
	mr       *mlx5.MR
	mem      []byte
	payload  int // the largest message a receive takes (UD: with the GRH)
	slotSize int
	capacity int
	maxSGE   int
	recs     []ppRecv
	free     []int
	order    fifo[int] // a receive queue's posted slots, oldest first
	posted   int
	credit   int  // posted receives no message in flight is bound for
	hold     bool // post no more
	failed   bool // a flush came: everything after must be one
	serial   uint64
	watch    map[uint64]bool // receives to see completed (the SRQ test)
	wrs      [ppGroupMax]mlx5.RecvWR
	sgls     [ppGroupMax][ppMaxSGE]mlx5.SGE
}

func (pl *ppPool) slot(i int) []byte { return pl.mem[i*pl.slotSize : (i+1)*pl.slotSize] }

// ppSide is one end: its QP, CQs, memory and bookkeeping.
type ppSide struct {
	p         *pingpong
	id        int
	name      string
	qp        *mlx5.QP
	qpn       uint32
	scq, rcq  *mlx5.CQ
	ah        *mlx5.AH
	peer      *ppSide
	pool      *ppPool
	buf       *mlx5.Buffer
	mr        *mlx5.MR
	mem       []byte
	window    int // send work requests outstanding, at most: QP.Caps
	maxSGE    int
	maxInline int
	// The buffer: window send slots (sources of sends and writes,
	// destinations of reads), the write region (a slot for each of the
	// peer's send slots), the read region (a fixed pattern).
	writeOff, readOff, readLen int
	sends                      []ppSend
	free                       []int
	sq                         fifo[int] // posted, not retired, oldest first
	expect                     fifo[ppMsg]
	serial                     uint64
	seqOut                     uint32
	pending                    int  // pings to answer
	pings, answers             int  // A's pings posted, answers received
	overdraw                   bool // consume the peer's receives without credit (a stall)
	gen                        bool // post work
	failed                     bool // a send completed in error
	allow                      []mlx5.WCStatus
	errStatus                  mlx5.WCStatus // the first error
	wrs                        [ppListMax]mlx5.SendWR
	sgls                       [ppListMax][ppMaxSGE]mlx5.SGE
	inls                       [ppListMax][ppMaxSGE][]byte
	slots                      [ppListMax]int
}

func (s *ppSide) slot(i int) []byte {
	sz := s.p.slotSize
	return s.mem[i*sz : (i+1)*sz]
}

func (s *ppSide) base() uint64 { return s.mr.Addr() }

type ppConfig struct {
	name     string
	typ      mlx5.QPType
	srq      bool // both QPs receive from one SRQ
	sharedCQ bool // one CQ for both QPs' sends and receives
	maxMsg   int
	// RNR retries and timer of the connection (Connect's when 0).
	rnrRetry, minRNRTimer uint8
}

type ppStats struct {
	ops                             map[string]int
	single, list, batch             int
	unsignaled, multi               int
	recvSingle, recvList, recvs     int
	sendCQEs, recvCQEs, silent      int
	flushedSends, flushedRecvs, err int
	bytes                           int64
}

// pingpong is the test's state: the context, the two sides, the pools,
// the PRNG and the counts.
type pingpong struct {
	t         testing.TB
	cfg       ppConfig
	rng       *rand.Rand
	c         *mlx5.Context
	dev       *model.Device
	pd        *mlx5.PD
	path      mlx5.AddressPath
	sides     [2]*ppSide
	bySide    map[uint32]*ppSide
	cqs       []*mlx5.CQ
	pools     []*ppPool
	bufs      []*mlx5.Buffer
	slotSize  int
	wc        [64]mlx5.Completion
	target    int // A posts until this many send work requests were posted
	posted    int
	errMode   bool
	stall     bool            // A pings past B's credit (stallPing)
	stallWant mlx5.WCStatus   // the error of the first ping that finds no receive
	stalled   int             // the slot of the first ping that found no receive, -1 before it
	failedWR  map[uint64]bool // sends completed in error (errMode)
	gotMsg    map[uint64]bool // messages received (errMode)
	scratch   []byte
	scratch2  []byte
	st        ppStats
	last      time.Time // of the last progress
	hang      time.Duration
}

func newPingPong(t testing.TB, cfg ppConfig, seed uint64) *pingpong {
	t.Helper()
	dev, err := model.New("cx7")
	if err != nil {
		t.Fatal(err)
	}
	c := mlx5.NewContext(dev)
	p := &pingpong{t: t, cfg: cfg, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), c: c, dev: dev,
		bySide: map[uint32]*ppSide{}, hang: 10 * time.Second}
	if raceEnabled || underQEMUUser {
		p.hang = 60 * time.Second
	}
	p.st.ops = map[string]int{}
	// The context goes first: the device must stop using the buffers
	// before they are unmapped.
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		for _, b := range p.bufs {
			b.Close()
		}
		if f := dev.Faults(); len(f) > 0 {
			t.Errorf("model faults: %q", f)
		}
	})
	p.slotSize = (cfg.maxMsg + ppGRH + ppGap*(ppMaxSGE+1) + 63) &^ 63
	p.scratch, p.scratch2 = make([]byte, p.slotSize), make([]byte, p.slotSize)
	if p.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if p.path, err = c.LoopbackPath(1); err != nil {
		t.Fatal(err)
	}
	var srq *ppPool
	if cfg.srq {
		srq = p.newSRQPool()
	}
	p.addPair(srq)
	return p
}

func (p *pingpong) fatalf(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("%s: %s\n%s", p.cfg.name, fmt.Sprintf(format, args...), p.state())
}

// state describes where everything is, for a failure.
func (p *pingpong) state() string {
	var b strings.Builder
	for _, s := range p.sides {
		if s == nil {
			continue
		}
		fmt.Fprintf(&b, "%s (QP %#x): %d sends outstanding, %d messages expected, %d pings to answer, failed %v; ",
			s.name, s.qpn, s.sq.len(), s.expect.len(), s.pending, s.failed)
	}
	for _, pl := range p.pools {
		fmt.Fprintf(&b, "%s: %d receives posted (%d credit), failed %v; ", pl.name, pl.posted, pl.credit, pl.failed)
	}
	fmt.Fprintf(&b, "%d sends posted. Model: WQE errors %q, faults %q", p.posted, last(p.dev.WQEErrors(), 5), last(p.dev.Faults(), 5))
	return b.String()
}

func last(s []string, n int) []string { return s[max(0, len(s)-n):] }

// newSRQPool creates an SRQ and the memory its receives scatter into.
func (p *pingpong) newSRQPool() *ppPool {
	srq, err := p.c.CreateSRQ(mlx5.SRQOptions{PD: p.pd, MaxWR: 128, MaxSGE: ppMaxSGE})
	if err != nil {
		p.t.Fatal(err)
	}
	pl := &ppPool{p: p, id: 0, name: fmt.Sprintf("SRQ %#x", srq.SRQN()), srq: srq, capacity: srq.Caps().MaxWR,
		maxSGE: min(srq.Caps().MaxSGE, ppMaxSGE)}
	p.poolMemory(pl)
	return pl
}

// newRQPool is the receive queue of qp.
func (p *pingpong) newRQPool(id int, name string, qp *mlx5.QP) *ppPool {
	pl := &ppPool{p: p, id: id, name: name + "'s receive queue", qp: qp, capacity: qp.Caps().MaxRecvWR,
		maxSGE: min(qp.Caps().MaxRecvSGE, ppMaxSGE)}
	p.poolMemory(pl)
	return pl
}

func (p *pingpong) poolMemory(pl *ppPool) {
	pl.payload = p.cfg.maxMsg
	if p.cfg.typ == mlx5.QPTypeUD {
		pl.payload += ppGRH
	}
	pl.slotSize = p.slotSize
	var err error
	if pl.buf, err = mlx5.AllocBuffer(pl.capacity * pl.slotSize); err != nil {
		p.t.Fatal(err)
	}
	p.bufs = append(p.bufs, pl.buf)
	pl.mem = pl.buf.Bytes()
	if pl.mr, err = p.pd.RegMR(pl.mem, mlx5.AccessLocalWrite); err != nil {
		p.t.Fatal(err)
	}
	pl.recs = make([]ppRecv, pl.capacity)
	for i := pl.capacity - 1; i >= 0; i-- {
		pl.free = append(pl.free, i)
	}
	p.pools = append(p.pools, pl)
}

// addPair creates two QPs (on srq when not nil), their CQs and memory,
// connects them (RC) or readies them (UD), and makes them the sides.
func (p *pingpong) addPair(srq *ppPool) {
	t := p.t
	cfg := p.cfg
	var shared *mlx5.CQ
	if cfg.sharedCQ {
		shared = p.cq(2048)
	}
	p.cqs = p.cqs[:0]
	if shared != nil {
		p.cqs = append(p.cqs, shared)
	}
	names := [2]string{"A", "B"}
	if p.sides[0] != nil {
		names = [2]string{"C", "D"}
	}
	var sides [2]*ppSide
	for i := range sides {
		s := &ppSide{p: p, id: i, name: names[i], gen: true}
		if old := p.sides[i]; old != nil {
			// The next pair goes on from the serial numbers of the
			// one it replaces: a wr_id is never used twice in a run,
			// so a message of the new pair is not taken for one the
			// old pair's failed send carried (failedWR, gotMsg).
			s.serial = old.serial
		}
		if shared != nil {
			s.scq, s.rcq = shared, shared
		} else {
			s.scq, s.rcq = p.cq(512), p.cq(512)
			p.cqs = append(p.cqs, s.scq, s.rcq)
		}
		o := mlx5.QPOptions{Type: cfg.typ, PD: p.pd, SendCQ: s.scq, RecvCQ: s.rcq, MaxSendWR: 64, MaxSendSGE: ppMaxSGE,
			MaxInlineData: 256, MaxRecvWR: 64, MaxRecvSGE: ppMaxSGE}
		if srq != nil {
			o.SRQ, o.MaxRecvWR, o.MaxRecvSGE = srq.srq, 0, 0
		}
		qp, err := p.c.CreateQP(o)
		if err != nil {
			t.Fatal(err)
		}
		s.qp, s.qpn = qp, qp.QPN()
		caps := qp.Caps()
		s.window, s.maxSGE, s.maxInline = caps.MaxSendWR, min(caps.MaxSendSGE, ppMaxSGE), min(caps.MaxInlineData, cfg.maxMsg)
		if srq != nil {
			s.pool = srq
		} else {
			s.pool = p.newRQPool(i, s.name, qp)
		}
		if cfg.typ == mlx5.QPTypeUD {
			if s.ah, err = p.pd.CreateAH(p.path); err != nil {
				t.Fatal(err)
			}
		}
		sides[i] = s
		p.bySide[s.qpn] = s
	}
	a, b := sides[0], sides[1]
	a.peer, b.peer = b, a
	for _, s := range sides {
		s.writeOff = s.window * p.slotSize
		s.readOff = s.writeOff + s.peer.window*p.slotSize
		s.readLen = 2 * cfg.maxMsg
		var err error
		if s.buf, err = mlx5.AllocBuffer(s.readOff + s.readLen); err != nil {
			t.Fatal(err)
		}
		p.bufs = append(p.bufs, s.buf)
		s.mem = s.buf.Bytes()
		if s.mr, err = p.pd.RegMR(s.mem, mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead); err != nil {
			t.Fatal(err)
		}
		ppContent(s.mem[s.readOff:], uint64(s.qpn), 0xffffffff)
		s.sends = make([]ppSend, s.window)
		for i := s.window - 1; i >= 0; i-- {
			s.free = append(s.free, i)
		}
	}
	for _, s := range sides {
		var err error
		switch {
		case cfg.typ == mlx5.QPTypeUD:
			err = s.qp.Ready(1, ppQKey)
		case cfg.rnrRetry != 0 || cfg.minRNRTimer != 0:
			err = ppConnect(s.qp, s.peer.qpn, p.path, cfg.rnrRetry, cfg.minRNRTimer)
		default:
			err = s.qp.Connect(s.peer.qpn, p.path)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	p.sides = sides
}

func (p *pingpong) cq(n int) *mlx5.CQ {
	cq, err := p.c.CreateCQ(mlx5.CQOptions{Entries: n})
	if err != nil {
		p.t.Fatal(err)
	}
	return cq
}

// ppConnect is QP.Connect with the RNR retry count and the RNR NAK timer
// given.
func ppConnect(qp *mlx5.QP, remote uint32, path mlx5.AddressPath, rnrRetry, minRNRTimer uint8) error {
	steps := []struct {
		a    mlx5.QPAttr
		mask mlx5.QPAttrMask
	}{
		{mlx5.QPAttr{State: mlx5.QPStateInit, Port: path.Port, Access: mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead},
			mlx5.QPAttrState | mlx5.QPAttrPKeyIndex | mlx5.QPAttrPort | mlx5.QPAttrAccessFlags},
		{mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path, DestQPN: remote, MaxDestRdAtomic: 16, MinRNRTimer: minRNRTimer},
			mlx5.QPAttrState | mlx5.QPAttrAV | mlx5.QPAttrPathMTU | mlx5.QPAttrDestQPN | mlx5.QPAttrRQPSN | mlx5.QPAttrMaxDestRdAtomic | mlx5.QPAttrMinRNRTimer},
		{mlx5.QPAttr{State: mlx5.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: rnrRetry, MaxRdAtomic: 16},
			mlx5.QPAttrState | mlx5.QPAttrTimeout | mlx5.QPAttrRetryCnt | mlx5.QPAttrRNRRetry | mlx5.QPAttrSQPSN | mlx5.QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.a, s.mask); err != nil {
			return err
		}
	}
	return nil
}

// size is a message length of at most n bytes: mostly small, sometimes
// up to n.
func (p *pingpong) size(n int) int {
	switch r := p.rng.IntN(100); {
	case r < 15:
		return p.rng.IntN(min(17, n+1))
	case r < 70:
		return p.rng.IntN(min(257, n+1))
	case r < 95:
		return p.rng.IntN(min(1025, n+1))
	}
	return p.rng.IntN(n + 1)
}

// split lays total bytes out as up to k pieces of at least one byte, with
// canary gaps, and now and then a zero-length piece (which libmlx5 and
// mlx5go post no data segment for).
func (p *pingpong) split(pc *ppPieces, total, k, most int) {
	pc.k = 0
	if total == 0 {
		return
	}
	k = min(k, total)
	zero := -1
	if k < most && p.rng.IntN(8) == 0 {
		zero = p.rng.IntN(k + 1)
	}
	off, left := ppGap, total
	for j := range k {
		if j == zero {
			pc.off[pc.k], pc.n[pc.k] = off, 0
			pc.k++
		}
		n := left
		if j < k-1 {
			n = 1 + p.rng.IntN(left-(k-1-j))
		}
		pc.off[pc.k], pc.n[pc.k] = off, n
		pc.k++
		off += n + ppGap
		left -= n
	}
	if zero == k {
		pc.off[pc.k], pc.n[pc.k] = off, 0
		pc.k++
	}
}

// The operations.
var ppRCOps = []struct {
	op     mlx5.Opcode
	weight int
}{{mlx5.OpSend, 25}, {mlx5.OpSendImm, 15}, {mlx5.OpRDMAWrite, 20}, {mlx5.OpRDMAWriteImm, 15}, {mlx5.OpRDMARead, 25}}

func consumes(op mlx5.Opcode) bool {
	return op == mlx5.OpSend || op == mlx5.OpSendImm || op == mlx5.OpRDMAWriteImm
}

// Which operations pick may choose.
const (
	ppAny = iota
	ppConsuming
	ppRDMA
)

// pick chooses an operation of s: one that consumes a receive only with
// the peer's credit (a stalled ping overdraws it); 0 when there is none
// to post (UD without credit).
func (s *ppSide) pick(which int) mlx5.Opcode {
	p := s.p
	credit := (s.peer.pool.credit > 0 || s.overdraw) && which != ppRDMA
	consuming := which == ppConsuming
	if p.cfg.typ == mlx5.QPTypeUD {
		if !credit {
			return 0
		}
		if p.rng.IntN(5) < 3 {
			return mlx5.OpSend
		}
		return mlx5.OpSendImm
	}
	if consuming {
		if !credit {
			return 0
		}
		switch p.rng.IntN(3) {
		case 0:
			return mlx5.OpSend
		case 1:
			return mlx5.OpSendImm
		}
		return mlx5.OpRDMAWriteImm
	}
	r := p.rng.IntN(100)
	for _, o := range ppRCOps {
		if r -= o.weight; r < 0 {
			if consumes(o.op) && !credit {
				if p.rng.IntN(2) == 0 {
					return mlx5.OpRDMAWrite
				}
				return mlx5.OpRDMARead
			}
			return o.op
		}
	}
	panic("unreachable")
}

// prepare builds work request i of a group: a slot, its bytes, its
// record; a consuming one takes a credit and is expected at the peer.
func (s *ppSide) prepare(i int, op mlx5.Opcode) *ppSend { return s.prepareN(i, op, -1) }

// prepareN is prepare with n bytes gathered from memory (not inline), or
// a random length and layout for n < 0.
func (s *ppSide) prepareN(i int, op mlx5.Opcode, n int) *ppSend {
	p := s.p
	peer := s.peer
	slot := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.slots[i] = slot
	r := &s.sends[slot]
	s.serial++
	*r = ppSend{wrID: ppWRSend | uint64(s.id)<<62 | s.serial<<ppWRSerSh | uint64(slot), op: op,
		signaled: p.rng.IntN(4) != 0, consume: consumes(op), refs: 1}
	limit := p.cfg.maxMsg
	if n < 0 && op != mlx5.OpRDMARead && s.maxInline > 0 && p.rng.IntN(5) == 0 {
		r.inline, limit = true, s.maxInline
	}
	if r.n = n; n < 0 {
		r.n = p.size(limit)
	}
	r.inline = r.inline && r.n > 0
	p.split(&r.pcs, r.n, 1+p.rng.IntN(s.maxSGE), s.maxSGE)
	mem := s.slot(slot)
	canary(mem)
	wr := &s.wrs[i]
	*wr = mlx5.SendWR{WrID: r.wrID, Opcode: op}
	if r.signaled {
		wr.Flags = mlx5.SendSignaled
	}
	if op != mlx5.OpRDMARead {
		if r.consume {
			r.seq = s.seqOut
			s.seqOut++
		}
		msg := p.scratch[:r.n]
		ppContent(msg, r.wrID, r.seq)
		pos := 0
		for j := range r.pcs.k {
			pos += copy(mem[r.pcs.off[j]:r.pcs.off[j]+r.pcs.n[j]], msg[pos:])
		}
	}
	switch op {
	case mlx5.OpSendImm, mlx5.OpRDMAWriteImm:
		r.imm = uint32(r.wrID>>ppWRSerSh) * 0x01000193
		wr.Imm = r.imm
	}
	switch op {
	case mlx5.OpRDMAWrite, mlx5.OpRDMAWriteImm:
		canary(peer.slotWrite(slot))
		wr.RemoteAddr, wr.RKey = peer.base()+uint64(peer.writeOff+slot*p.slotSize), peer.mr.RKey()
		if op == mlx5.OpRDMAWriteImm {
			r.refs++
		}
	case mlx5.OpRDMARead:
		r.roff = p.rng.IntN(peer.readLen - r.n + 1)
		wr.RemoteAddr, wr.RKey = peer.base()+uint64(peer.readOff+r.roff), peer.mr.RKey()
	}
	at := s.base() + uint64(slot*p.slotSize)
	for j := range r.pcs.k {
		off, n := r.pcs.off[j], r.pcs.n[j]
		if r.inline {
			s.inls[i][j] = mem[off : off+n]
		} else {
			s.sgls[i][j] = mlx5.SGE{Addr: at + uint64(off), Length: uint32(n), LKey: s.mr.LKey()}
		}
	}
	if r.inline {
		wr.Inline = s.inls[i][:r.pcs.k]
	} else if r.pcs.k > 0 {
		wr.SGL = s.sgls[i][:r.pcs.k]
	}
	if s.ah != nil {
		wr.AH, wr.RemoteQPN, wr.QKey = s.ah, peer.qpn, ppQKey
	}
	if r.consume {
		peer.pool.credit--
		peer.expect.push(ppMsg{wrID: r.wrID, op: op, n: r.n, seq: r.seq, imm: r.imm, slot: slot})
	}
	s.sq.push(slot)
	p.posted++
	st := &p.st
	name := op.String()
	if r.inline {
		name += " inline"
	}
	st.ops[name]++
	if !r.signaled {
		st.unsignaled++
	}
	if r.pcs.k > 1 {
		st.multi++
	}
	st.bytes += int64(r.n)
	return r
}

// slotWrite is the place in s's write region where the peer writes
// from its send slot slot.
func (s *ppSide) slotWrite(slot int) []byte {
	sz := s.p.slotSize
	return s.mem[s.writeOff+slot*sz : s.writeOff+(slot+1)*sz]
}

// post posts the first n prepared work requests singly, as a list or as
// a batch, the last signaled.
func (s *ppSide) post(n, mode int) {
	p := s.p
	last := &s.sends[s.slots[n-1]]
	if !last.signaled {
		last.signaled = true
		s.wrs[n-1].Flags |= mlx5.SendSignaled
		p.st.unsignaled--
	}
	var err error
	switch mode {
	case 0:
		for i := range n {
			if err = s.qp.PostSend(&s.wrs[i]); err != nil {
				break
			}
		}
		p.st.single += n
	case 1:
		err = s.qp.PostSendList(s.wrs[:n])
		p.st.list++
	default:
		b := s.qp.Begin()
		for i := range n {
			b.Add(&s.wrs[i])
		}
		err = b.Commit()
		p.st.batch++
	}
	if err != nil {
		p.fatalf("%s: post of %d work requests (mode %d): %v", s.name, n, mode, err)
	}
	for i := range n {
		s.wrs[i] = mlx5.SendWR{} // keep nothing of the slots in the WRs
	}
}

// groupSize is the mode (single, list, batch) and size of a group that
// fits room.
func (p *pingpong) groupSize(room int) (mode, n int) {
	mode = p.rng.IntN(3)
	n = 1
	if p.rng.IntN(4) != 0 {
		n = 1 + p.rng.IntN(ppGroupMax)
	}
	return mode, min(n, room)
}

// ping is A's turn: a group of operations, within the window and the
// target.
func (s *ppSide) ping() bool {
	p := s.p
	room := min(len(s.free), p.target-p.posted)
	if !s.gen || room <= 0 {
		return false
	}
	mode, n := p.groupSize(room)
	k := 0
	for k < n {
		which := ppAny
		if s.pings-s.answers >= s.peer.pool.capacity {
			if p.rng.IntN(4) != 0 {
				break // enough pings unanswered: wait for answers
			}
			which = ppRDMA
		}
		op := s.pick(which)
		if op == 0 {
			break
		}
		if r := s.prepare(k, op); r.consume {
			r.ping = true
			s.peer.expect.at(s.peer.expect.len() - 1).ping = true
			s.pings++
		}
		k++
	}
	if k == 0 {
		return false
	}
	s.post(k, mode)
	return true
}

// stallPing is a stalled A: it pings without the peer's credit until its
// window is full; the first ping with no receive behind it is poisoned
// with want (0: no error of its own is expected).
func (s *ppSide) stallPing() bool {
	p := s.p
	room := len(s.free)
	if !s.gen || room <= 0 {
		return false
	}
	mode, n := p.groupSize(room)
	for k := range n {
		which := ppAny
		if p.rng.IntN(3) != 0 {
			which = ppConsuming
		}
		op := s.pick(which)
		credit := s.peer.pool.credit
		r := s.prepare(k, op)
		if !r.consume || credit > 0 || p.stalled >= 0 {
			continue
		}
		p.stalled = s.slots[k]
		if p.stallWant != mlx5.WCSuccess {
			r.poisoned, r.want = true, p.stallWant
		}
	}
	s.post(n, mode)
	return true
}

// answer is B's turn: a message for each ping received (with the peer's
// credit), and now and then an RDMA operation between them.
func (s *ppSide) answer() bool {
	p := s.p
	room := len(s.free)
	if !s.gen || s.pending == 0 || room <= 0 {
		return false
	}
	mode, n := p.groupSize(room)
	k := 0
	for k < n && s.pending > 0 {
		op := s.pick(ppConsuming)
		if op == 0 {
			break
		}
		s.prepare(k, op)
		s.pending--
		k++
		if p.cfg.typ != mlx5.QPTypeUD && k < n && p.rng.IntN(4) == 0 {
			s.prepare(k, s.pickRDMA())
			k++
		}
	}
	if k == 0 {
		return false
	}
	s.post(k, mode)
	return true
}

func (s *ppSide) pickRDMA() mlx5.Opcode {
	if s.p.rng.IntN(2) == 0 {
		return mlx5.OpRDMAWrite
	}
	return mlx5.OpRDMARead
}

// fill posts receives until the pool is full: one at a time or in lists.
func (p *pingpong) fill(pl *ppPool) bool {
	if pl.hold || pl.failed {
		return false
	}
	room := pl.capacity - pl.posted
	did := room > 0
	for room > 0 {
		n := 1
		if p.rng.IntN(2) == 0 {
			n = 1 + p.rng.IntN(min(room, ppGroupMax))
		}
		p.postRecv(pl, n)
		room -= n
	}
	return did
}

// postRecv posts n receives to the pool, singly when n is 1.
func (p *pingpong) postRecv(pl *ppPool, n int) {
	for i := range n {
		slot := pl.free[len(pl.free)-1]
		pl.free = pl.free[:len(pl.free)-1]
		rec := &pl.recs[slot]
		pl.serial++
		*rec = ppRecv{wrID: uint64(pl.id)<<62 | pl.serial<<ppWRSerSh | uint64(slot), posted: true}
		p.split(&rec.pcs, pl.payload, 1+p.rng.IntN(pl.maxSGE), pl.maxSGE)
		canary(pl.slot(slot))
		at := pl.mr.Addr() + uint64(slot*pl.slotSize)
		for j := range rec.pcs.k {
			pl.sgls[i][j] = mlx5.SGE{Addr: at + uint64(rec.pcs.off[j]), Length: uint32(rec.pcs.n[j]), LKey: pl.mr.LKey()}
		}
		pl.wrs[i] = mlx5.RecvWR{WrID: rec.wrID, SGL: pl.sgls[i][:rec.pcs.k]}
		if pl.srq == nil {
			pl.order.push(slot)
		}
	}
	var err error
	switch {
	case n == 1 && pl.srq != nil:
		err = pl.srq.PostRecv(pl.wrs[0].WrID, pl.wrs[0].SGL)
	case n == 1:
		err = pl.qp.PostRecv(pl.wrs[0].WrID, pl.wrs[0].SGL)
	case pl.srq != nil:
		err = pl.srq.PostRecvList(pl.wrs[:n])
	default:
		err = pl.qp.PostRecvList(pl.wrs[:n])
	}
	if err != nil {
		p.fatalf("%s: post of %d receives: %v", pl.name, n, err)
	}
	if n == 1 {
		p.st.recvSingle++
	} else {
		p.st.recvList++
	}
	p.st.recvs += n
	pl.posted += n
	pl.credit += n
}

// poll polls every CQ once and checks what it finds.
func (p *pingpong) poll() int {
	total := 0
	for _, cq := range p.cqs {
		n, err := cq.Poll(p.wc[:])
		if err != nil {
			p.fatalf("poll %#x: %v", cq.CQN(), err)
		}
		for i := range n {
			p.complete(cq, &p.wc[i])
		}
		total += n
	}
	return total
}

func (p *pingpong) complete(cq *mlx5.CQ, c *mlx5.Completion) {
	s := p.bySide[c.QPN]
	if s == nil {
		p.fatalf("a completion names QP %#x, which is not one of the test's: %+v", c.QPN, *c)
	}
	if c.WrID&ppWRSend != 0 {
		if cq != s.scq {
			p.fatalf("%s: send completion %#x on CQ %#x, not its send CQ %#x", s.name, c.WrID, cq.CQN(), s.scq.CQN())
		}
		s.sendDone(c)
		return
	}
	if cq != s.rcq {
		p.fatalf("%s: receive completion %#x on CQ %#x, not its receive CQ %#x", s.name, c.WrID, cq.CQN(), s.rcq.CQN())
	}
	s.recvDone(c)
}

var wcOf = map[mlx5.Opcode]mlx5.WCOpcode{mlx5.OpSend: mlx5.WCSend, mlx5.OpSendImm: mlx5.WCSend,
	mlx5.OpRDMAWrite: mlx5.WCRDMAWrite, mlx5.OpRDMAWriteImm: mlx5.WCRDMAWrite, mlx5.OpRDMARead: mlx5.WCRDMARead}

// sendDone is a send completion of s. The send queue completes in order:
// the work requests before the one it names must be unsignaled ones that
// succeeded (they retire now); after a failure every work request has a
// completion of its own, a flush.
func (s *ppSide) sendDone(c *mlx5.Completion) {
	p := s.p
	p.st.sendCQEs++
	if int(c.WrID>>62&1) != s.id {
		p.fatalf("%s: send completion with wr_id %#x, another side's", s.name, c.WrID)
	}
	at := -1
	for i := range s.sq.len() {
		if s.sends[*s.sq.at(i)].wrID == c.WrID {
			at = i
			break
		}
	}
	if at < 0 {
		p.fatalf("%s: send completion %+v names no outstanding work request (a duplicate, or never posted)", s.name, *c)
	}
	for range at {
		r := &s.sends[s.sq.pop()]
		switch {
		case r.signaled:
			p.fatalf("%s: signaled %v %#x has no completion, but %#x after it has (%v)", s.name, r.op, r.wrID, c.WrID, c.Status)
		case s.failed:
			p.fatalf("%s: %v %#x posted after a failure has no completion, but %#x after it has (%v)", s.name, r.op, r.wrID, c.WrID, c.Status)
		case r.poisoned:
			p.fatalf("%s: poisoned %v %#x has no completion, but %#x after it has (%v)", s.name, r.op, r.wrID, c.WrID, c.Status)
		}
		p.st.silent++
		s.retire(r, true)
	}
	r := &s.sends[s.sq.pop()]
	if c.Status == mlx5.WCSuccess {
		switch {
		case !r.signaled:
			p.fatalf("%s: unsignaled %v %#x completed: %+v", s.name, r.op, r.wrID, *c)
		case s.failed:
			p.fatalf("%s: %v %#x succeeded after the send queue failed (%v)", s.name, r.op, r.wrID, s.errStatus)
		case r.poisoned:
			p.fatalf("%s: poisoned %v %#x succeeded, want %v", s.name, r.op, r.wrID, r.want)
		case c.Opcode != wcOf[r.op]:
			p.fatalf("%s: %v %#x completed as %v", s.name, r.op, r.wrID, c.Opcode)
		case r.op == mlx5.OpRDMARead && c.ByteLen != uint32(r.n):
			p.fatalf("%s: READ %#x of %d bytes completed with byte_len %d", s.name, r.wrID, r.n, c.ByteLen)
		}
		s.retire(r, true)
		return
	}
	switch {
	case !s.failed && r.poisoned && c.Status != r.want:
		p.fatalf("%s: poisoned %v %#x completed with %v, want %v", s.name, r.op, r.wrID, c.Status, r.want)
	case !s.failed && !r.poisoned && !slices.Contains(s.allow, c.Status):
		p.fatalf("%s: %v %#x failed with %v (vendor syndrome %#x); may fail first with %v", s.name, r.op, r.wrID, c.Status, c.VendorErr, s.allow)
	case s.failed && c.Status != mlx5.WCWRFlushErr:
		p.fatalf("%s: %v %#x completed with %v after the send queue failed with %v: want a flush", s.name, r.op, r.wrID, c.Status, s.errStatus)
	}
	if !s.failed {
		s.failed, s.errStatus = true, c.Status
	}
	if c.Status == mlx5.WCWRFlushErr {
		p.st.flushedSends++
	} else {
		p.st.err++
	}
	s.retire(r, false)
}

// retire ends send work request r, which succeeded (its data are checked)
// or not.
func (s *ppSide) retire(r *ppSend, ok bool) {
	p := s.p
	slot := int(r.wrID & ppWRSlot)
	if !ok {
		if p.failedWR != nil {
			p.failedWR[r.wrID] = true
		}
		if r.op == mlx5.OpRDMAWriteImm {
			r.refs-- // no receive will come
		}
		s.unref(slot)
		return
	}
	peer := s.peer
	switch r.op {
	case mlx5.OpRDMAWrite, mlx5.OpRDMAWriteImm:
		want := p.scratch[:r.n]
		ppContent(want, r.wrID, r.seq)
		if msg := (&ppPieces{off: [ppMaxSGE]int{0}, n: [ppMaxSGE]int{r.n}, k: 1}).collect(peer.slotWrite(slot), r.n, p.scratch2); msg != "" {
			p.fatalf("%s: %v %#x of %d bytes: in %s's memory, %s", s.name, r.op, r.wrID, r.n, peer.name, msg)
		}
		if d := diff(p.scratch2[:r.n], want); d != "" {
			p.fatalf("%s: %v %#x of %d bytes: in %s's memory, %s", s.name, r.op, r.wrID, r.n, peer.name, d)
		}
	case mlx5.OpRDMARead:
		if msg := r.pcs.collect(s.slot(slot), r.n, p.scratch2); msg != "" {
			p.fatalf("%s: READ %#x of %d bytes in %d pieces: %s", s.name, r.wrID, r.n, r.pcs.k, msg)
		}
		if d := diff(p.scratch2[:r.n], peer.mem[peer.readOff+r.roff:peer.readOff+r.roff+r.n]); d != "" {
			p.fatalf("%s: READ %#x of %d bytes from %s's offset %d: %s", s.name, r.wrID, r.n, peer.name, r.roff, d)
		}
	}
	s.unref(slot)
}

func (s *ppSide) unref(slot int) {
	r := &s.sends[slot]
	if r.refs--; r.refs == 0 {
		s.free = append(s.free, slot)
	}
}

// recvDone is a receive completion of s: the receive it names, and the
// message its direction sent next.
func (s *ppSide) recvDone(c *mlx5.Completion) {
	p := s.p
	pl := s.pool
	p.st.recvCQEs++
	slot := int(c.WrID & ppWRSlot)
	if int(c.WrID>>62&1) != pl.id || slot >= len(pl.recs) || !pl.recs[slot].posted || pl.recs[slot].wrID != c.WrID {
		p.fatalf("%s: receive completion %+v names no outstanding receive of %s (a duplicate, or never posted)", s.name, *c, pl.name)
	}
	if pl.srq == nil {
		if front := *pl.order.at(0); front != slot {
			p.fatalf("%s: receive %#x completed before %#x, posted earlier", s.name, c.WrID, pl.recs[front].wrID)
		}
		pl.order.pop()
	}
	rec := &pl.recs[slot]
	rec.posted = false
	pl.posted--
	pl.free = append(pl.free, slot)
	if pl.watch != nil {
		delete(pl.watch, c.WrID)
	}
	if c.Status != mlx5.WCSuccess {
		switch {
		case c.Status != mlx5.WCWRFlushErr:
			p.fatalf("%s: receive %#x completed with %v", s.name, c.WrID, c.Status)
		case pl.srq != nil:
			// The SRQ's WQEs are the SRQ's: a QP in error flushes only
			// what it took from it, and the model takes a receive whole
			// with its message.
			p.fatalf("%s: receive %#x of %s flushed by a QP's error", s.name, c.WrID, pl.name)
		case !p.errMode:
			p.fatalf("%s: receive %#x flushed", s.name, c.WrID)
		}
		pl.failed = true
		p.st.flushedRecvs++
		return
	}
	if pl.failed {
		p.fatalf("%s: receive %#x succeeded after %s flushed", s.name, c.WrID, pl.name)
	}
	if s.expect.len() == 0 {
		p.fatalf("%s: receive %#x completed (%+v), but %s sent no message it has not received", s.name, c.WrID, *c, s.peer.name)
	}
	m := s.expect.pop()
	if p.errMode {
		p.gotMsg[m.wrID] = true
	}
	wantOp, wantImm, n := mlx5.WCRecv, m.op != mlx5.OpSend, m.n
	if m.op == mlx5.OpRDMAWriteImm {
		wantOp = mlx5.WCRecvRDMAWithImm
	}
	if p.cfg.typ == mlx5.QPTypeUD {
		n += ppGRH
	}
	what := func() string {
		return fmt.Sprintf("%s: receive %#x of %v %#x (seq %d, %d bytes) from %s", s.name, c.WrID, m.op, m.wrID, m.seq, m.n, s.peer.name)
	}
	switch {
	case c.Opcode != wantOp:
		p.fatalf("%s: opcode %v, want %v", what(), c.Opcode, wantOp)
	case c.WithImm != wantImm || wantImm && c.Imm != m.imm:
		p.fatalf("%s: immediate %v %#x, want %v %#x", what(), c.WithImm, c.Imm, wantImm, m.imm)
	case c.ByteLen != uint32(n):
		p.fatalf("%s: byte_len %d, want %d", what(), c.ByteLen, n)
	case c.WithInv:
		p.fatalf("%s: invalidated %#x", what(), c.InvalidatedRkey)
	}
	if p.cfg.typ == mlx5.QPTypeUD && (c.SrcQP != s.peer.qpn || !c.GRH) {
		p.fatalf("%s: source QP %#x, GRH %v; want %#x and a GRH", what(), c.SrcQP, c.GRH, s.peer.qpn)
	}
	want := p.scratch[:m.n]
	ppContent(want, m.wrID, m.seq)
	if m.op == mlx5.OpRDMAWriteImm {
		if msg := rec.pcs.collect(pl.slot(slot), 0, p.scratch2); msg != "" {
			p.fatalf("%s: the receive buffer was written: %s", what(), msg)
		}
		if msg := (&ppPieces{n: [ppMaxSGE]int{m.n}, k: 1}).collect(s.slotWrite(m.slot), m.n, p.scratch2); msg != "" {
			p.fatalf("%s: in the write region: %s", what(), msg)
		}
		if d := diff(p.scratch2[:m.n], want); d != "" {
			p.fatalf("%s: in the write region: %s", what(), d)
		}
		s.peer.unref(m.slot)
	} else {
		got := p.scratch2[:n]
		if msg := rec.pcs.collect(pl.slot(slot), n, got); msg != "" {
			p.fatalf("%s: %s", what(), msg)
		}
		if p.cfg.typ == mlx5.QPTypeUD {
			if msg := p.checkGRH(got[:ppGRH]); msg != "" {
				p.fatalf("%s: %s", what(), msg)
			}
			got = got[ppGRH:]
		}
		if d := diff(got, want); d != "" {
			p.fatalf("%s: %s", what(), d)
		}
	}
	if m.ping {
		s.pending++
	} else if s.id == 0 {
		s.answers++
	}
}

// checkGRH checks the 40 bytes a RoCE v2 datagram leaves before its
// payload: over IPv4, the IPv4 header in the last 20 (ibv_poll_cq(3)),
// from the port's address to itself.
func (p *pingpong) checkGRH(b []byte) string {
	g := p.path.GID
	if !bytes.Equal(g[:12], []byte{10: 0xff, 11: 0xff}) {
		if b[0]>>4 != 6 || !bytes.Equal(b[8:24], g[:]) || !bytes.Equal(b[24:40], g[:]) {
			return fmt.Sprintf("the GRH % x is no IPv6 header from %x to itself", b, g)
		}
		return ""
	}
	ip := b[20:]
	if ip[0] != 0x45 || ip[9] != 17 || !bytes.Equal(ip[12:16], g[12:]) || !bytes.Equal(ip[16:20], g[12:]) {
		return fmt.Sprintf("the GRH's last 20 bytes % x are no IPv4 UDP header from %d.%d.%d.%d to itself", ip, g[12], g[13], g[14], g[15])
	}
	return ""
}

// step is one round: receives, A's pings, B's answers, a poll.
func (p *pingpong) step() {
	progress := false
	for _, pl := range p.pools {
		progress = p.fill(pl) || progress
	}
	a, b := p.sides[0], p.sides[1]
	switch {
	case p.stall:
		progress = a.stallPing() || progress
	case p.posted < p.target:
		progress = a.ping() || progress
	}
	progress = b.answer() || progress
	if p.poll() > 0 {
		progress = true
	}
	p.progress(progress)
}

func (p *pingpong) progress(did bool) {
	if did {
		p.last = time.Now()
		return
	}
	runtime.Gosched()
	if time.Since(p.last) > p.hang {
		p.fatalf("no progress for %v", p.hang)
	}
}

// until steps until done.
func (p *pingpong) until(done func() bool) {
	p.last = time.Now()
	for !done() {
		p.step()
	}
}

// idle says the sides have nothing outstanding: no sends, no messages on
// their way, no pings to answer.
func (p *pingpong) idle() bool {
	for _, s := range p.sides {
		if s.sq.len() > 0 || s.expect.len() > 0 || s.pending > 0 {
			return false
		}
	}
	return true
}

// run posts ops more send work requests and waits until everything
// they started is done.
func (p *pingpong) run(ops int) time.Duration {
	start := time.Now()
	p.target = p.posted + ops
	p.until(func() bool { return p.posted >= p.target && p.idle() })
	return time.Since(start)
}

// startErrors switches to the checks of forced errors: the first failure
// of a send queue must be one of allow (per side), receives may flush.
func (p *pingpong) startErrors(allowA, allowB []mlx5.WCStatus) {
	p.errMode = true
	if p.failedWR == nil {
		p.failedWR, p.gotMsg = map[uint64]bool{}, map[uint64]bool{}
	}
	p.sides[0].allow, p.sides[1].allow = allowA, allowB
}

// toErr moves s's QP to ERR; its receives are posted no more.
func (s *ppSide) toErr() {
	s.pool.hold = true
	if err := s.qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState); err != nil {
		s.p.fatalf("%s: modify to ERR: %v", s.name, err)
	}
}

// settled says every send and every receive of a QP's own receive queue
// has completed (an SRQ's receives stay).
func (p *pingpong) settled() bool {
	for _, s := range p.sides {
		if s.sq.len() > 0 || (s.pool.srq == nil && s.pool.posted > 0) {
			return false
		}
	}
	return true
}

// quiet checks that nothing more completes.
func (p *pingpong) quiet(what string) {
	time.Sleep(20 * time.Millisecond)
	for _, cq := range p.cqs {
		n, err := cq.Poll(p.wc[:])
		if n > 0 || err != nil {
			p.fatalf("%s: %d completions more (%v), the first %+v", what, n, err, p.wc[0])
		}
	}
}

// finish forces both QPs into ERR and checks the flushes: every receive
// still posted on a QP completes once with a flush (an SRQ's are not
// flushed), nothing else comes, and work posted afterwards is flushed too,
// unsignaled or not.
func (p *pingpong) finish() {
	for _, s := range p.sides {
		s.gen = false
		s.pending = 0
	}
	p.startErrors([]mlx5.WCStatus{mlx5.WCWRFlushErr}, []mlx5.WCStatus{mlx5.WCWRFlushErr})
	for _, s := range p.sides {
		s.toErr()
	}
	p.target = p.posted
	p.until(p.settled)
	p.quiet("after the flush")
	p.postAfterErr()
	p.checkLeftovers()
	p.lastWQE()
}

// postAfterErr posts to both QPs in ERR: a receive (to a QP's own queue),
// then an unsignaled and a signaled send, which the device must flush,
// each once.
func (p *pingpong) postAfterErr() {
	for _, s := range p.sides {
		s.overdraw = true
		if !s.failed {
			s.allow = []mlx5.WCStatus{mlx5.WCWRFlushErr}
		}
		if s.pool.srq == nil {
			p.postRecv(s.pool, 1)
		}
		ops := []mlx5.Opcode{mlx5.OpSend, mlx5.OpRDMARead}
		if p.cfg.typ == mlx5.QPTypeUD {
			ops[1] = mlx5.OpSendImm
		}
		for i, op := range ops {
			s.prepare(i, op).signaled = false
		}
		s.wrs[0].Flags = 0
		s.post(2, 1)
	}
	p.until(p.settled)
	p.quiet("after the posts to QPs in ERR")
}

// checkLeftovers checks what never arrived: only messages whose send
// failed, or (UD) was sent to a QP in error; and that no message arrived
// whose send failed.
func (p *pingpong) checkLeftovers() {
	for _, s := range p.sides {
		for s.expect.len() > 0 {
			m := s.expect.pop()
			if !p.failedWR[m.wrID] && !(p.cfg.typ == mlx5.QPTypeUD && s.pool.failed) {
				p.fatalf("%s: %v %#x (seq %d) from %s completed successfully but never arrived", s.name, m.op, m.wrID, m.seq, s.peer.name)
			}
		}
	}
	for id := range p.gotMsg {
		if p.failedWR[id] {
			p.fatalf("message %#x arrived, but its send completed in error", id)
		}
	}
}

// lastWQE checks that each QP on an SRQ that entered ERR raised
// IBV_EVENT_QP_LAST_WQE_REACHED.
func (p *pingpong) lastWQE() {
	if p.cfg.srq {
		p.waitEvents(mlx5.Event{Type: mlx5.EventQPLastWQEReached, QP: p.sides[0].qp},
			mlx5.Event{Type: mlx5.EventQPLastWQEReached, QP: p.sides[1].qp})
	}
}

func (p *pingpong) report(what string, d time.Duration) {
	st := &p.st
	ops := make([]string, 0, len(st.ops))
	for k, v := range st.ops {
		ops = append(ops, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(ops)
	rate := ""
	if d > 0 {
		rate = fmt.Sprintf(" in %v (%.0f/s; race %v)", d.Round(time.Millisecond), float64(p.posted)/d.Seconds(), raceEnabled)
	}
	p.t.Logf("%s: %d send work requests%s: %s; %d singly, %d lists, %d batches; %d unsignaled, %d of several SGEs; %d MB",
		what, p.posted, rate, strings.Join(ops, ", "),
		st.single, st.list, st.batch, st.unsignaled, st.multi, st.bytes>>20)
	p.t.Logf("%s: %d receives (%d singly, %d lists); %d send and %d receive completions, %d unsignaled retired by a later one; %d sends failed, %d flushed, %d receives flushed",
		what, st.recvs, st.recvSingle, st.recvList, st.sendCQEs, st.recvCQEs, st.silent, st.err, st.flushedSends, st.flushedRecvs)
}

// TestPingPongRC: RC QPs, each with its own CQs (the million), or sharing
// one CQ (a tenth), or receiving from one SRQ (a quarter: enough to have
// caught, in every run, the model reusing SRQ WQEs when it wrote a CQE
// before it took the WQE off the list). Each run ends
// with both QPs forced into ERR: every receive still posted on a QP is
// flushed once, and work posted afterwards is flushed too.
func TestPingPongRC(t *testing.T) {
	for _, v := range []struct {
		cfg ppConfig
		ops int
	}{
		{ppConfig{name: "own CQs", typ: mlx5.QPTypeRC, maxMsg: 4096}, ppOps(1_000_000)},
		{ppConfig{name: "shared CQ", typ: mlx5.QPTypeRC, sharedCQ: true, maxMsg: 4096}, ppOps(1_000_000) / 10},
		{ppConfig{name: "SRQ", typ: mlx5.QPTypeRC, srq: true, maxMsg: 4096}, ppOps(1_000_000) / 4},
	} {
		t.Run(strings.ReplaceAll(v.cfg.name, " ", "_"), func(t *testing.T) {
			p := newPingPong(t, v.cfg, ppSeed(t))
			d := p.run(v.ops)
			p.report(v.cfg.name, d)
			p.finish()
		})
	}
}

// TestPingPongUD: UD QPs, datagrams of up to the port's MTU (1024 bytes
// on the model) after the 40 bytes of the GRH.
func TestPingPongUD(t *testing.T) {
	p := newPingPong(t, ppConfig{name: "UD", typ: mlx5.QPTypeUD, maxMsg: 1024}, ppSeed(t))
	d := p.run(ppOps(1_000_000))
	p.report("UD", d)
	p.finish()
}

// inFlight posts ops more send work requests and returns with the traffic
// still going: work outstanding on both QPs.
func (p *pingpong) inFlight(ops int) {
	p.target = p.posted + ops
	p.until(func() bool { return p.posted >= p.target })
}

// stallA stops B's receives and B's answers, and has A ping past B's
// credit: the first ping without a receive waits (RNR) and everything A
// posts after it stays outstanding, as do A's receives. It returns when
// A's window is full and the waiting ping is the oldest work request left
// but unsignaled ones (which only a later completion retires), or when A
// failed. Unless holdA (when A may fail meanwhile: the model flushes a
// receive posted in ERR only at a later doorbell), A's receives are
// posted on, and it also waits for A's receive queue to be full with no
// message of B on its way.
func (p *pingpong) stallA(holdA bool) {
	a, b := p.sides[0], p.sides[1]
	a.pool.hold, b.pool.hold = holdA, true
	b.gen = false
	a.overdraw, p.stall, p.stalled = true, true, -1
	p.until(func() bool {
		if a.failed {
			return true
		}
		if len(a.free) > 0 || p.stalled < 0 || !holdA && (b.sq.len() > 0 || a.pool.credit < a.pool.capacity) {
			return false
		}
		for i := range a.sq.len() {
			switch slot := *a.sq.at(i); {
			case slot == p.stalled:
				return true
			case a.sends[slot].signaled:
				return false
			}
		}
		return false
	})
	p.stall = false
}

// outstanding logs what is outstanding on both QPs when an error is
// forced, and returns A's sends and receives.
func (p *pingpong) outstanding(what string) (sends, recvs int) {
	a, b := p.sides[0], p.sides[1]
	p.t.Logf("%s: outstanding when forced: %s %d sends, %d receives; %s %d sends, %d receives (%s)",
		what, a.name, a.sq.len(), a.pool.posted, b.name, b.sq.len(), b.pool.posted, b.pool.name)
	return a.sq.len(), a.pool.posted
}

// postPoisoned posts, on an idle A, one list or batch of A's whole window
// of mixed work requests in which the one at a random place in its first
// half fails as poison makes it (bad rkey, bad lkey); the work requests
// after it are outstanding when it fails.
func (p *pingpong) postPoisoned(want mlx5.WCStatus, poison func(s *ppSide, i int) *ppSend) {
	a := p.sides[0]
	p.target = p.posted
	p.until(func() bool { return a.sq.len() == 0 && len(a.free) == a.window })
	for _, pl := range p.pools {
		p.fill(pl)
	}
	n := min(a.window, ppListMax)
	at := n/4 + p.rng.IntN(n/4)
	for i := range n {
		if i == at {
			r := poison(a, i)
			r.poisoned, r.want = true, want
			continue
		}
		// Before the poison within the peer's credit; past it nothing
		// runs: any operation.
		a.overdraw = i > at
		op := a.pick(ppAny)
		if op == 0 {
			p.fatalf("no operation for work request %d of the poisoned list (%d credit)", i, a.peer.pool.credit)
		}
		a.prepare(i, op)
	}
	a.overdraw = false
	mode := 1 + p.rng.IntN(2)
	a.post(n, mode)
	// The QPs in error take no receives from now on (the model flushes a
	// receive posted in ERR only at a later doorbell).
	for _, pl := range p.pools {
		pl.hold = pl.srq == nil
	}
	p.t.Logf("poisoned work request %d of a %s of %d: want %v", at, [...]string{"", "list", "batch"}[mode], n, want)
}

// badRKey is an RDMA WRITE of 64 bytes to the peer with an rkey whose
// variant byte is wrong: REMOTE_ACCESS_ERR at the requester, and the
// responder goes to ERR too (the IB spec's class C error; rxe_resp.c
// do_class_ac_error).
func badRKey(s *ppSide, i int) *ppSend {
	r := s.prepareN(i, mlx5.OpRDMAWrite, 64)
	s.wrs[i].RKey ^= 0x5a
	return r
}

// badLKey is a SEND of 64 bytes gathered through an lkey whose variant
// byte is wrong: LOCAL_PROT_ERR, the requester to ERR.
func badLKey(s *ppSide, i int) *ppSend {
	r := s.prepareN(i, mlx5.OpSend, 64)
	for j := range r.pcs.k {
		if r.pcs.n[j] > 0 { // a zero-length SGE is not posted
			s.sgls[i][j].LKey ^= 0x5a
			break
		}
	}
	return r
}

// waitEvents waits for the asynchronous events want (type and QP), in
// any order among others.
func (p *pingpong) waitEvents(want ...mlx5.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), mustCome)
	defer cancel()
	var got []string
	for len(want) > 0 {
		ev, err := p.c.NextEvent(ctx)
		if err != nil {
			p.fatalf("waiting for %v (got %v): %v", want, got, err)
		}
		got = append(got, ev.String())
		for i, w := range want {
			if w.Type == ev.Type && w.QP == ev.QP {
				want = slices.Delete(want, i, i+1)
				break
			}
		}
	}
}

var (
	flushOnly  = []mlx5.WCStatus{mlx5.WCWRFlushErr}
	retryFlush = []mlx5.WCStatus{mlx5.WCRetryExcErr, mlx5.WCWRFlushErr}
)

// TestPingPongForcedError forces QPs into ERR with work outstanding on
// their send and receive queues, signaled and unsignaled, and checks that
// every outstanding work request completes exactly once: in each queue
// the ones that ran succeed (the signaled with a completion, the
// unsignaled through the next), then the first failure with its own
// error, then all the rest, signaled or not, with WR_FLUSH_ERR; that
// nothing comes after; that work posted to a QP in ERR is flushed too;
// and that exactly the messages whose sends succeeded arrived, intact.
//
//   - RC, modify: A stalled on B's empty receive queue (RNR) with its
//     window and receive queue full, then moved to ERR: everything
//     flushes; B's answers to A then fail with RETRY_EXC_ERR (A does not
//     respond) and the rest of B's flush.
//   - RC, RNR retries exceeded: the same stall on a QP with 3 RNR
//     retries: the ping that found no receive fails with
//     RNR_RETRY_EXC_ERR, the device moves A to ERR, the rest flush.
//   - RC, bad rkey: an RDMA WRITE with a bad rkey in a list of 64: the
//     ones before it succeed, it fails with REM_ACCESS_ERR, the rest
//     flush; B, the responder, goes to ERR too (IB_EVENT_QP_ACCESS_ERR)
//     and its receives flush.
//   - UD, modify: A moved to ERR while pinging; B's answers to A are then
//     lost (UD) but complete successfully.
//   - UD, bad lkey: a SEND with a bad lkey in a list of 64:
//     LOC_PROT_ERR, the rest flush; B is unaffected.
//   - SRQ: both QPs on one SRQ, a bad rkey puts both in ERR. The SRQ's
//     WQEs are the SRQ's, not the QPs': a QP in error completes (flushes)
//     only WQEs it had already taken from the SRQ for a message in
//     progress, then raises the IB spec's Last WQE Reached
//     (IBV_EVENT_QP_LAST_WQE_REACHED, libibverbs' ibv_get_async_event(3));
//     Linux's ib_drain_qp drains the receive queue only of a QP without
//     an SRQ, and rxe_drain_req_pkts leaves an SRQ's queue alone. The
//     model takes a WQE with its whole message, so no SRQ receive may
//     complete at all: both QPs raise LAST_WQE_REACHED, and the receives
//     still posted are consumed, each once and intact, by two new QPs on
//     the SRQ.
func TestPingPongForcedError(t *testing.T) {
	warm := max(500, ppOps(1_000_000)/200)
	rc := ppConfig{typ: mlx5.QPTypeRC, maxMsg: 4096}
	ud := ppConfig{typ: mlx5.QPTypeUD, maxMsg: 1024}
	named := func(c ppConfig, name string) ppConfig { c.name = name; return c }

	t.Run("RC_modify", func(t *testing.T) {
		p := newPingPong(t, named(rc, "RC modify"), ppSeed(t))
		a, b := p.sides[0], p.sides[1]
		p.run(warm)
		p.inFlight(warm)
		p.stallA(false)
		sends, recvs := p.outstanding("RC modify")
		if sends != a.window || recvs != a.pool.capacity {
			t.Fatalf("A has %d of %d sends and %d of %d receives outstanding, want both full", sends, a.window, recvs, a.pool.capacity)
		}
		p.startErrors(flushOnly, retryFlush)
		a.gen = false
		a.toErr()
		b.gen, b.overdraw = true, true // B answers into A's ERR
		p.until(func() bool { return a.sq.len() == 0 && a.pool.posted == 0 && b.pending == 0 && b.sq.len() == 0 })
		b.toErr()
		p.until(p.settled)
		p.quiet("after the flush")
		if a.errStatus != mlx5.WCWRFlushErr {
			t.Errorf("A's first error %v, want a flush", a.errStatus)
		}
		p.postAfterErr()
		p.checkLeftovers()
		p.report("RC modify", 0)
	})

	t.Run("RC_RNR_retry_exceeded", func(t *testing.T) {
		cfg := named(rc, "RC RNR retry exceeded")
		cfg.rnrRetry, cfg.minRNRTimer = 3, 12 // 3 retries, 0.64 ms apart
		p := newPingPong(t, cfg, ppSeed(t))
		a, b := p.sides[0], p.sides[1]
		p.run(warm)
		p.inFlight(warm)
		// The error comes by itself: its checks are on first.
		p.startErrors(nil, retryFlush)
		p.stallWant = mlx5.WCRNRRetryExcErr
		p.stallA(true)
		p.outstanding("RC RNR retry exceeded") // unless A failed before its window was full
		a.gen = false
		p.until(func() bool { return a.failed && a.sq.len() == 0 && a.pool.posted == 0 })
		b.gen, b.overdraw = true, true
		p.until(func() bool { return b.pending == 0 && b.sq.len() == 0 })
		b.toErr()
		p.until(p.settled)
		p.quiet("after the flush")
		if a.errStatus != mlx5.WCRNRRetryExcErr {
			t.Errorf("A's first error %v, want RNR_RETRY_EXC_ERR", a.errStatus)
		}
		p.postAfterErr()
		p.checkLeftovers()
		p.report("RC RNR retry exceeded", 0)
	})

	t.Run("RC_bad_rkey", func(t *testing.T) {
		p := newPingPong(t, named(rc, "RC bad rkey"), ppSeed(t))
		a, b := p.sides[0], p.sides[1]
		p.run(warm)
		p.inFlight(warm)
		p.startErrors(nil, flushOnly)
		p.postPoisoned(mlx5.WCRemAccessErr, badRKey)
		a.gen, b.overdraw = false, true
		p.until(func() bool { return a.failed && b.pending == 0 && p.settled() })
		p.quiet("after the flush")
		if a.errStatus != mlx5.WCRemAccessErr || !b.pool.failed {
			t.Errorf("A's first error %v, B's receives flushed %v: want REM_ACCESS_ERR and B in ERR", a.errStatus, b.pool.failed)
		}
		p.waitEvents(mlx5.Event{Type: mlx5.EventQPAccessErr, QP: b.qp})
		p.postAfterErr()
		p.checkLeftovers()
		p.report("RC bad rkey", 0)
	})

	t.Run("UD_modify", func(t *testing.T) {
		p := newPingPong(t, named(ud, "UD modify"), ppSeed(t))
		a, b := p.sides[0], p.sides[1]
		p.run(warm)
		p.inFlight(warm)
		// B's answers done, A's receives full and for no message, A's
		// whole window at once, then at once to ERR.
		b.gen = false
		p.until(func() bool { return b.sq.len() == 0 })
		p.fill(a.pool)
		p.target = p.posted + a.window
		a.ping()
		p.outstanding("UD modify")
		p.startErrors(flushOnly, nil)
		a.gen = false
		a.toErr()
		b.gen, b.overdraw = true, true // B answers into A's ERR: lost, and successful
		p.until(func() bool { return a.sq.len() == 0 && a.pool.posted == 0 && b.pending == 0 && b.sq.len() == 0 })
		if !a.pool.failed {
			t.Fatal("A's receives were not flushed")
		}
		b.allow = flushOnly
		b.toErr()
		p.until(p.settled)
		p.quiet("after the flush")
		p.postAfterErr()
		p.checkLeftovers()
		p.report("UD modify", 0)
	})

	t.Run("UD_bad_lkey", func(t *testing.T) {
		p := newPingPong(t, named(ud, "UD bad lkey"), ppSeed(t))
		a, b := p.sides[0], p.sides[1]
		p.run(warm)
		p.inFlight(warm)
		p.startErrors(nil, nil)
		p.postPoisoned(mlx5.WCLocProtErr, badLKey)
		a.gen, b.overdraw = false, true
		p.until(func() bool {
			return a.failed && a.sq.len() == 0 && a.pool.posted == 0 && b.pending == 0 && b.sq.len() == 0
		})
		if a.errStatus != mlx5.WCLocProtErr || b.failed || b.pool.failed {
			t.Errorf("A's first error %v, B failed %v (receives %v): want LOC_PROT_ERR, B untouched", a.errStatus, b.failed, b.pool.failed)
		}
		b.allow = flushOnly
		b.toErr()
		p.until(p.settled)
		p.quiet("after the flush")
		p.postAfterErr()
		p.checkLeftovers()
		p.report("UD bad lkey", 0)
	})

	t.Run("SRQ", func(t *testing.T) {
		p := newPingPong(t, ppConfig{name: "SRQ", typ: mlx5.QPTypeRC, srq: true, maxMsg: 4096}, ppSeed(t))
		a, b := p.sides[0], p.sides[1]
		pl := a.pool
		p.run(warm)
		p.inFlight(warm)
		p.startErrors(nil, flushOnly)
		p.postPoisoned(mlx5.WCRemAccessErr, badRKey)
		a.gen, b.overdraw = false, true
		p.until(func() bool { return a.failed && b.pending == 0 && p.settled() })
		p.quiet("after the flush")
		if st, _ := p.dev.QPState(b.qpn); st != model.StateERR {
			t.Fatalf("B, the responder of the bad rkey, is in state %#x, not ERR", st)
		}
		p.waitEvents(mlx5.Event{Type: mlx5.EventQPAccessErr, QP: b.qp},
			mlx5.Event{Type: mlx5.EventQPLastWQEReached, QP: a.qp}, mlx5.Event{Type: mlx5.EventQPLastWQEReached, QP: b.qp})
		p.postAfterErr()
		p.checkLeftovers()
		// The receives the SRQ still holds: no completion so far, and
		// each completes once, on the next QPs, with its message.
		pl.watch = map[uint64]bool{}
		for i := range pl.recs {
			if pl.recs[i].posted {
				pl.watch[pl.recs[i].wrID] = true
			}
		}
		if len(pl.watch) == 0 {
			t.Fatal("the SRQ holds no receives")
		}
		t.Logf("%d receives stay in %s", len(pl.watch), pl.name)
		for _, s := range p.sides {
			if err := s.qp.Close(); err != nil {
				t.Fatal(err)
			}
			delete(p.bySide, s.qpn)
		}
		p.errMode, pl.hold = false, false
		pl.credit = pl.posted // no message is on its way now
		p.addPair(pl)
		p.run(4 * pl.capacity)
		if len(pl.watch) > 0 {
			t.Fatalf("%d receives posted before the error never completed", len(pl.watch))
		}
		p.finish()
		p.report("SRQ", 0)
	})
}
