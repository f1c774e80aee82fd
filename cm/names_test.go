package cm_test

import (
	"testing"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/ucma"
)

// TestRejectReasonsAreTheKernels: cm's reject reasons and SIDR statuses
// are ucma's (whose values TestGoNamesAreTheKernels checks against the
// kernel's ABI mirror).
func TestRejectReasonsAreTheKernels(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"RejectTimeout", cm.RejectTimeout, ucma.RejectTimeout},
		{"RejectNoListener", cm.RejectNoListener, ucma.RejectInvalidServiceID},
		{"RejectConsumerDefined", cm.RejectConsumerDefined, ucma.RejectConsumerDefined},
		{"RejectVendorOptionNotSupported", cm.RejectVendorOptionNotSupported, ucma.RejectVendorOptionNotSupported},
		{"SIDRNoListener", cm.SIDRNoListener, ucma.SIDRUnsupported},
		{"SIDRReject", cm.SIDRReject, ucma.SIDRReject},
	} {
		if c.got != c.want {
			t.Errorf("cm.%s = %d, the kernel's %d", c.name, c.got, c.want)
		}
	}
}
