package model

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// A test rig for the data path, written from the header layouts
// (mlx5dv.h, include/linux/mlx5/{qp,cq,device}.h) independently of the
// model's own parsing: a context with a verbs PD, one UAR page, CQs and RC
// QPs whose queues and doorbell records are UMEMs of mmap'd memory, small
// WQE encoders and a CQ poller. Everything the model touches lives outside
// the Go heap, as it would for hardware.

type rig struct {
	t    testing.TB
	d    *Device
	pd   seam.Handle
	pdn  uint32
	uar  seam.UAR
	page []byte
	bf   atomic.Uint32 // counts rings: the BlueFlame half alternates

	misc     []byte // CQ rings and doorbell records, one UMEM
	miscID   uint32
	miscUsed int
	maps     [][]byte // unmapped after the device is closed
}

func newRig(t testing.TB, profile string) *rig { t.Helper(); return newRigOpts(t, profile, Options{}) }

func newRigOpts(t testing.TB, profile string, opt Options) *rig {
	t.Helper()
	d, err := NewWithOptions(profile, opt)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, d: d}
	t.Cleanup(func() {
		d.Close()
		if r.page != nil {
			d.UnmapUAR(r.page)
		}
		for _, m := range r.maps {
			unix.Munmap(m)
		}
	})
	r.misc = r.mmap(1 << 20)
	if r.pd, r.pdn, err = d.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if r.uar, err = d.UARAlloc(0); err != nil {
		t.Fatal(err)
	}
	if r.page, err = d.MapUAR(r.uar); err != nil {
		t.Fatal(err)
	}
	if _, r.miscID, err = d.UMemReg(r.misc, accessLocalWrite); err != nil {
		t.Fatal(err)
	}
	return r
}

// carve returns n bytes of the misc UMEM, 64-byte aligned, and their
// offset.
func (r *rig) carve(n int) ([]byte, int) {
	off := (r.miscUsed + 63) &^ 63
	r.miscUsed = off + n
	if r.miscUsed > len(r.misc) {
		r.t.Fatal("rig: misc UMEM full")
	}
	return r.misc[off : off+n : off+n], off
}

// mmap maps n bytes of anonymous memory for the rig, unmapped after the
// device is closed.
func (r *rig) mmap(n int) []byte {
	r.t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		r.t.Fatal(err)
	}
	r.maps = append(r.maps, b)
	return b
}

// mr registers n bytes of fresh memory with the given access.
func (r *rig) mr(n int, access uint32) ([]byte, seam.MR) {
	r.t.Helper()
	mem := r.mmap(n)
	m, err := r.d.RegMR(r.pd, mem, access)
	if err != nil {
		r.t.Fatal(err)
	}
	return mem, m
}

func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

func (r *rig) create(in []byte, outLen int) []byte {
	r.t.Helper()
	_, out := r.createH(in, outLen)
	return out
}

// createH is create that returns the object's handle too.
func (r *rig) createH(in []byte, outLen int) (seam.Handle, []byte) {
	r.t.Helper()
	out := make([]byte, outLen)
	h, err := r.d.ObjCreate(in, out)
	if err != nil {
		r.t.Fatalf("create %s: %v", prm.OpcodeName(uint16(prm.MboxIn.Opcode.Get(in))), err)
	}
	return h, out
}

// mustCome bounds a wait for something that must come (a CQE, an
// event, a state, a fault): the wait ends as soon as it comes, so the
// bound costs nothing when all is well, and it is long enough that a
// loaded machine or qemu-user does not fail a test that is right, while
// a loss still fails it, a minute late.
const mustCome = 60 * time.Second

// tcq is a CQ of 64-byte CQEs in the misc UMEM.
type tcq struct {
	r       *rig
	h       seam.Handle
	cqn     uint32
	log     uint
	buf     []byte
	dbr     []byte
	ci      uint32
	timeout time.Duration
}

func (r *rig) cq(log uint) *tcq {
	r.t.Helper()
	buf, off := r.carve(64 << log)
	for i := 0; i < len(buf); i += 64 {
		buf[i+63] = 0xf0 // MLX5_CQE_INVALID, owner 0
	}
	dbr, dbrOff := r.carve(8)
	eqn, err := r.d.QueryEQN(0)
	if err != nil {
		r.t.Fatal(err)
	}
	in := mbox(prm.CreateCqIn.Layout(), prm.MLX5_CMD_OP_CREATE_CQ)
	cqc := prm.CreateCqIn.CqContext
	prm.Cqc.LogCqSize.At(cqc).Set(in, uint64(log))
	prm.Cqc.UarPage.At(cqc).Set(in, uint64(r.uar.PageID))
	prm.Cqc.CEqnOrApuElement.At(cqc).Set(in, uint64(eqn))
	prm.Cqc.DbrUmemId.At(cqc).Set(in, uint64(r.miscID))
	prm.Cqc.DbrAddr.At(cqc).Set(in, uint64(dbrOff))
	prm.CreateCqIn.CqUmemId.Set(in, uint64(r.miscID))
	prm.CreateCqIn.CqUmemOffset.Set(in, uint64(off))
	h, out := r.createH(in, 16)
	return &tcq{r: r, h: h, cqn: uint32(prm.CreateCqOut.Cqn.Get(out)), log: log, buf: buf, dbr: dbr, timeout: mustCome}
}

// opOwn reads a CQE's last byte atomically (with its word).
func opOwn(cqe []byte) uint8 {
	w := atomic.LoadUint32((*uint32)(unsafe.Pointer(&cqe[60])))
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], w)
	return b[3]
}

// ready reports whether the CQE at the consumer counter is the device's:
// a valid opcode and the owner bit of this pass over the ring.
func (c *tcq) ready() []byte {
	slot := c.buf[64*(c.ci&(1<<c.log-1)):][:64]
	o := opOwn(slot)
	if o>>4 == 0xf || uint32(o&1) != (c.ci>>c.log)&1 {
		return nil
	}
	return slot
}

// next waits for the next CQE, returns a copy and consumes it (the
// consumer counter goes into the CQ's doorbell record).
func (c *tcq) next() []byte {
	c.r.t.Helper()
	out, ok := c.wait(c.timeout)
	if !ok {
		c.r.t.Fatalf("CQ %#x: no CQE at %d after %v; faults %q, WQE errors %q", c.cqn, c.ci, c.timeout, c.r.d.Faults(), c.r.d.WQEErrors())
	}
	return out
}

// wait is next without the test's failure, for other goroutines.
func (c *tcq) wait(timeout time.Duration) ([]byte, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if slot := c.ready(); slot != nil {
			out := append([]byte(nil), slot...)
			c.ci++
			var w [4]byte
			binary.BigEndian.PutUint32(w[:], c.ci&0xffffff)
			atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.dbr[0])), binary.NativeEndian.Uint32(w[:]))
			return out, true
		}
		if time.Now().After(deadline) {
			return nil, false
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// none checks that no CQE arrives within d.
func (c *tcq) none(d time.Duration) {
	c.r.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if slot := c.ready(); slot != nil {
			c.r.t.Fatalf("CQ %#x: unexpected CQE %x", c.cqn, slot)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// tqp is an RC QP with its work queue in a UMEM of its own and its
// doorbell record in the misc UMEM.
type tqp struct {
	r              *rig
	h              seam.Handle
	qpn            uint32
	uidx           uint32
	scq, rcq       *tcq
	wq             []byte
	sq, rq         []byte // the rings
	logSQ, logRQ   uint
	rqStride       int
	dbr            []byte
	sqPI, rqPI     uint16
	uarPage        uint32
	rnrRetry, rnrT uint64
	rae            bool
}

type qpOpts struct {
	logSQ, logRQ, logRQStride uint // SQ WQEBBs, RQ WQEs, RQ stride (16 << n bytes)
	uidx                      uint32
	drainSigerr               bool
	uarPage                   uint32 // 0: the rig's page
	noRemoteAccess            bool   // leave rre and rwe clear
	rnrRetry, minRNRNak       uint64
	rae                       bool // connect sets rae (remote atomics)
	uc                        bool // a UC QP (qpc.st UC), not RC
}

func (r *rig) qp(scq, rcq *tcq, o qpOpts) *tqp {
	r.t.Helper()
	if o.logSQ == 0 {
		o.logSQ = 6
	}
	if o.logRQ == 0 {
		o.logRQ = 4
	}
	if o.logRQStride == 0 {
		o.logRQStride = 2 // 64 bytes: 4 data segments
	}
	if o.uarPage == 0 {
		o.uarPage = r.uar.PageID
	}
	rqBytes := (1 << o.logRQ) * (16 << o.logRQStride)
	wq := r.mmap(rqBytes + 64<<o.logSQ)
	_, wqID, err := r.d.UMemReg(wq, accessLocalWrite)
	if err != nil {
		r.t.Fatal(err)
	}
	dbr, dbrOff := r.carve(8)
	in := mbox(prm.CreateQpIn.Layout(), prm.MLX5_CMD_OP_CREATE_QP)
	qpc := prm.CreateQpIn.Qpc
	prm.Qpc.St.At(qpc).Set(in, stRC)
	if o.uc {
		prm.Qpc.St.At(qpc).Set(in, stUC)
	}
	prm.Qpc.Pd.At(qpc).Set(in, uint64(r.pdn))
	prm.Qpc.UarPage.At(qpc).Set(in, uint64(o.uarPage))
	prm.Qpc.UserIndex.At(qpc).Set(in, uint64(o.uidx))
	prm.Qpc.CqnSnd.At(qpc).Set(in, uint64(scq.cqn))
	prm.Qpc.CqnRcv.At(qpc).Set(in, uint64(rcq.cqn))
	prm.Qpc.LogSqSize.At(qpc).Set(in, uint64(o.logSQ))
	prm.Qpc.LogRqSize.At(qpc).Set(in, uint64(o.logRQ))
	prm.Qpc.LogRqStride.At(qpc).Set(in, uint64(o.logRQStride))
	prm.Qpc.DbrUmemId.At(qpc).Set(in, uint64(r.miscID))
	prm.Qpc.DbrAddr.At(qpc).Set(in, uint64(dbrOff))
	if o.drainSigerr {
		prm.Qpc.DrainSigerr.At(qpc).Set(in, 1)
	}
	prm.CreateQpIn.WqUmemId.Set(in, uint64(wqID))
	h, out := r.createH(in, 16)
	return &tqp{r: r, h: h, qpn: uint32(prm.CreateQpOut.Qpn.Get(out)), uidx: o.uidx, scq: scq, rcq: rcq, wq: wq,
		rq: wq[:rqBytes], sq: wq[rqBytes:], logSQ: o.logSQ, logRQ: o.logRQ, rqStride: 16 << o.logRQStride, dbr: dbr,
		uarPage: o.uarPage, rnrRetry: o.rnrRetry, rnrT: o.minRNRNak, rae: o.rae}
}

// modify runs a QP transition with the qpc fields set by f.
func (q *tqp) modify(op uint16, f func(in []byte, qpc prm.Field)) {
	q.r.t.Helper()
	in := transitionIn(op, q.qpn)
	if f != nil {
		f(in, transitions[op].qpc)
	}
	if err := q.r.d.Exec(in, make([]byte, 16)); err != prm.MLX5_CMD_STAT_OK {
		q.r.t.Fatalf("%s on QP %#x: %v", prm.OpcodeName(op), q.qpn, err)
	}
}

// reset moves the QP to RST and starts its queues over, as libmlx5 does
// on a modify to RESET: the counters and doorbell record go to 0.
func (q *tqp) reset() {
	q.modify(prm.MLX5_CMD_OP_2RST_QP, nil)
	q.sqPI, q.rqPI = 0, 0
	q.setDBR(0, 0)
	q.setDBR(1, 0)
}

// connect brings a and b to RTS, each the other's remote; with
// remoteAccess the responder side allows RDMA READ and WRITE.
func connect(a, b *tqp, remoteAccess bool) {
	for _, p := range [][2]*tqp{{a, b}, {b, a}} {
		q, peer := p[0], p[1]
		q.modify(prm.MLX5_CMD_OP_RST2INIT_QP, func(in []byte, qpc prm.Field) {
			if remoteAccess {
				prm.Qpc.Rre.At(qpc).Set(in, 1)
				prm.Qpc.Rwe.At(qpc).Set(in, 1)
			}
			if q.rae {
				prm.Qpc.Rae.At(qpc).Set(in, 1)
			}
		})
		q.modify(prm.MLX5_CMD_OP_INIT2RTR_QP, func(in []byte, qpc prm.Field) {
			prm.Qpc.RemoteQpn.At(qpc).Set(in, uint64(peer.qpn))
			prm.Qpc.MinRnrNak.At(qpc).Set(in, q.rnrT)
		})
		q.modify(prm.MLX5_CMD_OP_RTR2RTS_QP, func(in []byte, qpc prm.Field) {
			prm.Qpc.RnrRetry.At(qpc).Set(in, q.rnrRetry)
		})
	}
}

// WQE encoders, from struct mlx5_wqe_ctrl_seg, mlx5_wqe_raddr_seg,
// mlx5_wqe_data_seg and mlx5_wqe_inl_data_seg.

const (
	tOpNOP          = 0x00
	tOpRDMAWrite    = 0x08
	tOpRDMAWriteImm = 0x09
	tOpSend         = 0x0a
	tOpSendImm      = 0x0b
	tOpRDMARead     = 0x10
	tSignaled       = 0x08 // MLX5_WQE_CTRL_CQ_UPDATE
)

type tsge struct {
	n    uint32
	key  uint32
	addr uint64
}

// twqe describes a data WQE to encode.
type twqe struct {
	opcode   uint8
	fm       uint8
	imm      uint32
	raddr    uint64
	rkey     uint32
	hasRaddr bool
	// atomic: a remote address and an atomic segment (struct
	// mlx5_wqe_atomic_seg: swap_add, compare, big-endian) follow the
	// control segment.
	atomic           bool
	swapAdd, compare uint64
	sges             []tsge
	inline           []byte
	dsOverride       int
}

// encode writes the WQE for the QP at producer counter pi and returns its
// bytes (ds*16).
func (w twqe) encode(qpn uint32, pi uint16) []byte {
	b := make([]byte, 16, 1024)
	if w.hasRaddr || w.atomic {
		b = append(b, make([]byte, 16)...)
		binary.BigEndian.PutUint64(b[16:], w.raddr)
		binary.BigEndian.PutUint32(b[24:], w.rkey)
	}
	if w.atomic {
		b = binary.BigEndian.AppendUint64(b, w.swapAdd)
		b = binary.BigEndian.AppendUint64(b, w.compare)
	}
	if w.inline != nil {
		seg := make([]byte, (4+len(w.inline)+15)&^15)
		binary.BigEndian.PutUint32(seg, uint32(len(w.inline))|1<<31)
		copy(seg[4:], w.inline)
		b = append(b, seg...)
	}
	for _, s := range w.sges {
		seg := make([]byte, 16)
		binary.BigEndian.PutUint32(seg, s.n)
		binary.BigEndian.PutUint32(seg[4:], s.key)
		binary.BigEndian.PutUint64(seg[8:], s.addr)
		b = append(b, seg...)
	}
	ds := len(b) / 16
	if w.dsOverride != 0 {
		ds = w.dsOverride
	}
	binary.BigEndian.PutUint32(b[0:], uint32(pi)<<8|uint32(w.opcode))
	binary.BigEndian.PutUint32(b[4:], qpn<<8|uint32(ds))
	b[11] = w.fm
	binary.BigEndian.PutUint32(b[12:], w.imm)
	return b
}

// put copies WQE bytes into the SQ at the producer counter, across the
// ring's end if need be, and advances it; it returns the WQE's counter.
func (q *tqp) put(b []byte) uint16 {
	idx := q.sqPI
	n := 1 << q.logSQ
	bbs := (len(b) + 63) / 64
	for i := range bbs {
		slot := q.sq[64*(int(q.sqPI)&(n-1)):][:64]
		clear(slot)
		copy(slot, b[64*i:])
		q.sqPI++
	}
	return idx
}

// post encodes, puts and rings one WQE, and returns its counter.
func (q *tqp) post(w twqe) uint16 {
	idx := q.put(w.encode(q.qpn, q.sqPI))
	q.ring(idx)
	return idx
}

// ring writes the send counter into the doorbell record, then the first
// 8 bytes of the WQE at counter idx into the next BlueFlame half of the
// UAR page.
func (q *tqp) ring(idx uint16) {
	q.setDBR(1, uint32(q.sqPI))
	first := q.sq[64*(int(idx)&(1<<q.logSQ-1)):][:8]
	q.r.ringRaw(q.r.page, first)
}

func (q *tqp) setDBR(word int, v uint32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v&0xffff)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&q.dbr[4*word])), binary.NativeEndian.Uint32(b[:]))
}

// ringRaw writes 8 doorbell bytes into a UAR page's next BlueFlame half
// (0x800 and 0x900 in turn).
func (r *rig) ringRaw(page, val []byte) {
	off := 0x800 + 0x100*(r.bf.Add(1)&1)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&page[off])), binary.NativeEndian.Uint64(val))
}

// recv posts a receive WQE: data segments, then the MLX5_INVALID_LKEY
// terminator when there is room.
func (q *tqp) recv(sges ...tsge) uint16 {
	idx := q.rqPI
	slot := q.rq[q.rqStride*(int(idx)&(1<<q.logRQ-1)):][:q.rqStride]
	clear(slot)
	o := 0
	for _, s := range sges {
		binary.BigEndian.PutUint32(slot[o:], s.n)
		binary.BigEndian.PutUint32(slot[o+4:], s.key)
		binary.BigEndian.PutUint64(slot[o+8:], s.addr)
		o += 16
	}
	if o < len(slot) {
		binary.BigEndian.PutUint32(slot[o+4:], 0x100)
	}
	q.rqPI++
	q.setDBR(0, uint32(q.rqPI))
	return idx
}

// Expected CQEs, from struct mlx5_cqe64 and mlx5_err_cqe.

// reqCQE is a requester completion: srqn_uidx, byte_cnt, sop_drop_qpn
// (opcode << 24 | qpn), wqe_counter, op_own.
func (q *tqp) wantReq(opcode uint8, idx uint16, byteCnt uint32, owner uint8) []byte {
	c := make([]byte, 64)
	binary.BigEndian.PutUint32(c[32:], q.uidx)
	binary.BigEndian.PutUint32(c[44:], byteCnt)
	binary.BigEndian.PutUint32(c[56:], uint32(opcode)<<24|q.qpn)
	binary.BigEndian.PutUint16(c[60:], idx)
	c[63] = 0<<4 | owner
	return c
}

// wantResp is a responder completion: flags_rqpn (the sender),
// srqn_uidx, imm_inval_pkey, byte_cnt, sop_drop_qpn, wqe_counter, op_own.
func (q *tqp) wantResp(op uint8, idx uint16, byteCnt, imm, from uint32, owner uint8) []byte {
	c := make([]byte, 64)
	binary.BigEndian.PutUint32(c[24:], from)
	binary.BigEndian.PutUint32(c[32:], q.uidx)
	binary.BigEndian.PutUint32(c[36:], imm)
	binary.BigEndian.PutUint32(c[44:], byteCnt)
	binary.BigEndian.PutUint32(c[56:], q.qpn)
	binary.BigEndian.PutUint16(c[60:], idx)
	c[63] = op<<4 | owner
	return c
}

// wantErr is an error completion (struct mlx5_err_cqe): srqn (the user
// index), syndrome, s_wqe_opcode_qpn, wqe_counter, op_own.
func (q *tqp) wantErr(op, syndrome, sop uint8, idx uint16, owner uint8) []byte {
	c := make([]byte, 64)
	binary.BigEndian.PutUint32(c[32:], q.uidx)
	c[55] = syndrome
	binary.BigEndian.PutUint32(c[56:], uint32(sop)<<24|q.qpn)
	binary.BigEndian.PutUint16(c[60:], idx)
	c[63] = op<<4 | owner
	return c
}

func (q *tqp) state() uint8 {
	s, _ := q.r.d.QPState(q.qpn)
	return s
}

// waitState waits for the QP to reach state s.
func (q *tqp) waitState(s uint8) {
	q.r.t.Helper()
	deadline := time.Now().Add(mustCome)
	for q.state() != s {
		if time.Now().After(deadline) {
			q.r.t.Fatalf("QP %#x in state %#x, want %#x", q.qpn, q.state(), s)
		}
		time.Sleep(50 * time.Microsecond)
	}
}
