package uverbs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func fakeSysfs(t *testing.T, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, files)
	old := sysfsRoot
	sysfsRoot = root
	t.Cleanup(func() { sysfsRoot = old })
}

// The layout below is what rdma_rxe publishes (checked for real by
// TestLabDiscoverRXE in the kernel lab).
func TestDevicesFromFakeSysfs(t *testing.T) {
	fakeSysfs(t, map[string]string{
		"class/infiniband_verbs/abi_version":         "6\n",
		"class/infiniband_verbs/uverbs0/ibdev":       "rxe0\n",
		"class/infiniband_verbs/uverbs0/abi_version": "2\n",
		"class/infiniband/rxe0/node_type":            "1: CA\n",
		"class/infiniband/rxe0/node_guid":            "5054:00ff:fe12:3456\n",
		"class/infiniband/rxe0/ports/1/state":        "4: ACTIVE\n",
		"class/infiniband/rxe0/ports/1/link_layer":   "Ethernet\n",
	})
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{{
		Name: "rxe0", Uverbs: "uverbs0", Path: "/dev/infiniband/uverbs0", ABIVersion: 2,
		NodeType: 1, NodeGUID: "5054:00ff:fe12:3456",
		Ports: []Port{{Num: 1, State: 4, StateName: "ACTIVE", LinkLayer: "Ethernet"}},
	}}
	if diff := cmp.Diff(want, devs); diff != "" {
		t.Fatalf("Devices() mismatch (-want +got):\n%s", diff)
	}
	if err := CheckABIVersion(); err != nil {
		t.Fatal(err)
	}
	if _, err := DeviceByName("mlx5_0"); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("DeviceByName(mlx5_0) = %v, want ErrNoDevice", err)
	}
}

func TestNoDevices(t *testing.T) {
	fakeSysfs(t, map[string]string{"class/net/lo/mtu": "65536"})
	devs, err := Devices()
	if err != nil || len(devs) != 0 {
		t.Fatalf("Devices() = %v, %v; want none", devs, err)
	}
	if err := CheckABIVersion(); err == nil {
		t.Fatal("CheckABIVersion succeeded with no infiniband_verbs class")
	}
}

func TestCheckABIVersionMismatch(t *testing.T) {
	fakeSysfs(t, map[string]string{"class/infiniband_verbs/abi_version": "7\n"})
	if err := CheckABIVersion(); err == nil {
		t.Fatal("CheckABIVersion accepted ABI version 7")
	}
}
