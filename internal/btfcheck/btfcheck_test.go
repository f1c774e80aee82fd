package btfcheck

import (
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
	rec := &Recorder{TB: t}
	CheckConsts(rec, s, []Const{{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_PD", Value: 2}})
	CheckLayouts(rec, s, []Layout{{Struct: "ib_uverbs_attr", Size: 16, Fields: []Field{{Name: "flags", Offset: 5}}}})
	if len(rec.Errors) != 2 || !strings.Contains(rec.Errors[0], "UVERBS_OBJECT_PD") || !strings.Contains(rec.Errors[1], "ib_uverbs_attr.flags") {
		t.Fatalf("errors = %q", rec.Errors)
	}
	rec.Errors = nil
	CheckConsts(rec, s, []Const{{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_PD", Value: 1}})
	CheckLayouts(rec, s, []Layout{{Struct: "ib_uverbs_attr", Size: 16, Fields: []Field{{Name: "flags", Offset: 4}}}})
	if len(rec.Errors) != 0 {
		t.Fatalf("errors on a correct table: %q", rec.Errors)
	}
}

// kernelName stands for a kernel's release in the negative controls: every
// failure must name it.
const kernelName = "mlx5_core of 9.9.9-synthetic"

// load marshals types to BTF and loads them back as a spec named
// kernelName.
func load(t *testing.T, types ...btf.Type) *Spec {
	t.Helper()
	b, err := btf.NewBuilder(types, nil)
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
	return FromSpec(kernelName, s)
}

// prmStruct builds an mlx5_ifc_NAME_bits struct from (name, PRM bit,
// width) triples, as the kernel's u8 name[width] members are in BTF.
type prmBit struct {
	name       string
	off, width uint32
	typ        btf.Type // a nested struct or union instead of u8[width]
}

func prmStruct(name string, bits uint32, ms ...prmBit) *btf.Struct {
	u8 := &btf.Int{Name: "u8", Size: 1}
	st := &btf.Struct{Name: name, Size: bits}
	for _, m := range ms {
		typ := m.typ
		if typ == nil {
			typ = &btf.Array{Index: u8, Type: u8, Nelems: m.width}
			if m.width == 1 {
				typ = u8
			}
		}
		st.Members = append(st.Members, btf.Member{Name: m.name, Type: typ, Offset: btf.Bits(8 * m.off)})
	}
	return st
}

// newerKernelPRM is a later kernel's version of a PRM struct with every
// kind of change the 6.12 and 7.x kernels made to mlx5_ifc.h.
func newerKernelPRM() *btf.Struct {
	query := prmStruct("", 0x10, prmBit{name: "reserved_at_0", off: 0, width: 3}, prmBit{name: "log_obj_range", off: 3, width: 5}, prmBit{name: "reserved_at_8", off: 8, width: 8})
	u8 := &btf.Int{Name: "u8", Size: 1}
	opParam := &btf.Union{Size: 0x10, Members: []btf.Member{
		{Name: "query", Type: query},
		{Name: "obj_offset", Type: &btf.Array{Index: u8, Type: u8, Nelems: 0x10}},
	}}
	return prmStruct("mlx5_ifc_synth_cap_bits", 0x40,
		prmBit{name: "opcode", off: 0, width: 0x10},
		prmBit{name: "op_param", off: 0x10, width: 0x10, typ: opParam},
		prmBit{name: "relaxed_ordering_read_pci_enabled", off: 0x20, width: 1},
		prmBit{name: "new_name", off: 0x21, width: 1},
		prmBit{name: "repeated_mkey", off: 0x22, width: 1},
		prmBit{name: "reserved_at_23", off: 0x23, width: 1},
		prmBit{name: "other", off: 0x24, width: 1},
		prmBit{name: "reserved_at_25", off: 0x25, width: 3},
		prmBit{name: "log_page_size", off: 0x28, width: 6},
		prmBit{name: "reserved_at_2e", off: 0x2e, width: 1},
		prmBit{name: "wide", off: 0x2f, width: 1},
		prmBit{name: "relaxed_ordering_read", off: 0x30, width: 1},
		prmBit{name: "reserved_at_31", off: 0x31, width: 1},
		prmBit{name: "moved", off: 0x32, width: 1},
		prmBit{name: "reserved_at_33", off: 0x33, width: 0xd},
	)
}

// TestMatchPRMRules is the negative and positive control of MatchPRM: what
// a newer kernel may change in a PRM struct, and what fails naming the
// field and the kernel.
func TestMatchPRMRules(t *testing.T) {
	s := load(t, newerKernelPRM())
	const st = "mlx5_ifc_synth_cap_bits"
	for _, tc := range []struct {
		f        PRMField
		pass     bool
		contains string // in the note or the error
	}{
		{PRMField{Name: "opcode", Off: 0, Width: 0x10}, true, ""},
		{PRMField{Name: "log_obj_range", Off: 0x13, Width: 5}, true, "op_param.query.log_obj_range, at the same bits"},
		{PRMField{Name: "old_name", Off: 0x21, Width: 1}, true, "renamed it new_name"},
		{PRMField{Name: "repeated_mkey", Off: 0x22, Width: 1, Src: "rdma-core"}, true, "repeated_mkey (from rdma-core): " + kernelName + " names it, at the same bits"},
		{PRMField{Name: "future_cap", Off: 0x23, Width: 1, Src: "rdma-core"}, true, ""},
		{PRMField{Name: "future_cap", Off: 0x60, Width: 8, Src: "rdma-core"}, true, ""}, // past the kernel's end
		{PRMField{Name: "log_page_size", Off: 0x29, Width: 5}, true, "widened it to log_page_size at bit 0x28 width 6"},
		{PRMField{Name: "other", Off: 0x24, Width: 4, Src: "rdma-core"}, true, "other (from rdma-core): " + kernelName + " has it narrower, other at bit 0x24 width 1"},
		{PRMField{Name: "other", Off: 0x24, Width: 5, Src: "rdma-core"}, false, "other: Go has bit 0x24 width 5"}, // into log_page_size
		{PRMField{Name: "other", Off: 0x24, Width: 4}, false, "other: Go has bit 0x24 width 4"},                   // the kernel's own field

		{PRMField{Name: "relaxed_ordering_read", Off: 0x20, Width: 1}, false, "relaxed_ordering_read: Go has bit 0x20 width 1, " + kernelName + " has relaxed_ordering_read at bit 0x30"},
		{PRMField{Name: "moved", Off: 0x31, Width: 1}, false, "moved: Go has bit 0x31 width 1, " + kernelName + " has moved at bit 0x32"},
		{PRMField{Name: "wide", Off: 0x2e, Width: 2}, false, "wide: Go has bit 0x2e width 2, " + kernelName + " has wide at bit 0x2f width 1"},
		{PRMField{Name: "clash", Off: 0x24, Width: 1, Src: "rdma-core"}, false, "clash (bit 0x24 width 1, from rdma-core): " + kernelName + " has other"},
		{PRMField{Name: "qpc_extension", Off: 0x21, Width: 1, Src: "rdma-core"}, false, "qpc_extension (bit 0x21 width 1, from rdma-core): " + kernelName + " has new_name"},
		{PRMField{Name: "gone", Off: 0x25, Width: 1}, false, "gone: Go has bit 0x25 width 1; " + kernelName + " has no gone, and those bits are reserved"},
		{PRMField{Name: "meaning", Off: 0x24, Width: 2}, false, "meaning: Go has bit 0x24 width 2; " + kernelName + " has no meaning, and other at bit 0x24"},
	} {
		note, err := s.MatchPRM(st, tc.f)
		got := note
		if err != nil {
			got = err.Error()
		}
		if (err == nil) != tc.pass || !strings.Contains(got, tc.contains) {
			t.Errorf("MatchPRM(%+v) = %q, %v; want pass=%v containing %q", tc.f, note, err, tc.pass, tc.contains)
		}
		if err != nil && !strings.Contains(got, kernelName) {
			t.Errorf("MatchPRM(%+v): %q does not name the kernel", tc.f, got)
		}
	}
	if _, err := s.MatchPRM("mlx5_ifc_absent_bits", PRMField{Name: "x", Width: 1}); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("absent struct: %v", err)
	}
}

// TestLayoutRules is the control of CheckLayouts' rules for uapi structs:
// an extensible response may grow, not shrink below what Go reads; a
// newer field must sit on bytes an older kernel reserves; a moved field
// fails naming itself and the kernel.
func TestLayoutRules(t *testing.T) {
	u8 := &btf.Int{Name: "__u8", Size: 1}
	u16 := &btf.Int{Name: "__u16", Size: 2}
	u32 := &btf.Int{Name: "__u32", Size: 4}
	arr := func(n uint32) btf.Type { return &btf.Array{Index: u32, Type: u8, Nelems: n} }
	grown := &btf.Struct{Name: "grown_resp", Size: 16, Members: []btf.Member{
		{Name: "comp_mask", Type: u32, Offset: 0}, {Name: "response_length", Type: u32, Offset: 32},
		{Name: "caps", Type: u32, Offset: 64}, {Name: "reg_c0", Type: u32, Offset: 96},
	}}
	shrunk := &btf.Struct{Name: "shrunk_resp", Size: 8, Members: []btf.Member{
		{Name: "comp_mask", Type: u32, Offset: 0}, {Name: "response_length", Type: u32, Offset: 32},
	}}
	oldPort := &btf.Struct{Name: "old_port_resp", Size: 8, Members: []btf.Member{
		{Name: "flags2", Type: u16, Offset: 0}, {Name: "reserved", Type: arr(6), Offset: 16},
	}}
	newPort := &btf.Struct{Name: "new_port_resp", Size: 8, Members: []btf.Member{
		{Name: "flags2", Type: u16, Offset: 0}, {Name: "reserved", Type: arr(2), Offset: 16}, {Name: "speed_ex", Type: u32, Offset: 32},
	}}
	otherPort := &btf.Struct{Name: "other_port_resp", Size: 8, Members: []btf.Member{
		{Name: "flags2", Type: u16, Offset: 0}, {Name: "reserved", Type: arr(2), Offset: 16}, {Name: "something", Type: u32, Offset: 32},
	}}
	s := load(t, grown, shrunk, oldPort, newPort, otherPort)
	resp := []Field{{Name: "comp_mask", Offset: 0}, {Name: "response_length", Offset: 4}, {Name: "caps", Offset: 8}}
	port := func(st string) Layout {
		return Layout{Struct: st, Size: 8, Fields: []Field{{Name: "flags2", Offset: 0}, {Name: "speed_ex", Offset: 4, Newer: true}}}
	}
	for _, tc := range []struct {
		l        Layout
		fails    int
		contains string
	}{
		{Layout{Struct: "grown_resp", Size: 12, Extensible: true, Fields: resp}, 0, "grew"},
		{Layout{Struct: "grown_resp", Size: 12, Fields: resp}, 1, "struct grown_resp: Go size 12, " + kernelName + " BTF size 16"},
		{Layout{Struct: "shrunk_resp", Size: 12, Extensible: true, Fields: resp}, 2, "less than Go reads: caps (Go offset 8) lie past its end"},
		{port("old_port_resp"), 0, ""},
		{port("new_port_resp"), 0, ""},
		{port("other_port_resp"), 1, "other_port_resp.speed_ex (Go offset 4, newer than " + kernelName + "): the kernel has something"},
		{Layout{Struct: "grown_resp", Size: 16, Fields: []Field{{Name: "caps", Offset: 12}}}, 1, "struct grown_resp.caps: Go offset 12, " + kernelName + " BTF offset 64 bits"},
	} {
		ps := s.LayoutProblems(tc.l)
		fails := 0
		var all []string
		for _, p := range ps {
			all = append(all, p.Text)
			if !p.Note {
				fails++
				if !strings.Contains(p.Text, kernelName) {
					t.Errorf("%s: %q does not name the kernel", tc.l.Struct, p.Text)
				}
			}
		}
		if fails != tc.fails || !strings.Contains(strings.Join(all, "\n"), tc.contains) {
			t.Errorf("%s (extensible %v): %d failures %q; want %d containing %q", tc.l.Struct, tc.l.Extensible, fails, all, tc.fails, tc.contains)
		}
	}
}
