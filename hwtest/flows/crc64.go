package flows

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/sig"
)

// CRC64Result is what the device's CRC64_XP10 signatures matched for one
// seed: the candidate parameter sets (and byte order) that agree with
// every block.
type CRC64Result struct {
	Seed    uint64
	Matches []sig.Match
	// First is the signature the device stored after the first block, as
	// found, for reports when nothing matches.
	First [8]byte
}

func (r CRC64Result) String() string {
	if len(r.Matches) == 0 {
		return fmt.Sprintf("seed %#x: no candidate matches (first block's signature % x)", r.Seed, r.First)
	}
	s := fmt.Sprintf("seed %#x:", r.Seed)
	for _, m := range r.Matches {
		s += fmt.Sprintf(" [%s, %v]", m.Candidate.Name, m.Order)
	}
	return s
}

// crc64Blocks and crc64BlockSize shape the known data: eight 512-byte
// blocks.
const (
	crc64Blocks    = 8
	crc64BlockSize = 512
)

// CRC64XP10 settles CRC64_XP10's parameters on the device: for each seed
// (0 and all ones) it configures a signature mkey over known data with no
// memory signature and a CRC64_XP10 wire signature, RDMA-writes through it
// to a plain buffer, so that the device inserts an 8-byte signature after
// each 512-byte block, and keeps the sig.Candidates (with a byte order)
// that compute every block's signature. It checks the data arrived
// unchanged and that mlx5dv_mkey_check reports no error, and returns one
// result per seed.
func CRC64XP10(t *testing.T, c *mlx5.Context, objs Objects) []CRC64Result {
	l := NewLoopback(t, c, objs)
	const dataLen = crc64Blocks * crc64BlockSize
	const wireLen = crc64Blocks * (crc64BlockSize + 8) // the SGE counts the wire's bytes
	src, srcMR := buffer(t, l.PD, dataLen, mlx5.AccessLocalWrite)
	for i := range src {
		src[i] = byte(i*7 + i>>9*13 + 1) // every block different
	}
	mkey := sigMkey(t, l.PD)

	var results []CRC64Result
	for _, seed := range []uint64{0, ^uint64(0)} {
		dst, dstMR := buffer(t, l.PD, wireLen, mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite)
		attr := &sig.BlockAttr{
			Wire:      &sig.Domain{Type: sig.SigTypeCRC, CRC: &sig.CRC{Type: sig.CRCTypeCRC64XP10, Seed: seed}, BlockSize: sig.BlockSize512},
			CheckMask: sig.MaskCRC64XP10,
		}
		err := l.A.PostMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: 1, Mkey: mkey, Flags: mlx5.SendSignaled,
			SetAccess: true, Access: mlx5.AccessLocalWrite | mlx5.AccessRemoteRead,
			List: []mlx5.KLM{{Addr: srcMR.Addr(), ByteCount: dataLen, Mkey: srcMR.LKey()}}, Sig: attr})
		if err != nil {
			t.Fatalf("seed %#x: mkey configure: %v", seed, err)
		}
		err = l.A.PostSend(&mlx5.SendWR{WrID: 2, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
			RemoteAddr: dstMR.Addr(), RKey: dstMR.RKey(), SGL: []mlx5.SGE{{Addr: 0, Length: wireLen, LKey: mkey.LKey()}}})
		if err != nil {
			t.Fatalf("seed %#x: RDMA write: %v", seed, err)
		}
		for _, wc := range l.Wait(t, 2) {
			if wc.Status != mlx5.WCSuccess {
				t.Fatalf("seed %#x: work request %d: %v (vendor syndrome %#x)", seed, wc.WrID, wc.Status, wc.VendorErr)
			}
		}
		if me, err := mkey.Check(); err != nil || !me.OK() {
			t.Errorf("seed %#x: mkey check after generating: %v, %v", seed, me, err)
		}

		var common []sig.Match
		for b := range crc64Blocks {
			data := dst[b*(crc64BlockSize+8) : b*(crc64BlockSize+8)+crc64BlockSize]
			if !slices.Equal(data, src[b*crc64BlockSize:(b+1)*crc64BlockSize]) {
				t.Fatalf("seed %#x: block %d arrived changed", seed, b)
			}
			m := sig.MatchCRC64(data, [8]byte(dst[b*(crc64BlockSize+8)+crc64BlockSize:]))
			if b == 0 {
				common = m
				continue
			}
			common = slices.DeleteFunc(common, func(x sig.Match) bool { return !slices.Contains(m, x) })
		}
		r := CRC64Result{Seed: seed, Matches: common, First: [8]byte(dst[crc64BlockSize:])}
		t.Logf("CRC64_XP10 %v", r)
		results = append(results, r)
	}
	return results
}
