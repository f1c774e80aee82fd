package mlx5abi

import "github.com/mlx5go/mlx5go/internal/btfcheck"

// handConsts are the hand-written constants of abi.go that the kernel's
// BTF holds (anonymous enums the compiler kept): looked up among every
// enumerator of mlx5_ib's and mlx5_core's BTF. MLX5_CQ_ERROR_SYNDROME_*
// are not here: no kernel code uses that enum (nor struct
// mlx5_ifc_cq_error_bits), so neither module's BTF has it; where the
// syndrome sits is checked with the generated mlx5_eqe_cq_err.
var handConsts = []btfcheck.Const{
	{Name: "MLX5_QP_FLAG_SIGNATURE", Value: MLX5_QP_FLAG_SIGNATURE},
	{Name: "MLX5_QP_FLAG_SCATTER_CQE", Value: MLX5_QP_FLAG_SCATTER_CQE},
	{Name: "MLX5_QP_FLAG_TUNNEL_OFFLOADS", Value: MLX5_QP_FLAG_TUNNEL_OFFLOADS},
	{Name: "MLX5_QP_FLAG_BFREG_INDEX", Value: MLX5_QP_FLAG_BFREG_INDEX},
	{Name: "MLX5_QP_FLAG_TYPE_DCT", Value: MLX5_QP_FLAG_TYPE_DCT},
	{Name: "MLX5_QP_FLAG_TYPE_DCI", Value: MLX5_QP_FLAG_TYPE_DCI},
	{Name: "MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_UC", Value: MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_UC},
	{Name: "MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_MC", Value: MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_MC},
	{Name: "MLX5_QP_FLAG_ALLOW_SCATTER_CQE", Value: MLX5_QP_FLAG_ALLOW_SCATTER_CQE},
	{Name: "MLX5_QP_FLAG_PACKET_BASED_CREDIT_MODE", Value: MLX5_QP_FLAG_PACKET_BASED_CREDIT_MODE},
	{Name: "MLX5_QP_FLAG_UAR_PAGE_INDEX", Value: MLX5_QP_FLAG_UAR_PAGE_INDEX},
	{Name: "MLX5_QP_FLAG_DCI_STREAM", Value: MLX5_QP_FLAG_DCI_STREAM},
	{Name: "MLX5_IB_CREATE_QP_RESP_MASK_TIRN", Value: MLX5_IB_CREATE_QP_RESP_MASK_TIRN},
	{Name: "MLX5_IB_CREATE_QP_RESP_MASK_TISN", Value: MLX5_IB_CREATE_QP_RESP_MASK_TISN},
	{Name: "MLX5_IB_CREATE_QP_RESP_MASK_RQN", Value: MLX5_IB_CREATE_QP_RESP_MASK_RQN},
	{Name: "MLX5_IB_CREATE_QP_RESP_MASK_SQN", Value: MLX5_IB_CREATE_QP_RESP_MASK_SQN},
	{Name: "MLX5_IB_CREATE_QP_RESP_MASK_TIR_ICM_ADDR", Value: MLX5_IB_CREATE_QP_RESP_MASK_TIR_ICM_ADDR},
	{Name: "MLX5_SRQ_FLAG_SIGNATURE", Value: MLX5_SRQ_FLAG_SIGNATURE},
	{Name: "MLX5_EVENT_QUEUE_TYPE_QP", Value: MLX5_EVENT_QUEUE_TYPE_QP},
	{Name: "MLX5_EVENT_QUEUE_TYPE_RQ", Value: MLX5_EVENT_QUEUE_TYPE_RQ},
	{Name: "MLX5_EVENT_QUEUE_TYPE_SQ", Value: MLX5_EVENT_QUEUE_TYPE_SQ},
	{Name: "MLX5_EVENT_QUEUE_TYPE_DCT", Value: MLX5_EVENT_QUEUE_TYPE_DCT},
}
