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

// TestHWBasic runs SEND, RDMA WRITE and READ, and a remote access error
// over a loopback pair (flows.Basic).
func TestHWBasic(t *testing.T) {
	flows.Basic(t, OpenDEVX(t))
}
