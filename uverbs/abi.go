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
