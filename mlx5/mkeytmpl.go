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
// its inline room), the QP's small fence and the mkey's BSF state, and
// on a crypto mkey its crypto inputs (cryptoKey). Of an
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
	// A crypto mkey's crypto inputs.
	crypto cryptoKey
}

// cryptoKey is what a crypto mkey's configure depends on of its crypto:
// whether the work request sets it, the work request's crypto by value, or whether the mkey has one and which; the
// mkey's length when the work request has no layout; its signature
// block's BSF when it keeps it.
type cryptoKey struct {
	newCrypto bool // Crypto != nil
	attr      cryptoAttrKey
	set       bool
	cur       wqe.Crypto
	length    uint64
	blockBSF  [wqe.BSFSegSize]byte
}

// cryptoAttrKey is a CryptoAttr by value.
type cryptoAttrKey struct {
	encrypt   bool
	order     SigCryptoOrder
	dataUnit  sig.BlockSize
	tweak     [16]byte
	dek       *DEK
	keytagNil bool // Keytag nil (not empty)
	keytagLen int
	keytag    [8]byte
}

// update makes k the key of wr's crypto on the crypto mkey m, and
// reports whether it was that already.
func (k *cryptoKey) update(m *Mkey, wr *MkeyConfigureWR) bool {
	mc := m.crypto
	same := true
	set(&k.newCrypto, wr.Crypto != nil, &same)
	if a := wr.Crypto; a != nil {
		var tag [8]byte
		copy(tag[:], a.Keytag)
		set(&k.attr, cryptoAttrKey{encrypt: a.EncryptOnTx, order: a.Order, dataUnit: a.DataUnitSize, tweak: a.InitialTweak, dek: a.DEK,
			keytagNil: a.Keytag == nil, keytagLen: len(a.Keytag), keytag: tag}, &same)
	} else {
		set(&k.set, mc.set, &same)
		if mc.set {
			set(&k.cur, mc.cur, &same)
		}
	}
	if wr.List == nil && wr.Interleaved == nil {
		set(&k.length, mc.length, &same)
	}
	if m.sigMkey && m.bsf == wqe.BSFSet && wr.Sig == nil {
		set(&k.blockBSF, mc.blockBSF, &same)
	}
	return same
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
// input is compared where it is and stored only when it differs (set):
// one statement an input, no second list.
func (k *mkeyTmplKey) update(qp *QP, m *Mkey, wr *MkeyConfigureWR, sigErr bool) bool {
	same := true
	set(&k.qp, qp, &same)
	set(&k.flags, wr.Flags, &same)
	set(&k.access, wr.Access, &same)
	set(&k.klms, len(wr.List), &same)
	set(&k.bsf, m.bsf, &same)
	set(&k.setAccess, wr.SetAccess, &same)
	set(&k.fm, qp.sq.fm, &same)
	set(&k.list, wr.List != nil, &same)
	set(&k.repeat, wr.Interleaved != nil, &same)
	set(&k.resetSig, wr.ResetSig, &same)
	set(&k.sigErr, sigErr, &same)
	if m.crypto != nil && !k.crypto.update(m, wr) {
		same = false // (crypto on another mkey is refused before)
	}
	a := wr.Sig
	set(&k.sig, a != nil, &same)
	if a == nil {
		return same // the block's fields are not compared
	}
	set(&k.attrFlags, a.Flags, &same)
	set(&k.checkMask, a.CheckMask, &same)
	set(&k.copyMask, a.CopyMask, &same)
	set(&k.compMask, a.CompMask, &same)
	mem, wire := k.mem.update(a.Mem), k.wire.update(a.Wire)
	return mem && wire && same
}

// update makes k the key of d, and reports whether it was that already.
func (k *domainKey) update(d *sig.Domain) bool {
	same := true
	set(&k.set, d != nil, &same)
	if d == nil {
		return same
	}
	set(&k.typ, d.Type, &same)
	set(&k.blockSize, d.BlockSize, &same)
	set(&k.compMask, d.CompMask, &same)
	set(&k.dif, d.T10DIF != nil, &same)
	if d.T10DIF != nil {
		set(&k.t10dif, *d.T10DIF, &same)
	}
	set(&k.crc, d.CRC != nil, &same)
	if d.CRC != nil {
		set(&k.crcv, *d.CRC, &same)
	}
	return same
}

// set makes *dst v, and clears *same if it was not v already.
func set[T comparable](dst *T, v T, same *bool) {
	if *dst != v {
		*dst, *same = v, false
	}
}
