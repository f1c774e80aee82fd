// Package abigen generates mlx5go's mirrors of the kernel's uverbs and
// mlx5 ABI (internal/uverbsabi, internal/mlx5abi) from the kernel's BTF:
// for every C enum and struct the spec (spec.go) lists, Go constants with
// the kernel's names and a Go struct with structs.HostLayout, fields in C
// order and the C layout, one file per header; and beside them the tables
// the lab's BTF check compares with each kernel it boots
// (internal/btfcheck's rules, docs/LAB.md).
//
// internal/cmd/abigen runs it on Debian's kernels and writes the files and
// a snapshot of the BTF it read (testdata/), from which the unit test
// regenerates them; the lab's tests regenerate the files from the booted
// kernel's BTF and report what that kernel would change. Facts BTF does
// not hold (macros, anonymous enums) stay hand-written in the packages.
package abigen

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"math/bits"
	"path"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// Output is what Generate writes: file contents by path (relative to the
// repository root), and per suite the BTF types of every declaration of
// the spec as that kernel has them, for the snapshot.
type Output struct {
	Files map[string][]byte
	Used  map[string][]btf.Type
}

// Generate writes every package of pkgs from the kernels' BTF. kernels is
// keyed by suite and must hold every suite of Kernels.
func Generate(pkgs []Package, kernels map[string]*Kernel) (*Output, error) {
	out := &Output{Files: map[string][]byte{}, Used: map[string][]btf.Type{}}
	for _, p := range pkgs {
		g := &generator{pkg: p, kernels: kernels, structs: map[string]*goStruct{}, used: map[string][]btf.Type{}}
		if err := g.run(out.Files); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Dir, err)
		}
		// Every declaration from every kernel, so that the snapshot of
		// each can regenerate the whole package (Regenerate).
		for _, suite := range Kernels {
			g := &generator{lenient: true, pkg: p, kernels: only(kernels[suite]), structs: map[string]*goStruct{}, used: map[string][]btf.Type{}}
			if _, err := g.build(); err != nil {
				return nil, fmt.Errorf("%s from %s: %w", p.Dir, suite, err)
			}
			out.Used[suite] = append(out.Used[suite], g.used[suite]...)
		}
	}
	return out, nil
}

// only maps every suite to k: a package built from one kernel.
func only(k *Kernel) map[string]*Kernel {
	m := map[string]*Kernel{}
	for _, s := range Kernels {
		m[s] = k
	}
	return m
}

type generator struct {
	// lenient lays a nested struct the spec does not list out as bytes
	// (regenerating from a newer kernel, whose extensible structs may
	// nest new ones), instead of failing.
	lenient bool
	pkg     Package
	kernels map[string]*Kernel
	structs map[string]*goStruct // by C name, as built
	spec    map[string]Struct    // by C name, every struct of the package
	used    map[string][]btf.Type
}

// goEnum is a C enum with the values generated.
type goEnum struct {
	spec   Enum
	values []btf.EnumValue
	signed bool
}

// goStruct is a C struct as Go lays it out.
type goStruct struct {
	c, name     string
	spec        Struct
	kernel      *Kernel
	size, align uint32
	fields      []goField
	flexible    string // a trailing flexible array member left out
	flexOff     uint32
}

// goField is one Go field: a C member, or padding (name "_").
type goField struct {
	name        string
	typ         string    // Go type
	inline      *goStruct // an anonymous struct type, laid out inline
	c           string    // the C member's name ("" for padding)
	also        []string  // other members of a union at these bytes
	off         uint32
	size, align uint32
	comment     string
}

// fileModel is one file's declarations, as built from BTF.
type fileModel struct {
	file    File
	enums   []goEnum
	structs []*goStruct
}

// build reads every declaration of the package from BTF, reporting
// everything it cannot generate at once.
func (g *generator) build() ([]fileModel, error) {
	g.spec = map[string]Struct{}
	for _, f := range g.pkg.Files {
		for _, s := range f.Structs {
			g.spec[s.Name] = s
		}
	}
	var out []fileModel
	var errs []error
	for _, f := range g.pkg.Files {
		fm := fileModel{file: f}
		for _, e := range f.Enums {
			ge, err := g.enum(e)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			fm.enums = append(fm.enums, ge)
		}
		for _, s := range f.Structs {
			gs, err := g.structOf(s.Name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			fm.structs = append(fm.structs, gs)
		}
		out = append(out, fm)
	}
	return out, errors.Join(errs...)
}

func (g *generator) run(files map[string][]byte) error {
	fms, err := g.build()
	if err != nil {
		return err
	}
	var consts []goEnum
	var layouts []*goStruct
	for _, fm := range fms {
		src, err := g.render(fm.file, fm.enums, fm.structs)
		if err != nil {
			return fmt.Errorf("%s: %w", fm.file.Name, err)
		}
		files[path.Join(g.pkg.Dir, fm.file.Name)] = src
		consts = append(consts, fm.enums...)
		layouts = append(layouts, fm.structs...)
	}
	src, err := g.renderTables(consts, layouts)
	if err != nil {
		return err
	}
	files[path.Join(g.pkg.Dir, TablesFile)] = src
	return nil
}

// TablesFile is the generated test file of each package holding the BTF
// check's tables: every generated constant and struct layout, as Go
// compiled them.
const TablesFile = "generated_btf_test.go"

func (g *generator) kernel(suite string) (*Kernel, error) {
	if suite == "" {
		suite = Kernels[0]
	}
	k := g.kernels[suite]
	if k == nil {
		return nil, fmt.Errorf("no BTF of %s", suite)
	}
	return k, nil
}

func (g *generator) enum(e Enum) (goEnum, error) {
	k, err := g.kernel("")
	if err != nil {
		return goEnum{}, err
	}
	t, err := k.findEnum(g.pkg.Modules, e.Name)
	if err != nil {
		return goEnum{}, err
	}
	g.used[k.Suite] = append(g.used[k.Suite], t)
	ge := goEnum{spec: e, signed: t.Signed}
	if len(e.Only) == 0 {
		ge.values = t.Values
		if n := len(ge.values); n > 0 && counts(ge.values[n-1].Name) {
			ge.values = ge.values[:n-1]
		}
		return ge, nil
	}
	for _, name := range e.Only {
		found := false
		for _, v := range t.Values {
			if v.Name == name {
				ge.values = append(ge.values, v)
				found = true
			}
		}
		if !found {
			return goEnum{}, fmt.Errorf("enum %s of %s has no %s", e.Name, k.Describe(), name)
		}
	}
	return ge, nil
}

// counts reports whether an enum's last enumerator is its count
// (RDMA_NLDEV_ATTR_MAX, RDMA_NLDEV_NUM_OPS), which grows with every kernel
// that adds a value: it is not generated.
func counts(name string) bool {
	return strings.HasSuffix(name, "_MAX") || strings.HasSuffix(name, "_NUM_OPS")
}

// structOf builds the Go layout of struct name, which the spec must list
// (a struct nests only structs that are generated too).
func (g *generator) structOf(name string) (*goStruct, error) {
	if gs := g.structs[name]; gs != nil {
		return gs, nil
	}
	s, ok := g.spec[name]
	if !ok {
		return nil, fmt.Errorf("struct %s is used but not in the spec of %s", name, g.pkg.Dir)
	}
	k, err := g.kernel(s.Kernel)
	if err != nil {
		return nil, err
	}
	st, err := k.findStruct(g.pkg.Modules, name)
	if err != nil {
		return nil, err
	}
	g.used[k.Suite] = append(g.used[k.Suite], st)
	gs := &goStruct{c: name, name: GoName(name), spec: s, kernel: k}
	if err := g.layout(gs, st.Members, st.Size); err != nil {
		return nil, fmt.Errorf("struct %s of %s: %w", name, k.Describe(), err)
	}
	g.structs[name] = gs
	return gs, nil
}

// layout lays members out as Go fields, with explicit padding where C has
// it, and checks that Go's offsets and size are C's.
func (g *generator) layout(gs *goStruct, members []btf.Member, size uint32) error {
	var fields []goField
	if err := g.members(&fields, members, 0, len(members)); err != nil {
		return err
	}
	if n := len(fields); n > 0 && fields[n-1].c != "" && fields[n-1].size == 0 && fields[n-1].typ == "flexible" {
		gs.flexible, gs.flexOff = fields[n-1].c, fields[n-1].off
		fields = fields[:n-1]
	}
	var off, align uint32 = 0, 1
	for _, f := range fields {
		at := alignUp(off, f.align)
		switch {
		case at > f.off:
			return fmt.Errorf("%s: Go would place it at byte %d, C has it at %d (a packed struct)", f.c, at, f.off)
		case at < f.off:
			gs.fields = append(gs.fields, pad(off, f.off-off))
		}
		gs.fields = append(gs.fields, f)
		off = f.off + f.size
		align = max(align, f.align)
	}
	if alignUp(off, align) < size {
		gs.fields = append(gs.fields, pad(off, size-off))
		off = size
	}
	if alignUp(off, align) != size {
		return fmt.Errorf("its size in Go would be %d bytes, in C it is %d", alignUp(off, align), size)
	}
	gs.size, gs.align = size, align
	return nil
}

func pad(off, n uint32) goField {
	return goField{name: "_", typ: fmt.Sprintf("[%d]byte", n), off: off, size: n, align: 1}
}

func alignUp(v, a uint32) uint32 { return (v + a - 1) / a * a }

// members appends the Go fields of C members (at byte base), flattening
// anonymous structs as C does.
func (g *generator) members(fields *[]goField, ms []btf.Member, base uint32, n int) error {
	for i, m := range ms {
		if m.BitfieldSize != 0 || m.Offset%8 != 0 {
			return fmt.Errorf("%s: bitfields are not generated", m.Name)
		}
		off := base + uint32(m.Offset/8)
		t := skipQualifiers(m.Type)
		if arr, ok := btf.UnderlyingType(t).(*btf.Array); ok && arr.Nelems == 0 {
			if i != n-1 {
				return fmt.Errorf("%s: a zero-length array not at the end", m.Name)
			}
			*fields = append(*fields, goField{c: m.Name, typ: "flexible", off: off})
			continue
		}
		switch u := btf.UnderlyingType(t).(type) {
		case *btf.Struct:
			if m.Name == "" {
				if err := g.members(fields, u.Members, off, -1); err != nil {
					return err
				}
				continue
			}
		case *btf.Union:
			f, err := g.union(m, u, off)
			if err != nil {
				return err
			}
			*fields = append(*fields, f)
			continue
		}
		f, err := g.field(m.Name, t)
		if err != nil {
			return err
		}
		f.off = off
		*fields = append(*fields, f)
	}
	return nil
}

// union is a union member as one Go field: the first member that fills
// it and is not a struct (an integer or array), named by the union member
// if it has a name, else by that member; a union no such member fills is
// bytes.
func (g *generator) union(m btf.Member, u *btf.Union, off uint32) (goField, error) {
	var names []string
	for _, um := range u.Members {
		names = append(names, um.Name)
	}
	for _, um := range u.Members {
		t := skipQualifiers(um.Type)
		switch btf.UnderlyingType(t).(type) {
		case *btf.Struct, *btf.Union:
			continue
		}
		f, err := g.field(um.Name, t)
		if err != nil {
			return goField{}, err
		}
		if f.size != u.Size || um.Offset != 0 {
			continue
		}
		f.off = off
		if m.Name != "" {
			f.name, f.c = GoName(m.Name), m.Name
			f.comment = describeUnion(u, m.Name, names)
			return f, nil
		}
		for _, other := range u.Members {
			if other.Name != um.Name && other.Name != "" && other.Offset == 0 {
				if sz, err := btf.Sizeof(other.Type); err == nil && uint32(sz) == u.Size {
					f.also = append(f.also, other.Name)
				}
			}
		}
		f.comment = "union with " + strings.Join(f.also, ", ")
		return f, nil
	}
	if m.Name == "" {
		return goField{}, fmt.Errorf("an anonymous union of %s with no member of its size", strings.Join(names, ", "))
	}
	return goField{name: GoName(m.Name), c: m.Name, typ: fmt.Sprintf("[%d]byte", u.Size), off: off, size: u.Size, align: 1,
		comment: describeUnion(u, m.Name, names)}, nil
}

// describeUnion names a union member's union and, if they are few, its
// members.
func describeUnion(u *btf.Union, member string, names []string) string {
	s := "union " + member
	if u.Name != "" {
		s = "union " + u.Name
	}
	if len(names) <= 4 {
		s += ": " + strings.Join(names, ", ")
	}
	return s
}

// field maps a member's C type to Go.
func (g *generator) field(name string, t btf.Type) (goField, error) {
	f := goField{name: GoName(name), c: name}
	typ, size, align, inline, comment, err := g.goType(t)
	if err != nil {
		return goField{}, fmt.Errorf("%s: %w", name, err)
	}
	f.typ, f.size, f.align, f.inline, f.comment = typ, size, align, inline, comment
	return f, nil
}

// bigEndian are the kernel's big-endian typedefs; Go keeps them as their
// bytes, so that nobody reads them in host order by mistake.
var bigEndian = map[string]uint32{"__be16": 2, "__be32": 4, "__be64": 8}

func skipQualifiers(t btf.Type) btf.Type {
	for {
		switch q := t.(type) {
		case *btf.Volatile:
			t = q.Type
		case *btf.Const:
			t = q.Type
		case *btf.Restrict:
			t = q.Type
		case *btf.TypeTag:
			t = q.Type
		default:
			return t
		}
	}
}

func (g *generator) goType(t btf.Type) (typ string, size, align uint32, inline *goStruct, comment string, err error) {
	t = skipQualifiers(t)
	switch v := t.(type) {
	case *btf.Typedef:
		if n, ok := bigEndian[v.Name]; ok {
			return fmt.Sprintf("[%d]byte", n), n, 1, nil, "big-endian", nil
		}
		return g.goType(v.Type)
	case *btf.Int:
		if v.Size != 1 && v.Size != 2 && v.Size != 4 && v.Size != 8 {
			return "", 0, 0, nil, "", fmt.Errorf("%d-byte integer", v.Size)
		}
		typ = fmt.Sprintf("uint%d", 8*v.Size)
		if v.Encoding&btf.Signed != 0 {
			typ = typ[1:]
		}
		return typ, v.Size, v.Size, nil, "", nil
	case *btf.Enum:
		typ = fmt.Sprintf("uint%d", 8*v.Size)
		if v.Signed {
			typ = typ[1:]
		}
		comment = "enum"
		if v.Name != "" {
			comment += " " + v.Name
		}
		return typ, v.Size, v.Size, nil, comment, nil
	case *btf.Array:
		et, es, ea, _, ec, err := g.goType(v.Type)
		if err != nil {
			return "", 0, 0, nil, "", err
		}
		if ec == "big-endian" {
			ec = "big-endian elements"
		}
		return fmt.Sprintf("[%d]%s", v.Nelems, et), es * v.Nelems, ea, nil, ec, nil
	case *btf.Struct:
		if _, listed := g.spec[v.Name]; v.Name != "" && !listed && g.lenient {
			return fmt.Sprintf("[%d]byte", v.Size), v.Size, 1, nil, "struct " + v.Name, nil
		}
		if v.Name != "" {
			gs, err := g.structOf(v.Name)
			if err != nil {
				return "", 0, 0, nil, "", err
			}
			return gs.name, gs.size, gs.align, nil, "", nil
		}
		gs := &goStruct{}
		if err := g.layout(gs, v.Members, v.Size); err != nil {
			return "", 0, 0, nil, "", err
		}
		return "struct", gs.size, gs.align, gs, "", nil
	}
	return "", 0, 0, nil, "", fmt.Errorf("type %s is not generated", t)
}

// GoName is the Go name of a C identifier: each word capitalised, the
// underscores dropped, "id" written ID (attr_id: AttrID).
func GoName(c string) string {
	var b strings.Builder
	for _, p := range strings.Split(c, "_") {
		switch {
		case p == "":
		case p == "id":
			b.WriteString("ID")
		default:
			b.WriteString(strings.ToUpper(p[:1]) + p[1:])
		}
	}
	return b.String()
}

// header is the first line of every generated file (go/ast.IsGenerated).
func (g *generator) header(kernels []*Kernel) string {
	var ks []string
	for _, k := range kernels {
		ks = append(ks, k.Release)
	}
	return fmt.Sprintf("// Code generated by internal/cmd/abigen from the BTF of Linux %s. DO NOT EDIT.\n\n", strings.Join(ks, " and "))
}

func (g *generator) render(f File, enums []goEnum, structs []*goStruct) ([]byte, error) {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	kernels := g.kernelsOf(structs, len(enums) > 0)
	p("%s", g.header(kernels))
	p("package %s\n\n", g.pkg.Name)
	if len(structs) > 0 {
		p("import \"structs\"\n\n")
	}
	what := "the uapi header " + f.Header
	if f.Internal {
		what = "the kernel-internal header " + f.Header
	}
	intro := fmt.Sprintf("Mirrors of %s: the enums and structs of it that mlx5go uses, with the kernel's names, from the BTF of %s", what, kernels[0].Describe())
	for _, k := range kernels[1:] {
		var from []string
		for _, s := range structs {
			if s.kernel == k {
				from = append(from, s.c)
			}
		}
		intro += fmt.Sprintf("; %s from %s", strings.Join(from, ", "), k.Describe())
	}
	p("%s\n", comment(intro+"."))
	for _, e := range enums {
		doc := "enum " + e.spec.Name + "."
		if len(e.spec.Only) > 0 {
			doc += " The values mlx5go uses."
		}
		if e.spec.Doc != "" {
			doc += " " + e.spec.Doc
		}
		p("%s", comment(doc))
		p("const (\n")
		flags := flaggy(e.values)
		for _, v := range e.values {
			p("\t%s = %s\n", v.Name, formatValue(v.Value, e.signed, flags))
		}
		p(")\n\n")
	}
	for _, s := range structs {
		doc := fmt.Sprintf("%s is struct %s", s.name, s.c)
		if s.flexible != "" {
			doc += " without its flexible " + s.flexible + "[]"
		}
		doc += "."
		if s.spec.Doc != "" {
			doc += " " + s.spec.Doc
		}
		p("%s", comment(doc))
		p("type %s %s\n\n", s.name, structType(s))
		p("// Sizeof%s is sizeof(struct %s).\nconst Sizeof%[1]s = %[3]d\n\n", s.name, s.c, s.size)
	}
	return format.Source(b.Bytes())
}

// kernelsOf lists the kernels a file's declarations come from, the oldest
// first (always: enums are read from it).
func (g *generator) kernelsOf(structs []*goStruct, enums bool) []*Kernel {
	var out []*Kernel
	for _, suite := range Kernels {
		k := g.kernels[suite]
		used := suite == Kernels[0]
		for _, s := range structs {
			used = used || s.kernel == k
		}
		if used {
			out = append(out, k)
		}
	}
	return out
}

func structType(s *goStruct) string {
	var b strings.Builder
	b.WriteString("struct {\n\t_ structs.HostLayout\n")
	for _, f := range s.fields {
		typ := f.typ
		if f.inline != nil {
			typ = structType(f.inline)
		}
		fmt.Fprintf(&b, "\t%s %s", f.name, typ)
		if f.comment != "" {
			fmt.Fprintf(&b, " // %s", f.comment)
		}
		b.WriteString("\n")
	}
	b.WriteString("}")
	return b.String()
}

// comment wraps text as a Go comment of lines up to 76 characters.
func comment(text string) string {
	var b strings.Builder
	line := "//"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 76 && line != "//" {
			b.WriteString(line + "\n")
			line = "//"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
	return b.String()
}

// flaggy reports whether an enum's values are flag bits: none zero, most
// powers of two, starting low.
func flaggy(vs []btf.EnumValue) bool {
	pow2, least := 0, ^uint64(0)
	for _, v := range vs {
		if v.Value == 0 {
			return false
		}
		if bits.OnesCount64(v.Value) == 1 {
			pow2++
		}
		least = min(least, v.Value)
	}
	return 2*pow2 > len(vs) && least <= 8
}

func formatValue(v uint64, signed, flags bool) string {
	switch {
	case signed && int64(v) < 0:
		return fmt.Sprint(int64(v))
	case flags && bits.OnesCount64(v) == 1:
		return fmt.Sprintf("1 << %d", bits.TrailingZeros64(v))
	case flags || v >= 0x80:
		return fmt.Sprintf("%#x", v)
	}
	return fmt.Sprint(v)
}

// renderTables writes the package's check tables: btfcheck.Const and
// btfcheck.Layout entries whose values and offsets are the Go
// declarations' (so a hand-edited file fails the check), naming the C
// enumerators and members; reserved members are left out (a later kernel
// may give them a meaning mlx5go does not use).
func (g *generator) renderTables(enums []goEnum, structs []*goStruct) ([]byte, error) {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	var all []*Kernel
	for _, s := range Kernels {
		all = append(all, g.kernels[s])
	}
	p("%s", g.header(all))
	p("package %s\n\n", g.pkg.Name)
	p("import (\n\t\"slices\"\n\t\"testing\"\n\t\"unsafe\"\n\n")
	p("\t\"github.com/mlx5go/mlx5go/internal/abigen\"\n\t\"github.com/mlx5go/mlx5go/internal/btfcheck\"\n\t\"github.com/mlx5go/mlx5go/internal/labenv\"\n)\n\n")
	p("%s", comment("TestLabBTFGenerated checks the package against the booted kernel's BTF (internal/abigen.Check): the generated enums and structs below and the package's hand-written handConsts (the anonymous enums BTF keeps) under internal/btfcheck's rules, then the package regenerated from that kernel, whose additions are logged."))
	p("func TestLabBTFGenerated(t *testing.T) {\n\tlabenv.Require(t)\n")
	p("\tabigen.CheckRunningKernel(t, %q, slices.Concat(generatedConsts, handConsts), generatedLayouts)\n}\n\n", g.pkg.Dir)
	p("%s", comment("TestGeneratedLayouts checks, without the lab, that Go lays the generated structs out as the kernel they were generated from does and that the constants are its values (internal/abigen.CheckSnapshot, the BTF snapshot in internal/abigen/testdata)."))
	p("func TestGeneratedLayouts(t *testing.T) {\n")
	p("\tabigen.CheckSnapshot(t, %q, %q, generatedConsts, generatedLayouts)\n}\n\n", g.pkg.Dir, path.Join(strings.Repeat("../", strings.Count(g.pkg.Dir, "/")+1), TestdataDir))
	p("// generatedConsts are the generated enumerators, for the lab's BTF check.\n")
	p("var generatedConsts = []btfcheck.Const{\n")
	for _, e := range enums {
		for _, v := range e.values {
			if e.signed && int64(v.Value) < 0 {
				return nil, fmt.Errorf("enum %s: %s is negative", e.spec.Name, v.Name)
			}
			p("\t{Enum: %q, Name: %q, Value: %s},\n", e.spec.Name, v.Name, v.Name)
		}
	}
	p("}\n\n")
	p("// generatedLayouts are the generated structs as Go lays them out, for\n// the lab's BTF check.\n")
	p("var generatedLayouts = []btfcheck.Layout{\n")
	for _, s := range structs {
		zero := s.name + "{}"
		p("\t{Struct: %q, Size: unsafe.Sizeof(%s)", s.c, zero)
		if s.spec.Extensible {
			p(", Extensible: true")
		}
		p(", Fields: []btfcheck.Field{\n")
		for _, f := range s.tableFields() {
			p("\t\t{Name: %q, Offset: %s", f.c, f.goOff)
			if f.newer {
				p(", Newer: true")
			}
			p("},\n")
		}
		p("\t}},\n")
	}
	p("}\n")
	return format.Source(b.Bytes())
}

// tableField is a check table's entry for one C member: its path, its
// offset as a Go expression and in C, and whether it is newer than the
// oldest kernel.
type tableField struct {
	c, goOff string
	off      uint32
	newer    bool
}

// tableFields lists the struct's members for the check tables: every
// member but padding and reserved bytes (a later kernel may give those a
// meaning mlx5go does not use), the members of an inline struct too, the
// other members of a union at the same bytes, and a flexible array at the
// end.
func (s *goStruct) tableFields() []tableField {
	newer := map[string]bool{}
	for _, n := range s.spec.Newer {
		newer[n] = true
	}
	zero := s.name + "{}"
	var out []tableField
	var walk func(gs *goStruct, cPrefix, goBase string, base uint32)
	walk = func(gs *goStruct, cPrefix, goBase string, base uint32) {
		for _, f := range gs.fields {
			if f.c == "" || reserved(f.c) {
				continue
			}
			off := "unsafe.Offsetof(" + zero + goBase + "." + f.name + ")"
			if goBase != "" {
				off = "unsafe.Offsetof(" + zero + goBase + ") + " + off
			}
			for _, c := range append([]string{f.c}, f.also...) {
				out = append(out, tableField{c: cPrefix + c, goOff: off, off: base + f.off, newer: newer[cPrefix+c]})
			}
			if f.inline != nil {
				walk(f.inline, cPrefix+f.c+".", goBase+"."+f.name, base+f.off)
			}
		}
	}
	walk(s, "", "", 0)
	if s.flexible != "" {
		off := fmt.Sprint(s.flexOff)
		if s.flexOff == s.size {
			off = "unsafe.Sizeof(" + zero + ")"
		}
		out = append(out, tableField{c: s.flexible, goOff: off, off: s.flexOff})
	}
	return out
}

// reserved reports whether a C member is reserved bytes.
func reserved(c string) bool {
	return strings.HasPrefix(c, "reserved") || strings.HasPrefix(c, "rsvd")
}
