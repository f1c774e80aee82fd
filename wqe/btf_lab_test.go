package wqe

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
)

// wqeConsts is every kernel enumerator this package mirrors. The kernel
// spells two of them differently from mlx5dv.h: the fence modes
// MLX5_FENCE_MODE_INITIATOR_SMALL and _SMALL_AND_FENCE are mlx5dv.h's
// MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE and MLX5_WQE_CTRL_FENCE; its
// ib_send_flags have the values of ibv_send_flags.
var wqeConsts = []btfcheck.Const{
	{Name: "MLX5_SEND_WQE_BB", Value: WQEBB},
	{Name: "MLX5_OPCODE_NOP", Value: uint64(OpcodeNOP)},
	{Name: "MLX5_OPCODE_SEND_INVAL", Value: uint64(OpcodeSendInval)},
	{Name: "MLX5_OPCODE_RDMA_WRITE", Value: uint64(OpcodeRDMAWrite)},
	{Name: "MLX5_OPCODE_RDMA_WRITE_IMM", Value: uint64(OpcodeRDMAWriteImm)},
	{Name: "MLX5_OPCODE_SEND", Value: uint64(OpcodeSend)},
	{Name: "MLX5_OPCODE_SEND_IMM", Value: uint64(OpcodeSendImm)},
	{Name: "MLX5_OPCODE_RDMA_READ", Value: uint64(OpcodeRDMARead)},
	{Name: "MLX5_OPCODE_ATOMIC_CS", Value: uint64(OpcodeAtomicCS)},
	{Name: "MLX5_OPCODE_ATOMIC_FA", Value: uint64(OpcodeAtomicFA)},
	{Name: "MLX5_OPCODE_SET_PSV", Value: uint64(OpcodeSetPSV)},
	{Name: "MLX5_OPCODE_UMR", Value: uint64(OpcodeUMR)},
	{Name: "MLX5_WQE_CTRL_CQ_UPDATE", Value: uint64(CtrlCQUpdate)},
	{Name: "MLX5_WQE_CTRL_SOLICITED", Value: uint64(CtrlSolicited)},
	{Name: "MLX5_FENCE_MODE_INITIATOR_SMALL", Value: uint64(CtrlSmallFence)},
	{Name: "MLX5_FENCE_MODE_SMALL_AND_FENCE", Value: uint64(CtrlFence)},
	{Name: "MLX5_INLINE_SEG", Value: uint64(InlineSeg)},
	{Name: "MLX5_EXTENDED_UD_AV", Value: uint64(ExtendedUDAV)},
	{Enum: "ib_send_flags", Name: "IB_SEND_FENCE", Value: uint64(SendFence)},
	{Enum: "ib_send_flags", Name: "IB_SEND_SIGNALED", Value: uint64(SendSignaled)},
	{Enum: "ib_send_flags", Name: "IB_SEND_SOLICITED", Value: uint64(SendSolicited)},
	{Enum: "ib_send_flags", Name: "IB_SEND_INLINE", Value: uint64(SendInline)},

	{Name: "MLX5_CQE_OWNER_MASK", Value: cqeOwnerMask},
	{Name: "MLX5_CQE_REQ", Value: uint64(CQEReq)},
	{Name: "MLX5_CQE_RESP_WR_IMM", Value: uint64(CQERespWRImm)},
	{Name: "MLX5_CQE_RESP_SEND", Value: uint64(CQERespSend)},
	{Name: "MLX5_CQE_RESP_SEND_IMM", Value: uint64(CQERespSendImm)},
	{Name: "MLX5_CQE_RESP_SEND_INV", Value: uint64(CQERespSendInv)},
	{Name: "MLX5_CQE_RESIZE_CQ", Value: uint64(CQEResizeCQ)},
	{Name: "MLX5_CQE_SIG_ERR", Value: uint64(CQESigErr)},
	{Name: "MLX5_CQE_REQ_ERR", Value: uint64(CQEReqErr)},
	{Name: "MLX5_CQE_RESP_ERR", Value: uint64(CQERespErr)},
	{Name: "MLX5_CQE_INVALID", Value: uint64(CQEInvalid)},
	{Name: "MLX5_NO_INLINE_DATA", Value: uint64(CQEFormatNoInline)},
	{Name: "MLX5_INLINE_DATA32_SEG", Value: uint64(CQEFormatInline32)},
	{Name: "MLX5_INLINE_DATA64_SEG", Value: uint64(CQEFormatInline64)},
	{Name: "MLX5_COMPRESSED", Value: uint64(CQEFormatCompressed)},

	{Name: "MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR", Value: uint64(SyndromeLocalLength)},
	{Name: "MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR", Value: uint64(SyndromeLocalQPOp)},
	{Name: "MLX5_CQE_SYNDROME_LOCAL_PROT_ERR", Value: uint64(SyndromeLocalProt)},
	{Name: "MLX5_CQE_SYNDROME_WR_FLUSH_ERR", Value: uint64(SyndromeWRFlush)},
	{Name: "MLX5_CQE_SYNDROME_MW_BIND_ERR", Value: uint64(SyndromeMWBind)},
	{Name: "MLX5_CQE_SYNDROME_BAD_RESP_ERR", Value: uint64(SyndromeBadResp)},
	{Name: "MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR", Value: uint64(SyndromeLocalAccess)},
	{Name: "MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR", Value: uint64(SyndromeRemoteInvalReq)},
	{Name: "MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR", Value: uint64(SyndromeRemoteAccess)},
	{Name: "MLX5_CQE_SYNDROME_REMOTE_OP_ERR", Value: uint64(SyndromeRemoteOp)},
	{Name: "MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR", Value: uint64(SyndromeTransportRetryExc)},
	{Name: "MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR", Value: uint64(SyndromeRNRRetryExc)},
	{Name: "MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR", Value: uint64(SyndromeRemoteAborted)},
}

// wqeLayouts is every kernel struct whose offsets this package hard-codes,
// under the kernel's names (mlx5dv.h's struct mlx5_wqe_av is the kernel's
// struct mlx5_av; its mlx5_cqe64.srqn_uidx and imm_inval_pkey are the
// kernel's srqn and the immediate union).
var wqeLayouts = []btfcheck.Layout{
	{Struct: "mlx5_wqe_ctrl_seg", Size: CtrlSegSize, Fields: []btfcheck.Field{
		{Name: "opmod_idx_opcode", Offset: ctrlOffOpmodIdxOpcode},
		{Name: "qpn_ds", Offset: ctrlOffQPNDS},
		{Name: "signature", Offset: ctrlOffSignature},
		{Name: "fm_ce_se", Offset: ctrlOffFmCeSe},
		{Name: "imm", Offset: ctrlOffImm},
	}},
	{Struct: "mlx5_wqe_data_seg", Size: DataSegSize, Fields: []btfcheck.Field{
		{Name: "byte_count", Offset: dataOffByteCount},
		{Name: "lkey", Offset: dataOffLKey},
		{Name: "addr", Offset: dataOffAddr},
	}},
	{Struct: "mlx5_wqe_raddr_seg", Size: RaddrSegSize, Fields: []btfcheck.Field{
		{Name: "raddr", Offset: raddrOffRaddr},
		{Name: "rkey", Offset: raddrOffRKey},
		{Name: "reserved", Offset: raddrOffReserved},
	}},
	{Struct: "mlx5_wqe_inline_seg", Size: InlineHdrSize, Fields: []btfcheck.Field{
		{Name: "byte_count", Offset: inlineOffByteCount},
		{Name: "data", Offset: inlineOffData},
	}},
	{Struct: "mlx5_wqe_datagram_seg", Size: DatagramSegSize, Fields: []btfcheck.Field{
		{Name: "av", Offset: 0},
	}},
	{Struct: "mlx5_av", Size: DatagramSegSize, Fields: []btfcheck.Field{
		{Name: "key.qkey.qkey", Offset: avOffQKey},
		{Name: "key.qkey.reserved", Offset: avOffQKeyReserved},
		{Name: "dqp_dct", Offset: avOffDQPDCT},
		{Name: "stat_rate_sl", Offset: avOffStatRateSL},
		{Name: "fl_mlid", Offset: avOffFlMlid},
		{Name: "rlid", Offset: avOffRLID},
		{Name: "reserved0", Offset: avOffReserved0},
		{Name: "rmac", Offset: avOffRMAC},
		{Name: "tclass", Offset: avOffTClass},
		{Name: "hop_limit", Offset: avOffHopLimit},
		{Name: "grh_gid_fl", Offset: avOffGRHGidFl},
		{Name: "rgid", Offset: avOffRGID},
	}},
	{Struct: "mlx5_wqe_umr_ctrl_seg", Size: UMRCtrlSegSize, Fields: []btfcheck.Field{
		{Name: "flags", Offset: umrOffFlags},
		{Name: "xlt_octowords", Offset: umrOffKLMOctowords},
		{Name: "bsf_octowords", Offset: umrOffBSFOctowords},
		{Name: "mkey_mask", Offset: umrOffMkeyMask},
		{Name: "xlt_offset_47_16", Offset: umrOffReserved}, // written as 0
	}},
	{Struct: "mlx5_cqe64", Size: CQESize, Fields: []btfcheck.Field{
		{Name: "ml_path", Offset: cqeOffMLPath},
		{Name: "slid", Offset: cqeOffSLID},
		{Name: "flags_rqpn", Offset: cqeOffFlagsRQPN},
		{Name: "srqn", Offset: cqeOffSrqnUIdx},
		{Name: "immediate", Offset: cqeOffImm},
		{Name: "inval_rkey", Offset: cqeOffImm},
		{Name: "pkey", Offset: cqeOffImm},
		{Name: "byte_cnt", Offset: cqeOffByteCnt},
		{Name: "timestamp_h", Offset: cqeOffTimestamp},
		{Name: "timestamp_l", Offset: cqeOffTimestamp + 4},
		{Name: "sop_drop_qpn", Offset: cqeOffSopDropQPN},
		{Name: "wqe_counter", Offset: cqeOffWQECounter},
		{Name: "signature", Offset: cqeOffSignature},
		{Name: "op_own", Offset: cqeOffOpOwn},
	}},
	{Struct: "mlx5_err_cqe", Size: CQESize, Fields: []btfcheck.Field{
		{Name: "srqn", Offset: cqeOffSrqnUIdx},
		{Name: "vendor_err_synd", Offset: errOffVendorSynd},
		{Name: "syndrome", Offset: errOffSyndrome},
		{Name: "s_wqe_opcode_qpn", Offset: cqeOffSopDropQPN},
		{Name: "wqe_counter", Offset: cqeOffWQECounter},
		{Name: "signature", Offset: cqeOffSignature},
		{Name: "op_own", Offset: cqeOffOpOwn},
	}},
	{Struct: "mlx5_sig_err_cqe", Size: CQESize, Fields: []btfcheck.Field{
		{Name: "expected_trans_sig", Offset: sigOffExpTransSig},
		{Name: "actual_trans_sig", Offset: sigOffActTransSig},
		{Name: "expected_reftag", Offset: sigOffExpRefTag},
		{Name: "actual_reftag", Offset: sigOffActRefTag},
		{Name: "syndrome", Offset: sigOffSyndrome},
		// libmlx5 reads sig_type and domain where the kernel has rsvd22[2].
		{Name: "rsvd22", Offset: sigOffSigType},
		{Name: "mkey", Offset: sigOffMkey},
		{Name: "err_offset", Offset: sigOffErrOffset},
		{Name: "qpn", Offset: cqeOffSopDropQPN},
		{Name: "signature", Offset: cqeOffSignature},
		{Name: "op_own", Offset: cqeOffOpOwn},
	}},
}

// notInBTF are structs and constants this package mirrors that the lab
// kernel's modules do not use, so they are not in their BTF: struct
// mlx5_wqe_atomic_seg (mlx5_ib posts no atomics of its own), and
// MLX5_INVALID_LKEY, a #define in the kernel's headers. The test fails if
// one turns up, so that it is checked then.
var notInBTF = struct{ structs, consts []string }{
	structs: []string{"mlx5_wqe_atomic_seg"},
	consts:  []string{"MLX5_INVALID_LKEY"},
}

// TestLabBTFWQE checks the segment and CQE layouts and the constants of
// this package against the BTF of the lab kernel's mlx5_core and mlx5_ib.
func TestLabBTFWQE(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("mlx5_core", "mlx5_ib")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, wqeConsts)
	btfcheck.CheckLayouts(t, s, wqeLayouts)
	for _, name := range notInBTF.structs {
		if _, err := s.StructSize(name); err == nil {
			t.Errorf("struct %s is in %s's BTF now: check its layout and remove it from notInBTF", name, s.Name)
		}
	}
	for _, name := range notInBTF.consts {
		if _, err := s.EnumValue("", name); err == nil {
			t.Errorf("%s is in %s's BTF now: check it and remove it from notInBTF", name, s.Name)
		}
	}
	n := 0
	for _, l := range wqeLayouts {
		n += len(l.Fields)
	}
	t.Logf("%d constants, %d structs with %d fields checked; not in BTF: %v", len(wqeConsts), len(wqeLayouts), n, notInBTF)
}
