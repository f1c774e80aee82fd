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
		{"sizeof(rxe_queue_buf)", unsafe.Sizeof(RxeQueueBuf{}), 384},
		{"offsetof(rxe_queue_buf, producer_index)", unsafe.Offsetof(RxeQueueBuf{}.ProducerIndex), 128},
		{"offsetof(rxe_queue_buf, consumer_index)", unsafe.Offsetof(RxeQueueBuf{}.ConsumerIndex), 256},
		{"sizeof(rxe_dma_info)", unsafe.Sizeof(RxeDmaInfo{}), 24},
		{"alignof(rxe_dma_info)", unsafe.Alignof(RxeDmaInfo{}), 8},
		{"sizeof(rxe_send_wr)", unsafe.Sizeof(RxeSendWr{}), 144}, // the ud member: 32 bytes and a 88-byte struct rxe_av
		{"offsetof(rxe_send_wqe, iova)", unsafe.Offsetof(RxeSendWqe{}.Iova), 152},
		{"offsetof(rxe_send_wqe, dma)", unsafe.Offsetof(RxeSendWqe{}.Dma), 184},
		{"sizeof(rxe_send_wqe)", unsafe.Sizeof(RxeSendWqe{}), 208},
		{"sizeof(rxe_recv_wqe)", unsafe.Sizeof(RxeRecvWqe{}), 40},
		{"sizeof(ib_uverbs_wc)", unsafe.Sizeof(IbUverbsWc{}), 48},
		{"offsetof(ib_uverbs_wc, qp_num)", unsafe.Offsetof(IbUverbsWc{}.QpNum), 28},
	} {
		if c.got != c.want {
			t.Errorf("%s: Go has %d, the header %d", c.name, c.got, c.want)
		}
	}
}
