package sig

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/mlx5go/mlx5go/sig/crc"
)

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// interleave lays data out in blocks of bs each followed by pi zero bytes.
func interleave(data []byte, bs, pi int) []byte {
	var out []byte
	for len(data) > 0 {
		out = append(out, data[:bs]...)
		out = append(out, make([]byte, pi)...)
		data = data[bs:]
	}
	return out
}

// refT10DIF is the tuple of a block computed here from sig/crc directly,
// independent of the engine.
func refT10DIF(block []byte, seed, app uint16, ref uint32) []byte {
	t := make([]byte, 8)
	binary.BigEndian.PutUint16(t, crc.T10DIF(seed, block))
	binary.BigEndian.PutUint16(t[2:], app)
	binary.BigEndian.PutUint32(t[4:], ref)
	return t
}

func TestGenerateT10DIFLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := randomBytes(r, 3*512)
	buf := interleave(data, 512, 8)
	e := mustEngine(t, &BlockAttr{Mem: t10difDomain(BlockSize512)}) // seed 0xffff, app 0x1234, ref 0x5678, REF_REMAP
	if err := e.Generate(DomainMemory, buf); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		blk := data[i*512 : (i+1)*512]
		if want := refT10DIF(blk, 0xffff, 0x1234, 0x5678+uint32(i)); !bytes.Equal(buf[i*520+512:(i+1)*520], want) {
			t.Errorf("block %d tuple % x, want % x", i, buf[i*520+512:(i+1)*520], want)
		}
		if !bytes.Equal(buf[i*520:i*520+512], blk) {
			t.Errorf("block %d data changed", i)
		}
	}
	if me, err := e.Check(DomainMemory, buf); err != nil || !me.OK() {
		t.Fatalf("Check after Generate: %v, %v", me, err)
	}
	// Without REF_REMAP every block carries the initial tag.
	d := t10difDomain(BlockSize512)
	d.T10DIF.Flags = 0
	e = mustEngine(t, &BlockAttr{Mem: d})
	if err := e.Generate(DomainMemory, buf); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(buf[2*520+516:]); got != 0x5678 {
		t.Errorf("block 2 ref tag without REF_REMAP %#x, want 0x5678", got)
	}
}

func TestGenerateCRCLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	data := randomBytes(r, 2*4096)
	for _, tt := range []struct {
		typ  CRCType
		seed uint64
		pi   int
		want func([]byte) []byte
	}{
		{CRCTypeCRC32, 0xffffffff, 4, func(b []byte) []byte { return binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(b)) }},
		{CRCTypeCRC32C, 0xffffffff, 4, func(b []byte) []byte {
			return binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
		}},
		{CRCTypeCRC32C, 0, 4, func(b []byte) []byte {
			// Seed 0: initial register 0, final xor kept (docs/SIG.md).
			return binary.BigEndian.AppendUint32(nil, crc32.Update(0xffffffff, crc32.MakeTable(crc32.Castagnoli), b))
		}},
		{CRCTypeCRC64XP10, ^uint64(0), 8, func(b []byte) []byte {
			return binary.BigEndian.AppendUint64(nil, crc.NewCRC64(crc.CRC64XZ).Checksum(b))
		}},
	} {
		e := mustEngine(t, &BlockAttr{Wire: crcDomain(tt.typ, tt.seed, BlockSize4096)})
		if bs, pi := e.Layout(DomainWire); bs != 4096 || pi != tt.pi {
			t.Errorf("%v: layout %d+%d, want 4096+%d", tt.typ, bs, pi, tt.pi)
		}
		buf := interleave(data, 4096, tt.pi)
		if err := e.Generate(DomainWire, buf); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			s := i * (4096 + tt.pi)
			if want := tt.want(data[i*4096 : (i+1)*4096]); !bytes.Equal(buf[s+4096:s+4096+tt.pi], want) {
				t.Errorf("%v seed %#x block %d: % x, want % x", tt.typ, tt.seed, i, buf[s+4096:s+4096+tt.pi], want)
			}
		}
	}
}

// TestTransferStripInsert: memory with T10-DIF, wire plain (the man page's
// example 2 turned around): TX checks and strips, RX generates.
func TestTransferStripInsert(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	data := randomBytes(r, 4*512)
	e := mustEngine(t, &BlockAttr{Mem: t10difDomain(BlockSize512), CheckMask: 0xff})
	mem := interleave(data, 512, 8)
	if err := e.Generate(DomainMemory, mem); err != nil {
		t.Fatal(err)
	}
	wire := make([]byte, len(data))
	if n, err := e.OutputLen(TX, len(mem)); err != nil || n != len(wire) {
		t.Fatalf("OutputLen(TX) = %d, %v", n, err)
	}
	if me, err := e.Transfer(TX, wire, mem); err != nil || !me.OK() {
		t.Fatalf("TX: %v, %v", me, err)
	}
	if !bytes.Equal(wire, data) {
		t.Fatal("TX did not strip the tuples")
	}
	back := make([]byte, len(mem))
	if me, err := e.Transfer(RX, back, wire); err != nil || !me.OK() {
		t.Fatalf("RX: %v, %v", me, err)
	}
	if !bytes.Equal(back, mem) {
		t.Fatal("RX did not insert the same tuples Generate made")
	}
	// A bad guard in block 2 is reported at its boundary, and the data
	// still moves.
	mem[2*520+3] ^= 0x10
	me, err := e.Transfer(TX, wire, mem)
	if err != nil {
		t.Fatal(err)
	}
	want := binary.BigEndian.Uint16(mem[2*520+512:])
	if me.Type != MkeyErrBadGuard || me.Offset != 2*520 || me.Domain != DomainMemory ||
		me.Actual != uint64(want) || me.Expected != uint64(crc.T10DIF(0xffff, mem[2*520:2*520+512])) {
		t.Errorf("bad guard: %v", me)
	}
	if wire[2*512+3] != mem[2*520+3] {
		t.Error("the bad block's data was not moved")
	}
}

// TestTransferReblock moves data between domains of different block sizes
// and signature types, and back.
func TestTransferReblock(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	data := randomBytes(r, 520*4096/8) // a multiple of 520 and of 4096
	a := &BlockAttr{Mem: t10difDomain(BlockSize520), Wire: crcDomain(CRCTypeCRC32C, 0, BlockSize4096), CheckMask: 0xff}
	e := mustEngine(t, a)
	mem := interleave(data, 520, 8)
	if err := e.Generate(DomainMemory, mem); err != nil {
		t.Fatal(err)
	}
	n, err := e.OutputLen(TX, len(mem))
	if err != nil {
		t.Fatal(err)
	}
	wire := make([]byte, n)
	if me, err := e.Transfer(TX, wire, mem); err != nil || !me.OK() {
		t.Fatalf("TX: %v, %v", me, err)
	}
	want := interleave(data, 4096, 4)
	if err := e.Generate(DomainWire, want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wire, want) {
		t.Fatal("TX output is not the data in 4096-byte blocks with CRC32C")
	}
	back := make([]byte, len(mem))
	if me, err := e.Transfer(RX, back, wire); err != nil || !me.OK() {
		t.Fatalf("RX: %v, %v", me, err)
	}
	if !bytes.Equal(back, mem) {
		t.Fatal("RX did not give the memory layout back")
	}
	wire[5*4100+4096] ^= 1 // CRC byte of block 5
	me, _ := e.Transfer(RX, back, wire)
	if me.Type != MkeyErrBadGuard || me.Offset != 5*4100 || me.Domain != DomainWire {
		t.Errorf("bad CRC: %v", me)
	}
}

// TestTransferCopyMask: both domains T10-DIF 512 with different tags. By
// default only the fields whose configuration agrees are copied (here the
// guard); with BlockAttrCopyMask the given bytes are.
func TestTransferCopyMask(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	data := randomBytes(r, 2*512)
	mem := t10difDomain(BlockSize512) // seed ffff app 1234 ref 5678 remap
	wire := &Domain{Type: SigTypeT10DIF, BlockSize: BlockSize512,
		T10DIF: &T10DIF{Guard: T10DIFGuardCRC, Seed: 0xffff, AppTag: 0xabcd, RefTag: 0x100, Flags: T10DIFRefRemap}}
	src := interleave(data, 512, 8)
	// A memory tuple whose app tag is not the configured one: unchecked
	// (check mask excludes it) and, with the copy mask, carried over.
	gen := mustEngine(t, &BlockAttr{Mem: mem})
	if err := gen.Generate(DomainMemory, src); err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint16(src[512+2:], 0x7777)
	binary.BigEndian.PutUint16(src[520+512+2:], 0x8888)

	tests := []struct {
		name      string
		flags     BlockAttrFlags
		copyMask  Mask
		wantApp   [2]uint16
		wantRef   [2]uint32
		wantGuard bool // the guard is the wire's own either way here
	}{
		{"computed mask", 0, 0, [2]uint16{0xabcd, 0xabcd}, [2]uint32{0x100, 0x101}, true},
		{"copy app tag", BlockAttrCopyMask, MaskT10DIFAppTag, [2]uint16{0x7777, 0x8888}, [2]uint32{0x100, 0x101}, true},
		{"copy ref tag", BlockAttrCopyMask, MaskT10DIFRefTag, [2]uint16{0xabcd, 0xabcd}, [2]uint32{0x5678, 0x5679}, true},
		{"copy one app byte", BlockAttrCopyMask, 0x10, [2]uint16{0xab77, 0xab88}, [2]uint32{0x100, 0x101}, true},
	}
	for _, tt := range tests {
		e := mustEngine(t, &BlockAttr{Mem: mem, Wire: wire, Flags: tt.flags, CopyMask: tt.copyMask,
			CheckMask: MaskT10DIFGuard | MaskT10DIFRefTag})
		dst := make([]byte, len(src))
		if me, err := e.Transfer(TX, dst, src); err != nil || !me.OK() {
			t.Fatalf("%s: %v, %v", tt.name, me, err)
		}
		for i := range 2 {
			tu := dst[i*520+512 : (i+1)*520]
			if g := binary.BigEndian.Uint16(tu); g != crc.T10DIF(0xffff, data[i*512:(i+1)*512]) {
				t.Errorf("%s: block %d guard %#x", tt.name, i, g)
			}
			if a := binary.BigEndian.Uint16(tu[2:]); a != tt.wantApp[i] {
				t.Errorf("%s: block %d app tag %#x, want %#x", tt.name, i, a, tt.wantApp[i])
			}
			if rf := binary.BigEndian.Uint32(tu[4:]); rf != tt.wantRef[i] {
				t.Errorf("%s: block %d ref tag %#x, want %#x", tt.name, i, rf, tt.wantRef[i])
			}
		}
	}
	// The copied bytes are not recomputed: a bad memory guard passes
	// through unchecked when the check mask leaves it out and the guard is
	// copied.
	bad := bytes.Clone(src)
	bad[0] ^= 1
	e := mustEngine(t, &BlockAttr{Mem: mem, Wire: wire, Flags: BlockAttrCopyMask, CopyMask: MaskT10DIFGuard, CheckMask: MaskT10DIFRefTag})
	dst := make([]byte, len(bad))
	if me, _ := e.Transfer(TX, dst, bad); !me.OK() {
		t.Fatalf("unchecked guard reported: %v", me)
	}
	if !bytes.Equal(dst[512:514], bad[512:514]) {
		t.Error("guard not copied")
	}
}

// TestCheckOrderAndMask: within a block the guard is reported before the
// application tag, which is reported before the reference tag; the check
// mask hides bytes; the first bad block wins.
func TestCheckOrderAndMask(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	buf := interleave(randomBytes(r, 4*4096), 4096, 8)
	d := t10difDomain(BlockSize4096)
	gen := mustEngine(t, &BlockAttr{Mem: d})
	if err := gen.Generate(DomainMemory, buf); err != nil {
		t.Fatal(err)
	}
	tuple := func(i int) []byte { return buf[i*4104+4096 : (i+1)*4104] }
	corrupt := func(i, field int) func() {
		b := tuple(i)
		old := bytes.Clone(b)
		b[field] ^= 0x01
		return func() { copy(b, old) }
	}
	check := func(mask Mask) MkeyErr {
		me, err := mustEngine(t, &BlockAttr{Mem: d, CheckMask: mask}).Check(DomainMemory, buf)
		if err != nil {
			t.Fatal(err)
		}
		return me
	}
	// ref, app, GUARD[1] (the guard's first byte) in block 2; GUARD[0] in 3
	undo := []func(){corrupt(2, 7), corrupt(2, 3), corrupt(2, 0), corrupt(3, 1)}
	if me := check(0xff); me.Type != MkeyErrBadGuard || me.Offset != 2*4104 {
		t.Errorf("all bad: %v, want bad guard at block 2", me)
	}
	if me := check(0x3f); me.Type != MkeyErrBadAppTag || me.Actual != 0x1235 || me.Expected != 0x1234 {
		t.Errorf("guard masked: %v, want bad app tag 0x1235 vs 0x1234", me)
	}
	if me := check(0x0f); me.Type != MkeyErrBadRefTag || me.Actual != 0x5678+2^1 || me.Expected != 0x5678+2 {
		t.Errorf("guard and app masked: %v, want bad ref tag", me)
	}
	if me := check(0x0e); !me.OK() {
		t.Errorf("the corrupted ref byte masked: %v", me)
	}
	if me := check(0x40); me.Type != MkeyErrBadGuard || me.Offset != 3*4104 {
		t.Errorf("only GUARD[0]: %v, want the guard of block 3", me)
	}
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
	if me := check(0xff); !me.OK() {
		t.Errorf("restored: %v", me)
	}
}

func TestEscapes(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	data := randomBytes(r, 2*512)
	for _, tt := range []struct {
		flags       T10DIFFlags
		app         uint16
		ref         uint32
		wantEscaped bool
	}{
		{0, 0xffff, 0xffffffff, false},
		{T10DIFAppEscape, 0xffff, 0x1, true},
		{T10DIFAppEscape, 0xfffe, 0xffffffff, false},
		{T10DIFAppRefEscape, 0xffff, 0x1, false},
		{T10DIFAppRefEscape, 0xffff, 0xffffffff, true},
		{T10DIFAppEscape | T10DIFAppRefEscape, 0xffff, 0x1, false}, // APP_REF_ESCAPE wins, as libmlx5 programs it
	} {
		d := &Domain{Type: SigTypeT10DIF, BlockSize: BlockSize512, T10DIF: &T10DIF{AppTag: 0x1234, RefTag: 7, Flags: tt.flags}}
		e := mustEngine(t, &BlockAttr{Wire: d, CheckMask: 0xff})
		buf := interleave(data, 512, 8)
		// Block 1 holds a garbage guard and the escape candidate tags.
		binary.BigEndian.PutUint16(buf[520+512:], 0xdead)
		binary.BigEndian.PutUint16(buf[520+514:], tt.app)
		binary.BigEndian.PutUint32(buf[520+516:], tt.ref)
		// Block 0 is good.
		copy(buf[512:520], refT10DIF(data[:512], 0, 0x1234, 7))
		me, err := e.Check(DomainWire, buf)
		if err != nil {
			t.Fatal(err)
		}
		if me.OK() != tt.wantEscaped {
			t.Errorf("flags %#x app %#x ref %#x: %v, escaped want %v", tt.flags, tt.app, tt.ref, me, tt.wantEscaped)
		}
		if !tt.wantEscaped && (me.Type != MkeyErrBadGuard || me.Offset != 520 || me.Actual != 0xdead) {
			t.Errorf("flags %#x: %v, want bad guard 0xdead at 520", tt.flags, me)
		}
	}
}

// TestSigErrCQERoundTrip: the CQE fields a device would report for an
// engine error decode, as libmlx5 does, back to the same error.
func TestSigErrCQERoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, d := range []*Domain{t10difDomain(BlockSize512), crcDomain(CRCTypeCRC32, 0, BlockSize512), crcDomain(CRCTypeCRC64XP10, 0, BlockSize512)} {
		a := &BlockAttr{Wire: d, CheckMask: 0xff}
		e := mustEngine(t, a)
		_, pi := e.Layout(DomainWire)
		buf := interleave(randomBytes(r, 3*512), 512, pi)
		if err := e.Generate(DomainWire, buf); err != nil {
			t.Fatal(err)
		}
		for _, pos := range []int{512 + pi + 512, 512 + pi + 512 + 2, 512 + pi + 512 + pi - 1} {
			b := bytes.Clone(buf)
			b[pos] ^= 0x80
			me, _ := e.Check(DomainWire, b)
			if me.OK() {
				t.Fatalf("%v: corruption at %d not found", d.Type, pos)
			}
			got, err := DecodeSigErrCQE(me.SigErrCQE(), a)
			if err != nil || got != me {
				t.Errorf("%v: decoded %v, %v; want %v", d.Type, got, err, me)
			}
		}
	}
}

func TestMisuse(t *testing.T) {
	e := mustEngine(t, &BlockAttr{Mem: t10difDomain(BlockSize512)})
	if err := e.Generate(DomainWire, make([]byte, 520)); !errors.Is(err, ErrNoSignature) {
		t.Errorf("Generate on the absent wire domain: %v", err)
	}
	if err := e.Generate(DomainMemory, make([]byte, 512)); !errors.Is(err, ErrBufferSize) {
		t.Errorf("Generate on a partial block: %v", err)
	}
	if _, err := e.Check(DomainMemory, make([]byte, 1041)); !errors.Is(err, ErrBufferSize) {
		t.Errorf("Check on a partial block: %v", err)
	}
	if _, err := e.Transfer(TX, make([]byte, 512), make([]byte, 519)); !errors.Is(err, ErrBufferSize) {
		t.Errorf("TX of a partial block: %v", err)
	}
	if _, err := e.Transfer(RX, make([]byte, 520), make([]byte, 500)); !errors.Is(err, ErrBufferSize) {
		t.Errorf("RX of a partial block: %v", err)
	}
	if _, err := e.Transfer(TX, make([]byte, 513), make([]byte, 520)); !errors.Is(err, ErrDstSize) {
		t.Errorf("TX into a wrong-sized dst: %v", err)
	}
	if _, err := e.Transfer(Direction(2), nil, nil); !errors.Is(err, ErrDirection) {
		t.Errorf("unknown direction: %v", err)
	}
	if _, err := e.Signature(SigDomain(9), nil, 0); err == nil {
		t.Error("Signature of an unknown domain: no error")
	}
	if _, err := NewEngine(nil); !errors.Is(err, ErrNoDomain) {
		t.Errorf("NewEngine(nil): %v", err)
	}
	if _, err := DecodeSigErrCQE(SigErrCQE{Syndrome: SyndromeGuard}, nil); !errors.Is(err, ErrSigErrCQE) {
		t.Errorf("DecodeSigErrCQE without attributes: %v", err)
	}
}

// TestEngineKeepsACopy: changing the attributes after NewEngine does not
// change the engine.
func TestEngineKeepsACopy(t *testing.T) {
	a := &BlockAttr{Mem: t10difDomain(BlockSize512)}
	e := mustEngine(t, a)
	a.Mem.T10DIF.AppTag = 0
	a.Mem.T10DIF.Seed = 0x1234
	if got := e.Attr().Mem.T10DIF; got.AppTag != 0x1234 || got.Seed != 0xffff {
		t.Errorf("engine attr changed: %+v", got)
	}
	if v, _ := e.Signature(DomainMemory, nil, 0); v>>32&0xffff != 0x1234 {
		t.Errorf("engine app tag changed: %#x", v)
	}
}

func TestZeroAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	data := randomBytes(r, 8*4096)
	for _, a := range []*BlockAttr{
		{Mem: t10difDomain(BlockSize4096), Wire: crcDomain(CRCTypeCRC32C, 0, BlockSize4096), CheckMask: 0xff},
		{Mem: t10difDomain(BlockSize4096), Wire: t10difDomain(BlockSize4096), CheckMask: 0xff},
		{Mem: crcDomain(CRCTypeCRC64XP10, 0, BlockSize4096), Wire: t10difDomain(BlockSize512), CheckMask: 0xff},
	} {
		e := mustEngine(t, a)
		_, mpi := e.Layout(DomainMemory)
		mem := interleave(data, 4096, mpi)
		n, _ := e.OutputLen(TX, len(mem))
		wire := make([]byte, n)
		allocs := testing.AllocsPerRun(20, func() {
			if err := e.Generate(DomainMemory, mem); err != nil {
				t.Fatal(err)
			}
			if me, err := e.Check(DomainMemory, mem); err != nil || !me.OK() {
				t.Fatal(me, err)
			}
			if me, err := e.Transfer(TX, wire, mem); err != nil || !me.OK() {
				t.Fatal(me, err)
			}
			if me, err := e.Transfer(RX, mem, wire); err != nil || !me.OK() {
				t.Fatal(me, err)
			}
		})
		if allocs != 0 {
			t.Errorf("%d allocations per buffer", int(allocs))
		}
	}
}

// TestErrorCarriesGuard: with a check mask that leaves the guard out the
// engine skips computing it, but an error still reports the whole expected
// signature, computed guard included, as a device does.
func TestErrorCarriesGuard(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	data := randomBytes(r, 2*512)
	d := t10difDomain(BlockSize512)
	e := mustEngine(t, &BlockAttr{Mem: d, CheckMask: MaskT10DIFAppTag})
	buf := interleave(data, 512, 8)
	if err := e.Generate(DomainMemory, buf); err != nil {
		t.Fatal(err)
	}
	buf[520+512+3] ^= 1 // block 1's app tag
	me, err := e.Check(DomainMemory, buf)
	if err != nil || me.Type != MkeyErrBadAppTag || me.Offset != 520 {
		t.Fatalf("%v, %v", me, err)
	}
	c := me.SigErrCQE()
	if want := crc.T10DIF(0xffff, data[512:]); c.ExpectedTransSig>>16 != uint32(want) || c.ActualTransSig>>16 != uint32(want) {
		t.Errorf("CQE guards %#x/%#x, want %#x", c.ExpectedTransSig>>16, c.ActualTransSig>>16, want)
	}
	if c.ExpectedRefTag != 0x5679 || c.Syndrome != SyndromeAppTag || c.Domain != uint8(DomainMemory) {
		t.Errorf("CQE %+v", c)
	}
	wire := make([]byte, 1024)
	if me2, err := e.Transfer(TX, wire, buf); err != nil || me2 != me {
		t.Errorf("Transfer: %v, %v; Check said %v", me2, err, me)
	}
}

// TestPieces: a transfer done in pieces with the At variants gives the
// same bytes, reference tags and error offsets as done at once.
func TestPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	data := randomBytes(r, 4*4096)
	a := &BlockAttr{Mem: t10difDomain(BlockSize512), Wire: crcDomain(CRCTypeCRC32C, 0, BlockSize4096), CheckMask: 0xff}
	e := mustEngine(t, a)
	whole := interleave(data, 512, 8)
	if err := e.Generate(DomainMemory, whole); err != nil {
		t.Fatal(err)
	}
	pieces := interleave(data, 512, 8)
	half := len(pieces) / 2
	if err := e.GenerateAt(DomainMemory, pieces[:half], 0); err != nil {
		t.Fatal(err)
	}
	if err := e.GenerateAt(DomainMemory, pieces[half:], 2*4096); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(whole, pieces) {
		t.Fatal("GenerateAt in two pieces differs from Generate")
	}
	wire := make([]byte, 4*4100)
	if me, err := e.Transfer(TX, wire, whole); err != nil || !me.OK() {
		t.Fatal(me, err)
	}
	w2 := make([]byte, len(wire))
	for p := range 2 {
		if me, err := e.TransferAt(TX, w2[p*2*4100:(p+1)*2*4100], whole[p*half:(p+1)*half], uint64(p*2*4096)); err != nil || !me.OK() {
			t.Fatal(me, err)
		}
	}
	if !bytes.Equal(wire, w2) {
		t.Fatal("TransferAt in two pieces differs from Transfer")
	}
	whole[21*520+512+7] ^= 1 // ref tag of memory block 21, in the second half
	me, _ := e.Transfer(TX, wire, whole)
	me2, _ := e.TransferAt(TX, w2[2*4100:], whole[half:], 2*4096)
	me3, _ := e.CheckAt(DomainMemory, whole[half:], 2*4096)
	if me.Type != MkeyErrBadRefTag || me.Offset != 21*520 || me2 != me || me3 != me {
		t.Errorf("whole %v, TransferAt %v, CheckAt %v", me, me2, me3)
	}
	if _, err := e.TransferAt(TX, w2[:2*4100], whole[:half], 512); !errors.Is(err, ErrDataOffset) {
		t.Errorf("offset inside a wire block: %v", err)
	}
	if err := e.GenerateAt(DomainMemory, whole[:520], 100); !errors.Is(err, ErrDataOffset) {
		t.Errorf("offset inside a block: %v", err)
	}
	if _, err := e.CheckAt(DomainMemory, whole[:520], 100); !errors.Is(err, ErrDataOffset) {
		t.Errorf("offset inside a block: %v", err)
	}
}

// TestCRC32GuardKinds: CRC32 and CRC32C domains compute their guard with
// sig/crc's folding CRCs (crc.CRC32, crc.CRC32C), whatever the seed.
func TestCRC32GuardKinds(t *testing.T) {
	data := randomBytes(rand.New(rand.NewPCG(21, 22)), 4096)
	for _, tc := range []struct {
		typ  CRCType
		kind guardKind
		f    func(uint32, []byte) uint32
	}{{CRCTypeCRC32, guardCRC32, crc.CRC32}, {CRCTypeCRC32C, guardCRC32C, crc.CRC32C}} {
		for _, seed := range []uint64{0, 0xffffffff} {
			f := newFormat(&Domain{Type: SigTypeCRC, BlockSize: BlockSize4096, CRC: &CRC{Type: tc.typ, Seed: seed}}, DomainMemory, DefaultCRC64XP10)
			if f.kind != tc.kind {
				t.Errorf("%v seed %#x: guard kind %d, want %d", tc.typ, seed, f.kind, tc.kind)
			}
			// The seed is the register, the complement of the value the
			// CRC continues from.
			if got, want := f.guard(data), uint64(tc.f(^uint32(seed), data))<<32; got != want {
				t.Errorf("%v seed %#x: guard %#x, want %#x", tc.typ, seed, got, want)
			}
		}
	}
}
