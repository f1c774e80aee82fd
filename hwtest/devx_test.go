package hwtest

import (
	"testing"

	"github.com/mlx5go/mlx5go/hwtest/flows"
)

// Every DEVX call on a real ConnectX (the software model runs the same
// flow in its own tests).
func TestHWDEVX(t *testing.T) {
	flows.DEVX(t, OpenDEVX(t))
}
