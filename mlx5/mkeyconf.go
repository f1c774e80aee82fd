package mlx5

import (
	"errors"
	"fmt"

	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// AddMkeyConfigure builds an mkey configure work request into the batch
// (mlx5dv_wr_mkey_configure and its setters): a UMR WQE, then a SET_PSV
// WQE per signature domain when it sets a signature block, or when the
// device reported a signature error on the mkey since its last configure
// (the UMR then also updates the mkey's signature error counter, as
// libmlx5 does). It completes once, with opcode WCUMR, whatever happened
// to each of its WQEs: the first error, or success. The QP must have been
// created with MkeyConfigure, for mkeys of up to as many layout entries.
// A signature block the device's caps do not cover (a block size,
// signature type, T10-DIF guard or CRC type outside Context.SigCaps)
// poisons the batch with ErrUnsupported (EOPNOTSUPP) before anything of
// the work request is written; an invalid one is ErrInvalid first.
//
// A crypto mkey's configure (MkeyConfigureWR.Crypto) is checked against
// mlx5dv_wr_set_mkey_crypto(3) and its DEK before anything is written
// (docs/MLX5.md, "Crypto mkeys"); the mkey then holds its DEK, which
// cannot be closed until a later configure names another or the mkey is
// closed. The UMR carries the crypto BSF, after the signature BSF of a
// signature mkey, whenever it rewrites the BSF, as libmlx5 does.
//
// An mkey configured again with the inputs of its last configure but for
// its list's entries has its WQEs copied (mkeyTmpl).
func (b *Batch) AddMkeyConfigure(wr *MkeyConfigureWR) *Batch {
	const op = postMkeyConfigure
	if !b.takes(op, wr == nil) {
		return b
	}
	qp := b.qp
	m := wr.Mkey
	access, ok := wr.Access.mkeyAccess()
	switch {
	case m == nil || m.c != qp.c:
		b.fail(op, invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): no mkey, or an mkey of another context", b.n, wr.WrID))
		return b
	case !qp.mkeyConf:
		b.fail(op, invalid(postOpNames[op], qp.name, "the QP was created without MkeyConfigure"))
		return b
	case len(qp.sq.slots) == 0:
		b.fail(op, invalid(postOpNames[op], qp.name, "the QP has no send queue (MaxSendWR 0)"))
		return b
	case m.dead.Load():
		b.fail(op, opErr(postOpNames[op], qp.name, fmt.Errorf("work request %d (wr_id %#x): %s: %w", b.n, wr.WrID, m.name, ErrClosed)))
		return b
	case wr.SetAccess && !ok:
		b.fail(op, invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): an mkey's access is local write and remote rights, not %#x", b.n, wr.WrID, uint32(wr.Access)))
		return b
	}
	if m.crypto != nil || wr.Crypto != nil {
		if !b.cryptoTakes(wr, m) {
			return b
		}
	}
	errs := m.sigErrs.Load()
	sigErr := m.sigMkey && errs != m.sentErrs
	// The mkey's template, when this configure has its key: the caps, the
	// block's validity and the inline room are those of the configure
	// that built it.
	t := &m.tmpl
	same := t.key.update(qp, m, wr, sigErr)
	if !same {
		t.ok = false
	} else if t.ok {
		if db, ok := t.Put(qp.sq.ring, qp.sq.pi, b.room(), wqeKLMs(wr.List)); ok {
			st := mkeyState{bsf: m.bsf, shape: sigShape(m.shape.Load()), psvs: m.sigPSV}
			switch {
			case wr.Sig != nil:
				st = mkeyState{bsf: wqe.BSFSet, shape: t.shape, psvs: t.psvs}
			case wr.ResetSig:
				st = mkeyState{bsf: wqe.BSFReset}
			}
			b.configured(m, st, errs)
			b.stream = 0
			b.added(wr.WrID, WCUMR, 0, t.bbs, db, true, t.wqes)
			return b
		}
	}
	var c wqe.MkeyConfigure
	mkeyConfigure(&c, qp, m, wr, access, errs)
	if !umrFits(qp.sq.maxInline, len(wr.List)+len(wr.Interleaved), wr.Interleaved != nil, c.BSFBytes()) {
		b.refuseLarge(wr, &c)
		return b
	}
	// The result is taken field by field: a copy of the whole struct it
	// returns in registers costs a store-forwarding stall.
	res, err := wqe.BuildMkeyConfigure(qp.sq.ring, qp.sq.pi, b.room(), &c)
	bbs, db, fence, wqes := res.WQEBBs, res.Doorbell, res.SmallFence, 1+res.PSVs
	if err != nil {
		b.fail(op, qp.configureErr(b.n, wr, bbs, err))
		return b
	}
	st := stateAfter(m, wr)
	// The WQEs become the template on the second configure of a key in
	// a row: one whose block changes every time (a reference tag per
	// I/O) would copy them for nothing.
	if same && !t.ok && t.Record(qp.sq.ring, qp.sq.pi, &c, res) {
		r, n := t.Result()
		t.ok, t.bbs, t.wqes, t.shape, t.psvs = true, r.WQEBBs, n, st.shape, st.psvs
	}
	b.configured(m, st, errs)
	b.stream = 0
	b.added(wr.WrID, WCUMR, 0, bbs, db, fence, wqes)
	return b
}

// cryptoTakes is AddMkeyConfigure's step for a work request with crypto
// or on a crypto mkey: it checks the crypto (checkCrypto), which takes
// its DEK, and records the configure for the batch's Commit and rollback
// (cryptoAccepted). It reports false, the batch poisoned, for a refused
// one.
//
//go:noinline
func (b *Batch) cryptoTakes(wr *MkeyConfigureWR, m *Mkey) bool {
	var dek *DEK
	if wr.Crypto != nil {
		if err := b.qp.checkCrypto(b.n, wr, m); err != nil {
			b.fail(postMkeyConfigure, err)
			return false
		}
		dek = wr.Crypto.DEK
	}
	b.cryptoAccepted(m, wr, dek)
	return true
}

// mkeyConfigure puts into c the WQEs' inputs of wr, posted on qp to m
// (access: wr's access rights as the UMR sets them; errs: the signature
// errors the CQ reported on m so far): the work request's, the QP's and
// the mkey's configure state.
func mkeyConfigure(c *wqe.MkeyConfigure, qp *QP, m *Mkey, wr *MkeyConfigureWR, access wqe.Access, errs uint32) {
	// Field by field: a composite literal is built on the stack, then
	// copied.
	c.QPN, c.Mkey, c.Flags, c.SmallFence = qp.qpn, m.lkey, wqe.SendFlags(wr.Flags)|wqe.SendInline, qp.sq.fm
	c.SetAccess, c.Access = wr.SetAccess, access
	c.List, c.Interleaved, c.RepeatCount = wqeKLMs(wr.List), wqeRepeat(wr.Interleaved), wr.RepeatCount
	// libmlx5 rounds an mkey's max_entries up to a multiple of 4
	// (mlx5dv_create_mkey's num_desc), and takes layouts that long.
	c.MaxEntries = align(m.maxEntries, mkeyTranslationAlign)
	c.Sig, c.MemPSV, c.WirePSV, c.SigMkey, c.BSF = wr.Sig, m.psvIndex[0], m.psvIndex[1], m.sigMkey, m.bsf
	c.ResetSig, c.UpdateSigErr, c.SigErrs, c.Block = wr.ResetSig, m.sigMkey && errs != m.sentErrs, errs, m.sigPSV
	// The caps check is not libmlx5's (docs/MLX5.md, "Signature caps"):
	// a few bit tests, which a configure copied from the mkey's template
	// skips (its block is the one checked).
	c.Caps = nil
	if m.checkCaps {
		c.Caps = &m.sigCaps
	}
	c.NewCrypto = wr.Crypto != nil // refused on an mkey without crypto (checkCrypto)
	if mc := m.crypto; mc != nil {
		mc.inputs(c, wr.Crypto != nil)
	}
}

// refuseLarge poisons the batch with the error of wr, whose inputs are
// c, a configure larger than the QP's inline data holds. It is refused
// before anything is written, but an invalid work request is refused as
// such first, as libmlx5 refuses it (EINVAL): the builder, given no room,
// checks everything and writes nothing, and says ErrNoRoom only when the
// work request is valid.
//
//go:noinline
func (b *Batch) refuseLarge(wr *MkeyConfigureWR, c *wqe.MkeyConfigure) {
	qp := b.qp
	const op = postMkeyConfigure
	caps := c.Caps
	c.Caps = nil // too large comes before unsupported
	res, err := wqe.BuildMkeyConfigure(qp.sq.ring, qp.sq.pi, 0, c)
	c.Caps = caps
	if err != wqe.ErrNoRoom {
		b.fail(op, qp.wrErr(op, b.n, wr.WrID, res.WQEBBs, err))
		return
	}
	// libmlx5: ENOMEM (mlx5_send_wr_set_mkey_layout, umr_wqe_finalize;
	// sizing.go).
	what, verb := "a layout", "does"
	if n := c.BSFBytes(); n > 0 {
		what, verb = fmt.Sprintf("a BSF of %d bytes and a layout", n), "do"
	}
	b.fail(op, invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): %s of %d entries %s not fit the QP's %d bytes of inline data (QPOptions.MaxInlineData or MaxMkeyEntries)",
		b.n, wr.WrID, what, len(wr.List)+len(wr.Interleaved), verb, qp.sq.maxInline))
}

// configureErr is the error of work request n of a batch, the configure
// wr, that the builder refused with err: a signature block the mkey's
// device does not support (ErrUnsupported, EOPNOTSUPP), or wrErr's.
//
//go:noinline
func (qp *QP) configureErr(n int, wr *MkeyConfigureWR, needs int, err error) error {
	const op = postMkeyConfigure
	if !errors.Is(err, sig.ErrUnsupported) {
		return qp.wrErr(op, n, wr.WrID, needs, err)
	}
	return &Error{Op: postOpNames[op], Obj: qp.name, Err: &reasonError{
		msg:  fmt.Sprintf("work request %d (wr_id %#x): %s: %v", n, wr.WrID, wr.Mkey.name, err),
		errs: []error{ErrUnsupported, unix.EOPNOTSUPP, err}}}
}

// mkeyUndo is an mkey's configure state before a work request of the
// batch changed it.
type mkeyUndo struct {
	m        *Mkey
	bsf      wqe.BSFState
	shape    uint32
	sentErrs uint32
	sigPSV   wqe.BlockPSVs
}

// mkeyState is what a configure leaves of an mkey's signature state: its
// BSF state, the shape and the SET_PSV values of its block.
type mkeyState struct {
	bsf   wqe.BSFState
	shape sigShape
	psvs  wqe.BlockPSVs
}

// stateAfter is the state the configure wr leaves m in.
func stateAfter(m *Mkey, wr *MkeyConfigureWR) mkeyState {
	switch {
	case wr.Sig != nil:
		return mkeyState{bsf: wqe.BSFSet, shape: shapeOf(wr.Sig), psvs: wqe.PSVsOf(wr.Sig)}
	case wr.ResetSig:
		return mkeyState{bsf: wqe.BSFReset}
	}
	return mkeyState{bsf: m.bsf, shape: sigShape(m.shape.Load()), psvs: m.sigPSV}
}

// configured is the one place a configure changes its mkey: it sets m's
// state to st, what the configure the batch wrote left, and its count of
// signature errors sent to errs (what its counter update, if any,
// carried), and records the state before for the batch's rollback. A
// configure that leaves the state as it was (one like the last) records
// nothing: the rollback restores the records in reverse, and this one
// would restore what is there.
func (b *Batch) configured(m *Mkey, st mkeyState, errs uint32) {
	shape := uint32(st.shape)
	if st.bsf == m.bsf && shape == m.shape.Load() && st.psvs == m.sigPSV && errs == m.sentErrs {
		return
	}
	n := len(b.undo)
	if n == cap(b.undo) {
		b.growUndo()
	}
	// Written in place: an append of a composite literal builds it on the
	// stack first.
	b.undo = b.undo[:n+1]
	u := &b.undo[n]
	u.m, u.bsf, u.shape, u.sentErrs, u.sigPSV = m, m.bsf, m.shape.Load(), m.sentErrs, m.sigPSV
	m.bsf, m.sentErrs, m.sigPSV = st.bsf, errs, st.psvs
	if shape != u.shape {
		m.shape.Store(shape)
	}
}

// restore puts the mkey's state back to what u recorded.
func (u *mkeyUndo) restore() {
	u.m.bsf, u.m.sentErrs, u.m.sigPSV = u.bsf, u.sentErrs, u.sigPSV
	u.m.shape.Store(u.shape)
}

// growUndo makes room for one more undo record (once a batch of more
// configures than any before).
//
//go:noinline
func (b *Batch) growUndo() {
	b.undo = append(b.undo, mkeyUndo{})[:len(b.undo)]
}
