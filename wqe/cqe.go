package wqe

import (
	"errors"
	"fmt"

	"github.com/mlx5go/mlx5go/sig"
)

// CQESize is the size of a completion queue entry (struct mlx5_cqe64). In
// a CQ of 128-byte entries the 64-byte entry is the second half of each.
const CQESize = 64

// CQE opcodes: the top four bits of op_own (MLX5_CQE_*).
const (
	CQEReq         uint8 = 0  // MLX5_CQE_REQ: a send queue WQE completed
	CQERespWRImm   uint8 = 1  // MLX5_CQE_RESP_WR_IMM: RDMA write with immediate received
	CQERespSend    uint8 = 2  // MLX5_CQE_RESP_SEND: send received
	CQERespSendImm uint8 = 3  // MLX5_CQE_RESP_SEND_IMM: send with immediate received
	CQERespSendInv uint8 = 4  // MLX5_CQE_RESP_SEND_INV: send with invalidate received
	CQEResizeCQ    uint8 = 5  // MLX5_CQE_RESIZE_CQ
	CQESigErr      uint8 = 12 // MLX5_CQE_SIG_ERR: signature error (SigErrCQE)
	CQEReqErr      uint8 = 13 // MLX5_CQE_REQ_ERR: a send queue WQE failed
	CQERespErr     uint8 = 14 // MLX5_CQE_RESP_ERR: a receive failed
	CQEInvalid     uint8 = 15 // MLX5_CQE_INVALID: never written by the device
)

// CQE formats: bits 3:2 of op_own. A responder CQE can carry up to 32 or
// 64 bytes of the received data itself (inline scatter).
const (
	CQEFormatNoInline   uint8 = 0 // MLX5_NO_INLINE_DATA
	CQEFormatInline32   uint8 = 1 // MLX5_INLINE_DATA32_SEG: data in the CQE's first 32 bytes
	CQEFormatInline64   uint8 = 2 // MLX5_INLINE_DATA64_SEG: data in the 64 bytes before a 64-byte CQE (128-byte CQEs)
	CQEFormatCompressed uint8 = 3 // MLX5_COMPRESSED: a compressed CQE block
)

// cqeOwnerMask is the owner bit of op_own (MLX5_CQE_OWNER_MASK).
const cqeOwnerMask = 1

// Byte offsets in struct mlx5_cqe64 (and in the error and signature error
// views of the same 64 bytes), checked against the kernel's BTF by
// TestLabBTFWQE.
const (
	cqeOffMLPath      = 17 // ml_path
	cqeOffSLID        = 22 // slid
	cqeOffFlagsRQPN   = 24 // flags_rqpn
	cqeOffSrqnUIdx    = 32 // srqn_uidx (kernel: srqn)
	cqeOffImm         = 36 // imm_inval_pkey (kernel: the immediate / inval_rkey / pkey union)
	cqeOffByteCnt     = 44 // byte_cnt
	cqeOffTimestamp   = 48 // timestamp (kernel: timestamp_h, timestamp_l)
	cqeOffSopDropQPN  = 56 // sop_drop_qpn (mlx5_err_cqe: s_wqe_opcode_qpn; mlx5_sig_err_cqe: qpn)
	cqeOffWQECounter  = 60 // wqe_counter
	cqeOffSignature   = 62 // signature
	cqeOffOpOwn       = 63 // op_own
	errOffVendorSynd  = 54 // mlx5_err_cqe.vendor_err_synd
	errOffSyndrome    = 55 // mlx5_err_cqe.syndrome
	sigOffExpTransSig = 16 // mlx5_sig_err_cqe.expected_trans_sig
	sigOffActTransSig = 20 // actual_trans_sig
	sigOffExpRefTag   = 24 // expected_reftag
	sigOffActRefTag   = 28 // actual_reftag
	sigOffSyndrome    = 32 // syndrome (16 bits)
	sigOffSigType     = 34 // sig_type (libmlx5; the kernel's rsvd22[0])
	sigOffDomain      = 35 // domain (libmlx5; the kernel's rsvd22[1])
	sigOffMkey        = 36 // mkey
	sigOffErrOffset   = 40 // err_offset
)

// ErrNotSigErr is returned by SigErrCQE.Decode for a CQE of another
// opcode.
var ErrNotSigErr = errors.New("wqe: not a signature error CQE")

// Syndrome is the syndrome of an error CQE (MLX5_CQE_SYNDROME_*).
type Syndrome uint8

// Values of MLX5_CQE_SYNDROME_*.
const (
	SyndromeLocalLength       Syndrome = 0x01 // LOCAL_LENGTH_ERR
	SyndromeLocalQPOp         Syndrome = 0x02 // LOCAL_QP_OP_ERR
	SyndromeLocalProt         Syndrome = 0x04 // LOCAL_PROT_ERR
	SyndromeWRFlush           Syndrome = 0x05 // WR_FLUSH_ERR
	SyndromeMWBind            Syndrome = 0x06 // MW_BIND_ERR
	SyndromeBadResp           Syndrome = 0x10 // BAD_RESP_ERR
	SyndromeLocalAccess       Syndrome = 0x11 // LOCAL_ACCESS_ERR
	SyndromeRemoteInvalReq    Syndrome = 0x12 // REMOTE_INVAL_REQ_ERR
	SyndromeRemoteAccess      Syndrome = 0x13 // REMOTE_ACCESS_ERR
	SyndromeRemoteOp          Syndrome = 0x14 // REMOTE_OP_ERR
	SyndromeTransportRetryExc Syndrome = 0x15 // TRANSPORT_RETRY_EXC_ERR
	SyndromeRNRRetryExc       Syndrome = 0x16 // RNR_RETRY_EXC_ERR
	SyndromeRemoteAborted     Syndrome = 0x22 // REMOTE_ABORTED_ERR
)

var syndromeNames = map[Syndrome]string{
	0:                         "none",
	SyndromeLocalLength:       "local length error",
	SyndromeLocalQPOp:         "local QP operation error",
	SyndromeLocalProt:         "local protection error",
	SyndromeWRFlush:           "work request flushed",
	SyndromeMWBind:            "memory window bind error",
	SyndromeBadResp:           "bad response",
	SyndromeLocalAccess:       "local access error",
	SyndromeRemoteInvalReq:    "remote invalid request",
	SyndromeRemoteAccess:      "remote access error",
	SyndromeRemoteOp:          "remote operation error",
	SyndromeTransportRetryExc: "transport retry counter exceeded",
	SyndromeRNRRetryExc:       "RNR retry counter exceeded",
	SyndromeRemoteAborted:     "remote aborted",
}

func (s Syndrome) String() string {
	if n, ok := syndromeNames[s]; ok {
		return n
	}
	return fmt.Sprintf("Syndrome(%#02x)", uint8(s))
}

// CQEOwned reports whether software owns the 64-byte CQE cqe at consumer
// index ci of a CQ of 1<<logSize entries: the device wrote it (its opcode
// is not CQEInvalid) and its owner bit equals bit logSize of ci, which
// flips on every pass over the ring. A cqe shorter than 64 bytes is not
// owned.
func CQEOwned(cqe []byte, ci uint32, logSize uint8) bool {
	if len(cqe) < CQESize {
		return false
	}
	op := cqe[cqeOffOpOwn]
	return op>>4 != CQEInvalid && op&cqeOwnerMask == uint8(ci>>logSize)&cqeOwnerMask
}

// InitCQE prepares b, a fresh CQ buffer of 64-byte entries (or one
// entry), as libmlx5 does: all zero, and op_own = CQEInvalid<<4 in each
// entry, so that CQEOwned reports none of them until the device writes
// it. For a CQ of 128-byte entries pass each entry's second half.
func InitCQE(b []byte) {
	clear(b)
	for i := cqeOffOpOwn; i < len(b); i += CQESize {
		b[i] = CQEInvalid << 4
	}
}

// CQE is a decoded completion queue entry (struct mlx5_cqe64, or struct
// mlx5_err_cqe for CQEReqErr and CQERespErr). Fields that the entry's
// opcode does not carry are zero.
type CQE struct {
	Opcode     uint8  // op_own >> 4: CQEReq ... CQEInvalid
	Format     uint8  // op_own bits 3:2: CQEFormat*
	Owner      bool   // op_own bit 0
	Signature  uint8  // signature
	WQECounter uint16 // wqe_counter: the 16-bit counter of the WQE that completed (send queue: its first WQEBB)
	QPN        uint32 // the QP number, low 24 bits of sop_drop_qpn
	// WQEOpcode is the top byte of sop_drop_qpn: in requester and error
	// CQEs the opcode of the WQE that completed.
	WQEOpcode uint8
	SrqnUIdx  uint32 // srqn_uidx, 24 bits: the SRQ number, or the QP's user index
	ByteCount uint32 // byte_cnt: bytes received (requester: of an RDMA read or atomic)
	// Imm is imm_inval_pkey read big-endian: the immediate data (the
	// value BuildSend's Send.Imm wrote), the invalidated rkey of
	// CQERespSendInv, or (UD) the P_Key index in the low 16 bits.
	Imm       uint32
	Timestamp uint64 // timestamp
	SLID      uint16 // slid: source LID
	FlagsRQPN uint32 // flags_rqpn: SrcQP, SL, GRH
	MLPath    uint8  // ml_path: destination LID path bits in bits 6:0

	// Error CQEs (CQEReqErr, CQERespErr).
	Syndrome       Syndrome // syndrome
	VendorSyndrome uint8    // vendor_err_synd
}

// The accessors below read a decoded CQE; a nil c reads as the zero CQE.

// SrcQP is the remote QP number of a responder CQE (UD).
func (c *CQE) SrcQP() uint32 { return c.flagsRQPN() & 0xffffff }

// SL is the service level of a responder CQE.
func (c *CQE) SL() uint8 { return uint8(c.flagsRQPN()>>24) & 0xf }

// GRH reports whether a received UD packet carried a GRH (its first 40
// bytes in the receive buffer).
func (c *CQE) GRH() bool { return (c.flagsRQPN()>>28)&3 != 0 }

// IsError reports whether the CQE reports a failed work request.
func (c *CQE) IsError() bool { return c != nil && (c.Opcode == CQEReqErr || c.Opcode == CQERespErr) }

func (c *CQE) flagsRQPN() uint32 {
	if c == nil {
		return 0
	}
	return c.FlagsRQPN
}

// Decode decodes the 64-byte CQE b into c. For a CQESigErr entry only the
// opcode, owner, format, signature and QP number are decoded; use
// SigErrCQE.Decode for the rest. It does not check ownership (CQEOwned).
// A nil c fails with ErrNil.
func (c *CQE) Decode(b []byte) error {
	if c == nil {
		return ErrNil
	}
	if len(b) < CQESize {
		return ErrShort
	}
	b = b[:CQESize]
	op := b[cqeOffOpOwn]
	sdq := be.Uint32(b[cqeOffSopDropQPN:])
	c.Opcode = op >> 4
	c.Format = (op >> 2) & 3
	c.Owner = op&cqeOwnerMask != 0
	c.Signature = b[cqeOffSignature]
	c.QPN = sdq & 0xffffff
	c.WQEOpcode = uint8(sdq >> 24)
	c.Syndrome, c.VendorSyndrome = 0, 0
	c.ByteCount, c.Imm, c.Timestamp, c.SLID, c.FlagsRQPN, c.MLPath = 0, 0, 0, 0, 0, 0
	c.WQECounter, c.SrqnUIdx = 0, 0
	switch c.Opcode {
	case CQESigErr:
		return nil
	case CQEReqErr, CQERespErr:
		c.Syndrome = Syndrome(b[errOffSyndrome])
		c.VendorSyndrome = b[errOffVendorSynd]
	default:
		c.ByteCount = be.Uint32(b[cqeOffByteCnt:])
		c.Imm = be.Uint32(b[cqeOffImm:])
		c.Timestamp = be.Uint64(b[cqeOffTimestamp:])
		c.SLID = be.Uint16(b[cqeOffSLID:])
		c.FlagsRQPN = be.Uint32(b[cqeOffFlagsRQPN:])
		c.MLPath = b[cqeOffMLPath]
	}
	c.WQECounter = be.Uint16(b[cqeOffWQECounter:])
	c.SrqnUIdx = be.Uint32(b[cqeOffSrqnUIdx:]) & 0xffffff
	return nil
}

// The functions below read one field of the 64-byte CQE b, as Decode
// does, for a poller that needs only a few (mlx5's Poll: the QP number
// and counter of every CQE, the rest by opcode). b must hold CQESize
// bytes; they do not check the opcode.

// CQEQPN is the QP number: the low 24 bits of sop_drop_qpn (CQE.QPN).
func CQEQPN(b []byte) uint32 { return be.Uint32(b[cqeOffSopDropQPN:cqeOffSopDropQPN+4]) & 0xffffff }

// CQEWQECounter is wqe_counter (CQE.WQECounter).
func CQEWQECounter(b []byte) uint16 { return be.Uint16(b[cqeOffWQECounter : cqeOffWQECounter+2]) }

// CQEByteCount is byte_cnt (CQE.ByteCount).
func CQEByteCount(b []byte) uint32 { return be.Uint32(b[cqeOffByteCnt : cqeOffByteCnt+4]) }

// CQEImm is imm_inval_pkey (CQE.Imm).
func CQEImm(b []byte) uint32 { return be.Uint32(b[cqeOffImm : cqeOffImm+4]) }

// CQEFlagsRQPN is flags_rqpn (CQE.FlagsRQPN).
func CQEFlagsRQPN(b []byte) uint32 { return be.Uint32(b[cqeOffFlagsRQPN : cqeOffFlagsRQPN+4]) }

// CQESLID is slid (CQE.SLID).
func CQESLID(b []byte) uint16 { return be.Uint16(b[cqeOffSLID : cqeOffSLID+2]) }

// CQEMLPath is ml_path (CQE.MLPath).
func CQEMLPath(b []byte) uint8 { return b[cqeOffMLPath] }

// CQEErr is the syndrome and vendor syndrome of an error CQE
// (CQE.Syndrome, CQE.VendorSyndrome).
func CQEErr(b []byte) (Syndrome, uint8) { return Syndrome(b[errOffSyndrome]), b[errOffVendorSynd] }

// SigErrCQE is a decoded signature error CQE (opcode CQESigErr; the
// kernel's struct mlx5_sig_err_cqe, with the sig_type and domain bytes
// libmlx5 reads).
type SigErrCQE struct {
	Owner            bool   // op_own bit 0
	ExpectedTransSig uint32 // expected_trans_sig
	ActualTransSig   uint32 // actual_trans_sig
	ExpectedRefTag   uint32 // expected_reftag
	ActualRefTag     uint32 // actual_reftag
	Syndrome         uint16 // syndrome: sig.SyndromeGuard, SyndromeAppTag, SyndromeRefTag
	SigType          uint8  // sig_type: 0 for a block signature
	Domain           uint8  // domain: sig.DomainWire or sig.DomainMemory
	Mkey             uint32 // mkey: the signature mkey that found the error
	ErrOffset        uint64 // err_offset
	QPN              uint32 // qpn, 24 bits
}

// Decode decodes the 64-byte signature error CQE b into c. It fails with
// ErrNotSigErr if b's opcode is not CQESigErr, with ErrNil if c is nil.
func (c *SigErrCQE) Decode(b []byte) error {
	if c == nil {
		return ErrNil
	}
	if len(b) < CQESize {
		return ErrShort
	}
	b = b[:CQESize]
	op := b[cqeOffOpOwn]
	if op>>4 != CQESigErr {
		return ErrNotSigErr
	}
	*c = SigErrCQE{
		Owner:            op&cqeOwnerMask != 0,
		ExpectedTransSig: be.Uint32(b[sigOffExpTransSig:]),
		ActualTransSig:   be.Uint32(b[sigOffActTransSig:]),
		ExpectedRefTag:   be.Uint32(b[sigOffExpRefTag:]),
		ActualRefTag:     be.Uint32(b[sigOffActRefTag:]),
		Syndrome:         be.Uint16(b[sigOffSyndrome:]),
		SigType:          b[sigOffSigType],
		Domain:           b[sigOffDomain],
		Mkey:             be.Uint32(b[sigOffMkey:]),
		ErrOffset:        be.Uint64(b[sigOffErrOffset:]),
		QPN:              be.Uint32(b[cqeOffSopDropQPN:]) & 0xffffff,
	}
	return nil
}

// Sig returns the fields sig.DecodeSigErrCQE interprets against the
// mkey's signature configuration (what mlx5dv_mkey_check reports); zero
// for a nil c.
func (c *SigErrCQE) Sig() sig.SigErrCQE {
	if c == nil {
		return sig.SigErrCQE{}
	}
	return sig.SigErrCQE{
		ExpectedTransSig: c.ExpectedTransSig,
		ActualTransSig:   c.ActualTransSig,
		ExpectedRefTag:   c.ExpectedRefTag,
		ActualRefTag:     c.ActualRefTag,
		Syndrome:         c.Syndrome,
		SigType:          c.SigType,
		Domain:           c.Domain,
		Offset:           c.ErrOffset,
	}
}
