package mlx5

import (
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// mkeyTmpl is the WQEs of an mkey's last configure that can be copied
// (wqe.MkeyTemplate), keyed by the inputs they were built from: a
// configure of the same key is written by copying them and rewriting the
// counters, the KLMs and the length. A cache, not state: the WQEs are a
// function of the key, so a batch's rollback leaves it alone. The
// poster's, as the rest of an mkey's configure state.
type mkeyTmpl struct {
	// key is the inputs of the last configure built or copied; ok says
	// that the template holds the WQEs of key's configure.
	key mkeyTmplKey
	ok  bool
	// What the WQEs are: their WQEBBs and WQEs (the last one's ds is in
	// the doorbell word Put returns), and, for a configure with a
	// signature block, the shape and PSVs it leaves the mkey (functions
	// of the block's value, which the key holds).
	bbs, wqes int
	shape     sigShape
	psvs      wqe.BlockPSVs
	wqe.MkeyTemplate
}

// mkeyTmplKey is what the WQEs of a configure on an mkey depend on, but
// for the list's entries (the template rewrites them) and what the mkey
// fixes at its creation (its key, PSV indexes, max_entries, signature
// support and caps: the template is the mkey's own): the work request's
// inputs, the signature block by value, the QP (its number, its ring,
// its inline room), the QP's small fence and the mkey's BSF state. Of an
// interleaved layout and of a signature error counter update it says
// only whether there is one: a template holds neither
// (wqe.MkeyTemplate.Record). TestMkeyTmplKeyCoversInputs changes every
// input, and requires another key or a reason it needs none.
type mkeyTmplKey struct {
	qp           *QP
	flags        SendFlags
	access       AccessFlags
	klms         int // len(List)
	bsf          wqe.BSFState
	setAccess    bool
	fm           bool // the QP's small fence
	list, repeat bool // List, Interleaved != nil
	resetSig     bool
	sigErr       bool // the configure updates the signature error counter
	// The signature block, when sig: a block the caller changes in place
	// between two configures has another key.
	sig                 bool
	attrFlags           sig.BlockAttrFlags
	checkMask, copyMask sig.Mask
	compMask            uint64
	mem, wire           domainKey
}

// domainKey is a signature domain by value, when set.
type domainKey struct {
	set, dif, crc bool // the domain, its T10DIF, its CRC
	typ           sig.SigType
	blockSize     sig.BlockSize
	compMask      uint64
	t10dif        sig.T10DIF
	crcv          sig.CRC
}

// update makes k the key of wr, posted on qp to m (sigErr: it updates the
// signature error counter), and reports whether it was that already. Each
// input is compared where it is and stored only when it differs: one
// statement an input, no second list.
func (k *mkeyTmplKey) update(qp *QP, m *Mkey, wr *MkeyConfigureWR, sigErr bool) bool {
	same := true
	if k.qp != qp {
		k.qp, same = qp, false
	}
	if k.flags != wr.Flags {
		k.flags, same = wr.Flags, false
	}
	if k.access != wr.Access {
		k.access, same = wr.Access, false
	}
	if k.klms != len(wr.List) {
		k.klms, same = len(wr.List), false
	}
	if k.bsf != m.bsf {
		k.bsf, same = m.bsf, false
	}
	if k.setAccess != wr.SetAccess {
		k.setAccess, same = wr.SetAccess, false
	}
	if k.fm != qp.fmCache {
		k.fm, same = qp.fmCache, false
	}
	if k.list != (wr.List != nil) {
		k.list, same = wr.List != nil, false
	}
	if k.repeat != (wr.Interleaved != nil) {
		k.repeat, same = wr.Interleaved != nil, false
	}
	if k.resetSig != wr.ResetSig {
		k.resetSig, same = wr.ResetSig, false
	}
	if k.sigErr != sigErr {
		k.sigErr, same = sigErr, false
	}
	a := wr.Sig
	if k.sig != (a != nil) {
		k.sig, same = a != nil, false
	}
	if a == nil {
		return same // the block's fields are not compared
	}
	if k.attrFlags != a.Flags {
		k.attrFlags, same = a.Flags, false
	}
	if k.checkMask != a.CheckMask {
		k.checkMask, same = a.CheckMask, false
	}
	if k.copyMask != a.CopyMask {
		k.copyMask, same = a.CopyMask, false
	}
	if k.compMask != a.CompMask {
		k.compMask, same = a.CompMask, false
	}
	mem, wire := k.mem.update(a.Mem), k.wire.update(a.Wire)
	return mem && wire && same
}

// update makes k the key of d, and reports whether it was that already.
func (k *domainKey) update(d *sig.Domain) bool {
	same := true
	if k.set != (d != nil) {
		k.set, same = d != nil, false
	}
	if d == nil {
		return same
	}
	if k.typ != d.Type {
		k.typ, same = d.Type, false
	}
	if k.blockSize != d.BlockSize {
		k.blockSize, same = d.BlockSize, false
	}
	if k.compMask != d.CompMask {
		k.compMask, same = d.CompMask, false
	}
	if k.dif != (d.T10DIF != nil) {
		k.dif, same = d.T10DIF != nil, false
	}
	if d.T10DIF != nil && k.t10dif != *d.T10DIF {
		k.t10dif, same = *d.T10DIF, false
	}
	if k.crc != (d.CRC != nil) {
		k.crc, same = d.CRC != nil, false
	}
	if d.CRC != nil && k.crcv != *d.CRC {
		k.crcv, same = *d.CRC, false
	}
	return same
}
