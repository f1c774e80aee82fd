package prm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// refGet and refSet read and write a field one bit at a time, straight from
// the definition: PRM bit i is bit 7-i%8 of byte i/8.
func refGet(b []byte, off, width uint32) uint64 {
	var v uint64
	for i := off; i < off+width; i++ {
		v = v<<1 | uint64(b[i/8]>>(7-i%8)&1)
	}
	return v
}

func refSet(b []byte, off, width uint32, v uint64) {
	for i := off + width; i > off; i-- {
		bit := i - 1
		if v&1 != 0 {
			b[bit/8] |= 0x80 >> (bit % 8)
		} else {
			b[bit/8] &^= 0x80 >> (bit % 8)
		}
		v >>= 1
	}
}

// Every offset and width up to 64 bits, against the bitwise reference:
// Get reads the same value, Set changes exactly the field's bits.
func TestFieldAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 24)
	for off := uint32(0); off < 64; off++ {
		for width := uint32(1); width <= 64; width++ {
			f := Field{Name: "f", Off: off, Width: width}
			for range 4 {
				for i := range buf {
					buf[i] = byte(r.Uint32())
				}
				if got, want := f.Get(buf), refGet(buf, off, width); got != want {
					t.Fatalf("%v: Get %#x, want %#x", f, got, want)
				}
				v := r.Uint64()
				want := append([]byte(nil), buf...)
				refSet(want, off, width, v)
				f.Set(buf, v)
				if !bytes.Equal(buf, want) {
					t.Fatalf("%v: Set %#x\n got %x\nwant %x", f, v, buf, want)
				}
				if got := f.Get(buf); got != v&mask(width) {
					t.Fatalf("%v: round trip %#x -> %#x", f, v&mask(width), got)
				}
			}
		}
	}
}

// Every declared field: a value set in a buffer of random bytes reads back
// and leaves every other bit of the mailbox alone.
func TestDeclaredFieldsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	n := 0
	for _, l := range Layouts() {
		buf := make([]byte, l.Size)
		for _, f := range l.Fields {
			if f.Width == 0 || f.Width > 64 {
				continue
			}
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
			before := append([]byte(nil), buf...)
			v := r.Uint64() & mask(f.Width)
			if err := f.Write(buf, v); err != nil {
				t.Fatalf("%s.%s: %v", l.Name, f.Name, err)
			}
			if got := f.Get(buf); got != v {
				t.Errorf("%s.%v: wrote %#x, read %#x", l.Name, f, v, got)
			}
			refSet(before, f.Off, f.Width, v)
			if !bytes.Equal(buf, before) {
				t.Errorf("%s.%v: Set changed bits outside the field", l.Name, f)
			}
			n++
		}
	}
	if n < 500 {
		t.Errorf("only %d fields checked", n)
	}
}

func TestOutOfRange(t *testing.T) {
	b := []byte{0xff, 0xff, 0xff, 0xff}
	short := Field{Name: "short", Off: 24, Width: 16}
	wide := Field{Name: "wide", Off: 0, Width: 128}
	if short.Get(b) != 0 || wide.Get(make([]byte, 16)) != 0 {
		t.Error("Get outside the buffer or of a wide field is not 0")
	}
	short.Set(b, 0)
	if !bytes.Equal(b, []byte{0xff, 0xff, 0xff, 0xff}) {
		t.Error("Set outside the buffer wrote")
	}
	if _, err := short.Read(b); !errors.Is(err, ErrShort) {
		t.Errorf("Read short: %v", err)
	}
	if err := short.Write(b, 1); !errors.Is(err, ErrShort) {
		t.Errorf("Write short: %v", err)
	}
	if _, err := wide.Read(make([]byte, 16)); !errors.Is(err, ErrWide) {
		t.Errorf("Read wide: %v", err)
	}
	nibble := Field{Name: "nibble", Off: 4, Width: 4}
	if err := nibble.Write(b, 0x10); !errors.Is(err, ErrOverflow) || b[0] != 0xff {
		t.Errorf("Write overflow: %v, byte %#x", err, b[0])
	}
	nibble.Set(b, 0x12) // keeps the low 4 bits
	if b[0] != 0xf2 {
		t.Errorf("Set truncation: %#x", b[0])
	}
	if Mkc.Free.Bytes(make([]byte, 64)) != nil || CreateMkeyIn.MemoryKeyMkeyEntry.Bytes(make([]byte, 50)) != nil {
		t.Error("Bytes of an unaligned field or outside the buffer")
	}
	if got := len(CreateMkeyIn.MemoryKeyMkeyEntry.Bytes(CreateMkeyIn.Layout().New())); got != int(Mkc.Layout().Size) {
		t.Errorf("Bytes of the mkey context: %d bytes", got)
	}
}

// The tables are consistent: fields in order, not overlapping, inside the
// struct; nested struct fields as wide as their layout (or a multiple, for
// arrays); every layout reachable by name.
func TestLayouts(t *testing.T) {
	if len(layouts) < 75 {
		t.Errorf("%d layouts", len(layouts))
	}
	for i, l := range layouts {
		if i > 0 && layouts[i-1].Name >= l.Name {
			t.Errorf("layouts not sorted at %s", l.Name)
		}
		if got, ok := LayoutOf("mlx5_ifc_" + l.Name + "_bits"); !ok || got != l {
			t.Errorf("LayoutOf(%s)", l.Name)
		}
		var end uint32
		for _, f := range l.Fields {
			if f.Off < end {
				t.Errorf("%s.%s at %#x overlaps the field before (ends %#x)", l.Name, f.Name, f.Off, end)
			}
			end = f.Off + f.Width
			if end > 8*l.Size {
				t.Errorf("%s.%s ends at bit %#x, past %d bytes", l.Name, f.Name, end, l.Size)
			}
			if got, ok := l.Field(f.Name); !ok || got != f {
				t.Errorf("%s.Field(%s) = %v, %v", l.Name, f.Name, got, ok)
			}
			if inner, ok := LayoutOf(f.Type); ok && f.Width%(8*inner.Size) != 0 {
				t.Errorf("%s.%s: %d bits, %s is %d bytes", l.Name, f.Name, f.Width, inner.Name, inner.Size)
			}
		}
	}
	if _, ok := LayoutOf("no_such_struct"); ok {
		t.Error("LayoutOf found a struct that is not declared")
	}
}

func TestFieldPath(t *testing.T) {
	l := CreateMkeyIn.Layout()
	got, ok := l.Field("memory_key_mkey_entry.access_mode_1_0")
	if want := Mkc.AccessMode10.At(CreateMkeyIn.MemoryKeyMkeyEntry); !ok || got != want {
		t.Errorf("path: %v %v, want %v", got, ok, want)
	}
	if got.Off != 0x80+0x16 {
		t.Errorf("access_mode_1_0 in create_mkey_in at %#x", got.Off)
	}
	got, ok = Rts2rtsQpIn.Layout().Field("qpc_data_ext.dci_stream_channel_id")
	if !ok || got.Off != 0x880+0x10 || got.Width != 16 {
		t.Errorf("dci_stream_channel_id in rts2rts_qp_in: %v %v", got, ok)
	}
	for _, bad := range []string{"nope", "memory_key_mkey_entry.nope", "opcode.x", "klm_pas_mtt.x"} {
		if _, ok := l.Field(bad); ok {
			t.Errorf("Field(%q) found", bad)
		}
	}
	e, ok := CreateQpIn.Qpc.Index(0, 8*Qpc.Layout().Size)
	if !ok || e != CreateQpIn.Qpc {
		t.Errorf("Index 0 of a one-element field: %v %v", e, ok)
	}
	if _, ok := CreateQpIn.Qpc.Index(1, 8*Qpc.Layout().Size); ok {
		t.Error("Index past the end")
	}
}

func TestCheck(t *testing.T) {
	in := QueryHcaCapIn.Layout().New()
	QueryHcaCapIn.Opcode.Set(in, MLX5_CMD_OP_QUERY_HCA_CAP)
	QueryHcaCapIn.OpMod.Set(in, uint64(QueryHCACapOpMod(MLX5_CAP_GENERAL_2, true)))
	out := make([]byte, 16)
	if err := Check(in, out); err != nil {
		t.Fatalf("status OK: %v", err)
	}
	MboxOut.Status.Set(out, uint64(MLX5_CMD_STAT_BAD_PARAM_ERR))
	MboxOut.Syndrome.Set(out, 0x1234abcd)
	err := Check(in, out)
	var ce *CmdError
	if !errors.As(err, &ce) || ce.Opcode != MLX5_CMD_OP_QUERY_HCA_CAP || ce.OpMod != 0x41 || ce.Syndrome != 0x1234abcd {
		t.Fatalf("Check: %#v", err)
	}
	if !errors.Is(err, MLX5_CMD_STAT_BAD_PARAM_ERR) || errors.Is(err, MLX5_CMD_STAT_BAD_OP_ERR) {
		t.Error("errors.Is does not compare the status")
	}
	const want = "firmware command QUERY_HCA_CAP (opcode 0x100, op_mod 0x41): BAD_PARAM_ERR (0x3), syndrome 0x1234abcd"
	if err.Error() != want {
		t.Errorf("message\n got %q\nwant %q", err, want)
	}
	if err := Check(in[:4], out); !errors.Is(err, ErrMailbox) {
		t.Errorf("short mailbox: %v", err)
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{OpcodeName(MLX5_CMD_OP_CREATE_MKEY), "CREATE_MKEY"},
		{OpcodeName(MLX5_CMD_OP_RTS2RTS_QP), "RTS2RTS_QP"},
		{OpcodeName(MLX5_CMD_OP_CREATE_UCTX), "CREATE_UCTX"},
		{OpcodeName(0xfff0), "opcode 0xfff0"},
		{MLX5_CMD_STAT_OK.String(), "OK"},
		{MLX5_CMD_STAT_BAD_RES_STATE_ERR.String(), "BAD_RES_STATE_ERR"},
		{MLX5_CMD_STAT_BAD_SIZE_OUTS_CQES_ERR.String(), "BAD_SIZE_OUTS_CQES_ERR"},
		{Status(0x42).String(), "status 0x42"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	if len(statusNames) != 16 {
		t.Errorf("%d statuses", len(statusNames))
	}
	for i := 1; i < len(opcodeNames); i++ {
		if opcodeNames[i-1].Op >= opcodeNames[i].Op {
			t.Fatalf("opcodeNames not sorted at %s", opcodeNames[i].Name)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	buf := CreateMkeyIn.Layout().New()
	lr := Mkc.Lr.At(CreateMkeyIn.MemoryKeyMkeyEntry)
	pd := Mkc.Pd.At(CreateMkeyIn.MemoryKeyMkeyEntry)
	b.ReportAllocs()
	var s uint64
	for b.Loop() {
		s += lr.Get(buf) + pd.Get(buf) + CreateMkeyIn.Opcode.Get(buf)
	}
	_ = s
}

func BenchmarkSet(b *testing.B) {
	buf := CreateMkeyIn.Layout().New()
	lr := Mkc.Lr.At(CreateMkeyIn.MemoryKeyMkeyEntry)
	pd := Mkc.Pd.At(CreateMkeyIn.MemoryKeyMkeyEntry)
	b.ReportAllocs()
	for b.Loop() {
		lr.Set(buf, 1)
		pd.Set(buf, 0x11)
		CreateMkeyIn.Opcode.Set(buf, MLX5_CMD_OP_CREATE_MKEY)
	}
}

func TestZeroAllocs(t *testing.T) {
	buf := Rts2rtsQpIn.Layout().New()
	f := QpcExt.DciStreamChannelId.At(Rts2rtsQpIn.QpcDataExt)
	if n := testing.AllocsPerRun(100, func() {
		f.Set(buf, 0x1234)
		Qpc.DrainSigerr.At(Rts2rtsQpIn.Qpc).Set(buf, 1)
		_ = f.Get(buf) + Rts2rtsQpIn.Qpn.Get(buf)
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// A field's word form sets the same bits as Set.
func TestWord32MatchesSet(t *testing.T) {
	for _, l := range Layouts() {
		for _, f := range l.Fields {
			w, ok := f.Word32()
			if !ok {
				continue
			}
			words := make([]uint32, (l.Size+3)/4)
			w.Put(words, 0xffffffff)
			got := make([]byte, len(words)*4)
			for i, v := range words {
				binary.BigEndian.PutUint32(got[4*i:], v)
			}
			want := make([]byte, len(got))
			f.Set(want, ^uint64(0))
			if !bytes.Equal(got, want) {
				t.Errorf("%s.%s: word form sets %x, Set %x", l.Name, f.Name, got, want)
			}
		}
	}
	if _, ok := (Field{Off: 30, Width: 4}).Word32(); ok {
		t.Error("a field across a word boundary has a word form")
	}
}
