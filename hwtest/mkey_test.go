package hwtest

import (
	"testing"

	"github.com/mlx5go/mlx5go/hwtest/flows"
)

// Indirect mkeys are DEVX objects: these need DEVX on verbs QPs too.

// TestHWMkeyLayouts runs rdma-core's list and interleaved layouts with
// SEND, RDMA WRITE and READ through them (flows.MkeyLayouts).
func TestHWMkeyLayouts(t *testing.T) { devxKinds(t, flows.MkeyLayouts) }

// TestHWMkeyPastLayout: accesses past an mkey's layout fail with a local
// protection or a remote access error (flows.MkeyPastLayout).
func TestHWMkeyPastLayout(t *testing.T) { devxKinds(t, flows.MkeyPastLayout) }

// TestHWRemoteInvalidate: a peer's SEND with invalidate frees an mkey
// created with remote invalidation; traffic through it fails after
// (flows.RemoteInvalidate).
func TestHWRemoteInvalidate(t *testing.T) { devxKinds(t, flows.RemoteInvalidate) }
