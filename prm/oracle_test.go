package prm

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
)

// The vectors in testdata/ are the oracle's records of the PRM commands
// that rdma-core 44.0's libmlx5 sends through DEVX (see testdata/README.md).

type attr struct {
	Name   string `json:"name"`
	Hex    string `json:"hex"`
	OutHex string `json:"out_hex"`
}

type kcmd struct {
	Object string `json:"object"`
	Method string `json:"method"`
	Attrs  []attr `json:"attrs"`
}

// devxCmd is one DEVX ioctl: its PRM input mailbox and the output the fake
// kernel returned.
type devxCmd struct {
	Method  string
	In, Out []byte
}

// loadDEVX returns the DEVX commands of every record of a vector file, by
// case and then by the record key that holds them ("kernel_cmds",
// "result.stream_id_reset_0_cmds").
func loadDEVX(t *testing.T, file string) map[string]map[string][]devxCmd {
	t.Helper()
	out := map[string]map[string][]devxCmd{}
	oracle.Records(t, "testdata/"+file, nil, func(rec *map[string]any) {
		name := (*rec)["case"].(string)
		out[name] = map[string][]devxCmd{}
		walk(t, *rec, "", out[name])
	})
	return out
}

func walk(t *testing.T, v any, path string, out map[string][]devxCmd) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			walk(t, e, strings.TrimPrefix(path+"."+k, "."), out)
		}
	case []any:
		for _, e := range v {
			m, ok := e.(map[string]any)
			if !ok || m["op"] != "ioctl" {
				walk(t, e, path, out)
				continue
			}
			raw, _ := json.Marshal(m)
			var c kcmd
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(c.Object, "MLX5_DEVX") {
				continue
			}
			d := devxCmd{Method: c.Method}
			for _, a := range c.Attrs {
				switch {
				case strings.HasSuffix(a.Name, "CMD_IN"):
					d.In = mustHex(t, a.Hex)
				case strings.HasSuffix(a.Name, "CMD_OUT"):
					d.Out = mustHex(t, a.OutHex)
				}
			}
			if d.In != nil {
				out[path] = append(out[path], d)
			}
		}
	}
}

// mustHex is internal/oracle's, by the name these tests use.
var mustHex = oracle.Unhex

// nonzero lists every field of l that is not zero in b as "name=0xV",
// descending into nested structs that have a layout, and every set bit that
// no field covers as "reserved@0xBIT". A wrong offset in a table shows up
// as a changed or extra entry.
func nonzero(l *Layout, b []byte) []string {
	var out []string
	covered := make([]bool, 8*len(b))
	var visit func(l *Layout, base Field)
	visit = func(l *Layout, base Field) {
		for _, f := range l.Fields {
			f = f.At(base)
			if inner, ok := LayoutOf(f.Type); ok && f.Width == 8*inner.Size {
				visit(inner, Field{Name: f.Name, Off: f.Off})
				continue
			}
			for i := f.Off; i < f.Off+f.Width && int(i) < len(covered); i++ {
				covered[i] = true
			}
			if f.Width > 64 {
				if bs := f.Bytes(b); bs != nil && strings.Trim(hex.EncodeToString(bs), "0") != "" {
					out = append(out, fmt.Sprintf("%s%s=%x", base.prefix(), f.Name, bs))
				}
				continue
			}
			if v := f.Get(b); v != 0 {
				out = append(out, fmt.Sprintf("%s%s=%#x", base.prefix(), f.Name, v))
			}
		}
	}
	visit(l, Field{})
	for i, c := range covered {
		if !c && b[i/8]&(0x80>>(i%8)) != 0 {
			out = append(out, fmt.Sprintf("reserved@%#x", i))
		}
	}
	return out
}

func (f Field) prefix() string {
	if f.Name == "" {
		return ""
	}
	return f.Name + "."
}

// oracleCases are the DEVX commands libmlx5 sent in the oracle's records,
// with every field our tables find non-zero in them. The expected values
// follow from the records' inputs (the mkey's pd 0x11 and access flags, the
// stream ids 0, 0x1234 and the maximum) and from the fake kernel's answers
// listed in the oracle's README (ids from 0x2001, 0x301; the HCA cap bits).
var oracleCases = []struct {
	file, rec, key string
	index          int
	in, out        []string
}{
	{"devx.jsonl", "general_cmd/query_hca_cap/op_mod_0x1", "kernel_cmds", 0,
		[]string{"opcode=0x100", "op_mod=0x1"}, nil},
	{"devx.jsonl", "general_cmd/query_hca_cap/op_mod_0x41", "kernel_cmds", 0,
		[]string{"opcode=0x100", "op_mod=0x41"}, []string{}},
	{"devx.jsonl", "obj_query/query_mkey", "kernel_cmds", 0,
		[]string{"opcode=0x201", "mkey_index=0x2106"}, []string{}},
	{"devx.jsonl", "qp_query/query_qp", "kernel_cmds", 0,
		[]string{"opcode=0x50b", "qpn=0x1a2"}, []string{"qpc.state=0x3"}},
	{"create_cmds.jsonl", "create_mkey_block_signature", "kernel_cmds", 0,
		[]string{"opcode=0x600", "num_psv=0x1", "pd=0x11"}, []string{"psv0_index=0x301"}},
	{"create_cmds.jsonl", "create_mkey_block_signature", "kernel_cmds", 2,
		[]string{"opcode=0x200",
			"memory_key_mkey_entry.free=0x1", "memory_key_mkey_entry.umr_en=0x1",
			"memory_key_mkey_entry.lr=0x1", "memory_key_mkey_entry.access_mode_1_0=0x2",
			"memory_key_mkey_entry.qpn=0xffffff", "memory_key_mkey_entry.bsf_en=0x1",
			"memory_key_mkey_entry.pd=0x11", "memory_key_mkey_entry.bsf_octword_size=0x4",
			"memory_key_mkey_entry.translations_octword_size=0x4"},
		[]string{"mkey_index=0x2002"}},
	{"create_cmds.jsonl", "create_mkey_indirect", "kernel_cmds", 0,
		[]string{"opcode=0x200",
			"memory_key_mkey_entry.free=0x1", "memory_key_mkey_entry.umr_en=0x1",
			"memory_key_mkey_entry.lr=0x1", "memory_key_mkey_entry.access_mode_1_0=0x2",
			"memory_key_mkey_entry.qpn=0xffffff", "memory_key_mkey_entry.pd=0x11",
			"memory_key_mkey_entry.translations_octword_size=0x4"},
		[]string{"mkey_index=0x2003"}},
	{"create_cmds.jsonl", "modify_qp_reset_to_init", "kernel_cmds", 0,
		[]string{"opcode=0x50e", "qpn=0x1a2", "opt_param_mask=0x800", "qpc.drain_sigerr=0x1"}, []string{}},
	{"dci.jsonl", "dci_streams/log_conc_2_log_err_1", "result.stream_id_reset_0_cmds", 0,
		[]string{"opcode=0x505", "qpc_ext=0x1", "qpn=0x1a3", "opt_param_mask_95_32=0x1"}, []string{}},
	{"dci.jsonl", "dci_streams/log_conc_4_log_err_2", "result.stream_id_reset_0x1234_cmds", 0,
		[]string{"opcode=0x505", "qpc_ext=0x1", "qpn=0x1a4", "opt_param_mask_95_32=0x1",
			"qpc_data_ext.dci_stream_channel_id=0x1234"}, []string{}},
	{"dci.jsonl", "dci_streams/log_conc_6_log_err_4", "result.stream_id_reset_max_cmds", 0,
		[]string{"opcode=0x505", "qpc_ext=0x1", "qpn=0x1a5", "opt_param_mask_95_32=0x1",
			"qpc_data_ext.dci_stream_channel_id=0x3f"}, []string{}},
}

func TestOracleCommands(t *testing.T) {
	files := map[string]map[string]map[string][]devxCmd{}
	for _, c := range oracleCases {
		if files[c.file] == nil {
			files[c.file] = loadDEVX(t, c.file)
		}
		cmds := files[c.file][c.rec][c.key]
		if c.index >= len(cmds) {
			t.Errorf("%s %s %s: %d DEVX commands, want #%d", c.file, c.rec, c.key, len(cmds), c.index)
			continue
		}
		cmd := cmds[c.index]
		op := uint16(MboxIn.Opcode.Get(cmd.In))
		name := fmt.Sprintf("%s %s #%d %s", c.rec, c.key, c.index, OpcodeName(op))
		in := inLayout(op)
		if len(cmd.In) < int(in.Size) {
			t.Errorf("%s: input of %d bytes, %s has %d", name, len(cmd.In), in.Name, in.Size)
		}
		if got := nonzero(in, cmd.In); !equal(got, c.in) {
			t.Errorf("%s: input fields\n got %q\nwant %q", name, got, c.in)
		}
		if c.out != nil {
			if got := nonzero(outLayout(op), cmd.Out); !equal(got, c.out) {
				t.Errorf("%s: output fields\n got %q\nwant %q", name, got, c.out)
			}
			if err := Check(cmd.In, cmd.Out); err != nil {
				t.Errorf("%s: Check: %v", name, err)
			}
		}
	}
}

// The fake kernel answers QUERY_HCA_CAP for the general caps with the bits
// its README lists by absolute bit offset in query_hca_cap_out (capability
// at 0x80): log_max_qp 18 at 283..287, qpc_extension 418, sig_crc64_xp10
// 455, sig_crc32c 456, sig_block_4048 624, sho 663,
// sigerr_domain_and_sig_type 1280. Decoded with cmd_hca_cap inside the
// output, those must be the only non-zero fields.
func TestOracleHCACap(t *testing.T) {
	want := []string{"log_max_qp=0x12", "qpc_extension=0x1", "sig_crc64_xp10=0x1",
		"sig_crc32c=0x1", "sig_block_4048=0x1", "sho=0x1", "sigerr_domain_and_sig_type=0x1"}
	for _, rec := range []string{"general_cmd/query_hca_cap/op_mod_0x0", "general_cmd/query_hca_cap/op_mod_0x1"} {
		cmd := loadDEVX(t, "devx.jsonl")[rec]["kernel_cmds"][0]
		if len(cmd.Out) != int(QueryHcaCapOut.Layout().Size) {
			t.Fatalf("%s: output of %d bytes", rec, len(cmd.Out))
		}
		capBytes := QueryHcaCapOut.Capability.Bytes(cmd.Out)
		if got := nonzero(CmdHcaCap.Layout(), capBytes); !equal(got, want) {
			t.Errorf("%s: cmd_hca_cap\n got %q\nwant %q", rec, got, want)
		}
		at := func(f Field) uint64 { return f.At(QueryHcaCapOut.Capability).Get(cmd.Out) }
		if at(CmdHcaCap.LogMaxQp) != 18 || at(CmdHcaCap.SigCrc64Xp10) != 1 || at(CmdHcaCap.QpcExtension) != 1 {
			t.Errorf("%s: log_max_qp %d, sig_crc64_xp10 %d, qpc_extension %d", rec,
				at(CmdHcaCap.LogMaxQp), at(CmdHcaCap.SigCrc64Xp10), at(CmdHcaCap.QpcExtension))
		}
	}
	for f, bit := range map[Field]uint32{
		CmdHcaCap.LogMaxQp: 283, CmdHcaCap.QpcExtension: 418, CmdHcaCap.SigCrc64Xp10: 455,
		CmdHcaCap.SigCrc32c: 456, CmdHcaCap.SigBlock4048: 624, CmdHcaCap.Sho: 663,
		CmdHcaCap.SigerrDomainAndSigType: 1280,
	} {
		if got := f.At(QueryHcaCapOut.Capability).Off; got != bit {
			t.Errorf("%s: bit %d in query_hca_cap_out, oracle README says %d", f.Name, got, bit)
		}
	}
}

// The oracle README's table of the PRM offsets its fake kernel uses.
func TestOracleOffsets(t *testing.T) {
	for _, c := range []struct {
		f          Field
		off, width uint32
	}{
		{Qpc.State.At(QueryQpOut.Qpc), 192, 4},
		{Qpc.HwSqWqebbCounter.At(QueryQpOut.Qpc), 1632, 16},
		{CreateMkeyOut.MkeyIndex, 72, 24},
		{CreatePsvOut.Psv0Index, 136, 24},
		{QueryHcaCapIn.Opcode, 0, 16},
		{QueryHcaCapIn.OpMod, 48, 16},
	} {
		if c.f.Off != c.off || c.f.Width != c.width {
			t.Errorf("%s: %d+%d, oracle has %d+%d", c.f.Name, c.f.Off, c.f.Width, c.off, c.width)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func inLayout(op uint16) *Layout {
	switch op {
	case MLX5_CMD_OP_QUERY_HCA_CAP:
		return QueryHcaCapIn.Layout()
	case MLX5_CMD_OP_CREATE_MKEY:
		return CreateMkeyIn.Layout()
	case MLX5_CMD_OP_QUERY_MKEY:
		return QueryMkeyIn.Layout()
	case MLX5_CMD_OP_CREATE_PSV:
		return CreatePsvIn.Layout()
	case MLX5_CMD_OP_INIT2INIT_QP:
		return Init2initQpIn.Layout()
	case MLX5_CMD_OP_RTS2RTS_QP:
		return Rts2rtsQpIn.Layout()
	case MLX5_CMD_OP_QUERY_QP:
		return QueryQpIn.Layout()
	}
	return MboxIn.Layout()
}

func outLayout(op uint16) *Layout {
	switch op {
	case MLX5_CMD_OP_QUERY_HCA_CAP:
		return QueryHcaCapOut.Layout()
	case MLX5_CMD_OP_CREATE_MKEY:
		return CreateMkeyOut.Layout()
	case MLX5_CMD_OP_CREATE_PSV:
		return CreatePsvOut.Layout()
	case MLX5_CMD_OP_QUERY_QP:
		return QueryQpOut.Layout()
	}
	return MboxOut.Layout()
}
