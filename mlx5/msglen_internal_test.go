package mlx5

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/wqe"
)

// A send with an SGE of 2^31 bytes or more, or a message past the QP's
// maximum, writes no byte of the send queue and moves no counter; nor
// does the batch it poisons.
func TestOverlongSendWritesNothing(t *testing.T) {
	qp, uar := testQP(t, &Context{}, 64)
	qp.sq.maxMsg = 1 << 30
	good := SendWR{Opcode: OpRDMAWrite, RemoteAddr: 0x1000, RKey: 1, SGL: []SGE{{Addr: 0x2000, Length: 64, LKey: 2}}}
	for _, sgl := range [][]SGE{
		{{Addr: 0x2000, Length: 1 << 31, LKey: 2}},
		{{Addr: 0x2000, Length: 64, LKey: 2}, {Addr: 0x2000, Length: 0xffffffff, LKey: 2}},
		{{Addr: 0x2000, Length: 1 << 30, LKey: 2}, {Addr: 0x2000, Length: 1, LKey: 2}},
	} {
		bad := SendWR{Opcode: OpRDMARead, RemoteAddr: 0x1000, RKey: 1, SGL: sgl}
		for _, post := range []func() error{
			func() error { return qp.PostSend(&bad) },
			func() error { return qp.PostSendList([]SendWR{good, good, bad}) },
			func() error { return qp.Begin().Add(&good).Add(&bad).Add(&good).Commit() },
		} {
			if err := post(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v: %v, want ErrInvalid", sgl, err)
			}
			if qp.sq.pi != 0 || qp.sq.bell.Counter() != 0 || !bytes.Equal(qp.sq.ring, make([]byte, len(qp.sq.ring))) ||
				!bytes.Equal(uar, make([]byte, len(uar))) {
				t.Fatalf("%v: the send queue moved or was written (pi %d)", sgl, qp.sq.pi)
			}
		}
	}
}

// A receive list with an SGE of 2^31 bytes or more leaves the receive
// queue as it was: the WQEs written before it are zeroed again, the
// producer counter and the doorbell record do not move.
func TestOverlongRecvWritesNothing(t *testing.T) {
	qp, _ := testQP(t, &Context{}, 16)
	qp.rq.wrID, qp.rq.ring, qp.rq.stride, qp.rq.maxSGE = make([]uint64, 8), make([]byte, 8*32), 32, 2
	rec := make([]byte, 8)
	var err error
	if qp.dbRQ, err = doorbell.NewRQ(rec); err != nil {
		t.Fatal(err)
	}
	good := RecvWR{WrID: 1, SGL: []SGE{{Addr: 0x2000, Length: 64, LKey: 2}}}
	// Four posted and consumed: the list starts at ring index 4 and wraps.
	for range 4 {
		if err := qp.PostRecv(9, good.SGL); err != nil {
			t.Fatal(err)
		}
	}
	qp.rq.tail.Store(4)
	// The list takes slots 4 to 7 and 0, all free (slot 0's WQE was
	// consumed); slots 1 to 3 keep their bytes.
	want := bytes.Clone(qp.rq.ring)
	clear(want[4*32:])
	clear(want[:32])
	for _, bad := range []SGE{{Addr: 0x2000, Length: 1 << 31, LKey: 2}, {Addr: 0x2000, Length: 0xffffff00, LKey: 2}} {
		wrs := []RecvWR{good, good, good, good, {WrID: 5, SGL: []SGE{good.SGL[0], bad}}}
		err := qp.PostRecvList(wrs)
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, wqe.ErrSGELength) {
			t.Fatalf("%#x: %v, want ErrInvalid (wqe.ErrSGELength)", bad.Length, err)
		}
		if qp.rq.pi != 4 || !bytes.Equal(rec, []byte{0, 0, 0, 4, 0, 0, 0, 0}) || !bytes.Equal(qp.rq.ring, want) {
			t.Fatalf("%#x: pi %d, doorbell record %x, ring %x", bad.Length, qp.rq.pi, rec, qp.rq.ring)
		}
	}
}
