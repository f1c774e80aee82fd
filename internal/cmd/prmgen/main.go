// Command prmgen generates prm/ifc.go, the PRM layout tables and constants
// of package prm, from the kernel's include/linux/mlx5/mlx5_ifc.h and
// device.h (Debian's linux-headers-*-common), plus the few fields listed in
// spec.go that the kernel's header leaves reserved. Only layouts and values
// are taken from the headers, never their comments.
//
//	go generate ./prm
//	go run ./internal/cmd/prmgen -include /usr/src/linux-headers-6.1.0-56-common/include -o prm/ifc.go
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	include := flag.String("include", "", "kernel include directory holding linux/mlx5/mlx5_ifc.h (default: the newest /usr/src/linux-headers-*-common/include)")
	out := flag.String("o", "ifc.go", "output file")
	flag.Parse()
	if err := run(*include, *out); err != nil {
		fmt.Fprintln(os.Stderr, "prmgen:", err)
		os.Exit(1)
	}
}

func run(include, out string) error {
	if include == "" {
		var err error
		if include, err = FindInclude(); err != nil {
			return err
		}
	}
	src, err := Generate(include)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

// FindInclude returns the kernel include directory to read: the one
// $MLX5GO_KERNEL_INCLUDE names (scripts/test fetches the headers of the
// kernel the lab boots there), else that of the newest installed
// linux-headers-*-common package.
func FindInclude() (string, error) {
	if d := os.Getenv("MLX5GO_KERNEL_INCLUDE"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "linux/mlx5/mlx5_ifc.h")); err != nil {
			return "", fmt.Errorf("MLX5GO_KERNEL_INCLUDE=%s: %w", d, err)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/src/linux-headers-*-common/include")
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "linux/mlx5/mlx5_ifc.h")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", fmt.Errorf("no /usr/src/linux-headers-*-common/include/linux/mlx5/mlx5_ifc.h: apt-get install linux-headers-amd64, or pass -include")
	}
	sort.Slice(found, func(i, j int) bool { return versionLess(found[i], found[j]) })
	return found[len(found)-1], nil
}

// versionLess orders paths with embedded numbers numerically
// (6.1.0-9 before 6.1.0-56).
func versionLess(a, b string) bool {
	num := regexp.MustCompile(`\d+|\D+`)
	pa, pb := num.FindAllString(a, -1), num.FindAllString(b, -1)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		if ea == nil && eb == nil {
			return na < nb
		}
		return pa[i] < pb[i]
	}
	return len(pa) < len(pb)
}

// Generate reads the headers under include and returns the formatted Go
// source of prm/ifc.go.
func Generate(include string) ([]byte, error) {
	ifc, err := os.ReadFile(filepath.Join(include, "linux/mlx5/mlx5_ifc.h"))
	if err != nil {
		return nil, err
	}
	dev, err := os.ReadFile(filepath.Join(include, "linux/mlx5/device.h"))
	if err != nil {
		return nil, err
	}
	// mlx5_ifc.h includes mlx5_ifc_fpga.h, whose structs it nests.
	fpga, err := os.ReadFile(filepath.Join(include, "linux/mlx5/mlx5_ifc_fpga.h"))
	if err != nil {
		return nil, err
	}
	h := parseHeader(string(ifc) + "\n" + string(fpga))
	layouts, err := buildLayouts(h)
	if err != nil {
		return nil, err
	}
	var groups []enumGroup
	for _, e := range enums {
		text := string(ifc)
		if e.Header == "device" {
			text = string(dev)
		}
		g, err := parseEnum(text, e.Enum, e.Prefix)
		if err != nil {
			return nil, err
		}
		groups = append(groups, g)
	}
	for _, c := range extraConsts {
		if regexp.MustCompile(`\b` + c.Name + `\b`).MatchString(string(ifc) + string(dev)) {
			return nil, fmt.Errorf("%s is now in the kernel's headers: drop it from extraConsts", c.Name)
		}
	}
	return emit(layouts, groups)
}

// member is one member of a C struct in mlx5_ifc.h.
type member struct {
	Name  string
	Bits  uint32 // width of one element (u8 arrays: the field's width)
	Count uint32 // elements; 1 for a scalar, 0 for a flexible array
	Type  string // nested mlx5_ifc_TYPE_bits, "" for u8
}

type cstruct struct {
	Union   bool
	Members []member
	err     error
}

var (
	structRE = regexp.MustCompile(`(?ms)^(struct|union) mlx5_ifc_(\w+?)(?:_bits)? \{\n(.*?)^\};`)
	u8RE     = regexp.MustCompile(`^u8\s+(\w+)((?:\[\w*\])+);$`)
	nestedRE = regexp.MustCompile(`^(?:struct|union) mlx5_ifc_(\w+?)(?:_bits)?\s+(\w+)((?:\[\w*\])?);$`)
	dimRE    = regexp.MustCompile(`\[(\w*)\]`)
)

func parseHeader(text string) map[string]*cstruct {
	h := map[string]*cstruct{}
	for _, m := range structRE.FindAllStringSubmatch(text, -1) {
		s := &cstruct{Union: m[1] == "union"}
		for _, line := range strings.Split(m[3], "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			if err := s.add(line); err != nil && s.err == nil {
				s.err = fmt.Errorf("mlx5_ifc_%s_bits: %v", m[2], err)
			}
		}
		h[m[2]] = s
	}
	return h
}

func (s *cstruct) add(line string) error {
	if m := u8RE.FindStringSubmatch(line); m != nil {
		var dims []uint32
		for _, d := range dimRE.FindAllStringSubmatch(m[2], -1) {
			n := uint64(0)
			if d[1] != "" {
				var err error
				if n, err = strconv.ParseUint(d[1], 0, 32); err != nil {
					return fmt.Errorf("%q: %v", line, err)
				}
			}
			dims = append(dims, uint32(n))
		}
		switch len(dims) {
		case 1:
			s.Members = append(s.Members, member{Name: m[1], Bits: dims[0], Count: 1})
		case 2:
			s.Members = append(s.Members, member{Name: m[1], Bits: dims[1], Count: dims[0]})
		default:
			return fmt.Errorf("%q: unexpected dimensions", line)
		}
		return nil
	}
	if m := nestedRE.FindStringSubmatch(line); m != nil {
		count := uint64(1)
		if m[3] != "" {
			var err error
			if m[3] == "[]" {
				count = 0
			} else if count, err = strconv.ParseUint(strings.Trim(m[3], "[]"), 0, 32); err != nil {
				return fmt.Errorf("%q: %v", line, err)
			}
		}
		s.Members = append(s.Members, member{Name: m[2], Type: m[1], Count: uint32(count)})
		return nil
	}
	return fmt.Errorf("cannot parse %q", line)
}

// sizeOf returns the size in bits of mlx5_ifc_NAME_bits.
func sizeOf(h map[string]*cstruct, name string, depth int) (uint32, error) {
	s, ok := h[name]
	if !ok {
		return 0, fmt.Errorf("mlx5_ifc_%s_bits not found", name)
	}
	if s.err != nil {
		return 0, s.err
	}
	if depth > 16 {
		return 0, fmt.Errorf("mlx5_ifc_%s_bits: nesting too deep", name)
	}
	var size uint32
	for _, m := range s.Members {
		w, err := memberBits(h, m, depth)
		if err != nil {
			return 0, err
		}
		if s.Union {
			size = max(size, w)
		} else {
			size += w
		}
	}
	return size, nil
}

func memberBits(h map[string]*cstruct, m member, depth int) (uint32, error) {
	if m.Type == "" {
		return m.Bits * m.Count, nil
	}
	sz, err := sizeOf(h, m.Type, depth+1)
	return sz * m.Count, err
}

// Field and Layout mirror prm's types.
type Field struct {
	Name       string
	Off, Width uint32
	Type       string
	Src        string // "" for the kernel's own fields
}

type Layout struct {
	Name   string
	Bits   uint32
	Kernel uint32 // bits in the kernel's header, 0 for extraStructs
	Fields []Field
	Src    string // "" for the kernel's structs
	// Partial: an extraStructs entry that later kernels define with
	// other fields, so that its own fields are checked one by one.
	Partial bool
}

func buildLayouts(h map[string]*cstruct) ([]Layout, error) {
	extraStruct := map[string]int{}
	for i, e := range extraStructs {
		extraStruct[e.Name] = i
	}
	var out []Layout
	seen := map[string]bool{}
	for _, name := range structs {
		if seen[name] {
			return nil, fmt.Errorf("%s listed twice", name)
		}
		seen[name] = true
		var l Layout
		var reserved []Field
		if i, ok := extraStruct[name]; ok {
			if _, inKernel := h[name]; inKernel {
				return nil, fmt.Errorf("mlx5_ifc_%s_bits is now in the kernel's header: drop it from extraStructs", name)
			}
			e := extraStructs[i]
			l = Layout{Name: name, Bits: e.Bits, Src: e.Fields[0].Src, Partial: e.Partial}
			reserved = []Field{{Name: "reserved", Off: 0, Width: e.Bits}}
		} else {
			s, ok := h[name]
			if !ok {
				return nil, fmt.Errorf("mlx5_ifc_%s_bits not found in mlx5_ifc.h", name)
			}
			if s.Union {
				return nil, fmt.Errorf("mlx5_ifc_%s_bits is a union; list structs only", name)
			}
			bits, err := sizeOf(h, name, 0)
			if err != nil {
				return nil, err
			}
			l = Layout{Name: name, Bits: bits, Kernel: bits}
			var off uint32
			for _, m := range s.Members {
				w, _ := memberBits(h, m, 0)
				f := Field{Name: m.Name, Off: off, Width: w, Type: m.Type}
				off += w
				if strings.HasPrefix(m.Name, "reserved") {
					reserved = append(reserved, f)
					continue
				}
				l.Fields = append(l.Fields, f)
			}
		}
		var adds []extra
		if i, ok := extraStruct[name]; ok {
			adds = extraStructs[i].Fields
		}
		for _, e := range extras {
			if e.Struct == name {
				adds = append(adds, e)
			}
		}
		for _, e := range adds {
			widened := false
			for i, f := range l.Fields {
				if f.Name != e.Name {
					continue
				}
				// A newer definition may widen a field the kernel names,
				// at the same start, into the reserved bits after it.
				if f.Off != e.Off || e.Width <= f.Width || f.Type != e.Type {
					return nil, fmt.Errorf("%s.%s is now in the kernel's header: drop it from extras", name, e.Name)
				}
				if !inReserved(reserved, f.Off+f.Width, e.Width-f.Width) {
					return nil, fmt.Errorf("%s.%s widened to %#x bits overlaps a field the kernel names", name, e.Name, e.Width)
				}
				reserved = splitReserved(reserved, f.Off+f.Width, e.Width-f.Width)
				l.Fields[i].Width, l.Fields[i].Src = e.Width, e.Src
				widened = true
			}
			if widened {
				continue
			}
			if e.Type != "" {
				sz, err := sizeOf(h, e.Type, 0)
				if _, ok := extraStruct[e.Type]; ok {
					sz, err = extraStructs[extraStruct[e.Type]].Bits, nil
				}
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %v", name, e.Name, err)
				}
				if sz != e.Width {
					return nil, fmt.Errorf("%s.%s: width %#x, but %s has %#x bits", name, e.Name, e.Width, e.Type, sz)
				}
			}
			inReserved := inReserved(reserved, e.Off, e.Width)
			if !inReserved && e.Off < l.Bits {
				return nil, fmt.Errorf("%s.%s at %#x+%#x overlaps a field the kernel names", name, e.Name, e.Off, e.Width)
			}
			if !inReserved && e.Off != l.Bits {
				return nil, fmt.Errorf("%s.%s at %#x leaves a gap after the struct's end %#x", name, e.Name, e.Off, l.Bits)
			}
			if !inReserved {
				l.Bits = e.Off + e.Width
				reserved = append(reserved, Field{Name: "reserved", Off: e.Off, Width: e.Width})
			}
			// The new field takes its place out of the reserved range.
			reserved = splitReserved(reserved, e.Off, e.Width)
			l.Fields = append(l.Fields, Field{Name: e.Name, Off: e.Off, Width: e.Width, Type: e.Type, Src: e.Src})
		}
		sort.SliceStable(l.Fields, func(i, j int) bool { return l.Fields[i].Off < l.Fields[j].Off })
		if l.Bits%32 != 0 {
			return nil, fmt.Errorf("%s: %d bits is not a whole number of dwords", name, l.Bits)
		}
		out = append(out, l)
	}
	for _, e := range extras {
		if !seen[e.Struct] {
			return nil, fmt.Errorf("extra %s.%s: %s is not listed", e.Struct, e.Name, e.Struct)
		}
	}
	return out, nil
}

// inReserved reports whether the bits [off, off+width) lie inside one of
// the reserved ranges rs.
func inReserved(rs []Field, off, width uint32) bool {
	for _, r := range rs {
		if r.Off <= off && off+width <= r.Off+r.Width {
			return true
		}
	}
	return false
}

func splitReserved(rs []Field, off, width uint32) []Field {
	var out []Field
	for _, r := range rs {
		if off+width <= r.Off || r.Off+r.Width <= off {
			out = append(out, r)
			continue
		}
		if r.Off < off {
			out = append(out, Field{Name: r.Name, Off: r.Off, Width: off - r.Off})
		}
		if off+width < r.Off+r.Width {
			out = append(out, Field{Name: r.Name, Off: off + width, Width: r.Off + r.Width - off - width})
		}
	}
	return out
}

type enumValue struct {
	Name  string
	Value uint64
}

type enumGroup struct {
	Enum   string // tag, "" for anonymous
	Prefix string
	Values []enumValue
}

var enumLineRE = regexp.MustCompile(`^(\w+)\s*(?:=\s*(\w+))?\s*,?$`)

// parseEnum reads one C enum: "enum TAG" or the anonymous enum whose first
// enumerator is first. Enumerators without a value count up; comments and
// blank lines are skipped; an enumerator not starting with prefix (the
// enum's terminator) ends nothing but is left out.
func parseEnum(text, first, prefix string) (enumGroup, error) {
	g := enumGroup{Prefix: prefix}
	var start int
	if tag, ok := strings.CutPrefix(first, "enum "); ok {
		g.Enum = tag
		start = strings.Index(text, "\nenum "+tag+" {\n")
		if start < 0 {
			return g, fmt.Errorf("enum %s not found", tag)
		}
		start += len("\nenum " + tag + " {\n")
	} else {
		re := regexp.MustCompile(`\nenum \{\n\s*` + regexp.QuoteMeta(first) + `\b`)
		loc := re.FindStringIndex(text)
		if loc == nil {
			return g, fmt.Errorf("anonymous enum starting with %s not found", first)
		}
		start = strings.Index(text[loc[0]:], "{\n") + loc[0] + 2
	}
	end := strings.Index(text[start:], "};")
	if end < 0 {
		return g, fmt.Errorf("enum %s: no end", first)
	}
	body := regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(text[start:start+end], "")
	next := uint64(0)
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m := enumLineRE.FindStringSubmatch(line)
		if m == nil {
			return g, fmt.Errorf("enum %s: cannot parse %q", first, line)
		}
		v := next
		if m[2] != "" {
			var err error
			if v, err = strconv.ParseUint(m[2], 0, 64); err != nil {
				return g, fmt.Errorf("enum %s: %q: %v", first, line, err)
			}
		}
		next = v + 1
		if !strings.HasPrefix(m[1], prefix) || m[1] == prefix+"MAX" || m[1] == prefix+"NUM" {
			continue
		}
		g.Values = append(g.Values, enumValue{m[1], v})
	}
	return g, nil
}

// goName turns a C member name into a Go identifier: log_max_qp -> LogMaxQp.
func goName(c string) string {
	var b strings.Builder
	for _, p := range strings.Split(c, "_") {
		if p == "" {
			continue
		}
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	s := b.String()
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "F" + s
	}
	return s
}

func emit(layouts []Layout, groups []enumGroup) ([]byte, error) {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("// Code generated by prmgen from the kernel's linux/mlx5/mlx5_ifc.h and device.h and internal/cmd/prmgen/spec.go. DO NOT EDIT.\n\n")
	p("package prm\n\n")

	for _, g := range groups {
		switch {
		case g.Prefix == "MLX5_CMD_STAT_":
			p("// Command status values (MLX5_CMD_STAT_*), the status byte of every output\n// mailbox.\nconst (\n")
			for _, v := range g.Values {
				p("\t%s Status = %#x\n", v.Name, v.Value)
			}
			p(")\n\n")
			p("var statusNames = [...]struct {\n\tStatus Status\n\tName   string\n}{\n")
			for _, v := range g.Values {
				p("\t{%s, %q},\n", v.Name, strings.TrimPrefix(v.Name, g.Prefix))
			}
			p("}\n\n")
		case g.Prefix == "MLX5_CMD_OP_":
			p("// Command opcodes (MLX5_CMD_OP_*), the opcode field of every input mailbox.\nconst (\n")
			for _, v := range g.Values {
				p("\t%s = %#x\n", v.Name, v.Value)
			}
			p(")\n\n")
			vals := append([]enumValue(nil), g.Values...)
			sort.SliceStable(vals, func(i, j int) bool { return vals[i].Value < vals[j].Value })
			p("// opcodeNames is sorted by opcode; where two names share an opcode the\n// first in the kernel's enum is kept.\n")
			p("var opcodeNames = [...]struct {\n\tOp   uint16\n\tName string\n}{\n")
			for i, v := range vals {
				if i > 0 && vals[i-1].Value == v.Value {
					continue
				}
				p("\t{%s, %q},\n", v.Name, strings.TrimPrefix(v.Name, g.Prefix))
			}
			p("}\n\n")
		default:
			if g.Enum != "" {
				p("// enum %s.\n", g.Enum)
			}
			p("const (\n")
			for _, v := range g.Values {
				p("\t%s = %#x\n", v.Name, v.Value)
			}
			p(")\n\n")
		}
	}

	if len(extraConsts) > 0 {
		p("// Constants the lab kernel's headers do not define, with their source.\nconst (\n")
		for _, c := range extraConsts {
			p("\t%s = %#x // from %s\n", c.Name, c.Value, c.Src)
		}
		p(")\n\n")
	}

	for _, l := range layouts {
		tn := goName(l.Name) + "Bits"
		vn := goName(l.Name)
		lv := "layout" + goName(l.Name)
		names := map[string]string{"Layout": "the Layout method"}
		src := "the kernel's mlx5_ifc.h"
		if l.Src != "" {
			src = l.Src
		}
		p("// %s is mlx5_ifc_%s_bits (%d bytes, from %s", vn, l.Name, l.Bits/8, src)
		if l.Kernel != 0 && l.Kernel != l.Bits {
			p(", whose %d bytes newer definitions extend", l.Kernel/8)
		}
		p(").\n")
		p("var %s = %s{\n", vn, tn)
		for _, f := range l.Fields {
			gn := goName(f.Name)
			if other, dup := names[gn]; dup {
				return nil, fmt.Errorf("%s: %s and %s both map to %s", l.Name, f.Name, other, gn)
			}
			names[gn] = f.Name
			p("\t%s: Field{%q, %#x, %d, %q},\n", gn, f.Name, f.Off, f.Width, f.Type)
		}
		p("}\n\n")
		p("// %s holds the fields of mlx5_ifc_%s_bits.\n", tn, l.Name)
		p("type %s struct {\n", tn)
		for _, f := range l.Fields {
			comment := ""
			if f.Src != "" && f.Src != l.Src {
				comment = " // from " + f.Src
			}
			p("\t%s Field%s\n", goName(f.Name), comment)
		}
		p("}\n\n")
		p("// Layout returns the table of mlx5_ifc_%s_bits.\n", l.Name)
		p("func (*%s) Layout() *Layout { return &%s }\n\n", tn, lv)
		p("var %s = Layout{Name: %q, Size: %d, Fields: []Field{\n", lv, l.Name, l.Bits/8)
		for _, f := range l.Fields {
			p("\t%s.%s,\n", vn, goName(f.Name))
		}
		p("}}\n\n")
	}

	p("// layouts is every declared layout, sorted by name.\nvar layouts = [...]*Layout{\n")
	sorted := append([]Layout(nil), layouts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, l := range sorted {
		p("\t&layout%s,\n", goName(l.Name))
	}
	p("}\n\n")

	p("// newer lists the structs and fields that the lab kernel's mlx5_ifc.h\n// does not name, with their source. The BTF test checks that the kernel\n// keeps their bits reserved (or ends before them).\n")
	p("var newer = [...]struct{ Struct, Field, Src string }{\n")
	for _, l := range layouts {
		if l.Src != "" {
			p("\t{%q, \"\", %q},\n", l.Name, l.Src)
			if !l.Partial {
				continue
			}
		}
		for _, f := range l.Fields {
			if f.Src != "" {
				p("\t{%q, %q, %q},\n", l.Name, f.Name, f.Src)
			}
		}
	}
	p("}\n")

	src, err := format.Source(b.Bytes())
	if err != nil {
		return b.Bytes(), fmt.Errorf("format: %v", err)
	}
	return src, nil
}
