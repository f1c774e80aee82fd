package mlx5abi

// mlx5 provider ioctl ABI mirror of <rdma/mlx5_user_ioctl_cmds.h>: object,
// method and attribute ids of the mlx5_ib driver namespace. Names are the
// kernel's; the kernel lab checks every value against mlx5_ib's BTF
// (uapi_lab_test.go). The end of the file mirrors what DEVX event channels
// read: their header (<rdma/mlx5_user_ioctl_verbs.h>) and the EQE that
// follows it (<linux/mlx5/device.h>, <linux/mlx5/mlx5_ifc.h>).

// enum mlx5_ib_objects.
const (
	MLX5_IB_OBJECT_DEVX                = 0x1000
	MLX5_IB_OBJECT_DEVX_OBJ            = 0x1001
	MLX5_IB_OBJECT_DEVX_UMEM           = 0x1002
	MLX5_IB_OBJECT_FLOW_MATCHER        = 0x1003
	MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD   = 0x1004
	MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD = 0x1005
	MLX5_IB_OBJECT_VAR                 = 0x1006
	MLX5_IB_OBJECT_PP                  = 0x1007
	MLX5_IB_OBJECT_UAR                 = 0x1008
	MLX5_IB_OBJECT_STEERING_ANCHOR     = 0x1009
)

// enum mlx5_ib_devx_methods.
const (
	MLX5_IB_METHOD_DEVX_OTHER           = 0x1000
	MLX5_IB_METHOD_DEVX_QUERY_UAR       = 0x1001
	MLX5_IB_METHOD_DEVX_QUERY_EQN       = 0x1002
	MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT = 0x1003
)

// enum mlx5_ib_devx_other_attrs.
const (
	MLX5_IB_ATTR_DEVX_OTHER_CMD_IN  = 0x1000
	MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT = 0x1001
)

// enum mlx5_ib_devx_query_uar_attrs.
const (
	MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX = 0x1000
	MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX  = 0x1001
)

// enum mlx5_ib_devx_subscribe_event_attrs.
const (
	MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE     = 0x1000
	MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE    = 0x1001
	MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST = 0x1002
	MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM        = 0x1003
	MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE        = 0x1004
)

// enum mlx5_ib_devx_query_eqn_attrs.
const (
	MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC = 0x1000
	MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN  = 0x1001
)

// enum mlx5_ib_devx_obj_methods.
const (
	MLX5_IB_METHOD_DEVX_OBJ_CREATE      = 0x1000
	MLX5_IB_METHOD_DEVX_OBJ_DESTROY     = 0x1001
	MLX5_IB_METHOD_DEVX_OBJ_MODIFY      = 0x1002
	MLX5_IB_METHOD_DEVX_OBJ_QUERY       = 0x1003
	MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY = 0x1004
)

// enum mlx5_ib_devx_obj_create_attrs.
const (
	MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE  = 0x1000
	MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN  = 0x1001
	MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT = 0x1002
)

// enum mlx5_ib_devx_obj_destroy_attrs.
const (
	MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE = 0x1000
)

// enum mlx5_ib_devx_obj_modify_attrs.
const (
	MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE  = 0x1000
	MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN  = 0x1001
	MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT = 0x1002
)

// enum mlx5_ib_devx_obj_query_attrs.
const (
	MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE  = 0x1000
	MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN  = 0x1001
	MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT = 0x1002
)

// enum mlx5_ib_devx_obj_query_async_attrs.
const (
	MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE  = 0x1000
	MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN  = 0x1001
	MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD      = 0x1002
	MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID   = 0x1003
	MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN = 0x1004
)

// enum mlx5_ib_devx_async_cmd_fd_methods.
const (
	MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC = 0x1000
)

// enum mlx5_ib_devx_async_cmd_fd_alloc_attrs.
const (
	MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE = 0x1000
)

// enum mlx5_ib_devx_async_event_fd_methods.
const (
	MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC = 0x1000
)

// enum mlx5_ib_devx_async_event_fd_alloc_attrs.
const (
	MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE = 0x1000
	MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS  = 0x1001
)

// enum mlx5_ib_devx_umem_methods.
const (
	MLX5_IB_METHOD_DEVX_UMEM_REG   = 0x1000
	MLX5_IB_METHOD_DEVX_UMEM_DEREG = 0x1001
)

// enum mlx5_ib_devx_umem_reg_attrs.
const (
	MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE      = 0x1000
	MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR        = 0x1001
	MLX5_IB_ATTR_DEVX_UMEM_REG_LEN         = 0x1002
	MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS      = 0x1003
	MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID      = 0x1004
	MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP = 0x1005
	MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD   = 0x1006
)

// enum mlx5_ib_devx_umem_dereg_attrs.
const (
	MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE = 0x1000
)

// enum mlx5_ib_uar_obj_methods.
const (
	MLX5_IB_METHOD_UAR_OBJ_ALLOC   = 0x1000
	MLX5_IB_METHOD_UAR_OBJ_DESTROY = 0x1001
)

// enum mlx5_ib_uar_alloc_attrs.
const (
	MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE      = 0x1000
	MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE        = 0x1001
	MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET = 0x1002
	MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH = 0x1003
	MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID     = 0x1004
)

// enum mlx5_ib_uar_obj_destroy_attrs.
const (
	MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE = 0x1000
)

// DEVX event channels, from <rdma/mlx5_user_ioctl_verbs.h>.

// enum mlx5_ib_uapi_devx_create_event_channel_flags.
const (
	MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA = 1 << 0
)

// Mlx5IbUapiDevxAsyncEventHdr is struct mlx5_ib_uapi_devx_async_event_hdr
// without its out_data[]: the cookie given at subscription, in native
// byte order. Without OMIT_DATA the 64-byte EQE follows it.
type Mlx5IbUapiDevxAsyncEventHdr struct {
	Cookie uint64
}

// The EQE of a DEVX event. These are kernel-internal, not uapi: the kernel
// copies the firmware's event queue entry to the channel as it is, so the
// layout is the PRM's. Multi-byte fields are big-endian and kept as byte
// arrays.

// enum mlx5_event in <linux/mlx5/device.h>: the event types this package
// subscribes to (struct mlx5_eqe.type).
const (
	MLX5_EVENT_TYPE_SQ_DRAINED = 0x03
	MLX5_EVENT_TYPE_CQ_ERROR   = 0x04
)

// The anonymous enum of event queue types in <linux/mlx5/device.h>
// (struct mlx5_eqe_qp_srq.type).
const (
	MLX5_EVENT_QUEUE_TYPE_QP  = 0
	MLX5_EVENT_QUEUE_TYPE_RQ  = 1
	MLX5_EVENT_QUEUE_TYPE_SQ  = 2
	MLX5_EVENT_QUEUE_TYPE_DCT = 6
)

// The anonymous enum of CQ error syndromes in <linux/mlx5/mlx5_ifc.h>
// (struct mlx5_eqe_cq_err.syndrome). No kernel code uses them, so they are
// not in the kernel's BTF and the lab cannot check them.
const (
	MLX5_CQ_ERROR_SYNDROME_CQ_OVERRUN                = 0x1
	MLX5_CQ_ERROR_SYNDROME_CQ_ACCESS_VIOLATION_ERROR = 0x2
)

// Mlx5Eqe is struct mlx5_eqe (<linux/mlx5/device.h>, packed, 64 bytes).
type Mlx5Eqe struct {
	Rsvd0     uint8
	Type      uint8 // enum mlx5_event
	Rsvd1     uint8
	SubType   uint8
	Rsvd2     [28]byte
	Data      [28]byte // union ev_data: Mlx5EqeCqErr, Mlx5EqeQpSrq, ...
	Rsvd3     [2]byte
	Signature uint8
	Owner     uint8
}

// Mlx5EqeCqErr is struct mlx5_eqe_cq_err, the data of a CQ_ERROR EQE.
type Mlx5EqeCqErr struct {
	Cqn       [4]byte // __be32; the CQN is its low 24 bits
	Reserved1 [7]byte
	Syndrome  uint8 // MLX5_CQ_ERROR_SYNDROME_*
}

// Mlx5EqeQpSrq is struct mlx5_eqe_qp_srq, the data of QP and SRQ events
// (SQ_DRAINED among them).
type Mlx5EqeQpSrq struct {
	Reserved1 [20]byte
	Type      uint8 // MLX5_EVENT_QUEUE_TYPE_*
	Reserved2 [3]byte
	QpSrqN    [4]byte // __be32; the queue number is its low 24 bits
}
