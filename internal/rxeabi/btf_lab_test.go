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
	// The queues (rdma_user_rxe.h): exact, since the kernel and the
	// poster of the lab's traffic tests (uverbs/rxeq_lab_test.go) must
	// agree on every element's bytes.
	{Struct: "rxe_queue_buf", Size: unsafe.Sizeof(RxeQueueBuf{}), Fields: []btfcheck.Field{
		{Name: "log2_elem_size", Offset: unsafe.Offsetof(RxeQueueBuf{}.Log2ElemSize)},
		{Name: "index_mask", Offset: unsafe.Offsetof(RxeQueueBuf{}.IndexMask)},
		{Name: "producer_index", Offset: unsafe.Offsetof(RxeQueueBuf{}.ProducerIndex)},
		{Name: "consumer_index", Offset: unsafe.Offsetof(RxeQueueBuf{}.ConsumerIndex)},
		{Name: "data", Offset: unsafe.Sizeof(RxeQueueBuf{})},
	}},
	{Struct: "rxe_sge", Size: unsafe.Sizeof(RxeSge{}), Fields: []btfcheck.Field{
		{Name: "addr", Offset: unsafe.Offsetof(RxeSge{}.Addr)},
		{Name: "length", Offset: unsafe.Offsetof(RxeSge{}.Length)},
		{Name: "lkey", Offset: unsafe.Offsetof(RxeSge{}.Lkey)},
	}},
	{Struct: "rxe_dma_info", Size: unsafe.Sizeof(RxeDmaInfo{}), Fields: []btfcheck.Field{
		{Name: "length", Offset: unsafe.Offsetof(RxeDmaInfo{}.Length)},
		{Name: "resid", Offset: unsafe.Offsetof(RxeDmaInfo{}.Resid)},
		{Name: "cur_sge", Offset: unsafe.Offsetof(RxeDmaInfo{}.CurSge)},
		{Name: "num_sge", Offset: unsafe.Offsetof(RxeDmaInfo{}.NumSge)},
		{Name: "sge_offset", Offset: unsafe.Offsetof(RxeDmaInfo{}.SgeOffset)},
		{Name: "reserved", Offset: unsafe.Offsetof(RxeDmaInfo{}.Reserved)},
		{Name: "sge", Offset: unsafe.Sizeof(RxeDmaInfo{})},
	}},
	{Struct: "rxe_send_wr", Size: unsafe.Sizeof(RxeSendWr{}), Fields: []btfcheck.Field{
		{Name: "wr_id", Offset: unsafe.Offsetof(RxeSendWr{}.WrID)},
		{Name: "reserved", Offset: unsafe.Offsetof(RxeSendWr{}.Reserved)},
		{Name: "opcode", Offset: unsafe.Offsetof(RxeSendWr{}.Opcode)},
		{Name: "send_flags", Offset: unsafe.Offsetof(RxeSendWr{}.SendFlags)},
		{Name: "ex", Offset: unsafe.Offsetof(RxeSendWr{}.Ex)},
		{Name: "wr", Offset: unsafe.Offsetof(RxeSendWr{}.Wr)},
		{Name: "wr.rdma.remote_addr", Offset: unsafe.Offsetof(RxeSendWr{}.Wr) + WrRdmaRemoteAddr},
		{Name: "wr.rdma.rkey", Offset: unsafe.Offsetof(RxeSendWr{}.Wr) + WrRdmaRkey},
	}},
	{Struct: "rxe_send_wqe", Size: unsafe.Sizeof(RxeSendWqe{}), Fields: []btfcheck.Field{
		{Name: "wr", Offset: unsafe.Offsetof(RxeSendWqe{}.Wr)},
		{Name: "status", Offset: unsafe.Offsetof(RxeSendWqe{}.Status)},
		{Name: "state", Offset: unsafe.Offsetof(RxeSendWqe{}.State)},
		{Name: "iova", Offset: unsafe.Offsetof(RxeSendWqe{}.Iova)},
		{Name: "mask", Offset: unsafe.Offsetof(RxeSendWqe{}.Mask)},
		{Name: "first_psn", Offset: unsafe.Offsetof(RxeSendWqe{}.FirstPsn)},
		{Name: "last_psn", Offset: unsafe.Offsetof(RxeSendWqe{}.LastPsn)},
		{Name: "ack_length", Offset: unsafe.Offsetof(RxeSendWqe{}.AckLength)},
		{Name: "ssn", Offset: unsafe.Offsetof(RxeSendWqe{}.Ssn)},
		{Name: "has_rd_atomic", Offset: unsafe.Offsetof(RxeSendWqe{}.HasRdAtomic)},
		{Name: "dma", Offset: unsafe.Offsetof(RxeSendWqe{}.Dma)},
	}},
	{Struct: "rxe_recv_wqe", Size: unsafe.Sizeof(RxeRecvWqe{}), Fields: []btfcheck.Field{
		{Name: "wr_id", Offset: unsafe.Offsetof(RxeRecvWqe{}.WrID)},
		{Name: "reserved", Offset: unsafe.Offsetof(RxeRecvWqe{}.Reserved)},
		{Name: "padding", Offset: unsafe.Offsetof(RxeRecvWqe{}.Padding)},
		{Name: "dma", Offset: unsafe.Offsetof(RxeRecvWqe{}.Dma)},
	}},
	{Struct: "ib_uverbs_wc", Size: unsafe.Sizeof(IbUverbsWc{}), Fields: []btfcheck.Field{
		{Name: "wr_id", Offset: unsafe.Offsetof(IbUverbsWc{}.WrID)},
		{Name: "status", Offset: unsafe.Offsetof(IbUverbsWc{}.Status)},
		{Name: "opcode", Offset: unsafe.Offsetof(IbUverbsWc{}.Opcode)},
		{Name: "vendor_err", Offset: unsafe.Offsetof(IbUverbsWc{}.VendorErr)},
		{Name: "byte_len", Offset: unsafe.Offsetof(IbUverbsWc{}.ByteLen)},
		{Name: "ex", Offset: unsafe.Offsetof(IbUverbsWc{}.Ex)},
		{Name: "qp_num", Offset: unsafe.Offsetof(IbUverbsWc{}.QpNum)},
		{Name: "src_qp", Offset: unsafe.Offsetof(IbUverbsWc{}.SrcQp)},
		{Name: "wc_flags", Offset: unsafe.Offsetof(IbUverbsWc{}.WcFlags)},
		{Name: "pkey_index", Offset: unsafe.Offsetof(IbUverbsWc{}.PkeyIndex)},
		{Name: "slid", Offset: unsafe.Offsetof(IbUverbsWc{}.Slid)},
		{Name: "sl", Offset: unsafe.Offsetof(IbUverbsWc{}.Sl)},
		{Name: "dlid_path_bits", Offset: unsafe.Offsetof(IbUverbsWc{}.DlidPathBits)},
		{Name: "port_num", Offset: unsafe.Offsetof(IbUverbsWc{}.PortNum)},
		{Name: "reserved", Offset: unsafe.Offsetof(IbUverbsWc{}.Reserved)},
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
	btfcheck.CheckConsts(t, s, []btfcheck.Const{
		{Enum: "ib_wr_opcode", Name: "IB_WR_RDMA_WRITE", Value: IB_WR_RDMA_WRITE},
		{Enum: "ib_wr_opcode", Name: "IB_WR_SEND", Value: IB_WR_SEND},
		{Enum: "ib_wr_opcode", Name: "IB_WR_RDMA_READ", Value: IB_WR_RDMA_READ},
		{Enum: "ib_send_flags", Name: "IB_SEND_SIGNALED", Value: IB_SEND_SIGNALED},
		{Enum: "ib_wc_opcode", Name: "IB_WC_SEND", Value: IB_WC_SEND},
		{Enum: "ib_wc_opcode", Name: "IB_WC_RDMA_WRITE", Value: IB_WC_RDMA_WRITE},
		{Enum: "ib_wc_opcode", Name: "IB_WC_RDMA_READ", Value: IB_WC_RDMA_READ},
		{Enum: "ib_wc_opcode", Name: "IB_WC_RECV", Value: IB_WC_RECV},
		{Enum: "ib_wc_status", Name: "IB_WC_SUCCESS", Value: IB_WC_SUCCESS},
	})
}
