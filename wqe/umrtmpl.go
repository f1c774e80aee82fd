package wqe

// MkeyTemplateWQEBBs is the most WQEBBs an MkeyTemplate holds: the
// UMR's control segments and mkey context, and six more of translations,
// BSFs and SET_PSVs. A larger configure is built every time.
const MkeyTemplateWQEBBs = 8

// mkcLenOff is the offset of len in the mkey context (prm.Mkc.Len; a
// test checks it).
const mkcLenOff = 0x18

// MkeyTemplate is a copy of the WQEs BuildMkeyConfigure wrote for an
// mkey configure with a list layout, or none, so that a configure with
// the same inputs but for the list's entries is written by copying them
// (Put) instead of building them again. It holds the WQEs as written,
// WQEBB by WQEBB from the UMR's control segment on, and rewrites only what
// changes between two such configures: each WQE's counter, the KLMs and
// the mkey context's len. It does not know the inputs: its owner keeps
// them and decides when they are the same (every field of MkeyConfigure
// but List's entries, and UpdateSigErr false: with a counter update the
// WQEs depend on SigErrs).
type MkeyTemplate struct {
	wqes [MkeyTemplateWQEBBs * WQEBB]byte
	res  Result
	psvs int // SET_PSV WQEs after the UMR
	klms int // the list's entries, 0 without a layout
	list bool
	// maxLen is the most a list may map: what the BSFs describe, and one
	// data unit with crypto on a single-block engine.
	maxLen uint64
}

// Record keeps the WQEs that BuildMkeyConfigure wrote into r at pi for c,
// with res its result. It reports false, and keeps nothing, when the WQEs
// are not a template's: an interleaved layout, a signature error counter
// update, more than MkeyTemplateWQEBBs WQEBBs, or r not a valid ring.
func (t *MkeyTemplate) Record(r Ring, pi uint16, c *MkeyConfigure, res MkeyConfigureResult) bool {
	n := res.WQEBBs
	if c == nil || c.Interleaved != nil || c.UpdateSigErr || n > MkeyTemplateWQEBBs || n < 2 || res.PSVs > 2 || !r.valid() || n > r.wqebbs() {
		return false
	}
	for i := range n {
		copy(t.wqes[i*WQEBB:], r.slot(pi+uint16(i)))
	}
	t.res, t.psvs, t.klms, t.list = res.Result, res.PSVs, len(c.List), c.List != nil
	t.maxLen = ^uint64(0)
	if c.BSFBytes() > 0 {
		t.maxLen = 0xffffffff
	}
	if cr := c.Crypto; c.CryptoMkey && cr != nil && c.CryptoSingleBlock && !c.CryptoMultiBlock {
		t.maxLen = min(t.maxLen, uint64(cr.DataUnitSize.Bytes()))
	}
	return true
}

// Put writes the template's WQEs into r at producer counter pi with the
// list layout list, of as many entries as the recorded one (none, and nil,
// when it had no layout), and returns their doorbell word: what
// BuildMkeyConfigure would write and return for the recorded inputs with
// this list; the rest of its result is the recorded one's (Result). It
// reports false, and writes nothing into r, when it cannot: the WQEs need
// more than free WQEBBs or more than r holds, the list's length differs,
// an entry maps more than MaxKLMLength bytes, or the list maps more than
// the recorded configure's checks allow (its BSF's 2^32-1 bytes, one
// crypto data unit on a single-block engine). The caller then builds
// the work request with BuildMkeyConfigure, which says why it fails.
func (t *MkeyTemplate) Put(r Ring, pi uint16, free int, list []KLM) (doorbell uint64, ok bool) {
	n := t.res.WQEBBs
	if len(list) != t.klms || (list != nil) != t.list || n > free || n < 2 || n > MkeyTemplateWQEBBs || !r.valid() || n > r.wqebbs() {
		return 0, false
	}
	// The template's variable fields first (each Put writes them all),
	// then one copy: the UMR's counter, the KLMs, the mkey's length, the
	// SET_PSVs' counters.
	w := &t.wqes
	be.PutUint16(w[1:], pi)
	var length uint64
	for i, k := range list {
		if k.ByteCount > MaxKLMLength || i >= (MkeyTemplateWQEBBs-2)*WQEBB/KLMSegSize {
			return 0, false
		}
		length += uint64(k.ByteCount)
		_ = PutKLM(w[2*WQEBB+i*KLMSegSize:], k)
	}
	if length > t.maxLen {
		return 0, false
	}
	if t.list {
		be.PutUint64(w[WQEBB+mkcLenOff:], length)
	}
	// One WQEBB each, at the end; the doorbell is the last WQE's.
	last := 0
	if t.psvs > 0 {
		last = n - 1
		be.PutUint16(w[last*WQEBB+1:], pi+uint16(last))
		if t.psvs > 1 {
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

// Result is the result of the recorded WQEs, as BuildMkeyConfigure
// returned it but for the doorbell word (Put's), and the number of WQEs
// (the UMR and its SET_PSVs).
func (t *MkeyTemplate) Result() (res Result, wqes int) {
	res = t.res
	res.Doorbell = 0
	return res, 1 + t.psvs
}
