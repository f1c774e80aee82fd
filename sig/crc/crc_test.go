package crc

import "testing"

var check = []byte("123456789")

func TestT10DIFCheck(t *testing.T) {
	if got := T10DIF(0, check); got != 0xD0DB {
		t.Errorf("T10DIF(0, 123456789) = %#04x, want 0xd0db", got)
	}
}

func TestCRC64Check(t *testing.T) {
	for _, p := range []Params64{CRC64ECMA182, CRC64XZ, CRC64GoISO, CRC64WE} {
		if got := NewCRC64(p).Checksum(check); got != p.Check {
			t.Errorf("%s: %#016x, want %#016x", p.Name, got, p.Check)
		}
		c := NewCRC64(p)
		if got := c.Update(c.Update(c.Checksum0(), check[:4]), check[4:]); got != p.Check {
			t.Errorf("%s in two pieces: %#016x, want %#016x", p.Name, got, p.Check)
		}
	}
}

func TestIPChecksum(t *testing.T) {
	// RFC 1071's example words 0001 f203 f4f5 f6f7 sum to 0xddf2 after the
	// end-around carry; the checksum is its complement.
	if got := IPChecksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}); got != ^uint16(0xddf2) {
		t.Errorf("IPChecksum = %#04x, want %#04x", got, ^uint16(0xddf2))
	}
}
