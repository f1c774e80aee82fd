// Package mlx5abi mirrors the mlx5 provider's kernel ABI: the uapi
// headers <rdma/mlx5-abi.h>, <rdma/mlx5_user_ioctl_cmds.h> and
// <rdma/mlx5_user_ioctl_verbs.h> (driver data, DEVX object, method and
// attribute ids) and the kernel-internal event queue entry a DEVX event
// carries (<linux/mlx5/device.h>). Names are the kernel's, one Go struct
// per C struct with fields in C order.
//
// The enums and structs are generated from the kernel's BTF by
// internal/cmd/abigen (one file per header, internal/abigen's spec), with
// the tables the kernel lab checks against each kernel it boots
// (generated_btf_test.go, btf_lab_test.go). This file holds what BTF does
// not: macros, anonymous enums and a struct no kernel code uses; the lab
// checks the anonymous enums that BTF keeps.
//
// It holds facts, no logic: package mlx5 uses it, and so may the software
// device model, as it uses prm's layouts. It is internal, so that mlx5's
// users see Go names only.
package mlx5abi

import "structs"

// QP creation flags, the anonymous enum of MLX5_QP_FLAG_* in
// <rdma/mlx5-abi.h> (struct mlx5_ib_create_qp.flags).
const (
	MLX5_QP_FLAG_SIGNATURE                = 1 << 0
	MLX5_QP_FLAG_SCATTER_CQE              = 1 << 1
	MLX5_QP_FLAG_TUNNEL_OFFLOADS          = 1 << 2
	MLX5_QP_FLAG_BFREG_INDEX              = 1 << 3
	MLX5_QP_FLAG_TYPE_DCT                 = 1 << 4
	MLX5_QP_FLAG_TYPE_DCI                 = 1 << 5
	MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_UC     = 1 << 6
	MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_MC     = 1 << 7
	MLX5_QP_FLAG_ALLOW_SCATTER_CQE        = 1 << 8
	MLX5_QP_FLAG_PACKET_BASED_CREDIT_MODE = 1 << 9
	MLX5_QP_FLAG_UAR_PAGE_INDEX           = 1 << 10
	MLX5_QP_FLAG_DCI_STREAM               = 1 << 11
)

// The anonymous enum of MLX5_IB_CREATE_QP_RESP_MASK_* in <rdma/mlx5-abi.h>
// (mlx5_ib_create_qp_resp.comp_mask): which of its fields the kernel set.
const (
	MLX5_IB_CREATE_QP_RESP_MASK_TIRN         = 1 << 0
	MLX5_IB_CREATE_QP_RESP_MASK_TISN         = 1 << 1
	MLX5_IB_CREATE_QP_RESP_MASK_RQN          = 1 << 2
	MLX5_IB_CREATE_QP_RESP_MASK_SQN          = 1 << 3
	MLX5_IB_CREATE_QP_RESP_MASK_TIR_ICM_ADDR = 1 << 4
)

// MLX5_SRQ_FLAG_SIGNATURE is the one SRQ creation flag of an anonymous
// enum in <rdma/mlx5-abi.h> (mlx5_ib_create_srq.flags): receive WQEs carry
// a signature.
const MLX5_SRQ_FLAG_SIGNATURE = 1 << 0

// Mlx5IbCreateCqResp is struct mlx5_ib_create_cq_resp (<rdma/mlx5-abi.h>).
// It is not in mlx5_ib's BTF (the kernel copies the cqn alone), so it is
// written here; TestCreateCQRespSize checks it against the response
// libmlx5 asked for.
type Mlx5IbCreateCqResp struct {
	_        structs.HostLayout
	Cqn      uint32
	Reserved uint32
}

// The anonymous enum of event queue types in <linux/mlx5/device.h>
// (struct mlx5_eqe_qp_srq.type).
const (
	MLX5_EVENT_QUEUE_TYPE_QP  = 0
	MLX5_EVENT_QUEUE_TYPE_RQ  = 1
	MLX5_EVENT_QUEUE_TYPE_SQ  = 2
	MLX5_EVENT_QUEUE_TYPE_DCT = 6
)

// The anonymous enum of CQ error syndromes in <linux/mlx5/mlx5_ifc.h>
// (struct mlx5_eqe_cq_err.syndrome). No kernel code uses them, so they are
// not in the kernel's BTF and the lab cannot check them.
const (
	MLX5_CQ_ERROR_SYNDROME_CQ_OVERRUN                = 0x1
	MLX5_CQ_ERROR_SYNDROME_CQ_ACCESS_VIOLATION_ERROR = 0x2
)
