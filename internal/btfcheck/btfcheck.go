// Package btfcheck compares mlx5go's hard-coded kernel ABI (constants,
// struct layouts, PRM field offsets) with the BTF of the running kernel and
// its modules (/sys/kernel/btf/*). Conformance tests in every package that
// mirrors kernel ABI use it; they run in the kernel lab, where Debian's own
// kernel with ib_uverbs, mlx5_ib and mlx5_core is loaded.
//
// It imports github.com/cilium/ebpf/btf and nothing of mlx5go.
package btfcheck

import (
	"fmt"
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
// for the kernel itself).
func Load(modules ...string) (*Spec, error) {
	s := &Spec{Name: strings.Join(modules, "+")}
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

// FromSpec wraps an already loaded spec (tests build synthetic ones).
func FromSpec(name string, s *btf.Spec) *Spec { return &Spec{Name: name, specs: []*btf.Spec{s}} }

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
}

// Field is one member's byte offset in Go.
type Field struct {
	Name   string // C member path
	Offset uintptr
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
// from the kernel's.
func CheckLayouts(t testing.TB, s *Spec, layouts []Layout) {
	t.Helper()
	for _, l := range layouts {
		size, err := s.StructSize(l.Struct)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if uintptr(size) != l.Size {
			t.Errorf("struct %s: Go size %d, %s BTF size %d", l.Struct, l.Size, s.Name, size)
		}
		for _, f := range l.Fields {
			bits, err := s.MemberOffset(l.Struct, f.Name)
			switch {
			case err != nil:
				t.Errorf("%v", err)
			case uintptr(bits) != 8*f.Offset:
				t.Errorf("struct %s.%s: Go offset %d, %s BTF offset %d bits", l.Struct, f.Name, f.Offset, s.Name, bits)
			}
		}
	}
}
