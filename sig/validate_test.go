package sig

import (
	"errors"
	"testing"
)

func t10difDomain(bs BlockSize) *Domain {
	return &Domain{Type: SigTypeT10DIF, BlockSize: bs,
		T10DIF: &T10DIF{Guard: T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x1234, RefTag: 0x5678, Flags: T10DIFRefRemap}}
}

func crcDomain(typ CRCType, seed uint64, bs BlockSize) *Domain {
	return &Domain{Type: SigTypeCRC, BlockSize: bs, CRC: &CRC{Type: typ, Seed: seed}}
}

// TestValidateRules has one row per rule of mlx5dv_wr_set_mkey_sig_block(3)
// and libmlx5's checks: each row breaks exactly one rule of a valid
// configuration.
func TestValidateRules(t *testing.T) {
	valid := func() *BlockAttr {
		return &BlockAttr{Mem: t10difDomain(BlockSize512), Wire: t10difDomain(BlockSize512), CheckMask: 0xff}
	}
	tests := []struct {
		name  string
		edit  func(a *BlockAttr)
		rule  error
		field string
	}{
		{"no domain", func(a *BlockAttr) { a.Mem, a.Wire = nil, nil }, ErrNoDomain, "mem, wire"},
		{"unknown attr flag", func(a *BlockAttr) { a.Flags = 2 }, ErrAttrFlags, "flags"},
		{"attr comp_mask", func(a *BlockAttr) { a.CompMask = 1 }, ErrCompMask, "comp_mask"},
		{"domain comp_mask", func(a *BlockAttr) { a.Wire.CompMask = 1 << 63 }, ErrCompMask, "wire.comp_mask"},
		{"unknown block size", func(a *BlockAttr) { a.Mem.BlockSize = 5 }, ErrBlockSize, "mem.block_size"},
		{"block size as bytes", func(a *BlockAttr) { a.Mem.BlockSize = 512 }, ErrBlockSize, "mem.block_size"},
		{"unknown sig type", func(a *BlockAttr) { a.Mem.Type = 2 }, ErrSigType, "mem.sig_type"},
		{"T10-DIF without parameters", func(a *BlockAttr) { a.Mem.T10DIF = nil }, ErrSigParams, "mem.sig"},
		{"T10-DIF with CRC parameters too", func(a *BlockAttr) { a.Mem.CRC = &CRC{} }, ErrSigParams, "mem.sig"},
		{"CRC without parameters", func(a *BlockAttr) { a.Wire = &Domain{Type: SigTypeCRC, BlockSize: BlockSize512} }, ErrSigParams, "wire.sig"},
		{"unknown guard type", func(a *BlockAttr) { a.Mem.T10DIF.Guard = 2 }, ErrT10DIFGuard, "mem.t10dif.bg_type"},
		{"bg seed 0x1234", func(a *BlockAttr) { a.Mem.T10DIF.Seed = 0x1234 }, ErrT10DIFSeed, "mem.t10dif.bg"},
		{"bg seed 1", func(a *BlockAttr) { a.Wire.T10DIF.Seed = 1 }, ErrT10DIFSeed, "wire.t10dif.bg"},
		{"unknown T10-DIF flag", func(a *BlockAttr) { a.Mem.T10DIF.Flags = 1 << 3 }, ErrT10DIFFlags, "mem.t10dif.flags"},
		{"unknown CRC type", func(a *BlockAttr) { a.Mem = crcDomain(3, 0, BlockSize512) }, ErrCRCType, "mem.crc.type"},
		{"CRC32 seed 1", func(a *BlockAttr) { a.Mem = crcDomain(CRCTypeCRC32, 1, BlockSize512) }, ErrCRCSeed, "mem.crc.seed"},
		{"CRC32C seed 64-bit all ones", func(a *BlockAttr) { a.Mem = crcDomain(CRCTypeCRC32C, ^uint64(0), BlockSize512) }, ErrCRCSeed, "mem.crc.seed"},
		{"CRC64 seed 32-bit all ones", func(a *BlockAttr) { a.Wire = crcDomain(CRCTypeCRC64XP10, 0xffffffff, BlockSize512) }, ErrCRCSeed, "wire.crc.seed"},
		{"copy mask, different block sizes", func(a *BlockAttr) { a.Flags = BlockAttrCopyMask; a.Wire.BlockSize = BlockSize520 }, ErrCopyMask, "flags"},
		{"copy mask, different sig types", func(a *BlockAttr) {
			a.Flags = BlockAttrCopyMask
			a.Wire = crcDomain(CRCTypeCRC32, 0, BlockSize512)
		}, ErrCopyMask, "flags"},
		{"copy mask, different CRC types", func(a *BlockAttr) {
			a.Flags = BlockAttrCopyMask
			a.Mem = crcDomain(CRCTypeCRC32C, 0, BlockSize512)
			a.Wire = crcDomain(CRCTypeCRC32, 0, BlockSize512)
		}, ErrCopyMask, "flags"},
		{"copy mask, no memory domain", func(a *BlockAttr) { a.Flags = BlockAttrCopyMask; a.Mem = nil }, ErrCopyMask, "flags"},
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("base configuration: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := valid()
			tt.edit(a)
			err := a.Validate()
			if !errors.Is(err, tt.rule) || !errors.Is(err, ErrInvalidAttr) {
				t.Fatalf("Validate = %v, want %v and ErrInvalidAttr", err, tt.rule)
			}
			var ae *AttrError
			if !errors.As(err, &ae) || ae.Field != tt.field {
				t.Fatalf("Validate = %#v, want an *AttrError for %q", err, tt.field)
			}
			if _, err := NewEngine(a); !errors.Is(err, tt.rule) {
				t.Fatalf("NewEngine = %v, want %v", err, tt.rule)
			}
		})
	}
}

// TestValidateAccepts covers what the rules allow: every block size with
// every signature type, each seed, every flag combination, custom masks,
// either domain alone, the copy mask on same-structure domains whose
// parameters differ, and the copy-mask flag without a wire domain (libmlx5
// does not look at it then).
func TestValidateAccepts(t *testing.T) {
	var attrs []*BlockAttr
	for bs := BlockSize512; bs <= BlockSize4160; bs++ {
		for _, seed := range []uint16{0, 0xffff} {
			for _, g := range []T10DIFGuard{T10DIFGuardCRC, T10DIFGuardCsum} {
				for fl := T10DIFFlags(0); fl <= t10difFlagsAll; fl++ {
					d := &Domain{Type: SigTypeT10DIF, BlockSize: bs, T10DIF: &T10DIF{Guard: g, Seed: seed, Flags: fl}}
					attrs = append(attrs, &BlockAttr{Mem: d}, &BlockAttr{Wire: d, CheckMask: 0x5a})
				}
			}
		}
		for _, c := range []struct {
			typ  CRCType
			seed uint64
		}{{CRCTypeCRC32, 0}, {CRCTypeCRC32, 0xffffffff}, {CRCTypeCRC32C, 0}, {CRCTypeCRC32C, 0xffffffff}, {CRCTypeCRC64XP10, 0}, {CRCTypeCRC64XP10, ^uint64(0)}} {
			d := crcDomain(c.typ, c.seed, bs)
			attrs = append(attrs, &BlockAttr{Mem: d, Wire: d, Flags: BlockAttrCopyMask, CopyMask: 0x81, CheckMask: 0x81})
		}
	}
	m, w := t10difDomain(BlockSize4096), t10difDomain(BlockSize4096)
	w.T10DIF = &T10DIF{Guard: T10DIFGuardCsum, Seed: 0, AppTag: 1, RefTag: 2}
	attrs = append(attrs,
		&BlockAttr{Mem: m, Wire: w, Flags: BlockAttrCopyMask, CopyMask: MaskT10DIFAppTag},
		&BlockAttr{Mem: m, Flags: BlockAttrCopyMask, CopyMask: 0xff},
		&BlockAttr{Mem: crcDomain(CRCTypeCRC32, 0, BlockSize512), Wire: crcDomain(CRCTypeCRC32, 0xffffffff, BlockSize512), Flags: BlockAttrCopyMask},
	)
	for _, a := range attrs {
		if err := a.Validate(); err != nil {
			t.Errorf("%+v: %v", a, err)
		}
	}
}

// T10-DIF needs a block size that is a multiple of 8. Every size the enum
// has is one, so Validate can only break this rule if a size is added to
// the table; this test is what catches that.
func TestBlockSizesMultipleOf8(t *testing.T) {
	want := map[BlockSize]int{BlockSize512: 512, BlockSize520: 520, BlockSize4048: 4048, BlockSize4096: 4096, BlockSize4160: 4160}
	for bs := BlockSize(0); bs < 16; bs++ {
		n := bs.Bytes()
		if n != want[bs] {
			t.Errorf("%d.Bytes() = %d, want %d", bs, n, want[bs])
		}
		if n%8 != 0 {
			t.Errorf("block size %d is not a multiple of 8", n)
		}
	}
}

func TestValidateCaps(t *testing.T) {
	// The oracle's fake ConnectX-6 reports block_size 0x1f, block_prot
	// T10DIF|CRC, t10dif_bg CRC|CSUM, crc_type CRC32|CRC32C|CRC64_XP10.
	all := Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 3, CRCType: 7}
	tests := []struct {
		name  string
		attr  *BlockAttr
		caps  Caps
		field string // "" means accepted
	}{
		{"everything supported", &BlockAttr{Mem: t10difDomain(BlockSize4048), Wire: crcDomain(CRCTypeCRC64XP10, 0, BlockSize512)}, all, ""},
		{"no 4048", &BlockAttr{Mem: t10difDomain(BlockSize4048)}, Caps{BlockSize: 0x1b, BlockProt: 3, T10DIFBG: 3, CRCType: 7}, "mem.block_size"},
		{"no CRC protection", &BlockAttr{Wire: crcDomain(CRCTypeCRC32, 0, BlockSize512)}, Caps{BlockSize: 0x1f, BlockProt: 1, T10DIFBG: 3, CRCType: 7}, "wire.sig_type"},
		{"no IP checksum", &BlockAttr{Wire: &Domain{Type: SigTypeT10DIF, T10DIF: &T10DIF{Guard: T10DIFGuardCsum}}}, Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 1, CRCType: 7}, "wire.t10dif.bg_type"},
		{"no CRC64_XP10", &BlockAttr{Mem: crcDomain(CRCTypeCRC64XP10, 0, BlockSize512)}, Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 3, CRCType: 3}, "mem.crc.type"},
	}
	for _, tt := range tests {
		err := tt.attr.ValidateCaps(tt.caps)
		if tt.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		var ae *AttrError
		if !errors.Is(err, ErrUnsupported) || errors.Is(err, ErrInvalidAttr) || !errors.As(err, &ae) || ae.Field != tt.field {
			t.Errorf("%s: ValidateCaps = %v, want ErrUnsupported for %s", tt.name, err, tt.field)
		}
	}
	if err := (&BlockAttr{}).ValidateCaps(all); !errors.Is(err, ErrNoDomain) {
		t.Errorf("ValidateCaps of an invalid attr = %v, want ErrNoDomain", err)
	}
}

// TestNoPanicOnBadInput: the helpers that read a configuration return a
// zero value for one Validate rejects, instead of dereferencing what is
// missing.
func TestNoPanicOnBadInput(t *testing.T) {
	incomplete := &Domain{Type: SigTypeT10DIF, BlockSize: BlockSize512}
	bad := &BlockAttr{Mem: incomplete, Wire: t10difDomain(BlockSize512), Flags: BlockAttrCopyMask, CopyMask: 0xff}
	if m := bad.EffectiveCopyMask(); m != 0 {
		t.Errorf("EffectiveCopyMask of an invalid attr = %#x", m)
	}
	var none *BlockAttr
	if m := none.EffectiveCopyMask(); m != 0 {
		t.Errorf("EffectiveCopyMask of nil = %#x", m)
	}
	for _, d := range []*Domain{nil, incomplete, {Type: SigTypeCRC}, {Type: 7, CRC: &CRC{Seed: 1}}} {
		if v := d.TransientSignature(); v != 0 {
			t.Errorf("TransientSignature(%+v) = %#x", d, v)
		}
	}
	if _, err := NewEngine(bad); !errors.Is(err, ErrSigParams) {
		t.Errorf("NewEngine = %v", err)
	}
}
