// Package uverbs speaks the Linux kernel's RDMA user verbs ABI (ib_uverbs)
// in pure Go: device discovery through sysfs and RDMA netlink, the
// RDMA_VERBS_IOCTL method calls, and the kernel objects they create.
//
// It is the generic half of the driver and knows nothing of mlx5: providers
// (package mlx5) pass their driver-specific data through it as opaque
// attributes. It imports only golang.org/x/sys/unix and mlx5go's internal
// netlink client.
//
// The ABI mirror (abi.go, nldev.go) keeps the kernel's own names for
// constants and structs, each naming the uapi header it comes from, so it can
// be grepped against the kernel and rdma-core; the kernel lab checks every
// value and layout against the running kernel's BTF.
package uverbs
