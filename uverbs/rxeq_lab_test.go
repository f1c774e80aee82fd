package uverbs

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/rxeabi"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

// A test-only poster for rxe's own queue format (mlx5go's data path
// speaks mlx5's): it lets the lab move data through rxe0, whose queues
// are the rxeabi layouts in memory that rxe shares by mmap of the uverbs
// file. The facts it follows are rdma_user_rxe.h's and rdma-core 44.0's
// providers/rxe: the poster writes an element, then publishes the
// producer index with release order; a send is kicked by a POST_SEND
// write command with no work requests (for a user QP the kernel then only
// schedules rxe's requester, which reads the mmaped send queue); the
// poller reads the kernel's producer index with acquire order, the
// element, then publishes its consumer index.

// rxeQueue is one mmaped rxe queue.
type rxeQueue struct {
	mem  []byte
	hdr  *rxeabi.RxeQueueBuf
	data []byte
}

// mapRXEQueue maps the queue mi describes.
func mapRXEQueue(t testing.TB, c *Context, mi rxeabi.Mminfo) *rxeQueue {
	t.Helper()
	if mi.Size < uint32(unsafe.Sizeof(rxeabi.RxeQueueBuf{})) {
		t.Fatalf("rxe queue of %d bytes: no room for its header", mi.Size)
	}
	mem, err := unix.Mmap(c.FD(), int64(mi.Offset), int(mi.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap of rxe queue at %#x (%d bytes): %v", mi.Offset, mi.Size, err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	q := &rxeQueue{mem: mem, hdr: (*rxeabi.RxeQueueBuf)(unsafe.Pointer(&mem[0])), data: mem[unsafe.Sizeof(rxeabi.RxeQueueBuf{}):]}
	if n := (uint64(q.hdr.IndexMask) + 1) << q.hdr.Log2ElemSize; n > uint64(len(q.data)) {
		t.Fatalf("rxe queue: %d elements of %d bytes do not fit its %d bytes", q.hdr.IndexMask+1, 1<<q.hdr.Log2ElemSize, len(q.data))
	}
	return q
}

func (q *rxeQueue) elem(i uint32) unsafe.Pointer {
	return unsafe.Pointer(&q.data[(i&q.hdr.IndexMask)<<q.hdr.Log2ElemSize])
}

// produce returns the element at the producer index, or nil if the queue
// is full; publish makes it the kernel's.
func (q *rxeQueue) produce() unsafe.Pointer {
	prod := atomic.LoadUint32(&q.hdr.ProducerIndex)
	if (prod+1)&q.hdr.IndexMask == atomic.LoadUint32(&q.hdr.ConsumerIndex) {
		return nil
	}
	return q.elem(prod)
}

func (q *rxeQueue) publish() {
	atomic.StoreUint32(&q.hdr.ProducerIndex, (atomic.LoadUint32(&q.hdr.ProducerIndex)+1)&q.hdr.IndexMask)
}

// rxeQP is an RC QP on rxe0 with its send and receive queues mapped.
type rxeQP struct {
	qp     *QP
	sq, rq *rxeQueue
	ssn    uint32
}

// newRXEQP creates an RC QP on pd with cq for both queues, and maps them.
func newRXEQP(t testing.TB, c *Context, pd *PD, cq *CQ) *rxeQP {
	t.Helper()
	resp := make([]byte, rxeCreateQPResp)
	qp, err := c.CreateQP(QPInit{Type: QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq,
		Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}, DriverOut: resp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Close() })
	r := *(*rxeabi.RxeCreateQpResp)(unsafe.Pointer(&resp[0]))
	return &rxeQP{qp: qp, sq: mapRXEQueue(t, c, r.SqMi), rq: mapRXEQueue(t, c, r.RqMi)}
}

// rxeWR is one single-SGE work request.
type rxeWR struct {
	wrID       uint64
	opcode     uint32 // rxeabi.IB_WR_*
	sge        rxeabi.RxeSge
	remoteAddr uint64
	rkey       uint32
}

// postSend writes one signaled send queue element and kicks the
// requester with an empty POST_SEND.
func (q *rxeQP) postSend(wr rxeWR) error {
	p := q.sq.produce()
	if p == nil {
		return fmt.Errorf("rxe send queue of QP %#x is full", q.qp.QPN)
	}
	w := (*rxeabi.RxeSendWqe)(p)
	*w = rxeabi.RxeSendWqe{Wr: rxeabi.RxeSendWr{WrID: wr.wrID, Opcode: wr.opcode, SendFlags: rxeabi.IB_SEND_SIGNALED},
		Iova: wr.remoteAddr, Ssn: q.ssn,
		Dma: rxeabi.RxeDmaInfo{Length: wr.sge.Length, Resid: wr.sge.Length, NumSge: 1}}
	binary.LittleEndian.PutUint64(w.Wr.Wr[rxeabi.WrRdmaRemoteAddr:], wr.remoteAddr)
	binary.LittleEndian.PutUint32(w.Wr.Wr[rxeabi.WrRdmaRkey:], wr.rkey)
	*(*rxeabi.RxeSge)(unsafe.Add(p, unsafe.Sizeof(*w))) = wr.sge
	q.ssn++
	q.sq.publish()
	return q.doorbell()
}

// doorbell sends struct ib_uverbs_post_send with no work requests; the
// kernel requires wqe_size to be at least sizeof(struct
// ib_uverbs_send_wr), 56 bytes.
func (q *rxeQP) doorbell() error {
	const sendWRSize = 56
	in := make([]byte, 24) // response, qp_handle, wr_count, sge_count, wqe_size
	binary.LittleEndian.PutUint32(in[8:], q.qp.handle)
	binary.LittleEndian.PutUint32(in[20:], sendWRSize)
	return q.qp.ctx.write("post send doorbell", uverbsabi.IB_USER_VERBS_CMD_POST_SEND, in, make([]byte, 4), nil, nil)
}

// postRecv writes one receive queue element; rxe's responder reads the
// queue when a message arrives, so no kick is needed.
func (q *rxeQP) postRecv(wrID uint64, sge rxeabi.RxeSge) error {
	p := q.rq.produce()
	if p == nil {
		return fmt.Errorf("rxe receive queue is full")
	}
	w := (*rxeabi.RxeRecvWqe)(p)
	*w = rxeabi.RxeRecvWqe{WrID: wrID, Dma: rxeabi.RxeDmaInfo{Length: sge.Length, Resid: sge.Length, NumSge: 1}}
	*(*rxeabi.RxeSge)(unsafe.Add(p, unsafe.Sizeof(*w))) = sge
	q.rq.publish()
	return nil
}

// rxeCQ is a CQ on rxe0 with its ring mapped.
type rxeCQ struct {
	cq *CQ
	q  *rxeQueue
}

func newRXECQ(t testing.TB, c *Context) *rxeCQ {
	t.Helper()
	resp := make([]byte, rxeCreateCQResp)
	cq, err := c.CreateCQ(CQOptions{CQE: 64, DriverOut: resp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Close() })
	r := *(*rxeabi.RxeCreateCqResp)(unsafe.Pointer(&resp[0]))
	q := mapRXEQueue(t, c, r.Mi)
	if n := uintptr(1) << q.hdr.Log2ElemSize; n < unsafe.Sizeof(rxeabi.IbUverbsWc{}) {
		t.Fatalf("rxe CQ elements of %d bytes cannot hold struct ib_uverbs_wc", n)
	}
	return &rxeCQ{cq: cq, q: q}
}

// poll returns the next completion, waiting at most d for it.
func (c *rxeCQ) poll(d time.Duration) (rxeabi.IbUverbsWc, error) {
	deadline := time.Now().Add(d)
	for {
		cons := atomic.LoadUint32(&c.q.hdr.ConsumerIndex)
		if atomic.LoadUint32(&c.q.hdr.ProducerIndex) != cons {
			wc := *(*rxeabi.IbUverbsWc)(c.q.elem(cons))
			atomic.StoreUint32(&c.q.hdr.ConsumerIndex, (cons+1)&c.q.hdr.IndexMask)
			return wc, nil
		}
		if time.Now().After(deadline) {
			return rxeabi.IbUverbsWc{}, fmt.Errorf("no completion on rxe CQ in %v", d)
		}
		time.Sleep(time.Millisecond)
	}
}

// expect polls one completion and checks its work request, status and
// opcode.
func (c *rxeCQ) expect(t testing.TB, wrID uint64, opcode uint32) rxeabi.IbUverbsWc {
	t.Helper()
	wc, err := c.poll(10 * time.Second)
	if err != nil {
		t.Fatalf("waiting for work request %d: %v", wrID, err)
	}
	if wc.WrID != wrID || wc.Status != rxeabi.IB_WC_SUCCESS || wc.Opcode != opcode {
		t.Fatalf("completion %+v, want wr_id %d, status success, opcode %d", wc, wrID, opcode)
	}
	return wc
}

// newRXELoopback makes a CQ and an RC QP on pd, the QP connected to
// itself over rxe0's RoCE v2 GID and in RTS.
func newRXELoopback(t testing.TB, c *Context, pd *PD) (*rxeCQ, *rxeQP) {
	t.Helper()
	cq := newRXECQ(t, c)
	q := newRXEQP(t, c, pd, cq.cq)
	l := &labQPs{c: c, pd: pd, cq: cq.cq}
	l.gidIdx, l.gid = labRoCEv2GID(t)
	l.connectRC(t, q.qp, q.qp)
	return cq, q
}

// regPlainMR registers mem for local write and remote read and write.
func regPlainMR(t testing.TB, pd *PD, mem []byte) *MR {
	t.Helper()
	mr, err := pd.RegMR(mem, uint64(unsafePointer(mem)), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	return mr
}
