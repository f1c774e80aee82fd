package hwtest

import (
	"testing"

	"github.com/mlx5go/mlx5go/hwtest/flows"
	"github.com/mlx5go/mlx5go/mlx5"
)

// Every DEVX call on a real ConnectX (the software model runs the same
// flow in its own tests).
func TestHWDEVX(t *testing.T) {
	flows.DEVX(t, OpenDEVX(t))
}

// TestHWBasic runs SEND, RDMA WRITE and READ, and a remote access error
// over a loopback pair (flows.Basic), on verbs QPs and on DEVX ones.
func TestHWBasic(t *testing.T) {
	eachKind(t, flows.Basic)
}

// eachKind runs flow on verbs CQs and QPs (mlx5's default, which needs no
// privilege), then on DEVX ones.
func eachKind(t *testing.T, flow func(*testing.T, *mlx5.Context, flows.Objects)) {
	t.Run("verbs", func(t *testing.T) { flow(t, OpenConnectX(t), flows.VerbsObjects) })
	t.Run("devx", func(t *testing.T) { flow(t, OpenDEVX(t), flows.DEVXObjects) })
}
