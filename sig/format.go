package sig

import (
	"encoding/binary"

	"github.com/mlx5go/mlx5go/sig/crc"
)

// Signature values are handled as one uint64 in the form of the PSV's
// "transient signature" that libmlx5 writes and the SIG_ERR CQE reports:
//
//	T10-DIF     guard<<48 | app_tag<<32 | ref_tag
//	CRC32(C)    crc<<32
//	CRC64_XP10  crc
//
// so that byte n of the value is the byte that bit n of a Mask selects, and
// the value's big-endian bytes are the signature field as it lies in a
// domain (its first 4 bytes for CRC32 and CRC32C).

// guardKind says how a format computes its guard or CRC.
type guardKind uint8

const (
	guardT10DIFCRC guardKind = iota
	guardT10DIFCsum
	guardCRC32  // CRC32 (IEEE): crc.CRC32
	guardCRC32C // CRC32C (Castagnoli): crc.CRC32C
	guardCRC64
)

// format is one validated domain: its layout and how to compute and read
// its signature. It is immutable after newFormat.
type format struct {
	domain SigDomain
	kind   guardKind
	bs     int // data bytes per block
	pi     int // signature bytes per block
	stride int // bs + pi

	seed16 uint16     // T10-DIF guard seed
	crc32  uint32     // the value to start crc.CRC32(C) from: ^seed
	crc64  *crc.CRC64 // CRC64_XP10 with Init = seed
	// The T10-DIF tags of block k are app | ref + k·refStep; all three
	// are 0 for the CRC formats.
	app       uint64        // the application tag in place: app_tag<<32
	ref       uint32        // the reference tag of block 0
	refStep   uint32        // 1 with REF_REMAP, else 0
	readShift uint          // 64 - 8·pi: see read
	escape    T10DIFFlags   // the escape in force: 0, T10DIFAppEscape or T10DIFAppRefEscape
	valid     uint64        // the bits of the signature value this type has
	guards    uint64        // the bits of the guard or CRC in the value
	params    *crc.Params64 // CRC64 parameters in use (nil unless guardCRC64)
}

// newFormat compiles a domain that Validate accepted.
func newFormat(d *Domain, which SigDomain, crc64 crc.Params64) *format {
	f := &format{domain: which, bs: d.BlockSize.Bytes(), pi: d.piBytes()}
	f.stride = f.bs + f.pi
	f.readShift = uint(64 - 8*f.pi)
	switch d.Type {
	case SigTypeT10DIF:
		dif := d.T10DIF
		f.kind = guardT10DIFCRC
		if dif.Guard == T10DIFGuardCsum {
			f.kind = guardT10DIFCsum
		}
		f.seed16 = dif.Seed
		f.app, f.ref = uint64(dif.AppTag)<<32, dif.RefTag
		if dif.Flags&T10DIFRefRemap != 0 {
			f.refStep = 1
		}
		switch {
		case dif.Flags&T10DIFAppRefEscape != 0:
			f.escape = T10DIFAppRefEscape
		case dif.Flags&T10DIFAppEscape != 0:
			f.escape = T10DIFAppEscape
		}
		f.valid = ^uint64(0)
		f.guards = 0xffff << 48
	case SigTypeCRC:
		switch d.CRC.Type {
		case CRCTypeCRC32, CRCTypeCRC32C:
			f.kind = guardCRC32
			if d.CRC.Type == CRCTypeCRC32C {
				f.kind = guardCRC32C
			}
			// crc.CRC32(C) continue from a final value, the register
			// complemented: the seed is the register.
			f.crc32 = ^uint32(d.CRC.Seed)
			f.valid = 0xffffffff << 32
			f.guards = f.valid
		case CRCTypeCRC64XP10:
			f.kind = guardCRC64
			// The seed is the initial register: 0 or all ones, the same
			// reflected or not.
			p := crc64
			p.Init = d.CRC.Seed
			f.params = &p
			f.crc64 = crc.NewCRC64(p)
			f.valid = ^uint64(0)
			f.guards = f.valid
		}
	}
	return f
}

// guard returns the signature value of data with the tags left zero: the
// guard (T10-DIF) or the CRC in place.
func (f *format) guard(data []byte) uint64 {
	var g [1]uint64
	f.guardBlocks(g[:], data, len(data), len(data))
	return g[0]
}

// guardBlocks sets g[i] to the guard of block i of buf, as guard returns it:
// the blocks have n bytes of data, one every stride bytes. The CRCs take
// all the blocks in one call (crc's Blocks functions).
func (f *format) guardBlocks(g []uint64, buf []byte, n, stride int) {
	shift := 0
	switch f.kind {
	case guardT10DIFCRC:
		crc.T10DIFBlocks(g, f.seed16, buf, n, stride)
		shift = 48
	case guardT10DIFCsum:
		for i := range g {
			g[i] = uint64(ipChecksumSeeded(f.seed16, buf[i*stride:i*stride+n]))
		}
		shift = 48
	case guardCRC32:
		crc.CRC32Blocks(g, f.crc32, buf, n, stride)
		shift = 32
	case guardCRC32C:
		crc.CRC32CBlocks(g, f.crc32, buf, n, stride)
		shift = 32
	default:
		f.crc64.ChecksumBlocks(g, buf, n, stride)
	}
	if shift != 0 {
		for i := range g {
			g[i] <<= shift
		}
	}
}

// tags returns the T10-DIF tags block expects (0 for CRC formats).
func (f *format) tags(block uint64) uint64 {
	return f.app | uint64(f.ref+uint32(block)*f.refStep)
}

// expected returns the signature value of block number block with data.
func (f *format) expected(data []byte, block uint64) uint64 {
	return f.guard(data) | f.tags(block)
}

// checkBlock checks one block against the stored value actual. The guard
// is computed only when mask checks one of its bytes; an error's expected
// signature always has it, as a device reports it.
func (f *format) checkBlock(data []byte, block uint64, actual, mask, offset uint64) MkeyErr {
	if mask&f.guards == 0 {
		me := f.check(f.tags(block), actual, mask, offset)
		if me.OK() {
			return me
		}
	}
	return f.check(f.expected(data, block), actual, mask, offset)
}

// read returns the signature value stored in b just before end, the end of
// a block's signature: the 8 bytes before end, big-endian, shifted so
// that a 4-byte signature lands in the top half (the last data bytes
// shift out).
func (f *format) read(b []byte, end int) uint64 {
	return binary.BigEndian.Uint64(b[end-8:end]) << (f.readShift & 63)
}

// write stores v as the signature that ends in b at end.
func (f *format) write(b []byte, end int, v uint64) {
	if f.pi == 4 {
		binary.BigEndian.PutUint32(b[end-4:end], uint32(v>>32))
		return
	}
	binary.BigEndian.PutUint64(b[end-8:end], v)
}

// writeBlocks stores the signature of each block of blocks (one every
// f.stride bytes) that g holds the guard of: g[i] with the tags of block
// number k+i.
func (f *format) writeBlocks(blocks []byte, g []uint64, k uint64) {
	end := f.stride
	for _, v := range g {
		f.write(blocks, end, v|f.tags(k))
		end += f.stride
		k++
	}
}

// firstBad returns the first block of blocks (one every f.stride bytes)
// whose stored signature differs under mask from the expected one, g[i]
// with the tags of block number k+i, and does not escape the checks; or
// len(g) when every block passes.
func (f *format) firstBad(blocks []byte, g []uint64, k, mask uint64) int {
	end := f.stride
	for i, v := range g {
		act := f.read(blocks, end)
		if exp := v | f.tags(k); (exp^act)&mask != 0 && !f.escaped(act) {
			return i
		}
		end += f.stride
		k++
	}
	return len(g)
}

// escaped reports whether the stored value v escapes the checks.
func (f *format) escaped(v uint64) bool {
	switch f.escape {
	case T10DIFAppEscape:
		return v>>32&0xffff == 0xffff
	case T10DIFAppRefEscape:
		return v>>32&0xffff == 0xffff && uint32(v) == 0xffffffff
	}
	return false
}

// check compares the stored value actual with expected under mask (a
// widened check mask) and returns the error mlx5dv_mkey_check would report
// for a block at offset, or the zero MkeyErr.
func (f *format) check(expected, actual, mask uint64, offset uint64) MkeyErr {
	diff := (expected ^ actual) & mask & f.valid
	if diff == 0 || f.escaped(actual) {
		return MkeyErr{}
	}
	e := MkeyErr{Offset: offset, Domain: f.domain, expectedSig: expected, actualSig: actual}
	switch {
	case f.kind == guardCRC32 || f.kind == guardCRC32C:
		e.Type, e.Expected, e.Actual = MkeyErrBadGuard, expected>>32, actual>>32
	case f.kind == guardCRC64:
		e.Type, e.Expected, e.Actual = MkeyErrBadGuard, expected, actual
	case diff>>48 != 0:
		e.Type, e.Expected, e.Actual = MkeyErrBadGuard, expected>>48, actual>>48
	case diff>>32&0xffff != 0:
		e.Type, e.Expected, e.Actual = MkeyErrBadAppTag, expected>>32&0xffff, actual>>32&0xffff
	default:
		e.Type, e.Expected, e.Actual = MkeyErrBadRefTag, uint64(uint32(expected)), uint64(uint32(actual))
	}
	return e
}

// ipChecksumSeeded is the T10-DIF IP checksum guard with a seed: the
// complement of the ones' complement sum of seed and the data's 16-bit
// words. Seed 0 gives Linux's t10_pi_ip_fn. Seed 0xFFFF (ones' complement
// -0) changes only a sum of +0: the checksum 0xFFFF becomes 0. How the
// device applies the seed to the IP checksum is not documented; this is
// an assumption (docs/SIG.md).
func ipChecksumSeeded(seed uint16, data []byte) uint16 {
	c := crc.IPChecksum(data)
	if seed == 0xffff && c == 0xffff {
		return 0
	}
	return c
}
