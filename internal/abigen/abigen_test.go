package abigen

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
)

// root is the repository root, from this package's directory.
const root = "../.."

func fromTestdata(t *testing.T) map[string]*Kernel {
	t.Helper()
	k, err := LoadTestdata("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestGeneratedFilesAreCurrent regenerates every generated file from the
// committed BTF snapshot and compares it with the committed file, and
// checks that no generated file is left that the generator no longer
// writes: a hand edit, or a spec change without go run
// ./internal/cmd/abigen, fails naming the file and line.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	out, err := Generate(Packages, fromTestdata(t))
	if err != nil {
		t.Fatal(err)
	}
	for p, src := range out.Files {
		committed, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%s: %v (run go run ./internal/cmd/abigen)", p, err)
			continue
		}
		for _, d := range stale(p, committed, src) {
			t.Error(d)
		}
	}
	for _, pkg := range Packages {
		files, _ := filepath.Glob(filepath.Join(root, pkg.Dir, "*.go"))
		for _, f := range files {
			rel, _ := filepath.Rel(root, f)
			if _, ok := out.Files[filepath.ToSlash(rel)]; !ok && generated(t, f) {
				t.Errorf("%s is marked generated, but internal/cmd/abigen does not write it", rel)
			}
		}
	}
}

func generated(t *testing.T, path string) bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	return ast.IsGenerated(f)
}

// TestHandEditedFileFails is the negative control of
// TestGeneratedFilesAreCurrent: a generated field edited by hand is
// reported with its file, line and both versions.
func TestHandEditedFileFails(t *testing.T) {
	out, err := Generate([]Package{uverbsABI}, fromTestdata(t))
	if err != nil {
		t.Fatal(err)
	}
	const p = "internal/uverbsabi/rdma_user_ioctl_cmds.go"
	src := out.Files[p]
	edited := bytes.Replace(src, []byte("\tFlags    uint16\n"), []byte("\tFlags    uint32\n"), 1)
	if bytes.Equal(edited, src) {
		t.Fatalf("%s has no Flags uint16 field to edit:\n%s", p, src)
	}
	d := stale(p, edited, src)
	if len(d) != 1 || !strings.Contains(d[0], p+":") || !strings.Contains(d[0], "Flags    uint32") || !strings.Contains(d[0], "Flags    uint16") {
		t.Errorf("stale = %q, want the edited line with both versions", d)
	}
	if d := stale(p, src, src); len(d) != 0 {
		t.Errorf("stale reports an unedited file: %q", d)
	}
}

// Every generated file is marked generated the way Go's tools recognise
// it (go/ast.IsGenerated), and uses structs.HostLayout in every struct.
func TestGeneratedHeader(t *testing.T) {
	out, err := Generate(Packages, fromTestdata(t))
	if err != nil {
		t.Fatal(err)
	}
	for p, src := range out.Files {
		f, err := parser.ParseFile(token.NewFileSet(), p, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if !ast.IsGenerated(f) {
			t.Errorf("%s is not marked generated", p)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			if len(st.Fields.List) == 0 || !strings.Contains(string(src[st.Fields.List[0].Pos()-1:st.Fields.List[0].End()-1]), "structs.HostLayout") {
				t.Errorf("%s: a struct without structs.HostLayout first", p)
			}
			return true
		})
	}
}

// snapshotOf rebuilds kernel k's snapshot with edit applied to its types.
func snapshotOf(t *testing.T, k *Kernel, edit func(types []btf.Type)) *Kernel {
	t.Helper()
	var types []btf.Type
	for typ, err := range k.specs[snapshotModule].All() {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, btf.Copy(typ))
	}
	edit(types)
	raw, err := Snapshot(types)
	if err != nil {
		t.Fatal(err)
	}
	edited, err := LoadSnapshot(k.Suite, "9.9.9-moved", "", raw)
	if err != nil {
		t.Fatal(err)
	}
	return edited
}

func structNamed(types []btf.Type, name string) *btf.Struct {
	for _, typ := range types {
		if s, ok := typ.(*btf.Struct); ok && s.Name == name {
			return s
		}
	}
	return nil
}

// TestCheckNegativeControls: the lab's check (Check) passes the tables
// Go compiled against the kernel they came from, and fails, naming the
// field and the kernel, when a generated field was edited by hand (its
// Go offset is no longer the kernel's) and when a kernel moved a field
// mlx5go reads.
func TestCheckNegativeControls(t *testing.T) {
	kernels := fromTestdata(t)
	k := kernels[Kernels[0]]
	consts, layouts, err := Regenerate(uverbsABI, k)
	if err != nil {
		t.Fatal(err)
	}
	rec := &btfcheck.Recorder{TB: t}
	Check(rec, uverbsABI, k, consts, layouts)
	if len(rec.Errors) != 0 {
		t.Fatalf("the kernel's own tables fail: %q", rec.Errors)
	}

	// A hand edit that widens ib_uverbs_attr.flags to 4 bytes moves
	// attr_data and data.
	edited := slices.Clone(layouts)
	i := slices.IndexFunc(edited, func(l btfcheck.Layout) bool { return l.Struct == "ib_uverbs_attr" })
	edited[i].Fields = slices.Clone(edited[i].Fields)
	for j, f := range edited[i].Fields {
		if f.Name == "attr_data" {
			edited[i].Fields[j].Offset += 2
		}
	}
	rec = &btfcheck.Recorder{TB: t}
	Check(rec, uverbsABI, k, nil, edited[i:i+1])
	if len(rec.Errors) != 1 || !strings.Contains(rec.Errors[0], "ib_uverbs_attr.attr_data") || !strings.Contains(rec.Errors[0], k.Release) {
		t.Errorf("hand-edited field: errors %q, want one naming ib_uverbs_attr.attr_data and %s", rec.Errors, k.Release)
	}

	// A kernel whose header swapped ib_uverbs_ioctl_hdr.driver_id and
	// reserved2.
	moved := snapshotOf(t, k, func(types []btf.Type) {
		hdr := structNamed(types, "ib_uverbs_ioctl_hdr")
		m := hdr.Members[len(hdr.Members)-3:]
		if m[0].Name != "driver_id" || m[1].Name != "reserved2" {
			t.Fatalf("ib_uverbs_ioctl_hdr ends with %v", m)
		}
		m[0].Name, m[1].Name = "reserved2", "driver_id"
	})
	rec = &btfcheck.Recorder{TB: t}
	Check(rec, uverbsABI, moved, nil, layouts)
	if len(rec.Errors) != 1 || !strings.Contains(rec.Errors[0], "ib_uverbs_ioctl_hdr.driver_id") || !strings.Contains(rec.Errors[0], "9.9.9-moved") {
		t.Errorf("moved field: errors %q, want one naming ib_uverbs_ioctl_hdr.driver_id and 9.9.9-moved", rec.Errors)
	}
}

// TestCheckNotes: what a newer kernel adds is logged, not failed: trixie's
// ib_uverbs_query_port_resp_ex has active_speed_ex where bookworm keeps
// reserved bytes, so bookworm's tables checked against trixie's BTF note
// it.
func TestCheckNotes(t *testing.T) {
	kernels := fromTestdata(t)
	consts, layouts, err := Regenerate(uverbsABI, kernels["bookworm"])
	if err != nil {
		t.Fatal(err)
	}
	rec := &btfcheck.Recorder{TB: t}
	Check(rec, uverbsABI, kernels["trixie"], consts, layouts)
	if len(rec.Errors) != 0 {
		t.Errorf("errors %q", rec.Errors)
	}
	want := "struct ib_uverbs_query_port_resp_ex has active_speed_ex at byte 44"
	if !slices.ContainsFunc(rec.Logs, func(l string) bool { return strings.Contains(l, want) }) {
		t.Errorf("notes %q, want one saying %q", rec.Logs, want)
	}
}

func TestGoName(t *testing.T) {
	for c, want := range map[string]string{
		"attr_id": "AttrID", "vendor_part_id": "VendorPartID", "max_raw_ipv6_qp": "MaxRawIpv6Qp",
		"mlx5_ib_create_qp": "Mlx5IbCreateQp", "idx": "Idx", "reserved": "Reserved",
	} {
		if got := GoName(c); got != want {
			t.Errorf("GoName(%s) = %s, want %s", c, got, want)
		}
	}
}

func TestFormatValue(t *testing.T) {
	flags := []btf.EnumValue{{Value: 1}, {Value: 2}, {Value: 0x3ff00000}, {Value: 4}}
	ids := []btf.EnumValue{{Value: 0}, {Value: 1}, {Value: 0xff}}
	if !flaggy(flags) || flaggy(ids) || flaggy([]btf.EnumValue{{Value: 0x1000}}) || flaggy([]btf.EnumValue{{Value: 3}, {Value: 4}}) {
		t.Error("flaggy misjudges")
	}
	for _, c := range []struct {
		v     uint64
		flags bool
		want  string
	}{{4, true, "1 << 2"}, {0x3ff00000, true, "0x3ff00000"}, {14, false, "14"}, {0xff, false, "0xff"}, {0x1000, false, "0x1000"}} {
		if got := formatValue(c.v, false, c.flags); got != c.want {
			t.Errorf("formatValue(%#x, %v) = %s, want %s", c.v, c.flags, got, c.want)
		}
	}
}

// TestLayout: the generator pads where C pads, leaves a flexible array
// out, and refuses a layout Go cannot reproduce (a packed struct).
func TestLayout(t *testing.T) {
	u8 := &btf.Int{Name: "__u8", Size: 1}
	u32 := &btf.Int{Name: "__u32", Size: 4}
	u64 := &btf.Typedef{Name: "__aligned_u64", Type: &btf.Int{Name: "__u64", Size: 8}}
	padded := &btf.Struct{Name: "padded", Size: 24, Members: []btf.Member{
		{Name: "a", Type: u8, Offset: 0},
		{Name: "b", Type: u32, Offset: 64}, // C would put it at byte 4: explicit padding
		{Name: "c", Type: u64, Offset: 128},
		{Name: "data", Type: &btf.Array{Type: u64, Index: u32}, Offset: 192},
	}}
	packed := &btf.Struct{Name: "packed", Size: 5, Members: []btf.Member{
		{Name: "a", Type: u8, Offset: 0}, {Name: "b", Type: u32, Offset: 8},
	}}
	raw, err := Snapshot([]btf.Type{padded, packed})
	if err != nil {
		t.Fatal(err)
	}
	k, err := LoadSnapshot("bookworm", "9.9.9", "", raw)
	if err != nil {
		t.Fatal(err)
	}
	p := Package{Dir: "x", Name: "x", Files: []File{{Name: "x.go", Header: "<x.h>", Structs: []Struct{{Name: "padded"}}}}}
	out, err := Generate([]Package{p}, map[string]*Kernel{"bookworm": k, "trixie": k})
	if err != nil {
		t.Fatal(err)
	}
	src := string(out.Files["x/x.go"])
	for _, want := range []string{"_ [7]byte", "B uint32", "without its flexible data[]", "const SizeofPadded = 24"} {
		if !strings.Contains(src, want) {
			t.Errorf("generated source has no %q:\n%s", want, src)
		}
	}
	p.Files[0].Structs = []Struct{{Name: "packed"}}
	if _, err := Generate([]Package{p}, map[string]*Kernel{"bookworm": k, "trixie": k}); err == nil || !strings.Contains(err.Error(), "packed") {
		t.Errorf("a packed struct: %v, want an error saying so", err)
	}
}
