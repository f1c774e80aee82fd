package uverbs

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/labenv"
)

func labNLDevice(t testing.TB) NLDevice {
	t.Helper()
	devs, err := NetlinkDevices()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Name == labenv.RXEDevice {
			return d
		}
	}
	t.Fatalf("RDMA netlink does not list %s: %+v", labenv.RXEDevice, devs)
	return NLDevice{}
}

// RDMA netlink and sysfs describe the same device.
func TestLabNetlinkMatchesSysfs(t *testing.T) {
	labenv.Require(t)
	nd := labNLDevice(t)
	sd, err := DeviceByName(labenv.RXEDevice)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("netlink: %+v", nd)
	if FormatGUID(nd.NodeGUID) != sd.NodeGUID {
		t.Errorf("node GUID: netlink %s, sysfs %s", FormatGUID(nd.NodeGUID), sd.NodeGUID)
	}
	if FormatGUID(nd.SysImageGUID) != sd.SysImage {
		t.Errorf("system image GUID: netlink %s, sysfs %s", FormatGUID(nd.SysImageGUID), sd.SysImage)
	}
	if int(nd.NodeType) != sd.NodeType {
		t.Errorf("node type: netlink %d, sysfs %d", nd.NodeType, sd.NodeType)
	}
	if int(nd.Ports) != len(sd.Ports) {
		t.Errorf("ports: netlink %d, sysfs %d", nd.Ports, len(sd.Ports))
	}
	if nd.Protocol != "roce" {
		t.Errorf("protocol %q, want roce for rxe", nd.Protocol)
	}
}

// Creating and destroying 10,000 PDs, and opening and closing 10,000
// contexts, leaves the kernel's resource counts where they were; so does
// closing a context with live PDs.
func TestLabLeaksPDAndContext(t *testing.T) {
	labenv.Require(t)
	nd := labNLDevice(t)
	base, err := ResourceCounts(nd.Index)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("baseline: %v", base)
	c := openLab(t)
	for i := 0; i < 10000; i++ {
		p, err := c.AllocPD(nil)
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if err := p.Close(); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	}
	for i := 0; i < 10; i++ {
		if _, err := c.AllocPD(nil); err != nil {
			t.Fatal(err)
		}
	}
	mid, err := ResourceCounts(nd.Index)
	if err != nil {
		t.Fatal(err)
	}
	if mid["pd"] != base["pd"]+10 || mid["ctx"] != base["ctx"]+1 {
		t.Errorf("with 10 live PDs and 1 context: %v (baseline %v)", mid, base)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10000; i++ {
		c, err := Open(labenv.RXEDevice, &Options{DriverID: DriverRXE})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	checkBaseline(t, nd.Index, base, "after 10,000 PD and 10,000 context cycles")
}
