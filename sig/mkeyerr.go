package sig

import (
	"errors"
	"fmt"
)

// MkeyErrType is the kind of a signature error (C enum
// mlx5dv_mkey_err_type).
type MkeyErrType uint32

// Values of enum mlx5dv_mkey_err_type.
const (
	MkeyNoErr        MkeyErrType = 0 // MLX5DV_MKEY_NO_ERR
	MkeyErrBadGuard  MkeyErrType = 1 // MLX5DV_MKEY_SIG_BLOCK_BAD_GUARD (also a bad CRC32/CRC32C/CRC64)
	MkeyErrBadRefTag MkeyErrType = 2 // MLX5DV_MKEY_SIG_BLOCK_BAD_REFTAG
	MkeyErrBadAppTag MkeyErrType = 3 // MLX5DV_MKEY_SIG_BLOCK_BAD_APPTAG
)

func (t MkeyErrType) String() string {
	switch t {
	case MkeyNoErr:
		return "no error"
	case MkeyErrBadGuard:
		return "bad guard"
	case MkeyErrBadRefTag:
		return "bad reference tag"
	case MkeyErrBadAppTag:
		return "bad application tag"
	}
	return fmt.Sprintf("MkeyErrType(%d)", uint32(t))
}

// SigDomain names the domain a signature error was found in, with the
// values of the SIG_ERR CQE's domain field.
type SigDomain uint8

// Values of the SIG_ERR CQE's domain field.
const (
	DomainWire   SigDomain = 0
	DomainMemory SigDomain = 1
)

func (d SigDomain) String() string {
	switch d {
	case DomainWire:
		return "wire"
	case DomainMemory:
		return "memory"
	}
	return fmt.Sprintf("SigDomain(%d)", uint8(d))
}

// MkeyErr is the result of a check in the shape mlx5dv_mkey_check returns
// (C struct mlx5dv_mkey_err with its struct mlx5dv_sig_err), plus the
// domain the SIG_ERR CQE names. The zero value is "no error".
type MkeyErr struct {
	Type MkeyErrType // err_type
	// Actual (actual_value) is the field as found in the data's signature;
	// Expected (expected_value) is the value computed from the data and
	// the configuration. Both are as wide as the field: 16 bits for a
	// T10-DIF guard or application tag, 32 for a reference tag or a
	// CRC32/CRC32C, 64 for CRC64_XP10.
	Actual, Expected uint64
	// Offset (offset) is the byte offset of the bad block's first byte in
	// the checked domain's layout, signatures included, from the start of
	// the transfer: block i of a domain with b data and p signature bytes
	// per block is at i*(b+p).
	Offset uint64
	Domain SigDomain // the domain whose signature was bad

	// The whole signature values (transient signature form), for SigErrCQE.
	expectedSig, actualSig uint64
}

// OK reports whether e is "no error".
func (e MkeyErr) OK() bool { return e.Type == MkeyNoErr }

func (e MkeyErr) String() string {
	if e.OK() {
		return "no error"
	}
	return fmt.Sprintf("%s in %s domain at offset %#x: actual %#x, expected %#x",
		e.Type, e.Domain, e.Offset, e.Actual, e.Expected)
}

// SigErrCQE holds the fields of a signature error CQE (struct
// mlx5_sigerr_cqe in libmlx5, mlx5_sig_err_cqe in the kernel) that
// mlx5dv_mkey_check decodes.
type SigErrCQE struct {
	ExpectedTransSig uint32 // expected_trans_sig
	ActualTransSig   uint32 // actual_trans_sig
	ExpectedRefTag   uint32 // expected_ref_tag
	ActualRefTag     uint32 // actual_ref_tag
	Syndrome         uint16 // syndrome: SyndromeRefTag | SyndromeAppTag | SyndromeGuard
	SigType          uint8  // sig_type: SigErrTypeBlock (0) or transaction (1)
	Domain           uint8  // domain: DomainWire or DomainMemory
	Offset           uint64 // sig_err_offset
}

// Bits of SigErrCQE.Syndrome, and the CQE's block signature type.
const (
	SyndromeRefTag  = 1 << 11
	SyndromeAppTag  = 1 << 12
	SyndromeGuard   = 1 << 13
	SigErrTypeBlock = 0
)

// SigErrCQE returns the CQE fields a device reports for e: the whole
// expected and actual signatures and the syndrome bit of e.Type.
func (e MkeyErr) SigErrCQE() SigErrCQE {
	c := SigErrCQE{
		ExpectedTransSig: uint32(e.expectedSig >> 32),
		ActualTransSig:   uint32(e.actualSig >> 32),
		ExpectedRefTag:   uint32(e.expectedSig),
		ActualRefTag:     uint32(e.actualSig),
		SigType:          SigErrTypeBlock,
		Domain:           uint8(e.Domain),
		Offset:           e.Offset,
	}
	switch e.Type {
	case MkeyErrBadGuard:
		c.Syndrome = SyndromeGuard
	case MkeyErrBadAppTag:
		c.Syndrome = SyndromeAppTag
	case MkeyErrBadRefTag:
		c.Syndrome = SyndromeRefTag
	}
	return c
}

// ErrSigErrCQE is returned by DecodeSigErrCQE for a CQE libmlx5 rejects
// with EINVAL.
var ErrSigErrCQE = errors.New("sig: signature error CQE cannot be decoded")

// DecodeSigErrCQE turns a signature error CQE into what mlx5dv_mkey_check
// returns, for a mkey configured with attr, as libmlx5 does: the reference
// tag syndrome bit wins over the application tag bit, which wins over the
// guard (the reverse of the T10-DIF order in which a device finds them);
// the guard's width follows the domain's signature type; the offset is
// passed through. A transaction (not block) signature type, a domain
// other than wire or memory, a domain attr does not configure and a
// syndrome with none of the three bits give ErrSigErrCQE.
func DecodeSigErrCQE(c SigErrCQE, attr *BlockAttr) (MkeyErr, error) {
	if c.Syndrome&(SyndromeRefTag|SyndromeAppTag|SyndromeGuard) == 0 {
		return MkeyErr{}, fmt.Errorf("%w: syndrome %#x", ErrSigErrCQE, c.Syndrome)
	}
	if c.SigType&7 != SigErrTypeBlock {
		return MkeyErr{}, fmt.Errorf("%w: sig_type %d", ErrSigErrCQE, c.SigType)
	}
	if attr == nil {
		return MkeyErr{}, fmt.Errorf("%w: no block attributes", ErrSigErrCQE)
	}
	var d *Domain
	switch SigDomain(c.Domain & 7) {
	case DomainWire:
		d = attr.Wire
	case DomainMemory:
		d = attr.Mem
	default:
		return MkeyErr{}, fmt.Errorf("%w: domain %d", ErrSigErrCQE, c.Domain)
	}
	if d == nil {
		return MkeyErr{}, fmt.Errorf("%w: domain %s has no signature", ErrSigErrCQE, SigDomain(c.Domain&7))
	}
	exp := uint64(c.ExpectedTransSig)<<32 | uint64(c.ExpectedRefTag)
	act := uint64(c.ActualTransSig)<<32 | uint64(c.ActualRefTag)
	e := MkeyErr{Offset: c.Offset, Domain: SigDomain(c.Domain & 7), expectedSig: exp, actualSig: act}
	switch {
	case c.Syndrome&SyndromeRefTag != 0:
		e.Type, e.Expected, e.Actual = MkeyErrBadRefTag, exp&0xffffffff, act&0xffffffff
	case c.Syndrome&SyndromeAppTag != 0:
		e.Type, e.Expected, e.Actual = MkeyErrBadAppTag, exp>>32&0xffff, act>>32&0xffff
	default:
		e.Type = MkeyErrBadGuard
		switch {
		case d.Type == SigTypeT10DIF:
			e.Expected, e.Actual = exp>>48, act>>48
		case d.CRC != nil && d.CRC.Type == CRCTypeCRC64XP10:
			e.Expected, e.Actual = exp, act
		default:
			e.Expected, e.Actual = exp>>32, act>>32
		}
	}
	return e, nil
}
