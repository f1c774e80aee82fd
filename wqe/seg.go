package wqe

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// WQEBB is the size of a send queue basic block (MLX5_SEND_WQE_BB).
const WQEBB = 64

// Opcodes of the control segment (MLX5_OPCODE_* in mlx5dv.h).
const (
	OpcodeNOP          uint8 = 0x00 // MLX5_OPCODE_NOP
	OpcodeSendInval    uint8 = 0x01 // MLX5_OPCODE_SEND_INVAL: send with invalidate
	OpcodeRDMAWrite    uint8 = 0x08 // MLX5_OPCODE_RDMA_WRITE
	OpcodeRDMAWriteImm uint8 = 0x09 // MLX5_OPCODE_RDMA_WRITE_IMM
	OpcodeSend         uint8 = 0x0a // MLX5_OPCODE_SEND
	OpcodeSendImm      uint8 = 0x0b // MLX5_OPCODE_SEND_IMM
	OpcodeRDMARead     uint8 = 0x10 // MLX5_OPCODE_RDMA_READ
	OpcodeAtomicCS     uint8 = 0x11 // MLX5_OPCODE_ATOMIC_CS: compare and swap
	OpcodeAtomicFA     uint8 = 0x12 // MLX5_OPCODE_ATOMIC_FA: fetch and add
	OpcodeSetPSV       uint8 = 0x20 // MLX5_OPCODE_SET_PSV
	OpcodeUMR          uint8 = 0x25 // MLX5_OPCODE_UMR (also LOCAL_INV)
)

// Bits of the control segment's fm_ce_se byte (mlx5dv.h).
const (
	CtrlSolicited  uint8 = 1 << 1 // MLX5_WQE_CTRL_SOLICITED
	CtrlCQUpdate   uint8 = 2 << 2 // MLX5_WQE_CTRL_CQ_UPDATE
	CtrlSmallFence uint8 = 1 << 5 // MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE
	CtrlFence      uint8 = 4 << 5 // MLX5_WQE_CTRL_FENCE
)

// Segment sizes in bytes.
const (
	CtrlSegSize     = 16 // struct mlx5_wqe_ctrl_seg
	DataSegSize     = 16 // struct mlx5_wqe_data_seg
	RaddrSegSize    = 16 // struct mlx5_wqe_raddr_seg
	AtomicSegSize   = 16 // struct mlx5_wqe_atomic_seg
	DatagramSegSize = 48 // struct mlx5_wqe_datagram_seg (the address vector, struct mlx5_wqe_av)
	InlineHdrSize   = 4  // struct mlx5_wqe_inline_seg without its data: byte_count
	UMRCtrlSegSize  = 48 // struct mlx5_wqe_umr_ctrl_seg
	MkcSegSize      = 64 // struct mlx5_wqe_mkey_context_seg (= PRM mkc)
	KLMSegSize      = 16 // struct mlx5_wqe_umr_klm_seg
	BSFSegSize      = 64 // BSF: basic, extended, wire and memory inline parts
	SetPSVSegSize   = 16 // SET_PSV segment
)

// ErrShort is returned when a buffer cannot hold the segment or WQE.
var ErrShort = errors.New("wqe: buffer too short")

// ErrNil is returned for a nil work request (BuildSend, BuildLocalInv,
// BuildMkeyConfigure), a nil segment value (PutCtrl, PutUMRCtrl, PutMkc,
// PutDatagram) or a nil CQE to decode into; nothing is written.
var ErrNil = errors.New("wqe: nil work request, segment or CQE")

var be = binary.BigEndian

// Ctrl is the control segment (struct mlx5_wqe_ctrl_seg) that starts
// every WQE.
type Ctrl struct {
	Opcode    uint8  // opcode (low byte of opmod_idx_opcode)
	OpMod     uint8  // opmod (high byte of opmod_idx_opcode)
	WQEIndex  uint16 // the 16-bit SQ producer counter of the WQE's first WQEBB
	QPN       uint32 // qp_num, 24 bits
	DS        uint8  // ds: the WQE's size in 16-byte units, 6 bits
	Signature uint8  // signature
	// StreamID is dci_stream_channel_id: the stream channel of a DCI's
	// WQE (mlx5dv_wr_set_dc_addr_stream); 0 on every other QP.
	StreamID uint16
	FmCeSe   uint8  // fm_ce_se: Ctrl* bits
	Imm      uint32 // imm: immediate data, invalidation key, or the UMR's mkey
}

// Byte offsets in struct mlx5_wqe_ctrl_seg (checked against the kernel's
// BTF by TestLabBTFWQE).
const (
	ctrlOffOpmodIdxOpcode = 0  // opmod_idx_opcode
	ctrlOffQPNDS          = 4  // qpn_ds
	ctrlOffSignature      = 8  // signature
	ctrlOffStreamID       = 9  // dci_stream_channel_id (rdma-core's mlx5dv.h; the kernel's rsvd[2])
	ctrlOffFmCeSe         = 11 // fm_ce_se
	ctrlOffImm            = 12 // imm
)

// PutCtrl writes c into b[:16] (mlx5_wqe_ctrl_seg: opmod_idx_opcode,
// qpn_ds, signature, dci_stream_channel_id, fm_ce_se, imm).
func PutCtrl(b []byte, c *Ctrl) error {
	if c == nil {
		return ErrNil
	}
	if len(b) < CtrlSegSize {
		return ErrShort
	}
	StoreCtrl((*[16]byte)(b), CtrlHeadOf(c.OpMod, c.Opcode, c.QPN), c.WQEIndex, c.DS, c.Signature, c.StreamID, c.FmCeSe, c.Imm)
	return nil
}

// UMR control segment flags (MLX5_WQE_UMR_CTRL_FLAG_*).
const (
	UMRFlagInline            uint8 = 1 << 7 // MLX5_WQE_UMR_CTRL_FLAG_INLINE
	UMRFlagCheckFree         uint8 = 1 << 5 // MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE
	UMRFlagTranslationOffset uint8 = 1 << 4 // MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET
	UMRFlagCheckQPN          uint8 = 1 << 3 // MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN
)

// MkeyMask bits of the UMR control segment say which mkey context fields
// the UMR updates (MLX5_WQE_UMR_CTRL_MKEY_MASK_*).
type MkeyMask uint64

// Values of MLX5_WQE_UMR_CTRL_MKEY_MASK_*.
const (
	MkeyMaskLen         MkeyMask = 1 << 0  // _LEN
	MkeyMaskStartAddr   MkeyMask = 1 << 6  // _START_ADDR
	MkeyMaskSigErr      MkeyMask = 1 << 9  // _SIG_ERR
	MkeyMaskBSFEnable   MkeyMask = 1 << 12 // _BSF_ENABLE
	MkeyMaskMkey        MkeyMask = 1 << 13 // _MKEY
	MkeyMaskQPN         MkeyMask = 1 << 14 // _QPN
	MkeyMaskLocalWrite  MkeyMask = 1 << 18 // _ACCESS_LOCAL_WRITE
	MkeyMaskRemoteRead  MkeyMask = 1 << 19 // _ACCESS_REMOTE_READ
	MkeyMaskRemoteWrite MkeyMask = 1 << 20 // _ACCESS_REMOTE_WRITE
	MkeyMaskAtomic      MkeyMask = 1 << 21 // _ACCESS_ATOMIC
	MkeyMaskFree        MkeyMask = 1 << 29 // _FREE
	mkeyMaskAccessAll            = MkeyMaskLocalWrite | MkeyMaskRemoteRead | MkeyMaskRemoteWrite | MkeyMaskAtomic
)

// UMRCtrl is the UMR control segment (struct mlx5_wqe_umr_ctrl_seg).
type UMRCtrl struct {
	Flags        uint8    // flags: UMRFlag* bits
	KLMOctowords uint16   // klm_octowords: size of the inline translation list in 16-byte units
	BSFOctowords uint16   // bsf_octowords (or translation_offset with UMRFlagTranslationOffset)
	MkeyMask     MkeyMask // mkey_mask
}

// Byte offsets in struct mlx5_wqe_umr_ctrl_seg (checked against the
// kernel's BTF by TestLabBTFWQE).
const (
	umrOffFlags        = 0  // flags
	umrOffKLMOctowords = 4  // klm_octowords (kernel: xlt_octowords)
	umrOffBSFOctowords = 6  // bsf_octowords / translation_offset
	umrOffMkeyMask     = 8  // mkey_mask
	umrOffReserved     = 16 // the rest is reserved here
)

// PutUMRCtrl writes u into b[:48]; the 32 reserved bytes are zeroed.
func PutUMRCtrl(b []byte, u *UMRCtrl) error {
	if u == nil {
		return ErrNil
	}
	if len(b) < UMRCtrlSegSize {
		return ErrShort
	}
	b[umrOffFlags] = u.Flags
	clear(b[umrOffFlags+1 : umrOffKLMOctowords])
	be.PutUint16(b[umrOffKLMOctowords:], u.KLMOctowords)
	be.PutUint16(b[umrOffBSFOctowords:], u.BSFOctowords)
	be.PutUint64(b[umrOffMkeyMask:], uint64(u.MkeyMask))
	clear(b[umrOffReserved:UMRCtrlSegSize])
	return nil
}

// KLM is one entry of a UMR's inline translation list (struct
// mlx5_wqe_umr_klm_seg): ByteCount bytes at Addr of the memory key Mkey.
// It is also the Go form of a struct ibv_sge in mlx5dv_wr_set_mkey_layout_list.
type KLM struct {
	Addr      uint64 // address
	ByteCount uint32 // byte_count
	Mkey      uint32 // mkey (the SGE's lkey)
}

// PutKLM writes k into b[:16]: byte_count and key in one big-endian
// word, the address in the other, each in one 8-byte store (a copy of
// the segment, as MkeyTemplate's, then reads it without waiting for
// narrower stores).
func PutKLM(b []byte, k KLM) error {
	if len(b) < KLMSegSize {
		return ErrShort
	}
	binary.LittleEndian.PutUint64(b[0:], bits.ReverseBytes64(uint64(k.ByteCount)<<32|uint64(k.Mkey)))
	binary.LittleEndian.PutUint64(b[8:], bits.ReverseBytes64(k.Addr))
	return nil
}

// RepeatEntry is one entry of an interleaved layout (struct
// mlx5dv_mr_interleaved, written as struct mlx5_wqe_umr_repeat_ent_seg).
type RepeatEntry struct {
	Addr      uint64 // addr (va)
	ByteCount uint32 // bytes_count
	Skip      uint32 // bytes_skip: the stride is ByteCount+Skip
	Mkey      uint32 // lkey (memkey)
}

// repeatBlockOp is the op word of a repeat block header, as libmlx5
// writes it (the oracle's bytes).
const repeatBlockOp = 0x400

// PutRepeatBlockHeader writes the header of a repeat block (struct
// mlx5_wqe_umr_repeat_block_seg without its entries) into b[:16]:
// byteCount is the bytes of one repetition, repeatCount the repetitions,
// numEnt the entries that follow.
func PutRepeatBlockHeader(b []byte, byteCount, repeatCount uint32, numEnt uint16) error {
	if len(b) < 16 {
		return ErrShort
	}
	be.PutUint32(b[0:], byteCount)
	be.PutUint32(b[4:], repeatBlockOp)
	be.PutUint32(b[8:], repeatCount)
	be.PutUint16(b[12:], 0)
	be.PutUint16(b[14:], numEnt)
	return nil
}

// PutRepeatEntry writes e into b[:16] (struct mlx5_wqe_umr_repeat_ent_seg:
// stride, byte_count, memkey, va). stride and byte_count are 16 bits;
// values that do not fit are an error.
func PutRepeatEntry(b []byte, e RepeatEntry) error {
	if len(b) < 16 {
		return ErrShort
	}
	stride := uint64(e.ByteCount) + uint64(e.Skip)
	if stride > 0xffff {
		return ErrLayout
	}
	be.PutUint16(b[0:], uint16(stride))
	be.PutUint16(b[2:], uint16(e.ByteCount))
	be.PutUint32(b[4:], e.Mkey)
	be.PutUint64(b[8:], e.Addr)
	return nil
}

// SetPSV is the segment of a SET_PSV WQE: it loads a PSV with the initial
// (transient) signature of a domain.
type SetPSV struct {
	PSVIndex           uint32 // psv_index, 24 bits
	TransientSignature uint64 // transient_signature (sig.Domain.TransientSignature)
}

// PutSetPSV writes p into b[:16]: psv_index, a zero syndrome and reserved
// word, the transient signature.
func PutSetPSV(b []byte, p SetPSV) error {
	if len(b) < SetPSVSegSize {
		return ErrShort
	}
	be.PutUint32(b[0:], p.PSVIndex&0xffffff)
	be.PutUint32(b[4:], 0)
	be.PutUint64(b[8:], p.TransientSignature)
	return nil
}
