package mlx5

import (
	"fmt"
	"testing"

	"github.com/mlx5go/mlx5go/wqe"
)

// The scale benchmarks (issue 17, item 4; docs/PERFORMANCE.md): the cost
// of posting and polling as the QPs in use grow from 1 to 4096, all on
// one shared CQ, in memory (benchQP, benchCQ: no device, no model), so
// that what grows is the working set the CPU's caches hold: each QP's
// struct, send queue bookkeeping, ring and doorbell record, and the
// CQ's map from QP number to QP.
//
//   - post: one signaled RDMA WRITE of one 4096-byte SGE per op, on the
//     QPs in turn (round robin); RC QPs through Add's fast lane, DCIs
//     (with 8 streams, the work request on stream op mod 8, to DCT op mod
//     1024) through the general builder. The rings are freed outside the
//     timer every 32 posts a QP.
//   - poll16: Poll of 16 completions from the shared CQ (every status
//     checked), the CQEs of the QPs in turn, each completing a WRITE
//     posted on its QP; the CQ (1024 entries) is refilled outside the
//     timer.
var scaleQPs = []int{1, 16, 256, 4096}

// scaleFixture is n QPs of type typ on one CQ of 1024 entries.
type scaleFixture struct {
	cq  *CQ
	qps []*QP
	wr  SendWR
}

func newScale(tb testing.TB, typ QPType, n int) *scaleFixture {
	tb.Helper()
	c := sbsContext()
	f := &scaleFixture{cq: benchCQ(tb, c, 1023, 0x400)}
	o := QPOptions{Type: typ, PD: &PD{c: c}, SendCQ: f.cq, RecvCQ: f.cq, MaxSendWR: max(64, 1024/n), MaxSendSGE: 1,
		MaxRecvWR: 1, MaxRecvSGE: 1, SendOps: Opcodes(OpRDMAWrite)}
	if typ == QPTypeDCI {
		o.RecvCQ, o.MaxRecvWR, o.MaxRecvSGE = nil, 0, 0
		o.DCIStreams = &DCIStreams{LogConcurrent: 3, LogErrored: 3}
	}
	for i := range n {
		f.qps = append(f.qps, benchQP(tb, c, o, 0x1000+uint32(i)))
	}
	f.wr = SendWR{Opcode: OpRDMAWrite, Flags: SendSignaled, RemoteAddr: sbsRAddr, RKey: sbsRKey,
		SGL: []SGE{{Addr: sbsAddr, Length: sbsLength, LKey: sbsLKey}}}
	if typ == QPTypeDCI {
		f.wr.AH = testAH(o.PD, wqe.IBAV(&wqe.AHAttr{DLID: 0x22, SL: 3, SrcPathBits: 1}))
		f.wr.DCAccessKey = 0x0123456789abcdef
	}
	// Touch every page first (the rings, doorbell records and registers
	// are fresh mappings): one pass of posts over each whole ring.
	for i, qp := range f.qps {
		for range len(qp.sq.slots) / qp.sq.maxWQE {
			if err := f.post(i, 0); err != nil {
				tb.Fatal(err)
			}
		}
		qp.sq.tail.Store(uint32(qp.sq.pi))
	}
	return f
}

// post posts the fixture's work request on QP i of the round.
func (f *scaleFixture) post(i int, wrID uint64) error {
	qp := f.qps[i%len(f.qps)]
	f.wr.WrID = wrID
	if qp.typ == QPTypeDCI {
		f.wr.StreamID, f.wr.RemoteQPN = uint16(wrID&7), 0x2000+uint32(wrID&1023)
	}
	return qp.PostSend(&f.wr)
}

func BenchmarkScale(b *testing.B) {
	for _, typ := range []QPType{QPTypeRC, QPTypeDCI} {
		for _, n := range scaleQPs {
			b.Run(fmt.Sprintf("post/%v/QPs=%d", typ, n), func(b *testing.B) {
				f := newScale(b, typ, n)
				chunk := 32 * n
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if i == chunk {
						b.StopTimer()
						for _, qp := range f.qps {
							qp.sq.tail.Store(uint32(qp.sq.pi)) // as if polled
						}
						i = 0
						b.StartTimer()
					}
					if err := f.post(i, uint64(i)); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
	for _, n := range scaleQPs {
		b.Run(fmt.Sprintf("poll16/RC/QPs=%d", n), func(b *testing.B) {
			f := newScale(b, QPTypeRC, n)
			cq := f.cq
			size := uint32(cq.Size())
			next := 0 // the QP whose CQE is written next, round robin
			refill := func() {
				for j := range size {
					qp := f.qps[next]
					next = (next + 1) % n
					if err := qp.PostSend(&f.wr); err != nil {
						b.Fatal(err)
					}
					putReqCQE(cq, cq.ci+j, qp.qpn, qp.sq.pi-1, wqe.OpcodeRDMAWrite)
				}
			}
			var wc [16]Completion
			b.ReportAllocs()
			left := uint32(0)
			for b.Loop() {
				if left == 0 {
					b.StopTimer()
					refill()
					left = size
					b.StartTimer()
				}
				got, err := cq.Poll(wc[:])
				if got != len(wc) || err != nil {
					b.Fatalf("%d of %d completions: %v", got, len(wc), err)
				}
				for k := range got {
					if wc[k].Status != WCSuccess {
						b.Fatalf("completion %d: %v", k, wc[k].Status)
					}
				}
				left -= uint32(got)
			}
		})
	}
}
