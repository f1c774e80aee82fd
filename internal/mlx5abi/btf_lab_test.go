package mlx5abi

import (
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
)

// uapiConsts is every mlx5_ib uapi constant this package mirrors. The table
// grows with the package.
var uapiConsts = []btfcheck.Const{
	{Enum: "mlx5_ib_objects", Name: "MLX5_IB_OBJECT_DEVX", Value: MLX5_IB_OBJECT_DEVX},
	{Enum: "mlx5_ib_objects", Name: "MLX5_IB_OBJECT_DEVX_OBJ", Value: MLX5_IB_OBJECT_DEVX_OBJ},
	{Enum: "mlx5_ib_objects", Name: "MLX5_IB_OBJECT_DEVX_UMEM", Value: MLX5_IB_OBJECT_DEVX_UMEM},
	{Enum: "mlx5_ib_objects", Name: "MLX5_IB_OBJECT_FLOW_MATCHER", Value: MLX5_IB_OBJECT_FLOW_MATCHER},
	{Enum: "mlx5_ib_objects", Name: "MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD", Value: MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD},
	{Enum: "mlx5_ib_objects", Name: "MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD", Value: MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD},
	{Enum: "mlx5_ib_objects", Name: "MLX5_IB_OBJECT_VAR", Value: MLX5_IB_OBJECT_VAR},
	{Enum: "mlx5_ib_objects", Name: "MLX5_IB_OBJECT_PP", Value: MLX5_IB_OBJECT_PP},
	{Enum: "mlx5_ib_objects", Name: "MLX5_IB_OBJECT_UAR", Value: MLX5_IB_OBJECT_UAR},
	{Enum: "mlx5_ib_objects", Name: "MLX5_IB_OBJECT_STEERING_ANCHOR", Value: MLX5_IB_OBJECT_STEERING_ANCHOR},
	{Enum: "mlx5_ib_devx_methods", Name: "MLX5_IB_METHOD_DEVX_OTHER", Value: MLX5_IB_METHOD_DEVX_OTHER},
	{Enum: "mlx5_ib_devx_methods", Name: "MLX5_IB_METHOD_DEVX_QUERY_UAR", Value: MLX5_IB_METHOD_DEVX_QUERY_UAR},
	{Enum: "mlx5_ib_devx_methods", Name: "MLX5_IB_METHOD_DEVX_QUERY_EQN", Value: MLX5_IB_METHOD_DEVX_QUERY_EQN},
	{Enum: "mlx5_ib_devx_methods", Name: "MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT", Value: MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT},
	{Enum: "mlx5_ib_devx_other_attrs", Name: "MLX5_IB_ATTR_DEVX_OTHER_CMD_IN", Value: MLX5_IB_ATTR_DEVX_OTHER_CMD_IN},
	{Enum: "mlx5_ib_devx_other_attrs", Name: "MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT", Value: MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT},
	{Enum: "mlx5_ib_devx_query_uar_attrs", Name: "MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX", Value: MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX},
	{Enum: "mlx5_ib_devx_query_uar_attrs", Name: "MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX", Value: MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX},
	{Enum: "mlx5_ib_devx_subscribe_event_attrs", Name: "MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE", Value: MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE},
	{Enum: "mlx5_ib_devx_subscribe_event_attrs", Name: "MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE", Value: MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE},
	{Enum: "mlx5_ib_devx_subscribe_event_attrs", Name: "MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST", Value: MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST},
	{Enum: "mlx5_ib_devx_subscribe_event_attrs", Name: "MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM", Value: MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM},
	{Enum: "mlx5_ib_devx_subscribe_event_attrs", Name: "MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE", Value: MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE},
	{Enum: "mlx5_ib_devx_query_eqn_attrs", Name: "MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC", Value: MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC},
	{Enum: "mlx5_ib_devx_query_eqn_attrs", Name: "MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN", Value: MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN},
	{Enum: "mlx5_ib_devx_obj_methods", Name: "MLX5_IB_METHOD_DEVX_OBJ_CREATE", Value: MLX5_IB_METHOD_DEVX_OBJ_CREATE},
	{Enum: "mlx5_ib_devx_obj_methods", Name: "MLX5_IB_METHOD_DEVX_OBJ_DESTROY", Value: MLX5_IB_METHOD_DEVX_OBJ_DESTROY},
	{Enum: "mlx5_ib_devx_obj_methods", Name: "MLX5_IB_METHOD_DEVX_OBJ_MODIFY", Value: MLX5_IB_METHOD_DEVX_OBJ_MODIFY},
	{Enum: "mlx5_ib_devx_obj_methods", Name: "MLX5_IB_METHOD_DEVX_OBJ_QUERY", Value: MLX5_IB_METHOD_DEVX_OBJ_QUERY},
	{Enum: "mlx5_ib_devx_obj_methods", Name: "MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY", Value: MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY},
	{Enum: "mlx5_ib_devx_obj_create_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE", Value: MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE},
	{Enum: "mlx5_ib_devx_obj_create_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN", Value: MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN},
	{Enum: "mlx5_ib_devx_obj_create_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT", Value: MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT},
	{Enum: "mlx5_ib_devx_obj_destroy_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE", Value: MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE},
	{Enum: "mlx5_ib_devx_obj_modify_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE", Value: MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE},
	{Enum: "mlx5_ib_devx_obj_modify_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN", Value: MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN},
	{Enum: "mlx5_ib_devx_obj_modify_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT", Value: MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT},
	{Enum: "mlx5_ib_devx_obj_query_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE", Value: MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE},
	{Enum: "mlx5_ib_devx_obj_query_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN", Value: MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN},
	{Enum: "mlx5_ib_devx_obj_query_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT", Value: MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT},
	{Enum: "mlx5_ib_devx_obj_query_async_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE", Value: MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE},
	{Enum: "mlx5_ib_devx_obj_query_async_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN", Value: MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN},
	{Enum: "mlx5_ib_devx_obj_query_async_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD", Value: MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD},
	{Enum: "mlx5_ib_devx_obj_query_async_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID", Value: MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID},
	{Enum: "mlx5_ib_devx_obj_query_async_attrs", Name: "MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN", Value: MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN},
	{Enum: "mlx5_ib_devx_async_cmd_fd_methods", Name: "MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC", Value: MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC},
	{Enum: "mlx5_ib_devx_async_cmd_fd_alloc_attrs", Name: "MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE", Value: MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE},
	{Enum: "mlx5_ib_devx_async_event_fd_methods", Name: "MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC", Value: MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC},
	{Enum: "mlx5_ib_devx_async_event_fd_alloc_attrs", Name: "MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE", Value: MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE},
	{Enum: "mlx5_ib_devx_async_event_fd_alloc_attrs", Name: "MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS", Value: MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS},
	{Enum: "mlx5_ib_uapi_devx_create_event_channel_flags", Name: "MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA", Value: MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA},
	{Enum: "mlx5_ib_devx_umem_methods", Name: "MLX5_IB_METHOD_DEVX_UMEM_REG", Value: MLX5_IB_METHOD_DEVX_UMEM_REG},
	{Enum: "mlx5_ib_devx_umem_methods", Name: "MLX5_IB_METHOD_DEVX_UMEM_DEREG", Value: MLX5_IB_METHOD_DEVX_UMEM_DEREG},
	{Enum: "mlx5_ib_devx_umem_reg_attrs", Name: "MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE", Value: MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE},
	{Enum: "mlx5_ib_devx_umem_reg_attrs", Name: "MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR", Value: MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR},
	{Enum: "mlx5_ib_devx_umem_reg_attrs", Name: "MLX5_IB_ATTR_DEVX_UMEM_REG_LEN", Value: MLX5_IB_ATTR_DEVX_UMEM_REG_LEN},
	{Enum: "mlx5_ib_devx_umem_reg_attrs", Name: "MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS", Value: MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS},
	{Enum: "mlx5_ib_devx_umem_reg_attrs", Name: "MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID", Value: MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID},
	{Enum: "mlx5_ib_devx_umem_reg_attrs", Name: "MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP", Value: MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP},
	{Enum: "mlx5_ib_devx_umem_reg_attrs", Name: "MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD", Value: MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD},
	{Enum: "mlx5_ib_devx_umem_dereg_attrs", Name: "MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE", Value: MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE},
	{Enum: "mlx5_ib_uar_obj_methods", Name: "MLX5_IB_METHOD_UAR_OBJ_ALLOC", Value: MLX5_IB_METHOD_UAR_OBJ_ALLOC},
	{Enum: "mlx5_ib_uar_obj_methods", Name: "MLX5_IB_METHOD_UAR_OBJ_DESTROY", Value: MLX5_IB_METHOD_UAR_OBJ_DESTROY},
	{Enum: "mlx5_ib_uar_alloc_attrs", Name: "MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE", Value: MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE},
	{Enum: "mlx5_ib_uar_alloc_attrs", Name: "MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE", Value: MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE},
	{Enum: "mlx5_ib_uar_alloc_attrs", Name: "MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET", Value: MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET},
	{Enum: "mlx5_ib_uar_alloc_attrs", Name: "MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH", Value: MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH},
	{Enum: "mlx5_ib_uar_alloc_attrs", Name: "MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID", Value: MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID},
	{Enum: "mlx5_ib_uar_obj_destroy_attrs", Name: "MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE", Value: MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE},
	{Enum: "mlx5_lib_caps", Name: "MLX5_LIB_CAP_4K_UAR", Value: MLX5_LIB_CAP_4K_UAR},
	{Enum: "mlx5_lib_caps", Name: "MLX5_LIB_CAP_DYN_UAR", Value: MLX5_LIB_CAP_DYN_UAR},
	{Enum: "mlx5_ib_alloc_uctx_v2_flags", Name: "MLX5_IB_ALLOC_UCTX_DEVX", Value: MLX5_IB_ALLOC_UCTX_DEVX},
	{Enum: "mlx5_ib_alloc_ucontext_resp_mask", Name: "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET", Value: MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET},
	{Enum: "mlx5_ib_alloc_ucontext_resp_mask", Name: "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY", Value: MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY},
	{Enum: "mlx5_ib_alloc_ucontext_resp_mask", Name: "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE", Value: MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE},
	{Enum: "mlx5_ib_alloc_ucontext_resp_mask", Name: "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS", Value: MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS},
	{Enum: "mlx5_ib_alloc_ucontext_resp_mask", Name: "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS", Value: MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS},
	{Enum: "mlx5_ib_alloc_ucontext_resp_mask", Name: "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_MKEY_UPDATE_TAG", Value: MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_MKEY_UPDATE_TAG},
	{Enum: "mlx5_ib_uapi_uar_alloc_type", Name: "MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF", Value: MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF},
	{Enum: "mlx5_ib_uapi_uar_alloc_type", Name: "MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC", Value: MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC},
	{Name: "MLX5_SRQ_FLAG_SIGNATURE", Value: MLX5_SRQ_FLAG_SIGNATURE},
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
	{Enum: "mlx5_ib_create_cq_flags", Name: "MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD", Value: MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD},
	{Enum: "mlx5_ib_create_cq_flags", Name: "MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX", Value: MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX},
	{Enum: "mlx5_ib_create_cq_flags", Name: "MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS", Value: MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS},
	{Enum: "mlx5_user_cmds_supp_uhw", Name: "MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE", Value: MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE},
	{Enum: "mlx5_user_cmds_supp_uhw", Name: "MLX5_USER_CMDS_SUPP_UHW_CREATE_AH", Value: MLX5_USER_CMDS_SUPP_UHW_CREATE_AH},
	{Name: "MLX5_IB_CREATE_QP_RESP_MASK_TIRN", Value: MLX5_IB_CREATE_QP_RESP_MASK_TIRN},
	{Name: "MLX5_IB_CREATE_QP_RESP_MASK_TISN", Value: MLX5_IB_CREATE_QP_RESP_MASK_TISN},
	{Name: "MLX5_IB_CREATE_QP_RESP_MASK_RQN", Value: MLX5_IB_CREATE_QP_RESP_MASK_RQN},
	{Name: "MLX5_IB_CREATE_QP_RESP_MASK_SQN", Value: MLX5_IB_CREATE_QP_RESP_MASK_SQN},
	{Name: "MLX5_IB_CREATE_QP_RESP_MASK_TIR_ICM_ADDR", Value: MLX5_IB_CREATE_QP_RESP_MASK_TIR_ICM_ADDR},
	{Name: "MLX5_SRQ_FLAG_SIGNATURE", Value: MLX5_SRQ_FLAG_SIGNATURE},
}

// uapiLayouts are the mlx5 driver-data structs (<rdma/mlx5-abi.h>,
// <rdma/mlx5_user_ioctl_verbs.h>).
var uapiLayouts = []btfcheck.Layout{
	{Struct: "mlx5_ib_alloc_ucontext_req_v2", Size: unsafe.Sizeof(Mlx5IbAllocUcontextReqV2{}), Fields: []btfcheck.Field{
		{Name: "total_num_bfregs", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextReqV2{}.TotalNumBfregs)},
		{Name: "num_low_latency_bfregs", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextReqV2{}.NumLowLatencyBfregs)},
		{Name: "flags", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextReqV2{}.Flags)},
		{Name: "comp_mask", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextReqV2{}.CompMask)},
		{Name: "max_cqe_version", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextReqV2{}.MaxCqeVersion)},
		{Name: "reserved0", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextReqV2{}.Reserved0)},
		{Name: "reserved1", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextReqV2{}.Reserved1)},
		{Name: "reserved2", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextReqV2{}.Reserved2)},
		{Name: "lib_caps", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextReqV2{}.LibCaps)},
	}},
	{Struct: "mlx5_ib_alloc_ucontext_resp", Size: unsafe.Sizeof(Mlx5IbAllocUcontextResp{}), Fields: []btfcheck.Field{
		{Name: "qp_tab_size", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.QpTabSize)},
		{Name: "bf_reg_size", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.BfRegSize)},
		{Name: "tot_bfregs", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.TotBfregs)},
		{Name: "cache_line_size", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.CacheLineSize)},
		{Name: "max_sq_desc_sz", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.MaxSqDescSz)},
		{Name: "max_rq_desc_sz", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.MaxRqDescSz)},
		{Name: "max_send_wqebb", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.MaxSendWqebb)},
		{Name: "max_recv_wr", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.MaxRecvWr)},
		{Name: "max_srq_recv_wr", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.MaxSrqRecvWr)},
		{Name: "num_ports", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.NumPorts)},
		{Name: "flow_action_flags", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.FlowActionFlags)},
		{Name: "comp_mask", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.CompMask)},
		{Name: "response_length", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.ResponseLength)},
		{Name: "cqe_version", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.CqeVersion)},
		{Name: "cmds_supp_uhw", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.CmdsSuppUhw)},
		{Name: "eth_min_inline", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.EthMinInline)},
		{Name: "clock_info_versions", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.ClockInfoVersions)},
		{Name: "hca_core_clock_offset", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.HcaCoreClockOff)},
		{Name: "log_uar_size", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.LogUarSize)},
		{Name: "num_uars_per_page", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.NumUarsPerPage)},
		{Name: "num_dyn_bfregs", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.NumDynBfregs)},
		{Name: "dump_fill_mkey", Offset: unsafe.Offsetof(Mlx5IbAllocUcontextResp{}.DumpFillMkey)},
	}},
	{Struct: "mlx5_ib_uapi_devx_async_cmd_hdr", Size: unsafe.Sizeof(Mlx5IbUapiDevxAsyncCmdHdr{}), Fields: []btfcheck.Field{
		{Name: "wr_id", Offset: unsafe.Offsetof(Mlx5IbUapiDevxAsyncCmdHdr{}.WrID)},
	}},
	{Struct: "mlx5_ib_uapi_devx_async_event_hdr", Size: unsafe.Sizeof(Mlx5IbUapiDevxAsyncEventHdr{}), Fields: []btfcheck.Field{
		{Name: "cookie", Offset: unsafe.Offsetof(Mlx5IbUapiDevxAsyncEventHdr{}.Cookie)},
	}},
	{Struct: "mlx5_ib_create_cq", Size: unsafe.Sizeof(Mlx5IbCreateCq{}), Fields: []btfcheck.Field{
		{Name: "buf_addr", Offset: unsafe.Offsetof(Mlx5IbCreateCq{}.BufAddr)},
		{Name: "db_addr", Offset: unsafe.Offsetof(Mlx5IbCreateCq{}.DbAddr)},
		{Name: "cqe_size", Offset: unsafe.Offsetof(Mlx5IbCreateCq{}.CqeSize)},
		{Name: "cqe_comp_en", Offset: unsafe.Offsetof(Mlx5IbCreateCq{}.CqeCompEn)},
		{Name: "cqe_comp_res_format", Offset: unsafe.Offsetof(Mlx5IbCreateCq{}.CqeCompResFormat)},
		{Name: "flags", Offset: unsafe.Offsetof(Mlx5IbCreateCq{}.Flags)},
		{Name: "uar_page_index", Offset: unsafe.Offsetof(Mlx5IbCreateCq{}.UarPageIndex)},
		{Name: "reserved0", Offset: unsafe.Offsetof(Mlx5IbCreateCq{}.Reserved0)},
		{Name: "reserved1", Offset: unsafe.Offsetof(Mlx5IbCreateCq{}.Reserved1)},
	}},
	// struct mlx5_ib_create_cq_resp is not in mlx5_ib's BTF (the kernel
	// copies the cqn alone); TestCreateCQRespSize checks it against the
	// response libmlx5 asked for.
	{Struct: "mlx5_ib_create_qp_dci_streams", Size: unsafe.Sizeof(Mlx5IbCreateQpDciStreams{}), Fields: []btfcheck.Field{
		{Name: "log_num_concurent", Offset: unsafe.Offsetof(Mlx5IbCreateQpDciStreams{}.LogNumConcurent)},
		{Name: "log_num_errored", Offset: unsafe.Offsetof(Mlx5IbCreateQpDciStreams{}.LogNumErrored)},
	}},
	{Struct: "mlx5_ib_create_qp", Size: unsafe.Sizeof(Mlx5IbCreateQp{}), Fields: []btfcheck.Field{
		{Name: "buf_addr", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.BufAddr)},
		{Name: "db_addr", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.DbAddr)},
		{Name: "sq_wqe_count", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.SqWqeCount)},
		{Name: "rq_wqe_count", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.RqWqeCount)},
		{Name: "rq_wqe_shift", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.RqWqeShift)},
		{Name: "flags", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.Flags)},
		{Name: "uidx", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.Uidx)},
		{Name: "bfreg_index", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.BfregIndex)},
		{Name: "sq_buf_addr", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.SqBufAddr)},
		{Name: "access_key", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.SqBufAddr)},
		{Name: "ece_options", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.EceOptions)},
		{Name: "dci_streams", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.DciStreams)},
		{Name: "reserved", Offset: unsafe.Offsetof(Mlx5IbCreateQp{}.Reserved)},
	}},
	{Struct: "mlx5_ib_create_qp_resp", Size: unsafe.Sizeof(Mlx5IbCreateQpResp{}), Fields: []btfcheck.Field{
		{Name: "bfreg_index", Offset: unsafe.Offsetof(Mlx5IbCreateQpResp{}.BfregIndex)},
		{Name: "ece_options", Offset: unsafe.Offsetof(Mlx5IbCreateQpResp{}.EceOptions)},
		{Name: "comp_mask", Offset: unsafe.Offsetof(Mlx5IbCreateQpResp{}.CompMask)},
		{Name: "tirn", Offset: unsafe.Offsetof(Mlx5IbCreateQpResp{}.Tirn)},
		{Name: "tisn", Offset: unsafe.Offsetof(Mlx5IbCreateQpResp{}.Tisn)},
		{Name: "rqn", Offset: unsafe.Offsetof(Mlx5IbCreateQpResp{}.Rqn)},
		{Name: "sqn", Offset: unsafe.Offsetof(Mlx5IbCreateQpResp{}.Sqn)},
		{Name: "tir_icm_addr", Offset: unsafe.Offsetof(Mlx5IbCreateQpResp{}.TirIcmAddr)},
	}},
	{Struct: "mlx5_ib_alloc_pd_resp", Size: unsafe.Sizeof(Mlx5IbAllocPdResp{}), Fields: []btfcheck.Field{
		{Name: "pdn", Offset: unsafe.Offsetof(Mlx5IbAllocPdResp{}.Pdn)},
	}},
	{Struct: "mlx5_ib_create_srq", Size: unsafe.Sizeof(Mlx5IbCreateSrq{}), Fields: []btfcheck.Field{
		{Name: "buf_addr", Offset: unsafe.Offsetof(Mlx5IbCreateSrq{}.BufAddr)},
		{Name: "db_addr", Offset: unsafe.Offsetof(Mlx5IbCreateSrq{}.DbAddr)},
		{Name: "flags", Offset: unsafe.Offsetof(Mlx5IbCreateSrq{}.Flags)},
		{Name: "reserved0", Offset: unsafe.Offsetof(Mlx5IbCreateSrq{}.Reserved0)},
		{Name: "uidx", Offset: unsafe.Offsetof(Mlx5IbCreateSrq{}.Uidx)},
		{Name: "reserved1", Offset: unsafe.Offsetof(Mlx5IbCreateSrq{}.Reserved1)},
	}},
	{Struct: "mlx5_ib_create_srq_resp", Size: unsafe.Sizeof(Mlx5IbCreateSrqResp{}), Fields: []btfcheck.Field{
		{Name: "srqn", Offset: unsafe.Offsetof(Mlx5IbCreateSrqResp{}.Srqn)},
		{Name: "reserved", Offset: unsafe.Offsetof(Mlx5IbCreateSrqResp{}.Reserved)},
	}},
	{Struct: "mlx5_ib_create_ah_resp", Size: unsafe.Sizeof(Mlx5IbCreateAhResp{}), Fields: []btfcheck.Field{
		{Name: "response_length", Offset: unsafe.Offsetof(Mlx5IbCreateAhResp{}.ResponseLength)},
		{Name: "dmac", Offset: unsafe.Offsetof(Mlx5IbCreateAhResp{}.Dmac)},
		{Name: "reserved", Offset: unsafe.Offsetof(Mlx5IbCreateAhResp{}.Reserved)},
	}},
	{Struct: "mlx5_ib_burst_info", Size: unsafe.Sizeof(Mlx5IbBurstInfo{}), Fields: []btfcheck.Field{
		{Name: "max_burst_sz", Offset: unsafe.Offsetof(Mlx5IbBurstInfo{}.MaxBurstSz)},
		{Name: "typical_pkt_sz", Offset: unsafe.Offsetof(Mlx5IbBurstInfo{}.TypicalPktSz)},
		{Name: "reserved", Offset: unsafe.Offsetof(Mlx5IbBurstInfo{}.Reserved)},
	}},
	{Struct: "mlx5_ib_modify_qp", Size: unsafe.Sizeof(Mlx5IbModifyQp{}), Fields: []btfcheck.Field{
		{Name: "comp_mask", Offset: unsafe.Offsetof(Mlx5IbModifyQp{}.CompMask)},
		{Name: "burst_info", Offset: unsafe.Offsetof(Mlx5IbModifyQp{}.BurstInfo)},
		{Name: "ece_options", Offset: unsafe.Offsetof(Mlx5IbModifyQp{}.EceOptions)},
	}},
	{Struct: "mlx5_ib_modify_qp_resp", Size: unsafe.Sizeof(Mlx5IbModifyQpResp{}), Fields: []btfcheck.Field{
		{Name: "response_length", Offset: unsafe.Offsetof(Mlx5IbModifyQpResp{}.ResponseLength)},
		{Name: "dctn", Offset: unsafe.Offsetof(Mlx5IbModifyQpResp{}.Dctn)},
		{Name: "ece_options", Offset: unsafe.Offsetof(Mlx5IbModifyQpResp{}.EceOptions)},
		{Name: "reserved", Offset: unsafe.Offsetof(Mlx5IbModifyQpResp{}.Reserved)},
	}},
}

func TestLabBTFMlx5Uapi(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("mlx5_ib")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, uapiConsts)
	btfcheck.CheckLayouts(t, s, uapiLayouts)
}

// eventConsts and eventLayouts are what a DEVX event carries: the event
// types and CQ error syndromes (<linux/mlx5/device.h>,
// <linux/mlx5/mlx5_ifc.h>) and the EQE's layout. They are kernel-internal,
// so they are looked up in mlx5_ib's and mlx5_core's BTF together.
var eventConsts = []btfcheck.Const{
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_SQ_DRAINED", Value: MLX5_EVENT_TYPE_SQ_DRAINED},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_CQ_ERROR", Value: MLX5_EVENT_TYPE_CQ_ERROR},
	{Name: "MLX5_EVENT_QUEUE_TYPE_QP", Value: MLX5_EVENT_QUEUE_TYPE_QP},
	{Name: "MLX5_EVENT_QUEUE_TYPE_RQ", Value: MLX5_EVENT_QUEUE_TYPE_RQ},
	{Name: "MLX5_EVENT_QUEUE_TYPE_SQ", Value: MLX5_EVENT_QUEUE_TYPE_SQ},
	{Name: "MLX5_EVENT_QUEUE_TYPE_DCT", Value: MLX5_EVENT_QUEUE_TYPE_DCT},
	// MLX5_CQ_ERROR_SYNDROME_* are not here: no kernel code uses that enum
	// (nor struct mlx5_ifc_cq_error_bits), so neither module's BTF has it.
	// Where the syndrome sits is checked below (mlx5_eqe_cq_err.syndrome).
}

var eventLayouts = []btfcheck.Layout{
	{Struct: "mlx5_eqe", Size: unsafe.Sizeof(Mlx5Eqe{}), Fields: []btfcheck.Field{
		{Name: "type", Offset: unsafe.Offsetof(Mlx5Eqe{}.Type)},
		{Name: "sub_type", Offset: unsafe.Offsetof(Mlx5Eqe{}.SubType)},
		{Name: "data", Offset: unsafe.Offsetof(Mlx5Eqe{}.Data)},
		{Name: "data.cq_err.cqn", Offset: unsafe.Offsetof(Mlx5Eqe{}.Data) + unsafe.Offsetof(Mlx5EqeCqErr{}.Cqn)},
		{Name: "data.cq_err.syndrome", Offset: unsafe.Offsetof(Mlx5Eqe{}.Data) + unsafe.Offsetof(Mlx5EqeCqErr{}.Syndrome)},
		{Name: "data.qp_srq.type", Offset: unsafe.Offsetof(Mlx5Eqe{}.Data) + unsafe.Offsetof(Mlx5EqeQpSrq{}.Type)},
		{Name: "data.qp_srq.qp_srq_n", Offset: unsafe.Offsetof(Mlx5Eqe{}.Data) + unsafe.Offsetof(Mlx5EqeQpSrq{}.QpSrqN)},
		{Name: "signature", Offset: unsafe.Offsetof(Mlx5Eqe{}.Signature)},
		{Name: "owner", Offset: unsafe.Offsetof(Mlx5Eqe{}.Owner)},
	}},
	{Struct: "mlx5_eqe_cq_err", Size: unsafe.Sizeof(Mlx5EqeCqErr{}), Fields: []btfcheck.Field{
		{Name: "cqn", Offset: unsafe.Offsetof(Mlx5EqeCqErr{}.Cqn)},
		{Name: "syndrome", Offset: unsafe.Offsetof(Mlx5EqeCqErr{}.Syndrome)},
	}},
	{Struct: "mlx5_eqe_qp_srq", Size: unsafe.Sizeof(Mlx5EqeQpSrq{}), Fields: []btfcheck.Field{
		{Name: "type", Offset: unsafe.Offsetof(Mlx5EqeQpSrq{}.Type)},
		{Name: "qp_srq_n", Offset: unsafe.Offsetof(Mlx5EqeQpSrq{}.QpSrqN)},
	}},
}

func TestLabBTFMlx5Events(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("mlx5_ib", "mlx5_core")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, eventConsts)
	btfcheck.CheckLayouts(t, s, eventLayouts)
}

// queryDeviceConsts and queryDeviceLayouts are the driver data of the
// extended query device (device.go): struct mlx5_ib_query_device_resp,
// what it nests, and the enums of its fields.
var queryDeviceConsts = []btfcheck.Const{
	{Enum: "mlx5_ib_cqe_comp_res_format", Name: "MLX5_IB_CQE_RES_FORMAT_HASH", Value: MLX5_IB_CQE_RES_FORMAT_HASH},
	{Enum: "mlx5_ib_cqe_comp_res_format", Name: "MLX5_IB_CQE_RES_FORMAT_CSUM", Value: MLX5_IB_CQE_RES_FORMAT_CSUM},
	{Enum: "mlx5_ib_cqe_comp_res_format", Name: "MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX", Value: MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX},
	{Enum: "mlx5_ib_packet_pacing_cap_flags", Name: "MLX5_IB_PP_SUPPORT_BURST", Value: MLX5_IB_PP_SUPPORT_BURST},
	{Enum: "mlx5_ib_mpw_caps", Name: "MPW_RESERVED", Value: MPW_RESERVED},
	{Enum: "mlx5_ib_mpw_caps", Name: "MLX5_IB_ALLOW_MPW", Value: MLX5_IB_ALLOW_MPW},
	{Enum: "mlx5_ib_mpw_caps", Name: "MLX5_IB_SUPPORT_EMPW", Value: MLX5_IB_SUPPORT_EMPW},
	{Enum: "mlx5_ib_sw_parsing_offloads", Name: "MLX5_IB_SW_PARSING", Value: MLX5_IB_SW_PARSING},
	{Enum: "mlx5_ib_sw_parsing_offloads", Name: "MLX5_IB_SW_PARSING_CSUM", Value: MLX5_IB_SW_PARSING_CSUM},
	{Enum: "mlx5_ib_sw_parsing_offloads", Name: "MLX5_IB_SW_PARSING_LSO", Value: MLX5_IB_SW_PARSING_LSO},
	{Enum: "mlx5_ib_query_dev_resp_flags", Name: "MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_COMP", Value: MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_COMP},
	{Enum: "mlx5_ib_query_dev_resp_flags", Name: "MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD", Value: MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD},
	{Enum: "mlx5_ib_query_dev_resp_flags", Name: "MLX5_IB_QUERY_DEV_RESP_PACKET_BASED_CREDIT_MODE", Value: MLX5_IB_QUERY_DEV_RESP_PACKET_BASED_CREDIT_MODE},
	{Enum: "mlx5_ib_query_dev_resp_flags", Name: "MLX5_IB_QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT", Value: MLX5_IB_QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT},
	{Enum: "mlx5_ib_tunnel_offloads", Name: "MLX5_IB_TUNNELED_OFFLOADS_VXLAN", Value: MLX5_IB_TUNNELED_OFFLOADS_VXLAN},
	{Enum: "mlx5_ib_tunnel_offloads", Name: "MLX5_IB_TUNNELED_OFFLOADS_GRE", Value: MLX5_IB_TUNNELED_OFFLOADS_GRE},
	{Enum: "mlx5_ib_tunnel_offloads", Name: "MLX5_IB_TUNNELED_OFFLOADS_GENEVE", Value: MLX5_IB_TUNNELED_OFFLOADS_GENEVE},
	{Enum: "mlx5_ib_tunnel_offloads", Name: "MLX5_IB_TUNNELED_OFFLOADS_MPLS_GRE", Value: MLX5_IB_TUNNELED_OFFLOADS_MPLS_GRE},
	{Enum: "mlx5_ib_tunnel_offloads", Name: "MLX5_IB_TUNNELED_OFFLOADS_MPLS_UDP", Value: MLX5_IB_TUNNELED_OFFLOADS_MPLS_UDP},
}

var queryDeviceLayouts = []btfcheck.Layout{
	{Struct: "mlx5_ib_tso_caps", Size: unsafe.Sizeof(Mlx5IbTsoCaps{}), Fields: []btfcheck.Field{
		{Name: "max_tso", Offset: unsafe.Offsetof(Mlx5IbTsoCaps{}.MaxTso)},
		{Name: "supported_qpts", Offset: unsafe.Offsetof(Mlx5IbTsoCaps{}.SupportedQpts)},
	}},
	{Struct: "mlx5_ib_rss_caps", Size: unsafe.Sizeof(Mlx5IbRssCaps{}), Fields: []btfcheck.Field{
		{Name: "rx_hash_fields_mask", Offset: unsafe.Offsetof(Mlx5IbRssCaps{}.RxHashFieldsMask)},
		{Name: "rx_hash_function", Offset: unsafe.Offsetof(Mlx5IbRssCaps{}.RxHashFunction)},
		{Name: "reserved", Offset: unsafe.Offsetof(Mlx5IbRssCaps{}.Reserved)},
	}},
	{Struct: "mlx5_ib_cqe_comp_caps", Size: unsafe.Sizeof(Mlx5IbCqeCompCaps{}), Fields: []btfcheck.Field{
		{Name: "max_num", Offset: unsafe.Offsetof(Mlx5IbCqeCompCaps{}.MaxNum)},
		{Name: "supported_format", Offset: unsafe.Offsetof(Mlx5IbCqeCompCaps{}.SupportedFormat)},
	}},
	{Struct: "mlx5_packet_pacing_caps", Size: unsafe.Sizeof(Mlx5PacketPacingCaps{}), Fields: []btfcheck.Field{
		{Name: "qp_rate_limit_min", Offset: unsafe.Offsetof(Mlx5PacketPacingCaps{}.QpRateLimitMin)},
		{Name: "qp_rate_limit_max", Offset: unsafe.Offsetof(Mlx5PacketPacingCaps{}.QpRateLimitMax)},
		{Name: "supported_qpts", Offset: unsafe.Offsetof(Mlx5PacketPacingCaps{}.SupportedQpts)},
		{Name: "cap_flags", Offset: unsafe.Offsetof(Mlx5PacketPacingCaps{}.CapFlags)},
		{Name: "reserved", Offset: unsafe.Offsetof(Mlx5PacketPacingCaps{}.Reserved)},
	}},
	{Struct: "mlx5_ib_sw_parsing_caps", Size: unsafe.Sizeof(Mlx5IbSwParsingCaps{}), Fields: []btfcheck.Field{
		{Name: "sw_parsing_offloads", Offset: unsafe.Offsetof(Mlx5IbSwParsingCaps{}.SwParsingOffloads)},
		{Name: "supported_qpts", Offset: unsafe.Offsetof(Mlx5IbSwParsingCaps{}.SupportedQpts)},
	}},
	{Struct: "mlx5_ib_striding_rq_caps", Size: unsafe.Sizeof(Mlx5IbStridingRqCaps{}), Fields: []btfcheck.Field{
		{Name: "min_single_stride_log_num_of_bytes", Offset: unsafe.Offsetof(Mlx5IbStridingRqCaps{}.MinSingleStrideLogNumOfBytes)},
		{Name: "max_single_stride_log_num_of_bytes", Offset: unsafe.Offsetof(Mlx5IbStridingRqCaps{}.MaxSingleStrideLogNumOfBytes)},
		{Name: "min_single_wqe_log_num_of_strides", Offset: unsafe.Offsetof(Mlx5IbStridingRqCaps{}.MinSingleWqeLogNumOfStrides)},
		{Name: "max_single_wqe_log_num_of_strides", Offset: unsafe.Offsetof(Mlx5IbStridingRqCaps{}.MaxSingleWqeLogNumOfStrides)},
		{Name: "supported_qpts", Offset: unsafe.Offsetof(Mlx5IbStridingRqCaps{}.SupportedQpts)},
		{Name: "reserved", Offset: unsafe.Offsetof(Mlx5IbStridingRqCaps{}.Reserved)},
	}},
	{Struct: "mlx5_ib_dci_streams_caps", Size: unsafe.Sizeof(Mlx5IbDciStreamsCaps{}), Fields: []btfcheck.Field{
		{Name: "max_log_num_concurent", Offset: unsafe.Offsetof(Mlx5IbDciStreamsCaps{}.MaxLogNumConcurent)},
		{Name: "max_log_num_errored", Offset: unsafe.Offsetof(Mlx5IbDciStreamsCaps{}.MaxLogNumErrored)},
	}},
	// Extensible: mlx5_ib_query_device fills a member only if
	// offsetofend(resp, member) <= the caller's outlen and counts it in
	// response_length (drivers/infiniband/hw/mlx5/main.c); 6.12 and
	// later add reg_c0 (104 -> 112 bytes), which mlx5go does not ask for.
	{Struct: "mlx5_ib_query_device_resp", Size: unsafe.Sizeof(Mlx5IbQueryDeviceResp{}), Extensible: true, Fields: []btfcheck.Field{
		{Name: "comp_mask", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.CompMask)},
		{Name: "response_length", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.ResponseLength)},
		{Name: "tso_caps", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.TsoCaps)},
		{Name: "rss_caps", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.RssCaps)},
		{Name: "cqe_comp_caps", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.CqeCompCaps)},
		{Name: "packet_pacing_caps", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.PacketPacingCaps)},
		{Name: "mlx5_ib_support_multi_pkt_send_wqes", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.Mlx5IbSupportMultiPktSendWqes)},
		{Name: "flags", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.Flags)},
		{Name: "sw_parsing_caps", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.SwParsingCaps)},
		{Name: "striding_rq_caps", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.StridingRqCaps)},
		{Name: "tunnel_offloads_caps", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.TunnelOffloadsCaps)},
		{Name: "dci_streams_caps", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.DciStreamsCaps)},
		{Name: "dci_streams_caps.max_log_num_concurent", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.DciStreamsCaps) + unsafe.Offsetof(Mlx5IbDciStreamsCaps{}.MaxLogNumConcurent)},
		{Name: "dci_streams_caps.max_log_num_errored", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.DciStreamsCaps) + unsafe.Offsetof(Mlx5IbDciStreamsCaps{}.MaxLogNumErrored)},
		{Name: "reserved", Offset: unsafe.Offsetof(Mlx5IbQueryDeviceResp{}.Reserved)},
	}},
}

func TestLabBTFMlx5QueryDevice(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("mlx5_ib")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, queryDeviceConsts)
	btfcheck.CheckLayouts(t, s, queryDeviceLayouts)
}
