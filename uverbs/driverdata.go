package uverbs

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/rxeabi"
)

// DriverOutSizes are the least driver data out (CQOptions.DriverOut,
// QPInit.DriverOut, SRQOptions.DriverOut) a provider's kernel driver
// takes with a create: it writes its answer there (rxe: where to mmap the
// new queue) and refuses the create with a bare EINVAL if the buffer is
// shorter. Zero is none.
type DriverOutSizes struct {
	CQ, QP, SRQ int
}

// DriverOutSizesOf returns the sizes the kernel driver id requires, and
// false for a driver this package knows nothing of. It knows rxe's
// (<rdma/rdma_user_rxe.h>: struct rxe_create_cq_resp, rxe_create_qp_resp,
// rxe_create_srq_resp); mlx5's driver data is package mlx5's own.
func DriverOutSizesOf(id DriverID) (DriverOutSizes, bool) {
	d, ok := driverOuts[id]
	if !ok {
		return DriverOutSizes{}, false
	}
	return DriverOutSizes{CQ: d.cq.size, QP: d.qp.size, SRQ: d.srq.size}, true
}

// driverOut is what a provider's kernel driver writes into a create's
// driver data out: its size and the C struct.
type driverOut struct {
	size    int
	cstruct string
}

// driverOuts are the providers whose driver data out this package knows,
// by driver.
var driverOuts = map[DriverID]struct {
	name        string
	cq, qp, srq driverOut
}{
	DriverRXE: {name: "rxe",
		cq:  driverOut{int(unsafe.Sizeof(rxeabi.RxeCreateCqResp{})), "struct rxe_create_cq_resp"},
		qp:  driverOut{int(unsafe.Sizeof(rxeabi.RxeCreateQpResp{})), "struct rxe_create_qp_resp"},
		srq: driverOut{int(unsafe.Sizeof(rxeabi.RxeCreateSrqResp{})), "struct rxe_create_srq_resp"}},
}

// Objects a create's driver data out is checked for.
const (
	outCQ = iota
	outQP
	outSRQ
)

// noteDriverOut explains an EINVAL of a create (object kind, its options'
// field and the bytes it had) that the context's provider gives when the
// driver data out is too short for its answer, which the kernel does not
// say. Other errors come back as they are.
func (c *Context) noteDriverOut(err error, kind int, field string, have int) error {
	d, ok := driverOuts[c.driverID]
	if err == nil || !ok || !errors.Is(err, unix.EINVAL) {
		return err
	}
	need := [...]driverOut{outCQ: d.cq, outQP: d.qp, outSRQ: d.srq}[kind]
	if have >= need.size {
		return err
	}
	return fmt.Errorf("%w: %s's kernel driver needs %d bytes of driver data out (%s) for its answer; %s has %d (DriverOutSizesOf gives the sizes)",
		err, d.name, need.size, need.cstruct, field, have)
}
