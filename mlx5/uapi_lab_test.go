package mlx5

import (
	"testing"

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
}

func TestLabBTFMlx5Uapi(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("mlx5_ib")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, uapiConsts)
}
