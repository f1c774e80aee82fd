// Package btfcheck compares mlx5go's hard-coded kernel ABI (constants,
// struct layouts, PRM field offsets) with the BTF of the running kernel and
// its modules (/sys/kernel/btf/*). Conformance tests in every package that
// mirrors kernel ABI use it; they run in the kernel lab, where a Debian
// kernel (6.1, 6.12 or the newest) with ib_uverbs, mlx5_ib and mlx5_core
// is loaded.
//
// The checks are exact where exactness matters and tolerant where the ABI
// is extensible (docs/LAB.md, "What the BTF checks accept"): a constant
// keeps its value; a field mlx5go reads keeps its offset (and, in PRM
// layouts, its width); a struct keeps its size, except that an extensible
// response (Layout.Extensible) may grow past what mlx5go reads; a PRM
// field may move into a union or nested struct, or take another name, at
// the same bits and width (MatchPRM). Every failure names the field and
// the kernel (Spec.Name carries the kernel's release).
//
// It imports github.com/cilium/ebpf/btf and nothing of mlx5go.
package btfcheck

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// Spec is the BTF of one or more kernel modules (each split on top of
// vmlinux), searched together: a type a module uses may be defined in the
// module it depends on (ib_uverbs uses ib_core's enum rdma_driver_id).
type Spec struct {
	Name  string
	specs []*btf.Spec

	enumerators map[string][]uint64 // every enumerator of every enum, built on first use
}

// Load reads the BTF of the named modules from /sys/kernel/btf ("vmlinux"
// for the kernel itself). The spec's Name is the modules and the running
// kernel's release, "mlx5_core+mlx5_ib of 6.12.57+deb13-amd64", so that
// every failure names the kernel.
func Load(modules ...string) (*Spec, error) {
	s := &Spec{Name: strings.Join(modules, "+")}
	if rel, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		s.Name += " of " + strings.TrimSpace(string(rel))
	}
	for _, module := range modules {
		var sp *btf.Spec
		var err error
		if module == "vmlinux" {
			sp, err = btf.LoadKernelSpec()
		} else {
			sp, err = btf.LoadKernelModuleSpec(module)
		}
		if err != nil {
			return nil, fmt.Errorf("btfcheck: load BTF of %s: %w", module, err)
		}
		s.specs = append(s.specs, sp)
	}
	return s, nil
}

// FromSpec wraps already loaded specs, searched together in order (tests
// build synthetic ones; internal/abigen reads a kernel's on the host).
func FromSpec(name string, s ...*btf.Spec) *Spec { return &Spec{Name: name, specs: s} }

// EnumValue returns the value of enumerator name. If enum is empty the
// enumerator is searched in every enum, named or anonymous (C enumerators
// share one namespace); otherwise only in enum's definition.
func (s *Spec) EnumValue(enum, name string) (uint64, error) {
	var found []uint64
	enumSeen := false
	if enum != "" {
		for _, sp := range s.specs {
			types, _ := sp.AnyTypesByName(enum)
			for _, t := range types {
				if e, ok := t.(*btf.Enum); ok {
					enumSeen = true
					found = appendValue(found, e, name)
				}
			}
		}
	} else {
		if s.enumerators == nil {
			if err := s.indexEnumerators(); err != nil {
				return 0, err
			}
		}
		found = s.enumerators[name]
	}
	switch {
	case enum != "" && !enumSeen:
		return 0, fmt.Errorf("%s: enum %s not found", s.Name, enum)
	case enum != "" && len(found) == 0:
		return 0, fmt.Errorf("%s: enum %s has no %s", s.Name, enum, name)
	case len(found) == 0:
		return 0, fmt.Errorf("%s: no enumerator %s", s.Name, name)
	}
	for _, v := range found[1:] {
		if v != found[0] {
			return 0, fmt.Errorf("%s: enumerator %s has conflicting values %v", s.Name, name, found)
		}
	}
	return found[0], nil
}

// indexEnumerators reads every enum once, so that looking up hundreds of
// enumerators does not walk the kernel's types hundreds of times.
func (s *Spec) indexEnumerators() error {
	idx := map[string][]uint64{}
	for _, sp := range s.specs {
		for t, err := range sp.All() {
			if err != nil {
				return err
			}
			if e, ok := t.(*btf.Enum); ok {
				for _, v := range e.Values {
					idx[v.Name] = append(idx[v.Name], v.Value)
				}
			}
		}
	}
	s.enumerators = idx
	return nil
}

func appendValue(found []uint64, e *btf.Enum, name string) []uint64 {
	for _, v := range e.Values {
		if v.Name == name {
			found = append(found, v.Value)
		}
	}
	return found
}

func (s *Spec) composite(name string) (*btf.Struct, error) {
	for _, sp := range s.specs {
		types, _ := sp.AnyTypesByName(name)
		for _, t := range types {
			if st, ok := t.(*btf.Struct); ok && st.Size > 0 {
				return st, nil
			}
		}
	}
	return nil, fmt.Errorf("%s: struct %s not found", s.Name, name)
}

// StructSize returns the size in bytes of struct name.
func (s *Spec) StructSize(name string) (uint32, error) {
	st, err := s.composite(name)
	if err != nil {
		return 0, err
	}
	return st.Size, nil
}

// MemberOffset returns the offset in bits of member path (dot-separated for
// nested members) in struct name. Members of anonymous structs and unions
// are found as the C compiler finds them.
func (s *Spec) MemberOffset(name, path string) (uint32, error) {
	st, err := s.composite(name)
	if err != nil {
		return 0, err
	}
	var off uint32
	var typ btf.Type = st
	for _, part := range strings.Split(path, ".") {
		m, base, ok := findMember(typ, part)
		if !ok {
			return 0, fmt.Errorf("%s: struct %s has no member %s", s.Name, name, path)
		}
		off += base + uint32(m.Offset)
		typ = m.Type
	}
	return off, nil
}

func members(t btf.Type) []btf.Member {
	switch c := btf.UnderlyingType(t).(type) {
	case *btf.Struct:
		return c.Members
	case *btf.Union:
		return c.Members
	}
	return nil
}

// findMember looks for name among t's members, descending into anonymous
// members; base is the offset of the anonymous member holding it.
func findMember(t btf.Type, name string) (btf.Member, uint32, bool) {
	for _, m := range members(t) {
		if m.Name == name {
			return m, 0, true
		}
		if m.Name == "" {
			if in, base, ok := findMember(m.Type, name); ok {
				return in, base + uint32(m.Offset), true
			}
		}
	}
	return btf.Member{}, 0, false
}

// PRMField returns the PRM bit offset and width of field in an
// mlx5_ifc_NAME_bits struct, where every u8 stands for one bit: a member
// u8 f[0x20] at BTF bit offset 8*n is PRM bits n..n+31.
func (s *Spec) PRMField(name, path string) (offset, width uint32, err error) {
	bits, err := s.MemberOffset(name, path)
	if err != nil {
		return 0, 0, err
	}
	st, _ := s.composite(name)
	var typ btf.Type = st
	var m btf.Member
	for _, part := range strings.Split(path, ".") {
		m, _, _ = findMember(typ, part)
		typ = m.Type
	}
	size, err := btf.Sizeof(m.Type)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %s.%s: %w", s.Name, name, path, err)
	}
	return bits / 8, uint32(size), nil
}

// PRMMember is a direct member of an mlx5_ifc_NAME_bits struct in PRM
// bits (one u8 per bit).
type PRMMember struct {
	Name       string
	Off, Width uint32
}

// PRMMembers returns the direct members of mlx5_ifc_NAME_bits in order, and
// the struct's size in PRM bits (its size in bytes in BTF).
func (s *Spec) PRMMembers(name string) ([]PRMMember, uint32, error) {
	st, err := s.composite(name)
	if err != nil {
		return nil, 0, err
	}
	var out []PRMMember
	for _, m := range st.Members {
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %s.%s: %w", s.Name, name, m.Name, err)
		}
		out = append(out, PRMMember{Name: m.Name, Off: uint32(m.Offset) / 8, Width: uint32(size)})
	}
	return out, st.Size, nil
}

// Const is a Go constant that mirrors a C enumerator.
type Const struct {
	Enum  string // "" for anonymous enums
	Name  string // the C enumerator
	Value uint64 // the Go value
}

// Layout is a Go struct that mirrors a C struct: its size and the byte
// offsets of its fields.
type Layout struct {
	Struct string
	Size   uintptr
	Fields []Field
	// Extensible marks a response the kernel copies only as far as the
	// caller's buffer reaches, reporting how far in response_length or
	// through the attribute's length (mlx5_ib_query_device's
	// offsetofend(...) <= uhw_outlen steps): a newer kernel's struct may
	// be larger than Go's. It may not be smaller than what Go reads.
	Extensible bool
}

// Field is one member's byte offset in Go.
type Field struct {
	Name   string // C member path
	Offset uintptr
	// Newer marks a field older kernels do not have (the kernel that
	// added it is named in the table's comment): on a kernel whose struct
	// lacks it, its bytes must be reserved there (a member named
	// reserved*), so that the older kernel writes zero, which the Go code
	// reads as "not given".
	Newer bool
}

// CheckConsts reports every constant whose Go value differs from the
// kernel's, or that the kernel does not have.
func CheckConsts(t testing.TB, s *Spec, consts []Const) {
	t.Helper()
	for _, c := range consts {
		v, err := s.EnumValue(c.Enum, c.Name)
		switch {
		case err != nil:
			t.Errorf("%s: %v", c.Name, err)
		case v != c.Value:
			t.Errorf("%s: Go has %#x, %s BTF has %#x", c.Name, c.Value, s.Name, v)
		}
	}
}

// CheckLayouts reports every struct whose Go size or field offsets differ
// from the kernel's, under the rules of Layout.Extensible and Field.Newer.
// Growth of an extensible struct is logged.
func CheckLayouts(t testing.TB, s *Spec, layouts []Layout) {
	t.Helper()
	for _, l := range layouts {
		for _, p := range s.LayoutProblems(l) {
			if p.Note {
				t.Logf("%s", p.Text)
			} else {
				t.Errorf("%s", p.Text)
			}
		}
	}
}

// Recorder is a testing.TB that records what a check reports instead of
// failing: the negative controls of the checks (here and in
// internal/abigen) run them on tables or kernels that must fail, and look
// at what they said.
type Recorder struct {
	testing.TB
	Errors, Logs []string
}

// Errorf records a failure.
func (r *Recorder) Errorf(format string, args ...any) {
	r.Errors = append(r.Errors, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

// Logf records a note.
func (r *Recorder) Logf(format string, args ...any) {
	r.Logs = append(r.Logs, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

// Helper does nothing: a recorder reports no lines.
func (r *Recorder) Helper() {}

// Problem is one finding of a check: a failure, or a note (a difference
// the rules accept, reported so that nobody is surprised by it).
type Problem struct {
	Text string
	Note bool
}

// LayoutProblems checks one layout and returns what it found.
func (s *Spec) LayoutProblems(l Layout) []Problem {
	var out []Problem
	fail := func(format string, args ...any) { out = append(out, Problem{Text: fmt.Sprintf(format, args...)}) }
	note := func(format string, args ...any) {
		out = append(out, Problem{Text: fmt.Sprintf(format, args...), Note: true})
	}
	st, err := s.composite(l.Struct)
	if err != nil {
		fail("%v", err)
		return out
	}
	size := uintptr(st.Size)
	switch {
	case size == l.Size:
	case l.Extensible && size > l.Size:
		note("struct %s: %s has %d bytes, Go %d: an extensible response grew; the kernel fills only the %d bytes Go passes", l.Struct, s.Name, size, l.Size, l.Size)
	case l.Extensible:
		var past []string
		for _, f := range l.Fields {
			if f.Offset >= size {
				past = append(past, fmt.Sprintf("%s (Go offset %d)", f.Name, f.Offset))
			}
		}
		if len(past) > 0 {
			fail("struct %s: %s has %d bytes, less than Go reads: %s lie past its end", l.Struct, s.Name, size, strings.Join(past, ", "))
		} else {
			fail("struct %s: Go size %d, %s BTF size %d: an extensible response shrank", l.Struct, l.Size, s.Name, size)
		}
	default:
		fail("struct %s: Go size %d, %s BTF size %d", l.Struct, l.Size, s.Name, size)
	}
	for _, f := range l.Fields {
		bits, err := s.MemberOffset(l.Struct, f.Name)
		switch {
		case err != nil && f.Newer:
			if what := s.reservedAt(st, uint32(8*f.Offset)); what != "" {
				fail("struct %s.%s (Go offset %d, newer than %s): the kernel has %s there, not reserved bytes", l.Struct, f.Name, f.Offset, s.Name, what)
			}
		case err != nil:
			fail("%v", err)
		case uintptr(bits) != 8*f.Offset:
			fail("struct %s.%s: Go offset %d, %s BTF offset %d bits", l.Struct, f.Name, f.Offset, s.Name, bits)
		}
	}
	return out
}

// reservedAt returns "" if bit off of st lies in a member named reserved*
// (at any depth) or past st's end, else the member that holds it.
func (s *Spec) reservedAt(st *btf.Struct, off uint32) string {
	if off >= 8*st.Size {
		return ""
	}
	for _, m := range flatten(st, 0, "") {
		size, err := btf.Sizeof(m.typ)
		if err != nil || m.composite {
			continue
		}
		if m.off <= off && off < m.off+8*uint32(size) {
			if strings.HasPrefix(m.name, "reserved") {
				return ""
			}
			return fmt.Sprintf("%s (bit %d)", m.path, m.off)
		}
	}
	return ""
}

// member is a struct or union member at any depth, with its offset in
// bits from the outermost struct and its dotted path (anonymous members
// add nothing to the path).
type member struct {
	path, name string
	off        uint32
	typ        btf.Type
	composite  bool // a struct or union, whose members are listed too
}

func flatten(t btf.Type, base uint32, prefix string) []member {
	var out []member
	for _, m := range members(t) {
		path := prefix
		if m.Name != "" {
			if path != "" {
				path += "."
			}
			path += m.Name
		}
		off := base + uint32(m.Offset)
		inner := members(m.Type)
		if m.Name != "" {
			out = append(out, member{path: path, name: m.Name, off: off, typ: m.Type, composite: inner != nil})
		}
		if inner != nil {
			out = append(out, flatten(m.Type, off, path)...)
		}
	}
	return out
}

// PRMField is a field mlx5go declares in an mlx5_ifc_NAME_bits struct, in
// PRM bits, and where mlx5go took it from when the kernel's header did not
// name it (Src, e.g. rdma-core's mlx5_ifc.h; "" for the kernel's header).
type PRMField struct {
	Name       string
	Off, Width uint32
	Src        string
}

// prmMember is a member of an mlx5_ifc struct at any depth, in PRM bits.
type prmMember struct {
	path, name string
	off, width uint32
	composite  bool
}

func (m prmMember) reserved() bool { return strings.HasPrefix(m.name, "reserved") }

// prmMembers flattens mlx5_ifc_NAME_bits: every member, nested in unions
// and structs or not, in PRM bits.
func (s *Spec) prmMembers(name string) ([]prmMember, uint32, error) {
	st, err := s.composite(name)
	if err != nil {
		return nil, 0, err
	}
	var out []prmMember
	for _, m := range flatten(st, 0, "") {
		size, err := btf.Sizeof(m.typ)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %s.%s: %w", s.Name, name, m.path, err)
		}
		out = append(out, prmMember{path: m.path, name: m.name, off: m.off / 8, width: uint32(size), composite: m.composite})
	}
	return out, st.Size, nil
}

// reservedOrPast reports whether no named member of ms overlaps the bits
// [from, to): they are reserved, or past the struct's end.
func (s *Spec) reservedOrPast(ms []prmMember, from, to uint32) bool {
	for _, m := range ms {
		if !m.composite && !m.reserved() && m.off < to && from < m.off+m.width {
			return false
		}
	}
	return true
}

// MatchPRM checks one field of mlx5_ifc_NAME_bits (name is the C struct,
// "mlx5_ifc_NAME_bits") against the kernel, under these rules:
//
//   - the kernel has the field's name at the same bits and width, as a
//     direct member or inside a union or nested struct: it passes (a note
//     says where it moved, or that the kernel now names a field taken
//     from rdma-core);
//   - the kernel's field of that name ends at the same bit but is wider
//     (it grew at its high end into bits that were reserved): it passes
//     with a note, Go's bits being its low bits;
//   - a field taken from a newer definition (Src != "") whose kernel
//     namesake starts at the same bit but is narrower passes with a note
//     when the kernel keeps the rest of its bits reserved (the newer
//     definition widened it, as rdma-core's encryption_key_obj.key);
//   - the kernel has the name elsewhere, or narrower: it fails (moved,
//     shrank);
//   - the kernel does not have the name, but names exactly these bits
//     otherwise: it passes with a note (renamed at the same bits);
//   - a field taken from rdma-core (Src != "") passes when the kernel
//     names it at the same bits (the first rule), or when the kernel does
//     not name it and its bits are reserved there or lie past the end of
//     the kernel's struct; it fails if any other named member overlaps
//     them, even at the same bits;
//   - anything else fails: the kernel does not have the field.
//
// A failure names the field, the bits and the kernel (s.Name).
func (s *Spec) MatchPRM(name string, f PRMField) (note string, err error) {
	ms, _, err := s.prmMembers(name)
	if err != nil {
		return "", err
	}
	short := strings.TrimSuffix(strings.TrimPrefix(name, "mlx5_ifc_"), "_bits")
	where := func(m prmMember) string { return fmt.Sprintf("%s at bit %#x width %d", m.path, m.off, m.width) }
	var same []prmMember
	for _, m := range ms {
		if m.name == f.Name {
			same = append(same, m)
		}
	}
	for _, m := range same {
		if m.off == f.Off && m.width == f.Width {
			switch {
			case m.path != f.Name:
				return fmt.Sprintf("%s.%s: %s has it as %s, at the same bits", short, f.Name, s.Name, m.path), nil
			case f.Src != "":
				return fmt.Sprintf("%s.%s (from %s): %s names it, at the same bits", short, f.Name, f.Src, s.Name), nil
			}
			return "", nil
		}
	}
	for _, m := range same {
		if m.off+m.width == f.Off+f.Width && m.width > f.Width {
			return fmt.Sprintf("%s.%s: %s widened it to %s; Go's %d bits at %#x are its low bits", short, f.Name, s.Name, where(m), f.Width, f.Off), nil
		}
	}
	if f.Src != "" {
		for _, m := range same {
			if m.off == f.Off && m.width < f.Width && s.reservedOrPast(ms, m.off+m.width, f.Off+f.Width) {
				return fmt.Sprintf("%s.%s (from %s): %s has it narrower, %s; Go's bits past it are reserved there", short, f.Name, f.Src, s.Name, where(m)), nil
			}
		}
	}
	if len(same) > 0 {
		var at []string
		for _, m := range same {
			at = append(at, where(m))
		}
		return "", fmt.Errorf("%s.%s: Go has bit %#x width %d, %s has %s", short, f.Name, f.Off, f.Width, s.Name, strings.Join(at, ", "))
	}
	var renamed *prmMember
	for i, m := range ms {
		if m.off == f.Off && m.width == f.Width && !m.reserved() && (renamed == nil || renamed.composite) {
			renamed = &ms[i]
		}
	}
	if renamed != nil && f.Src == "" {
		return fmt.Sprintf("%s.%s: %s renamed it %s, at the same bits", short, f.Name, s.Name, renamed.path), nil
	}
	var over []string
	for _, m := range ms {
		if !m.composite && !m.reserved() && m.off < f.Off+f.Width && f.Off < m.off+m.width {
			over = append(over, where(m))
		}
	}
	switch {
	case f.Src != "" && len(over) == 0:
		return "", nil
	case f.Src != "":
		return "", fmt.Errorf("%s.%s (bit %#x width %d, from %s): %s has %s there", short, f.Name, f.Off, f.Width, f.Src, s.Name, strings.Join(over, ", "))
	case len(over) > 0:
		return "", fmt.Errorf("%s.%s: Go has bit %#x width %d; %s has no %s, and %s there", short, f.Name, f.Off, f.Width, s.Name, f.Name, strings.Join(over, ", "))
	}
	return "", fmt.Errorf("%s.%s: Go has bit %#x width %d; %s has no %s, and those bits are reserved", short, f.Name, f.Off, f.Width, s.Name, f.Name)
}
