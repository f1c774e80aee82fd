package sig

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/mlx5go/mlx5go/sig/crc"
)

// fuzzDomains are the domain configurations the fuzz targets pick from.
var fuzzDomains = []*Domain{
	{Type: SigTypeT10DIF, BlockSize: BlockSize512, T10DIF: &T10DIF{Guard: T10DIFGuardCRC, Seed: 0, AppTag: 0x1234, RefTag: 0x5678, Flags: T10DIFRefRemap}},
	{Type: SigTypeT10DIF, BlockSize: BlockSize520, T10DIF: &T10DIF{Guard: T10DIFGuardCRC, Seed: 0xffff, AppTag: 0xfffe, RefTag: 0xfffffffe, Flags: T10DIFRefRemap | T10DIFAppEscape}},
	{Type: SigTypeT10DIF, BlockSize: BlockSize4048, T10DIF: &T10DIF{Guard: T10DIFGuardCsum, Seed: 0, AppTag: 0xffff, RefTag: 0xfffffffe, Flags: T10DIFAppRefEscape}},
	{Type: SigTypeT10DIF, BlockSize: BlockSize4096, T10DIF: &T10DIF{Guard: T10DIFGuardCsum, Seed: 0xffff, AppTag: 0, RefTag: 0xffffffff, Flags: T10DIFRefRemap}},
	{Type: SigTypeT10DIF, BlockSize: BlockSize4160, T10DIF: &T10DIF{Guard: T10DIFGuardCRC, Seed: 0xffff, AppTag: 0xa5a5, RefTag: 1}},
	{Type: SigTypeCRC, BlockSize: BlockSize512, CRC: &CRC{Type: CRCTypeCRC32, Seed: 0xffffffff}},
	{Type: SigTypeCRC, BlockSize: BlockSize520, CRC: &CRC{Type: CRCTypeCRC32, Seed: 0}},
	{Type: SigTypeCRC, BlockSize: BlockSize4096, CRC: &CRC{Type: CRCTypeCRC32C, Seed: 0xffffffff}},
	{Type: SigTypeCRC, BlockSize: BlockSize512, CRC: &CRC{Type: CRCTypeCRC32C, Seed: 0}},
	{Type: SigTypeCRC, BlockSize: BlockSize4048, CRC: &CRC{Type: CRCTypeCRC64XP10, Seed: 0}},
	{Type: SigTypeCRC, BlockSize: BlockSize512, CRC: &CRC{Type: CRCTypeCRC64XP10, Seed: ^uint64(0)}},
}

var fuzzMasks = []Mask{0xff, MaskT10DIFGuard, MaskT10DIFAppTag, MaskT10DIFRefTag, 0x5a, 0x81, 0x40, MaskCRC32}

// refDomain computes a domain's signatures from sig/crc and hash/crc32
// directly, apart from the engine, for the fuzz targets' expectations.
type refDomain struct{ d *Domain }

func (r refDomain) piBytes() int {
	if r.d.Type == SigTypeCRC && r.d.CRC.Type != CRCTypeCRC64XP10 {
		return 4
	}
	return 8
}

// field returns the signature field of a block as big-endian bytes.
func (r refDomain) field(data []byte, block int) []byte {
	d := r.d
	switch {
	case d.Type == SigTypeT10DIF:
		t := d.T10DIF
		var g uint16
		if t.Guard == T10DIFGuardCRC {
			g = crc.T10DIF(t.Seed, data)
		} else {
			g = crc.IPChecksum(data)
			if t.Seed == 0xffff && g == 0xffff {
				g = 0
			}
		}
		ref := t.RefTag
		if t.Flags&T10DIFRefRemap != 0 {
			ref += uint32(block)
		}
		f := binary.BigEndian.AppendUint16(nil, g)
		f = binary.BigEndian.AppendUint16(f, t.AppTag)
		return binary.BigEndian.AppendUint32(f, ref)
	case d.CRC.Type == CRCTypeCRC64XP10:
		p := DefaultCRC64XP10
		p.Init = d.CRC.Seed
		return binary.BigEndian.AppendUint64(nil, crc.NewCRC64(p).Checksum(data))
	default:
		tab := crc32.IEEETable
		if d.CRC.Type == CRCTypeCRC32C {
			tab = crc32.MakeTable(crc32.Castagnoli)
		}
		return binary.BigEndian.AppendUint32(nil, crc32.Update(^uint32(d.CRC.Seed), tab, data))
	}
}

// firstError is the error the engine must report for buf (laid out for
// the domain): the first block whose stored field differs from the
// computed one in a byte the mask checks, unless escaped; within the block
// the guard, then the application tag, then the reference tag.
func (r refDomain) firstError(buf []byte, mask Mask) (typ MkeyErrType, actual, expected uint64, offset int) {
	bs := r.d.BlockSize.Bytes()
	pi := r.piBytes()
	for i := 0; i < len(buf)/(bs+pi); i++ {
		blk := buf[i*(bs+pi) : (i+1)*(bs+pi)]
		want, got := r.field(blk[:bs], i), blk[bs:]
		bad := func(lo, hi int) bool {
			for k := lo; k < hi; k++ {
				if mask&(0x80>>k) != 0 && want[k] != got[k] {
					return true
				}
			}
			return false
		}
		be := func(b []byte) uint64 {
			var v uint64
			for _, c := range b {
				v = v<<8 | uint64(c)
			}
			return v
		}
		if r.d.Type == SigTypeCRC {
			if bad(0, pi) {
				return MkeyErrBadGuard, be(got), be(want), i * (bs + pi)
			}
			continue
		}
		app, ref := be(got[2:4]), be(got[4:8])
		fl := r.d.T10DIF.Flags
		if fl&T10DIFAppRefEscape != 0 && app == 0xffff && ref == 0xffffffff ||
			fl&T10DIFAppRefEscape == 0 && fl&T10DIFAppEscape != 0 && app == 0xffff {
			continue
		}
		switch {
		case bad(0, 2):
			return MkeyErrBadGuard, be(got[:2]), be(want[:2]), i * (bs + pi)
		case bad(2, 4):
			return MkeyErrBadAppTag, app, be(want[2:4]), i * (bs + pi)
		case bad(4, 8):
			return MkeyErrBadRefTag, ref, be(want[4:8]), i * (bs + pi)
		}
	}
	return MkeyNoErr, 0, 0, 0
}

func checkAgainstRef(t *testing.T, what string, me MkeyErr, dom SigDomain, r refDomain, buf []byte, mask Mask) {
	t.Helper()
	typ, act, exp, off := r.firstError(buf, mask)
	if me.Type != typ || (typ != MkeyNoErr && (me.Actual != act || me.Expected != exp || me.Offset != uint64(off) || me.Domain != dom)) {
		t.Fatalf("%s: engine %v; reference %v actual %#x expected %#x at %#x", what, me, typ, act, exp, off)
	}
}

// FuzzGenerateCheck: generated signatures check clean, and one flipped bit
// anywhere (data or signature) is reported at the right block with the
// right type and values, or not at all when the check mask or an escape
// hides it, exactly as an independent reference says.
func FuzzGenerateCheck(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(2), uint64(1), uint32(9))
	f.Add(uint8(1), uint8(2), uint8(3), uint64(2), uint32(4160*8+3))
	f.Add(uint8(2), uint8(4), uint8(1), uint64(3), uint32(4048*8+20))
	f.Add(uint8(5), uint8(7), uint8(0), uint64(4), uint32(516*8+1))
	f.Add(uint8(9), uint8(0), uint8(1), uint64(5), uint32(4056*8+63))
	f.Fuzz(func(t *testing.T, cfg, maskSel, nblocks uint8, seed uint64, bit uint32) {
		d := fuzzDomains[int(cfg)%len(fuzzDomains)]
		mask := fuzzMasks[int(maskSel)%len(fuzzMasks)]
		r := refDomain{d}
		e, err := NewEngine(&BlockAttr{Mem: d, CheckMask: mask})
		if err != nil {
			t.Fatal(err)
		}
		bs, pi := d.BlockSize.Bytes(), r.piBytes()
		n := 1 + int(nblocks)%4
		buf := interleave(randomBytes(rand.New(rand.NewPCG(seed, 0)), n*bs), bs, pi)
		if err := e.Generate(DomainMemory, buf); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if got, want := buf[i*(bs+pi)+bs:(i+1)*(bs+pi)], r.field(buf[i*(bs+pi):i*(bs+pi)+bs], i); string(got) != string(want) {
				t.Fatalf("block %d: generated % x, reference % x", i, got, want)
			}
		}
		me, err := e.Check(DomainMemory, buf)
		if err != nil || !me.OK() {
			t.Fatalf("clean buffer: %v, %v", me, err)
		}
		pos := int(bit % uint32(len(buf)*8))
		buf[pos/8] ^= 1 << (pos % 8)
		me, err = e.Check(DomainMemory, buf)
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstRef(t, "check", me, DomainMemory, r, buf, mask)
		if mask == 0xff && me.OK() && d.Type == SigTypeCRC {
			t.Fatalf("a flipped bit at %d escaped a full CRC check", pos)
		}
	})
}

// FuzzTransferRoundTrip: memory -> wire -> memory gives the memory buffer
// back (default copy mask), and a bit flipped on the wire is reported by
// RX at the right wire block with the right type and values (the check
// concerns the input domain only, so the copy mask does not change it).
func FuzzTransferRoundTrip(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(0), uint8(3), uint64(1), uint32(77))
	f.Add(uint8(0), uint8(1), uint8(0), uint8(1), uint64(2), uint32(4096*8))
	f.Add(uint8(3), uint8(7), uint8(4), uint8(2), uint64(3), uint32(515*8))
	f.Add(uint8(5), uint8(5), uint8(0), uint8(0), uint64(4), uint32(513*8))
	f.Fuzz(func(t *testing.T, memSel, wireSel, maskSel, nblocks uint8, seed uint64, bit uint32) {
		mem := fuzzDomains[int(memSel)%len(fuzzDomains)]
		wire := fuzzDomains[int(wireSel)%len(fuzzDomains)]
		mask := fuzzMasks[int(maskSel)%len(fuzzMasks)]
		e, err := NewEngine(&BlockAttr{Mem: mem, Wire: wire, CheckMask: mask})
		if err != nil {
			t.Fatal(err)
		}
		mb, wb := mem.BlockSize.Bytes(), wire.BlockSize.Bytes()
		unit := lcm(mb, wb) // the data must be whole blocks on both sides
		if unit > 1<<16 {
			t.Skip("block sizes whose least common multiple is over 64 KiB")
		}
		n := 1 + int(nblocks)%2
		data := randomBytes(rand.New(rand.NewPCG(seed, 1)), n*unit)
		mr, wr := refDomain{mem}, refDomain{wire}
		membuf := interleave(data, mb, mr.piBytes())
		if err := e.Generate(DomainMemory, membuf); err != nil {
			t.Fatal(err)
		}
		wn, err := e.OutputLen(TX, len(membuf))
		if err != nil {
			t.Fatal(err)
		}
		wirebuf := make([]byte, wn)
		if me, err := e.Transfer(TX, wirebuf, membuf); err != nil || !me.OK() {
			t.Fatalf("TX: %v, %v", me, err)
		}
		back := make([]byte, len(membuf))
		if me, err := e.Transfer(RX, back, wirebuf); err != nil || !me.OK() {
			t.Fatalf("RX: %v, %v", me, err)
		}
		if string(back) != string(membuf) {
			t.Fatal("memory -> wire -> memory changed the buffer")
		}
		pos := int(bit % uint32(len(wirebuf)*8))
		wirebuf[pos/8] ^= 1 << (pos % 8)
		me, err := e.Transfer(RX, back, wirebuf)
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstRef(t, "RX", me, DomainWire, wr, wirebuf, mask)
	})
}

func lcm(a, b int) int {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// fuzzAttr builds a BlockAttr from raw fuzz values, valid or not.
func fuzzAttr(present uint8, typ, sub, bs uint32, seed uint64, app uint16, ref uint32, flags uint32, masks uint16, comp uint64) *BlockAttr {
	dom := func(shift uint) *Domain {
		if present>>shift&1 == 0 {
			return nil
		}
		d := &Domain{Type: SigType(typ >> shift & 3), BlockSize: BlockSize(bs >> shift & 7), CompMask: comp >> shift & 1}
		if present>>(shift+2)&1 != 0 {
			d.T10DIF = &T10DIF{Guard: T10DIFGuard(sub & 3), Seed: uint16(seed), AppTag: app, RefTag: ref, Flags: T10DIFFlags(flags >> 8 & 0xf)}
		}
		if present>>(shift+4)&1 != 0 {
			d.CRC = &CRC{Type: CRCType(sub >> 2 & 3), Seed: seed}
		}
		return d
	}
	return &BlockAttr{Mem: dom(0), Wire: dom(1), Flags: BlockAttrFlags(flags & 3),
		CheckMask: Mask(masks), CopyMask: Mask(masks >> 8), CompMask: comp >> 2 & 1}
}

// FuzzAttr: Validate never panics; what it accepts builds an engine whose
// generate/check/transfer calls work on buffers of the right shape.
func FuzzAttr(f *testing.F) {
	f.Add(uint8(0x07), uint32(0), uint32(0), uint32(0), uint64(0xffff), uint16(1), uint32(2), uint32(0x100), uint16(0xffff), uint64(0))
	f.Add(uint8(0x33), uint32(5), uint32(4), uint32(0x1b), uint64(0xffffffff), uint16(0), uint32(0), uint32(1), uint16(0xf0f0), uint64(0))
	f.Add(uint8(0x3f), uint32(1), uint32(8), uint32(0x24), ^uint64(0), uint16(7), uint32(9), uint32(0x701), uint16(0x81), uint64(4))
	f.Fuzz(func(t *testing.T, present uint8, typ, sub, bs uint32, seed uint64, app uint16, ref uint32, flags uint32, masks uint16, comp uint64) {
		a := fuzzAttr(present, typ, sub, bs, seed, app, ref, flags, masks, comp)
		err := a.Validate()
		_ = a.EffectiveCopyMask()
		checkSameBlockStructure(t, a, err == nil)
		if err != nil {
			var ae *AttrError
			if !errors.As(err, &ae) || !errors.Is(err, ErrInvalidAttr) {
				t.Fatalf("Validate = %v: not an *AttrError", err)
			}
			return
		}
		e, err := NewEngine(a)
		if err != nil {
			t.Fatalf("valid attr, NewEngine = %v", err)
		}
		for _, d := range []SigDomain{DomainMemory, DomainWire} {
			bs, pi := e.Layout(d)
			if bs == 0 {
				continue
			}
			buf := make([]byte, 2*(bs+pi))
			if err := e.Generate(d, buf); err != nil {
				t.Fatal(err)
			}
			if me, err := e.Check(d, buf); err != nil || !me.OK() {
				t.Fatalf("%v: %v, %v", d, me, err)
			}
		}
		mb, _ := e.Layout(DomainMemory)
		wb, wpi := e.Layout(DomainWire)
		unit := max(mb, wb)
		if mb != 0 && wb != 0 {
			unit = lcm(mb, wb)
		}
		if unit > 1<<16 {
			return
		}
		srcLen := unit // RX first: the wire layout of unit data bytes
		if wb != 0 {
			srcLen = unit / wb * (wb + wpi)
		}
		src := make([]byte, srcLen)
		for _, dir := range []Direction{RX, TX} {
			n, err := e.OutputLen(dir, len(src))
			if err != nil {
				t.Fatalf("%v OutputLen(%d): %v", dir, len(src), err)
			}
			dst := make([]byte, n)
			if me, err := e.Transfer(dir, dst, src); err != nil {
				t.Fatalf("%v: %v, %v", dir, me, err)
			}
			src = dst
		}
	})
}

// checkSameBlockStructure checks SameBlockStructure of any a: symmetric in
// the domains, true only for two domains with a block structure of the
// same type and block size (and CRC type), and for a valid a exactly then.
func checkSameBlockStructure(t *testing.T, a *BlockAttr, valid bool) {
	t.Helper()
	same := a.SameBlockStructure()
	if swapped := (&BlockAttr{Mem: a.Wire, Wire: a.Mem}).SameBlockStructure(); swapped != same {
		t.Fatalf("SameBlockStructure %v, with the domains swapped %v", same, swapped)
	}
	m, w := a.Mem, a.Wire
	both := m != nil && w != nil && m.Type == w.Type && m.BlockSize == w.BlockSize
	if same && (!both || !m.hasStructure() || !w.hasStructure() || m.Type == SigTypeCRC && m.CRC.Type != w.CRC.Type) {
		t.Fatalf("SameBlockStructure true for %+v, %+v", m, w)
	}
	if valid && both && (m.Type != SigTypeCRC || m.CRC.Type == w.CRC.Type) && !same {
		t.Fatalf("SameBlockStructure false for valid %+v, %+v", m, w)
	}
}

// FuzzDecodeSigErrCQE: any CQE fields decode without panicking, to an
// error libmlx5 would also refuse or to an MkeyErr whose values fit the
// field that was bad.
func FuzzDecodeSigErrCQE(f *testing.F) {
	f.Add(uint32(0xabcd1234), uint32(0x5678aaaa), uint32(0x10), uint32(0x11), uint16(0x3800), uint8(0), uint8(1), uint64(0x200), uint8(0x07), uint32(1))
	f.Fuzz(func(t *testing.T, ets, ats, eref, aref uint32, syn uint16, st, dom uint8, off uint64, present uint8, typ uint32) {
		a := fuzzAttr(present, typ, typ>>4, 0, 0, 0, 0, 0, 0xff, 0)
		me, err := DecodeSigErrCQE(SigErrCQE{ets, ats, eref, aref, syn, st, dom, off}, a)
		if err != nil {
			if !errors.Is(err, ErrSigErrCQE) {
				t.Fatalf("error %v is not ErrSigErrCQE", err)
			}
			return
		}
		width := map[MkeyErrType]uint64{MkeyErrBadRefTag: 0xffffffff, MkeyErrBadAppTag: 0xffff}[me.Type]
		if me.Type == MkeyErrBadGuard {
			width = ^uint64(0)
		}
		if width == 0 || me.Actual&^width != 0 || me.Expected&^width != 0 || me.Offset != off {
			t.Fatalf("%+v", me)
		}
	})
}
