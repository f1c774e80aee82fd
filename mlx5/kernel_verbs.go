package mlx5

import (
	"context"
	"fmt"

	"github.com/mlx5go/mlx5go/seam"
	"golang.org/x/sys/unix"
)

// The verbs objects of seam.Verbs over uverbs: not implemented yet.

func kernelNotYet(call string) error { return fmt.Errorf("mlx5: %s: %w", call, unix.EOPNOTSUPP) }

func (k *kernelDevice) DriverContext() []byte { return nil }
func (k *kernelDevice) QueryPort(port uint8) (seam.PortAttr, error) {
	return seam.PortAttr{}, kernelNotYet("query port")
}
func (k *kernelDevice) QueryGIDTable() ([]seam.GIDEntry, error) {
	return nil, kernelNotYet("query gid table")
}
func (k *kernelDevice) NextAsyncEvent(ctx context.Context) (seam.AsyncEvent, error) {
	return seam.AsyncEvent{}, kernelNotYet("async event")
}
func (k *kernelDevice) NewCompChannel() (seam.CompChannel, error) {
	return nil, kernelNotYet("create comp channel")
}
func (k *kernelDevice) CreateCQ(c seam.CQCreate, drvIn, drvOut []byte) (seam.Handle, uint32, error) {
	return 0, 0, kernelNotYet("create cq")
}
func (k *kernelDevice) DestroyCQ(h seam.Handle) error { return kernelNotYet("destroy cq") }
func (k *kernelDevice) CreateQP(q seam.QPCreate, drvIn, drvOut []byte) (seam.Handle, seam.QPCreated, error) {
	return 0, seam.QPCreated{}, kernelNotYet("create qp")
}
func (k *kernelDevice) ModifyQP(h seam.Handle, a *seam.QPAttr, mask uint32, drvIn, drvOut []byte) error {
	return kernelNotYet("modify qp")
}
func (k *kernelDevice) QueryQP(h seam.Handle, mask uint32) (seam.QPAttr, error) {
	return seam.QPAttr{}, kernelNotYet("query qp")
}
func (k *kernelDevice) DestroyQP(h seam.Handle) error { return kernelNotYet("destroy qp") }
func (k *kernelDevice) CreateSRQ(s seam.SRQCreate, drvIn, drvOut []byte) (seam.Handle, seam.SRQCreated, error) {
	return 0, seam.SRQCreated{}, kernelNotYet("create srq")
}
func (k *kernelDevice) ModifySRQ(h seam.Handle, limit uint32) error {
	return kernelNotYet("modify srq")
}
func (k *kernelDevice) DestroySRQ(h seam.Handle) error { return kernelNotYet("destroy srq") }
func (k *kernelDevice) CreateAH(pd seam.Handle, a *seam.AHAttr, userHandle uint64, drvOut []byte) (seam.Handle, error) {
	return 0, kernelNotYet("create ah")
}
func (k *kernelDevice) DestroyAH(h seam.Handle) error { return kernelNotYet("destroy ah") }
