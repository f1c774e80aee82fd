package mlx5

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/model"
	"golang.org/x/sys/unix"
)

// destroyWatch is the model with a look at each QP destroy: before runs
// as the driver asks for it, after once the device has done it (the QP's
// memory is still mapped then), and the device refuses the next refuse
// destroys of the QP with EBUSY.
type destroyWatch struct {
	seam.Device
	qp            atomic.Pointer[QP]
	before, after func(qp *QP)
	refuse        int
}

func (w *destroyWatch) destroy(isQP func(*QP) bool, destroy func() error) error {
	qp := w.qp.Load()
	if qp == nil || !isQP(qp) {
		return destroy()
	}
	w.before(qp)
	if w.refuse > 0 {
		w.refuse--
		return unix.EBUSY
	}
	if err := destroy(); err != nil {
		return err
	}
	w.after(qp)
	return nil
}

func (w *destroyWatch) DestroyQP(h seam.Handle) error {
	return w.destroy(func(qp *QP) bool { return qp.verbs && qp.handle == h }, func() error { return w.Device.DestroyQP(h) })
}

func (w *destroyWatch) ObjDestroy(h seam.Handle) error {
	return w.destroy(func(qp *QP) bool { return !qp.verbs && qp.obj != nil && qp.obj.handle == h }, func() error { return w.Device.ObjDestroy(h) })
}

// Issue 23 item 2: QP.Close asked the device to destroy the QP and only
// then stopped new posts and waited for those in flight, so a doorbell
// could follow the destroy (on a ConnectX it names a QP number the
// firmware may already have given to a new QP). When the destroy is
// asked, posts must be stopped (the guard closed), and the doorbell
// record must not move after the destroy, with a poster posting as fast
// as it can meanwhile. A destroy the
// device refuses leaves the QP usable, and Close can be tried again.
func TestQPCloseStopsPostsBeforeDestroy(t *testing.T) {
	for _, devx := range []bool{false, true} {
		name := "verbs"
		if devx {
			name = "DEVX"
		}
		t.Run(name, func(t *testing.T) {
			dev, err := model.New("cx7")
			if err != nil {
				t.Fatal(err)
			}
			w := &destroyWatch{Device: dev}
			c := newContext(w)
			defer c.Close()
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			cq, err := c.CreateCQ(CQOptions{Entries: 256, DEVX: devx})
			if err != nil {
				t.Fatal(err)
			}
			buf, err := AllocBuffer(8192)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			mr, err := pd.RegMR(buf.Bytes(), AccessLocalWrite|AccessRemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			path, err := c.LoopbackPath(1)
			if err != nil {
				t.Fatal(err)
			}
			wr := &SendWR{Opcode: OpRDMAWrite, Flags: SendSignaled, RemoteAddr: mr.addr + 4096, RKey: mr.rkey,
				SGL: []SGE{{Addr: mr.addr, Length: 64, LKey: mr.lkey}}}
			for round, refuse := range []int{1, 0} {
				qp, err := c.CreateQP(QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 64, DEVX: devx})
				if err != nil {
					t.Fatal(err)
				}
				if err := qp.Connect(qp.QPN(), path); err != nil {
					t.Fatal(err)
				}
				// The guard at each destroy asked (Close runs them here),
				// and the doorbell record's send counter then and 2 ms after
				// the destroy: no post may ring after it.
				var at []int32
				var counter uint16
				var rang []string
				w.before = func(qp *QP) {
					at = append(at, qp.g.v.Load())
					counter = qp.sq.bell.Counter()
				}
				w.after = func(qp *QP) {
					time.Sleep(2 * time.Millisecond)
					if c := qp.sq.bell.Counter(); c != counter {
						rang = append(rang, fmt.Sprintf("the send counter went from %d to %d", counter, c))
					}
				}
				w.refuse = refuse
				w.qp.Store(qp)
				stop := make(chan struct{})
				var wg sync.WaitGroup
				var posted atomic.Int64
				wg.Add(2)
				go func() { // the poster (a post racing a refused Close may get ErrClosed)
					defer wg.Done()
					for {
						if qp.PostSend(wr) == nil {
							posted.Add(1)
						}
						select {
						case <-stop:
							return
						default:
						}
					}
				}()
				go func() { // the poller: the queue keeps room
					defer wg.Done()
					wc := make([]Completion, 16)
					for {
						select {
						case <-stop:
							return
						default:
						}
						cq.Poll(wc)
					}
				}()
				for posted.Load() < 100 {
					time.Sleep(100 * time.Microsecond)
				}
				err = qp.Close()
				if refuse > 0 {
					if !errors.Is(err, unix.EBUSY) {
						t.Errorf("round %d: Close the device refused: %v, want EBUSY", round, err)
					}
					// Still usable: posts go on.
					for n, end := posted.Load(), time.Now().Add(mustCome); posted.Load() < n+100; {
						if time.Now().After(end) {
							t.Fatalf("round %d: no posts after the refused destroy", round)
						}
						time.Sleep(100 * time.Microsecond)
					}
				} else if err != nil {
					t.Errorf("round %d: Close: %v", round, err)
				}
				close(stop)
				wg.Wait()
				if refuse > 0 {
					if err := qp.PostSend(wr); err != nil && !errors.Is(err, ErrQueueFull) {
						t.Errorf("round %d: a post after the refused destroy: %v", round, err)
					}
					if err := qp.Close(); err != nil {
						t.Errorf("round %d: Close again: %v", round, err)
					}
				}
				if len(at) != 1+refuse {
					t.Fatalf("round %d: %d destroys asked, want %d", round, len(at), 1+refuse)
				}
				for _, v := range at {
					if v&guardClosed == 0 {
						t.Errorf("round %d: the device was asked to destroy the QP while posts could still start (guard %#x)", round, v)
					}
				}
				for _, r := range rang {
					t.Errorf("round %d: a post rang after the destroy: %s", round, r)
				}
				if f := dev.Faults(); len(f) > 0 {
					t.Errorf("round %d: %d model faults, the first %q", round, len(f), f[0])
				}
			}
		})
	}
}
