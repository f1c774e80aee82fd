package prm

import (
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
}

// TestLabBTFPRM checks every declared PRM field, bit offset and width,
// against the kernel's mlx5_ifc_*_bits types, and every opcode, status and
// capability type against the kernel's enums. Fields that the lab kernel's
// header does not name (newer, from rdma-core or later kernels) must fall
// on bits the kernel keeps reserved, or past the end of its struct.
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
	var checked, viaHeader, asNewer, absent int
	for _, l := range Layouts() {
		c := "mlx5_ifc_" + l.Name + "_bits"
		members, kernelBits, err := s.PRMMembers(c)
		if err != nil {
			if !notInBTF[l.Name] {
				t.Errorf("%s: %v", l.Name, err)
				continue
			}
			absent++
			for _, f := range l.Fields {
				hdr := map[string]string{"status": "mbox_out", "syndrome": "mbox_out", "opcode": "mbox_in", "uid": "mbox_in", "op_mod": "mbox_in"}[f.Name]
				if hdr == "" {
					continue
				}
				off, width, err := s.PRMField("mlx5_ifc_"+hdr+"_bits", f.Name)
				if err != nil || off != f.Off || width != f.Width {
					t.Errorf("%s.%s: Go has bit %#x width %d; %s.%s in BTF: bit %#x width %d, %v",
						l.Name, f.Name, f.Off, f.Width, hdr, f.Name, off, width, err)
				}
				viaHeader++
			}
			continue
		}
		if notInBTF[l.Name] {
			t.Errorf("%s is in the kernel's BTF now: remove it from notInBTF", l.Name)
		}
		switch {
		case kernelBits == 8*l.Size:
		case kernelBits < 8*l.Size && extendedOnlyByNewer(l, kernelBits, newerField):
		default:
			t.Errorf("%s: Go has %d bytes, %s BTF has %d bits", l.Name, l.Size, s.Name, kernelBits)
		}
		for _, f := range l.Fields {
			if src, ok := newerField[l.Name+"."+f.Name]; ok && !newerStruct[l.Name] {
				if m := coveringNamed(members, f); m != "" {
					t.Errorf("%s.%s (bit %#x width %d, from %s): the kernel has %s there", l.Name, f.Name, f.Off, f.Width, src, m)
				}
				asNewer++
				continue
			}
			off, width, err := s.PRMField(c, f.Name)
			switch {
			case err != nil:
				t.Errorf("%s.%s: %v", l.Name, f.Name, err)
			case off != f.Off || width != f.Width:
				t.Errorf("%s.%s: Go has bit %#x width %d, %s BTF has bit %#x width %d", l.Name, f.Name, f.Off, f.Width, s.Name, off, width)
			}
			checked++
		}
	}
	t.Logf("%d fields checked by name, %d header fields of %d structs absent from BTF checked against mbox_in/mbox_out, %d newer fields on reserved bits", checked, viaHeader, absent, asNewer)
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

// coveringNamed returns the kernel member, other than a reserved one, that
// shares a bit with f; "" if f lies on reserved bits or past the end.
func coveringNamed(members []btfcheck.PRMMember, f Field) string {
	for _, m := range members {
		if m.Off < f.Off+f.Width && f.Off < m.Off+m.Width && !strings.HasPrefix(m.Name, "reserved") {
			return m.Name
		}
	}
	return ""
}
