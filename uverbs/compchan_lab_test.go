package uverbs

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/rxeabi"
)

// postRecvRXE posts one 64-byte receive into mr on the receive queue
// qpResp (rxe's struct rxe_create_qp_resp) describes, with the poster of
// rxeq_lab_test.go.
func postRecvRXE(t *testing.T, c *Context, qpResp []byte, wrID uint64, mr *MR) {
	t.Helper()
	r := *(*rxeabi.RxeCreateQpResp)(unsafe.Pointer(&qpResp[0]))
	q := &rxeQP{rq: mapRXEQueue(t, c, r.RqMi)}
	if err := q.postRecv(wrID, rxeabi.RxeSge{Addr: uint64(mr.Addr), Length: 64, Lkey: mr.LKey}); err != nil {
		t.Fatal(err)
	}
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
