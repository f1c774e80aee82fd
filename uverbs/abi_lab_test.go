package uverbs

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
)

// uverbsConsts is every ib_uverbs constant this package mirrors, with the C
// enum it belongs to ("" for anonymous enums). The table grows with the
// package.
var uverbsConsts = []btfcheck.Const{
	{Name: "UVERBS_ATTR_F_MANDATORY", Value: UVERBS_ATTR_F_MANDATORY},
	{Name: "UVERBS_ATTR_F_VALID_OUTPUT", Value: UVERBS_ATTR_F_VALID_OUTPUT},
	{Name: "UVERBS_ATTR_UHW_IN", Value: UVERBS_ATTR_UHW_IN},
	{Name: "UVERBS_ATTR_UHW_OUT", Value: UVERBS_ATTR_UHW_OUT},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_DEVICE", Value: UVERBS_OBJECT_DEVICE},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_PD", Value: UVERBS_OBJECT_PD},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_COMP_CHANNEL", Value: UVERBS_OBJECT_COMP_CHANNEL},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_CQ", Value: UVERBS_OBJECT_CQ},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_QP", Value: UVERBS_OBJECT_QP},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_SRQ", Value: UVERBS_OBJECT_SRQ},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_AH", Value: UVERBS_OBJECT_AH},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_MR", Value: UVERBS_OBJECT_MR},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_MW", Value: UVERBS_OBJECT_MW},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_FLOW", Value: UVERBS_OBJECT_FLOW},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_XRCD", Value: UVERBS_OBJECT_XRCD},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_RWQ_IND_TBL", Value: UVERBS_OBJECT_RWQ_IND_TBL},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_WQ", Value: UVERBS_OBJECT_WQ},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_FLOW_ACTION", Value: UVERBS_OBJECT_FLOW_ACTION},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_DM", Value: UVERBS_OBJECT_DM},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_COUNTERS", Value: UVERBS_OBJECT_COUNTERS},
	{Enum: "uverbs_default_objects", Name: "UVERBS_OBJECT_ASYNC_EVENT", Value: UVERBS_OBJECT_ASYNC_EVENT},
	{Enum: "uverbs_methods_device", Name: "UVERBS_METHOD_INVOKE_WRITE", Value: UVERBS_METHOD_INVOKE_WRITE},
	{Enum: "uverbs_methods_device", Name: "UVERBS_METHOD_INFO_HANDLES", Value: UVERBS_METHOD_INFO_HANDLES},
	{Enum: "uverbs_methods_device", Name: "UVERBS_METHOD_QUERY_PORT", Value: UVERBS_METHOD_QUERY_PORT},
	{Enum: "uverbs_methods_device", Name: "UVERBS_METHOD_GET_CONTEXT", Value: UVERBS_METHOD_GET_CONTEXT},
	{Enum: "uverbs_methods_device", Name: "UVERBS_METHOD_QUERY_CONTEXT", Value: UVERBS_METHOD_QUERY_CONTEXT},
	{Enum: "uverbs_methods_device", Name: "UVERBS_METHOD_QUERY_GID_TABLE", Value: UVERBS_METHOD_QUERY_GID_TABLE},
	{Enum: "uverbs_methods_device", Name: "UVERBS_METHOD_QUERY_GID_ENTRY", Value: UVERBS_METHOD_QUERY_GID_ENTRY},
	{Enum: "uverbs_attrs_invoke_write_cmd_attr_ids", Name: "UVERBS_ATTR_CORE_IN", Value: UVERBS_ATTR_CORE_IN},
	{Enum: "uverbs_attrs_invoke_write_cmd_attr_ids", Name: "UVERBS_ATTR_CORE_OUT", Value: UVERBS_ATTR_CORE_OUT},
	{Enum: "uverbs_attrs_invoke_write_cmd_attr_ids", Name: "UVERBS_ATTR_WRITE_CMD", Value: UVERBS_ATTR_WRITE_CMD},
	{Enum: "uverbs_attrs_get_context_attr_ids", Name: "UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS", Value: UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS},
	{Enum: "uverbs_attrs_get_context_attr_ids", Name: "UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT", Value: UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT},
	{Enum: "uverbs_attrs_query_port_cmd_attr_ids", Name: "UVERBS_ATTR_QUERY_PORT_PORT_NUM", Value: UVERBS_ATTR_QUERY_PORT_PORT_NUM},
	{Enum: "uverbs_attrs_query_port_cmd_attr_ids", Name: "UVERBS_ATTR_QUERY_PORT_RESP", Value: UVERBS_ATTR_QUERY_PORT_RESP},
	{Enum: "uverbs_methods_pd", Name: "UVERBS_METHOD_PD_DESTROY", Value: UVERBS_METHOD_PD_DESTROY},
	{Enum: "uverbs_attrs_pd_destroy_ids", Name: "UVERBS_ATTR_DESTROY_PD_HANDLE", Value: UVERBS_ATTR_DESTROY_PD_HANDLE},
	{Enum: "ib_uverbs_write_cmds", Name: "IB_USER_VERBS_CMD_GET_CONTEXT", Value: IB_USER_VERBS_CMD_GET_CONTEXT},
	{Enum: "ib_uverbs_write_cmds", Name: "IB_USER_VERBS_CMD_QUERY_DEVICE", Value: IB_USER_VERBS_CMD_QUERY_DEVICE},
	{Enum: "ib_uverbs_write_cmds", Name: "IB_USER_VERBS_CMD_QUERY_PORT", Value: IB_USER_VERBS_CMD_QUERY_PORT},
	{Enum: "ib_uverbs_write_cmds", Name: "IB_USER_VERBS_CMD_ALLOC_PD", Value: IB_USER_VERBS_CMD_ALLOC_PD},
	{Enum: "ib_uverbs_write_cmds", Name: "IB_USER_VERBS_CMD_DEALLOC_PD", Value: IB_USER_VERBS_CMD_DEALLOC_PD},
	{Enum: "rdma_driver_id", Name: "RDMA_DRIVER_UNKNOWN", Value: RDMA_DRIVER_UNKNOWN},
	{Enum: "rdma_driver_id", Name: "RDMA_DRIVER_MLX5", Value: RDMA_DRIVER_MLX5},
	{Enum: "rdma_driver_id", Name: "RDMA_DRIVER_RXE", Value: RDMA_DRIVER_RXE},
}

var uverbsLayouts = []btfcheck.Layout{
	{Struct: "ib_uverbs_ioctl_hdr", Size: unsafe.Sizeof(IbUverbsIoctlHdr{}), Fields: []btfcheck.Field{
		{Name: "length", Offset: unsafe.Offsetof(IbUverbsIoctlHdr{}.Length)},
		{Name: "object_id", Offset: unsafe.Offsetof(IbUverbsIoctlHdr{}.ObjectID)},
		{Name: "method_id", Offset: unsafe.Offsetof(IbUverbsIoctlHdr{}.MethodID)},
		{Name: "num_attrs", Offset: unsafe.Offsetof(IbUverbsIoctlHdr{}.NumAttrs)},
		{Name: "reserved1", Offset: unsafe.Offsetof(IbUverbsIoctlHdr{}.Reserved1)},
		{Name: "driver_id", Offset: unsafe.Offsetof(IbUverbsIoctlHdr{}.DriverID)},
		{Name: "reserved2", Offset: unsafe.Offsetof(IbUverbsIoctlHdr{}.Reserved2)},
		{Name: "attrs", Offset: unsafe.Sizeof(IbUverbsIoctlHdr{})},
	}},
	{Struct: "ib_uverbs_attr", Size: unsafe.Sizeof(IbUverbsAttr{}), Fields: []btfcheck.Field{
		{Name: "attr_id", Offset: unsafe.Offsetof(IbUverbsAttr{}.AttrID)},
		{Name: "len", Offset: unsafe.Offsetof(IbUverbsAttr{}.Len)},
		{Name: "flags", Offset: unsafe.Offsetof(IbUverbsAttr{}.Flags)},
		{Name: "attr_data.enum_data.elem_id", Offset: unsafe.Offsetof(IbUverbsAttr{}.AttrData)},
		{Name: "data", Offset: unsafe.Offsetof(IbUverbsAttr{}.Data)},
	}},
	{Struct: "ib_uverbs_query_port_resp_ex", Size: unsafe.Sizeof(IbUverbsQueryPortRespEx{}), Fields: []btfcheck.Field{
		{Name: "legacy_resp.state", Offset: unsafe.Offsetof(IbUverbsQueryPortResp{}.State)},
		{Name: "legacy_resp.gid_tbl_len", Offset: unsafe.Offsetof(IbUverbsQueryPortResp{}.GidTblLen)},
		{Name: "legacy_resp.lid", Offset: unsafe.Offsetof(IbUverbsQueryPortResp{}.Lid)},
		{Name: "legacy_resp.link_layer", Offset: unsafe.Offsetof(IbUverbsQueryPortResp{}.LinkLayer)},
		{Name: "legacy_resp.flags", Offset: unsafe.Offsetof(IbUverbsQueryPortResp{}.Flags)},
		{Name: "port_cap_flags2", Offset: unsafe.Offsetof(IbUverbsQueryPortRespEx{}.PortCapFlags2)},
		{Name: "active_speed_ex", Offset: unsafe.Offsetof(IbUverbsQueryPortRespEx{}.ActiveSpeedEx), Newer: true}, // 6.1 reserves it
	}},
	{Struct: "ib_uverbs_query_port_resp", Size: unsafe.Sizeof(IbUverbsQueryPortResp{})},
	{Struct: "ib_uverbs_alloc_pd", Size: unsafe.Sizeof(IbUverbsAllocPd{})},
	{Struct: "ib_uverbs_alloc_pd_resp", Size: unsafe.Sizeof(IbUverbsAllocPdResp{})},
}

// The RDMA netlink constants live in ib_core (nldev.c); they are checked
// there.
var nldevConsts = []btfcheck.Const{
	{Enum: "rdma_nldev_command", Name: "RDMA_NLDEV_CMD_GET", Value: RDMA_NLDEV_CMD_GET},
	{Enum: "rdma_nldev_command", Name: "RDMA_NLDEV_CMD_SET", Value: RDMA_NLDEV_CMD_SET},
	{Enum: "rdma_nldev_command", Name: "RDMA_NLDEV_CMD_NEWLINK", Value: RDMA_NLDEV_CMD_NEWLINK},
	{Enum: "rdma_nldev_command", Name: "RDMA_NLDEV_CMD_DELLINK", Value: RDMA_NLDEV_CMD_DELLINK},
	{Enum: "rdma_nldev_command", Name: "RDMA_NLDEV_CMD_PORT_GET", Value: RDMA_NLDEV_CMD_PORT_GET},
	{Enum: "rdma_nldev_command", Name: "RDMA_NLDEV_CMD_RES_GET", Value: RDMA_NLDEV_CMD_RES_GET},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_DEV_INDEX", Value: RDMA_NLDEV_ATTR_DEV_INDEX},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_DEV_NAME", Value: RDMA_NLDEV_ATTR_DEV_NAME},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_PORT_INDEX", Value: RDMA_NLDEV_ATTR_PORT_INDEX},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_RES_SUMMARY", Value: RDMA_NLDEV_ATTR_RES_SUMMARY},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_NDEV_NAME", Value: RDMA_NLDEV_ATTR_NDEV_NAME},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_LINK_TYPE", Value: RDMA_NLDEV_ATTR_LINK_TYPE},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_CAP_FLAGS", Value: RDMA_NLDEV_ATTR_CAP_FLAGS},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_FW_VERSION", Value: RDMA_NLDEV_ATTR_FW_VERSION},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_NODE_GUID", Value: RDMA_NLDEV_ATTR_NODE_GUID},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_SYS_IMAGE_GUID", Value: RDMA_NLDEV_ATTR_SYS_IMAGE_GUID},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_DEV_NODE_TYPE", Value: RDMA_NLDEV_ATTR_DEV_NODE_TYPE},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY", Value: RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME", Value: RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR", Value: RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR},
	{Enum: "rdma_nldev_attr", Name: "RDMA_NLDEV_ATTR_DEV_PROTOCOL", Value: RDMA_NLDEV_ATTR_DEV_PROTOCOL},
	{Name: "RDMA_NL_NLDEV", Value: RDMA_NL_NLDEV},
}

func TestLabBTFUverbs(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("ib_uverbs", "ib_core", "vmlinux")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, slices.Concat(uverbsConsts, deviceConsts, objectConsts))
	btfcheck.CheckLayouts(t, s, slices.Concat(uverbsLayouts, deviceLayouts, objectLayouts))
	if RDMA_VERBS_IOCTL != 0xc0181b01 {
		t.Errorf("RDMA_VERBS_IOCTL = %#x; _IOWR(0x1b, 1, 24 bytes) is 0xc0181b01", RDMA_VERBS_IOCTL)
	}
}

func TestLabBTFNldev(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("ib_core")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, nldevConsts)
}
