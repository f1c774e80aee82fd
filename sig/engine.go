package sig

import (
	"errors"
	"fmt"

	"github.com/mlx5go/mlx5go/sig/crc"
)

// Direction is the way data moves through a signature mkey.
type Direction uint8

const (
	// TX moves data from the memory domain to the wire domain (a SEND or
	// an RDMA READ response gathered through the mkey).
	TX Direction = iota
	// RX moves data from the wire domain to the memory domain (a RECV or
	// an RDMA WRITE scattered through the mkey).
	RX
)

func (d Direction) String() string {
	switch d {
	case TX:
		return "TX"
	case RX:
		return "RX"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// Errors of the engine's buffer operations; they report misuse, never a
// signature error (which is an MkeyErr).
var (
	ErrDirection   = errors.New("sig: unknown direction")
	ErrNoSignature = errors.New("sig: the domain has no signature")
	ErrBufferSize  = errors.New("sig: buffer is not a whole number of blocks")
	ErrDstSize     = errors.New("sig: destination length does not match the transfer")
	ErrDataOffset  = errors.New("sig: data offset is not on a block boundary")
)

// Engine does in software what a device does with a signature mkey
// configured with one BlockAttr. It is immutable once built, safe for
// concurrent use, and allocates nothing per buffer.
type Engine struct {
	attr      BlockAttr
	mem, wire *format
	checkMask uint64 // widened check_mask
	copyMask  uint64 // widened effective copy mask
	sbs       bool   // same block structure (copy mask applies)
	// sameGuard: both domains compute the guard the same way (same kind,
	// seed and table), so a TX/RX can reuse the input's guard.
	sameGuard bool
}

// Option adjusts NewEngine.
type Option func(*engineOptions)

type engineOptions struct {
	crc64 crc.Params64
}

// WithCRC64 sets the CRC-64 that CRC64_XP10 domains use; the seed of the
// domain replaces p.Init. The default is DefaultCRC64XP10, which is not
// verified (see Candidates).
func WithCRC64(p crc.Params64) Option {
	return func(o *engineOptions) { o.crc64 = p }
}

// NewEngine validates attr (see BlockAttr.Validate) and returns an engine
// for it. The engine keeps a copy of attr and its domains.
func NewEngine(attr *BlockAttr, opts ...Option) (*Engine, error) {
	if err := attr.Validate(); err != nil {
		return nil, err
	}
	o := engineOptions{crc64: DefaultCRC64XP10}
	for _, opt := range opts {
		opt(&o)
	}
	e := &Engine{attr: copyAttr(attr), checkMask: attr.CheckMask.bytes64()}
	if attr.Mem != nil {
		e.mem = newFormat(attr.Mem, DomainMemory, o.crc64)
	}
	if attr.Wire != nil {
		e.wire = newFormat(attr.Wire, DomainWire, o.crc64)
	}
	_, e.sbs = sameStructure(attr.Mem, attr.Wire)
	e.copyMask = attr.EffectiveCopyMask().bytes64()
	if e.sbs {
		m, w := e.mem, e.wire
		e.sameGuard = m.kind == w.kind && m.seed16 == w.seed16 && m.crc32 == w.crc32 &&
			(m.kind != guardCRC64 || *m.params == *w.params)
	}
	return e, nil
}

func copyAttr(a *BlockAttr) BlockAttr {
	c := *a
	c.Mem, c.Wire = copyDomain(a.Mem), copyDomain(a.Wire)
	return c
}

func copyDomain(d *Domain) *Domain {
	if d == nil {
		return nil
	}
	c := *d
	if d.T10DIF != nil {
		t := *d.T10DIF
		c.T10DIF = &t
	}
	if d.CRC != nil {
		r := *d.CRC
		c.CRC = &r
	}
	return &c
}

// Attr returns a copy of the configuration the engine was built from.
func (e *Engine) Attr() BlockAttr { return copyAttr(&e.attr) }

func (e *Engine) format(d SigDomain) (*format, error) {
	var f *format
	switch d {
	case DomainMemory:
		f = e.mem
	case DomainWire:
		f = e.wire
	default:
		return nil, fmt.Errorf("sig: unknown domain %d", d)
	}
	if f == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoSignature, d)
	}
	return f, nil
}

// Layout returns how a domain lays out its data: data bytes per block and
// signature bytes after each block. A domain without signature has plain
// data: (0, 0).
func (e *Engine) Layout(d SigDomain) (blockBytes, sigBytes int) {
	f, err := e.format(d)
	if err != nil {
		return 0, 0
	}
	return f.bs, f.pi
}

// Signature returns the signature of one block in domain d: data is the
// block's data (any length) and block its number in the transfer (the
// reference tag's increment with REF_REMAP). The value is in the form
// described for SigErrCQE's signatures: guard<<48|app<<32|ref for T10-DIF,
// crc<<32 for CRC32 and CRC32C, the CRC for CRC64_XP10.
func (e *Engine) Signature(d SigDomain, data []byte, block uint64) (uint64, error) {
	f, err := e.format(d)
	if err != nil {
		return 0, err
	}
	return f.expected(data, block), nil
}

// blocks checks that buf is a whole number of f's blocks.
func (f *format) blocks(buf []byte) (int, error) {
	if len(buf)%f.stride != 0 {
		return 0, fmt.Errorf("%w: %d bytes, %d per block (%d + %d)", ErrBufferSize, len(buf), f.stride, f.bs, f.pi)
	}
	return len(buf) / f.stride, nil
}

// Generate fills in, in place, the signature of every block of buf, which
// is laid out as domain d lays out data: blocks of data each followed by
// its signature. Block i gets the reference tag plus i with REF_REMAP.
// This is what a device inserts on the way into d.
func (e *Engine) Generate(d SigDomain, buf []byte) error {
	return e.GenerateAt(d, buf, 0)
}

// GenerateAt is Generate for a piece of a longer transfer: buf holds the
// blocks that start dataOffset bytes of data (signatures not counted) into
// it, so its first block is number dataOffset/blockBytes. dataOffset must
// be on a block boundary of d.
func (e *Engine) GenerateAt(d SigDomain, buf []byte, dataOffset uint64) error {
	f, err := e.format(d)
	if err != nil {
		return err
	}
	if _, err := f.blocks(buf); err != nil {
		return err
	}
	k, err := f.firstBlock(dataOffset)
	if err != nil {
		return err
	}
	// buf is a whole number of blocks: walk it a batch of blocks at a
	// time, their guards first.
	var g [batch]uint64
	for len(buf) > 0 {
		m := batchOf(len(buf), f.stride)
		f.guardBlocks(g[:m], buf, f.bs, f.stride)
		f.writeBlocks(buf, g[:m], k)
		buf, k = buf[m*f.stride:], k+uint64(m)
	}
	return nil
}

// batch is the most blocks whose guards Generate and Check compute in one
// call, ahead of storing or comparing them.
const batch = 32

// batchOf returns the blocks of the next batch of a buffer of n bytes, a
// whole number of blocks of stride bytes: a division only for the last.
func batchOf(n, stride int) int {
	if n >= batch*stride {
		return batch
	}
	return n / stride
}

// firstBlock returns the number of the block that starts dataOffset bytes
// of data into a transfer.
func (f *format) firstBlock(dataOffset uint64) (uint64, error) {
	if dataOffset%uint64(f.bs) != 0 {
		return 0, fmt.Errorf("%w: %d, blocks of %d", ErrDataOffset, dataOffset, f.bs)
	}
	return dataOffset / uint64(f.bs), nil
}

// Check validates every block of buf, laid out as domain d lays out data,
// against the engine's check mask and returns the first bad block's error
// (T10-DIF order within a block: guard, application tag, reference tag),
// or the zero MkeyErr. Escaped blocks are not checked.
func (e *Engine) Check(d SigDomain, buf []byte) (MkeyErr, error) {
	return e.CheckAt(d, buf, 0)
}

// CheckAt is Check for a piece of a longer transfer, as GenerateAt; the
// error's Offset counts from the start of the transfer.
func (e *Engine) CheckAt(d SigDomain, buf []byte, dataOffset uint64) (MkeyErr, error) {
	f, err := e.format(d)
	if err != nil {
		return MkeyErr{}, err
	}
	if _, err := f.blocks(buf); err != nil {
		return MkeyErr{}, err
	}
	k, err := f.firstBlock(dataOffset)
	if err != nil {
		return MkeyErr{}, err
	}
	// A block passes when no checked byte differs or its stored value
	// escapes; only a bad block builds its error (checkBlock, which also
	// computes the guard the error reports when the mask skips it).
	mask := e.checkMask & f.valid
	guard := mask&f.guards != 0
	var g [batch]uint64 // zero when the mask skips the guard
	for len(buf) > 0 {
		m := batchOf(len(buf), f.stride)
		if guard {
			f.guardBlocks(g[:m], buf, f.bs, f.stride)
		}
		if i := f.firstBad(buf, g[:m], k, mask); i < m {
			blk, k := buf[i*f.stride:], k+uint64(i)
			return f.checkBlock(blk[:f.bs], k, f.read(blk, f.stride), e.checkMask, k*uint64(f.stride)), nil
		}
		buf, k = buf[m*f.stride:], k+uint64(m)
	}
	return MkeyErr{}, nil
}

func (e *Engine) ends(dir Direction) (in, out *format, err error) {
	switch dir {
	case TX:
		return e.mem, e.wire, nil
	case RX:
		return e.wire, e.mem, nil
	}
	return nil, nil, fmt.Errorf("%w: %d", ErrDirection, dir)
}

// dataLen returns the number of data bytes in an input of n bytes.
func dataLen(in, out *format, n int) (int, error) {
	data := n
	if in != nil {
		if n%in.stride != 0 {
			return 0, fmt.Errorf("%w: input of %d bytes, %d per block (%d + %d)", ErrBufferSize, n, in.stride, in.bs, in.pi)
		}
		data = n / in.stride * in.bs
	}
	if out != nil && data%out.bs != 0 {
		return 0, fmt.Errorf("%w: %d data bytes, output blocks of %d", ErrBufferSize, data, out.bs)
	}
	return data, nil
}

// OutputLen returns the length of the output of a transfer in direction
// dir whose input is srcLen bytes long.
func (e *Engine) OutputLen(dir Direction, srcLen int) (int, error) {
	in, out, err := e.ends(dir)
	if err != nil {
		return 0, err
	}
	data, err := dataLen(in, out, srcLen)
	if err != nil {
		return 0, err
	}
	if out == nil {
		return data, nil
	}
	return data / out.bs * out.stride, nil
}

// Transfer moves src, laid out as the input domain of dir lays out data,
// into dst, laid out as the output domain does, as the device would: the
// input's signatures are checked per the check mask (and stripped), the
// output's are generated, or copied from the input per the copy mask when
// the domains have the same structure. len(dst) must be OutputLen(dir,
// len(src)); dst and src must not overlap.
//
// The whole buffer is moved even when a block is bad, and the first bad
// block's error is returned, as the device records the first error in the
// mkey for mlx5dv_mkey_check. The error result reports misuse only.
func (e *Engine) Transfer(dir Direction, dst, src []byte) (MkeyErr, error) {
	return e.TransferAt(dir, dst, src, 0)
}

// TransferAt is Transfer for a piece of a longer transfer: src and dst
// hold the blocks that start dataOffset bytes of data (signatures not
// counted) into it, which must be on a block boundary of each domain with
// a signature. Block numbers (the reference tags with REF_REMAP) and the
// error's Offset count from the start of the transfer.
func (e *Engine) TransferAt(dir Direction, dst, src []byte, dataOffset uint64) (MkeyErr, error) {
	in, out, err := e.ends(dir)
	if err != nil {
		return MkeyErr{}, err
	}
	data, err := dataLen(in, out, len(src))
	if err != nil {
		return MkeyErr{}, err
	}
	for _, f := range []*format{in, out} {
		if f != nil {
			if _, err := f.firstBlock(dataOffset); err != nil {
				return MkeyErr{}, err
			}
		}
	}
	outLen := data
	if out != nil {
		outLen = data / out.bs * out.stride
	}
	if len(dst) != outLen {
		return MkeyErr{}, fmt.Errorf("%w: %d bytes, want %d", ErrDstSize, len(dst), outLen)
	}
	if in != nil && out != nil && in.bs != out.bs {
		return e.reblock(in, out, dst, src, dataOffset), nil
	}
	bs, inStride, outStride := 0, 0, 0
	if in != nil {
		bs, inStride = in.bs, in.stride
	}
	if out != nil {
		bs, outStride = out.bs, out.stride
	}
	if in == nil {
		inStride = bs
	}
	if out == nil {
		outStride = bs
	}
	// The input's guard is computed when the check mask needs it, or when
	// the output can reuse it; a pass-through that checks nothing and
	// copies everything is a plain copy.
	copyAll := e.sbs && e.copyMask&out.valid == out.valid
	needGuard := in != nil && (e.checkMask&in.guards != 0 || e.sameGuard && !copyAll)
	k0 := dataOffset / uint64(bs)
	var first MkeyErr
	for i := range data / bs {
		s := src[i*inStride : (i+1)*inStride]
		d := dst[i*outStride : (i+1)*outStride]
		k := k0 + uint64(i)
		copy(d[:bs], s[:bs])
		var exp, act uint64
		if in != nil {
			act = in.read(s, len(s))
			if needGuard {
				exp = in.expected(s[:bs], k)
				if first.OK() {
					first = in.check(exp, act, e.checkMask, k*uint64(inStride))
				}
			} else if first.OK() {
				first = in.checkBlock(s[:bs], k, act, e.checkMask, k*uint64(inStride))
			}
		}
		if out == nil {
			continue
		}
		var v uint64
		switch {
		case copyAll:
			v = act
		case e.sameGuard:
			v = exp&out.guards | out.tags(k)
		default:
			v = out.expected(s[:bs], k)
		}
		if e.sbs {
			v = v&^e.copyMask | act&e.copyMask
		}
		out.write(d, len(d), v)
	}
	return first, nil
}

// reblock is Transfer between domains with different block sizes: the
// input blocks are checked and their data gathered into the output's
// blocks, then the output's signatures are generated. No copy mask applies
// (the domains differ in structure).
func (e *Engine) reblock(in, out *format, dst, src []byte, dataOffset uint64) MkeyErr {
	kin, kout := dataOffset/uint64(in.bs), dataOffset/uint64(out.bs)
	var first MkeyErr
	pos := 0 // data offset
	for i := range len(src) / in.stride {
		s := src[i*in.stride : (i+1)*in.stride]
		if first.OK() {
			k := kin + uint64(i)
			first = in.checkBlock(s[:in.bs], k, in.read(s, len(s)), e.checkMask, k*uint64(in.stride))
		}
		for d := s[:in.bs]; len(d) > 0; {
			blk, off := pos/out.bs, pos%out.bs
			n := copy(dst[blk*out.stride+off:blk*out.stride+out.bs], d)
			d, pos = d[n:], pos+n
		}
	}
	for j := range len(dst) / out.stride {
		blk := dst[j*out.stride : (j+1)*out.stride]
		out.write(blk, len(blk), out.expected(blk[:out.bs], kout+uint64(j)))
	}
	return first
}
