package mlx5

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
)

// dataPathConsts are the data path's constants that the kernel defines:
// work completion status and opcode values (enum ib_wc_status and
// ib_wc_opcode, which libibverbs' ibv_wc_status and ibv_wc_opcode mirror)
// and the QP and mkey context values of the kernel's mlx5 headers.
var dataPathConsts = []btfcheck.Const{
	{Enum: "ib_wc_status", Name: "IB_WC_SUCCESS", Value: uint64(WCSuccess)},
	{Enum: "ib_wc_status", Name: "IB_WC_LOC_LEN_ERR", Value: uint64(WCLocLenErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_LOC_QP_OP_ERR", Value: uint64(WCLocQPOpErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_LOC_PROT_ERR", Value: uint64(WCLocProtErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_WR_FLUSH_ERR", Value: uint64(WCWRFlushErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_MW_BIND_ERR", Value: uint64(WCMWBindErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_BAD_RESP_ERR", Value: uint64(WCBadRespErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_LOC_ACCESS_ERR", Value: uint64(WCLocAccessErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_REM_INV_REQ_ERR", Value: uint64(WCRemInvReqErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_REM_ACCESS_ERR", Value: uint64(WCRemAccessErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_REM_OP_ERR", Value: uint64(WCRemOpErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_RETRY_EXC_ERR", Value: uint64(WCRetryExcErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_RNR_RETRY_EXC_ERR", Value: uint64(WCRNRRetryExcErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_REM_ABORT_ERR", Value: uint64(WCRemAbortErr)},
	{Enum: "ib_wc_status", Name: "IB_WC_GENERAL_ERR", Value: uint64(WCGeneralErr)},
	{Enum: "ib_wc_opcode", Name: "IB_WC_SEND", Value: uint64(WCSend)},
	{Enum: "ib_wc_opcode", Name: "IB_WC_RDMA_WRITE", Value: uint64(WCRDMAWrite)},
	{Enum: "ib_wc_opcode", Name: "IB_WC_RDMA_READ", Value: uint64(WCRDMARead)},
	{Enum: "ib_wc_opcode", Name: "IB_WC_COMP_SWAP", Value: uint64(WCCompSwap)},
	{Enum: "ib_wc_opcode", Name: "IB_WC_FETCH_ADD", Value: uint64(WCFetchAdd)},
	{Enum: "ib_wc_opcode", Name: "IB_WC_LOCAL_INV", Value: uint64(WCLocalInv)},
	{Enum: "ib_wc_opcode", Name: "IB_WC_RECV", Value: uint64(WCRecv)},
	{Enum: "ib_wc_opcode", Name: "IB_WC_RECV_RDMA_WITH_IMM", Value: uint64(WCRecvRDMAWithImm)},
	{Name: "MLX5_QP_ST_RC", Value: qpcServiceRC},
	{Name: "MLX5_QP_PM_MIGRATED", Value: qpcPMMigrated},
	{Name: "MLX5_NON_ZERO_RQ", Value: qpcRQRegular},
	{Name: "MLX5_ZERO_LEN_RQ", Value: qpcRQZeroLength},
	{Name: "MLX5_MKC_ACCESS_MODE_KLMS", Value: mkcAccessKLMs},
	// The WQE opcode each of mlx5go's operations posts.
	{Name: "MLX5_OPCODE_RDMA_WRITE", Value: uint64(opcodes[OpRDMAWrite].mlx5)},
	{Name: "MLX5_OPCODE_RDMA_WRITE_IMM", Value: uint64(opcodes[OpRDMAWriteImm].mlx5)},
	{Name: "MLX5_OPCODE_SEND", Value: uint64(opcodes[OpSend].mlx5)},
	{Name: "MLX5_OPCODE_SEND_IMM", Value: uint64(opcodes[OpSendImm].mlx5)},
	{Name: "MLX5_OPCODE_SEND_INVAL", Value: uint64(opcodes[OpSendInv].mlx5)},
	{Name: "MLX5_OPCODE_RDMA_READ", Value: uint64(opcodes[OpRDMARead].mlx5)},
	{Name: "MLX5_OPCODE_ATOMIC_CS", Value: uint64(opcodes[OpAtomicCAS].mlx5)},
	{Name: "MLX5_OPCODE_ATOMIC_FA", Value: uint64(opcodes[OpAtomicFAA].mlx5)},
	{Name: "MLX5_OPCODE_UMR", Value: uint64(opcodes[OpLocalInv].mlx5)},
	{Name: "MLX5_OPCODE_NOP", Value: uint64(opcodes[OpNOP].mlx5)},
}

func TestLabBTFMlx5DataPath(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("mlx5_ib", "ib_core", "mlx5_core", "vmlinux")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, dataPathConsts)
}
