package sig

import "fmt"

// SigType is the kind of signature a domain carries (C enum
// mlx5dv_sig_type).
type SigType uint32

// Values of enum mlx5dv_sig_type.
const (
	SigTypeT10DIF SigType = 0 // MLX5DV_SIG_TYPE_T10DIF
	SigTypeCRC    SigType = 1 // MLX5DV_SIG_TYPE_CRC
)

func (t SigType) String() string {
	switch t {
	case SigTypeT10DIF:
		return "T10DIF"
	case SigTypeCRC:
		return "CRC"
	}
	return fmt.Sprintf("SigType(%d)", uint32(t))
}

// T10DIFGuard selects how the T10-DIF guard is computed (C enum
// mlx5dv_sig_t10dif_bg_type).
type T10DIFGuard uint32

// Values of enum mlx5dv_sig_t10dif_bg_type.
const (
	T10DIFGuardCRC  T10DIFGuard = 0 // MLX5DV_SIG_T10DIF_CRC: CRC-16/T10-DIF
	T10DIFGuardCsum T10DIFGuard = 1 // MLX5DV_SIG_T10DIF_CSUM: IP checksum
)

func (g T10DIFGuard) String() string {
	switch g {
	case T10DIFGuardCRC:
		return "CRC"
	case T10DIFGuardCsum:
		return "CSUM"
	}
	return fmt.Sprintf("T10DIFGuard(%d)", uint32(g))
}

// T10DIFFlags are the flags of a T10-DIF domain (C enum
// mlx5dv_sig_t10dif_flags).
type T10DIFFlags uint16

// Values of enum mlx5dv_sig_t10dif_flags.
const (
	// T10DIFRefRemap (MLX5DV_SIG_T10DIF_FLAG_REF_REMAP) increments the
	// reference tag by one per block.
	T10DIFRefRemap T10DIFFlags = 1 << 0
	// T10DIFAppEscape (MLX5DV_SIG_T10DIF_FLAG_APP_ESCAPE) skips the checks
	// of a block whose application tag is 0xFFFF.
	T10DIFAppEscape T10DIFFlags = 1 << 1
	// T10DIFAppRefEscape (MLX5DV_SIG_T10DIF_FLAG_APP_REF_ESCAPE) skips the
	// checks of a block whose application tag is 0xFFFF and reference tag
	// 0xFFFFFFFF. With both escape flags set this one wins, as in libmlx5.
	T10DIFAppRefEscape T10DIFFlags = 1 << 2

	t10difFlagsAll = T10DIFRefRemap | T10DIFAppEscape | T10DIFAppRefEscape
)

// CRCType is the CRC of a CRC domain (C enum mlx5dv_sig_crc_type).
type CRCType uint32

// Values of enum mlx5dv_sig_crc_type.
const (
	CRCTypeCRC32     CRCType = 0 // MLX5DV_SIG_CRC_TYPE_CRC32 (FC-PH, the IEEE polynomial)
	CRCTypeCRC32C    CRCType = 1 // MLX5DV_SIG_CRC_TYPE_CRC32C (Castagnoli, RFC 3720)
	CRCTypeCRC64XP10 CRCType = 2 // MLX5DV_SIG_CRC_TYPE_CRC64_XP10 (parameters unverified, see Candidates)
)

func (t CRCType) String() string {
	switch t {
	case CRCTypeCRC32:
		return "CRC32"
	case CRCTypeCRC32C:
		return "CRC32C"
	case CRCTypeCRC64XP10:
		return "CRC64_XP10"
	}
	return fmt.Sprintf("CRCType(%d)", uint32(t))
}

// BlockSize is the size of the data part of a protected block (C enum
// mlx5dv_block_size). The values are the enum's, not byte counts; Bytes
// gives the count.
type BlockSize uint32

// Values of enum mlx5dv_block_size.
const (
	BlockSize512  BlockSize = 0 // MLX5DV_BLOCK_SIZE_512
	BlockSize520  BlockSize = 1 // MLX5DV_BLOCK_SIZE_520
	BlockSize4048 BlockSize = 2 // MLX5DV_BLOCK_SIZE_4048
	BlockSize4096 BlockSize = 3 // MLX5DV_BLOCK_SIZE_4096
	BlockSize4160 BlockSize = 4 // MLX5DV_BLOCK_SIZE_4160
)

// blockBytes maps each BlockSize to its byte count.
var blockBytes = [...]int{
	BlockSize512:  512,
	BlockSize520:  520,
	BlockSize4048: 4048,
	BlockSize4096: 4096,
	BlockSize4160: 4160,
}

// Bytes returns the number of data bytes in a block, or 0 if b is not one
// of the enum's values.
func (b BlockSize) Bytes() int {
	if uint64(b) >= uint64(len(blockBytes)) {
		return 0
	}
	return blockBytes[b]
}

func (b BlockSize) String() string {
	if n := b.Bytes(); n != 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("BlockSize(%d)", uint32(b))
}

// Mask selects bytes of a signature field, one bit per byte (the
// check_mask and copy_mask of struct mlx5dv_sig_block_attr). Bit 7 is the
// first byte of the field as it is laid out in a domain, bit 0 the eighth:
//
//	bit      7        6        5      4      3      2      1      0
//	T10-DIF  GUARD[1] GUARD[0] APP[1] APP[0] REF[3] REF[2] REF[1] REF[0]
//	CRC32(C) byte 3   byte 2   byte 1 byte 0
//	CRC64    byte 7   byte 6   byte 5 byte 4 byte 3 byte 2 byte 1 byte 0
//
// where byte n of a field is its n-th least significant byte (the fields
// are big-endian, so GUARD[1] comes first). Bits that the signature type
// has no byte for are ignored. Any value is a valid custom mask; the
// predefined ones are those of enum mlx5dv_sig_mask.
type Mask uint8

// Values of enum mlx5dv_sig_mask.
const (
	MaskT10DIFGuard  Mask = 0xc0 // MLX5DV_SIG_MASK_T10DIF_GUARD
	MaskT10DIFAppTag Mask = 0x30 // MLX5DV_SIG_MASK_T10DIF_APPTAG
	MaskT10DIFRefTag Mask = 0x0f // MLX5DV_SIG_MASK_T10DIF_REFTAG
	MaskCRC32        Mask = 0xf0 // MLX5DV_SIG_MASK_CRC32
	MaskCRC32C       Mask = 0xf0 // MLX5DV_SIG_MASK_CRC32C (= MaskCRC32)
	MaskCRC64XP10    Mask = 0xff // MLX5DV_SIG_MASK_CRC64_XP10
)

// bytes64 widens m to a mask over the 64-bit signature value: bit n of m
// becomes byte n (0xff << 8n).
func (m Mask) bytes64() uint64 {
	var w uint64
	for n := range 8 {
		if m&(1<<n) != 0 {
			w |= 0xff << (8 * n)
		}
	}
	return w
}

// BlockAttrFlags are the flags of a BlockAttr (C enum
// mlx5dv_sig_block_attr_flags).
type BlockAttrFlags uint32

// Values of enum mlx5dv_sig_block_attr_flags.
const (
	// BlockAttrCopyMask (MLX5DV_SIG_BLOCK_ATTR_FLAG_COPY_MASK) makes
	// BlockAttr.CopyMask override the copy mask computed from the domains.
	BlockAttrCopyMask BlockAttrFlags = 1 << 0

	blockAttrFlagsAll = BlockAttrCopyMask
)

// T10DIF is a T10-DIF signature (C struct mlx5dv_sig_t10dif): an 8-byte
// tuple after each block, the guard (2 bytes), the application tag (2)
// and the reference tag (4), all big-endian.
type T10DIF struct {
	Guard  T10DIFGuard // bg_type
	Seed   uint16      // bg: the guard's seed, 0 or 0xFFFF
	AppTag uint16      // app_tag
	RefTag uint32      // ref_tag: the tag of the first block of a transfer
	Flags  T10DIFFlags // flags
}

// CRC is a CRC signature (C struct mlx5dv_sig_crc): a 4-byte (CRC32,
// CRC32C) or 8-byte (CRC64_XP10) big-endian CRC after each block.
type CRC struct {
	Type CRCType // type
	// Seed is the CRC's initial value per block (seed): 0 or all ones,
	// that is 0xFFFFFFFF for CRC32 and CRC32C and 0xFFFFFFFFFFFFFFFF for
	// CRC64_XP10.
	Seed uint64
}

// Domain is the signature of one domain, memory or wire (C struct
// mlx5dv_sig_block_domain). Type selects which of T10DIF and CRC (the C
// union sig) is used; exactly that one must be set.
type Domain struct {
	Type      SigType   // sig_type
	T10DIF    *T10DIF   // sig.dif, when Type is SigTypeT10DIF
	CRC       *CRC      // sig.crc, when Type is SigTypeCRC
	BlockSize BlockSize // block_size
	CompMask  uint64    // comp_mask: reserved, must be 0
}

// piBytes returns the size of the signature field after each block.
func (d *Domain) piBytes() int {
	if d.Type == SigTypeCRC && d.CRC != nil && d.CRC.Type != CRCTypeCRC64XP10 {
		return 4
	}
	return 8
}

// BlockAttr is the block signature configuration of a signature mkey (C
// struct mlx5dv_sig_block_attr, the argument of
// mlx5dv_wr_set_mkey_sig_block). A nil domain carries no signature: its
// data is plain, without protection information. At least one domain must
// be set.
type BlockAttr struct {
	Mem  *Domain // mem: the memory domain
	Wire *Domain // wire: the wire domain
	// Flags (flags): BlockAttrCopyMask or 0.
	Flags BlockAttrFlags
	// CheckMask (check_mask) selects the bytes of the input domain's
	// signature that are checked.
	CheckMask Mask
	// CopyMask (copy_mask) selects the bytes of the signature copied from
	// the input domain to the output domain instead of being computed. It
	// is used only with BlockAttrCopyMask, and only when both domains have
	// the same structure.
	CopyMask Mask
	CompMask uint64 // comp_mask: reserved, must be 0
}

// hasStructure reports whether d has a block structure: it is present,
// its block size, signature type and (for CRC) CRC type are known, and the
// parameters of its type are set.
func (d *Domain) hasStructure() bool {
	switch {
	case d == nil || d.BlockSize.Bytes() == 0:
		return false
	case d.Type == SigTypeT10DIF:
		return d.T10DIF != nil
	case d.Type == SigTypeCRC:
		return d.CRC != nil && d.CRC.Type <= CRCTypeCRC64XP10
	}
	return false
}

// sameStructure reports whether mem and wire have the same block structure
// in libmlx5's sense (its "same block structure", which the copy mask
// needs): both present, the same signature type and block size and, for
// CRC, the same CRC type. A domain without a block structure
// (hasStructure) has the same structure as none. It also returns the copy
// mask libmlx5 computes when BlockAttrCopyMask is not set.
func sameStructure(mem, wire *Domain) (Mask, bool) {
	if !mem.hasStructure() || !wire.hasStructure() || mem.Type != wire.Type || mem.BlockSize != wire.BlockSize {
		return 0, false
	}
	if mem.Type == SigTypeCRC {
		if mem.CRC.Type != wire.CRC.Type {
			return 0, false
		}
		if mem.CRC.Type == CRCTypeCRC64XP10 {
			return MaskCRC64XP10, true
		}
		return MaskCRC32, true
	}
	m, w := mem.T10DIF, wire.T10DIF
	var copyMask Mask
	if m.Guard == w.Guard && m.Seed == w.Seed {
		copyMask |= MaskT10DIFGuard
	}
	if m.AppTag == w.AppTag {
		copyMask |= MaskT10DIFAppTag
	}
	if m.RefTag == w.RefTag {
		copyMask |= MaskT10DIFRefTag
	}
	return copyMask, true
}

// SameBlockStructure reports whether a's domains have the same block
// structure (libmlx5's "same block structure", the BSF's SBS bit): both
// present, with the same signature type and block size and, for CRC, the
// same CRC type. It is false for a nil a and when either domain has an
// unknown block size, signature type or CRC type, or lacks the parameters
// of its type (T10DIF or CRC nil): such a domain has no block structure,
// and Validate rejects it.
func (a *BlockAttr) SameBlockStructure() bool {
	if a == nil {
		return false
	}
	_, same := sameStructure(a.Mem, a.Wire)
	return same
}

// EffectiveCopyMask returns the copy mask a device applies for a:
// CopyMask with BlockAttrCopyMask, otherwise the mask libmlx5 computes (for
// T10-DIF the guard when guard type and seed agree, the application tag
// when the tags agree, the reference tag when the initial tags agree; for
// CRC the whole CRC; 0 when the domains differ in structure). It is 0 for
// an a that Validate rejects.
func (a *BlockAttr) EffectiveCopyMask() Mask {
	if a.Validate() != nil {
		return 0
	}
	m, same := sameStructure(a.Mem, a.Wire)
	if !same {
		return 0
	}
	if a.Flags&BlockAttrCopyMask != 0 {
		return a.CopyMask
	}
	return m
}

// TransientSignature returns the initial signature value libmlx5 loads
// into the domain's PSV (the SET_PSV work request after the UMR), in the
// form of SigErrCQE's signatures: seed<<48 | app_tag<<32 | ref_tag for
// T10-DIF, seed<<32 for CRC32 and CRC32C, the seed for CRC64_XP10. It is 0
// for a domain without the parameters of its type.
func (d *Domain) TransientSignature() uint64 {
	switch {
	case d == nil:
		return 0
	case d.Type == SigTypeT10DIF && d.T10DIF != nil:
		t := d.T10DIF
		return uint64(t.Seed)<<48 | uint64(t.AppTag)<<32 | uint64(t.RefTag)
	case d.Type == SigTypeCRC && d.CRC != nil && d.CRC.Type == CRCTypeCRC64XP10:
		return d.CRC.Seed
	case d.Type == SigTypeCRC && d.CRC != nil:
		return d.CRC.Seed << 32
	}
	return 0
}
