package mlx5

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/internal/seam"
)

// TestLabBTFClockInfo checks struct mlx5_ib_clock_info, as readClockInfo
// reads it, against the lab kernel's BTF (mlx5_core fills the page,
// mlx5_ib maps it): its size (seam.ClockInfoSize) and every field's
// offset; and the sign word's updating bit and the page's version.
func TestLabBTFClockInfo(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("mlx5_ib", "mlx5_core")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckLayouts(t, s, []btfcheck.Layout{{Struct: "mlx5_ib_clock_info", Size: seam.ClockInfoSize, Fields: []btfcheck.Field{
		{Name: "sign", Offset: ciSign},
		{Name: "nsec", Offset: ciNsec},
		{Name: "cycles", Offset: ciCycles},
		{Name: "frac", Offset: ciFrac},
		{Name: "mult", Offset: ciMult},
		{Name: "shift", Offset: ciShift},
		{Name: "mask", Offset: ciMask},
		{Name: "overflow_period", Offset: ciOverflowPeriod},
	}}})
	btfcheck.CheckConsts(t, s, []btfcheck.Const{
		{Name: "MLX5_IB_CLOCK_INFO_KERNEL_UPDATING", Value: clockInfoUpdating},
		{Name: "MLX5_IB_CLOCK_INFO_V1", Value: 0}, // clockInfoV1 is its bit
	})
	if clockInfoV1 != 1<<0 {
		t.Errorf("clockInfoV1 %#x, want BIT(MLX5_IB_CLOCK_INFO_V1)", clockInfoV1)
	}
}
