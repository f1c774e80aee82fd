// Package ucma speaks the Linux kernel's RDMA connection manager ABI
// (rdma_ucm) in pure Go: the commands written to /dev/infiniband/rdma_cm
// that librdmacm writes, one call per command, and the file's events,
// waited for in the Go runtime's netpoller with a context.
//
// A File is one open /dev/infiniband/rdma_cm, librdmacm's
// rdma_event_channel: the ids created on it (rdma_cm_id) report their
// events there. Its methods are the commands of <rdma/rdma_user_cm.h>:
// create and destroy an id, bind, resolve an address and a route, query
// the address, the route and the path records, listen, connect, accept,
// reject, disconnect, the QP attributes for a state (init_qp_attr), set an
// option, notify, migrate an id to another File, and take the next event.
// Each returns an error that names the command and the id and wraps the
// kernel's errno.
//
// It is the generic half of the connection manager and knows nothing of
// mlx5, and nothing of QPs beyond the numbers and attributes the commands
// carry: package cm builds connections over it. The ABI mirror with the
// kernel's names is internal/ucmaabi, checked against the lab kernels'
// BTF. It imports only golang.org/x/sys/unix and mlx5go's internal
// packages.
//
// Addresses are AF_INET and AF_INET6 (netip.AddrPort); an IPv6 zone is a
// scope id, by number or interface name. AF_IB addresses and multicast
// are not supported.
package ucma
