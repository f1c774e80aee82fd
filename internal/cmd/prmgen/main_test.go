package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// The committed prm/ifc.go is what the generator makes from the installed
// kernel headers.
func TestCommittedOutputIsCurrent(t *testing.T) {
	include, err := FindInclude()
	if err != nil {
		t.Skipf("%v (the lab's BTF test still checks every field)", err)
	}
	got, err := Generate(include)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../../prm/ifc.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("prm/ifc.go differs from prmgen's output for %s: run go generate ./prm", include)
	}
}

const header = `
struct mlx5_ifc_inner_bits {
	u8         a[0x4];
	u8         reserved_at_4[0x1c];
};

union mlx5_ifc_u_bits {
	struct mlx5_ifc_inner_bits inner;
	u8         reserved_at_0[0x40];
};

struct mlx5_ifc_outer_bits {
	u8         opcode[0x10];
	u8         b[0x1];
	u8         reserved_at_11[0xf];

	struct mlx5_ifc_inner_bits in;
	union mlx5_ifc_u_bits u;
	struct mlx5_ifc_inner_bits arr[2];
	u8         bytes[4][0x8];
	u8         flex[][0x20];
};
`

func TestParse(t *testing.T) {
	h := parseHeader(header)
	for name, want := range map[string]uint32{"inner": 0x20, "u": 0x40, "outer": 0x20 + 0x20 + 0x40 + 0x40 + 0x20} {
		if got, err := sizeOf(h, name, 0); err != nil || got != want {
			t.Errorf("sizeOf(%s) = %#x, %v; want %#x", name, got, err, want)
		}
	}
	var offs []string
	var off uint32
	for _, m := range h["outer"].Members {
		w, _ := memberBits(h, m, 0)
		offs = append(offs, m.Name+"@"+hex(off)+"+"+hex(w))
		off += w
	}
	want := "opcode@0x0+0x10 b@0x10+0x1 reserved_at_11@0x11+0xf in@0x20+0x20 u@0x40+0x40 arr@0x80+0x40 bytes@0xc0+0x20 flex@0xe0+0x0"
	if got := strings.Join(offs, " "); got != want {
		t.Errorf("offsets\n got %s\nwant %s", got, want)
	}
	if h := parseHeader("struct mlx5_ifc_bad_bits {\n\tint x;\n};\n"); h["bad"].err == nil {
		t.Error("an unknown member parsed")
	}
}

func hex(v uint32) string { return fmt.Sprintf("%#x", v) }

func TestParseEnum(t *testing.T) {
	text := "\nenum {\n\tX_A = 0x10,\n\tX_B,\n\t/* c */\n\tX_C = 7,\n\tX_MAX\n};\n\nenum tag {\n\tY_A,\n\tY_B\n};\n"
	g, err := parseEnum(text, "X_A", "X_")
	if err != nil || len(g.Values) != 3 || g.Values[1] != (enumValue{"X_B", 0x11}) || g.Values[2].Value != 7 {
		t.Errorf("anonymous enum: %+v, %v", g, err)
	}
	g, err = parseEnum(text, "enum tag", "Y_")
	if err != nil || len(g.Values) != 2 || g.Values[1] != (enumValue{"Y_B", 1}) {
		t.Errorf("tagged enum: %+v, %v", g, err)
	}
}

func TestGoName(t *testing.T) {
	for c, want := range map[string]string{"log_max_qp": "LogMaxQp", "access_mode_1_0": "AccessMode10", "_8_bits": "F8Bits"} {
		if got := goName(c); got != want {
			t.Errorf("goName(%s) = %s, want %s", c, got, want)
		}
	}
}

func TestSplitReserved(t *testing.T) {
	got := splitReserved([]Field{{Name: "r", Off: 0x10, Width: 0x10}}, 0x14, 2)
	if len(got) != 2 || got[0].Width != 4 || got[1].Off != 0x16 || got[1].Width != 0xa {
		t.Errorf("%+v", got)
	}
}

// The committed prm/ifc.go is marked as generated the way Go's tools
// recognise it (go/ast.IsGenerated: one line matching
// `^// Code generated .* DO NOT EDIT\.$` before the package clause), so
// that linters and reviewers skip it.
func TestOutputIsMarkedGenerated(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../../prm/ifc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if !ast.IsGenerated(f) {
		t.Errorf("prm/ifc.go is not marked generated: its header is %q", f.Comments[0].Text())
	}
}

// An extra may widen a field the kernel names into the reserved bits
// after it, never over a named one; a Partial extra struct lists its
// fields as newer one by one.
func TestWidenedExtraAndPartial(t *testing.T) {
	h := parseHeader(`
struct mlx5_ifc_k_bits {
	u8         key[0x20];
	u8         reserved_at_20[0x40];
	u8         named[0x20];
};
`)
	saved := [...]any{structs, extras, extraStructs}
	defer func() {
		structs, extras = saved[0].([]string), saved[1].([]extra)
		extraStructs = saved[2].(extraStructList)
	}()
	structs, extraStructs = []string{"k"}, nil
	extras = []extra{{"k", "key", 0, 0x60, "", "newer"}}
	l, err := buildLayouts(h)
	if err != nil || len(l[0].Fields) != 2 || l[0].Fields[0] != (Field{Name: "key", Off: 0, Width: 0x60, Src: "newer"}) {
		t.Fatalf("widened: %+v, %v", l, err)
	}
	for _, bad := range []extra{{"k", "key", 0, 0x80, "", "newer"}, {"k", "key", 0, 0x20, "", "newer"}, {"k", "key", 8, 0x40, "", "newer"}} {
		extras = []extra{bad}
		if _, err := buildLayouts(h); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}

	extras = nil
	structs = []string{"p"}
	extraStructs = extraStructList{{"p", 0x20, []extra{{"", "a", 0, 1, "", "newer"}}, true}}
	l, err = buildLayouts(h)
	if err != nil {
		t.Fatal(err)
	}
	src, err := emit(l, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"p", "", "newer"}`, `{"p", "a", "newer"}`} {
		if !strings.Contains(string(src), want) {
			t.Errorf("newer lacks %s", want)
		}
	}
}
