package mlx5abi

import (
	"encoding/hex"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/oracle"
)

// The layout of struct mlx5_ib_query_device_resp outside the lab: the
// offsets the 6.1 header gives by C's rules (the lab checks them against
// BTF), and the size libmlx5 44.0 passed as UHW_OUT at every open in the
// oracle's records.
func TestQueryDeviceRespLayout(t *testing.T) {
	var r Mlx5IbQueryDeviceResp
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof", unsafe.Sizeof(r), SizeofMlx5IbQueryDeviceResp},
		{"tso_caps", unsafe.Offsetof(r.TsoCaps), 8},
		{"rss_caps", unsafe.Offsetof(r.RssCaps), 16},
		{"cqe_comp_caps", unsafe.Offsetof(r.CqeCompCaps), 32},
		{"packet_pacing_caps", unsafe.Offsetof(r.PacketPacingCaps), 40},
		{"mlx5_ib_support_multi_pkt_send_wqes", unsafe.Offsetof(r.Mlx5IbSupportMultiPktSendWqes), 56},
		{"flags", unsafe.Offsetof(r.Flags), 60},
		{"sw_parsing_caps", unsafe.Offsetof(r.SwParsingCaps), 64},
		{"striding_rq_caps", unsafe.Offsetof(r.StridingRqCaps), 72},
		{"tunnel_offloads_caps", unsafe.Offsetof(r.TunnelOffloadsCaps), 96},
		{"dci_streams_caps", unsafe.Offsetof(r.DciStreamsCaps), 100},
		{"reserved", unsafe.Offsetof(r.Reserved), 102},
	} {
		if f.got != f.want {
			t.Errorf("%s: %d, want %d", f.name, f.got, f.want)
		}
	}

	c := oracle.Load(t, "../../mlx5/testdata/create_cmds.jsonl", "open_device")
	var out []byte
	for _, k := range c.KernelCmds {
		if k.Method != "INVOKE_WRITE" || len(k.Attrs) == 0 || k.Attrs[0].Hex != "0100008000000000" {
			continue // not QUERY_DEVICE_EX (0x80000001)
		}
		for _, a := range k.Attrs {
			if a.Name == "UHW_OUT" {
				if int(a.Len) != SizeofMlx5IbQueryDeviceResp {
					t.Errorf("libmlx5's UHW_OUT is %d bytes, the struct %d", a.Len, SizeofMlx5IbQueryDeviceResp)
				}
				var err error
				if out, err = hex.DecodeString(a.OutHex); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if len(out) != SizeofMlx5IbQueryDeviceResp {
		t.Fatalf("open_device: QUERY_DEVICE_EX's UHW_OUT answer is %d bytes", len(out))
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)), out)
	// The fake kernel answered response_length 104 and DCI streams of up
	// to 2^6 channels, 2^4 errored (the case log_conc_7_log_err_4 in
	// dci.jsonl is the one libmlx5 refuses).
	if r.ResponseLength != 104 || r.DciStreamsCaps != (Mlx5IbDciStreamsCaps{MaxLogNumConcurent: 6, MaxLogNumErrored: 4}) {
		t.Errorf("oracle answer: response_length %d, dci_streams_caps %+v", r.ResponseLength, r.DciStreamsCaps)
	}
}
