// Package uverbs speaks the Linux kernel's RDMA user verbs ABI (ib_uverbs)
// in pure Go: device discovery through sysfs and RDMA netlink, the
// RDMA_VERBS_IOCTL method calls, and the kernel objects they create.
//
// It is the generic half of the driver and knows nothing of mlx5: providers
// (package mlx5) pass their driver-specific data through it as opaque
// attributes. The one provider fact it holds is the size of the driver
// data out rxe's kernel driver requires with a create (DriverOutSizesOf),
// so that the bare EINVAL rxe gives without it becomes an error that says
// what is missing. It imports only golang.org/x/sys/unix and mlx5go's
// internal netlink client, netpoller descriptors and ABI mirrors
// (internal/uverbsabi, and internal/rxeabi for rxe's sizes).
//
// Open returns a Context; on it live PDs, MRs, CQs, completion channels,
// QPs, AHs and SRQs, each with an idempotent Close, all released when the
// Context closes. Async events and completion events are read through the
// Go runtime's netpoller with a context.Context. Calls use RDMA_VERBS_IOCTL
// and fall back to the legacy write() ABI only where the kernel has nothing
// else (docs/UVERBS.md). Every failure is an error that names the call and
// wraps the kernel's errno.
//
// Its API speaks Go names (AccessFlags, QPType, DriverID, DeviceCapFlags,
// Attr, ...), each constant's comment naming the C enumerator it stands
// for. The kernel's own names for the ABI it sends and decodes (uapi
// structs, object, method and attribute ids, write() commands) live in
// internal/uverbsabi, generated from the kernel's BTF and checked against
// every kernel the lab boots; TestGoNamesAreTheKernels keeps the Go names'
// values equal to them.
package uverbs
