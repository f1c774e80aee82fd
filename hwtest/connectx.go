package hwtest

import (
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/uverbs"
)

// ConnectX returns the name of the first mlx5 RDMA device, or skips the
// test with the reason when the machine has none.
func ConnectX(t testing.TB) string {
	t.Helper()
	devs, err := uverbs.Devices()
	if err != nil || len(devs) == 0 {
		t.Skip("no RDMA devices on this machine: these tests need a ConnectX (mlx5_core and mlx5_ib loaded)")
	}
	for _, d := range devs {
		if id, err := uverbs.DriverIDOf(d.Name); err == nil && id == uverbs.RDMA_DRIVER_MLX5 {
			return d.Name
		}
	}
	t.Skipf("no ConnectX among this machine's %d RDMA devices (mlx5 driver id %d not found)", len(devs), uverbs.RDMA_DRIVER_MLX5)
	return ""
}

// OpenDEVX opens the ConnectX with DEVX, or skips the test with the reason.
func OpenDEVX(t testing.TB) *mlx5.Context {
	t.Helper()
	name := ConnectX(t)
	c, err := mlx5.Open(name, nil)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	if !c.DEVX() {
		t.Skipf("%s: the kernel refused DEVX (it needs CAP_NET_RAW; run as root)", name)
	}
	return c
}
