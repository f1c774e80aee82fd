package prm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Field is one field of a PRM struct: Width bits starting Off bits from the
// start of the struct, big-endian, where bit 0 is the most significant bit
// of byte 0 (PRM bit order, as mlx5_ifc.h counts with one u8 per bit).
//
// Get and Set work on fields of 1 to 64 bits and never allocate or panic:
// a field that does not fit in the buffer, or is wider than 64 bits, reads
// as 0 and is not written, and Set keeps only the low Width bits of v. Read
// and Write report those cases as errors instead.
type Field struct {
	Name  string // the member's name in mlx5_ifc.h
	Off   uint32 // bit offset
	Width uint32 // bits
	Type  string // the nested struct (mlx5_ifc_TYPE_bits) it holds, "" for plain bits
}

// Errors of Read and Write, wrapped with the field's name.
var (
	ErrShort    = errors.New("buffer too short")
	ErrWide     = errors.New("field wider than 64 bits")
	ErrOverflow = errors.New("value does not fit")
)

// At returns f placed inside outer: the same field, Off counted from the
// start of the struct that holds outer. Mkc.Lr.At(CreateMkeyIn.MemoryKeyMkeyEntry)
// addresses lr inside CREATE_MKEY's input mailbox.
func (f Field) At(outer Field) Field {
	f.Off += outer.Off
	return f
}

// Index returns element i of an array field whose elements are elem bits
// wide (for a struct array, the element Layout's Size*8); ok is false if i
// is out of range.
func (f Field) Index(i int, elem uint32) (Field, bool) {
	if elem == 0 || i < 0 || uint64(i+1)*uint64(elem) > uint64(f.Width) {
		return Field{}, false
	}
	return Field{Name: f.Name, Off: f.Off + uint32(i)*elem, Width: elem, Type: f.Type}, true
}

// fits reports whether the field lies inside an n-byte buffer.
func (f Field) fits(n int) bool {
	return uint64(f.Off)+uint64(f.Width) <= 8*uint64(n)
}

func mask(width uint32) uint64 { return ^uint64(0) >> (64 - width) }

// Fits reports whether v fits in the field's width.
func (f Field) Fits(v uint64) bool {
	return f.Width >= 64 || v>>f.Width == 0
}

// Get returns the field's value in b (0 if it is not inside b or is wider
// than 64 bits).
func (f Field) Get(b []byte) uint64 {
	if f.Width == 0 || f.Width > 64 || !f.fits(len(b)) {
		return 0
	}
	if f.Off%8 == 0 {
		i := f.Off / 8
		switch f.Width {
		case 8:
			return uint64(b[i])
		case 16:
			return uint64(binary.BigEndian.Uint16(b[i:]))
		case 32:
			return uint64(binary.BigEndian.Uint32(b[i:]))
		case 64:
			return binary.BigEndian.Uint64(b[i:])
		}
	}
	return f.get(b)
}

func (f Field) get(b []byte) uint64 {
	first := f.Off / 8
	end := f.Off + f.Width
	last := (end - 1) / 8
	if last-first >= 8 {
		// An unaligned field of more than 57 bits spans 9 bytes: read its
		// low 32 bits and the rest separately.
		hi := Field{Off: f.Off, Width: f.Width - 32}
		lo := Field{Off: end - 32, Width: 32}
		return hi.get(b)<<32 | lo.get(b)
	}
	if int(first)+8 <= len(b) {
		// One big-endian load of the 8 bytes from the field's first.
		return binary.BigEndian.Uint64(b[first:]) >> (8*(first+8) - end) & mask(f.Width)
	}
	var v uint64
	for _, c := range b[first : last+1] {
		v = v<<8 | uint64(c)
	}
	return v >> (8*(last+1) - end) & mask(f.Width)
}

// Set stores the low Width bits of v in b and leaves every other bit alone
// (nothing is written if the field is not inside b or is wider than 64
// bits).
func (f Field) Set(b []byte, v uint64) {
	if f.Width == 0 || f.Width > 64 || !f.fits(len(b)) {
		return
	}
	v &= mask(f.Width)
	if f.Off%8 == 0 {
		i := f.Off / 8
		switch f.Width {
		case 8:
			b[i] = byte(v)
			return
		case 16:
			binary.BigEndian.PutUint16(b[i:], uint16(v))
			return
		case 32:
			binary.BigEndian.PutUint32(b[i:], uint32(v))
			return
		case 64:
			binary.BigEndian.PutUint64(b[i:], v)
			return
		}
	}
	f.set(b, v)
}

func (f Field) set(b []byte, v uint64) {
	first := f.Off / 8
	end := f.Off + f.Width
	last := (end - 1) / 8
	if last-first >= 8 {
		Field{Off: f.Off, Width: f.Width - 32}.set(b, v>>32)
		Field{Off: end - 32, Width: 32}.set(b, v&mask(32))
		return
	}
	if int(first)+8 <= len(b) {
		// One big-endian read-modify-write of the 8 bytes from first.
		shift := 8*(first+8) - end
		w := binary.BigEndian.Uint64(b[first:])
		binary.BigEndian.PutUint64(b[first:], w&^(mask(f.Width)<<shift)|v<<shift)
		return
	}
	shift := 8*(last+1) - end
	var cur uint64
	for _, c := range b[first : last+1] {
		cur = cur<<8 | uint64(c)
	}
	cur = cur&^(mask(f.Width)<<shift) | v<<shift
	for i := int(last); i >= int(first); i-- {
		b[i] = byte(cur)
		cur >>= 8
	}
}

// Read is Get that reports a field outside b, or wider than 64 bits.
func (f Field) Read(b []byte) (uint64, error) {
	if err := f.check(len(b)); err != nil {
		return 0, err
	}
	return f.Get(b), nil
}

// Write is Set that reports a field outside b, a field wider than 64 bits,
// or a value that does not fit, and then writes nothing.
func (f Field) Write(b []byte, v uint64) error {
	if err := f.check(len(b)); err != nil {
		return err
	}
	if !f.Fits(v) {
		return fmt.Errorf("prm: %s: %#x in %d bits: %w", f.Name, v, f.Width, ErrOverflow)
	}
	f.Set(b, v)
	return nil
}

func (f Field) check(n int) error {
	switch {
	case f.Width > 64:
		return fmt.Errorf("prm: %s: %d bits: %w", f.Name, f.Width, ErrWide)
	case !f.fits(n):
		return fmt.Errorf("prm: %s: bits %#x..%#x, buffer has %d bytes: %w", f.Name, f.Off, f.Off+f.Width, n, ErrShort)
	}
	return nil
}

// Bytes returns the bytes of a byte-aligned field in b (a nested struct, an
// array, a 128-bit address), sharing b's memory; nil if the field is not
// byte-aligned or not inside b.
func (f Field) Bytes(b []byte) []byte {
	if f.Off%8 != 0 || f.Width%8 != 0 || !f.fits(len(b)) {
		return nil
	}
	return b[f.Off/8 : (f.Off+f.Width)/8 : (f.Off+f.Width)/8]
}

// String describes the field: name, bit offset and width.
func (f Field) String() string {
	return fmt.Sprintf("%s[%#x+%d]", f.Name, f.Off, f.Width)
}

// Layout is the table of one PRM struct, for tools: its fields in offset
// order (reserved bits left out) and its size.
type Layout struct {
	Name   string // NAME of mlx5_ifc_NAME_bits
	Size   uint32 // bytes
	Fields []Field
}

// New returns a zeroed mailbox of the layout's size.
func (l *Layout) New() []byte { return make([]byte, l.Size) }

// Field looks a field up by its mlx5_ifc.h name; a dotted path descends
// into nested structs that have a layout of their own
// ("memory_key_mkey_entry.access_mode_1_0" in create_mkey_in), and the
// result is placed in l.
func (l *Layout) Field(path string) (Field, bool) {
	name, rest, nested := strings.Cut(path, ".")
	for _, f := range l.Fields {
		if f.Name != name {
			continue
		}
		if !nested {
			return f, true
		}
		inner, ok := LayoutOf(f.Type)
		if !ok {
			return Field{}, false
		}
		g, ok := inner.Field(rest)
		if !ok || g.Off+g.Width > f.Width {
			return Field{}, false
		}
		return g.At(f), true
	}
	return Field{}, false
}

// LayoutOf returns the layout of mlx5_ifc_NAME_bits, by NAME or by the C
// struct's name.
func LayoutOf(name string) (*Layout, bool) {
	name = strings.TrimSuffix(strings.TrimPrefix(name, "mlx5_ifc_"), "_bits")
	i := sort.Search(len(layouts), func(i int) bool { return layouts[i].Name >= name })
	if i < len(layouts) && layouts[i].Name == name {
		return layouts[i], true
	}
	return nil, false
}

// Layouts returns every declared layout, sorted by name.
func Layouts() []*Layout {
	return append([]*Layout(nil), layouts[:]...)
}

// Word32 is a field of at most 32 bits that lies inside one big-endian
// 32-bit word of its struct: the word's index, and the field's shift and
// mask within it. Hot paths (WQE segments) compose a struct in words with it
// instead of calling Set per field.
type Word32 struct {
	Index uint16
	Shift uint8
	Mask  uint32
}

// Word32 returns f's word form; ok is false for a field that crosses a
// word boundary or is wider than 32 bits.
func (f Field) Word32() (w Word32, ok bool) {
	if f.Width == 0 || f.Width > 32 || f.Off/32 != (f.Off+f.Width-1)/32 {
		return Word32{}, false
	}
	return Word32{Index: uint16(f.Off / 32), Shift: uint8(32 - (f.Off%32 + f.Width)), Mask: uint32(mask(f.Width))}, true
}

// Put ORs v (its low bits, as the field's width keeps them) into the word
// of words the field lies in. The caller starts from zeroed words.
func (w Word32) Put(words []uint32, v uint32) {
	words[w.Index] |= (v & w.Mask) << w.Shift
}
