package sig

import "testing"

// TestSameBlockStructureTotal: SameBlockStructure answers, without
// panicking, for a nil attribute and for domains that lack the parameters
// of their type or have an unknown type, block size or CRC type: no block
// structure, so false.
func TestSameBlockStructureTotal(t *testing.T) {
	t10 := t10difDomain(BlockSize512)
	c32 := crcDomain(CRCTypeCRC32, 0, BlockSize512)
	cases := []struct {
		name      string
		mem, wire *Domain
		want      bool
	}{
		{"t10dif both", t10, t10difDomain(BlockSize512), true},
		{"crc both", c32, crcDomain(CRCTypeCRC32, 0xffffffff, BlockSize512), true},
		{"no mem", nil, t10, false},
		{"no wire", t10, nil, false},
		{"none", nil, nil, false},
		{"t10dif without params", &Domain{Type: SigTypeT10DIF, BlockSize: BlockSize512}, t10, false},
		{"t10dif without params, both", &Domain{Type: SigTypeT10DIF}, &Domain{Type: SigTypeT10DIF}, false},
		{"crc without params", c32, &Domain{Type: SigTypeCRC, BlockSize: BlockSize512}, false},
		{"crc without params, both", &Domain{Type: SigTypeCRC}, &Domain{Type: SigTypeCRC}, false},
		{"crc with t10dif params only", &Domain{Type: SigTypeCRC, T10DIF: &T10DIF{}}, &Domain{Type: SigTypeCRC, T10DIF: &T10DIF{}}, false},
		{"unknown type", &Domain{Type: 7, T10DIF: &T10DIF{}, CRC: &CRC{}}, &Domain{Type: 7, T10DIF: &T10DIF{}, CRC: &CRC{}}, false},
		{"unknown block size", &Domain{Type: SigTypeT10DIF, T10DIF: &T10DIF{}, BlockSize: 9}, &Domain{Type: SigTypeT10DIF, T10DIF: &T10DIF{}, BlockSize: 9}, false},
		{"unknown crc type", &Domain{Type: SigTypeCRC, CRC: &CRC{Type: 9}}, &Domain{Type: SigTypeCRC, CRC: &CRC{Type: 9}}, false},
		{"crc types differ", c32, crcDomain(CRCTypeCRC32C, 0, BlockSize512), false},
		{"types differ", t10, c32, false},
	}
	for _, tc := range cases {
		for _, swap := range []bool{false, true} {
			a := &BlockAttr{Mem: tc.mem, Wire: tc.wire}
			if swap {
				a.Mem, a.Wire = a.Wire, a.Mem
			}
			if got := a.SameBlockStructure(); got != tc.want {
				t.Errorf("%s (swapped %v): %v, want %v", tc.name, swap, got, tc.want)
			}
		}
	}
	var none *BlockAttr
	if none.SameBlockStructure() {
		t.Error("nil BlockAttr: true")
	}
}
