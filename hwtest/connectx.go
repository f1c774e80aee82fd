package hwtest

import (
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
)

// ConnectX returns the name of the first mlx5 RDMA device, or skips the
// test with the reason when the machine has none.
func ConnectX(t testing.TB) string {
	t.Helper()
	names, err := mlx5.Devices()
	if err != nil {
		t.Skipf("cannot list RDMA devices (%v): these tests need a ConnectX (mlx5_core and mlx5_ib loaded)", err)
	}
	if len(names) == 0 {
		t.Skip("no ConnectX on this machine (no RDMA device of the mlx5_ib driver): these tests need one, with mlx5_core and mlx5_ib loaded")
	}
	return names[0]
}

// OpenConnectX opens the ConnectX, with DEVX if the kernel allows it, or
// skips the test with the reason.
func OpenConnectX(t testing.TB) *mlx5.Context {
	t.Helper()
	name := ConnectX(t)
	c, err := mlx5.Open(name, nil)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// OpenDEVX opens the ConnectX with DEVX, or skips the test with the reason.
func OpenDEVX(t testing.TB) *mlx5.Context {
	t.Helper()
	c := OpenConnectX(t)
	if !c.DEVX() {
		t.Skip("the kernel refused DEVX (it needs CAP_NET_RAW; run as root)")
	}
	return c
}
