package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// goNamed are the packages whose API must speak Go names only (go doc
// shows no C-named identifier): what users import to drive the device.
// Others (prm, wqe, sig) mirror the PRM and keep its names on purpose.
var goNamed = map[string]bool{module + "/uverbs": true, module + "/mlx5": true, module + "/mlx5test": true, module + "/ucma": true, module + "/cm": true}

// cName matches a C-named identifier: one with an underscore
// (IB_UVERBS_ACCESS_LOCAL_WRITE, RDMA_NL_GET_TYPE), or a struct mirror's
// CamelCase of a C tag (IbUverbsAttr, Mlx5IbCreateQp).
var cName = regexp.MustCompile(`_|^(IbUverbs|Mlx5Ib|Mlx5Eqe|RdmaNl)`)

// seamImplementations are public packages whose exported methods are
// internal/seam's interface, which they implement: package model is the
// software ConnectX behind seam.Device. Users reach it through mlx5test,
// which takes and returns only public types.
var seamImplementations = map[string]bool{module + "/model": true}

// TestPublicAPI: no exported declaration of a public package (one that is
// not internal/ nor a command) refers to an internal package, so that
// every function and method can be called, every field set and every
// type named by the package's users (mlx5.NewContext took a seam.Device,
// which no user can make); and in uverbs, ucma, mlx5, cm and mlx5test no exported
// declaration is or refers to a C-named identifier. Declarations are what
// go doc shows: exported names, function signatures, exported fields and
// interface methods, constants' types and values. Function bodies,
// unexported fields and comments are not.
func TestPublicAPI(t *testing.T) {
	r := loadRepo(t)
	var problems []string
	for ip, files := range r.files {
		if strings.Contains(ip+"/", "/internal/") || seamImplementations[ip] {
			continue
		}
		for _, f := range files {
			if f.Name.Name == "main" {
				break
			}
			problems = append(problems, apiProblems(ip, f)...)
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// apiProblems lists what file f of package ip exports that it must not.
func apiProblems(ip string, f *ast.File) []string {
	internal := map[string]string{} // local name -> internal import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if !strings.Contains(p+"/", "/internal/") {
			continue
		}
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		internal[name] = p
	}
	var out []string
	report := func(decl string, n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok {
					if p, ok := internal[x.Name]; ok {
						out = append(out, fmt.Sprintf("%s: %s uses %s.%s of internal package %s", ip, decl, x.Name, n.Sel.Name, p))
						return false
					}
				}
				if goNamed[ip] && cName.MatchString(n.Sel.Name) {
					out = append(out, fmt.Sprintf("%s: %s shows C-named %s", ip, decl, n.Sel.Name))
				}
				return false
			case *ast.Ident:
				if goNamed[ip] && n.Name != "_" && cName.MatchString(n.Name) {
					out = append(out, fmt.Sprintf("%s: %s shows C-named %s", ip, decl, n.Name))
				}
			}
			return true
		})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Recv != nil && !exportedRecv(d.Recv) {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil {
				name = recvName(d.Recv) + "." + name
			}
			report(name, d.Name)
			report(name, d.Type)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					report(s.Name.Name, s.Name)
					report(s.Name.Name, exportedPart(s.Type))
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if !n.IsExported() {
							continue
						}
						report(n.Name, n)
						if s.Type != nil {
							report(n.Name, s.Type)
						}
						for _, v := range s.Values {
							report(n.Name, v)
						}
					}
				}
			}
		}
	}
	return out
}

// exportedPart is a type expression without the unexported fields of its
// struct (go doc does not show them).
func exportedPart(e ast.Expr) ast.Node {
	st, ok := e.(*ast.StructType)
	if !ok {
		return e
	}
	var fields []*ast.Field
	for _, f := range st.Fields.List {
		exported := len(f.Names) == 0 // embedded: shown
		for _, n := range f.Names {
			exported = exported || n.IsExported()
		}
		if exported {
			fields = append(fields, f)
		}
	}
	return &ast.StructType{Struct: st.Struct, Fields: &ast.FieldList{List: fields}}
}

func recvName(fl *ast.FieldList) string {
	t := fl.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

func exportedRecv(fl *ast.FieldList) bool { return token.IsExported(recvName(fl)) }

// TestPublicAPICatches is the negative control of TestPublicAPI: a
// function taking an internal type and C-named declarations are found.
func TestPublicAPICatches(t *testing.T) {
	src := `package mlx5
import (
	"github.com/mlx5go/mlx5go/internal/seam"
	abi "github.com/mlx5go/mlx5go/internal/uverbsabi"
)
func NewContext(dev seam.Device) *Context { return nil }
func (c *Context) hidden(dev seam.Device) {}
type Context struct {
	dev  seam.Device
	Attr abi.IbUverbsAttr
}
const IB_UVERBS_ACCESS_LOCAL_WRITE = 1
const AccessLocalWrite = IB_UVERBS_ACCESS_LOCAL_WRITE
type Mlx5IbCreateQp struct{}
`
	f, err := parseSource(src)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(apiProblems(module+"/mlx5", f), "\n")
	for _, want := range []string{
		"NewContext uses seam.Device of internal package",
		"Context uses abi.IbUverbsAttr of internal package",
		"IB_UVERBS_ACCESS_LOCAL_WRITE shows C-named IB_UVERBS_ACCESS_LOCAL_WRITE",
		"AccessLocalWrite shows C-named IB_UVERBS_ACCESS_LOCAL_WRITE",
		"Mlx5IbCreateQp shows C-named Mlx5IbCreateQp",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems do not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "hidden") || strings.Contains(got, "dev seam") {
		t.Errorf("unexported declarations reported:\n%s", got)
	}
}

func parseSource(src string) (*ast.File, error) {
	return parser.ParseFile(token.NewFileSet(), "api.go", src, parser.SkipObjectResolution)
}
