package prm

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
)

// notInBTF are the declared structs that the lab kernel's mlx5_core and
// mlx5_ib do not use, so pahole left them out of their BTF: most command
// outputs that carry nothing but status and syndrome, and the QP context
// extension the lab kernel's header does not have. Their status, syndrome,
// opcode, uid and op_mod are checked against the generic command headers
// (mlx5_ifc_mbox_out_bits and mlx5_ifc_mbox_in_bits, in mlx5_core's BTF),
// their nested contexts (qpc, cqc, mkc) in their own right, and all their
// fields by prmgen's test against mlx5_ifc.h. The test fails if one of them
// turns up in BTF, so the list never hides a struct that can be checked.
var notInBTF = map[string]bool{
	"set_issi_out": true, "query_mkey_out": true, "destroy_mkey_out": true,
	"destroy_psv_out": true, "dealloc_pd_out": true, "dealloc_uar_out": true,
	"destroy_uctx_out": true, "query_cq_out": true, "modify_cq_out": true,
	"destroy_cq_out": true, "query_qp_out": true, "destroy_qp_out": true,
	"sqd2rts_qp_out": true, "sqerr2rts_qp_out": true, "qp_2err_out": true,
	"qp_2rst_out": true, "qpc_ext": true,
	// No kernel defines these (crypto logins, and the query output of a
	// DEK); 6.1 has no crypto_cap either (6.3 and later do).
	"query_encryption_key_obj_out": true, "crypto_login_obj": true,
	"create_crypto_login_obj_in": true, "query_crypto_login_obj_out": true,
	"crypto_cap": true,
}

// grownLater are the structs a later kernel's header extends past their
// end, in bytes there: Linux 6.3 appends sw_wrapped_dek and reserved bits
// to encryption_key_obj. mlx5go sends the 6.1 size, as libmlx5 44.0
// does, and the fields it declares are checked as any others.
var grownLater = map[string]uint32{
	"encryption_key_obj":       512,
	"create_encryption_key_in": 528,
}

// knownDifferences are the fields whose place a later kernel's
// mlx5_ifc.h changed, so that the lab kernels disagree on them. mlx5go
// declares them (prm mirrors 6.1's header) but reads none of them:
// TestKnownBTFDifferencesUnread fails the day one is read, and then the
// field must follow the newer kernel (the PRM's truth) instead. On a
// kernel that has the field at Later, the check notes it and passes; any
// other difference still fails.
var knownDifferences = []struct {
	Struct, Field, Go string // Go: the selector mlx5go would read it with
	Later             btfcheck.PRMField
	Why               string
}{
	{"cmd_hca_cap", "shampo", "CmdHcaCap.Shampo", btfcheck.PRMField{Name: "shampo", Off: 0x2ab, Width: 1},
		"6.1 declares it at 0xba; 6.12 and later at 0x2ab"},
	{"cmd_hca_cap", "relaxed_ordering_read", "CmdHcaCap.RelaxedOrderingRead", btfcheck.PRMField{Name: "relaxed_ordering_read", Off: 0x32a, Width: 1},
		"6.12 and later call bit 0xe9 relaxed_ordering_read_pci_enabled and add relaxed_ordering_read at 0x32a"},
}

// TestLabBTFPRM checks every declared PRM field, bit offset and width,
// against the kernel's mlx5_ifc_*_bits types under btfcheck.MatchPRM's
// rules (a field may move into a union or nested struct or be renamed at
// the same bits; fields from rdma-core must be named by the kernel at the
// same bits or fall on bits it keeps reserved or past its struct's end),
// and every opcode, status and capability type against the kernel's
// enums.
func TestLabBTFPRM(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("mlx5_core", "mlx5_ib")
	if err != nil {
		t.Fatal(err)
	}
	newerStruct := map[string]bool{}
	newerField := map[string]string{}
	for _, n := range newer {
		if n.Field == "" {
			newerStruct[n.Struct] = true
		} else {
			newerField[n.Struct+"."+n.Field] = n.Src
		}
	}
	known := map[string]btfcheck.PRMField{}
	for _, k := range knownDifferences {
		known[k.Struct+"."+k.Field] = k.Later
	}
	var checked, viaHeader, asNewer, absent, noted int
	for _, l := range Layouts() {
		c := "mlx5_ifc_" + l.Name + "_bits"
		_, kernelBits, err := s.PRMMembers(c)
		if err != nil {
			// pahole keeps only the types a module uses: a struct absent
			// from BTF is no difference (6.1 lacks notInBTF; later
			// kernels dropped query_hca_cap_out). Its header fields are
			// checked against the generic mailbox headers.
			if !notInBTF[l.Name] {
				t.Logf("%s is not in %s's BTF; its header fields are checked against mbox_in/mbox_out", l.Name, s.Name)
			}
			absent++
			for _, f := range l.Fields {
				hdr := map[string]string{"status": "mbox_out", "syndrome": "mbox_out", "opcode": "mbox_in", "uid": "mbox_in", "op_mod": "mbox_in"}[f.Name]
				if hdr == "" {
					continue
				}
				off, width, err := s.PRMField("mlx5_ifc_"+hdr+"_bits", f.Name)
				if err != nil || off != f.Off || width != f.Width {
					t.Errorf("%s.%s: Go has bit %#x width %d; %s.%s in %s: bit %#x width %d, %v",
						l.Name, f.Name, f.Off, f.Width, hdr, f.Name, s.Name, off, width, err)
				}
				viaHeader++
			}
			continue
		}
		if notInBTF[l.Name] {
			t.Logf("%s is in %s's BTF: checked", l.Name, s.Name)
		}
		switch {
		case kernelBits == 8*l.Size:
		case kernelBits < 8*l.Size && extendedOnlyByNewer(l, kernelBits, newerField):
		case kernelBits == 8*grownLater[l.Name]:
			t.Logf("%s: %s has %d bytes, Go the %d of 6.1 and libmlx5 44.0", l.Name, s.Name, kernelBits/8, l.Size)
			noted++
		default:
			t.Errorf("%s: Go has %d bytes, %s BTF has %d bits", l.Name, l.Size, s.Name, kernelBits)
		}
		for _, f := range l.Fields {
			src, own := newerField[l.Name+"."+f.Name]
			if newerStruct[l.Name] && !own {
				// A struct of rdma-core's whose fields the kernel names.
				// A partial one (crypto_cap) lists its fields in newer:
				// the kernel's may name other fields, and keep these on
				// reserved bits.
				src = ""
			}
			note, err := s.MatchPRM(c, btfcheck.PRMField{Name: f.Name, Off: f.Off, Width: f.Width, Src: src})
			if later, ok := known[l.Name+"."+f.Name]; ok && err != nil {
				if lnote, lerr := s.MatchPRM(c, later); lerr == nil && lnote == "" {
					note, err = fmt.Sprintf("%s.%s: %s has it at bit %#x (a known difference; mlx5go does not read it)", l.Name, f.Name, s.Name, later.Off), nil
				}
			}
			switch {
			case err != nil:
				t.Errorf("%v", err)
			case note != "":
				t.Logf("%s", note)
				noted++
			}
			if src != "" {
				asNewer++
			} else {
				checked++
			}
		}
	}
	t.Logf("%s: %d fields checked, %d of them from rdma-core or later kernels, %d accepted with a note; %d header fields of %d structs absent from BTF checked against mbox_in/mbox_out",
		s.Name, checked+asNewer, asNewer, noted, viaHeader, absent)
	if checked < 650 {
		t.Errorf("only %d fields checked", checked)
	}

	var consts []btfcheck.Const
	for _, o := range opcodeNames {
		consts = append(consts, btfcheck.Const{Name: "MLX5_CMD_OP_" + o.Name, Value: uint64(o.Op)})
	}
	for _, st := range statusNames {
		consts = append(consts, btfcheck.Const{Name: "MLX5_CMD_STAT_" + st.Name, Value: uint64(st.Status)})
	}
	consts = append(consts,
		btfcheck.Const{Enum: "mlx5_cap_type", Name: "MLX5_CAP_GENERAL", Value: MLX5_CAP_GENERAL},
		btfcheck.Const{Enum: "mlx5_cap_type", Name: "MLX5_CAP_ODP", Value: MLX5_CAP_ODP},
		btfcheck.Const{Enum: "mlx5_cap_type", Name: "MLX5_CAP_ATOMIC", Value: MLX5_CAP_ATOMIC},
		btfcheck.Const{Enum: "mlx5_cap_type", Name: "MLX5_CAP_ROCE", Value: MLX5_CAP_ROCE},
		btfcheck.Const{Enum: "mlx5_cap_type", Name: "MLX5_CAP_GENERAL_2", Value: MLX5_CAP_GENERAL_2},
		btfcheck.Const{Enum: "mlx5_cap_mode", Name: "HCA_CAP_OPMOD_GET_MAX", Value: HCA_CAP_OPMOD_GET_MAX},
		btfcheck.Const{Enum: "mlx5_cap_mode", Name: "HCA_CAP_OPMOD_GET_CUR", Value: HCA_CAP_OPMOD_GET_CUR},
	)
	btfcheck.CheckConsts(t, s, consts)
}

// extendedOnlyByNewer reports whether every field past the kernel's end of
// the struct is a newer one.
func extendedOnlyByNewer(l *Layout, kernelBits uint32, newerField map[string]string) bool {
	for _, f := range l.Fields {
		if f.Off+f.Width > kernelBits {
			if _, ok := newerField[l.Name+"."+f.Name]; !ok {
				return false
			}
		}
	}
	return true
}

// TestKnownBTFDifferencesUnread keeps knownDifferences honest: no Go code
// of mlx5go outside prm reads one of those fields, by selector
// (prm.CmdHcaCap.Shampo) or by name (Layout.Field("shampo"), or a name
// list such as mlx5probe's). It runs everywhere, not only in the lab.
func TestKnownBTFDifferencesUnread(t *testing.T) {
	selectors := map[string]string{}
	names := map[string]string{}
	for _, k := range knownDifferences {
		selectors[k.Go] = k.Struct + "." + k.Field
		names[k.Field] = k.Struct + "." + k.Field
	}
	fset := token.NewFileSet()
	var files int
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "prm" || n == "prmgen" || strings.HasPrefix(n, ".") && n != ".." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if in, ok := x.X.(*ast.SelectorExpr); ok {
					if pkg, ok := in.X.(*ast.Ident); ok && pkg.Name == "prm" {
						if field, ok := selectors[in.Sel.Name+"."+x.Sel.Name]; ok {
							t.Errorf("%s reads %s (prm.%s.%s), a known BTF difference: make prm follow the newer kernels' place first", fset.Position(x.Pos()), field, in.Sel.Name, x.Sel.Name)
						}
					}
				}
			case *ast.BasicLit:
				if x.Kind == token.STRING {
					if v, err := strconv.Unquote(x.Value); err == nil {
						if field, ok := names[v]; ok {
							t.Errorf("%s names %q (%s), a known BTF difference: make prm follow the newer kernels' place first", fset.Position(x.Pos()), v, field)
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d Go files scanned: is the test running in the module's prm directory?", files)
	}
}
