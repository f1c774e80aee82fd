package mlx5

import (
	"testing"

	"github.com/mlx5go/mlx5go/wqe"
)

// FuzzPoll writes arbitrary bytes as CQEs (64 at a time, owner bits as the
// device would set them) into a CQ whose QP has posted sends, receives
// and an mkey configure, and polls: Poll must not panic, must return no
// more than it was given room for, and may report only work requests
// that were posted, with the QP's number.
func FuzzPoll(f *testing.F) {
	f.Add([]byte{}, uint8(4))
	cqe := make([]byte, 64)
	cqe[56], cqe[57], cqe[58], cqe[59] = 0, 0, 0x1, 0xa2 // qpn 0x1a2
	f.Add(append([]byte(nil), cqe...), uint8(1))
	cqe[63] = wqe.CQEReqErr << 4
	cqe[55] = uint8(wqe.SyndromeWRFlush)
	f.Add(append(append([]byte(nil), cqe...), cqe...), uint8(8))
	cqe[63] = wqe.CQESigErr << 4
	f.Add(cqe, uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, room uint8) {
		c := &Context{devx: true}
		cq := testCQ(t, c, 16, 0)
		qp, _ := testQP(t, c, 16)
		qp.sq.maxWQE, qp.mkeyConf = 16, true
		qp.rq.wrID = make([]uint64, 4)
		qp.rq.ring = make([]byte, 4*16)
		qp.rq.stride, qp.rq.maxSGE = 16, 1
		cq.attachLocked(qp)
		posted := map[uint64]bool{}
		for i := range 3 {
			if err := qp.PostSend(&SendWR{WrID: uint64(100 + i), Opcode: OpSend, Flags: SendSignaled,
				SGL: []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}); err != nil {
				t.Fatal(err)
			}
			posted[uint64(100+i)] = true
		}
		qp.sq.track(200, WCUMR, 6, qp.sq.pi+5, 0) // a configure's bookkeeping
		posted[200] = true
		for i := range 4 {
			qp.rq.wrID[i] = uint64(300 + i)
			posted[uint64(300+i)] = true
		}
		for i := 0; i+64 <= len(data) && i/64 < 16; i += 64 {
			b := cq.ring[i : i+64]
			copy(b, data[i:i+64])
			b[63] &^= 1 // the first pass: owner bit 0
		}
		wc := make([]Completion, int(room)%17)
		for range 3 {
			n, _ := cq.Poll(wc)
			if n > len(wc) {
				t.Fatalf("Poll returned %d with room for %d", n, len(wc))
			}
			for _, w := range wc[:n] {
				if !posted[w.WrID] || w.QPN != qp.qpn {
					t.Fatalf("completion %+v of nothing posted", w)
				}
			}
		}
	})
}
