package mlx5

// mlx5 provider ioctl ABI mirror of <rdma/mlx5_user_ioctl_cmds.h>: object,
// method and attribute ids of the mlx5_ib driver namespace. Names are the
// kernel's; the kernel lab checks every value against mlx5_ib's BTF
// (uapi_lab_test.go).

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
