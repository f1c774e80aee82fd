package docs

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// archRow is one row of ARCHITECTURE.md's package table: the packages it
// covers and what they may import.
type archRow struct {
	pkgs     []string
	allowed  map[string]bool
	anything bool
}

var backticked = regexp.MustCompile("`([^`]+)`")

// archTable parses the package table of ARCHITECTURE.md. A row's last
// cell names what its packages may import, in backticks; "all of the
// above" is every package and import of the rows before it; "anything"
// is anything. The row's own packages may import each other, and every
// package the standard library.
func archTable(t *testing.T, text string) []archRow {
	t.Helper()
	var rows []archRow
	above := map[string]bool{}
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "| package | role | may import |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "| ---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			t.Fatalf("ARCHITECTURE.md: a table row without three cells: %s", line)
		}
		r := archRow{allowed: map[string]bool{}}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			r.pkgs = append(r.pkgs, m[1])
		}
		last := cells[len(cells)-1]
		r.anything = strings.Contains(last, "anything")
		if strings.Contains(last, "all of the above") {
			for p := range above {
				r.allowed[p] = true
			}
		}
		for _, m := range backticked.FindAllStringSubmatch(last, -1) {
			r.allowed[m[1]] = true
		}
		for _, p := range r.pkgs {
			r.allowed[p] = true
		}
		for p := range r.allowed {
			above[p] = true
		}
		rows = append(rows, r)
	}
	return rows
}

// narrow are the packages whose imports of the repository
// ARCHITECTURE.md's prose limits whatever their rows say, so that
// widening a row does not lift the rule: the model's connection manager
// reads the HCA only through its interface, and imports nothing of the
// repository but the seam's types.
var narrow = map[string][]string{
	"model/internal/rdmacm": {"internal/seam"},
}

// TestArchitectureImports: ARCHITECTURE.md's package table describes the
// code as it is. Every package of the repository with non-test files is
// in it, and imports only what its row allows (besides the standard
// library); a package of narrow imports of the repository only what
// narrow lists.
func TestArchitectureImports(t *testing.T) {
	text, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range archProblems(t, loadRepo(t), string(text), narrow) {
		t.Error(p)
	}
}

func archProblems(t *testing.T, r *repo, text string, narrow map[string][]string) []string {
	rows := archTable(t, text)
	rowOf := map[string]*archRow{}
	for i := range rows {
		for _, p := range rows[i].pkgs {
			rowOf[p] = &rows[i]
		}
	}
	var out []string
	for ip, files := range r.files {
		pkg := strings.TrimPrefix(strings.TrimPrefix(ip, module), "/")
		if len(files) == 0 || pkg == "" {
			continue
		}
		row := rowOf[pkg]
		if row == nil {
			out = append(out, "ARCHITECTURE.md's package table has no row for "+pkg)
			continue
		}
		if row.anything {
			continue
		}
		seen := map[string]bool{}
		for _, f := range files {
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				name := strings.TrimPrefix(p, module+"/")
				first := strings.Split(p, "/")[0]
				std := !strings.Contains(first, ".")
				if std || seen[name] {
					continue
				}
				if only, ok := narrow[pkg]; ok && strings.HasPrefix(p, module+"/") && !slices.Contains(only, name) {
					seen[name] = true
					out = append(out, pkg+" imports "+name+": ARCHITECTURE.md allows it only "+strings.Join(only, ", ")+" of the repository")
					continue
				}
				if row.allowed[name] {
					continue
				}
				seen[name] = true
				out = append(out, pkg+" imports "+name+", which its row of ARCHITECTURE.md's package table does not allow")
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestArchitectureImportsCatches is the negative control: a package
// missing from the table, an import its row does not allow, and an
// import narrow does not allow that the row does are found.
func TestArchitectureImportsCatches(t *testing.T) {
	r := loadRepo(t)
	text := "| package | role | may import |\n| --- | --- | --- |\n" +
		"| `prm` | layouts | standard library |\n" +
		"| `uverbs` | verbs | `golang.org/x/sys/unix`, `internal/netlink` |\n" +
		"| `model/internal/rdmacm` | the model's CM | `internal/seam`, `golang.org/x/sys/unix` |\n"
	got := strings.Join(archProblems(t, r, text, map[string][]string{"model/internal/rdmacm": {"prm"}}), "\n")
	for _, want := range []string{
		"uverbs imports internal/uverbsabi, which its row",
		"no row for mlx5",
		"model/internal/rdmacm imports internal/seam: ARCHITECTURE.md allows it only prm",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems do not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "prm imports") {
		t.Errorf("prm, which imports only the standard library, is reported:\n%s", got)
	}
}
