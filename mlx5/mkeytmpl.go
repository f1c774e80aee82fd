package mlx5

import "github.com/mlx5go/mlx5go/wqe"

// mkeyTmpl is the WQEs of an mkey's last configure that can be copied
// (wqe.MkeyTemplate), with the inputs they were built from: a configure
// of the same inputs, but for its list's entries, is written by copying
// them and rewriting the counters, the KLMs and the length. A cache, not
// state: the WQEs are a function of the key (and of the signature block
// the mkey's sigMemo holds: the memo changes only where a configure is
// recorded again), so a batch's rollback leaves it alone. The poster's,
// as the rest of an mkey's configure state.
type mkeyTmpl struct {
	// key is the inputs of the last configure built; ok says that the
	// template holds its WQEs.
	key   mkeyTmplKey
	ok    bool
	shape sigShape // shapeOf the signature block
	// What the WQEs are (wqe.MkeyTemplate.Result): their WQEBBs and
	// the WQEs (the last one's ds is in the doorbell word Put returns).
	bbs  int
	wqes int
	wqe.MkeyTemplate
}

// mkeyTmplKey is what the WQEs of a configure depend on, but for its
// list's entries, its signature block's value (sigMemo) and what the mkey
// fixes at its creation (PSV indexes, max_entries, signature support). A
// template is never of a configure with an interleaved layout or a
// signature error counter update (wqe.MkeyTemplate.Record).
type mkeyTmplKey struct {
	qp     *QP // its QPN, its ring, its inline room
	lkey   uint32
	flags  SendFlags
	access AccessFlags
	n      int // list entries
	bsf    wqe.BSFState
	// SetAccess; the small fence the QP's last WQE asked for; a list
	// layout; a signature block; RESET_SIG_ATTR.
	setAccess, fm, list, sig, resetSig bool
}

// tmplKey returns the template key of wr, posted on qp to m.
func tmplKey(qp *QP, m *Mkey, wr *MkeyConfigureWR) mkeyTmplKey {
	return mkeyTmplKey{qp: qp, lkey: m.lkey, flags: wr.Flags, access: wr.Access, n: len(wr.List), bsf: m.bsf,
		setAccess: wr.SetAccess, fm: qp.sq.fm, list: wr.List != nil, sig: wr.Sig != nil, resetSig: wr.ResetSig}
}

// matches reports whether wr, posted on qp to m, has the template's key
// (tmplKey) and can be written by copying it: no interleaved layout, and
// sigErr false (no signature error counter update).
func (k *mkeyTmplKey) matches(qp *QP, m *Mkey, wr *MkeyConfigureWR, sigErr bool) bool {
	return k.qp == qp && k.lkey == m.lkey && k.flags == wr.Flags && k.n == len(wr.List) && k.access == wr.Access &&
		k.bsf == m.bsf && k.setAccess == wr.SetAccess && k.fm == qp.sq.fm && k.list == (wr.List != nil) &&
		k.sig == (wr.Sig != nil) && k.resetSig == wr.ResetSig && wr.Interleaved == nil && !sigErr
}
