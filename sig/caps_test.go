package sig

import (
	"errors"
	"testing"
)

// allCaps is what libmlx5 reports for a device with every signature cap
// (the oracle's fake ConnectX-6: sig_caps 0x1f, 3, 3, 7).
var allCaps = Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 3, CRCType: 7}

// Each predicate reads its own bit of its own field, indexed by the enum.
func TestCapsPredicates(t *testing.T) {
	for b := BlockSize512; b <= BlockSize4160+1; b++ {
		c := Caps{BlockSize: 1 << b}
		for o := BlockSize512; o <= BlockSize4160+1; o++ {
			if got := c.HasBlockSize(o); got != (o == b) {
				t.Errorf("block_size %#x: HasBlockSize(%v) = %v", c.BlockSize, o, got)
			}
		}
	}
	for _, ty := range []SigType{SigTypeT10DIF, SigTypeCRC} {
		c := Caps{BlockProt: 1 << ty}
		if !c.HasSigType(ty) || c.HasSigType(1-ty) || c.HasSigType(2) {
			t.Errorf("block_prot %#x: HasSigType wrong", c.BlockProt)
		}
	}
	for _, g := range []T10DIFGuard{T10DIFGuardCRC, T10DIFGuardCsum} {
		c := Caps{T10DIFBG: 1 << g}
		if !c.HasT10DIFGuard(g) || c.HasT10DIFGuard(1-g) || c.HasT10DIFGuard(2) {
			t.Errorf("t10dif_bg %#x: HasT10DIFGuard wrong", c.T10DIFBG)
		}
	}
	for _, ty := range []CRCType{CRCTypeCRC32, CRCTypeCRC32C, CRCTypeCRC64XP10} {
		c := Caps{CRCType: 1 << ty}
		for _, o := range []CRCType{CRCTypeCRC32, CRCTypeCRC32C, CRCTypeCRC64XP10, 3} {
			if got := c.HasCRCType(o); got != (o == ty) {
				t.Errorf("crc_type %#x: HasCRCType(%v) = %v", c.CRCType, o, got)
			}
		}
	}
	// Values far outside the enums are not supported (and do not panic).
	if allCaps.HasBlockSize(1<<31) || allCaps.HasSigType(64) || allCaps.HasT10DIFGuard(1000) || allCaps.HasCRCType(16) {
		t.Error("a value outside its enum is supported")
	}
	if (Caps{}).Offload() || !(Caps{BlockProt: 1}).Offload() || (Caps{BlockSize: 0x1f, T10DIFBG: 3, CRCType: 7}).Offload() {
		t.Error("Offload does not follow block_prot")
	}
}

// The storage engineer's questions: one capability missing answers no.
func TestCapsSupportsT10DIFAndCRC(t *testing.T) {
	if !allCaps.SupportsT10DIF(T10DIFGuardCRC, BlockSize4096) || !allCaps.SupportsCRC(CRCTypeCRC64XP10, BlockSize4048) {
		t.Fatal("a device with every cap refuses")
	}
	no := func(f func(*Caps)) Caps { c := allCaps; f(&c); return c }
	for name, c := range map[string]Caps{
		"no T10-DIF":   no(func(c *Caps) { c.BlockProt = 1 << SigTypeCRC }),
		"no CRC guard": no(func(c *Caps) { c.T10DIFBG = 1 << T10DIFGuardCsum }),
		"no 4096":      no(func(c *Caps) { c.BlockSize &^= 1 << BlockSize4096 }),
	} {
		if c.SupportsT10DIF(T10DIFGuardCRC, BlockSize4096) {
			t.Errorf("%s: T10-DIF with a CRC guard on 4096-byte blocks supported", name)
		}
	}
	for name, c := range map[string]Caps{
		"no CRC":        no(func(c *Caps) { c.BlockProt = 1 << SigTypeT10DIF }),
		"no CRC64_XP10": no(func(c *Caps) { c.CRCType = 3 }),
		"no 4096":       no(func(c *Caps) { c.BlockSize &^= 1 << BlockSize4096 }),
	} {
		if c.SupportsCRC(CRCTypeCRC64XP10, BlockSize4096) {
			t.Errorf("%s: CRC64_XP10 on 4096-byte blocks supported", name)
		}
	}
}

// Supports names the first unsupported field, memory domain first; it
// leaves everything else to Validate.
func TestCapsSupports(t *testing.T) {
	noCRC64 := Caps{BlockSize: 0x1b, BlockProt: 3, T10DIFBG: 1, CRCType: 3} // no 4048, no CSUM guard, no CRC64_XP10
	for _, tt := range []struct {
		name  string
		attr  *BlockAttr
		field string // "" when supported
	}{
		{"nil", nil, ""},
		{"no domain", &BlockAttr{}, ""},
		{"T10-DIF 4096", &BlockAttr{Wire: t10difDomain(BlockSize4096)}, ""},
		{"4048 in memory", &BlockAttr{Mem: t10difDomain(BlockSize4048)}, "mem.block_size"},
		{"4048 on the wire", &BlockAttr{Mem: t10difDomain(BlockSize512), Wire: t10difDomain(BlockSize4048)}, "wire.block_size"},
		{"both bad: memory first", &BlockAttr{Mem: crcDomain(CRCTypeCRC64XP10, 0, BlockSize512), Wire: t10difDomain(BlockSize4048)}, "mem.crc.type"},
		{"IP checksum guard", &BlockAttr{Wire: &Domain{Type: SigTypeT10DIF, T10DIF: &T10DIF{Guard: T10DIFGuardCsum}}}, "wire.t10dif.bg_type"},
		{"CRC64_XP10", &BlockAttr{Mem: crcDomain(CRCTypeCRC64XP10, 0, BlockSize512)}, "mem.crc.type"},
		{"CRC32C", &BlockAttr{Mem: crcDomain(CRCTypeCRC32C, 0, BlockSize520)}, ""},
		{"block size out of the enum", &BlockAttr{Mem: t10difDomain(9)}, "mem.block_size"},
		{"signature type out of the enum", &BlockAttr{Mem: &Domain{Type: 7}}, "mem.sig_type"},
		// Validate's business: parameters missing, an invalid seed.
		{"T10-DIF without parameters", &BlockAttr{Mem: &Domain{Type: SigTypeT10DIF}}, ""},
		{"CRC without parameters", &BlockAttr{Mem: &Domain{Type: SigTypeCRC}}, ""},
		{"bad seed", &BlockAttr{Mem: crcDomain(CRCTypeCRC32, 5, BlockSize512)}, ""},
	} {
		err := noCRC64.Supports(tt.attr)
		if tt.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		var ae *AttrError
		if !errors.As(err, &ae) || ae.Field != tt.field || !errors.Is(err, ErrUnsupported) || errors.Is(err, ErrInvalidAttr) {
			t.Errorf("%s: Supports = %v, want ErrUnsupported (only) for %s", tt.name, err, tt.field)
		}
	}
	if err := (Caps{}).Supports(&BlockAttr{Mem: t10difDomain(BlockSize512)}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("no caps: %v", err)
	}
}

func TestCapsSupportsAllocatesNothing(t *testing.T) {
	a := &BlockAttr{Mem: t10difDomain(BlockSize512), Wire: crcDomain(CRCTypeCRC64XP10, 0, BlockSize4096)}
	if n := testing.AllocsPerRun(100, func() {
		if allCaps.Supports(a) != nil {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
