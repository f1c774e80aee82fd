package mlx5

import "fmt"

// WCOpcode is what a completion completed (enum ibv_wc_opcode, with
// mlx5dv's MLX5DV_WC_UMR).
type WCOpcode uint8

// Values of enum ibv_wc_opcode (libibverbs' verbs.h) and mlx5dv.h.
const (
	WCSend            WCOpcode = 0   // IBV_WC_SEND
	WCRDMAWrite       WCOpcode = 1   // IBV_WC_RDMA_WRITE
	WCRDMARead        WCOpcode = 2   // IBV_WC_RDMA_READ
	WCCompSwap        WCOpcode = 3   // IBV_WC_COMP_SWAP
	WCFetchAdd        WCOpcode = 4   // IBV_WC_FETCH_ADD
	WCLocalInv        WCOpcode = 6   // IBV_WC_LOCAL_INV
	WCRecv            WCOpcode = 128 // IBV_WC_RECV
	WCRecvRDMAWithImm WCOpcode = 129 // IBV_WC_RECV_RDMA_WITH_IMM
	WCUMR             WCOpcode = 135 // MLX5DV_WC_UMR (IBV_WC_DRIVER1): an mkey configure
	WCNOP             WCOpcode = 136 // a NOP WQE (mlx5go's; libmlx5 reports none)
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCLocalInv:
		return "LOCAL_INV"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	case WCUMR:
		return "UMR"
	case WCNOP:
		return "NOP"
	}
	return fmt.Sprintf("WCOpcode(%d)", uint8(o))
}

// WCStatus is a completion's status (enum ibv_wc_status).
type WCStatus uint8

// Values of enum ibv_wc_status (the kernel's enum ib_wc_status has the
// same values).
const (
	WCSuccess        WCStatus = 0  // IBV_WC_SUCCESS
	WCLocLenErr      WCStatus = 1  // IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr     WCStatus = 2  // IBV_WC_LOC_QP_OP_ERR
	WCLocProtErr     WCStatus = 4  // IBV_WC_LOC_PROT_ERR
	WCWRFlushErr     WCStatus = 5  // IBV_WC_WR_FLUSH_ERR
	WCMWBindErr      WCStatus = 6  // IBV_WC_MW_BIND_ERR
	WCBadRespErr     WCStatus = 7  // IBV_WC_BAD_RESP_ERR
	WCLocAccessErr   WCStatus = 8  // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr   WCStatus = 9  // IBV_WC_REM_INV_REQ_ERR
	WCRemAccessErr   WCStatus = 10 // IBV_WC_REM_ACCESS_ERR
	WCRemOpErr       WCStatus = 11 // IBV_WC_REM_OP_ERR
	WCRetryExcErr    WCStatus = 12 // IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr WCStatus = 13 // IBV_WC_RNR_RETRY_EXC_ERR
	WCRemAbortErr    WCStatus = 16 // IBV_WC_REM_ABORT_ERR
	WCGeneralErr     WCStatus = 21 // IBV_WC_GENERAL_ERR
)

var wcStatusNames = map[WCStatus]string{
	WCSuccess: "success", WCLocLenErr: "local length error", WCLocQPOpErr: "local QP operation error",
	WCLocProtErr: "local protection error", WCWRFlushErr: "work request flushed", WCMWBindErr: "memory window bind error",
	WCBadRespErr: "bad response", WCLocAccessErr: "local access error", WCRemInvReqErr: "remote invalid request",
	WCRemAccessErr: "remote access error", WCRemOpErr: "remote operation error", WCRetryExcErr: "transport retry counter exceeded",
	WCRNRRetryExcErr: "RNR retry counter exceeded", WCRemAbortErr: "remote aborted", WCGeneralErr: "general error",
}

func (s WCStatus) String() string {
	if n, ok := wcStatusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("WCStatus(%d)", uint8(s))
}

// Completion is one work completion (struct ibv_wc's fields that mlx5
// CQEs carry).
type Completion struct {
	WrID    uint64
	Status  WCStatus
	Opcode  WCOpcode
	QPN     uint32
	ByteLen uint32 // bytes received, or read by an RDMA READ
	// Imm is the immediate data of a SEND or RDMA WRITE with immediate, as
	// the sender gave it; WithImm says there was one.
	Imm     uint32
	WithImm bool
	// InvalidatedRkey is the rkey a SEND with invalidate invalidated here;
	// WithInv says it did.
	InvalidatedRkey uint32
	WithInv         bool

	// Of a receive: the sender's QP (UD), LID and service level, the
	// destination LID's path bits, whether a GRH came first (UD: the 40
	// bytes at the start of the receive buffer), and the P_Key index.
	SrcQP        uint32
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	GRH          bool
	PKeyIndex    uint16

	// VendorErr is the device's own error syndrome of a failed work
	// request.
	VendorErr uint8

	// Timestamp is when the device wrote the completion, in cycles of its
	// free-running clock (ibv_wc_read_completion_ts), on a CQ made with
	// CQOptions.Timestamps; 0 on others. ClockInfo.Time converts it. On a
	// CQ made with CQOptions.RealTimeTimestamps it is the device's
	// real-time clock instead, which RealTime converts.
	Timestamp uint64
}
