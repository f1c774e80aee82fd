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
//
// Each input has bits of its own in 64-bit words; update compares each
// word with the one it replaces and stores it whole. (A struct of the
// inputs' own widths, compared as memory, has its wide loads wait for
// the narrow stores that built it.)
type mkeyKey [keyWords]uint64

// The words of an mkeyKey: the configure's, then two domains'.
const (
	keyIDs        = iota // QPN, Mkey
	keyFlags             // Flags, Access
	keyPSVs              // MemPSV, WirePSV
	keyMaxEntries        // MaxEntries
	keyKLMs              // len(List)
	keyBits              // BSF, the bools, the block's masks
	keyAttrFlags         // the block's Flags; the caps' T10DIFBG and CRCType
	keyAttrComp          // the block's CompMask
	keyCapsSize          // the caps' BlockSize
	keyCapsProt          // the caps' BlockProt
	keyMem               // the memory domain's domainWords
	keyWire       = keyMem + domainWords
	keyWords      = keyWire + domainWords
)

// The words of a domain of an mkeyKey.
const (
	domType    = iota // Type, BlockSize
	domComp           // CompMask
	domTags           // T10DIF's Guard, RefTag
	domDIF            // T10DIF's Seed, AppTag, Flags
	domCRCType        // CRC's Type
	domCRCSeed        // CRC's Seed
	domainWords
)

// Bits of keyBits.
const (
	bitSmallFence = 8 + iota // BSF in the low byte
	bitSetAccess
	bitList
	bitRepeat
	bitSigMkey
	bitResetSig
	bitUpdateSigErr
	bitSig
	bitCaps
	bitMem // each domain: present, T10DIF, CRC
	bitMemDIF
	bitMemCRC
	bitWire
	bitWireDIF
	bitWireCRC
	bitCheckMask = 32 // a byte
	bitCopyMask  = 40 // a byte
)

// bit is v at bit n.
func bit(v bool, n uint) uint64 { return b2u(v) << n }

// update makes k the key of c's configure, and reports whether it was
// that already.
func (k *mkeyKey) update(c *MkeyConfigure) bool {
	d := swap(&k[keyIDs], uint64(c.QPN)|uint64(c.Mkey)<<32)
	d |= swap(&k[keyFlags], uint64(c.Flags)|uint64(c.Access)<<32)
	d |= swap(&k[keyPSVs], uint64(c.MemPSV)|uint64(c.WirePSV)<<32)
	d |= swap(&k[keyMaxEntries], uint64(c.MaxEntries))
	d |= swap(&k[keyKLMs], uint64(len(c.List)))
	bits := uint64(c.BSF) | bit(c.SmallFence, bitSmallFence) | bit(c.SetAccess, bitSetAccess) |
		bit(c.List != nil, bitList) | bit(c.Interleaved != nil, bitRepeat) | bit(c.SigMkey, bitSigMkey) |
		bit(c.ResetSig, bitResetSig) | bit(c.UpdateSigErr, bitUpdateSigErr) | bit(c.Sig != nil, bitSig) | bit(c.Caps != nil, bitCaps)
	var flags, comp uint64
	var mem, wire *sig.Domain
	if a := c.Sig; a != nil {
		mem, wire = a.Mem, a.Wire
		bits |= uint64(a.CheckMask)<<bitCheckMask | uint64(a.CopyMask)<<bitCopyMask
		flags, comp = uint64(a.Flags), a.CompMask
	}
	if mem != nil {
		bits |= bit(true, bitMem) | bit(mem.T10DIF != nil, bitMemDIF) | bit(mem.CRC != nil, bitMemCRC)
	}
	if wire != nil {
		bits |= bit(true, bitWire) | bit(wire.T10DIF != nil, bitWireDIF) | bit(wire.CRC != nil, bitWireCRC)
	}
	d |= swap(&k[keyBits], bits)
	var size, prot uint64
	if cp := c.Caps; cp != nil {
		flags |= uint64(cp.T10DIFBG)<<32 | uint64(cp.CRCType)<<48
		size, prot = cp.BlockSize, uint64(cp.BlockProt)
	}
	d |= swap(&k[keyAttrFlags], flags)
	d |= swap(&k[keyAttrComp], comp)
	d |= swap(&k[keyCapsSize], size)
	d |= swap(&k[keyCapsProt], prot)
	d |= updateDomain((*[domainWords]uint64)(k[keyMem:keyWire]), mem)
	d |= updateDomain((*[domainWords]uint64)(k[keyWire:]), wire)
	return d == 0
}

// updateDomain makes w the words of domain d (zeros for none), and
// returns a word that is not 0 if they were not.
func updateDomain(w *[domainWords]uint64, d *sig.Domain) uint64 {
	var typ, comp, tags, dif, crcType, crcSeed uint64
	if d != nil {
		typ, comp = uint64(d.Type)|uint64(d.BlockSize)<<32, d.CompMask
		if t := d.T10DIF; t != nil {
			tags = uint64(t.Guard) | uint64(t.RefTag)<<32
			dif = uint64(t.Seed) | uint64(t.AppTag)<<16 | uint64(t.Flags)<<32
		}
		if cr := d.CRC; cr != nil {
			crcType, crcSeed = uint64(cr.Type), cr.Seed
		}
	}
	x := swap(&w[domType], typ) | swap(&w[domComp], comp) | swap(&w[domTags], tags) |
		swap(&w[domDIF], dif) | swap(&w[domCRCType], crcType) | swap(&w[domCRCSeed], crcSeed)
	return x
}

// swap makes *p w, and returns what differed.
func swap(p *uint64, w uint64) uint64 {
	d := *p ^ w
	*p = w
	return d
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
