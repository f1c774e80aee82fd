package sig

import (
	"errors"
	"fmt"
)

// ErrInvalidAttr is matched (errors.Is) by every error Validate returns.
// libmlx5 rejects the same configurations with EINVAL when the work request
// chain is completed.
var ErrInvalidAttr = errors.New("invalid block signature attributes")

// The rules Validate checks. An *AttrError matches (errors.Is) the rule it
// broke and ErrInvalidAttr.
var (
	ErrNoDomain        = errors.New("neither memory nor wire domain is set")
	ErrAttrFlags       = errors.New("unknown block attribute flags")
	ErrCompMask        = errors.New("reserved comp_mask is not zero")
	ErrBlockSize       = errors.New("unknown block size")
	ErrSigType         = errors.New("unknown signature type")
	ErrSigParams       = errors.New("signature parameters do not match the signature type")
	ErrT10DIFGuard     = errors.New("unknown T10-DIF guard type")
	ErrT10DIFSeed      = errors.New("T10-DIF guard seed is neither 0 nor 0xFFFF")
	ErrT10DIFFlags     = errors.New("unknown T10-DIF flags")
	ErrT10DIFBlockSize = errors.New("T10-DIF block size is not a multiple of 8")
	ErrCRCType         = errors.New("unknown CRC type")
	ErrCRCSeed         = errors.New("CRC seed is neither 0 nor all ones")
	ErrCopyMask        = errors.New("copy mask set but the domains differ in structure")
)

// AttrError says which rule a BlockAttr broke and where.
type AttrError struct {
	Field string // the offending field by its C name, e.g. "mem.t10dif.bg"
	Value uint64 // its value
	Rule  error  // one of the Err* rule variables
}

func (e *AttrError) Error() string {
	return fmt.Sprintf("sig: %s = %#x: %v", e.Field, e.Value, e.Rule)
}

// Unwrap returns the rule and, unless the rule is ErrUnsupported,
// ErrInvalidAttr.
func (e *AttrError) Unwrap() []error {
	if e.Rule == ErrUnsupported {
		return []error{e.Rule}
	}
	return []error{e.Rule, ErrInvalidAttr}
}

func attrErr(field string, value uint64, rule error) error {
	return &AttrError{Field: field, Value: value, Rule: rule}
}

// Validate checks a against the rules of mlx5dv_wr_set_mkey_sig_block(3)
// as libmlx5 enforces them, and returns an *AttrError for the first rule
// broken:
//
//   - at least one domain; flags only BlockAttrCopyMask; comp_mask 0;
//   - per domain: a known block size and signature type, comp_mask 0, the
//     parameters of its type set (and only those);
//   - T10-DIF: guard CRC or CSUM, seed 0 or 0xFFFF, flags only REF_REMAP,
//     APP_ESCAPE, APP_REF_ESCAPE, a block size that is a multiple of 8
//     (all of enum mlx5dv_block_size are);
//   - CRC: type CRC32, CRC32C or CRC64_XP10; seed 0 or 0xFFFFFFFF for the
//     32-bit CRCs, 0 or 0xFFFFFFFFFFFFFFFF for CRC64_XP10;
//   - BlockAttrCopyMask only when both domains have the same structure
//     (same signature type and block size, and CRC type for CRC). As in
//     libmlx5, the flag is not checked when the wire domain is absent.
//
// check_mask and copy_mask take any value (custom masks). Validate does
// not check device capabilities; see ValidateCaps.
func (a *BlockAttr) Validate() error {
	if a == nil || a.Mem == nil && a.Wire == nil {
		return attrErr("mem, wire", 0, ErrNoDomain)
	}
	if a.Flags&^blockAttrFlagsAll != 0 {
		return attrErr("flags", uint64(a.Flags), ErrAttrFlags)
	}
	if a.CompMask != 0 {
		return attrErr("comp_mask", a.CompMask, ErrCompMask)
	}
	if a.Mem != nil {
		if err := a.Mem.validate("mem"); err != nil {
			return err
		}
	}
	if a.Wire != nil {
		if err := a.Wire.validate("wire"); err != nil {
			return err
		}
		if a.Flags&BlockAttrCopyMask != 0 {
			if _, same := sameStructure(a.Mem, a.Wire); !same {
				return attrErr("flags", uint64(a.Flags), ErrCopyMask)
			}
		}
	}
	return nil
}

func (d *Domain) validate(name string) error {
	bs := d.BlockSize.Bytes()
	if bs == 0 {
		return attrErr(name+".block_size", uint64(d.BlockSize), ErrBlockSize)
	}
	if d.CompMask != 0 {
		return attrErr(name+".comp_mask", d.CompMask, ErrCompMask)
	}
	switch d.Type {
	case SigTypeT10DIF:
		if d.T10DIF == nil || d.CRC != nil {
			return attrErr(name+".sig", uint64(d.Type), ErrSigParams)
		}
		dif := d.T10DIF
		if dif.Guard != T10DIFGuardCRC && dif.Guard != T10DIFGuardCsum {
			return attrErr(name+".t10dif.bg_type", uint64(dif.Guard), ErrT10DIFGuard)
		}
		if dif.Seed != 0 && dif.Seed != 0xffff {
			return attrErr(name+".t10dif.bg", uint64(dif.Seed), ErrT10DIFSeed)
		}
		if dif.Flags&^t10difFlagsAll != 0 {
			return attrErr(name+".t10dif.flags", uint64(dif.Flags), ErrT10DIFFlags)
		}
		if bs%8 != 0 {
			return attrErr(name+".block_size", uint64(d.BlockSize), ErrT10DIFBlockSize)
		}
	case SigTypeCRC:
		if d.CRC == nil || d.T10DIF != nil {
			return attrErr(name+".sig", uint64(d.Type), ErrSigParams)
		}
		c := d.CRC
		switch c.Type {
		case CRCTypeCRC32, CRCTypeCRC32C:
			if c.Seed != 0 && c.Seed != 0xffffffff {
				return attrErr(name+".crc.seed", c.Seed, ErrCRCSeed)
			}
		case CRCTypeCRC64XP10:
			if c.Seed != 0 && c.Seed != ^uint64(0) {
				return attrErr(name+".crc.seed", c.Seed, ErrCRCSeed)
			}
		default:
			return attrErr(name+".crc.type", uint64(c.Type), ErrCRCType)
		}
	default:
		return attrErr(name+".sig_type", uint64(d.Type), ErrSigType)
	}
	return nil
}

// Caps are a device's block signature capabilities (C struct
// mlx5dv_sig_caps, from mlx5dv_query_device), each a bit set indexed by the
// enum it belongs to.
type Caps struct {
	BlockSize uint64 // block_size: bit 1<<BlockSize (enum mlx5dv_block_size_caps)
	BlockProt uint32 // block_prot: bit 1<<SigType (enum mlx5dv_sig_prot_caps)
	T10DIFBG  uint16 // t10dif_bg: bit 1<<T10DIFGuard (enum mlx5dv_sig_t10dif_bg_caps)
	CRCType   uint16 // crc_type: bit 1<<CRCType (enum mlx5dv_sig_crc_type_caps)
}

// ErrUnsupported is matched by the errors ValidateCaps returns.
var ErrUnsupported = errors.New("not supported by the device")

// ValidateCaps validates a and then checks that the device whose
// capabilities are c supports each domain's block size, signature type,
// T10-DIF guard type and CRC type (Caps.Supports).
func (a *BlockAttr) ValidateCaps(c Caps) error {
	if err := a.Validate(); err != nil {
		return err
	}
	return c.Supports(a)
}
