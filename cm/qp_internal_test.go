package cm

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/mlx5"
)

// TestQPAttrOfAccess: the access bits 6.2 and later kernels add for a
// device that can FLUSH (rxe's 0x300, seen in the lab on 6.12 and 7.x)
// are left out; the remote rights are kept.
func TestQPAttrOfAccess(t *testing.T) {
	a, m, err := qpAttrOf(&seam.QPAttr{State: 1, AccessFlags: 0x30e, Port: 1}, 0x39)
	if err != nil {
		t.Fatal(err)
	}
	if a.Access != mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead|mlx5.AccessRemoteAtomic || a.State != mlx5.QPStateInit || a.Port != 1 || m != 0x39 {
		t.Errorf("%+v, mask %#x", a, m)
	}
	if _, _, err := qpAttrOf(&seam.QPAttr{State: 2}, 0x1|maskAltPath); err == nil {
		t.Error("an alternate path was taken")
	}
}
