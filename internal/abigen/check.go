package abigen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
)

// PackageOf returns the spec of the generated package in dir (e.g.
// internal/uverbsabi).
func PackageOf(dir string) (Package, error) {
	for _, p := range Packages {
		if p.Dir == dir {
			return p, nil
		}
	}
	return Package{}, fmt.Errorf("abigen: no generated package %s", dir)
}

// Regenerate builds p from k's BTF as the generator would for that kernel
// (every struct from k, whatever suite the spec names) and returns it as
// check tables: the kernel's enumerators with their values, and its
// structs' sizes and member offsets, named as the generated tables name
// them. An error is something of p the generator cannot build from k.
func Regenerate(p Package, k *Kernel) ([]btfcheck.Const, []btfcheck.Layout, error) {
	g := &generator{lenient: true, pkg: p, kernels: only(k), structs: map[string]*goStruct{}, used: map[string][]btf.Type{}}
	fms, err := g.build()
	if err != nil {
		return nil, nil, err
	}
	var consts []btfcheck.Const
	var layouts []btfcheck.Layout
	for _, fm := range fms {
		for _, e := range fm.enums {
			for _, v := range e.values {
				consts = append(consts, btfcheck.Const{Enum: e.spec.Name, Name: v.Name, Value: v.Value})
			}
		}
		for _, s := range fm.structs {
			l := btfcheck.Layout{Struct: s.c, Size: uintptr(s.size), Extensible: s.spec.Extensible}
			for _, f := range s.tableFields() {
				l.Fields = append(l.Fields, btfcheck.Field{Name: f.c, Offset: uintptr(f.off), Newer: f.newer})
			}
			layouts = append(layouts, l)
		}
	}
	return consts, layouts, nil
}

// Check is the BTF check of a generated package against kernel k: the
// package's constants and layouts as Go compiled them (its generated
// tables, and any hand-written constants in consts too) under
// internal/btfcheck's rules, which fail naming the field and the kernel;
// then the package regenerated from k's BTF, compared with the tables:
// what k has that the generated files do not (new enumerators, new
// members) is logged, for whoever regenerates them next, and a
// declaration the generator cannot build from k fails.
func Check(t testing.TB, p Package, k *Kernel, consts []btfcheck.Const, layouts []btfcheck.Layout) {
	t.Helper()
	modules := p.Modules
	if k.specs[snapshotModule] != nil {
		modules = []string{snapshotModule}
	}
	var specs []*btf.Spec
	var names []string
	for _, m := range modules {
		if s := k.specs[m]; s != nil {
			specs = append(specs, s)
			names = append(names, m)
		}
	}
	s := btfcheck.FromSpec(strings.Join(names, "+")+" of "+k.Release, specs...)
	btfcheck.CheckConsts(t, s, consts)
	btfcheck.CheckLayouts(t, s, layouts)

	rc, rl, err := Regenerate(p, k)
	if err != nil {
		t.Errorf("regenerating %s from the BTF of %s: %v", p.Dir, k.Describe(), err)
		return
	}
	for _, note := range newIn(consts, layouts, rc, rl) {
		t.Logf("%s: %s", k.Describe(), note)
	}
}

// newIn lists what the regenerated tables have that the committed ones do
// not.
func newIn(consts []btfcheck.Const, layouts []btfcheck.Layout, rc []btfcheck.Const, rl []btfcheck.Layout) []string {
	var out []string
	have := map[string]bool{}
	for _, c := range consts {
		have[c.Name] = true
	}
	for _, c := range rc {
		if !have[c.Name] {
			out = append(out, fmt.Sprintf("enum %s has %s = %#x, which the generated files do not", c.Enum, c.Name, c.Value))
		}
	}
	fields := map[string]map[string]bool{}
	for _, l := range layouts {
		fields[l.Struct] = map[string]bool{}
		for _, f := range l.Fields {
			fields[l.Struct][f.Name] = true
		}
	}
	for _, l := range rl {
		for _, f := range l.Fields {
			if fields[l.Struct] != nil && !fields[l.Struct][f.Name] {
				out = append(out, fmt.Sprintf("struct %s has %s at byte %d, which the generated files do not", l.Struct, f.Name, f.Offset))
			}
		}
	}
	return out
}

// CheckRunningKernel is the kernel lab's BTF check of the generated
// package in dir (Check, against the running kernel's BTF).
func CheckRunningKernel(t testing.TB, dir string, consts []btfcheck.Const, layouts []btfcheck.Layout) {
	t.Helper()
	p, err := PackageOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	k, err := RunningKernel(p.Modules)
	if err != nil {
		t.Fatal(err)
	}
	Check(t, p, k, consts, layouts)
}

// CheckSnapshot compares a generated package's tables (its generated
// constants and layouts as Go compiled them) with the package
// regenerated from the committed BTF snapshot (testdata, the directory
// internal/cmd/abigen wrote), exactly: every constant's value, every
// struct's size and every member's offset is the generating kernel's. It
// needs no lab, and fails on a hand-edited generated file whose tables
// still compile.
func CheckSnapshot(t testing.TB, dir, testdata string, consts []btfcheck.Const, layouts []btfcheck.Layout) {
	t.Helper()
	p, err := PackageOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	kernels, err := LoadTestdata(testdata)
	if err != nil {
		t.Fatal(err)
	}
	suiteOf := map[string]string{}
	for _, f := range p.Files {
		for _, s := range f.Structs {
			suiteOf[s.Name] = s.Kernel
			if s.Kernel == "" {
				suiteOf[s.Name] = Kernels[0]
			}
		}
	}
	want := map[string]btfcheck.Layout{}
	var wantConsts []btfcheck.Const
	for _, suite := range Kernels {
		rc, rl, err := Regenerate(p, kernels[suite])
		if err != nil {
			t.Fatalf("regenerating %s from the snapshot of %s: %v", dir, suite, err)
		}
		if suite == Kernels[0] {
			wantConsts = rc
		}
		for _, l := range rl {
			if suiteOf[l.Struct] == suite {
				want[l.Struct] = l
			}
		}
	}
	if got, w := constsText(consts), constsText(wantConsts); got != w {
		t.Errorf("%s: the generated constants are not the snapshot's:\n%s", dir, lineDiff(got, w))
	}
	if len(layouts) != len(want) {
		t.Errorf("%s: %d generated layouts, the spec has %d structs", dir, len(layouts), len(want))
	}
	for _, l := range layouts {
		w, ok := want[l.Struct]
		if !ok {
			t.Errorf("%s: struct %s is not in the spec", dir, l.Struct)
			continue
		}
		if got, w := layoutText(l), layoutText(w); got != w {
			t.Errorf("%s: Go's layout of struct %s is not the snapshot's (%s):\n%s", dir, l.Struct, kernels[suiteOf[l.Struct]].Describe(), lineDiff(got, w))
		}
	}
}

func constsText(cs []btfcheck.Const) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "enum %s: %s = %#x\n", c.Enum, c.Name, c.Value)
	}
	return b.String()
}

func layoutText(l btfcheck.Layout) string {
	var b strings.Builder
	fmt.Fprintf(&b, "struct %s: %d bytes\n", l.Struct, l.Size)
	for _, f := range l.Fields {
		fmt.Fprintf(&b, "%s.%s at byte %d\n", l.Struct, f.Name, f.Offset)
	}
	return b.String()
}

// lineDiff lists the lines of got that want does not have (-) and the
// lines of want that got does not have (+), in order.
func lineDiff(got, want string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	g, w := in(got), in(want)
	var b strings.Builder
	for _, l := range strings.Split(got, "\n") {
		if l != "" && !w[l] {
			fmt.Fprintf(&b, "  Go:        %s\n", l)
		}
	}
	for _, l := range strings.Split(want, "\n") {
		if l != "" && !g[l] {
			fmt.Fprintf(&b, "  generated: %s\n", l)
		}
	}
	return b.String()
}

// stale compares a committed generated file with what the generator
// writes now, line by line, and describes the first differences.
func stale(path string, committed, generated []byte) []string {
	c, g := strings.Split(string(committed), "\n"), strings.Split(string(generated), "\n")
	var out []string
	for i := 0; i < max(len(c), len(g)) && len(out) < 3; i++ {
		var cl, gl string
		if i < len(c) {
			cl = c[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if cl != gl {
			out = append(out, fmt.Sprintf("%s:%d: committed %q, generated %q (run go run ./internal/cmd/abigen, and do not edit generated files)", path, i+1, cl, gl))
		}
	}
	return out
}
