package crc

import (
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"testing"
)

var benchSizes = []int{512, 4096, 1 << 20}

var sink uint64

// bench runs f over buffers of each benchmark size, reporting bytes/s.
func bench(b *testing.B, name string, f func(p []byte) uint64) {
	for _, n := range benchSizes {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 31)
		}
		b.Run(fmt.Sprintf("%s/%s", name, sizeName(n)), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sink += f(p)
			}
		})
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkCRC measures every implementation of every checksum here, and
// hash/crc32's Castagnoli and hash/crc64's ISO CRCs for comparison, in one
// run. The implementation this machine uses is measured through the
// exported functions, the others through the internal entry points.
func BenchmarkCRC(b *testing.B) {
	for _, im := range impls() {
		f := func(p []byte) uint64 { return uint64(t10difWith(im.level, 0, p)) }
		if im.level == archLevel {
			f = func(p []byte) uint64 { return uint64(T10DIF(0, p)) }
		}
		bench(b, "T10DIF/"+im.name, f)
	}
	for _, prm := range []Params64{CRC64XZ, CRC64ECMA182} {
		c := NewCRC64(prm)
		for _, im := range impls() {
			f := func(p []byte) uint64 { return checksumWith(c, im.level, p) }
			if im.level == archLevel {
				f = c.Checksum
			}
			bench(b, prm.Name[len("CRC-64/"):]+"/"+im.name, f)
		}
	}
	for _, c := range crc32Kinds {
		for _, im := range impls() {
			f := func(p []byte) uint64 { return uint64(crc32With(c.k, im.level, 0, p)) }
			bench(b, c.name+"/"+im.name, f)
		}
	}
	for _, vec := range ipImpls() {
		f, name := func(p []byte) uint64 { return uint64(ipChecksumWith(vec, p)) }, "IPChecksum/go"
		if vec {
			name = "IPChecksum/vector"
		}
		if vec == hasSum16 {
			f = func(p []byte) uint64 { return uint64(IPChecksum(p)) }
		}
		bench(b, name, f)
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	bench(b, "crc32.Castagnoli", func(p []byte) uint64 { return uint64(crc32.Update(0, castagnoli, p)) })
	bench(b, "crc32.IEEE", func(p []byte) uint64 { return uint64(crc32.Update(0, crc32.IEEETable, p)) })
	iso := crc64.MakeTable(crc64.ISO)
	bench(b, "crc64.ISO", func(p []byte) uint64 { return crc64.Update(0, iso, p) })
}
