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
		e := mustEngine(t, &BlockAttr{Mem: crcDomain(CRCTypeCRC64XP10, seed, BlockSize512)}, WithCRC64(crc64NVMe))
		buf := interleave(data, 512, 8)
		if err := e.Generate(DomainMemory, buf); err != nil {
			t.Fatal(err)
		}
		got := MatchCRC64(data, [8]byte(buf[512:]))
		if len(got) != 1 || got[0].Candidate.Poly != crc64NVMe.Poly || got[0].Candidate.Init != seed || got[0].Order != BigEndian {
			t.Errorf("seed %#x: matches %v", seed, got)
		}
	}
}
