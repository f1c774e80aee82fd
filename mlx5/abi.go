package mlx5

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
