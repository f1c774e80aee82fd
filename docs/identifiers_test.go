// Package docs holds the test that keeps the documentation honest: every
// Go identifier the docs (docs/*.md, README.md) name must exist, and what
// they name as API must be API.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// module is the import path of the repository's root.
const module = "github.com/mlx5go/mlx5go"

// TestDocIdentifiers checks every Go identifier the docs name in the
// dotted forms `pkg.Name`, `pkg.Type.Member`, `Type.Member` and
// `Type.Member.Member` (a field, method, or a field of a field), in code
// spans and code blocks alike, against the repository's packages as
// go/types sees them: a renamed or removed API fails the test until its
// docs follow. `Type.A/B` names Type.A and Type.B. A name whose first
// part is neither a package of the repository nor a capitalized Go
// identifier (`ibv_post_send`, `errors.Is`, `qpc.state`) is not Go of
// this repository and is skipped, as are file names (`MODEL.md`).
//
// A name the docs offer as API must be API: in a Go code block, and in
// the first column of a table that maps rdma-core's calls (a header cell
// names rdma-core, libmlx5, libibverbs, librdmacm or mlx5dv), a name that
// is unexported, of an internal/ package or the seam (the model's
// methods that implement it too) fails the test. Prose and the other
// columns may name the internals.
func TestDocIdentifiers(t *testing.T) {
	repo := loadRepo(t)
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../README.md")
	checked := 0
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range references(string(text)) {
			if !repo.lookable(ref.parts) {
				continue
			}
			checked++
			switch {
			case !repo.resolves(ref.parts):
				t.Errorf("%s:%d: `%s` names no Go identifier of the repository", filepath.Base(doc), ref.line, strings.Join(ref.parts, "."))
			case ref.api && !repo.public(ref.parts):
				t.Errorf("%s:%d: `%s` is named as API (%s) but is internal: unexported, in an internal/ package, or the seam", filepath.Base(doc), ref.line, strings.Join(ref.parts, "."), ref.where())
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d identifiers checked: the extraction is broken", checked)
	}
}

// TestDocIdentifiersCatchInternals: a name in an API position (the
// mlx5go column of a table that maps rdma-core's calls, a Go code block)
// must be one a user can call; elsewhere the docs may describe the
// internals by name.
func TestDocIdentifiersCatchInternals(t *testing.T) {
	repo := loadRepo(t)
	mapping := func(cell string) string {
		return "| mlx5go | rdma-core |\n| --- | --- |\n| " + cell + " | `ibv_foo` |\n"
	}
	for _, c := range []struct {
		text string
		api  bool // the name is in an API position
		ok   bool // and may be
	}{
		{mapping("`Context.CreateQP`"), true, true},
		{mapping("`mlx5.QP.PostSend`, `CQ.Poll`"), true, true},
		{mapping("`Context.Caps.SQD2RTS`"), true, true},
		{mapping("`mlx5test.Open`"), true, true},
		{mapping("`model.Options.NoDEVX`"), true, true},
		{mapping("`seam.EventChannel`"), true, false},      // an internal package
		{mapping("`AsyncCmdFD.Next`"), true, false},        // a type of one
		{mapping("`Device.NewEventChannel`"), true, false}, // the seam, as the model implements it
		{mapping("`QP.complete`"), true, false},            // unexported
		{mapping("`mlx5abi.Mlx5IbCreateQp`"), true, false}, // internal
		{"| seam | libmlx5 |\n| --- | --- |\n| `seam.Verbs` | x |\n", true, false},
		{"```go\nx := seam.Device(nil)\n```\n", true, false},
		{"```go\nc, err := mlx5test.Open(\"cx7\")\nqp, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeRC})\n```\n", true, true},
		{"| mlx5go | rdma-core |\n| --- | --- |\n| `CQ.Poll` | `seam.Device` |\n", true, true}, // seam.Device: not the API column
		{"| rdma-core | seam |\n| --- | --- |\n| `ibv_foo` | `seam.Device` |\n", false, true},  // the first column is C
		{"| seam | what |\n| --- | --- |\n| `seam.Verbs` | x |\n", false, true},                // no rdma-core column
		{"`seam.Verbs` on a kernel context", false, true},
		{"```\nseam.Device\n```\n", false, true}, // not Go
	} {
		refs := references(c.text)
		if len(refs) == 0 {
			t.Errorf("%q: nothing extracted", c.text)
			continue
		}
		api, ok := false, true
		for _, r := range refs {
			if !repo.lookable(r.parts) {
				continue
			}
			if !repo.resolves(r.parts) {
				t.Errorf("%q: %v does not resolve", c.text, r.parts)
			}
			if r.api {
				api = true
				ok = ok && repo.public(r.parts)
			}
		}
		if api != c.api || ok != c.ok {
			t.Errorf("%q: in an API position %v, public %v; want %v, %v", c.text, api, ok, c.api, c.ok)
		}
	}
}

// TestDocIdentifiersCatchRenames: the check finds a name that is not
// there, and finds the names that are, in each form.
func TestDocIdentifiersCatchRenames(t *testing.T) {
	repo := loadRepo(t)
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{"`Context.CreateQP`", true},
		{"`mlx5.QP.PostSend`", true},
		{"`Context.Caps.SQD2RTS`", true},
		{"`prm.Qpc.DrainSigerr`", true},
		{"`seam.Verbs.DriverContext`", true},
		{"`DevxObj.Query/Modify`", true},
		{"`CQ.Poll(wc)`", true},
		{"`model.State*`", true},
		{"`prm.MLX5_CMD_STAT_...`", true},
		{"`mlx5.Example_signaturePipelining`", true},
		{"`model.NoSuchPrefix*`", false},
		{"`Context.QueryObj`", false},
		{"`DevxObj.Query/Destroy`", false},
		{"`mlx5.NoSuchThing`", false},
		{"`QPOptions.NoSuchField`", false},
	} {
		refs := references(c.text)
		if len(refs) == 0 {
			t.Errorf("%s: nothing extracted", c.text)
			continue
		}
		ok := true
		for _, r := range refs {
			if !repo.lookable(r.parts) {
				t.Errorf("%s: %v skipped", c.text, r.parts)
			}
			ok = ok && repo.resolves(r.parts)
		}
		if ok != c.ok {
			t.Errorf("%s: resolves %v, want %v", c.text, ok, c.ok)
		}
	}
	for _, skip := range []string{"`ibv_post_send`", "`errors.Is`", "`docs/MODEL.md`", "`qpc.drain_sigerr`", "`mlx5_ifc.h`"} {
		for _, r := range references(skip) {
			if repo.lookable(r.parts) {
				t.Errorf("%s: %v is checked, want it skipped", skip, r.parts)
			}
		}
	}
}

// ref is a dotted name found in a doc, split at its dots.
type ref struct {
	parts []string
	line  int
	// api: the name is in an API position, where the doc offers it as
	// what a user calls: the first column of a table that maps
	// rdma-core's calls (mapTable), or a Go code block. goCode tells
	// which.
	api, goCode bool
}

func (r ref) where() string {
	if r.goCode {
		return "in a Go code block"
	}
	return "in the mlx5go column of a table that maps rdma-core's calls"
}

var (
	codeSpan = regexp.MustCompile("`+([^`]+)`+")
	// dotted is a chain of identifiers joined by dots, with an optional
	// `/Alt` for its last part, not preceded by a path or a dot.
	// A trailing `*` or `...` names a family by its prefix
	// (`model.State*`, `prm.MLX5_CMD_STAT_...`).
	dotted = regexp.MustCompile(`(^|[^A-Za-z0-9_./-])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)((?:/[A-Za-z_][A-Za-z0-9_]*)*)(\*|\.\.\.)?`)
	// fileExt are the last parts that make a dotted name a file name.
	fileExt = map[string]bool{"md": true, "go": true, "c": true, "h": true, "py": true, "json": true, "jsonl": true,
		"diff": true, "txt": true, "sh": true, "s": true, "mod": true, "sum": true, "test": true, "ko": true, "deb": true}
	// mapTable matches the header of a table that maps the C libraries'
	// calls to mlx5go's: its first column is what a user calls instead.
	mapTable = regexp.MustCompile(`(?i)\|\s*(rdma-core|libmlx5|libibverbs|librdmacm|mlx5dv|libibumad)\s*\|`)
)

// references extracts the dotted names of the code spans and code blocks
// of a markdown text, marking those in an API position.
func references(text string) []ref {
	var out []ref
	api, goCode := false, false
	add := func(code string, line int) {
		for _, m := range dotted.FindAllStringSubmatch(code, -1) {
			parts := strings.Split(m[2], ".")
			if fileExt[parts[len(parts)-1]] {
				continue
			}
			if m[4] != "" {
				parts[len(parts)-1] += "*"
			}
			out = append(out, ref{parts: parts, line: line, api: api, goCode: goCode})
			if m[3] != "" {
				for _, alt := range strings.Split(m[3][1:], "/") {
					p := append(append([]string(nil), parts[:len(parts)-1]...), alt)
					out = append(out, ref{parts: p, line: line, api: api, goCode: goCode})
				}
			}
		}
	}
	inBlock := false
	inTable, mapping := false, false // in a table; its header maps rdma-core
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence, ok := strings.CutPrefix(trimmed, "```"); ok {
			inBlock = !inBlock
			goCode = inBlock && strings.TrimSpace(fence) == "go"
			continue
		}
		if inBlock {
			api = goCode
			add(line, i+1)
			continue
		}
		api, goCode = false, false
		row := strings.HasPrefix(trimmed, "|")
		if row && !inTable {
			mapping = mapTable.MatchString(trimmed + "|")
		}
		inTable = row
		if row && mapping {
			// The first cell is the API column; the rest is not.
			if cells := strings.SplitN(trimmed, "|", 3); len(cells) == 3 {
				api = true
				for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
					add(m[1], i+1)
				}
				api = false
				line = cells[2]
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			add(m[1], i+1)
		}
	}
	return out
}

// repo is the repository's packages, type-checked.
type repo struct {
	byName map[string][]*types.Package // by package name
	all    []*types.Package
	files  map[string][]*ast.File // each package's non-test files, by import path
	// examples are the Example functions of each package's tests (go doc
	// shows them; `mlx5.Example_signaturePipelining`).
	examples map[string]map[string]bool
	seam     map[string]bool // seamMethods
}

// lookable reports whether a dotted name is one the check is for: its
// first part is a package of the repository, or a capitalized identifier
// that is not a C name (no underscore, not all capitals unless short).
func (r *repo) lookable(parts []string) bool {
	first := parts[0]
	if len(r.byName[first]) > 0 {
		return true
	}
	if !token.IsExported(first) || strings.Contains(first, "_") {
		return false
	}
	return true
}

// resolves reports whether some package of the repository has the name.
func (r *repo) resolves(parts []string) bool {
	if pkgs := r.byName[parts[0]]; len(pkgs) > 0 {
		if len(parts) == 2 && r.examples[parts[0]][parts[1]] {
			return true
		}
		for _, p := range pkgs {
			if prefix, ok := strings.CutSuffix(parts[1], "*"); ok && len(parts) == 2 {
				for _, n := range p.Scope().Names() {
					if strings.HasPrefix(n, prefix) {
						return true
					}
				}
				continue
			}
			if obj := p.Scope().Lookup(parts[1]); obj != nil && members(obj.Type(), p, parts[2:]) {
				return true
			}
		}
		return false
	}
	for _, p := range r.all {
		obj := p.Scope().Lookup(parts[0])
		if _, ok := obj.(*types.TypeName); ok && members(obj.Type(), p, parts[1:]) {
			return true
		}
	}
	return false
}

// public reports whether a name resolves to an identifier a user of the
// repository can call: in a package that is not internal/, exported all
// along, and not the seam (internal/seam, or a method by which a package
// of seamImplementations implements it, as model.Device.NewEventChannel
// does).
func (r *repo) public(parts []string) bool {
	api := func(p *types.Package) bool { return !strings.Contains(p.Path()+"/", "/internal/") }
	for _, n := range parts {
		if !token.IsExported(strings.TrimSuffix(n, "*")) && r.byName[n] == nil {
			return false
		}
	}
	if pkgs := r.byName[parts[0]]; len(pkgs) > 0 {
		for _, p := range pkgs {
			if !api(p) {
				continue
			}
			if len(parts) == 2 && r.examples[parts[0]][parts[1]] {
				return true
			}
			if prefix, ok := strings.CutSuffix(parts[1], "*"); ok && len(parts) == 2 {
				for _, n := range p.Scope().Names() {
					if strings.HasPrefix(n, prefix) && token.IsExported(n) {
						return true
					}
				}
				continue
			}
			if obj := p.Scope().Lookup(parts[1]); obj != nil && obj.Exported() && r.publicMembers(obj.Type(), p, parts[2:]) {
				return true
			}
		}
		return false
	}
	for _, p := range r.all {
		obj := p.Scope().Lookup(parts[0])
		if _, ok := obj.(*types.TypeName); ok && api(p) && r.publicMembers(obj.Type(), p, parts[1:]) {
			return true
		}
	}
	return false
}

// publicMembers is members for public: each name exported, and no
// method of the seam implemented by a package of seamImplementations.
func (r *repo) publicMembers(typ types.Type, pkg *types.Package, names []string) bool {
	return walkMembers(typ, pkg, names, func(obj types.Object) bool {
		if !obj.Exported() {
			return false
		}
		_, isFunc := obj.(*types.Func)
		return !isFunc || !seamImplementations[obj.Pkg().Path()] || !r.seamMethods()[obj.Name()]
	})
}

// seamMethods are the method names of internal/seam's interfaces.
func (r *repo) seamMethods() map[string]bool {
	if r.seam != nil {
		return r.seam
	}
	r.seam = map[string]bool{}
	for _, p := range r.byName["seam"] {
		for _, n := range p.Scope().Names() {
			if it, ok := p.Scope().Lookup(n).Type().Underlying().(*types.Interface); ok {
				for i := 0; i < it.NumMethods(); i++ {
					r.seam[it.Method(i).Name()] = true
				}
			}
		}
	}
	return r.seam
}

// members reports whether each name is a field or method of the type of
// the one before it, from typ.
func members(typ types.Type, pkg *types.Package, names []string) bool {
	return walkMembers(typ, pkg, names, func(types.Object) bool { return true })
}

// walkMembers reports whether each name is a field or method of the type
// of the one before it, from typ, and ok accepts it.
func walkMembers(typ types.Type, pkg *types.Package, names []string, ok func(types.Object) bool) bool {
	for _, n := range names {
		obj, _, _ := types.LookupFieldOrMethod(typ, true, pkg, n)
		if obj == nil || !ok(obj) {
			return false
		}
		typ = obj.Type()
		if sig, ok := typ.(*types.Signature); ok {
			// A method's result, for `QP.Caps.MaxSendWR`-like chains.
			if sig.Results().Len() == 0 {
				typ = types.NewStruct(nil, nil)
			} else {
				typ = sig.Results().At(0).Type()
			}
		}
	}
	return true
}

// loadRepo parses and type-checks every package of the repository (its
// non-test files). Packages outside it are empty stand-ins: what uses
// them does not type-check, and the errors are ignored, but every
// declaration of the repository is there with its fields and methods.
func loadRepo(t *testing.T) *repo {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string][]*ast.File{} // by import path
	examples := map[string]map[string]bool{}
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != ".." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, "_test.go") {
			pkg := strings.TrimSuffix(f.Name.Name, "_test")
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
					if examples[pkg] == nil {
						examples[pkg] = map[string]bool{}
					}
					examples[pkg][fn.Name.Name] = true
				}
			}
			return nil
		}
		rel, err := filepath.Rel("..", filepath.Dir(p))
		if err != nil {
			return err
		}
		ip := module
		if rel != "." {
			ip = path.Join(module, filepath.ToSlash(rel))
		}
		files[ip] = append(files[ip], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &repo{byName: map[string][]*types.Package{}, examples: examples, files: files}
	done := map[string]*types.Package{}
	var imp importerFunc
	imp = func(ip string) (*types.Package, error) {
		if p, ok := done[ip]; ok {
			return p, nil
		}
		fs, ok := files[ip]
		if !ok {
			p := types.NewPackage(ip, path.Base(ip))
			p.MarkComplete()
			done[ip] = p
			return p, nil
		}
		conf := types.Config{Importer: imp, Error: func(error) {}}
		p, _ := conf.Check(ip, fset, fs, nil)
		done[ip] = p
		return p, nil
	}
	paths := make([]string, 0, len(files))
	for ip := range files {
		paths = append(paths, ip)
	}
	sort.Strings(paths)
	for _, ip := range paths {
		p, _ := imp(ip)
		if p.Name() == "main" {
			continue
		}
		r.all = append(r.all, p)
		r.byName[p.Name()] = append(r.byName[p.Name()], p)
	}
	return r
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// TestDocIdentifiersCoverSections: TestDocIdentifiers reads the sections
// of docs/MLX5.md on events, timestamps and CQ moderation and resize (the
// acceptance of issue 26): each holds identifiers it resolves, at least
// min of them, so a section the extraction skipped fails here.
func TestDocIdentifiersCoverSections(t *testing.T) {
	repo := loadRepo(t)
	text, err := os.ReadFile("MLX5.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	refs := references(string(text))
	for _, sec := range []struct {
		heading string
		min     int
	}{{"## Event channels", 12}, {"### Completion timestamps", 10}, {"### CQ moderation and resize", 5}, {"## Events and QP states", 5}} {
		level := strings.IndexByte(sec.heading, ' ')
		start, end := -1, len(lines)
		for i, l := range lines {
			if start < 0 && l == sec.heading {
				start = i + 1 // 1-based line of the heading
				continue
			}
			if start >= 0 && strings.HasPrefix(l, "#") && strings.IndexByte(l, ' ') <= level {
				end = i
				break
			}
		}
		if start < 0 {
			t.Errorf("MLX5.md has no section %q", sec.heading)
			continue
		}
		n := 0
		for _, r := range refs {
			if r.line > start && r.line <= end && repo.lookable(r.parts) && repo.resolves(r.parts) {
				n++
			}
		}
		if n < sec.min {
			t.Errorf("%q (lines %d to %d): %d identifiers checked, want at least %d", sec.heading, start, end, n, sec.min)
		}
		t.Logf("%q: %d identifiers checked", sec.heading, n)
	}
}
