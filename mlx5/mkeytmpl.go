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
	ok    bool
	key   mkeyTmplKey
	shape sigShape // shapeOf the signature block
	wqe.MkeyTemplate
}

// mkeyTmplKey is what the WQEs of a configure depend on, but for its
// list's entries, its signature block's value (sigMemo) and what the mkey
// fixes at its creation (PSV indexes, max_entries, signature support):
// the QP (its QPN, its ring, its inline room), the list's length, and in
// two words the mkey's key, the flags, the access rights, the mkey's BSF
// state and five bits (tmplKey).
type mkeyTmplKey struct {
	qp     *QP
	n      int
	w0, w1 uint64
}

// Bits of mkeyTmplKey.w1.
const (
	tmplSetAccess = 1 << iota // SetAccess
	tmplFence                 // the QP's last WQE asked for the small fence
	tmplList                  // a list layout
	tmplSig                   // a signature block
	tmplResetSig              // RESET_SIG_ATTR
)

// tmplKey returns the template key of wr, posted on qp to m.
func tmplKey(qp *QP, m *Mkey, wr *MkeyConfigureWR) mkeyTmplKey {
	w1 := uint64(wr.Access)<<32 | uint64(m.bsf)<<8
	if wr.SetAccess {
		w1 |= tmplSetAccess
	}
	if qp.fmCache {
		w1 |= tmplFence
	}
	if wr.List != nil {
		w1 |= tmplList
	}
	if wr.Sig != nil {
		w1 |= tmplSig
	}
	if wr.ResetSig {
		w1 |= tmplResetSig
	}
	return mkeyTmplKey{qp: qp, n: len(wr.List), w0: uint64(m.LKey)<<32 | uint64(wr.Flags), w1: w1}
}
