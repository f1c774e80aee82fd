package uverbs

import (
	"os"
	"testing"

	"github.com/mlx5go/mlx5go/internal/labenv"
)

// TestLabDiscoverRXE finds the lab's rdma_rxe device through sysfs on the
// real kernel.
func TestLabDiscoverRXE(t *testing.T) {
	labenv.Require(t)
	if err := CheckABIVersion(); err != nil {
		t.Fatal(err)
	}
	d, err := DeviceByName(labenv.RXEDevice)
	if err != nil {
		devs, _ := Devices()
		t.Fatalf("DeviceByName(%s): %v (devices: %+v)", labenv.RXEDevice, err, devs)
	}
	t.Logf("%+v", d)
	if d.NodeType != 1 {
		t.Errorf("node type %d, want 1 (CA)", d.NodeType)
	}
	if len(d.Ports) != 1 || d.Ports[0].Num != 1 || d.Ports[0].StateName != "ACTIVE" || d.Ports[0].State != 4 {
		t.Errorf("ports = %+v, want port 1 ACTIVE", d.Ports)
	}
	if d.Ports[0].LinkLayer != "Ethernet" {
		t.Errorf("link layer %q, want Ethernet (RoCE)", d.Ports[0].LinkLayer)
	}
	st, err := os.Stat(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("%s is %v, want a character device", d.Path, st.Mode())
	}
	if d.NodeGUID == "" {
		t.Error("no node GUID")
	}
}
