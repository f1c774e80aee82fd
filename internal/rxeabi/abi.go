// Package rxeabi mirrors the driver data of rxe, the kernel's soft RoCE
// provider (rdma_rxe): the responses of <rdma/rdma_user_rxe.h> that its
// kernel driver writes into a create's UVERBS_ATTR_UHW_OUT, and refuses
// the create with EINVAL when that buffer is shorter than them
// (rxe_create_cq, rxe_create_qp and rxe_create_srq in
// drivers/infiniband/sw/rxe/rxe_verbs.c check udata->outlen against
// sizeof). Names are the kernel's, one Go struct per C struct with fields
// in C order; the kernel lab checks every layout against rdma_rxe's BTF
// (btf_lab_test.go), and layout_test.go against the header everywhere.
//
// It holds facts, no logic: package uverbs uses the sizes to say what a
// refused create lacked. It is internal, so that uverbs' users see Go
// names only.
package rxeabi

import "structs"

// Mminfo is struct mminfo: where to mmap one of rxe's queues (the offset
// on the uverbs device file) and its size.
type Mminfo struct {
	_      structs.HostLayout
	Offset uint64
	Size   uint32
	Pad    uint32
}

// RxeCreateCqResp is struct rxe_create_cq_resp: the driver data out of
// CQ creation.
type RxeCreateCqResp struct {
	_  structs.HostLayout
	Mi Mminfo
}

// RxeCreateQpResp is struct rxe_create_qp_resp: the driver data out of
// QP creation (a QP on an SRQ has no receive queue of its own, and
// rq_mi stays zero).
type RxeCreateQpResp struct {
	_    structs.HostLayout
	RqMi Mminfo
	SqMi Mminfo
}

// RxeCreateSrqResp is struct rxe_create_srq_resp: the driver data out of
// SRQ creation.
type RxeCreateSrqResp struct {
	_        structs.HostLayout
	Mi       Mminfo
	SrqNum   uint32
	Reserved uint32
}

// The queues rxe shares with user space by mmap of the uverbs device file
// at an Mminfo's offset (a CQ's completions, a QP's send and receive
// queues, an SRQ): a RxeQueueBuf header, then the elements, each
// 1<<Log2ElemSize bytes. The producer advances ProducerIndex and the
// consumer ConsumerIndex, both modulo IndexMask+1, each publishing its
// index with release order after the element it wrote or read, and each
// reading the other's index with acquire order before the element. The
// kernel is the consumer of the send and receive queues and the producer
// of the CQ.

// RxeQueueBuf is struct rxe_queue_buf: the header of a shared queue (the
// two indices on cache lines of their own); its flexible member data, the
// elements, starts at its end.
type RxeQueueBuf struct {
	_             structs.HostLayout
	Log2ElemSize  uint32
	IndexMask     uint32
	Pad1          [30]uint32
	ProducerIndex uint32
	Pad2          [31]uint32
	ConsumerIndex uint32
	Pad3          [31]uint32
}

// RxeSge is struct rxe_sge, one scatter/gather entry of a work request
// (the layout of struct ibv_sge).
type RxeSge struct {
	_      structs.HostLayout
	Addr   uint64
	Length uint32
	Lkey   uint32
}

// RxeDmaInfo is struct rxe_dma_info: a work request's data, the total
// length and the kernel's progress through it. Its flexible union (inline
// data, atomic data or the RxeSge list) starts at its end.
type RxeDmaInfo struct {
	_         structs.HostLayout
	_         [0]uint64 // the union's RxeSge aligns it to 8
	Length    uint32
	Resid     uint32
	CurSge    uint32
	NumSge    uint32
	SgeOffset uint32
	Reserved  uint32
}

// RxeSendWr is struct rxe_send_wr, the work request of a send queue
// element. Wr is its union of per-opcode members, as bytes: the rdma
// member (remote_addr, rkey) is at WrRdmaRemoteAddr and WrRdmaRkey.
type RxeSendWr struct {
	_         structs.HostLayout
	WrID      uint64
	Reserved  uint32
	Opcode    uint32 // an IB_WR_* opcode
	SendFlags uint32 // IB_SEND_* flags
	Ex        uint32 // imm_data (big-endian) or invalidate_rkey
	Wr        [120]byte
}

// Offsets in RxeSendWr.Wr of the rdma member's fields.
const (
	WrRdmaRemoteAddr = 0
	WrRdmaRkey       = 8
)

// RxeSendWqe is struct rxe_send_wqe, one element of a send queue; its
// Dma's RxeSge list follows it.
type RxeSendWqe struct {
	_           structs.HostLayout
	Wr          RxeSendWr
	Status      uint32
	State       uint32
	Iova        uint64 // the remote address of an RDMA or atomic request
	Mask        uint32
	FirstPsn    uint32
	LastPsn     uint32
	AckLength   uint32
	Ssn         uint32
	HasRdAtomic uint32
	Dma         RxeDmaInfo
}

// RxeRecvWqe is struct rxe_recv_wqe, one element of a receive queue or
// SRQ; its Dma's RxeSge list follows it.
type RxeRecvWqe struct {
	_        structs.HostLayout
	WrID     uint64
	Reserved uint32
	Padding  uint32
	Dma      RxeDmaInfo
}

// IbUverbsWc is struct ib_uverbs_wc of <rdma/ib_user_verbs.h>: the
// completion rxe writes into a user CQ's elements (struct rxe_cqe is a
// union of the kernel's struct ib_wc and this).
type IbUverbsWc struct {
	_            structs.HostLayout
	WrID         uint64
	Status       uint32 // an IB_WC_* status, IB_WC_SUCCESS 0
	Opcode       uint32 // an IB_WC_* opcode
	VendorErr    uint32
	ByteLen      uint32
	Ex           uint32 // imm_data or invalidate_rkey
	QpNum        uint32
	SrcQp        uint32
	WcFlags      uint32
	PkeyIndex    uint16
	Slid         uint16
	Sl           uint8
	DlidPathBits uint8
	PortNum      uint8
	Reserved     uint8
}

// The kernel's enum values rxe reads from a send queue element and
// writes into a completion (enum ib_wr_opcode, ib_send_flags,
// ib_wc_opcode and ib_wc_status of include/rdma/ib_verbs.h, equal to the
// IB_UVERBS_* values of the uapi).
const (
	IB_WR_RDMA_WRITE = 0
	IB_WR_SEND       = 2
	IB_WR_RDMA_READ  = 4

	IB_SEND_SIGNALED = 2

	IB_WC_SEND       = 0
	IB_WC_RDMA_WRITE = 1
	IB_WC_RDMA_READ  = 2
	IB_WC_RECV       = 128

	IB_WC_SUCCESS = 0
)
