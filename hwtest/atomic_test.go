package hwtest

import (
	"testing"

	"github.com/mlx5go/mlx5go/hwtest/flows"
)

// TestHWRCAtomics runs rdma-core's test_atomic.py flows on RC QPs
// (flows.RCAtomics), on verbs QPs and on DEVX ones.
func TestHWRCAtomics(t *testing.T) { eachKind(t, flows.RCAtomics) }
