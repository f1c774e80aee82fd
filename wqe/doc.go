// Package wqe encodes mlx5 work queue entries and decodes completion queue
// entries: control, remote address, data, UMR control, mkey context, BSF
// signature and PSV segments, and the NOPs that replace canceled work
// requests, one small function per segment writing into a caller's buffer.
//
// It is a pure encoder: no syscalls, no allocation on its hot path. It
// imports only the standard library, prm (the mkey context layout) and sig
// (the block signature configuration the BSF and SET_PSV encode). Its
// output is checked byte for byte against what rdma-core's libmlx5 writes
// (../shared/oracle vectors).
package wqe
