// Package mlx5abi mirrors the mlx5 provider's kernel ABI: the uapi
// headers <rdma/mlx5-abi.h>, <rdma/mlx5_user_ioctl_cmds.h> and
// <rdma/mlx5_user_ioctl_verbs.h> (driver data, DEVX object, method and
// attribute ids) and the kernel-internal event queue entry a DEVX event
// carries. Names are the kernel's, one Go struct per C struct with fields
// in C order; the kernel lab checks every value and layout against
// mlx5_ib's and mlx5_core's BTF (btf_lab_test.go).
//
// It holds facts, no logic: package mlx5 uses it, and so may the software
// device model, as it uses prm's layouts. It is internal, so that mlx5's
// users see Go names only.
package mlx5abi

// mlx5 provider ABI mirror of <rdma/mlx5-abi.h> and
// <rdma/mlx5_user_ioctl_verbs.h>: the driver data of GET_CONTEXT and the
// DEVX async completion header. Names are the kernel's; the kernel lab
// checks values and layouts against mlx5_ib's BTF (uapi_lab_test.go).

// enum mlx5_lib_caps.
const (
	MLX5_LIB_CAP_4K_UAR  = 1 << 0
	MLX5_LIB_CAP_DYN_UAR = 1 << 1
)

// enum mlx5_ib_alloc_uctx_v2_flags.
const MLX5_IB_ALLOC_UCTX_DEVX = 1 << 0

// enum mlx5_ib_alloc_ucontext_resp_mask.
const (
	MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET = 1 << 0
	MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY    = 1 << 1
	MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE               = 1 << 2
	MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS           = 1 << 3
	MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS      = 1 << 4
	MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_MKEY_UPDATE_TAG   = 1 << 5
)

// enum mlx5_ib_uapi_uar_alloc_type.
const (
	MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF = 0
	MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC = 1
)

// Mlx5IbAllocUcontextReqV2 is struct mlx5_ib_alloc_ucontext_req_v2.
type Mlx5IbAllocUcontextReqV2 struct {
	TotalNumBfregs      uint32
	NumLowLatencyBfregs uint32
	Flags               uint32
	CompMask            uint32
	MaxCqeVersion       uint8
	Reserved0           uint8
	Reserved1           uint16
	Reserved2           uint32
	LibCaps             uint64
}

// Mlx5IbAllocUcontextResp is struct mlx5_ib_alloc_ucontext_resp.
type Mlx5IbAllocUcontextResp struct {
	QpTabSize         uint32
	BfRegSize         uint32
	TotBfregs         uint32
	CacheLineSize     uint32
	MaxSqDescSz       uint16
	MaxRqDescSz       uint16
	MaxSendWqebb      uint32
	MaxRecvWr         uint32
	MaxSrqRecvWr      uint32
	NumPorts          uint16
	FlowActionFlags   uint16
	CompMask          uint32
	ResponseLength    uint32
	CqeVersion        uint8
	CmdsSuppUhw       uint8
	EthMinInline      uint8
	ClockInfoVersions uint8
	HcaCoreClockOff   uint64
	LogUarSize        uint32
	NumUarsPerPage    uint32
	NumDynBfregs      uint32
	DumpFillMkey      uint32
}

// Mlx5IbUapiDevxAsyncCmdHdr is struct mlx5_ib_uapi_devx_async_cmd_hdr
// without its out_data[].
type Mlx5IbUapiDevxAsyncCmdHdr struct {
	WrID uint64
}

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

// enum mlx5_ib_create_cq_flags.
const (
	MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD   = 1 << 0
	MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX = 1 << 1
	MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS   = 1 << 2
)

// Mlx5IbCreateCq is struct mlx5_ib_create_cq, the driver data of CQ
// creation.
type Mlx5IbCreateCq struct {
	BufAddr          uint64
	DbAddr           uint64
	CqeSize          uint32
	CqeCompEn        uint8
	CqeCompResFormat uint8
	Flags            uint16
	UarPageIndex     uint16
	Reserved0        uint16
	Reserved1        uint32
}

// Mlx5IbCreateCqResp is struct mlx5_ib_create_cq_resp.
type Mlx5IbCreateCqResp struct {
	Cqn      uint32
	Reserved uint32
}

// Mlx5IbCreateQpDciStreams is struct mlx5_ib_create_qp_dci_streams.
type Mlx5IbCreateQpDciStreams struct {
	LogNumConcurent uint8
	LogNumErrored   uint8
}

// Mlx5IbCreateQp is struct mlx5_ib_create_qp, the driver data of QP
// creation. SqBufAddr is the union of sq_buf_addr and access_key.
type Mlx5IbCreateQp struct {
	BufAddr    uint64
	DbAddr     uint64
	SqWqeCount uint32
	RqWqeCount uint32
	RqWqeShift uint32
	Flags      uint32
	Uidx       uint32
	BfregIndex uint32
	SqBufAddr  uint64
	EceOptions uint32
	DciStreams Mlx5IbCreateQpDciStreams
	Reserved   uint16
}

// Mlx5IbCreateQpResp is struct mlx5_ib_create_qp_resp.
type Mlx5IbCreateQpResp struct {
	BfregIndex uint32
	EceOptions uint32
	CompMask   uint32
	Tirn       uint32
	Tisn       uint32
	Rqn        uint32
	Sqn        uint32
	Reserved1  uint32
	TirIcmAddr uint64
}

// Mlx5IbAllocPdResp is struct mlx5_ib_alloc_pd_resp.
type Mlx5IbAllocPdResp struct {
	Pdn uint32
}

// enum in <rdma/mlx5-abi.h>: struct mlx5_ib_create_srq.flags.
const MLX5_SRQ_FLAG_SIGNATURE = 1 << 0

// Mlx5IbCreateSrq is struct mlx5_ib_create_srq, the driver data of SRQ
// creation.
type Mlx5IbCreateSrq struct {
	BufAddr   uint64
	DbAddr    uint64
	Flags     uint32
	Reserved0 uint32
	Uidx      uint32
	Reserved1 uint32
}

// Mlx5IbCreateSrqResp is struct mlx5_ib_create_srq_resp.
type Mlx5IbCreateSrqResp struct {
	Srqn     uint32
	Reserved uint32
}

// Mlx5IbCreateAhResp is struct mlx5_ib_create_ah_resp: the destination
// MAC the kernel resolved for a RoCE address handle.
type Mlx5IbCreateAhResp struct {
	ResponseLength uint32
	Dmac           [6]byte
	Reserved       [6]byte
}

// Mlx5IbBurstInfo is struct mlx5_ib_burst_info.
type Mlx5IbBurstInfo struct {
	MaxBurstSz   uint32
	TypicalPktSz uint16
	Reserved     uint16
}

// Mlx5IbModifyQp is struct mlx5_ib_modify_qp, the driver data of a QP
// modify.
type Mlx5IbModifyQp struct {
	CompMask   uint32
	BurstInfo  Mlx5IbBurstInfo
	EceOptions uint32
}

// Mlx5IbModifyQpResp is struct mlx5_ib_modify_qp_resp: the DCT number a
// DCT gets when it enters RTR, and the ECE options the device answered.
type Mlx5IbModifyQpResp struct {
	ResponseLength uint32
	Dctn           uint32
	EceOptions     uint32
	Reserved       uint32
}
