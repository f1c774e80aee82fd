package wqe

import "github.com/mlx5go/mlx5go/sig"

// MkeyTemplateWQEBBs is the most WQEBBs an MkeyTemplate copies: a UMR of
// up to four WQEBBs of KLMs with its BSF and two SET_PSVs.
const MkeyTemplateWQEBBs = 8

// mkcLenOff is the offset of len in the mkey context (prm.Mkc.Len; a
// test checks it).
const mkcLenOff = 0x18

// MkeyTemplate builds mkey configures as BuildMkeyConfigure does, and
// keeps the WQEs of the last one when it can, so that a configure that
// repeats the last one's inputs but for its list's entries (a storage
// target that maps each I/O's buffer with the same rights and
// protection) is written by copying them. The copy is patched where the
// two configures may differ: each WQE's counter, the KLMs and the mkey
// context's len.
//
// The template decides for itself when it may copy: it compares the
// configure's inputs, the signature block by value, with those of the
// last configure it was given, so a caller cannot make it copy
// WQEs of other inputs. WQEs are kept only on the second configure of the
// same inputs in a row, so that configures whose inputs change every time
// (a new reference tag per I/O) are not copied for nothing. Neither an
// interleaved layout nor a signature error counter update is kept. The
// zero MkeyTemplate holds nothing.
type MkeyTemplate struct {
	key  mkeyKey // of the last configure Build was given
	ok   bool    // wqes holds the WQEs of key's configure, res their result
	res  MkeyConfigureResult
	wqes [MkeyTemplateWQEBBs * WQEBB]byte
}

// mkeyKey is what the WQEs of a configure that a template may hold
// depend on: every field of MkeyConfigure, the signature block and the
// caps by value, but for the list's entries, which the template rewrites,
// and what only a configure it never holds reads: an interleaved layout
// (Interleaved, RepeatCount; the key says whether there is one) and a
// signature error counter update (SigErrs, Block; the key says whether
// there is one). TestMkeyKeyCoversInputs checks that every other input,
// to its highest bit, changes the key.
type mkeyKey struct {
	qpn, mkey       uint32
	flags           SendFlags
	access          Access
	memPSV, wirePSV uint32
	maxEntries      int
	klms            int // len(List)
	bsf             BSFState
	smallFence      bool
	setAccess       bool
	list, repeat    bool // List, Interleaved != nil
	sigMkey         bool
	resetSig        bool
	updateSigErr    bool
	hasCaps         bool
	caps            sig.Caps
	// The signature block, when sig.
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

// update makes k the key of c's configure, and reports whether it was
// that already. Each input is compared where it is and stored only when
// it differs: one statement an input.
func (k *mkeyKey) update(c *MkeyConfigure) bool {
	same := true
	if k.qpn != c.QPN {
		k.qpn, same = c.QPN, false
	}
	if k.mkey != c.Mkey {
		k.mkey, same = c.Mkey, false
	}
	if k.flags != c.Flags {
		k.flags, same = c.Flags, false
	}
	if k.access != c.Access {
		k.access, same = c.Access, false
	}
	if k.memPSV != c.MemPSV {
		k.memPSV, same = c.MemPSV, false
	}
	if k.wirePSV != c.WirePSV {
		k.wirePSV, same = c.WirePSV, false
	}
	if k.maxEntries != c.MaxEntries {
		k.maxEntries, same = c.MaxEntries, false
	}
	if k.klms != len(c.List) {
		k.klms, same = len(c.List), false
	}
	if k.bsf != c.BSF {
		k.bsf, same = c.BSF, false
	}
	if k.smallFence != c.SmallFence {
		k.smallFence, same = c.SmallFence, false
	}
	if k.setAccess != c.SetAccess {
		k.setAccess, same = c.SetAccess, false
	}
	if k.list != (c.List != nil) {
		k.list, same = c.List != nil, false
	}
	if k.repeat != (c.Interleaved != nil) {
		k.repeat, same = c.Interleaved != nil, false
	}
	if k.sigMkey != c.SigMkey {
		k.sigMkey, same = c.SigMkey, false
	}
	if k.resetSig != c.ResetSig {
		k.resetSig, same = c.ResetSig, false
	}
	if k.updateSigErr != c.UpdateSigErr {
		k.updateSigErr, same = c.UpdateSigErr, false
	}
	if k.hasCaps != (c.Caps != nil) {
		k.hasCaps, same = c.Caps != nil, false
	}
	if c.Caps != nil && k.caps != *c.Caps {
		k.caps, same = *c.Caps, false
	}
	a := c.Sig
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

// Build writes the WQEs of c into r at producer counter pi and returns
// what BuildMkeyConfigure returns for them, with the same errors: it
// copies the template's WQEs when c has the inputs of the last configure
// it was given and they are kept, and builds them with
// BuildMkeyConfigure otherwise, keeping them when c repeats the last
// configure's inputs.
func (t *MkeyTemplate) Build(r Ring, pi uint16, free int, c *MkeyConfigure) (MkeyConfigureResult, error) {
	if c == nil {
		return BuildMkeyConfigure(r, pi, free, c)
	}
	same := t.key.update(c)
	if same && t.ok {
		if db, ok := t.put(r, pi, free, c.List); ok {
			// Field by field: a copy of the kept result with the
			// doorbell word written into it would be read back by wide
			// loads that wait for the narrow store.
			r := &t.res
			return MkeyConfigureResult{Result: Result{WQEBBs: r.WQEBBs, Doorbell: db, DS: r.DS, SmallFence: r.SmallFence},
				UMRDS: r.UMRDS, PSVDS: r.PSVDS, PSVs: r.PSVs}, nil
		}
	}
	return t.build(r, pi, free, c, same)
}

// build is Build when it does not copy: it builds the WQEs of c, and
// keeps them when c has the inputs of the configure before (same). Not
// inlined: Build's copy stays small.
//
//go:noinline
func (t *MkeyTemplate) build(r Ring, pi uint16, free int, c *MkeyConfigure, same bool) (MkeyConfigureResult, error) {
	if !same {
		t.ok = false
	}
	res, err := BuildMkeyConfigure(r, pi, free, c)
	if err == nil && same && !t.ok {
		t.ok = t.record(r, pi, c, res)
	}
	return res, err
}

// record keeps the WQEs that BuildMkeyConfigure wrote into r at pi for c,
// with res its result. It reports false, and keeps nothing, when the WQEs
// are not a template's: an interleaved layout, a signature error counter
// update, or more than MkeyTemplateWQEBBs WQEBBs.
func (t *MkeyTemplate) record(r Ring, pi uint16, c *MkeyConfigure, res MkeyConfigureResult) bool {
	n := res.WQEBBs
	if c.Interleaved != nil || c.UpdateSigErr || n > MkeyTemplateWQEBBs || n < 2 || res.PSVs > 2 {
		return false
	}
	for i := range n {
		copy(t.wqes[i*WQEBB:], r.slot(pi+uint16(i)))
	}
	t.res = res
	return true
}

// put writes the template's WQEs into r at producer counter pi with the
// list layout list, of as many entries as the kept one's, and returns
// their doorbell word. It reports false, and writes nothing into r, when
// it cannot: the WQEs need more than free WQEBBs or more than r holds, or
// an entry maps more than MaxKLMLength bytes (BuildMkeyConfigure then
// says why).
func (t *MkeyTemplate) put(r Ring, pi uint16, free int, list []KLM) (doorbell uint64, ok bool) {
	n := t.res.WQEBBs
	if n > free || !r.valid() || n > r.wqebbs() || len(list) > (MkeyTemplateWQEBBs-2)*WQEBB/KLMSegSize {
		return 0, false
	}
	// The template's variable fields first (each put writes them all),
	// then one copy: the UMR's counter, the KLMs, the mkey's length, the
	// SET_PSVs' counters.
	w := &t.wqes
	be.PutUint16(w[1:], pi)
	var length uint64
	for i, k := range list {
		if k.ByteCount > MaxKLMLength {
			return 0, false
		}
		length += uint64(k.ByteCount)
		_ = PutKLM(w[2*WQEBB+i*KLMSegSize:], k)
	}
	if list != nil {
		be.PutUint64(w[WQEBB+mkcLenOff:], length)
	}
	// One WQEBB each, at the end; the doorbell is the last WQE's.
	last := 0
	if psvs := t.res.PSVs; psvs > 0 {
		last = n - 1
		be.PutUint16(w[last*WQEBB+1:], pi+uint16(last))
		if psvs > 1 {
			be.PutUint16(w[(last-1)*WQEBB+1:], pi+uint16(last-1))
		}
	}
	mask := r.wqebbs() - 1
	j := int(pi) & mask
	if k := mask + 1 - j; k < n {
		copy(r[j*WQEBB:], w[:k*WQEBB])
		copy(r, w[k*WQEBB:n*WQEBB])
	} else {
		copy(r[j*WQEBB:], w[:n*WQEBB])
	}
	return be.Uint64(w[last*WQEBB:]), true
}
