package mlx5

import (
	"testing"

	"github.com/mlx5go/mlx5go/wqe"
)

// TestOwnedOp: Poll's ownership test, written out for speed, says what
// wqe.CQEOwned says for every op_own byte, on both passes over the ring,
// and returns the op_own byte.
func TestOwnedOp(t *testing.T) {
	const logSize = 4
	for _, ci := range []uint32{0, 3, 1 << logSize, 1<<logSize + 5, 3 << logSize} {
		for op := 0; op < 256; op++ {
			var b [cqeSize]byte
			b[cqeSize-1] = byte(op)
			b[cqeSize-4] = 0xa5 // the rest of the word must not matter
			want := wqe.CQEOwned(b[:], ci, logSize)
			got, ok := ownedOp(&b, ci&(1<<logSize) != 0)
			if ok != want || got != byte(op) {
				t.Fatalf("ci %d, op_own %#x: ownedOp = %#x, %v; wqe.CQEOwned = %v", ci, op, got, ok, want)
			}
			if o := owned(b[:], ci, logSize); o != want {
				t.Fatalf("ci %d, op_own %#x: owned = %v; wqe.CQEOwned = %v", ci, op, o, want)
			}
		}
	}
}

// TestPollQPCacheFollowsMap: Poll's cache of QPs by number never outlives
// the map it stands for. A CQE of QP number X goes to the QP the CQ has
// under X now, also after the QP Poll last found there was detached and
// another QP took its number (as a device reuses QP numbers), and a CQE
// of a QP that was detached is a stray.
func TestPollQPCacheFollowsMap(t *testing.T) {
	c := sbsContext()
	cq := benchCQ(t, c, 63, 0x40)
	const qpn = 0x123
	a := benchQP(t, c, sbsWriteOptions(cq), qpn)
	post := func(qp *QP, id uint64) {
		t.Helper()
		wr := sbsWrite(0, 1)
		wr.WrID = id
		if err := qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		putReqCQE(cq, cq.ci, qp.qpn, qp.sq.pi-1, wqe.OpcodeRDMAWrite)
	}
	wc := make([]Completion, 4)
	poll := func(want int) []Completion {
		t.Helper()
		n, err := cq.Poll(wc)
		if n != want || err != nil {
			t.Fatalf("Poll = %d, %v; want %d completions", n, err, want)
		}
		return wc[:n]
	}
	post(a, 1)
	if got := poll(1); got[0].WrID != 1 || got[0].QPN != qpn {
		t.Fatalf("A's completion: %+v", got[0])
	}
	// A goes, B comes with A's number: B's slots, not A's, complete.
	cq.mu.Lock()
	cq.closeQPLocked(a)
	cq.mu.Unlock()
	b := benchQP(t, c, sbsWriteOptions(cq), qpn)
	post(b, 7)
	got := poll(1)
	if got[0].WrID != 7 || b.sq.reported != b.sq.pi {
		t.Fatalf("CQE of QP %#x after the number moved to B: %+v (B reported %d of %d, A %d)", qpn, got[0], b.sq.reported, b.sq.pi, a.sq.reported)
	}
	// B goes too: a CQE naming the number now is a stray.
	cq.mu.Lock()
	cq.detachLocked(b)
	cq.mu.Unlock()
	putReqCQE(cq, cq.ci, qpn, 0, wqe.OpcodeRDMAWrite)
	poll(0)
}
