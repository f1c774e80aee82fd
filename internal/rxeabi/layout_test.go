package rxeabi

import (
	"testing"
	"unsafe"
)

// TestLayoutsMatchHeader compares the Go structs with <rdma/rdma_user_rxe.h>
// (Debian 12's linux-libc-dev 6.1): mminfo is an __aligned_u64 and two
// __u32, and the responses are mminfos and __u32s, every field at its
// natural alignment, the same on amd64 and arm64. The lab checks the same
// against the running kernels' BTF (btf_lab_test.go).
func TestLayoutsMatchHeader(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(mminfo)", unsafe.Sizeof(Mminfo{}), 16},
		{"offsetof(mminfo, size)", unsafe.Offsetof(Mminfo{}.Size), 8},
		{"offsetof(mminfo, pad)", unsafe.Offsetof(Mminfo{}.Pad), 12},
		{"sizeof(rxe_create_cq_resp)", unsafe.Sizeof(RxeCreateCqResp{}), 16},
		{"sizeof(rxe_create_qp_resp)", unsafe.Sizeof(RxeCreateQpResp{}), 32},
		{"offsetof(rxe_create_qp_resp, sq_mi)", unsafe.Offsetof(RxeCreateQpResp{}.SqMi), 16},
		{"sizeof(rxe_create_srq_resp)", unsafe.Sizeof(RxeCreateSrqResp{}), 24},
		{"offsetof(rxe_create_srq_resp, srq_num)", unsafe.Offsetof(RxeCreateSrqResp{}.SrqNum), 16},
		{"offsetof(rxe_create_srq_resp, reserved)", unsafe.Offsetof(RxeCreateSrqResp{}.Reserved), 20},
	} {
		if c.got != c.want {
			t.Errorf("%s: Go has %d, the header %d", c.name, c.got, c.want)
		}
	}
}
