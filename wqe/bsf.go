package wqe

import (
	"errors"

	"github.com/mlx5go/mlx5go/sig"
)

// The BSF (byte stream format) segment a signature UMR carries: 16 bytes
// of basic part, 16 of extended part, 16 of wire domain inline part, 16 of
// memory domain inline part. The encodings below are what libmlx5 44.0
// writes for each sig.BlockAttr of the oracle (wqe/testdata); the field
// names are those of the oracle's decoder.

// BSF basic part, byte 0 (bsf_size_sbs).
const (
	bsfSizeInline      = 0x80 // BSF size: basic + extended + both inline parts
	bsfSameBlockStruct = 0x10 // sbs: both domains have the same block structure
)

// bsfRawDataSize is the basic part's raw_data_size: libmlx5 writes all ones.
const bsfRawDataSize = 0xffffffff

// bsSelector is the block size selector of a domain (basic part byte 2 for
// the wire domain, byte 3 for memory), indexed by sig.BlockSize.
var bsSelector = [...]uint8{
	sig.BlockSize512:  1,
	sig.BlockSize520:  2,
	sig.BlockSize4048: 6,
	sig.BlockSize4096: 3,
	sig.BlockSize4160: 4,
}

// crcBFS is the top byte of a CRC domain's bfs_psv word, by sig.CRCType;
// crcBFSSeedZero is or-ed in when the seed is 0. T10-DIF domains have 0.
var crcBFS = [...]uint8{
	sig.CRCTypeCRC32:     0x22,
	sig.CRCTypeCRC32C:    0x42,
	sig.CRCTypeCRC64XP10: 0x52,
}

const crcBFSSeedZero = 0x01

// T10-DIF inline part values.
const (
	difVldRefresh      = 0xc000 // vld_refresh
	difSigTypeCRC      = 0x01   // sig_type: guard is CRC-16/T10-DIF
	difSigTypeCsum     = 0x02   // sig_type: guard is the IP checksum
	difRPInvSeed       = 0x80   // rp_inv_seed: always set
	difSeedFFFF        = 0x08   // rp_inv_seed: the guard's seed is 0xFFFF
	difIncRef          = 0x40   // dif_inc_ref_guard_check: REF_REMAP
	difAppEscape       = 0x01   // dif_inc_ref_guard_check: APP_ESCAPE
	difAppRefEscape    = 0x02   // dif_inc_ref_guard_check: APP_REF_ESCAPE
	difAppBitmaskCheck = 0xffff // dif_app_bitmask_check
)

// ErrPSV is returned when a signature domain has no PSV index, or the
// index does not fit in 24 bits.
var ErrPSV = errors.New("wqe: bad PSV index")

// PutBSF writes the BSF of a into b[:64]: memPSV and wirePSV are the PSV
// indexes of the memory and wire domains (ignored for an absent domain).
// a must be valid (sig.BlockAttr.Validate).
func PutBSF(b []byte, a *sig.BlockAttr, memPSV, wirePSV uint32) error {
	if len(b) < BSFSegSize {
		return ErrShort
	}
	if err := a.Validate(); err != nil {
		return err
	}
	if (a.Mem != nil && memPSV > 0xffffff) || (a.Wire != nil && wirePSV > 0xffffff) {
		return ErrPSV
	}
	putBSF(b, a, memPSV, wirePSV)
	return nil
}

// putBSF is PutBSF for a checked a and b.
func putBSF(b []byte, a *sig.BlockAttr, memPSV, wirePSV uint32) {
	b = b[:BSFSegSize]
	clear(b)
	b[0] = bsfSizeInline
	b[1] = uint8(a.CheckMask) // check_byte_mask
	if a.SameBlockStructure() {
		b[0] |= bsfSameBlockStruct
		b[2] = uint8(a.EffectiveCopyMask()) // copy_byte_mask
	} else if a.Wire != nil {
		b[2] = bsSelector[a.Wire.BlockSize]
	}
	if a.Mem != nil {
		b[3] = bsSelector[a.Mem.BlockSize]
		be.PutUint32(b[12:], bfsPSV(a.Mem, memPSV)) // m_bfs_psv
		putBSFInline(b[48:64], a.Mem)
	}
	be.PutUint32(b[4:], bsfRawDataSize)
	if a.Wire != nil {
		be.PutUint32(b[8:], bfsPSV(a.Wire, wirePSV)) // w_bfs_psv
		putBSFInline(b[32:48], a.Wire)
	}
}

// bfsPSV is a domain's bfs_psv word: the block format selector in the top
// byte, the PSV index below.
func bfsPSV(d *sig.Domain, psv uint32) uint32 {
	var bfs uint8
	if d.Type == sig.SigTypeCRC {
		bfs = crcBFS[d.CRC.Type]
		if d.CRC.Seed == 0 {
			bfs |= crcBFSSeedZero
		}
	}
	return uint32(bfs)<<24 | psv
}

// putBSFInline writes a domain's 16-byte inline part; it stays zero for a
// CRC domain.
func putBSFInline(b []byte, d *sig.Domain) {
	if d.Type != sig.SigTypeT10DIF {
		return
	}
	t := d.T10DIF
	be.PutUint16(b[0:], difVldRefresh)
	be.PutUint16(b[2:], t.AppTag)
	be.PutUint32(b[4:], t.RefTag)
	b[8] = difSigTypeCRC
	if t.Guard == sig.T10DIFGuardCsum {
		b[8] = difSigTypeCsum
	}
	b[9] = difRPInvSeed
	if t.Seed == 0xffff {
		b[9] |= difSeedFFFF
	}
	var f uint8
	if t.Flags&sig.T10DIFRefRemap != 0 {
		f |= difIncRef
	}
	switch {
	case t.Flags&sig.T10DIFAppRefEscape != 0:
		f |= difAppRefEscape
	case t.Flags&sig.T10DIFAppEscape != 0:
		f |= difAppEscape
	}
	b[13] = f
	be.PutUint16(b[14:], difAppBitmaskCheck)
}
