package uverbs

// Kernel ABI mirror for the device queries: query device (extended) and the
// GID table. Names are the kernel's; every value and layout here is listed
// in btf_device_test.go and checked against the running kernel's BTF in the
// kernel lab (TestLabBTFUverbs), except the preprocessor macros, which BTF
// does not carry (see the note on each).

// From <rdma/ib_user_verbs.h>. These are #defines, absent from BTF; the
// extended flag is checked against the command libibverbs sent in the oracle
// vectors (TestOracleQueryDeviceEx).
const (
	IB_USER_VERBS_CMD_COMMAND_MASK  = 0xff
	IB_USER_VERBS_CMD_FLAG_EXTENDED = 0x80000000
)

// Extended write commands, anonymous enum in <rdma/ib_user_verbs.h> (the
// values used). On the ioctl path they are sent as
// IB_USER_VERBS_CMD_FLAG_EXTENDED|cmd.
const (
	IB_USER_VERBS_EX_CMD_QUERY_DEVICE = IB_USER_VERBS_CMD_QUERY_DEVICE
)

// enum uverbs_attrs_query_gid_table_cmd_attr_ids, <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE       = 0
	UVERBS_ATTR_QUERY_GID_TABLE_FLAGS            = 1
	UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES     = 2
	UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES = 3
)

// enum uverbs_attrs_query_gid_entry_cmd_attr_ids, <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_QUERY_GID_ENTRY_PORT       = 0
	UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX  = 1
	UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS      = 2
	UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY = 3
)

// enum ib_uverbs_gid_type, <rdma/ib_user_ioctl_verbs.h>.
const (
	IB_UVERBS_GID_TYPE_IB      = 0
	IB_UVERBS_GID_TYPE_ROCE_V1 = 1
	IB_UVERBS_GID_TYPE_ROCE_V2 = 2
)

// enum ib_uverbs_device_cap_flags, <rdma/ib_user_verbs.h>. The low 32 bits
// are ib_uverbs_query_device_resp.device_cap_flags; all 64 are
// ib_uverbs_ex_query_device_resp.device_cap_flags_ex.
const (
	IB_UVERBS_DEVICE_RESIZE_MAX_WR         = 1 << 0
	IB_UVERBS_DEVICE_BAD_PKEY_CNTR         = 1 << 1
	IB_UVERBS_DEVICE_BAD_QKEY_CNTR         = 1 << 2
	IB_UVERBS_DEVICE_RAW_MULTI             = 1 << 3
	IB_UVERBS_DEVICE_AUTO_PATH_MIG         = 1 << 4
	IB_UVERBS_DEVICE_CHANGE_PHY_PORT       = 1 << 5
	IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE    = 1 << 6
	IB_UVERBS_DEVICE_CURR_QP_STATE_MOD     = 1 << 7
	IB_UVERBS_DEVICE_SHUTDOWN_PORT         = 1 << 8
	IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT     = 1 << 10
	IB_UVERBS_DEVICE_SYS_IMAGE_GUID        = 1 << 11
	IB_UVERBS_DEVICE_RC_RNR_NAK_GEN        = 1 << 12
	IB_UVERBS_DEVICE_SRQ_RESIZE            = 1 << 13
	IB_UVERBS_DEVICE_N_NOTIFY_CQ           = 1 << 14
	IB_UVERBS_DEVICE_MEM_WINDOW            = 1 << 17
	IB_UVERBS_DEVICE_UD_IP_CSUM            = 1 << 18
	IB_UVERBS_DEVICE_XRC                   = 1 << 20
	IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS    = 1 << 21
	IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A    = 1 << 23
	IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B    = 1 << 24
	IB_UVERBS_DEVICE_RC_IP_CSUM            = 1 << 25
	IB_UVERBS_DEVICE_RAW_IP_CSUM           = 1 << 26
	IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING = 1 << 29
	IB_UVERBS_DEVICE_RAW_SCATTER_FCS       = 1 << 34
	IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING = 1 << 36
)

// enum ib_uverbs_raw_packet_caps, <rdma/ib_user_verbs.h>.
const (
	IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING = 1 << 0
	IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS     = 1 << 1
	IB_UVERBS_RAW_PACKET_CAP_IP_CSUM         = 1 << 2
	IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP      = 1 << 3
)

// IbUverbsQueryDeviceResp is struct ib_uverbs_query_device_resp,
// <rdma/ib_user_verbs.h>. NodeGuid and SysImageGuid are big-endian (__be64)
// as the kernel stores them.
type IbUverbsQueryDeviceResp struct {
	FwVer                 uint64
	NodeGuid              uint64
	SysImageGuid          uint64
	MaxMrSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HwVer                 uint32
	MaxQp                 uint32
	MaxQpWr               uint32
	DeviceCapFlags        uint32
	MaxSge                uint32
	MaxSgeRd              uint32
	MaxCq                 uint32
	MaxCqe                uint32
	MaxMr                 uint32
	MaxPd                 uint32
	MaxQpRdAtom           uint32
	MaxEeRdAtom           uint32
	MaxResRdAtom          uint32
	MaxQpInitRdAtom       uint32
	MaxEeInitRdAtom       uint32
	AtomicCap             uint32
	MaxEe                 uint32
	MaxRdd                uint32
	MaxMw                 uint32
	MaxRawIpv6Qp          uint32
	MaxRawEthyQp          uint32
	MaxMcastGrp           uint32
	MaxMcastQpAttach      uint32
	MaxTotalMcastQpAttach uint32
	MaxAh                 uint32
	MaxFmr                uint32
	MaxMapPerFmr          uint32
	MaxSrq                uint32
	MaxSrqWr              uint32
	MaxSrqSge             uint32
	MaxPkeys              uint16
	LocalCaAckDelay       uint8
	PhysPortCnt           uint8
	Reserved              [4]uint8
}

// IbUverbsExQueryDevice is struct ib_uverbs_ex_query_device,
// <rdma/ib_user_verbs.h>, the extended query's request.
type IbUverbsExQueryDevice struct {
	CompMask uint32
	Reserved uint32
}

// IbUverbsOdpCaps is struct ib_uverbs_odp_caps, <rdma/ib_user_verbs.h>.
// RcOdpCaps, UcOdpCaps and UdOdpCaps are its per_transport_caps.
type IbUverbsOdpCaps struct {
	GeneralCaps uint64
	RcOdpCaps   uint32
	UcOdpCaps   uint32
	UdOdpCaps   uint32
	Reserved    uint32
}

// IbUverbsRssCaps is struct ib_uverbs_rss_caps, <rdma/ib_user_verbs.h>.
type IbUverbsRssCaps struct {
	SupportedQpts              uint32
	MaxRwqIndirectionTables    uint32
	MaxRwqIndirectionTableSize uint32
	Reserved                   uint32
}

// IbUverbsTmCaps is struct ib_uverbs_tm_caps, <rdma/ib_user_verbs.h>.
type IbUverbsTmCaps struct {
	MaxRndvHdrSize uint32
	MaxNumTags     uint32
	Flags          uint32
	MaxOps         uint32
	MaxSge         uint32
	Reserved       uint32
}

// IbUverbsCqModerationCaps is struct ib_uverbs_cq_moderation_caps,
// <rdma/ib_user_verbs.h>.
type IbUverbsCqModerationCaps struct {
	MaxCqModerationCount  uint16
	MaxCqModerationPeriod uint16
	Reserved              uint32
}

// IbUverbsExQueryDeviceResp is struct ib_uverbs_ex_query_device_resp,
// <rdma/ib_user_verbs.h>. The kernel sets ResponseLength to the bytes it
// wrote: its own struct's size, capped by the buffer it was given.
type IbUverbsExQueryDeviceResp struct {
	Base             IbUverbsQueryDeviceResp
	CompMask         uint32
	ResponseLength   uint32
	OdpCaps          IbUverbsOdpCaps
	TimestampMask    uint64
	HcaCoreClock     uint64 // kHz
	DeviceCapFlagsEx uint64
	RssCaps          IbUverbsRssCaps
	MaxWqTypeRq      uint32
	RawPacketCaps    uint32
	TmCaps           IbUverbsTmCaps
	CqModerationCaps IbUverbsCqModerationCaps
	MaxDmSize        uint64
	XrcOdpCaps       uint32
	Reserved         uint32
}

// IbUverbsGidEntry is struct ib_uverbs_gid_entry,
// <rdma/ib_user_ioctl_verbs.h>. Gid holds the 16 raw GID bytes in network
// order (the C struct declares them as two __aligned_u64).
type IbUverbsGidEntry struct {
	Gid           [2]uint64
	GidIndex      uint32
	PortNum       uint32
	GidType       uint32
	NetdevIfindex uint32
}

// Sizes of the ABI structs above, as the kernel has them.
const (
	SizeofIbUverbsQueryDeviceResp   = 176
	SizeofIbUverbsExQueryDevice     = 8
	SizeofIbUverbsExQueryDeviceResp = 304
	SizeofIbUverbsGidEntry          = 32
)

// RDMA netlink, <rdma/rdma_netlink.h>: the uverbs character device query
// (enum rdma_nldev_command and enum rdma_nldev_attr, the values used).
const (
	RDMA_NLDEV_CMD_GET_CHARDEV       = 15
	RDMA_NLDEV_ATTR_CHARDEV_TYPE     = 69
	RDMA_NLDEV_ATTR_CHARDEV_NAME     = 70
	RDMA_NLDEV_ATTR_CHARDEV_ABI      = 71
	RDMA_NLDEV_ATTR_CHARDEV          = 72
	RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID = 73
)
