package model

import (
	"context"

	"github.com/mlx5go/mlx5go/seam"
	"golang.org/x/sys/unix"
)

// The verbs objects of seam.Verbs: not modelled yet.

func notYet(call string) error { return kerr(call, unix.EOPNOTSUPP, "not modelled yet") }

func (d *Device) DriverContext() []byte { return nil }
func (d *Device) QueryPort(port uint8) (seam.PortAttr, error) {
	return seam.PortAttr{}, notYet("query port")
}
func (d *Device) QueryGIDTable() ([]seam.GIDEntry, error) { return nil, notYet("query gid table") }
func (d *Device) NextAsyncEvent(ctx context.Context) (seam.AsyncEvent, error) {
	return seam.AsyncEvent{}, notYet("async event")
}
func (d *Device) NewCompChannel() (seam.CompChannel, error) {
	return nil, notYet("create comp channel")
}
func (d *Device) CreateCQ(c seam.CQCreate, drvIn, drvOut []byte) (seam.Handle, uint32, error) {
	return 0, 0, notYet("create cq")
}
func (d *Device) DestroyCQ(h seam.Handle) error { return notYet("destroy cq") }
func (d *Device) CreateQP(q seam.QPCreate, drvIn, drvOut []byte) (seam.Handle, seam.QPCreated, error) {
	return 0, seam.QPCreated{}, notYet("create qp")
}
func (d *Device) ModifyQP(h seam.Handle, a *seam.QPAttr, mask uint32, drvIn, drvOut []byte) error {
	return notYet("modify qp")
}
func (d *Device) QueryQP(h seam.Handle, mask uint32) (seam.QPAttr, error) {
	return seam.QPAttr{}, notYet("query qp")
}
func (d *Device) DestroyQP(h seam.Handle) error { return notYet("destroy qp") }
func (d *Device) CreateSRQ(s seam.SRQCreate, drvIn, drvOut []byte) (seam.Handle, seam.SRQCreated, error) {
	return 0, seam.SRQCreated{}, notYet("create srq")
}
func (d *Device) ModifySRQ(h seam.Handle, limit uint32) error { return notYet("modify srq") }
func (d *Device) DestroySRQ(h seam.Handle) error              { return notYet("destroy srq") }
func (d *Device) CreateAH(pd seam.Handle, a *seam.AHAttr, userHandle uint64, drvOut []byte) (seam.Handle, error) {
	return 0, notYet("create ah")
}
func (d *Device) DestroyAH(h seam.Handle) error { return notYet("destroy ah") }
