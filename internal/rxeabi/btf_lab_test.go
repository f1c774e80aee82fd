package rxeabi

import (
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
)

// rxeLayouts are the structs of this package, exact: rxe refuses a
// create whose driver data out is shorter than sizeof of its response,
// so a struct that grew would make uverbs' note on the refusal wrong.
var rxeLayouts = []btfcheck.Layout{
	{Struct: "mminfo", Size: unsafe.Sizeof(Mminfo{}), Fields: []btfcheck.Field{
		{Name: "offset", Offset: unsafe.Offsetof(Mminfo{}.Offset)},
		{Name: "size", Offset: unsafe.Offsetof(Mminfo{}.Size)},
		{Name: "pad", Offset: unsafe.Offsetof(Mminfo{}.Pad)},
	}},
	{Struct: "rxe_create_cq_resp", Size: unsafe.Sizeof(RxeCreateCqResp{}), Fields: []btfcheck.Field{
		{Name: "mi", Offset: unsafe.Offsetof(RxeCreateCqResp{}.Mi)},
	}},
	{Struct: "rxe_create_qp_resp", Size: unsafe.Sizeof(RxeCreateQpResp{}), Fields: []btfcheck.Field{
		{Name: "rq_mi", Offset: unsafe.Offsetof(RxeCreateQpResp{}.RqMi)},
		{Name: "sq_mi", Offset: unsafe.Offsetof(RxeCreateQpResp{}.SqMi)},
	}},
	{Struct: "rxe_create_srq_resp", Size: unsafe.Sizeof(RxeCreateSrqResp{}), Fields: []btfcheck.Field{
		{Name: "mi", Offset: unsafe.Offsetof(RxeCreateSrqResp{}.Mi)},
		{Name: "srq_num", Offset: unsafe.Offsetof(RxeCreateSrqResp{}.SrqNum)},
		{Name: "reserved", Offset: unsafe.Offsetof(RxeCreateSrqResp{}.Reserved)},
	}},
}

// TestLabBTFRXE checks the layouts against rdma_rxe's BTF (split on
// vmlinux's) on the lab's kernel.
func TestLabBTFRXE(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("rdma_rxe", "vmlinux")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckLayouts(t, s, rxeLayouts)
}
