package mlx5

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/uverbs"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// CQOptions size a completion queue.
type CQOptions struct {
	// Entries is the least number of CQEs the queue holds; as libmlx5
	// does, the ring is the next power of two above it.
	Entries int
	// Vector is the completion vector whose EQ receives the CQ's events.
	Vector uint32
	// Events gives the CQ a completion channel, for Arm and Wait: a verbs
	// CQ's is the kernel's (ibv_comp_channel), a DEVX CQ's a DEVX event
	// channel of its own subscribed to the CQ's completion event
	// (MLX5_EVENT_TYPE_COMP).
	Events bool
	// DEVX creates the CQ as a DEVX object, its ring and doorbell record
	// in UMEMs, instead of through the kernel's verbs (the default on a
	// device that speaks verbs). It needs DEVX.
	DEVX bool
	// Timestamps has the device stamp each CQE with the time it was
	// written, in cycles of its free-running clock (Caps.CoreClockKHz
	// counts them; Context.ClockInfo converts them), and Poll report it
	// in Completion.Timestamp: ibv_create_cq_ex with
	// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, which asks the kernel for
	// IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION. The kernel then refuses
	// (EOPNOTSUPP) a QP on the CQ if the device has no free-running
	// timestamps. Verbs CQs only.
	Timestamps bool
	// RealTimeTimestamps has the device stamp each CQE with its
	// real-time clock instead (seconds in the upper 32 bits, nanoseconds
	// in the lower: RealTime converts it), as ibv_create_cq_ex with
	// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK alone asks libmlx5
	// on a device that reports them: IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION
	// with the driver flag MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS. It needs
	// Caps.RealTimeTimestamps (else ErrUnsupported) and excludes
	// Timestamps (ErrInvalid; libmlx5 with both flags converts
	// free-running timestamps through the clock-info page instead, as
	// ClockInfo does). The kernel refuses (EOPNOTSUPP) a QP whose send
	// and receive CQs ask for different formats. Verbs CQs only.
	RealTimeTimestamps bool
}

// CQ is a completion queue, its CQE ring and doorbell record in memory
// mlx5go owns: created through the kernel's verbs with mlx5's driver data
// (as libmlx5 does), or as a DEVX object on UMEMs. It has a single poller:
// Poll, Arm and Wait are not safe for concurrent use with each other, but
// are with posts on its QPs and with Close of its QPs or of itself.
type CQ struct {
	c       *Context
	obj     *DevxObj    // a DEVX CQ's
	handle  seam.Handle // a verbs CQ's
	verbs   bool
	made    bool             // the kernel made the verbs CQ
	user    uint64           // the user handle events name it by
	ch      seam.CompChannel // completion events, with CQOptions.Events
	armSN   uint32
	cqn     uint32
	name    string
	logSize uint8
	stamps  bool   // CQOptions.Timestamps or RealTimeTimestamps: Poll copies the CQEs' timestamps
	ring    []byte // 64-byte CQEs
	ci      uint32
	db      *doorbell.CQ
	g       guard // Poll inside; Close and QP cleans

	// qps are the QPs whose completions arrive here, by qpn; replaced
	// whole (copy on write) so Poll reads it without a lock.
	qps atomic.Pointer[map[uint32]*QP]
	// The poller's direct-mapped cache of qpsSeen (the map Poll last
	// loaded), by the QP number's low bits: a CQE finds its QP without a
	// map lookup. Filled only from qpsSeen and cleared when Poll finds
	// cq.qps replaced, so it never names a QP the map it stands for does
	// not. Poll's alone (the single poller).
	qpCache [qpCacheSize]*QP
	qpsSeen *map[uint32]*QP
	// fault is the CQ error the device reported (an overrun), for Poll.
	fault atomic.Pointer[Error]
	// cleaned are the completions of SRQ receives whose CQEs a clean
	// removed (cleanPaused), oldest first, for Poll to report before the
	// ring. Written by cleans, with the poller paused; Poll's otherwise.
	cleaned   []Completion
	errClosed error

	mu     sync.Mutex // attach, detach, clean, refs and Close
	refs   int        // QPs created, or being created, on the CQ
	res    resources
	closed bool
}

// resources is what an object made, closed in reverse order.
type resources []interface{ Close() error }

func (r *resources) add(c interface{ Close() error }) { *r = append(*r, c) }

// close closes everything, newest first, and returns the first error.
func (r *resources) close() error {
	var first error
	for i := len(*r) - 1; i >= 0; i-- {
		if err := (*r)[i].Close(); err != nil && first == nil {
			first = err
		}
	}
	*r = nil
	return first
}

// cqeSize is the CQE size mlx5go uses (cqc.cqe_sz 0: 64 bytes).
const cqeSize = 64

// CreateCQ creates a completion queue: a ring of CQEs and a doorbell
// record in UMEMs, on an NC UAR page for its arm doorbell and on the EQ of
// the completion vector. The CQ is subscribed to its error event, so that
// Poll reports an overrun (ErrCQOverrun).
func (c *Context) CreateCQ(opt CQOptions) (*CQ, error) {
	const op = "create cq"
	if err := c.usable(op); err != nil {
		return nil, err
	}
	verbs := !opt.DEVX && c.speaksVerbs()
	var err error
	if verbs {
		err = c.checkOpen(op)
	} else {
		err = c.check(op, "")
	}
	if err != nil {
		return nil, err
	}
	if opt.Entries <= 0 || opt.Entries >= 1<<22 {
		return nil, invalid(op, c.name, "%d entries (1 to 4194303)", opt.Entries)
	}
	switch {
	case (opt.Timestamps || opt.RealTimeTimestamps) && !verbs:
		return nil, invalid(op, c.name, "a DEVX CQ takes no CQOptions.Timestamps or RealTimeTimestamps")
	case opt.Timestamps && opt.RealTimeTimestamps:
		return nil, invalid(op, c.name, "CQOptions.Timestamps and RealTimeTimestamps: one clock or the other")
	case opt.RealTimeTimestamps && !c.caps.RealTimeTimestamps:
		return nil, unsupported(op, c.name, "the device reports no real-time timestamps (GET_CONTEXT without MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS)")
	}
	// libmlx5's align_queue_size(cqe + 1).
	logSize := uint8(bits.Len(uint(opt.Entries)))
	cq := &CQ{c: c, logSize: logSize, verbs: verbs, stamps: opt.Timestamps || opt.RealTimeTimestamps}
	m := map[uint32]*QP{}
	cq.qps.Store(&m)
	if verbs {
		err = cq.createVerbs(opt)
	} else {
		err = cq.create(opt)
	}
	if err == nil {
		cq.name = cqName(cq.cqn)
		cq.errClosed = opErr("poll", cq.name, ErrClosed)
		cq.g.open()
		if !verbs {
			err = c.subscribeCQ(cq)
		}
		if err == nil {
			if err = c.adopt(cq); err != nil && !verbs {
				c.unsubscribeCQ(cq)
			}
		}
	}
	if err != nil {
		if cq.made {
			c.dev.DestroyCQ(cq.handle)
		}
		cq.release()
		return nil, wrapAs(op, c.name, "", err)
	}
	return cq, nil
}

// speaksVerbs reports whether the device creates verbs objects: it
// answered GET_CONTEXT with mlx5's driver data.
func (c *Context) speaksVerbs() bool { return c.verbs }

// createVerbs creates the CQ through the kernel (UVERBS_METHOD_CQ_CREATE
// with struct mlx5_ib_create_cq), as libmlx5's create_cq does: the ring
// and the doorbell record at their addresses, 64-byte CQEs, the context's
// non-cached UAR page for its arm doorbell.
func (cq *CQ) createVerbs(opt CQOptions) error {
	c := cq.c
	nc, err := c.ncPage()
	if err != nil {
		return err
	}
	buf, err := allocBuffer(cqeSize << cq.logSize)
	if err != nil {
		return err
	}
	cq.res.add(buf)
	dbr, err := allocBuffer(4096)
	if err != nil {
		return err
	}
	cq.res.add(dbr)
	cq.ring = buf.mem
	for i := 0; i < len(cq.ring); i += cqeSize {
		wqe.InitCQE(cq.ring[i : i+cqeSize])
	}
	if opt.Events {
		if cq.ch, err = c.dev.NewCompChannel(); err != nil {
			return err
		}
	}
	cq.user = c.newHandle(cq)
	drv := mlx5abi.Mlx5IbCreateCq{BufAddr: addrOf(cq.ring), DbAddr: addrOf(dbr.mem), CqeSize: cqeSize,
		Flags: mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX, UarPageIndex: uint16(nc.pageID)}
	var resp mlx5abi.Mlx5IbCreateCqResp
	create := seam.CQCreate{CQE: uint32(1)<<cq.logSize - 1, CompVector: opt.Vector, Channel: cq.ch, UserHandle: cq.user}
	if opt.Timestamps || opt.RealTimeTimestamps {
		create.Flags |= uverbsCQFlagsTimestamp
	}
	if opt.RealTimeTimestamps {
		drv.Flags |= mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS
	}
	h, _, err := c.dev.CreateCQ(create, bytesOf(&drv), bytesOf(&resp))
	if err != nil {
		return err
	}
	cq.handle, cq.cqn, cq.made = h, resp.Cqn, true
	// The kernel reports a verbs CQ's errors (IB_EVENT_CQ_ERR) on the
	// context's async event file only: read it from now on, so that Poll
	// can report them.
	c.startEvents()
	cq.db, err = doorbell.NewCQ(dbr.mem[:doorbell.RecordSize], nc.page, cq.cqn)
	return err
}

// uverbsCQFlagsTimestamp is IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION.
const uverbsCQFlagsTimestamp = 1 << 0

// cqeTimestamp is a successful completion CQE's timestamp (big-endian at
// byte 48; an error CQE has its syndromes there).
func cqeTimestamp(b []byte) uint64 { return binary.BigEndian.Uint64(b[48:56]) }

// release frees what a CQ made besides its device object.
func (cq *CQ) release() {
	cq.res.close()
	if cq.ch != nil {
		cq.ch.Close()
	}
	if cq.user != 0 {
		cq.c.dropHandle(cq.user)
	}
}

func (cq *CQ) create(opt CQOptions) error {
	c := cq.c
	q, err := c.queueMemory(&cq.res, cqeSize<<cq.logSize, UARNonCached)
	if err != nil {
		return err
	}
	cq.ring = q.buf
	for i := 0; i < len(cq.ring); i += cqeSize {
		wqe.InitCQE(cq.ring[i : i+cqeSize])
	}
	eqn, err := c.QueryEQN(opt.Vector)
	if err != nil {
		return err
	}

	in := mailbox(prm.CreateCqIn.Layout().Size, prm.MLX5_CMD_OP_CREATE_CQ)
	cqc := prm.CreateCqIn.CqContext
	prm.Cqc.CqeSz.At(cqc).Set(in, 0)
	prm.Cqc.LogCqSize.At(cqc).Set(in, uint64(cq.logSize))
	prm.Cqc.UarPage.At(cqc).Set(in, uint64(q.uar.pageID))
	prm.Cqc.CEqnOrApuElement.At(cqc).Set(in, uint64(eqn))
	prm.Cqc.LogPageSize.At(cqc).Set(in, 0) // 4 KiB pages, log in units of 4 KiB
	prm.Cqc.DbrUmemValid.At(cqc).Set(in, 1)
	prm.Cqc.DbrUmemId.At(cqc).Set(in, uint64(q.dbrID))
	prm.CreateCqIn.CqUmemValid.Set(in, 1)
	prm.CreateCqIn.CqUmemId.Set(in, uint64(q.bufID))
	out := make([]byte, prm.CreateCqOut.Layout().Size)
	obj, err := c.createObj("devx obj create", in, out)
	if err != nil {
		return err
	}
	cq.res.add(obj)
	cq.obj = obj
	cq.cqn = uint32(prm.CreateCqOut.Cqn.Get(out))
	if opt.Events {
		if cq.ch, err = c.devxCompChannel(obj, cq.cqn); err != nil {
			return err
		}
	}
	cq.db, err = doorbell.NewCQ(q.dbr, q.uar.page, cq.cqn)
	return err
}

// queueMemory is what a CQ or a QP needs besides its create command: the
// queue's buffer and a doorbell record, each in its own UMEM, and a UAR
// page.
type queueMemory struct {
	buf, dbr     []byte
	bufID, dbrID uint32 // umem ids
	uar          *UAR
	bufMap       *Buffer // buf's mapping
}

// queueMemory makes it, adding each piece to res. The pieces belong to
// the object, not to the context: only the object's Close (or the
// context's, through the object) releases them.
func (c *Context) queueMemory(res *resources, size int, uarType UARType) (queueMemory, error) {
	var q queueMemory
	buf, err := allocBuffer(size)
	if err != nil {
		return q, err
	}
	res.add(buf)
	q.bufMap = buf
	dbr, err := allocBuffer(4096)
	if err != nil {
		return q, err
	}
	res.add(dbr)
	q.buf, q.dbr = buf.mem, dbr.mem[:doorbell.RecordSize]
	for _, m := range []struct {
		mem []byte
		id  *uint32
	}{{q.buf, &q.bufID}, {dbr.mem, &q.dbrID}} {
		u, err := c.regUMem(m.mem, uint32(uverbs.AccessLocalWrite))
		if err != nil {
			return q, err
		}
		res.add(u)
		*m.id = u.id
	}
	if q.uar, err = c.allocUAR(uarType); err != nil {
		return q, err
	}
	res.add(q.uar)
	return q, nil
}

// mailbox returns an input mailbox of n bytes with the opcode set.
func mailbox(n uint32, opcode uint16) []byte {
	in := make([]byte, n)
	prm.MboxIn.Opcode.Set(in, uint64(opcode))
	return in
}

// CQN is the CQ's number.
func (cq *CQ) CQN() uint32 {
	if cq == nil {
		return 0
	}
	return cq.cqn
}

// Size is the number of CQEs the ring holds (0 for a CQ CreateCQ did not
// make). Resize changes it: read it on the goroutine that resizes, or
// after the resize returned.
func (cq *CQ) Size() int {
	if cq == nil || cq.logSize == 0 {
		return 0
	}
	return 1 << cq.logSize
}

// usable fails for a nil CQ and one not made by CreateCQ.
func (cq *CQ) usable(op string) error {
	if cq == nil || cq.c == nil {
		return unusable(op, "CQ", "Context.CreateCQ", cq == nil)
	}
	return nil
}

// Close destroys the CQ; the QPs on it must be closed first (EBUSY
// otherwise), which removes their completions from it (QP.Close). What
// is left unpolled, signature error reports, goes with the CQ. If the
// device refuses the destroy, the CQ stays as it was and usable. Closing
// twice is safe.
func (cq *CQ) Close() error {
	const op = "destroy cq"
	if err := cq.usable(op); err != nil {
		return err
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return nil
	}
	if cq.refs > 0 && !cq.c.closedNow() {
		return opErr(op, cq.name, fmt.Errorf("%s: %w", cq.usersLocked(), unix.EBUSY))
	}
	var err error
	if cq.verbs {
		if !cq.c.closedNow() {
			err = cq.c.dev.DestroyCQ(cq.handle)
		}
	} else {
		err = cq.obj.Close()
	}
	if err != nil {
		return opErr(op, cq.name, err)
	}
	cq.g.close()
	if !cq.verbs {
		cq.c.unsubscribeCQ(cq)
	}
	cq.closed = true
	cq.c.forget(cq)
	cq.release()
	return nil
}

// usersLocked says which QPs use the CQ, for Close's EBUSY: each once,
// though it may use the CQ for both its sends and its receives (refs
// counts the roles), and those being created, which have no number yet.
// cq.mu is held.
func (cq *CQ) usersLocked() string {
	qps := *cq.qps.Load()
	roles := 0
	for _, qp := range qps {
		if qp.sendCQ == cq {
			roles++
		}
		if qp.recvCQ == cq {
			roles++
		}
	}
	var s string
	switch len(qps) {
	case 0:
	case 1:
		for _, qp := range qps {
			s = qp.name + " uses it"
		}
	default:
		s = fmt.Sprintf("%d QPs use it", len(qps))
	}
	if roles < cq.refs {
		if s != "" {
			s += ", and "
		}
		s += "a QP is being created on it"
	}
	return s
}

// ref records a QP being created on the CQ: Close fails with EBUSY until
// unref.
func (cq *CQ) ref() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return opErr("create qp", cq.name, ErrClosed)
	}
	cq.refs++
	return nil
}

func (cq *CQ) unref() {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	cq.refs--
}

// lockCQs locks the CQs of a QP (one or two), the lower CQN first, and
// returns the unlock.
func lockCQs(a, b *CQ) func() {
	if a == b {
		a.mu.Lock()
		return a.mu.Unlock
	}
	if a.cqn > b.cqn {
		a, b = b, a
	}
	a.mu.Lock()
	b.mu.Lock()
	return func() { b.mu.Unlock(); a.mu.Unlock() }
}

// attachLocked adds qp to the CQ's map; cq.mu is held.
func (cq *CQ) attachLocked(qp *QP) {
	old := *cq.qps.Load()
	m := make(map[uint32]*QP, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[qp.qpn] = qp
	cq.qps.Store(&m)
}

// detachLocked removes qp from the CQ's map; cq.mu is held.
func (cq *CQ) detachLocked(qp *QP) {
	old := *cq.qps.Load()
	if old[qp.qpn] != qp {
		return
	}
	m := make(map[uint32]*QP, len(old))
	for k, v := range old {
		if v != qp {
			m[k] = v
		}
	}
	cq.qps.Store(&m)
}

// cleanLocked removes the CQEs of QP qpn from the ring, as libmlx5's
// __mlx5_cq_clean does for a destroyed QP: between the consumer index and
// the first CQE the device still owns, the completions that name qpn are
// dropped and the others move up, in order, so that a later QP with the
// same number never sees them. Signature error CQEs stay: they report an
// mkey, not the QP's work. A receive CQE of the QP's SRQ is not dropped
// with the QP's: the receive is the SRQ's work request, consumed and
// done, so its completion is kept for Poll (cq.cleaned) and its WQE goes
// back to the SRQ. The poller waits meanwhile; cq.mu is held.
func (cq *CQ) cleanLocked(qpn uint32, srq *SRQ) {
	if cq.closed {
		return
	}
	cq.g.pause()
	defer cq.g.resume()
	cq.cleanPaused(qpn, srq)
}

// closeQPLocked is cleanLocked and detachLocked for a destroyed QP, in
// one pause of the poller: no Poll call can begin between the clean and
// the detach and find qp under a number the device may already have
// given to a new QP.
func (cq *CQ) closeQPLocked(qp *QP) {
	if cq.closed {
		cq.detachLocked(qp)
		return
	}
	cq.g.pause()
	defer cq.g.resume()
	cq.cleanPaused(qp.qpn, qp.srq)
	cq.detachLocked(qp)
}

// cleanPaused is cleanLocked's work, with the poller paused.
func (cq *CQ) cleanPaused(qpn uint32, srq *SRQ) {
	size := uint32(1) << cq.logSize
	slot := func(i uint32) []byte { return cqeAt(cq.ring, cq.logSize, i) }
	pi := cq.ci
	for pi-cq.ci < size && owned(slot(pi), pi, cq.logSize) {
		pi++
	}
	var freed uint32
	kept := len(cq.cleaned)
	for p := pi; p != cq.ci; {
		p--
		b := slot(p)
		if cqeQPN(b) == qpn {
			if srq != nil && isResponder(b) {
				cq.keepSRQRecv(b, qpn, srq)
			}
			freed++
			continue
		}
		if freed > 0 {
			to := p + freed
			d := slot(to)
			copy(d, b)
			d[cqeSize-1] = b[cqeSize-1]&^1 | uint8(to>>cq.logSize)&1
		}
	}
	slices.Reverse(cq.cleaned[kept:]) // kept newest first
	if freed > 0 {
		cq.ci += freed
		cq.db.SetCI(cq.ci)
	}
}

// keepSRQRecv keeps for Poll the completion of b, a receive CQE of QP qpn
// that consumed a WQE of srq, as Poll would have made it, and gives the
// WQE back to the SRQ (as Poll does). A CQE of no QP attached with srq
// (which no clean sees: the QP is detached after its clean) only gives
// the WQE back.
func (cq *CQ) keepSRQRecv(b []byte, qpn uint32, srq *SRQ) {
	var qp *QP
	if m := cq.qps.Load(); m != nil {
		qp = (*m)[qpn]
	}
	var wc Completion
	if qp == nil || qp.srq != srq || !qp.completeRecv(b, b[cqeSize-1]>>4, &wc) {
		srq.free(binary.BigEndian.Uint16(b[60:]))
		return
	}
	if cq.stamps && b[cqeSize-1]>>4 <= wqe.CQERespSendInv {
		wc.Timestamp = cqeTimestamp(b)
	}
	cq.cleaned = append(cq.cleaned, wc)
}

// pollCleaned is Poll's for the completions cleans kept (cq.cleaned):
// as many as wc holds, oldest first.
//
//go:noinline
func (cq *CQ) pollCleaned(wc []Completion) int {
	n := copy(wc, cq.cleaned)
	if cq.cleaned = cq.cleaned[n:]; len(cq.cleaned) == 0 {
		cq.cleaned = nil
	}
	return n
}

// cqeQPN is the QP a completion CQE names, or ^0 for a CQE that names
// none (signature errors, resize and others).
func cqeQPN(b []byte) uint32 {
	switch b[cqeSize-1] >> 4 {
	case wqe.CQEReq, wqe.CQERespWRImm, wqe.CQERespSend, wqe.CQERespSendImm, wqe.CQERespSendInv, wqe.CQEReqErr, wqe.CQERespErr:
		return binary.BigEndian.Uint32(b[56:]) & 0xffffff
	}
	return ^uint32(0)
}

// isResponder says whether a CQE completes a receive.
func isResponder(b []byte) bool {
	switch b[cqeSize-1] >> 4 {
	case wqe.CQERespWRImm, wqe.CQERespSend, wqe.CQERespSendImm, wqe.CQERespSendInv, wqe.CQERespErr:
		return true
	}
	return false
}

// failed records a CQ error event for Poll (the event reader's).
func (cq *CQ) failed(syndrome uint8) {
	var err error
	switch syndrome {
	case mlx5abi.MLX5_CQ_ERROR_SYNDROME_CQ_OVERRUN:
		err = ErrCQOverrun
	case mlx5abi.MLX5_CQ_ERROR_SYNDROME_CQ_ACCESS_VIOLATION_ERROR:
		err = fmt.Errorf("the device reported a CQ access violation (CQ error syndrome %#x); the CQ takes no more completions", syndrome)
	default:
		err = fmt.Errorf("the device reported a CQ error, syndrome %#x; the CQ takes no more completions", syndrome)
	}
	cq.fault.CompareAndSwap(nil, &Error{Op: "poll", Obj: cq.name, Err: err})
}

// failedEvent records the kernel's IB_EVENT_CQ_ERR of a verbs CQ, which
// says overrun or access violation without saying which.
func (cq *CQ) failedEvent() {
	cq.fault.CompareAndSwap(nil, &Error{Op: "poll", Obj: cq.name, Err: fmt.Errorf("the device reported a CQ error (IB_EVENT_CQ_ERR: an overrun, or an access violation): %w", ErrCQOverrun)})
}

// Poll reads up to len(wc) completions into wc and returns how many it
// read (ibv_poll_cq). The completions are valid even when err is not nil.
// err reports:
//   - ErrCQOverrun (or another CQ error) once the device reported it, on
//     every poll after the CQEs written before it are read;
//   - a signature error CQE naming no mkey of the context, once, as
//     libmlx5's poll fails for it;
//   - ErrClosed after Close.
//
// A work request of several WQEs (an mkey configure) completes once,
// whatever happened to each WQE. The receives of an SRQ that a QP
// consumed before its Close or its move to RESET come first, as the
// device reported them (QP.Close). Signature error reports (SIG_ERR CQEs)
// are not completions: Poll hands them to their Mkey, for Mkey.Check. It
// does not allocate, lock or make a system call.
func (cq *CQ) Poll(wc []Completion) (int, error) {
	if cq == nil || !cq.g.enterOne() {
		return 0, cq.refused()
	}
	if m := cq.qps.Load(); m != cq.qpsSeen {
		cq.seeQPs(m)
	}
	// The ring, the consumer index and the size in locals: the calls
	// below could not change them (cleans wait for the poller), but the
	// compiler cannot know it and would reload them.
	ci, size := cq.ci, uint32(1)<<cq.logSize
	if uint(len(cq.ring)) < uint(size)*cqeSize {
		size = 0 // not a CQ CreateCQ made: nothing to read
	}
	ring := unsafe.Pointer(unsafe.SliceData(cq.ring))
	n := 0
	if len(cq.cleaned) != 0 {
		n = cq.pollCleaned(wc)
	}
	var err error
	for n < len(wc) && size != 0 {
		// In the ring: ci&(size-1) < size, and the ring holds size
		// CQEs (checked above).
		b := (*[cqeSize]byte)(unsafe.Add(ring, uintptr(ci&(size-1))*cqeSize))
		op, ok := ownedOp(b, ci&size != 0)
		if !ok {
			break
		}
		ci++
		opcode := op >> 4
		if opcode == wqe.CQESigErr {
			if err = cq.sigErr(b[:]); err != nil {
				break
			}
			continue
		}
		qpn := wqe.CQEQPN(b[:])
		qp := cq.qpCache[qpn&(qpCacheSize-1)]
		if qp == nil || qp.qpn != qpn {
			if qp = cq.lookupQP(qpn); qp == nil {
				continue
			}
		}
		if opcode == wqe.CQEReq {
			// A successful send, in the loop itself: retire is
			// inlined, and without a call Poll keeps its state in
			// registers. Errors and receives are complete's.
			if s, ok := qp.sq.retire(wqe.CQEWQECounter(b[:]), retireTail); ok {
				wc[n] = Completion{WrID: s.wrID, Opcode: s.op, QPN: qpn}
				if s.bits != 0 {
					wc[n].reqBits(s.bits, b[:])
				}
				if cq.stamps {
					wc[n].Timestamp = cqeTimestamp(b[:])
				}
				n++
			}
			continue
		}
		if qp.complete(b[:], opcode, &wc[n]) {
			if cq.stamps && opcode <= wqe.CQERespSendInv {
				wc[n].Timestamp = cqeTimestamp(b[:])
			}
			n++
		}
	}
	if ci != cq.ci {
		cq.ci = ci
		cq.db.SetCI(ci)
	}
	cq.g.exitOne()
	if err == nil {
		if f := cq.fault.Load(); f != nil {
			err = f
		}
	}
	return n, err
}

// qpCacheSize is the number of entries of CQ.qpCache, a power of two.
const qpCacheSize = 64

// seeQPs makes m, the CQ's map of QPs just loaded, the one the poller's
// cache stands for, and empties the cache.
func (cq *CQ) seeQPs(m *map[uint32]*QP) {
	cq.qpCache = [qpCacheSize]*QP{}
	cq.qpsSeen = m
}

// lookupQP is Poll's way to the QP of a CQE that the cache did not
// have: from the map Poll loaded, or, when it is not there, from the
// map read again (a QP attached since: a QP is attached before it can
// post, and detached only with its CQEs cleaned out, so a CQE whose QP is
// not in the map read now is a stray, and lookupQP returns nil). It
// caches what it finds.
func (cq *CQ) lookupQP(qpn uint32) *QP {
	qp := (*cq.qpsSeen)[qpn]
	if qp == nil {
		if m := cq.qps.Load(); m != cq.qpsSeen {
			cq.seeQPs(m)
			qp = (*m)[qpn]
		}
		if qp == nil {
			return nil
		}
	}
	cq.qpCache[qpn&(qpCacheSize-1)] = qp
	return qp
}

// refused is Poll's error when the CQ is nil or its guard refuses: the
// CQ is closed, or CreateCQ did not make it. (Out of Poll, so that the
// error's making costs Poll nothing.)
func (cq *CQ) refused() error {
	if cq == nil || !cq.g.opened() {
		return unusable("poll", "CQ", "Context.CreateCQ", cq == nil)
	}
	return cq.errClosed
}

// owned is wqe.CQEOwned with the ordering the device's write needs: the
// device writes op_own (the CQE's last byte) after the rest, so op_own is
// read with an atomic load (load-acquire on arm64, libmlx5's
// udma_from_device_barrier), and the CQE's other bytes are read after it.
func owned(cqe []byte, ci uint32, logSize uint8) bool {
	_, ok := ownedOp((*[cqeSize]byte)(cqe), ci>>logSize&1 != 0)
	return ok
}

// ownedOp is owned for a CQE whose owner bit software owns when it is
// odd (odd: bit logSize of the consumer index is set); it also returns
// the CQE's op_own byte. The test is wqe.CQEOwned's (TestOwnedOp
// compares them), written out here so that Poll neither builds a 64-byte
// probe nor shifts by a variable count.
func ownedOp(cqe *[cqeSize]byte, odd bool) (uint8, bool) {
	w := atomic.LoadUint32((*uint32)(unsafe.Pointer(&cqe[cqeSize-4])))
	var last [4]byte
	binary.NativeEndian.PutUint32(last[:], w)
	op := last[3]
	return op, op>>4 != wqe.CQEInvalid && op&1 != 0 == odd
}

// sigErr hands a SIG_ERR CQE's report to its mkey. A CQE that names no
// mkey of the context is an error, as libmlx5's poll fails for it.
func (cq *CQ) sigErr(b []byte) error {
	var s wqe.SigErrCQE
	if err := s.Decode(b); err != nil {
		return opErr("poll", cq.name, fmt.Errorf("signature error CQE: %w", err))
	}
	m := cq.c.mkeyByIndex(s.Mkey >> 8)
	if m == nil {
		return opErr("poll", cq.name, fmt.Errorf("signature error CQE for mkey %#x, which is not an mkey of this context", s.Mkey))
	}
	m.recordSigErr(s.Sig())
	return nil
}

// statusOf maps an error CQE's syndrome to the work completion status
// libmlx5 reports for it.
func statusOf(s wqe.Syndrome) WCStatus {
	if st, ok := syndromeStatus[s]; ok {
		return st
	}
	return WCGeneralErr
}

var syndromeStatus = map[wqe.Syndrome]WCStatus{
	wqe.SyndromeLocalLength: WCLocLenErr, wqe.SyndromeLocalQPOp: WCLocQPOpErr, wqe.SyndromeLocalProt: WCLocProtErr,
	wqe.SyndromeWRFlush: WCWRFlushErr, wqe.SyndromeMWBind: WCMWBindErr, wqe.SyndromeBadResp: WCBadRespErr,
	wqe.SyndromeLocalAccess: WCLocAccessErr, wqe.SyndromeRemoteInvalReq: WCRemInvReqErr,
	wqe.SyndromeRemoteAccess: WCRemAccessErr, wqe.SyndromeRemoteOp: WCRemOpErr,
	wqe.SyndromeTransportRetryExc: WCRetryExcErr, wqe.SyndromeRNRRetryExc: WCRNRRetryExcErr,
	wqe.SyndromeRemoteAborted: WCRemAbortErr,
}

// Arm asks for one completion event (ibv_req_notify_cq): when the next
// completion arrives, or with solicited only the next solicited one (or
// error). The CQ needs CQOptions.Events. Arm belongs to the poller: it
// names the consumer index Poll has reached, so a completion already
// waiting raises the event at once. Poll again after Arm before you Wait,
// as with ibv_req_notify_cq, or a completion that arrived in between goes
// unnoticed until the next.
func (cq *CQ) Arm(solicited bool) error {
	const op = "arm"
	if err := cq.usable(op); err != nil {
		return err
	}
	if cq.g.closed() {
		return opErr(op, cq.name, ErrClosed)
	}
	if cq.ch == nil {
		return invalid(op, cq.name, "the CQ has no completion channel (CQOptions.Events)")
	}
	if !cq.g.enter() {
		return opErr(op, cq.name, ErrClosed)
	}
	cmd := doorbell.ArmNext
	if solicited {
		cmd = doorbell.ArmSolicited
	}
	cq.db.Arm(cq.armSN, cmd, cq.ci)
	cq.g.exit()
	return nil
}

// Wait waits for the completion event Arm asked for, or until ctx is done
// (ibv_get_cq_event and its ack). It waits in the Go runtime's netpoller,
// holding no thread. After it returns, Poll, then Arm again for the next
// event. When ctx is done, the error wraps ctx's.
func (cq *CQ) Wait(ctx context.Context) error {
	const op = "wait"
	if err := cq.usable(op); err != nil {
		return err
	}
	if cq.g.closed() {
		return opErr(op, cq.name, ErrClosed)
	}
	if cq.ch == nil {
		return invalid(op, cq.name, "the CQ has no completion channel (CQOptions.Events)")
	}
	if ctx == nil {
		return invalid(op, cq.name, "nil context.Context")
	}
	if _, err := cq.ch.Next(ctx); err != nil {
		if ctx.Err() != nil {
			return opErr(op, cq.name, ctx.Err())
		}
		if cq.g.closed() {
			return opErr(op, cq.name, ErrClosed)
		}
		return opErr(op, cq.name, err)
	}
	cq.armSN++ // libmlx5's mlx5_cq_event: the next arm is a new one
	return nil
}
