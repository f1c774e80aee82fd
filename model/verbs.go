package model

import (
	"github.com/mlx5go/mlx5go/seam"
	"golang.org/x/sys/unix"
)

// AllocPD is not modelled yet.
func (d *Device) AllocPD() (seam.Handle, uint32, error) {
	return 0, 0, kerr("alloc pd", unix.EOPNOTSUPP, "not modelled yet")
}

// DeallocPD is not modelled yet.
func (d *Device) DeallocPD(h seam.Handle) error {
	return kerr("dealloc pd", unix.EOPNOTSUPP, "not modelled yet")
}

// RegMR is not modelled yet.
func (d *Device) RegMR(pd seam.Handle, mem []byte, access uint32) (seam.MR, error) {
	return seam.MR{}, kerr("reg mr", unix.EOPNOTSUPP, "not modelled yet")
}

// DeregMR is not modelled yet.
func (d *Device) DeregMR(h seam.Handle) error {
	return kerr("dereg mr", unix.EOPNOTSUPP, "not modelled yet")
}
