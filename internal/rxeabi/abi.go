// Package rxeabi mirrors the driver data of rxe, the kernel's soft RoCE
// provider (rdma_rxe): the responses of <rdma/rdma_user_rxe.h> that its
// kernel driver writes into a create's UVERBS_ATTR_UHW_OUT, and refuses
// the create with EINVAL when that buffer is shorter than them
// (rxe_create_cq, rxe_create_qp and rxe_create_srq in
// drivers/infiniband/sw/rxe/rxe_verbs.c check udata->outlen against
// sizeof). Names are the kernel's, one Go struct per C struct with fields
// in C order; the kernel lab checks every layout against rdma_rxe's BTF
// (btf_lab_test.go), and layout_test.go against the header everywhere.
//
// It holds facts, no logic: package uverbs uses the sizes to say what a
// refused create lacked. It is internal, so that uverbs' users see Go
// names only.
package rxeabi

import "structs"

// Mminfo is struct mminfo: where to mmap one of rxe's queues (the offset
// on the uverbs device file) and its size.
type Mminfo struct {
	_      structs.HostLayout
	Offset uint64
	Size   uint32
	Pad    uint32
}

// RxeCreateCqResp is struct rxe_create_cq_resp: the driver data out of
// CQ creation.
type RxeCreateCqResp struct {
	_  structs.HostLayout
	Mi Mminfo
}

// RxeCreateQpResp is struct rxe_create_qp_resp: the driver data out of
// QP creation (a QP on an SRQ has no receive queue of its own, and
// rq_mi stays zero).
type RxeCreateQpResp struct {
	_    structs.HostLayout
	RqMi Mminfo
	SqMi Mminfo
}

// RxeCreateSrqResp is struct rxe_create_srq_resp: the driver data out of
// SRQ creation.
type RxeCreateSrqResp struct {
	_        structs.HostLayout
	Mi       Mminfo
	SrqNum   uint32
	Reserved uint32
}
