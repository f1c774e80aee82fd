package ucmaabi

import (
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
)

// ucmaConsts are the constants of this package the lab kernels' BTF holds
// (rdma_ucm, rdma_cm, ib_cm, ib_core and vmlinux searched together):
// enumerators of the enums the modules use.
var ucmaConsts = []btfcheck.Const{
	{Enum: "rdma_ucm_port_space", Name: "RDMA_PS_IPOIB", Value: RDMA_PS_IPOIB},
	{Enum: "rdma_ucm_port_space", Name: "RDMA_PS_IB", Value: RDMA_PS_IB},
	{Enum: "rdma_ucm_port_space", Name: "RDMA_PS_TCP", Value: RDMA_PS_TCP},
	{Enum: "rdma_ucm_port_space", Name: "RDMA_PS_UDP", Value: RDMA_PS_UDP},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_ADDR_RESOLVED", Value: RDMA_CM_EVENT_ADDR_RESOLVED},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_ADDR_ERROR", Value: RDMA_CM_EVENT_ADDR_ERROR},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_ROUTE_RESOLVED", Value: RDMA_CM_EVENT_ROUTE_RESOLVED},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_ROUTE_ERROR", Value: RDMA_CM_EVENT_ROUTE_ERROR},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_CONNECT_REQUEST", Value: RDMA_CM_EVENT_CONNECT_REQUEST},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_CONNECT_RESPONSE", Value: RDMA_CM_EVENT_CONNECT_RESPONSE},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_CONNECT_ERROR", Value: RDMA_CM_EVENT_CONNECT_ERROR},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_UNREACHABLE", Value: RDMA_CM_EVENT_UNREACHABLE},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_REJECTED", Value: RDMA_CM_EVENT_REJECTED},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_ESTABLISHED", Value: RDMA_CM_EVENT_ESTABLISHED},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_DISCONNECTED", Value: RDMA_CM_EVENT_DISCONNECTED},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_DEVICE_REMOVAL", Value: RDMA_CM_EVENT_DEVICE_REMOVAL},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_MULTICAST_JOIN", Value: RDMA_CM_EVENT_MULTICAST_JOIN},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_MULTICAST_ERROR", Value: RDMA_CM_EVENT_MULTICAST_ERROR},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_ADDR_CHANGE", Value: RDMA_CM_EVENT_ADDR_CHANGE},
	{Enum: "rdma_cm_event_type", Name: "RDMA_CM_EVENT_TIMEWAIT_EXIT", Value: RDMA_CM_EVENT_TIMEWAIT_EXIT},
	{Enum: "ib_cm_rej_reason", Name: "IB_CM_REJ_NO_QP", Value: IB_CM_REJ_NO_QP},
	{Enum: "ib_cm_rej_reason", Name: "IB_CM_REJ_NO_RESOURCES", Value: IB_CM_REJ_NO_RESOURCES},
	{Enum: "ib_cm_rej_reason", Name: "IB_CM_REJ_TIMEOUT", Value: IB_CM_REJ_TIMEOUT},
	{Enum: "ib_cm_rej_reason", Name: "IB_CM_REJ_UNSUPPORTED", Value: IB_CM_REJ_UNSUPPORTED},
	{Enum: "ib_cm_rej_reason", Name: "IB_CM_REJ_INVALID_SERVICE_ID", Value: IB_CM_REJ_INVALID_SERVICE_ID},
	{Enum: "ib_cm_rej_reason", Name: "IB_CM_REJ_STALE_CONN", Value: IB_CM_REJ_STALE_CONN},
	{Enum: "ib_cm_rej_reason", Name: "IB_CM_REJ_INVALID_MTU", Value: IB_CM_REJ_INVALID_MTU},
	{Enum: "ib_cm_rej_reason", Name: "IB_CM_REJ_INSUFFICIENT_RESP_RESOURCES", Value: IB_CM_REJ_INSUFFICIENT_RESP_RESOURCES},
	{Enum: "ib_cm_rej_reason", Name: "IB_CM_REJ_CONSUMER_DEFINED", Value: IB_CM_REJ_CONSUMER_DEFINED},
	{Enum: "ib_cm_rej_reason", Name: "IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED", Value: IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED},
	{Enum: "ib_cm_sidr_status", Name: "IB_SIDR_SUCCESS", Value: IB_SIDR_SUCCESS},
	{Enum: "ib_cm_sidr_status", Name: "IB_SIDR_UNSUPPORTED", Value: IB_SIDR_UNSUPPORTED},
	{Enum: "ib_cm_sidr_status", Name: "IB_SIDR_REJECT", Value: IB_SIDR_REJECT},
	{Enum: "ib_cm_sidr_status", Name: "IB_SIDR_NO_QP", Value: IB_SIDR_NO_QP},
	{Enum: "ib_cm_sidr_status", Name: "IB_SIDR_REDIRECT", Value: IB_SIDR_REDIRECT},
	{Enum: "ib_cm_sidr_status", Name: "IB_SIDR_UNSUPPORTED_VERSION", Value: IB_SIDR_UNSUPPORTED_VERSION},
}

// anonConsts are enumerators of anonymous enums: BTF holds them where the
// compiler kept the enum (their values are used as constants only, which
// may drop it). The test compares those present and lists the others as
// absent, with the header they come from.
var anonConsts = []struct {
	btfcheck.Const
	header string
}{
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_CREATE_ID", Value: RDMA_USER_CM_CMD_CREATE_ID}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_DESTROY_ID", Value: RDMA_USER_CM_CMD_DESTROY_ID}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_BIND_IP", Value: RDMA_USER_CM_CMD_BIND_IP}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_RESOLVE_IP", Value: RDMA_USER_CM_CMD_RESOLVE_IP}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_RESOLVE_ROUTE", Value: RDMA_USER_CM_CMD_RESOLVE_ROUTE}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_QUERY_ROUTE", Value: RDMA_USER_CM_CMD_QUERY_ROUTE}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_CONNECT", Value: RDMA_USER_CM_CMD_CONNECT}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_LISTEN", Value: RDMA_USER_CM_CMD_LISTEN}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_ACCEPT", Value: RDMA_USER_CM_CMD_ACCEPT}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_REJECT", Value: RDMA_USER_CM_CMD_REJECT}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_DISCONNECT", Value: RDMA_USER_CM_CMD_DISCONNECT}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_INIT_QP_ATTR", Value: RDMA_USER_CM_CMD_INIT_QP_ATTR}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_GET_EVENT", Value: RDMA_USER_CM_CMD_GET_EVENT}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_GET_OPTION", Value: RDMA_USER_CM_CMD_GET_OPTION}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_SET_OPTION", Value: RDMA_USER_CM_CMD_SET_OPTION}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_NOTIFY", Value: RDMA_USER_CM_CMD_NOTIFY}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_JOIN_IP_MCAST", Value: RDMA_USER_CM_CMD_JOIN_IP_MCAST}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_LEAVE_MCAST", Value: RDMA_USER_CM_CMD_LEAVE_MCAST}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_MIGRATE_ID", Value: RDMA_USER_CM_CMD_MIGRATE_ID}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_QUERY", Value: RDMA_USER_CM_CMD_QUERY}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_BIND", Value: RDMA_USER_CM_CMD_BIND}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_RESOLVE_ADDR", Value: RDMA_USER_CM_CMD_RESOLVE_ADDR}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_CMD_JOIN_MCAST", Value: RDMA_USER_CM_CMD_JOIN_MCAST}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_QUERY_ADDR", Value: RDMA_USER_CM_QUERY_ADDR}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_QUERY_PATH", Value: RDMA_USER_CM_QUERY_PATH}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_USER_CM_QUERY_GID", Value: RDMA_USER_CM_QUERY_GID}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_OPTION_ID", Value: RDMA_OPTION_ID}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_OPTION_IB", Value: RDMA_OPTION_IB}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_OPTION_ID_TOS", Value: RDMA_OPTION_ID_TOS}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_OPTION_ID_REUSEADDR", Value: RDMA_OPTION_ID_REUSEADDR}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_OPTION_ID_AFONLY", Value: RDMA_OPTION_ID_AFONLY}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_OPTION_ID_ACK_TIMEOUT", Value: RDMA_OPTION_ID_ACK_TIMEOUT}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "RDMA_OPTION_IB_PATH", Value: RDMA_OPTION_IB_PATH}, "rdma/rdma_user_cm.h"},
	{btfcheck.Const{Name: "IB_PATH_GMP", Value: IB_PATH_GMP}, "rdma/ib_user_sa.h"},
	{btfcheck.Const{Name: "IB_PATH_PRIMARY", Value: IB_PATH_PRIMARY}, "rdma/ib_user_sa.h"},
	{btfcheck.Const{Name: "IB_PATH_ALTERNATE", Value: IB_PATH_ALTERNATE}, "rdma/ib_user_sa.h"},
	{btfcheck.Const{Name: "IB_PATH_OUTBOUND", Value: IB_PATH_OUTBOUND}, "rdma/ib_user_sa.h"},
	{btfcheck.Const{Name: "IB_PATH_INBOUND", Value: IB_PATH_INBOUND}, "rdma/ib_user_sa.h"},
	{btfcheck.Const{Name: "IB_PATH_INBOUND_REVERSE", Value: IB_PATH_INBOUND_REVERSE}, "rdma/ib_user_sa.h"},
	{btfcheck.Const{Name: "IB_PATH_BIDIRECTIONAL", Value: IB_PATH_BIDIRECTIONAL}, "rdma/ib_user_sa.h"},
	{btfcheck.Const{Name: "IB_CM_REQ_PRIVATE_DATA_SIZE", Value: IB_CM_REQ_PRIVATE_DATA_SIZE}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_MRA_PRIVATE_DATA_SIZE", Value: IB_CM_MRA_PRIVATE_DATA_SIZE}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_REJ_PRIVATE_DATA_SIZE", Value: IB_CM_REJ_PRIVATE_DATA_SIZE}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_REP_PRIVATE_DATA_SIZE", Value: IB_CM_REP_PRIVATE_DATA_SIZE}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_RTU_PRIVATE_DATA_SIZE", Value: IB_CM_RTU_PRIVATE_DATA_SIZE}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_DREQ_PRIVATE_DATA_SIZE", Value: IB_CM_DREQ_PRIVATE_DATA_SIZE}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_DREP_PRIVATE_DATA_SIZE", Value: IB_CM_DREP_PRIVATE_DATA_SIZE}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_REJ_ARI_LENGTH", Value: IB_CM_REJ_ARI_LENGTH}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_LAP_PRIVATE_DATA_SIZE", Value: IB_CM_LAP_PRIVATE_DATA_SIZE}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_APR_PRIVATE_DATA_SIZE", Value: IB_CM_APR_PRIVATE_DATA_SIZE}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_APR_INFO_LENGTH", Value: IB_CM_APR_INFO_LENGTH}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE", Value: IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_SIDR_REP_PRIVATE_DATA_SIZE", Value: IB_CM_SIDR_REP_PRIVATE_DATA_SIZE}, "rdma/ib_cm.h"},
	{btfcheck.Const{Name: "IB_CM_SIDR_REP_INFO_LENGTH", Value: IB_CM_SIDR_REP_INFO_LENGTH}, "rdma/ib_cm.h"},
}

// defines are this package's #defines, which BTF never holds: checked
// against the header by hand and by the lab's behaviour (the kernel takes
// the commands; RDMA_UDP_QKEY is what a UD connection's Q_Key comes back
// as), listed here with their header.
var defines = []struct{ name, header string }{
	{"RDMA_USER_CM_ABI_VERSION", "rdma/rdma_user_cm.h (TestLabUCMAABIVersion reads it from sysfs)"},
	{"RDMA_MAX_PRIVATE_DATA", "rdma/rdma_user_cm.h (the private_data arrays' size, checked through the layouts)"},
	{"RDMA_UDP_QKEY", "rdma/rdma_cm_ib.h (cm's UD lab test checks the Q_Key a UD connection gets)"},
	{"AF_INET, AF_INET6, AF_IB", "linux/socket.h"},
}

// ucmaLayouts are the structs of <rdma/rdma_user_cm.h> and those it
// takes from <rdma/ib_user_verbs.h> and <rdma/ib_user_sa.h>, exact: the
// kernel copies sizeof of each (or, for a response, at most the caller's
// out length).
var ucmaLayouts = []btfcheck.Layout{
	{Struct: "rdma_ucm_cmd_hdr", Size: unsafe.Sizeof(RdmaUcmCmdHdr{}), Fields: []btfcheck.Field{
		{Name: "cmd", Offset: unsafe.Offsetof(RdmaUcmCmdHdr{}.Cmd)},
		{Name: "in", Offset: unsafe.Offsetof(RdmaUcmCmdHdr{}.In)},
		{Name: "out", Offset: unsafe.Offsetof(RdmaUcmCmdHdr{}.Out)},
	}},
	{Struct: "rdma_ucm_create_id", Size: unsafe.Sizeof(RdmaUcmCreateId{}), Fields: []btfcheck.Field{
		{Name: "uid", Offset: unsafe.Offsetof(RdmaUcmCreateId{}.Uid)},
		{Name: "response", Offset: unsafe.Offsetof(RdmaUcmCreateId{}.Response)},
		{Name: "ps", Offset: unsafe.Offsetof(RdmaUcmCreateId{}.Ps)},
		{Name: "qp_type", Offset: unsafe.Offsetof(RdmaUcmCreateId{}.QpType)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmCreateId{}.Reserved)},
	}},
	{Struct: "rdma_ucm_create_id_resp", Size: unsafe.Sizeof(RdmaUcmCreateIdResp{}), Fields: []btfcheck.Field{
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmCreateIdResp{}.Id)},
	}},
	{Struct: "rdma_ucm_destroy_id", Size: unsafe.Sizeof(RdmaUcmDestroyId{}), Fields: []btfcheck.Field{
		{Name: "response", Offset: unsafe.Offsetof(RdmaUcmDestroyId{}.Response)},
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmDestroyId{}.Id)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmDestroyId{}.Reserved)},
	}},
	{Struct: "rdma_ucm_destroy_id_resp", Size: unsafe.Sizeof(RdmaUcmDestroyIdResp{}), Fields: []btfcheck.Field{
		{Name: "events_reported", Offset: unsafe.Offsetof(RdmaUcmDestroyIdResp{}.EventsReported)},
	}},
	{Struct: "rdma_ucm_bind_ip", Size: unsafe.Sizeof(RdmaUcmBindIp{}), Fields: []btfcheck.Field{
		{Name: "response", Offset: unsafe.Offsetof(RdmaUcmBindIp{}.Response)},
		{Name: "addr", Offset: unsafe.Offsetof(RdmaUcmBindIp{}.Addr)},
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmBindIp{}.Id)},
	}},
	{Struct: "rdma_ucm_bind", Size: unsafe.Sizeof(RdmaUcmBind{}), Fields: []btfcheck.Field{
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmBind{}.Id)},
		{Name: "addr_size", Offset: unsafe.Offsetof(RdmaUcmBind{}.AddrSize)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmBind{}.Reserved)},
		{Name: "addr", Offset: unsafe.Offsetof(RdmaUcmBind{}.Addr)},
	}},
	{Struct: "rdma_ucm_resolve_ip", Size: unsafe.Sizeof(RdmaUcmResolveIp{}), Fields: []btfcheck.Field{
		{Name: "src_addr", Offset: unsafe.Offsetof(RdmaUcmResolveIp{}.SrcAddr)},
		{Name: "dst_addr", Offset: unsafe.Offsetof(RdmaUcmResolveIp{}.DstAddr)},
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmResolveIp{}.Id)},
		{Name: "timeout_ms", Offset: unsafe.Offsetof(RdmaUcmResolveIp{}.TimeoutMs)},
	}},
	{Struct: "rdma_ucm_resolve_addr", Size: unsafe.Sizeof(RdmaUcmResolveAddr{}), Fields: []btfcheck.Field{
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmResolveAddr{}.Id)},
		{Name: "timeout_ms", Offset: unsafe.Offsetof(RdmaUcmResolveAddr{}.TimeoutMs)},
		{Name: "src_size", Offset: unsafe.Offsetof(RdmaUcmResolveAddr{}.SrcSize)},
		{Name: "dst_size", Offset: unsafe.Offsetof(RdmaUcmResolveAddr{}.DstSize)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmResolveAddr{}.Reserved)},
		{Name: "src_addr", Offset: unsafe.Offsetof(RdmaUcmResolveAddr{}.SrcAddr)},
		{Name: "dst_addr", Offset: unsafe.Offsetof(RdmaUcmResolveAddr{}.DstAddr)},
	}},
	{Struct: "rdma_ucm_resolve_route", Size: unsafe.Sizeof(RdmaUcmResolveRoute{}), Fields: []btfcheck.Field{
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmResolveRoute{}.Id)},
		{Name: "timeout_ms", Offset: unsafe.Offsetof(RdmaUcmResolveRoute{}.TimeoutMs)},
	}},
	{Struct: "rdma_ucm_query", Size: unsafe.Sizeof(RdmaUcmQuery{}), Fields: []btfcheck.Field{
		{Name: "response", Offset: unsafe.Offsetof(RdmaUcmQuery{}.Response)},
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmQuery{}.Id)},
		{Name: "option", Offset: unsafe.Offsetof(RdmaUcmQuery{}.Option)},
	}},
	{Struct: "ib_user_path_rec", Size: unsafe.Sizeof(IbUserPathRec{}), Fields: []btfcheck.Field{
		{Name: "dgid", Offset: unsafe.Offsetof(IbUserPathRec{}.Dgid)},
		{Name: "sgid", Offset: unsafe.Offsetof(IbUserPathRec{}.Sgid)},
		{Name: "dlid", Offset: unsafe.Offsetof(IbUserPathRec{}.Dlid)},
		{Name: "slid", Offset: unsafe.Offsetof(IbUserPathRec{}.Slid)},
		{Name: "raw_traffic", Offset: unsafe.Offsetof(IbUserPathRec{}.RawTraffic)},
		{Name: "flow_label", Offset: unsafe.Offsetof(IbUserPathRec{}.FlowLabel)},
		{Name: "reversible", Offset: unsafe.Offsetof(IbUserPathRec{}.Reversible)},
		{Name: "mtu", Offset: unsafe.Offsetof(IbUserPathRec{}.Mtu)},
		{Name: "pkey", Offset: unsafe.Offsetof(IbUserPathRec{}.Pkey)},
		{Name: "hop_limit", Offset: unsafe.Offsetof(IbUserPathRec{}.HopLimit)},
		{Name: "traffic_class", Offset: unsafe.Offsetof(IbUserPathRec{}.TrafficClass)},
		{Name: "numb_path", Offset: unsafe.Offsetof(IbUserPathRec{}.NumbPath)},
		{Name: "sl", Offset: unsafe.Offsetof(IbUserPathRec{}.Sl)},
		{Name: "mtu_selector", Offset: unsafe.Offsetof(IbUserPathRec{}.MtuSelector)},
		{Name: "rate_selector", Offset: unsafe.Offsetof(IbUserPathRec{}.RateSelector)},
		{Name: "rate", Offset: unsafe.Offsetof(IbUserPathRec{}.Rate)},
		{Name: "packet_life_time_selector", Offset: unsafe.Offsetof(IbUserPathRec{}.PacketLifeTimeSelector)},
		{Name: "packet_life_time", Offset: unsafe.Offsetof(IbUserPathRec{}.PacketLifeTime)},
		{Name: "preference", Offset: unsafe.Offsetof(IbUserPathRec{}.Preference)},
	}},
	{Struct: "ib_path_rec_data", Size: unsafe.Sizeof(IbPathRecData{}), Fields: []btfcheck.Field{
		{Name: "flags", Offset: unsafe.Offsetof(IbPathRecData{}.Flags)},
		{Name: "reserved", Offset: unsafe.Offsetof(IbPathRecData{}.Reserved)},
		{Name: "path_rec", Offset: unsafe.Offsetof(IbPathRecData{}.PathRec)},
	}},
	{Struct: "rdma_ucm_query_route_resp", Size: unsafe.Sizeof(RdmaUcmQueryRouteResp{}), Fields: []btfcheck.Field{
		{Name: "node_guid", Offset: unsafe.Offsetof(RdmaUcmQueryRouteResp{}.NodeGuid)},
		{Name: "ib_route", Offset: unsafe.Offsetof(RdmaUcmQueryRouteResp{}.IbRoute)},
		{Name: "src_addr", Offset: unsafe.Offsetof(RdmaUcmQueryRouteResp{}.SrcAddr)},
		{Name: "dst_addr", Offset: unsafe.Offsetof(RdmaUcmQueryRouteResp{}.DstAddr)},
		{Name: "num_paths", Offset: unsafe.Offsetof(RdmaUcmQueryRouteResp{}.NumPaths)},
		{Name: "port_num", Offset: unsafe.Offsetof(RdmaUcmQueryRouteResp{}.PortNum)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmQueryRouteResp{}.Reserved)},
		{Name: "ibdev_index", Offset: unsafe.Offsetof(RdmaUcmQueryRouteResp{}.IbdevIndex)},
		{Name: "reserved1", Offset: unsafe.Offsetof(RdmaUcmQueryRouteResp{}.Reserved1)},
	}},
	{Struct: "rdma_ucm_query_addr_resp", Size: unsafe.Sizeof(RdmaUcmQueryAddrResp{}), Fields: []btfcheck.Field{
		{Name: "node_guid", Offset: unsafe.Offsetof(RdmaUcmQueryAddrResp{}.NodeGuid)},
		{Name: "port_num", Offset: unsafe.Offsetof(RdmaUcmQueryAddrResp{}.PortNum)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmQueryAddrResp{}.Reserved)},
		{Name: "pkey", Offset: unsafe.Offsetof(RdmaUcmQueryAddrResp{}.Pkey)},
		{Name: "src_size", Offset: unsafe.Offsetof(RdmaUcmQueryAddrResp{}.SrcSize)},
		{Name: "dst_size", Offset: unsafe.Offsetof(RdmaUcmQueryAddrResp{}.DstSize)},
		{Name: "src_addr", Offset: unsafe.Offsetof(RdmaUcmQueryAddrResp{}.SrcAddr)},
		{Name: "dst_addr", Offset: unsafe.Offsetof(RdmaUcmQueryAddrResp{}.DstAddr)},
		{Name: "ibdev_index", Offset: unsafe.Offsetof(RdmaUcmQueryAddrResp{}.IbdevIndex)},
		{Name: "reserved1", Offset: unsafe.Offsetof(RdmaUcmQueryAddrResp{}.Reserved1)},
	}},
	{Struct: "rdma_ucm_query_path_resp", Size: unsafe.Sizeof(RdmaUcmQueryPathResp{}), Fields: []btfcheck.Field{
		{Name: "num_paths", Offset: unsafe.Offsetof(RdmaUcmQueryPathResp{}.NumPaths)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmQueryPathResp{}.Reserved)},
		{Name: "path_data", Offset: unsafe.Sizeof(RdmaUcmQueryPathResp{})},
	}},
	{Struct: "rdma_ucm_conn_param", Size: unsafe.Sizeof(RdmaUcmConnParam{}), Fields: []btfcheck.Field{
		{Name: "qp_num", Offset: unsafe.Offsetof(RdmaUcmConnParam{}.QpNum)},
		{Name: "qkey", Offset: unsafe.Offsetof(RdmaUcmConnParam{}.Qkey)},
		{Name: "private_data", Offset: unsafe.Offsetof(RdmaUcmConnParam{}.PrivateData)},
		{Name: "private_data_len", Offset: unsafe.Offsetof(RdmaUcmConnParam{}.PrivateDataLen)},
		{Name: "srq", Offset: unsafe.Offsetof(RdmaUcmConnParam{}.Srq)},
		{Name: "responder_resources", Offset: unsafe.Offsetof(RdmaUcmConnParam{}.ResponderResources)},
		{Name: "initiator_depth", Offset: unsafe.Offsetof(RdmaUcmConnParam{}.InitiatorDepth)},
		{Name: "flow_control", Offset: unsafe.Offsetof(RdmaUcmConnParam{}.FlowControl)},
		{Name: "retry_count", Offset: unsafe.Offsetof(RdmaUcmConnParam{}.RetryCount)},
		{Name: "rnr_retry_count", Offset: unsafe.Offsetof(RdmaUcmConnParam{}.RnrRetryCount)},
		{Name: "valid", Offset: unsafe.Offsetof(RdmaUcmConnParam{}.Valid)},
	}},
	{Struct: "ib_uverbs_global_route", Size: unsafe.Sizeof(IbUverbsGlobalRoute{}), Fields: []btfcheck.Field{
		{Name: "dgid", Offset: unsafe.Offsetof(IbUverbsGlobalRoute{}.Dgid)},
		{Name: "flow_label", Offset: unsafe.Offsetof(IbUverbsGlobalRoute{}.FlowLabel)},
		{Name: "sgid_index", Offset: unsafe.Offsetof(IbUverbsGlobalRoute{}.SgidIndex)},
		{Name: "hop_limit", Offset: unsafe.Offsetof(IbUverbsGlobalRoute{}.HopLimit)},
		{Name: "traffic_class", Offset: unsafe.Offsetof(IbUverbsGlobalRoute{}.TrafficClass)},
		{Name: "reserved", Offset: unsafe.Offsetof(IbUverbsGlobalRoute{}.Reserved)},
	}},
	{Struct: "ib_uverbs_ah_attr", Size: unsafe.Sizeof(IbUverbsAhAttr{}), Fields: []btfcheck.Field{
		{Name: "grh", Offset: unsafe.Offsetof(IbUverbsAhAttr{}.Grh)},
		{Name: "dlid", Offset: unsafe.Offsetof(IbUverbsAhAttr{}.Dlid)},
		{Name: "sl", Offset: unsafe.Offsetof(IbUverbsAhAttr{}.Sl)},
		{Name: "src_path_bits", Offset: unsafe.Offsetof(IbUverbsAhAttr{}.SrcPathBits)},
		{Name: "static_rate", Offset: unsafe.Offsetof(IbUverbsAhAttr{}.StaticRate)},
		{Name: "is_global", Offset: unsafe.Offsetof(IbUverbsAhAttr{}.IsGlobal)},
		{Name: "port_num", Offset: unsafe.Offsetof(IbUverbsAhAttr{}.PortNum)},
		{Name: "reserved", Offset: unsafe.Offsetof(IbUverbsAhAttr{}.Reserved)},
	}},
	{Struct: "rdma_ucm_ud_param", Size: unsafe.Sizeof(RdmaUcmUdParam{}), Fields: []btfcheck.Field{
		{Name: "qp_num", Offset: unsafe.Offsetof(RdmaUcmUdParam{}.QpNum)},
		{Name: "qkey", Offset: unsafe.Offsetof(RdmaUcmUdParam{}.Qkey)},
		{Name: "ah_attr", Offset: unsafe.Offsetof(RdmaUcmUdParam{}.AhAttr)},
		{Name: "private_data", Offset: unsafe.Offsetof(RdmaUcmUdParam{}.PrivateData)},
		{Name: "private_data_len", Offset: unsafe.Offsetof(RdmaUcmUdParam{}.PrivateDataLen)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmUdParam{}.Reserved)},
	}},
	{Struct: "rdma_ucm_ece", Size: unsafe.Sizeof(RdmaUcmEce{}), Fields: []btfcheck.Field{
		{Name: "vendor_id", Offset: unsafe.Offsetof(RdmaUcmEce{}.VendorId)},
		{Name: "attr_mod", Offset: unsafe.Offsetof(RdmaUcmEce{}.AttrMod)},
	}},
	{Struct: "rdma_ucm_connect", Size: unsafe.Sizeof(RdmaUcmConnect{}), Fields: []btfcheck.Field{
		{Name: "conn_param", Offset: unsafe.Offsetof(RdmaUcmConnect{}.ConnParam)},
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmConnect{}.Id)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmConnect{}.Reserved)},
		{Name: "ece", Offset: unsafe.Offsetof(RdmaUcmConnect{}.Ece)},
	}},
	{Struct: "rdma_ucm_listen", Size: unsafe.Sizeof(RdmaUcmListen{}), Fields: []btfcheck.Field{
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmListen{}.Id)},
		{Name: "backlog", Offset: unsafe.Offsetof(RdmaUcmListen{}.Backlog)},
	}},
	{Struct: "rdma_ucm_accept", Size: unsafe.Sizeof(RdmaUcmAccept{}), Fields: []btfcheck.Field{
		{Name: "uid", Offset: unsafe.Offsetof(RdmaUcmAccept{}.Uid)},
		{Name: "conn_param", Offset: unsafe.Offsetof(RdmaUcmAccept{}.ConnParam)},
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmAccept{}.Id)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmAccept{}.Reserved)},
		{Name: "ece", Offset: unsafe.Offsetof(RdmaUcmAccept{}.Ece)},
	}},
	{Struct: "rdma_ucm_reject", Size: unsafe.Sizeof(RdmaUcmReject{}), Fields: []btfcheck.Field{
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmReject{}.Id)},
		{Name: "private_data_len", Offset: unsafe.Offsetof(RdmaUcmReject{}.PrivateDataLen)},
		{Name: "reason", Offset: unsafe.Offsetof(RdmaUcmReject{}.Reason)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmReject{}.Reserved)},
		{Name: "private_data", Offset: unsafe.Offsetof(RdmaUcmReject{}.PrivateData)},
	}},
	{Struct: "rdma_ucm_disconnect", Size: unsafe.Sizeof(RdmaUcmDisconnect{}), Fields: []btfcheck.Field{
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmDisconnect{}.Id)},
	}},
	{Struct: "rdma_ucm_init_qp_attr", Size: unsafe.Sizeof(RdmaUcmInitQpAttr{}), Fields: []btfcheck.Field{
		{Name: "response", Offset: unsafe.Offsetof(RdmaUcmInitQpAttr{}.Response)},
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmInitQpAttr{}.Id)},
		{Name: "qp_state", Offset: unsafe.Offsetof(RdmaUcmInitQpAttr{}.QpState)},
	}},
	{Struct: "ib_uverbs_qp_attr", Size: unsafe.Sizeof(IbUverbsQpAttr{}), Fields: []btfcheck.Field{
		{Name: "qp_attr_mask", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.QpAttrMask)},
		{Name: "qp_state", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.QpState)},
		{Name: "cur_qp_state", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.CurQpState)},
		{Name: "path_mtu", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.PathMtu)},
		{Name: "path_mig_state", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.PathMigState)},
		{Name: "qkey", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.Qkey)},
		{Name: "rq_psn", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.RqPsn)},
		{Name: "sq_psn", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.SqPsn)},
		{Name: "dest_qp_num", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.DestQpNum)},
		{Name: "qp_access_flags", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.QpAccessFlags)},
		{Name: "ah_attr", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.AhAttr)},
		{Name: "alt_ah_attr", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.AltAhAttr)},
		{Name: "max_send_wr", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.MaxSendWr)},
		{Name: "max_recv_wr", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.MaxRecvWr)},
		{Name: "max_send_sge", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.MaxSendSge)},
		{Name: "max_recv_sge", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.MaxRecvSge)},
		{Name: "max_inline_data", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.MaxInlineData)},
		{Name: "pkey_index", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.PkeyIndex)},
		{Name: "alt_pkey_index", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.AltPkeyIndex)},
		{Name: "en_sqd_async_notify", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.EnSqdAsyncNotify)},
		{Name: "sq_draining", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.SqDraining)},
		{Name: "max_rd_atomic", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.MaxRdAtomic)},
		{Name: "max_dest_rd_atomic", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.MaxDestRdAtomic)},
		{Name: "min_rnr_timer", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.MinRnrTimer)},
		{Name: "port_num", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.PortNum)},
		{Name: "timeout", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.Timeout)},
		{Name: "retry_cnt", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.RetryCnt)},
		{Name: "rnr_retry", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.RnrRetry)},
		{Name: "alt_port_num", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.AltPortNum)},
		{Name: "alt_timeout", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.AltTimeout)},
		{Name: "reserved", Offset: unsafe.Offsetof(IbUverbsQpAttr{}.Reserved)},
	}},
	{Struct: "rdma_ucm_notify", Size: unsafe.Sizeof(RdmaUcmNotify{}), Fields: []btfcheck.Field{
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmNotify{}.Id)},
		{Name: "event", Offset: unsafe.Offsetof(RdmaUcmNotify{}.Event)},
	}},
	{Struct: "rdma_ucm_get_event", Size: unsafe.Sizeof(RdmaUcmGetEvent{}), Fields: []btfcheck.Field{
		{Name: "response", Offset: unsafe.Offsetof(RdmaUcmGetEvent{}.Response)},
	}},
	{Struct: "rdma_ucm_event_resp", Size: unsafe.Sizeof(RdmaUcmEventResp{}), Fields: []btfcheck.Field{
		{Name: "uid", Offset: unsafe.Offsetof(RdmaUcmEventResp{}.Uid)},
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmEventResp{}.Id)},
		{Name: "event", Offset: unsafe.Offsetof(RdmaUcmEventResp{}.Event)},
		{Name: "status", Offset: unsafe.Offsetof(RdmaUcmEventResp{}.Status)},
		{Name: "param", Offset: unsafe.Offsetof(RdmaUcmEventResp{}.Param)},
		{Name: "reserved", Offset: unsafe.Offsetof(RdmaUcmEventResp{}.Reserved)},
		{Name: "ece", Offset: unsafe.Offsetof(RdmaUcmEventResp{}.Ece)},
	}},
	{Struct: "rdma_ucm_set_option", Size: unsafe.Sizeof(RdmaUcmSetOption{}), Fields: []btfcheck.Field{
		{Name: "optval", Offset: unsafe.Offsetof(RdmaUcmSetOption{}.Optval)},
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmSetOption{}.Id)},
		{Name: "level", Offset: unsafe.Offsetof(RdmaUcmSetOption{}.Level)},
		{Name: "optname", Offset: unsafe.Offsetof(RdmaUcmSetOption{}.Optname)},
		{Name: "optlen", Offset: unsafe.Offsetof(RdmaUcmSetOption{}.Optlen)},
	}},
	{Struct: "rdma_ucm_migrate_id", Size: unsafe.Sizeof(RdmaUcmMigrateId{}), Fields: []btfcheck.Field{
		{Name: "response", Offset: unsafe.Offsetof(RdmaUcmMigrateId{}.Response)},
		{Name: "id", Offset: unsafe.Offsetof(RdmaUcmMigrateId{}.Id)},
		{Name: "fd", Offset: unsafe.Offsetof(RdmaUcmMigrateId{}.Fd)},
	}},
	{Struct: "rdma_ucm_migrate_resp", Size: unsafe.Sizeof(RdmaUcmMigrateResp{}), Fields: []btfcheck.Field{
		{Name: "events_reported", Offset: unsafe.Offsetof(RdmaUcmMigrateResp{}.EventsReported)},
	}},
	{Struct: "sockaddr_in6", Size: unsafe.Sizeof(SockaddrIn6{}), Fields: []btfcheck.Field{
		{Name: "sin6_family", Offset: unsafe.Offsetof(SockaddrIn6{}.Family)},
		{Name: "sin6_port", Offset: unsafe.Offsetof(SockaddrIn6{}.Port)},
		{Name: "sin6_flowinfo", Offset: unsafe.Offsetof(SockaddrIn6{}.Flowinfo)},
		{Name: "sin6_addr", Offset: unsafe.Offsetof(SockaddrIn6{}.Addr)},
		{Name: "sin6_scope_id", Offset: unsafe.Offsetof(SockaddrIn6{}.ScopeID)},
	}},
	// struct cma_hdr is cma.c's, not the ABI's: its size is what the
	// request's private data loses.
	{Struct: "cma_hdr", Size: CMA_HDR_SIZE},
}

// notInBTF are structs of the ABI the kernels may not keep in BTF;
// filled from the lab's findings: a struct here must be absent (the test
// fails if it turns up, so that it is checked then).
var notInBTF = map[string]string{}

// TestLabBTFUCMA checks the ABI mirror against the BTF of the lab
// kernel's rdma_ucm, rdma_cm, ib_cm, ib_core and vmlinux: the enums'
// values, every struct's size and field offsets; constants of anonymous
// enums the compiler dropped, and #defines, are listed as absent with
// their header.
func TestLabBTFUCMA(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("vmlinux", "ib_core", "ib_cm", "rdma_cm", "rdma_ucm")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, ucmaConsts)
	var absent []string
	for _, c := range anonConsts {
		v, err := s.EnumValue("", c.Name)
		switch {
		case err != nil:
			absent = append(absent, c.Name+" ("+c.header+")")
		case v != c.Value:
			t.Errorf("%s: Go has %#x, %s BTF has %#x", c.Name, c.Value, s.Name, v)
		}
	}
	var layouts []btfcheck.Layout
	for _, l := range ucmaLayouts {
		if _, err := s.StructSize(l.Struct); err != nil {
			if h, ok := notInBTF[l.Struct]; ok {
				absent = append(absent, "struct "+l.Struct+" ("+h+")")
				continue
			}
			t.Errorf("struct %s: %v", l.Struct, err)
			continue
		}
		if _, ok := notInBTF[l.Struct]; ok {
			t.Errorf("struct %s is in %s's BTF now: remove it from notInBTF", l.Struct, s.Name)
		}
		layouts = append(layouts, l)
	}
	btfcheck.CheckLayouts(t, s, layouts)
	for _, d := range defines {
		absent = append(absent, d.name+" (#define, "+d.header+")")
	}
	n := 0
	for _, l := range layouts {
		n += len(l.Fields)
	}
	t.Logf("%s: %d enum constants, %d of %d anonymous enumerators, %d structs with %d fields checked", s.Name,
		len(ucmaConsts), len(anonConsts)-(len(absent)-len(defines)), len(anonConsts), len(layouts), n)
	t.Logf("absent from BTF: %v", absent)
}
