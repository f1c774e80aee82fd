package sig

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/sig/crc"
)

// The benchmarks come in pairs measured over the same data: the engine
// against the bare work it cannot avoid (the CRC, or memmove plus CRC).
// SetBytes is the data bytes, without signatures, so MB/s compare.

var benchBlocks = []int{1, 8, 256} // 4 KiB, 32 KiB, 1 MiB of data

func benchT10DIF() *Domain {
	return &Domain{Type: SigTypeT10DIF, BlockSize: BlockSize4096,
		T10DIF: &T10DIF{Guard: T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x1234, RefTag: 0x5678, Flags: T10DIFRefRemap}}
}

// BenchmarkGenerateT10DIF: PI generated in place over 4096-byte blocks each
// followed by its 8-byte tuple.
func BenchmarkGenerateT10DIF(b *testing.B) {
	for _, n := range benchBlocks {
		b.Run(fmt.Sprintf("%dKiB", n*4), func(b *testing.B) {
			e := mustEngine(b, &BlockAttr{Mem: benchT10DIF()})
			buf := interleave(randomBytes(rand.New(rand.NewPCG(1, 1)), n*4096), 4096, 8)
			b.SetBytes(int64(n * 4096))
			for b.Loop() {
				if err := e.Generate(DomainMemory, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBareT10DIF: crc.T10DIF alone over the same blocks.
func BenchmarkBareT10DIF(b *testing.B) {
	for _, n := range benchBlocks {
		b.Run(fmt.Sprintf("%dKiB", n*4), func(b *testing.B) {
			buf := interleave(randomBytes(rand.New(rand.NewPCG(1, 1)), n*4096), 4096, 8)
			b.SetBytes(int64(n * 4096))
			var sink uint16
			for b.Loop() {
				for i := range n {
					sink ^= crc.T10DIF(0xffff, buf[i*4104:i*4104+4096])
				}
			}
			_ = sink
		})
	}
}

// BenchmarkCheckT10DIF: every tuple validated in place.
func BenchmarkCheckT10DIF(b *testing.B) {
	for _, n := range benchBlocks {
		b.Run(fmt.Sprintf("%dKiB", n*4), func(b *testing.B) {
			e := mustEngine(b, &BlockAttr{Mem: benchT10DIF(), CheckMask: 0xff})
			buf := interleave(randomBytes(rand.New(rand.NewPCG(1, 1)), n*4096), 4096, 8)
			if err := e.Generate(DomainMemory, buf); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n * 4096))
			for b.Loop() {
				if me, err := e.Check(DomainMemory, buf); err != nil || !me.OK() {
					b.Fatal(me, err)
				}
			}
		})
	}
}

// BenchmarkTransfer: transfers that must copy. strip is TX from T10-DIF
// memory to a plain wire (check, strip), insert is RX from a plain wire
// into T10-DIF memory (generate), pass is TX between two T10-DIF domains
// with different tags (check, regenerate the tags, reuse the guard).
func BenchmarkTransfer(b *testing.B) {
	other := benchT10DIF()
	other.T10DIF = &T10DIF{Guard: T10DIFGuardCRC, Seed: 0xffff, AppTag: 0xabcd, RefTag: 1, Flags: T10DIFRefRemap}
	for _, tc := range []struct {
		name string
		attr *BlockAttr
		dir  Direction
	}{
		{"strip", &BlockAttr{Mem: benchT10DIF(), CheckMask: 0xff}, TX},
		{"insert", &BlockAttr{Mem: benchT10DIF(), CheckMask: 0xff}, RX},
		{"pass", &BlockAttr{Mem: benchT10DIF(), Wire: other, CheckMask: 0xff}, TX},
	} {
		for _, n := range benchBlocks {
			b.Run(fmt.Sprintf("%s/%dKiB", tc.name, n*4), func(b *testing.B) {
				e := mustEngine(b, tc.attr)
				data := randomBytes(rand.New(rand.NewPCG(1, 1)), n*4096)
				src := data
				if tc.dir == TX {
					src = interleave(data, 4096, 8)
					if err := e.Generate(DomainMemory, src); err != nil {
						b.Fatal(err)
					}
				}
				dn, err := e.OutputLen(tc.dir, len(src))
				if err != nil {
					b.Fatal(err)
				}
				dst := make([]byte, dn)
				b.SetBytes(int64(n * 4096))
				for b.Loop() {
					if me, err := e.Transfer(tc.dir, dst, src); err != nil || !me.OK() {
						b.Fatal(me, err)
					}
				}
			})
		}
	}
}

// BenchmarkMemmoveT10DIF: the floor of a copying transfer, memmove of each
// block plus its CRC.
func BenchmarkMemmoveT10DIF(b *testing.B) {
	for _, n := range benchBlocks {
		b.Run(fmt.Sprintf("%dKiB", n*4), func(b *testing.B) {
			src := interleave(randomBytes(rand.New(rand.NewPCG(1, 1)), n*4096), 4096, 8)
			dst := make([]byte, n*4096)
			b.SetBytes(int64(n * 4096))
			var sink uint16
			for b.Loop() {
				for i := range n {
					s := src[i*4104 : i*4104+4096]
					copy(dst[i*4096:(i+1)*4096], s)
					sink ^= crc.T10DIF(0xffff, s)
				}
			}
			_ = sink
		})
	}
}

// BenchmarkGenerateCRC32C and BenchmarkBareCRC32C show the engine's own
// overhead next to a fast CRC (hash/crc32's Castagnoli uses the CPU's CRC
// instruction), which the T10-DIF pair cannot while sig/crc is
// bit-at-a-time.
func BenchmarkGenerateCRC32C(b *testing.B) {
	for _, n := range benchBlocks {
		b.Run(fmt.Sprintf("%dKiB", n*4), func(b *testing.B) {
			e := mustEngine(b, &BlockAttr{Mem: &Domain{Type: SigTypeCRC, BlockSize: BlockSize4096, CRC: &CRC{Type: CRCTypeCRC32C, Seed: 0xffffffff}}})
			buf := interleave(randomBytes(rand.New(rand.NewPCG(1, 1)), n*4096), 4096, 4)
			b.SetBytes(int64(n * 4096))
			for b.Loop() {
				if err := e.Generate(DomainMemory, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBareCRC32C(b *testing.B) {
	for _, n := range benchBlocks {
		b.Run(fmt.Sprintf("%dKiB", n*4), func(b *testing.B) {
			buf := interleave(randomBytes(rand.New(rand.NewPCG(1, 1)), n*4096), 4096, 4)
			b.SetBytes(int64(n * 4096))
			var sink uint32
			for b.Loop() {
				for i := range n {
					sink ^= crc.CRC32C(0, buf[i*4100:i*4100+4096])
				}
			}
			_ = sink
		})
	}
}

// sideData is the data bytes of each buffer BenchmarkSideBySide protects:
// 32 blocks of 4096 bytes or 256 of 512.
const sideData = 128 << 10

// cpuLoop runs f in b.Loop on one thread and reports, besides ns/op,
// cpu-ns/op: the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which a busy
// machine disturbs less (scripts/bench's BENCH_CLOCK).
func cpuLoop(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var t0, t1 unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t0)
	for b.Loop() {
		f()
	}
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t1)
	b.ReportMetric(float64(t1.Nano()-t0.Nano())/float64(b.N), "cpu-ns/op")
}

// BenchmarkSideBySide is the mlx5go half of scripts/bench pi: PI generated
// in place and checked (every byte of the signature) over 128 KiB of data
// in blocks of 512 and 4096 bytes each followed by its signature, as
// scripts/pibench/pibench.c does with ISA-L's CRCs, under the same
// operation names:
//
//   - T10DIF: the 8-byte T10-DIF tuple, CRC guard with seed 0,
//     application tag 0x1234, reference tag 0x5678 plus the block number;
//   - CRC32C: the 4-byte CRC32C (seed all ones: the standard CRC32C);
//   - CRC64XZ: the 8-byte CRC64_XP10 as DefaultCRC64XP10 computes it
//     (seed all ones: the standard CRC-64/XZ).
//
// bare is the CRC alone over the same blocks, what check cannot avoid.
// SetBytes is the data bytes, signatures not counted.
//
// The CRCs themselves run first, as <CRC>/<size>: sig/crc's functions
// through its exported API over the buffers that pibench gives ISA-L
// (512 B, 4 KiB and 1 MiB, byte i holding i·31), each starting a new
// checksum (T10-DIF from 0, the others from their standard initial
// value), CRC32 among them.
func BenchmarkSideBySide(b *testing.B) {
	xz := crc.NewCRC64(crc.CRC64XZ)
	for _, op := range []struct {
		name string
		f    func(p []byte) uint64
	}{
		{"T10DIF", func(p []byte) uint64 { return uint64(crc.T10DIF(0, p)) }},
		{"CRC32C", func(p []byte) uint64 { return uint64(crc.CRC32C(0, p)) }},
		{"CRC64XZ", xz.Checksum},
		{"CRC32", func(p []byte) uint64 { return uint64(crc.CRC32(0, p)) }},
	} {
		for _, size := range []struct {
			n    int
			name string
		}{{512, "512B"}, {4096, "4KiB"}, {1 << 20, "1MiB"}} {
			p := make([]byte, size.n)
			for i := range p {
				p[i] = byte(i * 31)
			}
			b.Run(op.name+"/"+size.name, func(b *testing.B) {
				b.SetBytes(int64(size.n))
				var sink uint64
				cpuLoop(b, func() { sink += op.f(p) })
				_ = sink
			})
		}
	}
	for _, g := range []struct {
		name string
		dom  func(BlockSize) *Domain
		bare func(p []byte) uint64
	}{
		{"T10DIF", func(bs BlockSize) *Domain {
			return &Domain{Type: SigTypeT10DIF, BlockSize: bs,
				T10DIF: &T10DIF{Guard: T10DIFGuardCRC, AppTag: 0x1234, RefTag: 0x5678, Flags: T10DIFRefRemap}}
		}, func(p []byte) uint64 { return uint64(crc.T10DIF(0, p)) }},
		{"CRC32C", func(bs BlockSize) *Domain {
			return &Domain{Type: SigTypeCRC, BlockSize: bs, CRC: &CRC{Type: CRCTypeCRC32C, Seed: 0xffffffff}}
		}, func(p []byte) uint64 { return uint64(crc.CRC32C(0, p)) }},
		{"CRC64XZ", func(bs BlockSize) *Domain {
			return &Domain{Type: SigTypeCRC, BlockSize: bs, CRC: &CRC{Type: CRCTypeCRC64XP10, Seed: ^uint64(0)}}
		}, crc.NewCRC64(crc.CRC64XZ).Checksum},
	} {
		for _, bs := range []BlockSize{BlockSize512, BlockSize4096} {
			e := mustEngine(b, &BlockAttr{Mem: g.dom(bs), CheckMask: 0xff})
			n, pi := e.Layout(DomainMemory)
			layout := fmt.Sprintf("%d+%d", n, pi)
			buf := interleave(randomBytes(rand.New(rand.NewPCG(1, 1)), sideData), n, pi)
			if err := e.Generate(DomainMemory, buf); err != nil {
				b.Fatal(err)
			}
			b.Run("generate/"+g.name+"/"+layout, func(b *testing.B) {
				b.SetBytes(sideData)
				cpuLoop(b, func() {
					if err := e.Generate(DomainMemory, buf); err != nil {
						b.Fatal(err)
					}
				})
			})
			b.Run("check/"+g.name+"/"+layout, func(b *testing.B) {
				b.SetBytes(sideData)
				cpuLoop(b, func() {
					if me, err := e.Check(DomainMemory, buf); err != nil || !me.OK() {
						b.Fatal(me, err)
					}
				})
			})
			b.Run("bare/"+g.name+"/"+layout, func(b *testing.B) {
				b.SetBytes(sideData)
				var sink uint64
				cpuLoop(b, func() {
					for i := 0; i < len(buf); i += n + pi {
						sink ^= g.bare(buf[i : i+n])
					}
				})
				_ = sink
			})
		}
	}
}
