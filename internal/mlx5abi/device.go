package mlx5abi

// The driver data of the extended query device (libibverbs'
// ibv_query_device_ex, IB_USER_VERBS_EX_CMD_QUERY_DEVICE): struct
// mlx5_ib_query_device_resp and what it nests, from <rdma/mlx5-abi.h> as
// Linux 6.1 has it. The kernel sends it only to a caller that passes a
// response buffer (UVERBS_ATTR_UHW_OUT), which libmlx5 does when
// GET_CONTEXT's cmds_supp_uhw has MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE.
// The kernel lab checks values and layouts against mlx5_ib's BTF
// (btf_lab_test.go, TestLabBTFMlx5QueryDevice).

// enum mlx5_ib_cqe_comp_res_format (mlx5_ib_cqe_comp_caps.supported_format).
const (
	MLX5_IB_CQE_RES_FORMAT_HASH        = 1 << 0
	MLX5_IB_CQE_RES_FORMAT_CSUM        = 1 << 1
	MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX = 1 << 2
)

// enum mlx5_ib_packet_pacing_cap_flags (mlx5_packet_pacing_caps.cap_flags).
const MLX5_IB_PP_SUPPORT_BURST = 1 << 0

// enum mlx5_ib_mpw_caps
// (mlx5_ib_query_device_resp.mlx5_ib_support_multi_pkt_send_wqes).
const (
	MPW_RESERVED         = 1 << 0
	MLX5_IB_ALLOW_MPW    = 1 << 1
	MLX5_IB_SUPPORT_EMPW = 1 << 2
)

// enum mlx5_ib_sw_parsing_offloads
// (mlx5_ib_sw_parsing_caps.sw_parsing_offloads).
const (
	MLX5_IB_SW_PARSING      = 1 << 0
	MLX5_IB_SW_PARSING_CSUM = 1 << 1
	MLX5_IB_SW_PARSING_LSO  = 1 << 2
)

// enum mlx5_ib_query_dev_resp_flags (mlx5_ib_query_device_resp.flags).
const (
	MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_COMP      = 1 << 0
	MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD       = 1 << 1
	MLX5_IB_QUERY_DEV_RESP_PACKET_BASED_CREDIT_MODE = 1 << 2
	MLX5_IB_QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT       = 1 << 3
)

// enum mlx5_ib_tunnel_offloads (mlx5_ib_query_device_resp.tunnel_offloads_caps).
const (
	MLX5_IB_TUNNELED_OFFLOADS_VXLAN    = 1 << 0
	MLX5_IB_TUNNELED_OFFLOADS_GRE      = 1 << 1
	MLX5_IB_TUNNELED_OFFLOADS_GENEVE   = 1 << 2
	MLX5_IB_TUNNELED_OFFLOADS_MPLS_GRE = 1 << 3
	MLX5_IB_TUNNELED_OFFLOADS_MPLS_UDP = 1 << 4
)

// Mlx5IbTsoCaps is struct mlx5_ib_tso_caps. SupportedQpts has bit n set
// for QP type n (enum ib_qp_type).
type Mlx5IbTsoCaps struct {
	MaxTso        uint32
	SupportedQpts uint32
}

// Mlx5IbRssCaps is struct mlx5_ib_rss_caps.
type Mlx5IbRssCaps struct {
	RxHashFieldsMask uint64 // enum mlx5_rx_hash_fields
	RxHashFunction   uint8  // enum mlx5_rx_hash_function_flags
	Reserved         [7]uint8
}

// Mlx5IbCqeCompCaps is struct mlx5_ib_cqe_comp_caps.
type Mlx5IbCqeCompCaps struct {
	MaxNum          uint32
	SupportedFormat uint32 // MLX5_IB_CQE_RES_FORMAT_*
}

// Mlx5PacketPacingCaps is struct mlx5_packet_pacing_caps (rates in kbit/s).
type Mlx5PacketPacingCaps struct {
	QpRateLimitMin uint32
	QpRateLimitMax uint32
	SupportedQpts  uint32
	CapFlags       uint8 // MLX5_IB_PP_SUPPORT_*
	Reserved       [3]uint8
}

// Mlx5IbSwParsingCaps is struct mlx5_ib_sw_parsing_caps.
type Mlx5IbSwParsingCaps struct {
	SwParsingOffloads uint32 // MLX5_IB_SW_PARSING*
	SupportedQpts     uint32
}

// Mlx5IbStridingRqCaps is struct mlx5_ib_striding_rq_caps.
type Mlx5IbStridingRqCaps struct {
	MinSingleStrideLogNumOfBytes uint32
	MaxSingleStrideLogNumOfBytes uint32
	MinSingleWqeLogNumOfStrides  uint32
	MaxSingleWqeLogNumOfStrides  uint32
	SupportedQpts                uint32
	Reserved                     uint32
}

// Mlx5IbDciStreamsCaps is struct mlx5_ib_dci_streams_caps: the largest
// log2 of a DCI's stream channels and of its errored streams
// (struct mlx5_ib_create_qp_dci_streams asks for them).
type Mlx5IbDciStreamsCaps struct {
	MaxLogNumConcurent uint8
	MaxLogNumErrored   uint8
}

// Mlx5IbQueryDeviceResp is struct mlx5_ib_query_device_resp, the driver
// data of the extended query device. ResponseLength is how many of its
// bytes the kernel filled: it adds each part only if the caller's buffer
// holds it whole.
type Mlx5IbQueryDeviceResp struct {
	CompMask                      uint32
	ResponseLength                uint32
	TsoCaps                       Mlx5IbTsoCaps
	RssCaps                       Mlx5IbRssCaps
	CqeCompCaps                   Mlx5IbCqeCompCaps
	PacketPacingCaps              Mlx5PacketPacingCaps
	Mlx5IbSupportMultiPktSendWqes uint32 // MLX5_IB_ALLOW_MPW, MLX5_IB_SUPPORT_EMPW
	Flags                         uint32 // MLX5_IB_QUERY_DEV_RESP_*
	SwParsingCaps                 Mlx5IbSwParsingCaps
	StridingRqCaps                Mlx5IbStridingRqCaps
	TunnelOffloadsCaps            uint32 // MLX5_IB_TUNNELED_OFFLOADS_*
	DciStreamsCaps                Mlx5IbDciStreamsCaps
	Reserved                      uint16
}

// SizeofMlx5IbQueryDeviceResp is sizeof(struct mlx5_ib_query_device_resp)
// in Linux 6.1: the UHW_OUT libmlx5 44.0 passes.
const SizeofMlx5IbQueryDeviceResp = 104
