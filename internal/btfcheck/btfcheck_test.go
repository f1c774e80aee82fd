package btfcheck

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// synthetic builds a BTF blob the way the kernel's does and loads it back,
// so the look-ups are tested on real BTF encoding.
func synthetic(t *testing.T) *Spec {
	t.Helper()
	u8 := &btf.Int{Name: "u8", Size: 1}
	u16 := &btf.Int{Name: "__u16", Size: 2}
	u64 := &btf.Int{Name: "__u64", Size: 8}
	inner := &btf.Struct{Size: 2, Members: []btf.Member{
		{Name: "elem_id", Type: u8, Offset: 0}, {Name: "reserved", Type: u8, Offset: 8},
	}}
	union := &btf.Union{Size: 2, Members: []btf.Member{
		{Name: "enum_data", Type: inner}, {Name: "reserved", Type: u16},
	}}
	attr := &btf.Struct{Name: "ib_uverbs_attr", Size: 16, Members: []btf.Member{
		{Name: "attr_id", Type: u16, Offset: 0},
		{Name: "len", Type: u16, Offset: 16},
		{Name: "flags", Type: u16, Offset: 32},
		{Name: "attr_data", Type: union, Offset: 48},
		{Name: "", Type: &btf.Union{Size: 8, Members: []btf.Member{{Name: "data", Type: u64}}}, Offset: 64},
	}}
	bits := &btf.Struct{Name: "mlx5_ifc_cmd_hdr_bits", Size: 8, Members: []btf.Member{
		{Name: "opcode", Type: &btf.Array{Index: u8, Type: u8, Nelems: 16}, Offset: 0},
		{Name: "reserved_at_10", Type: &btf.Array{Index: u8, Type: u8, Nelems: 16}, Offset: 16 * 8},
		{Name: "op_mod", Type: &btf.Array{Index: u8, Type: u8, Nelems: 16}, Offset: 32 * 8},
		{Name: "flag", Type: u8, Offset: 48 * 8},
	}}
	named := &btf.Enum{Name: "uverbs_default_objects", Size: 4, Values: []btf.EnumValue{
		{Name: "UVERBS_OBJECT_DEVICE", Value: 0}, {Name: "UVERBS_OBJECT_PD", Value: 1},
	}}
	anon := &btf.Enum{Size: 4, Values: []btf.EnumValue{{Name: "UVERBS_ATTR_F_VALID_OUTPUT", Value: 2}}}
	b, err := btf.NewBuilder([]btf.Type{attr, bits, named, anon}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := btf.LoadSpecFromReader(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return FromSpec("synthetic", s)
}

func TestLookups(t *testing.T) {
	s := synthetic(t)
	if v, err := s.EnumValue("uverbs_default_objects", "UVERBS_OBJECT_PD"); err != nil || v != 1 {
		t.Errorf("named enum: %d, %v", v, err)
	}
	if v, err := s.EnumValue("", "UVERBS_ATTR_F_VALID_OUTPUT"); err != nil || v != 2 {
		t.Errorf("anonymous enum: %d, %v", v, err)
	}
	if _, err := s.EnumValue("uverbs_default_objects", "UVERBS_ATTR_F_VALID_OUTPUT"); err == nil {
		t.Error("found an enumerator in the wrong enum")
	}
	if off, err := s.MemberOffset("ib_uverbs_attr", "attr_data.enum_data.elem_id"); err != nil || off != 48 {
		t.Errorf("nested member: %d, %v", off, err)
	}
	if off, err := s.MemberOffset("ib_uverbs_attr", "data"); err != nil || off != 64 {
		t.Errorf("member of anonymous union: %d, %v", off, err)
	}
	if off, w, err := s.PRMField("mlx5_ifc_cmd_hdr_bits", "op_mod"); err != nil || off != 32 || w != 16 {
		t.Errorf("PRM field: %d/%d, %v", off, w, err)
	}
	if off, w, err := s.PRMField("mlx5_ifc_cmd_hdr_bits", "flag"); err != nil || off != 48 || w != 1 {
		t.Errorf("one-bit PRM field: %d/%d, %v", off, w, err)
	}
	ms, bits, err := s.PRMMembers("mlx5_ifc_cmd_hdr_bits")
	if err != nil || bits != 8 || len(ms) != 4 || ms[1] != (PRMMember{"reserved_at_10", 16, 16}) || ms[3] != (PRMMember{"flag", 48, 1}) {
		t.Errorf("PRM members: %+v, %d bits, %v", ms, bits, err)
	}
}

// The checkers must fail on a wrong value, naming it.
func TestCheckersReportMismatch(t *testing.T) {
	s := synthetic(t)
	rec := &recorder{TB: t}
	CheckConsts(rec, s, []Const{{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_PD", Value: 2}})
	CheckLayouts(rec, s, []Layout{{Struct: "ib_uverbs_attr", Size: 16, Fields: []Field{{Name: "flags", Offset: 5}}}})
	if len(rec.errs) != 2 || !strings.Contains(rec.errs[0], "UVERBS_OBJECT_PD") || !strings.Contains(rec.errs[1], "ib_uverbs_attr.flags") {
		t.Fatalf("errors = %q", rec.errs)
	}
	rec.errs = nil
	CheckConsts(rec, s, []Const{{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_PD", Value: 1}})
	CheckLayouts(rec, s, []Layout{{Struct: "ib_uverbs_attr", Size: 16, Fields: []Field{{Name: "flags", Offset: 4}}}})
	if len(rec.errs) != 0 {
		t.Fatalf("errors on a correct table: %q", rec.errs)
	}
}

type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (r *recorder) Helper() {}
