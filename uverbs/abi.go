package uverbs

// Kernel ABI mirror of <rdma/rdma_user_ioctl_cmds.h> and
// <rdma/ib_user_ioctl_cmds.h>. Names are the kernel's; values are checked
// against /sys/kernel/btf/ib_uverbs in the kernel lab (abi_lab_test.go).

// From <rdma/rdma_user_ioctl_cmds.h>.
const (
	RDMA_IOCTL_MAGIC = 0x1b
	// RDMA_VERBS_IOCTL is _IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr).
	RDMA_VERBS_IOCTL = 3<<30 | SizeofIoctlHdr<<16 | RDMA_IOCTL_MAGIC<<8 | 1
)

// Attribute flags, anonymous enum in <rdma/rdma_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_F_MANDATORY    = 1 << 0
	UVERBS_ATTR_F_VALID_OUTPUT = 1 << 1
)

// Attribute and method id namespaces, <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ID_NS_MASK             = 0xF000
	UVERBS_ID_NS_SHIFT            = 12
	UVERBS_UDATA_DRIVER_DATA_NS   = 1
	UVERBS_UDATA_DRIVER_DATA_FLAG = 1 << UVERBS_ID_NS_SHIFT
)

// Driver-data attributes, anonymous enum in <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_UHW_IN  = UVERBS_UDATA_DRIVER_DATA_FLAG
	UVERBS_ATTR_UHW_OUT = UVERBS_UDATA_DRIVER_DATA_FLAG + 1
)

// enum uverbs_default_objects, <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_OBJECT_DEVICE       = 0
	UVERBS_OBJECT_PD           = 1
	UVERBS_OBJECT_COMP_CHANNEL = 2
	UVERBS_OBJECT_CQ           = 3
	UVERBS_OBJECT_QP           = 4
	UVERBS_OBJECT_SRQ          = 5
	UVERBS_OBJECT_AH           = 6
	UVERBS_OBJECT_MR           = 7
	UVERBS_OBJECT_MW           = 8
	UVERBS_OBJECT_FLOW         = 9
	UVERBS_OBJECT_XRCD         = 10
	UVERBS_OBJECT_RWQ_IND_TBL  = 11
	UVERBS_OBJECT_WQ           = 12
	UVERBS_OBJECT_FLOW_ACTION  = 13
	UVERBS_OBJECT_DM           = 14
	UVERBS_OBJECT_COUNTERS     = 15
	UVERBS_OBJECT_ASYNC_EVENT  = 16
)

// enum uverbs_methods_device, <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_METHOD_INVOKE_WRITE    = 0
	UVERBS_METHOD_INFO_HANDLES    = 1
	UVERBS_METHOD_QUERY_PORT      = 2
	UVERBS_METHOD_GET_CONTEXT     = 3
	UVERBS_METHOD_QUERY_CONTEXT   = 4
	UVERBS_METHOD_QUERY_GID_TABLE = 5
	UVERBS_METHOD_QUERY_GID_ENTRY = 6
)

// enum uverbs_attrs_invoke_write_cmd_attr_ids, <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_CORE_IN   = 0
	UVERBS_ATTR_CORE_OUT  = 1
	UVERBS_ATTR_WRITE_CMD = 2
)

// enum rdma_driver_id, <rdma/ib_user_ioctl_verbs.h> (the values providers
// put in ib_uverbs_ioctl_hdr.driver_id).
const (
	RDMA_DRIVER_UNKNOWN = 0
	RDMA_DRIVER_MLX5    = 1
	RDMA_DRIVER_RXE     = 14
)

// IbUverbsAttr is struct ib_uverbs_attr, <rdma/rdma_user_ioctl_cmds.h>.
// AttrData holds attr_data (enum_data.elem_id in its low byte, as the
// kernel's little-endian union lays it out on amd64 and arm64).
type IbUverbsAttr struct {
	AttrID   uint16
	Len      uint16
	Flags    uint16
	AttrData uint16
	Data     uint64
}

// IbUverbsIoctlHdr is struct ib_uverbs_ioctl_hdr without its flexible
// attrs[] array, <rdma/rdma_user_ioctl_cmds.h>.
type IbUverbsIoctlHdr struct {
	Length    uint16
	ObjectID  uint16
	MethodID  uint16
	NumAttrs  uint16
	Reserved1 uint64
	DriverID  uint32
	Reserved2 uint32
}

// Sizes of the ABI structs above.
const (
	SizeofAttr     = 16
	SizeofIoctlHdr = 24
)

// enum uverbs_attrs_get_context_attr_ids, <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS = 0
	UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT     = 1
)

// enum uverbs_attrs_query_port_cmd_attr_ids, <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_QUERY_PORT_PORT_NUM = 0
	UVERBS_ATTR_QUERY_PORT_RESP     = 1
)

// enum uverbs_methods_pd and enum uverbs_attrs_pd_destroy_ids,
// <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_METHOD_PD_DESTROY      = 0
	UVERBS_ATTR_DESTROY_PD_HANDLE = 0
)

// Legacy write command numbers (enum ib_uverbs_write_cmds,
// <rdma/ib_user_verbs.h>), sent through UVERBS_METHOD_INVOKE_WRITE.
const (
	IB_USER_VERBS_CMD_GET_CONTEXT  = 0
	IB_USER_VERBS_CMD_QUERY_DEVICE = 1
	IB_USER_VERBS_CMD_QUERY_PORT   = 2
	IB_USER_VERBS_CMD_ALLOC_PD     = 3
	IB_USER_VERBS_CMD_DEALLOC_PD   = 4
)

// IbUverbsAllocPd is struct ib_uverbs_alloc_pd without its driver_data[],
// <rdma/ib_user_verbs.h>. Response is the legacy write() response pointer;
// the ioctl path returns the response through UVERBS_ATTR_CORE_OUT instead.
type IbUverbsAllocPd struct {
	Response uint64
}

// IbUverbsAllocPdResp is struct ib_uverbs_alloc_pd_resp without its
// driver_data[], <rdma/ib_user_verbs.h>.
type IbUverbsAllocPdResp struct {
	PdHandle uint32
}

// IbUverbsQueryPortResp is struct ib_uverbs_query_port_resp,
// <rdma/ib_user_verbs.h>.
type IbUverbsQueryPortResp struct {
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	GidTblLen     uint32
	PkeyTblLen    uint16
	Lid           uint16
	SmLid         uint16
	State         uint8
	MaxMtu        uint8
	ActiveMtu     uint8
	Lmc           uint8
	MaxVlNum      uint8
	SmSl          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	Reserved      uint8
}

// IbUverbsQueryPortRespEx is struct ib_uverbs_query_port_resp_ex,
// <rdma/ib_user_ioctl_verbs.h>. active_speed_ex is newer than 6.1, whose
// struct keeps those bytes reserved and zeroes them (6.12 has it): the
// port's enum ib_port_speed, which XDR (256) no longer fits into the
// legacy u8 active_speed.
type IbUverbsQueryPortRespEx struct {
	LegacyResp    IbUverbsQueryPortResp
	PortCapFlags2 uint16
	Reserved      [2]uint8
	ActiveSpeedEx uint32
}
