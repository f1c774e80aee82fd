package sig

import (
	"testing"

	"github.com/mlx5go/mlx5go/sig/crc"
)

var checkInput = []byte("123456789")

func mustEngine(t testing.TB, a *BlockAttr, opts ...Option) *Engine {
	t.Helper()
	e, err := NewEngine(a, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func signature(t *testing.T, d *Domain, data []byte, opts ...Option) uint64 {
	t.Helper()
	v, err := mustEngine(t, &BlockAttr{Mem: d}, opts...).Signature(DomainMemory, data, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestKnownAnswers runs the published check values (the CRC of the ASCII
// bytes "123456789") through the engine's signature functions.
func TestKnownAnswers(t *testing.T) {
	dif := func(g T10DIFGuard, seed uint16) *Domain {
		return &Domain{Type: SigTypeT10DIF, T10DIF: &T10DIF{Guard: g, Seed: seed, AppTag: 0xa5a5, RefTag: 0x01020304}}
	}
	tests := []struct {
		name  string
		d     *Domain
		shift uint
		want  uint64
	}{
		// CRC-16/T10-DIF: poly 0x8BB7, init 0, no reflection, no xor.
		{"CRC-16/T10-DIF", dif(T10DIFGuardCRC, 0), 48, 0xD0DB},
		// CRC-32/ISO-HDLC (the FC-PH/IEEE CRC32): init and xorout all ones.
		{"CRC-32", crcDomain(CRCTypeCRC32, 0xffffffff, 0), 32, 0xCBF43926},
		// CRC-32/ISCSI (CRC32C): init and xorout all ones.
		{"CRC-32C", crcDomain(CRCTypeCRC32C, 0xffffffff, 0), 32, 0xE3069283},
	}
	for _, tt := range tests {
		if got := signature(t, tt.d, checkInput) >> tt.shift; got != tt.want {
			t.Errorf("%s: %#x, want %#x", tt.name, got, tt.want)
		}
	}
	// The tags follow the guard in the T10-DIF value.
	if got := signature(t, dif(T10DIFGuardCRC, 0), checkInput); got != 0xD0DB_a5a5_01020304 {
		t.Errorf("T10-DIF tuple %#016x, want 0xd0dba5a501020304", got)
	}
	// The CRC-64 catalogue, each with the seed equal to its initial value.
	for _, p := range []crc.Params64{crc.CRC64ECMA182, crc.CRC64WE, crc.CRC64XZ, crc.CRC64GoISO, crc.CRC64NVMe} {
		if got := signature(t, crcDomain(CRCTypeCRC64XP10, p.Init, 0), checkInput, WithCRC64(p)); got != p.Check {
			t.Errorf("%s: %#016x, want %#016x", p.Name, got, p.Check)
		}
	}
}

// TestIPChecksumGuard checks the IP checksum guard against RFC 1071's
// worked example, and the seed assumption (docs/SIG.md): seed 0xFFFF only
// turns a checksum of 0xFFFF into 0.
func TestIPChecksumGuard(t *testing.T) {
	rfc1071 := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	d := &Domain{Type: SigTypeT10DIF, T10DIF: &T10DIF{Guard: T10DIFGuardCsum}}
	if got := signature(t, d, rfc1071) >> 48; got != uint64(^uint16(0xddf2)) {
		t.Errorf("IP checksum guard %#04x, want %#04x", got, ^uint16(0xddf2))
	}
	seeded := &Domain{Type: SigTypeT10DIF, T10DIF: &T10DIF{Guard: T10DIFGuardCsum, Seed: 0xffff}}
	if got := signature(t, seeded, rfc1071) >> 48; got != uint64(^uint16(0xddf2)) {
		t.Errorf("seeded IP checksum guard %#04x, want %#04x", got, ^uint16(0xddf2))
	}
	zeros := make([]byte, 16)
	if got := signature(t, d, zeros) >> 48; got != 0xffff {
		t.Errorf("IP checksum of zeros %#04x, want 0xffff", got)
	}
	if got := signature(t, seeded, zeros) >> 48; got != 0 {
		t.Errorf("seeded IP checksum of zeros %#04x, want 0", got)
	}
}

// TestCandidatesCheckValues checks every catalogued candidate against its
// published check value, and that each guess differs from its catalogue
// entry only in the initial value.
func TestCandidatesCheckValues(t *testing.T) {
	if len(Candidates) != 10 {
		t.Fatalf("%d candidates, want 10", len(Candidates))
	}
	for i, c := range Candidates {
		if !c.Guess {
			if c.Check == 0 {
				t.Errorf("%s: catalogued without a check value", c.Name)
			}
			if got := crc.NewCRC64(c.Params64).Checksum(checkInput); got != c.Check {
				t.Errorf("%s: %#016x, want %#016x", c.Name, got, c.Check)
			}
			continue
		}
		base := Candidates[i-1].Params64
		g := c.Params64
		if base.Poly != g.Poly || base.RefIn != g.RefIn || base.RefOut != g.RefOut || base.XorOut != g.XorOut || g.Init != ^base.Init {
			t.Errorf("%s is not %s with the other initial value", g.Name, base.Name)
		}
	}
}
