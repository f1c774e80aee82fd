package wqe

import (
	"encoding/binary"
	"math/bits"

	"github.com/mlx5go/mlx5go/prm"
)

// MkeyTemplateWQEBBs is the most WQEBBs an MkeyTemplate holds: a UMR of
// up to four WQEBBs of KLMs with its BSF and two SET_PSVs.
const MkeyTemplateWQEBBs = 8

// mkcLenOff is the offset of len in the mkey context.
var mkcLenOff = int(prm.Mkc.Len.Off / 8)

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
	bbs  [MkeyTemplateWQEBBs][WQEBB]byte
	res  MkeyConfigureResult
	klms int // the list's entries, 0 without a layout
	list bool
}

// Record keeps the WQEs that BuildMkeyConfigure wrote into r at pi for c,
// with res its result. It reports false, and keeps nothing, when the WQEs
// are not a template's: an interleaved layout, a signature error counter
// update, more than MkeyTemplateWQEBBs WQEBBs, or r not a valid ring.
func (t *MkeyTemplate) Record(r Ring, pi uint16, c *MkeyConfigure, res MkeyConfigureResult) bool {
	n := res.WQEBBs
	if c == nil || c.Interleaved != nil || c.UpdateSigErr || n > MkeyTemplateWQEBBs || n < 2 || !r.valid() || n > r.wqebbs() {
		return false
	}
	for i := range n {
		t.bbs[i] = [WQEBB]byte(r.slot(pi + uint16(i)))
	}
	t.res, t.klms, t.list = res, len(c.List), c.List != nil
	return true
}

// Put writes the template's WQEs into r at producer counter pi with the
// list layout list, of as many entries as the recorded one (none, and nil,
// when it had no layout), and returns their result, as BuildMkeyConfigure
// would for the recorded inputs with this list. It reports false, and
// writes nothing, when it cannot: the WQEs need more than free WQEBBs or
// more than r holds, the list's length differs, or an entry maps more than
// MaxKLMLength bytes. The caller then builds the work request with
// BuildMkeyConfigure, which says why it fails.
func (t *MkeyTemplate) Put(r Ring, pi uint16, free int, list []KLM) (MkeyConfigureResult, bool) {
	n := t.res.WQEBBs
	if len(list) != t.klms || (list != nil) != t.list || n > free || n < 2 || n > MkeyTemplateWQEBBs || !r.valid() || n > r.wqebbs() {
		return MkeyConfigureResult{}, false
	}
	var length uint64
	for _, k := range list {
		if k.ByteCount > MaxKLMLength {
			return MkeyConfigureResult{}, false
		}
		length += uint64(k.ByteCount)
	}
	mask := r.wqebbs() - 1
	for i := range n {
		j := (int(pi) + i) & mask
		*(*[WQEBB]byte)(r[j*WQEBB:]) = t.bbs[i]
	}
	// The UMR's counter, the mkey's length and the KLMs.
	j := int(pi) & mask
	be.PutUint16(r[j*WQEBB+1:], pi)
	if t.list {
		j = (int(pi) + 1) & mask
		be.PutUint64(r[j*WQEBB+mkcLenOff:], length)
	}
	for i, k := range list {
		j = (int(pi) + 2 + i/4) & mask
		b := r[j*WQEBB+(i%4)*KLMSegSize:]
		_ = b[15]
		binary.LittleEndian.PutUint64(b[0:], bits.ReverseBytes64(uint64(k.ByteCount)<<32|uint64(k.Mkey)))
		binary.LittleEndian.PutUint64(b[8:], bits.ReverseBytes64(k.Addr))
	}
	// The SET_PSVs' counters: one WQEBB each, at the end.
	res := t.res
	last := pi
	for i := n - res.PSVs; i < n; i++ {
		last = pi + uint16(i)
		j = int(last) & mask
		be.PutUint16(r[j*WQEBB+1:], last)
	}
	j = int(last) & mask
	res.Doorbell = be.Uint64(r[j*WQEBB:])
	return res, true
}
