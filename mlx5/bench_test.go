package mlx5

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/wqe"
)

// testQP is a QP in memory only (no device): a send ring of n WQEBBs, a
// doorbell record and a UAR page, for the post path's tests and
// benchmarks.
func testQP(tb testing.TB, c *Context, n int) (*QP, []byte) {
	tb.Helper()
	buf, err := AllocBuffer(n*wqe.WQEBB + 2*4096)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { buf.Close() })
	mem := buf.Bytes()
	qp := &QP{c: c, qpn: 0x1a2, name: qpName(0x1a2), maxWQE: 1}
	qp.initErrors()
	qp.sq.ring = wqe.Ring(mem[:n*wqe.WQEBB])
	qp.sq.slots = make([]sqSlot, n)
	qp.sq.maxSGE = 4
	rec := mem[n*wqe.WQEBB : n*wqe.WQEBB+8]
	uar := mem[n*wqe.WQEBB+4096:]
	if qp.dbSQ, err = doorbell.NewSQ(rec, uar[doorbell.BlueFlameOffset:], defaultBFSize); err != nil {
		tb.Fatal(err)
	}
	return qp, uar
}

// An RDMA WRITE of one SGE: built, tracked, rung; the doorbell record has
// the new producer counter and the UAR the WQE.
func TestPostSendRings(t *testing.T) {
	qp, uar := testQP(t, &Context{}, 64)
	wr := SendWR{WrID: 7, Opcode: OpRDMAWrite, Flags: wqe.SendSignaled, RemoteAddr: 0x1000, RKey: 0x55,
		SGL: []wqe.SGE{{Addr: 0x2000, Length: 64, LKey: 0x66}}}
	for i := range 3 {
		if err := qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		if got := qp.dbSQ.Counter(); got != uint16(i+1) {
			t.Errorf("post %d: doorbell record %d", i, got)
		}
		// BlueFlame: the whole WQE (3 segments) in the half this post used.
		half := doorbell.BlueFlameOffset + (i%2)*defaultBFSize
		if got := binary.BigEndian.Uint32(uar[half:]); got != uint32(i)<<8|uint32(OpRDMAWrite) {
			t.Errorf("post %d: UAR word %#x, want WQE index %d and RDMA_WRITE", i, got, i)
		}
		if got := binary.BigEndian.Uint32(uar[half+4:]); got != 0x1a2<<8|3 {
			t.Errorf("post %d: UAR qpn_ds %#x", i, got)
		}
		if s := qp.sq.slots[i]; s != (sqSlot{wrID: 7, op: WCRDMAWrite, next: uint16(i + 1), last: uint16(i)}) {
			t.Errorf("post %d: tracked %+v", i, s)
		}
	}
}

// A full send queue refuses posts until completions free it.
func TestPostSendQueueFull(t *testing.T) {
	qp, _ := testQP(t, &Context{}, 4)
	wr := SendWR{Opcode: OpSend, SGL: []wqe.SGE{{Addr: 0x2000, Length: 8, LKey: 1}}}
	for range 4 {
		if err := qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
	}
	if err := qp.PostSend(&wr); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("fifth post: %v, want ErrQueueFull", err)
	}
	qp.sq.tail.Store(1)
	if err := qp.PostSend(&wr); err != nil {
		t.Fatalf("after a completion: %v", err)
	}
}

func BenchmarkPostRDMAWrite(b *testing.B) {
	qp, _ := testQP(b, &Context{}, 256)
	wr := SendWR{Opcode: OpRDMAWrite, Flags: wqe.SendSignaled, RemoteAddr: 0x1000, RKey: 0x55,
		SGL: []wqe.SGE{{Addr: 0x2000, Length: 4096, LKey: 0x66}}}
	b.ReportAllocs()
	for b.Loop() {
		qp.sq.tail.Store(uint32(qp.sq.pi)) // as if polled
		if err := qp.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPoll(b *testing.B) {
	c := &Context{}
	cq := testCQ(b, c, 256, 0)
	qp, _ := testQP(b, c, 256)
	cq.attachLocked(qp)
	var cqe [cqeSize]byte
	binary.BigEndian.PutUint32(cqe[56:], 0x1a2) // sop_drop_qpn
	wc := make([]Completion, 1)
	b.ReportAllocs()
	for b.Loop() {
		i := cq.ci & 255
		binary.BigEndian.PutUint16(cqe[60:], uint16(cq.ci)) // wqe_counter
		cqe[63] = byte(cq.ci>>8) & 1                        // REQ, owner bit of this pass
		copy(cq.ring[i*cqeSize:], cqe[:])
		if n, err := cq.Poll(wc); n != 1 || err != nil {
			b.Fatal("no completion", err)
		}
	}
}
