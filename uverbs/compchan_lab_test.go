package uverbs

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// postRecvRXE posts one receive the way rxe's provider does: a struct
// rxe_recv_wqe written into the receive queue that rxe shares by mmap
// (struct rxe_queue_buf, <rdma/rdma_user_rxe.h>), then the producer index.
func postRecvRXE(t *testing.T, c *Context, qpResp []byte, wrID uint64, mr *MR) {
	t.Helper()
	off, size := binary.LittleEndian.Uint64(qpResp[0:]), binary.LittleEndian.Uint32(qpResp[8:]) // rq_mi
	q, err := unix.Mmap(c.FD(), int64(off), int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(q) })
	const prodOff, dataOff = 128, 384 // producer_index, data[]
	logElem, mask := binary.LittleEndian.Uint32(q[0:]), binary.LittleEndian.Uint32(q[4:])
	prod := binary.LittleEndian.Uint32(q[prodOff:])
	w := q[dataOff+int(prod&mask)<<logElem:]
	binary.LittleEndian.PutUint64(w[0:], wrID)
	// struct rxe_dma_info at 16: length, resid, cur_sge, num_sge,
	// sge_offset, reserved, then struct rxe_sge at 40.
	binary.LittleEndian.PutUint32(w[16:], 64)
	binary.LittleEndian.PutUint32(w[20:], 64)
	binary.LittleEndian.PutUint32(w[28:], 1)
	binary.LittleEndian.PutUint64(w[40:], uint64(mr.Addr))
	binary.LittleEndian.PutUint32(w[48:], 64)
	binary.LittleEndian.PutUint32(w[52:], mr.LKey)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&q[prodOff])), (prod+1)&mask)
}

// A flushed receive completes on an armed CQ: its completion channel
// reports the CQ.
func TestLabCompChannelEvent(t *testing.T) {
	c := openLab(t)
	l := newLabQPs(t, c)
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQOptions{CQE: 16, Channel: ch, DriverOut: make([]byte, rxeCreateCQResp)})
	if err != nil {
		t.Fatal(err)
	}
	qpResp := make([]byte, rxeCreateQPResp)
	qp, err := c.CreateQP(QPInit{Type: QPTypeRC, PD: l.pd, SendCQ: l.cq, RecvCQ: cq,
		Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}, DriverOut: qpResp})
	if err != nil {
		t.Fatal(err)
	}
	mem := labMem(t, 4096)
	mr, err := l.pd.RegMR(mem, uint64(unsafePointer(mem)), AccessLocalWrite, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	modifyAndCheck(t, qp, QPAttr{State: QPStateInit, Port: 1, AccessFlags: AccessLocalWrite},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags)
	postRecvRXE(t, c, qpResp, 42, mr)
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	modifyAndCheck(t, qp, QPAttr{State: QPStateErr}, QPAttrState)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := ch.NextCQ(ctx)
	if err != nil {
		t.Fatalf("no completion event for the flushed receive: %v", err)
	}
	if got != cq {
		t.Errorf("event for %p, want the CQ %p", got, cq)
	}
}
