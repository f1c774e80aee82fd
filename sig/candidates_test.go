package sig

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/mlx5go/mlx5go/sig/crc"
)

// TestMatchCRC64 feeds the matcher synthetic device signatures: each
// candidate's CRC stored big-endian and little-endian must match that
// candidate, in that order, and nothing else.
func TestMatchCRC64(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	data := randomBytes(r, 4096)
	for _, c := range Candidates {
		sum := crc.NewCRC64(c.Params64).Checksum(data)
		for _, order := range []ByteOrder{BigEndian, LittleEndian} {
			var sig [8]byte
			if order == BigEndian {
				binary.BigEndian.PutUint64(sig[:], sum)
			} else {
				binary.LittleEndian.PutUint64(sig[:], sum)
			}
			got := MatchCRC64(data, sig)
			if len(got) != 1 || got[0].Candidate.Name != c.Name || got[0].Order != order {
				t.Errorf("%s %v: matches %v", c.Name, order, got)
			}
		}
	}
	var sig [8]byte
	binary.BigEndian.PutUint64(sig[:], crc.NewCRC64(crc.CRC64XZ).Checksum(data)^1)
	if got := MatchCRC64(data, sig); len(got) != 0 {
		t.Errorf("a signature no candidate makes matched %v", got)
	}
}

// TestMatchCRC64Engine closes the loop the hardware test will use: the
// engine configured with a candidate generates a CRC64_XP10 block and the
// matcher names that candidate with the seed's initial value.
func TestMatchCRC64Engine(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	data := randomBytes(r, 512)
	for _, seed := range []uint64{0, ^uint64(0)} {
		e := mustEngine(t, &BlockAttr{Mem: crcDomain(CRCTypeCRC64XP10, seed, BlockSize512)}, WithCRC64(crc.CRC64NVMe))
		buf := interleave(data, 512, 8)
		if err := e.Generate(DomainMemory, buf); err != nil {
			t.Fatal(err)
		}
		got := MatchCRC64(data, [8]byte(buf[512:]))
		if len(got) != 1 || got[0].Candidate.Poly != crc.CRC64NVMe.Poly || got[0].Candidate.Init != seed || got[0].Order != BigEndian {
			t.Errorf("seed %#x: matches %v", seed, got)
		}
	}
}

// TestMatchCRC32 feeds MatchCRC32 synthetic signatures of every variant;
// and the engine's own CRC32C output must read as its documented
// assumption (Init = seed, XorOut all ones, big-endian).
func TestMatchCRC32(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	data := randomBytes(r, 520)
	for _, typ := range []CRCType{CRCTypeCRC32, CRCTypeCRC32C} {
		for _, init := range []uint32{0, ^uint32(0)} {
			for _, xor := range []uint32{0, ^uint32(0)} {
				// A bit-at-a-time reflected CRC-32 written out here, apart
				// from hash/crc32's conventions.
				poly := uint32(0xEDB88320)
				if typ == CRCTypeCRC32C {
					poly = 0x82F63B78
				}
				reg := init
				for _, b := range data {
					reg ^= uint32(b)
					for range 8 {
						if reg&1 != 0 {
							reg = reg>>1 ^ poly
						} else {
							reg >>= 1
						}
					}
				}
				sum := reg ^ xor
				for _, order := range []ByteOrder{BigEndian, LittleEndian} {
					var sig [4]byte
					if order == BigEndian {
						binary.BigEndian.PutUint32(sig[:], sum)
					} else {
						binary.LittleEndian.PutUint32(sig[:], sum)
					}
					want := CRC32Variant{init, xor, order}
					got := MatchCRC32(typ, data, sig)
					if len(got) != 1 || got[0] != want {
						t.Errorf("%v %+v: matches %+v", typ, want, got)
					}
				}
			}
		}
	}
	for _, seed := range []uint64{0, 0xffffffff} {
		e := mustEngine(t, &BlockAttr{Mem: crcDomain(CRCTypeCRC32C, seed, BlockSize520)})
		buf := interleave(data, 520, 4)
		if err := e.Generate(DomainMemory, buf); err != nil {
			t.Fatal(err)
		}
		want := CRC32Variant{uint32(seed), 0xffffffff, BigEndian}
		if got := MatchCRC32(CRCTypeCRC32C, data, [4]byte(buf[520:])); len(got) != 1 || got[0] != want {
			t.Errorf("engine seed %#x: matches %+v, want %+v", seed, got, want)
		}
	}
	if got := MatchCRC32(CRCTypeCRC64XP10, data, [4]byte{}); got != nil {
		t.Errorf("CRC64 type matched %v", got)
	}
}
