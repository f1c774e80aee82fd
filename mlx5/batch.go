package mlx5

import (
	"fmt"

	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// Batch is a batch of send work requests on one QP (ibv_wr_start, the
// ibv_wr_* builders, ibv_wr_complete): each Add writes its WQEs into the
// send queue at once, Commit rings one doorbell for all of them.
//
// A batch is all or nothing. The first work request that is invalid, or
// that does not fit, poisons it: later Adds do nothing, and Commit writes
// zeros over every WQEBB the batch wrote, restores the QP's producer
// counter and small fence, undoes what mkey configures changed in their
// mkeys, rings no doorbell and returns the error, which names the work
// request. libmlx5 leaves the bytes it wrote past the counter; this leaves
// none.
//
// Close does not wait for an open batch (libmlx5's ibv_wr_start holds
// the QP's lock until ibv_wr_complete, and a destroy meanwhile waits for
// ever): a batch still open when the QP is closed, by QP.Close or
// Context.Close, ends with it. Its work requests are never rung: Commit
// posts nothing and returns ErrClosed, whatever was added before or
// after Close, and Abort just ends it. Until it ends, the QP's work
// queue stays mapped, so that an Add racing Close writes into memory
// that is still the batch's; a batch its poster abandons for good (a
// forgotten Commit, a panic recovered between Begin and Commit) gives
// it up when the QP becomes unreachable, or at the next Begin. A QP has
// one batch, reused, so batches do not allocate. One goroutine at a
// time posts on a QP.
type Batch struct {
	qp   *QP
	err  error
	open bool
	// ready: open and no error (what Add's fast lane looks at).
	ready bool
	// refusedAt: Begin found the QP closed (or nil, or not made by
	// CreateQP), and err says so for a post send, until the first work
	// request added names its operation.
	refusedAt bool
	// limit is the producer counter up to which the batch may write:
	// the counter at Begin plus the WQEBBs free then (the poller only
	// frees more meanwhile). In 16 bits, as the counters: a send queue
	// of less than 65536 WQEBBs (the 16-bit counters tell a full one
	// from an empty one up to 32768) never has 65536 free.
	limit uint16
	start uint16 // the producer counter at Begin
	fm    bool   // the small fence at Begin
	n     int    // work requests added
	extra int    // WQEs written beyond one a work request (SET_PSVs)
	// lastDB is the doorbell word of the last WQE written: the first 8
	// bytes of its control segment, which hold its counter and its ds.
	// (A field, not a wqe.Result: a whole-struct copy of the builder's
	// result stalls on store forwarding, a cost per work request.)
	lastDB uint64
	// send is the builder's input, reused so that a work request does
	// not build a new one.
	send wqe.Send
	ud   wqe.UD
	dc   wqe.DC
	// stream is the stream of the work request being added (a DCI's).
	stream uint16
	// undo is what mkey configures changed in their mkeys, oldest first;
	// cundo what configures of crypto mkeys changed of their crypto, and
	// the DEKs they took.
	undo  []mkeyUndo
	cundo []cryptoUndo
}

// Begin starts a batch on the QP. If the QP is closed, the batch carries
// ErrClosed: Adds do nothing and Commit returns it, naming the operation
// of the first work request added (ErrInvalid for a nil QP, or one
// CreateQP did not make).
func (qp *QP) Begin() *Batch {
	if qp == nil {
		return nilQPBatch()
	}
	b := &qp.batch
	if b.open || !qp.g.hold() {
		return qp.beginRefused()
	}
	b.qp, b.err, b.n, b.extra = qp, nil, 0, 0
	b.undo = b.undo[:0]
	b.open, b.ready, b.refusedAt = true, true, false
	b.start, b.fm = qp.sq.pi, qp.sq.fm
	b.limit = qp.sq.limit()
	return b
}

// beginRefused is Begin's batch when a batch is open or the QP's guard
// refused entry. Not inlined: Begin stays small.
//
//go:noinline
func (qp *QP) beginRefused() *Batch {
	b := &qp.batch
	b.ready = false
	if b.open {
		// A batch that was not committed or aborted: a misuse, not a
		// state to build on (or one that Close ended). Abort it and
		// fail the new one.
		b.Abort()
		b.start, b.err = qp.sq.pi, invalid("post send", qp.name, "Begin while a batch is open (Commit or Abort it first)")
		if qp.g.closed() {
			b.err = qp.refused(postSend)
		}
		b.open = false
		return b
	}
	b.qp, b.err, b.n, b.extra, b.refusedAt = qp, qp.refused(postSend), 0, 0, true
	b.undo = b.undo[:0]
	return b
}

// nilQPBatch is Begin's batch for a nil QP: its Commit is ErrInvalid.
// Not inlined: Begin stays as small as it was.
//
//go:noinline
func nilQPBatch() *Batch {
	return &Batch{err: unusable(postOpNames[postSend], "QP", "Context.CreateQP", true), refusedAt: true}
}

// refused is the error of a post on a nil QP, or one the QP's guard
// refused: the QP is closed, or CreateQP did not make it.
func (qp *QP) refused(op postOp) error {
	if qp == nil || !qp.g.opened() {
		return unusable(postOpNames[op], "QP", "Context.CreateQP", qp == nil)
	}
	return qp.errs.closed[op]
}

// refusedAs names the operation of the first work request added to a
// batch Begin refused in its error. Not inlined: Add's failure path stays
// out of its way.
//
//go:noinline
func (b *Batch) refusedAs(op postOp) {
	if b.refusedAt && b.n == 0 && op != postSend {
		b.err = b.qp.refused(op)
	}
	b.refusedAt = false
}

// fail poisons the batch with err, which names work request n of it.
func (b *Batch) fail(op postOp, err error) {
	if b.err == nil {
		b.err = err
	}
	b.ready = false
}

// usable reports whether Add may build: the batch is open and healthy.
func (b *Batch) usable() bool { return b.open && b.err == nil }

// takes is the start of every Add: whether the batch may build the work
// request of operation op. A nil batch takes nothing; one that is not
// usable notes op's refusal; a nil work request (isNil) poisons the
// batch with ErrInvalid.
func (b *Batch) takes(op postOp, isNil bool) bool {
	switch {
	case b == nil:
		return false
	case !b.usable():
		b.refusedAs(op)
		return false
	case isNil:
		b.fail(op, invalid(postOpNames[op], b.qp.name, "work request %d of the batch is nil", b.n))
		return false
	}
	return true
}

// room is the WQEBBs a work request of the batch may take: what was free
// at Begin less what the batch wrote, and no more than the largest work
// request the QP was created for.
func (b *Batch) room() int {
	return min(int(b.limit-b.qp.sq.pi), b.qp.sq.maxWQE)
}

// added records a work request the builder wrote: its WQEBBs, the
// doorbell word of its last WQE, the small fence it leaves, and its WQEs.
func (b *Batch) added(wrID uint64, wc WCOpcode, bits uint8, bbs int, db uint64, fence bool, wqes int) {
	qp := b.qp
	at := qp.sq.pi
	last := at
	if wqes > 1 {
		last = at + uint16(bbs) - 1 // the last SET_PSV: one WQEBB
	}
	qp.sq.fm = fence
	if ds := qp.sq.streams; ds != nil {
		ds.stream[int(at)&(len(ds.stream)-1)] = b.stream
	}
	qp.sq.track(wrID, wc, bbs, last, bits)
	b.lastDB = db
	b.extra += wqes - 1
	b.n++
}

// add is Add's general path. In a batch that is not open it does
// nothing (PostSend relies on it).
func (b *Batch) add(wr *SendWR) *Batch {
	const op = postSend
	if !b.takes(op, wr == nil) {
		return b
	}
	qp := b.qp
	if len(qp.sq.slots) == 0 && qp.typ != QPTypeDCT {
		b.fail(op, invalid(postOpNames[op], qp.name, "the QP has no send queue (MaxSendWR 0)"))
		return b
	}
	if wr.Opcode == 0 || wr.Opcode >= numOpcodes {
		b.fail(op, invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): opcode %d", b.n, wr.WrID, uint8(wr.Opcode)))
		return b
	}
	info := &opcodes[wr.Opcode]
	if !info.types.has(qp.typ) {
		b.fail(op, invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): %v on a %v QP", b.n, wr.WrID, wr.Opcode, qp.typ))
		return b
	}
	// The builder's result is taken field by field: copying the whole
	// wqe.Result it returns in registers costs a store-forwarding stall.
	var (
		bbs   int
		db    uint64
		fence bool
		err   error
	)
	if qp.typ == QPTypeDCI {
		if err := qp.dcAddr(b.n, wr, &b.dc); err != nil {
			b.fail(op, err)
			return b
		}
		// A QP's type is for life: elsewhere these stay nil and 0.
		b.send.DC = &b.dc
	} else if wr.StreamID != 0 {
		b.fail(op, qp.streamErr(b.n, wr))
		return b
	}
	switch wr.Opcode {
	case OpLocalInv:
		l := wqe.LocalInv{QPN: qp.qpn, RKey: wr.InvalidateKey, Flags: wqe.SendFlags(wr.Flags), SmallFence: qp.sq.fm}
		r, e := wqe.BuildLocalInv(qp.sq.ring, qp.sq.pi, b.room(), &l)
		bbs, db, fence, err = r.WQEBBs, r.Doorbell, r.SmallFence, e
	case OpNOP:
		r, e := wqe.BuildNOP(qp.sq.ring, qp.sq.pi, b.room(), qp.qpn, wqe.SendFlags(wr.Flags))
		bbs, db, fence, err = r.WQEBBs, r.Doorbell, r.SmallFence, e
	default:
		s := &b.send
		s.QPN, s.Opcode, s.Flags, s.Imm = qp.qpn, info.mlx5, wqe.SendFlags(wr.Flags), wr.Imm
		s.RemoteAddr, s.RKey, s.SGL, s.Inline = wr.RemoteAddr, wr.RKey, wqeSGL(wr.SGL), wr.Inline
		s.SmallFence, s.MaxSGE, s.MaxInline, s.MaxMessage = qp.sq.fm, qp.sq.maxSGE, qp.sq.maxInline, qp.sq.maxMsg
		s.SwapAdd, s.Compare, s.UD = 0, 0, nil
		switch wr.Opcode {
		case OpSendInv:
			s.Imm = wr.InvalidateKey
		case OpAtomicCAS:
			s.SwapAdd, s.Compare = wr.SwapAdd, wr.Compare
		case OpAtomicFAA:
			s.SwapAdd = wr.SwapAdd
		}
		if qp.typ == QPTypeUD {
			if wr.AH == nil {
				b.fail(op, invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): a send on a UD QP needs an AH", b.n, wr.WrID))
				return b
			}
			if !wr.AH.postableOn(qp.c) {
				b.fail(op, qp.ahErr(op, b.n, wr))
				return b
			}
			b.ud = wqe.UD{AV: wr.AH.av, RemoteQPN: wr.RemoteQPN, QKey: wr.QKey}
			s.UD = &b.ud
		}
		r, e := wqe.BuildSend(qp.sq.ring, qp.sq.pi, b.room(), s)
		bbs, db, fence, err = r.WQEBBs, r.Doorbell, r.SmallFence, e
		s.SGL, s.Inline, s.UD = nil, nil, nil // keep nothing of the caller's alive
	}
	if err != nil {
		b.fail(op, qp.wrErr(op, b.n, wr.WrID, bbs, err))
		return b
	}
	b.stream = wr.StreamID // 0 but on a DCI with streams
	b.added(wr.WrID, info.wc, info.slot, bbs, db, fence, 1)
	return b
}

// Commit rings one doorbell for the batch's work requests and ends the
// batch; or, if a work request failed, undoes the batch and returns that
// failure. A batch of nothing rings nothing. If the QP was closed since
// Begin, nothing is rung: the batch is undone and Commit returns
// ErrClosed.
func (b *Batch) Commit() error {
	if b == nil || !b.open || b.err != nil {
		return b.commitFailed()
	}
	qp := b.qp
	// The ring is a call in flight, which Close waits for before it
	// destroys the QP: a doorbell never names a destroyed QP.
	n := b.n + b.extra
	if n == 0 || !qp.g.enter() {
		return b.commitNothing()
	}
	if len(b.cundo) > 0 { // the batch is posted from here on
		b.cryptoCommitted()
	}
	b.open, b.ready = false, false
	qp.sq.sync.publish()
	err := qp.sq.ringDoorbell(b.lastDB, n)
	qp.g.exitHeld()
	if err != nil {
		return qp.ringErr(err)
	}
	return nil
}

// commitNothing is Commit of an open batch that rings nothing: one of no
// work requests, or one whose QP Close closed (enter failed).
//
//go:noinline
func (b *Batch) commitNothing() error {
	if b.n+b.extra > 0 || b.qp.g.closed() {
		b.err = b.qp.refused(postSend)
		return b.commitFailed()
	}
	b.open, b.ready = false, false
	b.end()
	return nil
}

// commitFailed is Commit of a batch that is not open, or failed: it
// rolls a failed batch back and returns its error (ErrClosed if the QP
// was closed since Begin).
//
//go:noinline
func (b *Batch) commitFailed() error {
	if b == nil || !b.open {
		return b.notOpen()
	}
	b.ready = false
	b.rollback()
	b.open = false
	if b.qp.g.closed() {
		b.err = b.qp.refused(postSend)
	}
	b.end()
	return b.err
}

// end lets go of the QP's hold, and unmaps the work queue if Close left
// that to the batch (handOff).
func (b *Batch) end() {
	if b.qp.g.unhold() {
		b.qp.releaseWQ()
	}
}

// notOpen is Commit's error for a batch that is not open: the error it
// carries (Begin refused it, or it failed), or a Commit without Begin.
// Not inlined, as the other slow paths of Commit: Commit stays small.
//
//go:noinline
func (b *Batch) notOpen() error {
	switch {
	case b == nil:
		return invalid("post send", "Batch", "nil *Batch")
	case b.err != nil:
		return b.err
	case b.qp == nil:
		return invalid("post send", "Batch", "Commit of a zero Batch (QP.Begin makes batches)")
	}
	return invalid("post send", b.qp.name, "Commit without Begin")
}

// ringErr is the error of a doorbell the doorbell package refused: a
// broken invariant of the QP's rings.
//
//go:noinline
func (qp *QP) ringErr(err error) error { return opErr("post send", qp.name, err) }

// Abort ends the batch without posting anything: the WQEBBs it wrote are
// zeroed and the QP and mkeys are as they were at Begin.
func (b *Batch) Abort() {
	if b == nil || !b.open {
		return
	}
	b.rollback()
	b.open, b.ready = false, false
	b.end()
}

// rollback zeroes what the batch wrote and restores the QP and mkeys.
func (b *Batch) rollback() {
	qp := b.qp
	for j := b.start; j != qp.sq.pi; j++ {
		clear(qp.sq.ring.Slot(j))
	}
	qp.sq.pi, qp.sq.fm = b.start, b.fm
	for i := len(b.undo) - 1; i >= 0; i-- {
		b.undo[i].restore()
	}
	b.undo = b.undo[:0]
	if len(b.cundo) > 0 {
		b.cryptoRollback()
	}
}

// ahErr is the error of work request n of a batch whose AH is closed
// (ErrClosed), or not one of the QP's context (ErrInvalid).
func (qp *QP) ahErr(op postOp, n int, wr *SendWR) error {
	ah := wr.AH
	if ah.dead.Load() {
		return opErr(postOpNames[op], qp.name, fmt.Errorf("work request %d (wr_id %#x): %s: %w", n, wr.WrID, ah.name, ErrClosed))
	}
	return invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): an AH of another context, or not made by PD.CreateAH", n, wr.WrID)
}

// dcAddr checks the DC address of work request n on a DCI and puts it
// in d: a stream of the DCI, an AH of the QP's context that is not closed
// (ErrClosed, as for a UD send), a DCT number of 24 bits; none on
// LOCAL_INV and NOP, which libmlx5 builds without an address vector, on
// stream 0.
func (qp *QP) dcAddr(n int, wr *SendWR, d *wqe.DC) error {
	const op = postSend
	if wr.StreamID > qp.sq.maxStream {
		return qp.streamErr(n, wr)
	}
	ah := wr.AH
	if wr.Opcode == OpLocalInv || wr.Opcode == OpNOP {
		if ah != nil || wr.StreamID != 0 {
			return invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): %v on a DCI takes no DC address and no stream (libmlx5 builds LOCAL_INV without an address vector, on stream 0)", n, wr.WrID, wr.Opcode)
		}
		return nil
	}
	switch {
	case ah == nil:
		return invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): a DCI work request needs its DC address: the DCT's AH, number (RemoteQPN) and key (DCAccessKey)", n, wr.WrID)
	case !ah.postableOn(qp.c):
		return qp.ahErr(op, n, wr) // as a UD send's
	case wr.RemoteQPN > 0xffffff:
		return invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): DCT number %#x: a QP number has 24 bits", n, wr.WrID, wr.RemoteQPN)
	}
	*d = wqe.DC{AV: ah.av, DCTN: wr.RemoteQPN, Key: wr.DCAccessKey, StreamID: wr.StreamID}
	return nil
}

// streamErr is the error of work request n, which names a stream the QP
// does not have.
func (qp *QP) streamErr(n int, wr *SendWR) error {
	const op = postSend
	switch {
	case qp.typ != QPTypeDCI:
		return invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): stream %d on a QP of type %v (streams are a DCI's)", n, wr.WrID, wr.StreamID, qp.typ)
	case !qp.dciStreams:
		return invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): stream %d on a DCI without streams (QPOptions.DCIStreams): stream 0 only", n, wr.WrID, wr.StreamID)
	}
	return invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): stream %d of a DCI of %d streams (QPOptions.DCIStreams): 0 to %d", n, wr.WrID, wr.StreamID, int(qp.sq.maxStream)+1, qp.sq.maxStream)
}

// wrErr is the error of work request n of a batch that the builder
// refused: the queue has no room for it now (ErrQueueFull), it is larger
// than the QP was created for, or it is invalid (ErrInvalid, with the
// builder's reason).
func (qp *QP) wrErr(op postOp, n int, wrID uint64, needs int, err error) error {
	if err == wqe.ErrRing {
		// The QP's ring is sound: the work request is larger than all of it.
		return invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x) is larger than the send queue's %d WQEBBs (QPOptions.MaxSendWR)", n, wrID, len(qp.sq.slots))
	}
	if err == wqe.ErrNoRoom {
		if needs > qp.sq.maxWQE {
			return invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x) takes %d WQEBBs, more than the %d of the largest the QP was created for (QPOptions)", n, wrID, needs, qp.sq.maxWQE)
		}
		if n == 0 {
			return qp.errs.full[op]
		}
		return &Error{Op: postOpNames[op], Obj: qp.name, Err: fmt.Errorf("work request %d (wr_id %#x): %w", n, wrID, ErrQueueFull)}
	}
	msg := fmt.Sprintf("work request %d (wr_id %#x): %v", n, wrID, err)
	if err == wqe.ErrMsgTooLong {
		msg += fmt.Sprintf(" (%d bytes)", qp.sq.maxMsg)
	}
	return &Error{Op: postOpNames[op], Obj: qp.name, Err: &reasonError{msg: msg, errs: []error{ErrInvalid, unix.EINVAL, err}}}
}
