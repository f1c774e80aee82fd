// Package uverbs speaks the Linux kernel's RDMA user verbs ABI (ib_uverbs)
// in pure Go: device discovery through sysfs and RDMA netlink, the
// RDMA_VERBS_IOCTL method calls, and the kernel objects they create.
//
// It is the generic half of the driver and knows nothing of mlx5: providers
// (package mlx5) pass their driver-specific data through it as opaque
// attributes. It imports only golang.org/x/sys/unix and mlx5go's internal
// netlink client.
//
// Open returns a Context; on it live PDs, MRs, CQs, completion channels,
// QPs, AHs and SRQs, each with an idempotent Close, all released when the
// Context closes. Async events and completion events are read through the
// Go runtime's netpoller with a context.Context. Calls use RDMA_VERBS_IOCTL
// and fall back to the legacy write() ABI only where the kernel has nothing
// else (docs/UVERBS.md). Every failure is an error that names the call and
// wraps the kernel's errno.
//
// The ABI mirror (abi*.go, nldev.go) keeps the kernel's own names for
// constants and structs, each naming the uapi header it comes from, so it can
// be grepped against the kernel and rdma-core; the kernel lab checks every
// value and layout against the running kernel's BTF.
package uverbs
