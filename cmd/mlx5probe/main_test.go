package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/uverbs"
)

// kv aligns values where ibv_devinfo's tab strings put them (8-column
// tabs): these prefixes are copied from its output format.
func TestKVAlignment(t *testing.T) {
	cases := []struct {
		indent, column int
		key, want      string
	}{
		{1, deviceColumn, "transport", "\ttransport:\t\t\tX\n"},
		{1, deviceColumn, "fw_ver", "\tfw_ver:\t\t\t\tX\n"},
		{1, deviceColumn, "device_cap_flags", "\tdevice_cap_flags:\t\tX\n"},
		{1, deviceColumn, "max_total_mcast_qp_attach", "\tmax_total_mcast_qp_attach:\tX\n"},
		{1, deviceColumn, "max_res_rd_atom", "\tmax_res_rd_atom:\t\tX\n"},
		{3, portColumn, "state", "\t\t\tstate:\t\t\tX\n"},
		{3, portColumn, "max_mtu", "\t\t\tmax_mtu:\t\tX\n"},
		{3, portColumn, "port_cap_flags2", "\t\t\tport_cap_flags2:\tX\n"},
		{3, portColumn, "init_type_reply", "\t\t\tinit_type_reply:\tX\n"},
		{3, portColumn, "GID[  0]", "\t\t\tGID[  0]:\t\tX\n"},
	}
	for _, c := range cases {
		var b bytes.Buffer
		tw := &textWriter{w: &b}
		tw.kv(c.indent, c.column, c.key, "X")
		if b.String() != c.want {
			t.Errorf("kv(%q) = %q, want %q", c.key, b.String(), c.want)
		}
	}
}

func TestDecodeFlags(t *testing.T) {
	f := decodeFlags(1<<0|1<<9|1<<29|1<<31, deviceCapFlags)
	if !reflect.DeepEqual(f.Names, []string{"RESIZE_MAX_WR", "INIT_TYPE", "MANAGED_FLOW_STEERING"}) || f.Unknown != 1<<31 {
		t.Errorf("decodeFlags = %+v", f)
	}
	ex := decodeFlagsEx(1<<34 | 1<<36 | 1<<40 | 0x3)
	if !reflect.DeepEqual(ex.Names, []string{"RAW_SCATTER_FCS", "PCI_WRITE_END_PADDING"}) || ex.Unknown != 1<<40 || ex.Value != 1<<34|1<<36|1<<40|0x3 {
		t.Errorf("decodeFlagsEx = %+v", ex)
	}
	for nt, want := range map[int]named{1: {"InfiniBand", 0}, 3: {"InfiniBand", 0}, 4: {"iWARP", 1}, 6: {"usNIC UDP", 3}, 9: {"invalid transport", -1}} {
		if got := transportOfNodeType(nt); got != want {
			t.Errorf("transportOfNodeType(%d) = %v, want %v", nt, got, want)
		}
	}
	// The driver names agree with the ids uverbs mirrors (checked against
	// the kernel's BTF).
	if driverNames[uint64(uverbs.DriverMLX5)] != "mlx5" || driverNames[uint64(uverbs.DriverRXE)] != "rxe" || driverNames[uint64(uverbs.DriverUnknown)] != "unknown" {
		t.Errorf("driver names: %v", driverNames)
	}
	if got := lookup(portStateNames, 5, "invalid state"); got != (named{"invalid state", 5}) {
		t.Errorf("port state 5 = %v (ibv_devinfo has no name for ACTIVE_DEFER)", got)
	}
}

// sampleDevice is a ConnectX-like device with every optional section set.
func sampleDevice() deviceReport {
	da := uverbs.DeviceAttr{
		FWVer: 20<<32 | 31<<16 | 1014, NodeGUID: 0xb8599f0300aabb01, SysImageGUID: 0xb8599f0300aabb01,
		VendorID: 0x02c9, VendorPartID: 4123, HWVer: 0, PhysPortCnt: 1,
		MaxQP: 1 << 18, DeviceCapFlags: 1<<0 | 1<<29 | 1<<31, AtomicCap: uverbs.AtomicHCA,
		MaxFMR: 0, MaxSRQ: 8, MaxSRQWR: 32767, MaxSRQSGE: 31,
		ODPCaps:                 uverbs.ODPCaps{General: 1, RC: 1<<0 | 1<<5},
		CompletionTimestampMask: 0x7fffffffffffffff, HCACoreClock: 156250,
		DeviceCapFlagsEx: 1<<0 | 1<<29 | 1<<31 | 1<<34, RawPacketCaps: 1<<0 | 1<<2,
		TSOCaps:          uverbs.TSOCaps{MaxTSO: 262144, SupportedQPTs: 1 << 8},
		TMCaps:           uverbs.TMCaps{MaxNumTags: 64, MaxOps: 32, Flags: 1},
		CQModerationCaps: uverbs.CQModerationCaps{MaxCQCount: 65535, MaxCQPeriod: 4095},
		MaxDMSize:        131072,
	}
	dev := uverbs.Device{Name: "mlx5_0", Path: "/dev/infiniband/uverbs0", NodeType: 1, Driver: "mlx5_core", FWVersion: "20.31.1014"}
	d := deviceReport{HCAID: dev.Name, UverbsDevice: dev.Path, KernelDriver: dev.Driver, NodeType: 1, Transport: transportOfNodeType(1),
		Driver: &named{"mlx5", int64(uverbs.DriverMLX5)}}
	d.DeviceAttrs = deviceSection(&da, dev)
	d.NumCompVectors = 8
	p := portSection(1, &uverbs.PortAttr{State: 4, MaxMTU: 5, ActiveMTU: 5, LinkLayer: 2, PhysState: 5, ActiveWidth: 2, ActiveSpeed: 32, GIDTableLen: 255})
	for _, e := range []uverbs.GIDEntry{
		{GID: uverbs.GID{0xfe, 0x80, 8: 0xba, 9: 0x59, 10: 0x9f, 11: 0xff, 12: 0xfe, 13: 0xaa, 14: 0xbb, 15: 0x01}, Index: 0, Port: 1, Type: uverbs.GIDTypeRoCEv1},
		{GID: uverbs.GID{10: 0xff, 11: 0xff, 12: 192, 13: 0, 14: 2, 15: 1}, Index: 3, Port: 1, Type: uverbs.GIDTypeRoCEv2},
	} {
		p.GIDs = append(p.GIDs, gidSection(e))
	}
	d.Ports = []portReport{p}
	d.SigCaps = sigCapsSection(sig.Caps{BlockSize: 0x1b, BlockProt: 3, T10DIFBG: 3, CRCType: 3})
	return d
}

func TestTextOutput(t *testing.T) {
	var b bytes.Buffer
	if err := writeText(&b, report{Devices: []deviceReport{sampleDevice()}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"hca_id:\tmlx5_0\n",
		"\tdriver:\t\t\t\tmlx5 (1)\n\tkernel_driver:\t\t\tmlx5_core\n",
		"\ttransport:\t\t\tInfiniBand (0)\n",
		"\tfw_ver:\t\t\t\t20.31.1014\n",
		"\tnode_guid:\t\t\tb859:9f03:00aa:bb01\n",
		"\tvendor_id:\t\t\t0x02c9\n",
		"\tvendor_part_id:\t\t\t4123\n",
		"\tdevice_cap_flags:\t\t0xa0000001\n\t\t\t\t\tRESIZE_MAX_WR\n\t\t\t\t\tMANAGED_FLOW_STEERING\n\t\t\t\t\tUnknown flags: 0x80000000\n",
		"\tatomic_cap:\t\t\tATOMIC_HCA (1)\n",
		"\tmax_fmr:\t\t\t0\n\tmax_srq:\t\t\t8\n\tmax_srq_wr:\t\t\t32767\n",
		"\tgeneral_odp_caps:\n\t\t\t\t\tODP_SUPPORT\n\trc_odp_caps:\n\t\t\t\t\tSUPPORT_SEND\n\t\t\t\t\tSUPPORT_SRQ\n\tuc_odp_caps:\n\t\t\t\t\tNO SUPPORT\n",
		"\tcompletion_timestamp_mask:\t0x7fffffffffffffff\n",
		"\thca_core_clock:\t\t\t156250kHZ\n",
		"\traw packet caps:\n\t\t\t\t\tC-VLAN stripping offload\n\t\t\t\t\tIP csum offload\n",
		"\tdevice_cap_flags_ex:\t\t0x4A0000001\n\t\t\t\t\tRAW_SCATTER_FCS\n\ttso_caps:\n",
		"\t\tsupported_qp:\n\t\t\t\t\tSUPPORT_RAW_PACKET\n",
		"\tmax_num_tags:\t\t\t64\n",
		"\t\t\t\t\tIBV_TM_CAP_RC\n",
		"\tcq moderation caps:\n",
		"\tnum_comp_vectors:\t\t8\n",
		"\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n",
		"\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t25.0 Gbps (32)\n\t\t\tphys_state:\t\tLINK_UP (5)\n",
		"\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:ba59:9fff:feaa:bb01, RoCE v1\n",
		"\t\t\tGID[  3]:\t\t::ffff:192.0.2.1, RoCE v2\n",
		"\n\tsig_caps (mlx5dv_query_device):\n\t\tblock_size:\t\t0x1b\n\t\t\t\t\tMLX5DV_BLOCK_SIZE_CAP_512\n\t\t\t\t\tMLX5DV_BLOCK_SIZE_CAP_520\n\t\t\t\t\tMLX5DV_BLOCK_SIZE_CAP_4096\n",
		"\t\tcrc_type:\t\t0x3\n\t\t\t\t\tMLX5DV_SIG_CRC_TYPE_CAP_CRC32\n\t\t\t\t\tMLX5DV_SIG_CRC_TYPE_CAP_CRC32C\n\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q", want)
		}
	}
	for _, absent := range []string{"max_map_per_fmr", "completion_timestamp_mask not supported", "tag matching not supported"} {
		if strings.Contains(out, absent) {
			t.Errorf("text output has %q", absent)
		}
	}
}

func TestJSONOutput(t *testing.T) {
	rep := report{ABIVersion: 6, Devices: []deviceReport{sampleDevice()}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rep) {
		t.Errorf("JSON round trip changed the report:\n%s", b)
	}
	var raw struct {
		Devices []map[string]json.RawMessage `json:"devices"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	// The keys are ibv_devinfo -v's names (and a few of mlx5probe's own).
	for _, k := range []string{"hca_id", "transport", "fw_ver", "node_guid", "sys_image_guid", "vendor_id",
		"vendor_part_id", "hw_ver", "phys_port_cnt", "max_mr_size", "page_size_cap", "max_qp", "max_qp_wr",
		"device_cap_flags", "max_sge", "max_sge_rd", "max_cq", "max_cqe", "max_mr", "max_pd", "max_qp_rd_atom",
		"max_ee_rd_atom", "max_res_rd_atom", "max_qp_init_rd_atom", "max_ee_init_rd_atom", "atomic_cap", "max_ee",
		"max_rdd", "max_mw", "max_raw_ipv6_qp", "max_raw_ethy_qp", "max_mcast_grp", "max_mcast_qp_attach",
		"max_total_mcast_qp_attach", "max_ah", "max_fmr", "max_map_per_fmr", "max_srq", "max_srq_wr", "max_srq_sge",
		"max_pkeys", "local_ca_ack_delay", "general_odp_caps", "rc_odp_caps", "uc_odp_caps", "ud_odp_caps",
		"xrc_odp_caps", "completion_timestamp_mask", "hca_core_clock", "raw_packet_caps", "device_cap_flags_ex",
		"tso_caps", "rss_caps", "max_wq_type_rq", "packet_pacing_caps", "tm_caps", "cq_moderation_caps",
		"max_dm_size", "num_comp_vectors", "ports", "driver", "kernel_driver", "uverbs_device", "sig_caps"} {
		if _, ok := raw.Devices[0][k]; !ok {
			t.Errorf("JSON has no %q", k)
		}
	}
	var ports []map[string]json.RawMessage
	if err := json.Unmarshal(raw.Devices[0]["ports"], &ports); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"port", "state", "max_mtu", "active_mtu", "sm_lid", "port_lid", "port_lmc", "link_layer",
		"max_msg_sz", "port_cap_flags", "port_cap_flags2", "max_vl_num", "bad_pkey_cntr", "qkey_viol_cntr", "sm_sl",
		"pkey_tbl_len", "gid_tbl_len", "subnet_timeout", "init_type_reply", "active_width", "active_speed", "phys_state", "gids"} {
		if _, ok := ports[0][k]; !ok {
			t.Errorf("JSON port has no %q", k)
		}
	}
}

// A device that failed has its identity and errors and no attributes; the
// report then fails the exit status.
func TestFailedDevice(t *testing.T) {
	d := deviceReport{HCAID: "mlx5_1", UverbsDevice: "/dev/infiniband/uverbs1", Transport: transportOfNodeType(1),
		Errors: []string{"uverbs: open /dev/infiniband/uverbs1: permission denied"}, Ports: []portReport{}}
	rep := report{Devices: []deviceReport{sampleDevice(), d}}
	var b bytes.Buffer
	if err := writeText(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "hca_id:\tmlx5_1\n\tuverbs_device:\t\t\t/dev/infiniband/uverbs1\n\ttransport:\t\t\tInfiniBand (0)\n\terror:\t\t\t\tuverbs: open /dev/infiniband/uverbs1: permission denied\n") {
		t.Errorf("failed device:\n%s", b.String())
	}
	js, _ := json.Marshal(d)
	if strings.Contains(string(js), "node_guid") || !strings.Contains(string(js), `"errors":["uverbs: open`) {
		t.Errorf("failed device JSON: %s", js)
	}
	if !errors.Is(rep.failed(), errDeviceFailed) || (report{Devices: []deviceReport{sampleDevice()}}).failed() != nil {
		t.Error("failed() does not follow the devices' errors")
	}
}
