package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/uverbs"
)

func sysfsRXE(t *testing.T, attr string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", labenv.RXEDevice, attr))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestLabProbeRXE runs the probe on the lab's real rxe device and checks
// what it prints against sysfs.
func TestLabProbeRXE(t *testing.T) {
	labenv.Require(t)
	var js bytes.Buffer
	if err := run(&js, options{json: true}); err != nil {
		t.Fatalf("%v\n%s", err, js.String())
	}
	var rep report
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, js.String())
	}
	if rep.ABIVersion != uverbs.SupportedABIVersion || len(rep.Devices) != 1 {
		t.Fatalf("report: ABI %d, %d devices; want %d and only %s\n%s", rep.ABIVersion, len(rep.Devices), uverbs.SupportedABIVersion, labenv.RXEDevice, js.String())
	}
	d := rep.Devices[0]
	if d.HCAID != labenv.RXEDevice || len(d.Errors) != 0 || d.DeviceAttrs == nil {
		t.Fatalf("device %s, errors %v\n%s", d.HCAID, d.Errors, js.String())
	}
	if d.NodeGUID != sysfsRXE(t, "node_guid") || d.SysImageGUID != sysfsRXE(t, "sys_image_guid") {
		t.Errorf("node_guid %s sys_image_guid %s, sysfs %s %s", d.NodeGUID, d.SysImageGUID, sysfsRXE(t, "node_guid"), sysfsRXE(t, "sys_image_guid"))
	}
	if d.Driver == nil || *d.Driver != (named{"rxe", int64(uverbs.DriverRXE)}) || d.Transport.Name != "InfiniBand" || d.PhysPortCnt != 1 || len(d.Ports) != 1 {
		t.Errorf("driver %v, transport %v, phys_port_cnt %d, %d ports", d.Driver, d.Transport, d.PhysPortCnt, len(d.Ports))
	}
	if d.MaxQP == 0 || d.MaxCQE == 0 || d.AtomicCap.Name == "" || len(d.DeviceCapFlags.Names) == 0 {
		t.Errorf("device attributes missing: max_qp %d max_cqe %d atomic_cap %v device_cap_flags %+v", d.MaxQP, d.MaxCQE, d.AtomicCap, d.DeviceCapFlags)
	}
	p := d.Ports[0]
	if p.State.Name != "PORT_ACTIVE" || p.State.Value != 4 || p.LinkLayer != sysfsRXE(t, "ports/1/link_layer") {
		t.Errorf("port 1: state %v, link layer %s", p.State, p.LinkLayer)
	}
	if len(p.GIDs) == 0 || p.GIDs[0].Index != 0 {
		t.Fatalf("port 1 GIDs %+v, want GID[0] first", p.GIDs)
	}
	for _, g := range p.GIDs {
		n := filepath.Join("ports/1/gids", strconv.Itoa(int(g.Index)))
		a, err := netip.ParseAddr(g.GID)
		if err != nil {
			t.Errorf("GID[%d] %q: %v", g.Index, g.GID, err)
			continue
		}
		if got, want := uverbs.GID(a.As16()).String(), sysfsRXE(t, n); got != want {
			t.Errorf("GID[%d] %s, sysfs %s", g.Index, got, want)
		}
		wantType := sysfsRXE(t, filepath.Join("ports/1/gid_attrs/types", strconv.Itoa(int(g.Index))))
		if g.Type != wantType && !(wantType == "IB/RoCE v1" && (g.Type == "IB" || g.Type == "RoCE v1")) {
			t.Errorf("GID[%d] type %s, sysfs %s", g.Index, g.Type, wantType)
		}
		if g.Netdev != labenv.Netdev {
			t.Errorf("GID[%d] netdev %q, want %s", g.Index, g.Netdev, labenv.Netdev)
		}
	}
	// JSON keys are ibv_devinfo's names.
	var raw struct {
		Devices []map[string]json.RawMessage `json:"devices"`
	}
	if err := json.Unmarshal(js.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"hca_id", "transport", "fw_ver", "node_guid", "sys_image_guid", "vendor_id", "vendor_part_id", "hw_ver", "phys_port_cnt", "max_mr_size", "page_size_cap", "max_qp", "max_qp_wr", "device_cap_flags", "max_sge", "max_srq_sge", "max_pkeys", "local_ca_ack_delay", "atomic_cap", "num_comp_vectors", "ports"} {
		if _, ok := raw.Devices[0][k]; !ok {
			t.Errorf("JSON has no %q", k)
		}
	}

	var text bytes.Buffer
	if err := run(&text, options{device: labenv.RXEDevice}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	for _, want := range []string{
		"hca_id:\t" + labenv.RXEDevice + "\n",
		"\tnode_guid:\t\t\t" + sysfsRXE(t, "node_guid") + "\n",
		"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
		"\t\t\tlink_layer:\t\tEthernet\n",
		"\t\t\tGID[  0]:\t\t" + p.GIDs[0].GID + ", RoCE v2\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text output lacks %q", want)
		}
	}
}

// A device that cannot be opened is reported with its error; the probe
// goes on and says so in its exit status.
func TestLabProbeUnopenable(t *testing.T) {
	labenv.Require(t)
	r := probeDevice(uverbs.Device{Name: "nosuch9", Path: "/dev/infiniband/uverbs99", NodeType: 1})
	if len(r.Errors) == 0 || r.DeviceAttrs != nil {
		t.Fatalf("probe of a missing device: %+v", r)
	}
	t.Logf("errors: %v", r.Errors)
	var out bytes.Buffer
	if err := writeText(&out, report{Devices: []deviceReport{r}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\terror:") {
		t.Errorf("text lacks the error:\n%s", out.String())
	}
	if err := run(&out, options{device: "nosuch9"}); !errors.Is(err, uverbs.ErrNoDevice) {
		t.Errorf("-d nosuch9: %v, want ErrNoDevice", err)
	}
}
