package mlx5_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// The data path's promises on the software ConnectX: exact queue
// accounting, one completion per work request, safe teardown, errors
// that name what failed. Issue 10 lists the defects these tests caught.

// rig is a context on the model with a PD, a CQ and a registered buffer.
type rig struct {
	c   *mlx5.Context
	dev *model.Device
	pd  *mlx5.PD
	cq  *mlx5.CQ
	buf *mlx5.Buffer
	mr  *mlx5.MR
}

func newRig(t testing.TB, profile string, opt model.Options, cqEntries int) *rig {
	t.Helper()
	dev, err := model.NewWithOptions(profile, opt)
	if err != nil {
		t.Fatal(err)
	}
	c := mlx5.NewContext(dev)
	t.Cleanup(func() { c.Close() })
	r := &rig{c: c, dev: dev}
	if r.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if r.cq, err = c.CreateCQ(mlx5.CQOptions{Entries: cqEntries}); err != nil {
		t.Fatal(err)
	}
	if r.buf, err = mlx5.AllocBuffer(1 << 16); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.buf.Close() })
	r.mr, err = r.pd.RegMR(r.buf.Bytes(), mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// qp creates a QP on the rig's PD and CQ, connected to itself if connect.
func (r *rig) qp(t testing.TB, o mlx5.QPOptions, connect bool) *mlx5.QP {
	t.Helper()
	o.PD, o.SendCQ, o.RecvCQ = r.pd, r.cq, r.cq
	qp, err := r.c.CreateQP(o)
	if err != nil {
		t.Fatal(err)
	}
	if connect {
		path, err := r.c.LoopbackPath(1)
		if err != nil {
			t.Fatal(err)
		}
		if err := qp.Connect(qp.QPN(), path); err != nil {
			t.Fatal(err)
		}
	}
	return qp
}

// write is an RDMA WRITE of 64 bytes within the rig's buffer.
func (r *rig) write(wrID uint64, flags mlx5.SendFlags, rkey uint32) *mlx5.SendWR {
	return &mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpRDMAWrite, Flags: flags, RemoteAddr: r.mr.Addr() + 4096, RKey: rkey,
		SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: 64, LKey: r.mr.LKey()}}}
}

// configure is a T10-DIF (both domains) configure of m over 512 bytes.
func (r *rig) configure(wrID uint64, m *mlx5.Mkey) *mlx5.MkeyConfigureWR {
	return &mlx5.MkeyConfigureWR{WrID: wrID, Mkey: m, Flags: mlx5.SendSignaled,
		List: []mlx5.KLM{{Addr: r.mr.Addr(), ByteCount: 512, Mkey: r.mr.LKey()}}, Sig: t10dif()}
}

func t10dif() *sig.BlockAttr {
	d := func() *sig.Domain {
		return &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512, T10DIF: &sig.T10DIF{Seed: 0xffff, AppTag: 1, RefTag: 2}}
	}
	return &sig.BlockAttr{Mem: d(), Wire: d(), CheckMask: 0xff}
}

// poll polls the rig's CQ until want completions, for d at most (or
// mustCome if that is longer: they must come), or for the whole d when
// want < 0, and returns them with the first error Poll gave.
func (r *rig) poll(t testing.TB, want int, d time.Duration) ([]mlx5.Completion, error) {
	t.Helper()
	var got []mlx5.Completion
	wc := make([]mlx5.Completion, 16)
	var first error
	if want >= 0 {
		d = max(d, mustCome) // a bound on completions that must come
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Microsecond) {
		n, err := r.cq.Poll(wc)
		got = append(got, wc[:n]...)
		if err != nil && first == nil {
			first = err
		}
		if want >= 0 && len(got) >= want {
			break
		}
	}
	// Anything more is too much.
	time.Sleep(10 * time.Millisecond)
	n, err := r.cq.Poll(wc)
	if err != nil && first == nil {
		first = err
	}
	return append(got, wc[:n]...), first
}

func mkey(t testing.TB, r *rig, pd *mlx5.PD, entries int) *mlx5.Mkey {
	t.Helper()
	m, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: entries, BlockSignature: true})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Item 2: every post checks the WQEBBs it writes against the consumer
// counter; a work request larger than the QP was made for is refused
// whatever the room.
func TestPostRoomIsExact(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	small := r.qp(t, mlx5.QPOptions{MaxSendWR: 8}, false)
	m := mkey(t, r, r.pd, 1)
	if err := small.PostMkeyConfigure(r.configure(9, m)); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) || !strings.Contains(err.Error(), "MkeyConfigure") {
		t.Errorf("configure on a QP made without MkeyConfigure: %v, want ErrInvalid naming MkeyConfigure", err)
	}

	// A QP in RST runs nothing: posted WQEBBs stay unconsumed. The QP
	// takes 2 work requests of the largest kind, a 6-WQEBB configure: its
	// ring has 16 WQEBBs.
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 2, MkeyConfigure: true, MaxMkeyEntries: 1}, false)
	for i := range 11 {
		if err := qp.PostSend(r.write(uint64(i), mlx5.SendSignaled, r.mr.RKey())); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	// 11 of 16 WQEBBs are in use: a 6-WQEBB configure does not fit, a
	// 1-WQEBB send does.
	if err := qp.PostMkeyConfigure(r.configure(7, m)); !errors.Is(mlx5.Checked(t, err), mlx5.ErrQueueFull) {
		t.Errorf("configure with 11 of 16 WQEBBs in use: %v, want ErrQueueFull", err)
	}
	if err := qp.PostSend(r.write(11, mlx5.SendSignaled, r.mr.RKey())); err != nil {
		t.Errorf("send with 11 of 16 WQEBBs in use: %v", err)
	}
	// Free the queue: connect, and every WR completes once.
	path, _ := r.c.LoopbackPath(1)
	if err := qp.Connect(qp.QPN(), path); err != nil {
		t.Fatal(err)
	}
	got, err := r.poll(t, 12, time.Second)
	if err != nil || len(got) != 12 {
		t.Fatalf("%d completions (%v), want the 12 signaled sends", len(got), err)
	}
	if err := qp.PostMkeyConfigure(r.configure(7, m)); err != nil {
		t.Errorf("configure on an empty queue: %v", err)
	}

	// An mkey with more entries than the QP was made for.
	big := mkey(t, r, r.pd, 32)
	wr := r.configure(8, big)
	for i := range 32 {
		wr.List = append(wr.List, mlx5.KLM{Addr: r.mr.Addr() + uint64(512*(i+1)), ByteCount: 512, Mkey: r.mr.LKey()})
	}
	wr.List = wr.List[1:]
	wr.Sig = nil
	if err := qp.PostMkeyConfigure(wr); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) || !strings.Contains(err.Error(), "inline data") {
		t.Errorf("configure of 32 entries on a QP made for 1: %v, want ErrInvalid naming the QP's inline data", err)
	}
}

// Item 3: Close racing posts and polls never faults; later calls return
// ErrClosed. Run it under -race: the window is wide there.
func TestCloseDuringPostAndPoll(t *testing.T) {
	for i := range 40 {
		r := newRig(t, "cx7", model.Options{}, 1024)
		qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 64}, true)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				err := qp.PostSend(r.write(uint64(j), mlx5.SendSignaled, r.mr.RKey()))
				if errors.Is(err, mlx5.ErrClosed) {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			wc := make([]mlx5.Completion, 8)
			for {
				if _, err := r.cq.Poll(wc); errors.Is(err, mlx5.ErrClosed) {
					return
				}
			}
		}()
		time.Sleep(time.Duration(i%5) * 100 * time.Microsecond)
		if err := qp.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.cq.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err := qp.PostSend(r.write(1, 0, r.mr.RKey())); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) || !strings.Contains(err.Error(), "post send QP") {
			t.Fatalf("post after Close: %v", err)
		}
		if err := qp.PostRecv(1, nil); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) && !errors.Is(err, mlx5.ErrInvalid) {
			t.Fatalf("post recv after Close: %v", err)
		}
		r.c.Close()
	}
}

// Item 4: an mkey configure is one work request: one completion, flushed
// or failed.
func TestMkeyConfigureCompletesOnce(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 256)
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 8, MkeyConfigure: true, MaxMkeyEntries: 1}, true)
	m := mkey(t, r, r.pd, 1)

	// A configure whose UMR fails: an mkey of another PD. Its SET_PSVs
	// are flushed; the configure behind it is flushed whole.
	pd2, err := r.c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	other := mkey(t, r, pd2, 1)
	if err := qp.PostMkeyConfigure(r.configure(1, other)); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostMkeyConfigure(r.configure(2, m)); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend(r.write(3, 0, r.mr.RKey())); err != nil { // unsignaled: flushed
		t.Fatal(err)
	}
	got, err := r.poll(t, 3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []mlx5.Completion{
		{WrID: 1, Status: mlx5.WCLocProtErr, Opcode: mlx5.WCUMR, QPN: qp.QPN()},
		{WrID: 2, Status: mlx5.WCWRFlushErr, Opcode: mlx5.WCUMR, QPN: qp.QPN()},
		{WrID: 3, Status: mlx5.WCWRFlushErr, Opcode: mlx5.WCRDMAWrite, QPN: qp.QPN()},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("completions\n got %+v\nwant %+v", got, want)
	}
	// The queue is free again: each configure's 6 WQEBBs were given back.
	for i := range 8 {
		if err := qp.PostMkeyConfigure(r.configure(uint64(10+i), m)); err != nil {
			t.Fatalf("configure %d after the flush: %v", i, err)
		}
	}
	if got, _ := r.poll(t, 8, time.Second); len(got) != 8 {
		t.Errorf("%d completions for 8 flushed configures: %+v", len(got), got)
	}
}

// Item 5: a refused CQ destroy leaves the CQ whole; CreateQP and CQ.Close
// do not race.
func TestFailedCQCloseKeepsCQ(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	// A DEVX QP the driver does not know uses the CQ, so the device
	// refuses DESTROY_CQ.
	pdo, out := create(t, r.c, mailbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD), 16)
	ub, err := mlx5.AllocBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer ub.Close()
	um, err := r.c.RegUMem(ub.Bytes(), 1)
	if err != nil {
		t.Fatal(err)
	}
	in := mailbox(prm.CreateQpIn.Layout(), prm.MLX5_CMD_OP_CREATE_QP)
	qpc := prm.CreateQpIn.Qpc
	prm.Qpc.Pd.At(qpc).Set(in, prm.AllocPdOut.Pd.Get(out))
	prm.Qpc.CqnSnd.At(qpc).Set(in, uint64(r.cq.CQN()))
	prm.Qpc.CqnRcv.At(qpc).Set(in, uint64(r.cq.CQN()))
	prm.Qpc.RqType.At(qpc).Set(in, 3)
	prm.Qpc.DbrUmemId.At(qpc).Set(in, uint64(um.ID()))
	prm.CreateQpIn.WqUmemId.Set(in, uint64(um.ID()))
	o, _ := create(t, r.c, in, 16)
	if err := r.cq.Close(); err == nil {
		t.Fatal("DESTROY_CQ of a CQ in use succeeded")
	}
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 8}, true)
	if err := qp.PostSend(r.write(1, mlx5.SendSignaled, r.mr.RKey())); err != nil {
		t.Fatal(err)
	}
	if got, err := r.poll(t, 1, time.Second); len(got) != 1 || err != nil {
		t.Errorf("after a refused Close the CQ gave %d completions (%v), want 1", len(got), err)
	}
	for _, x := range []interface{ Close() error }{o, qp, um, pdo, r.cq} {
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCreateQPRacesCQClose(t *testing.T) {
	for range 50 {
		r := newRig(t, "cx7", model.Options{}, 64)
		var qp *mlx5.QP
		var qerr, cerr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			qp, qerr = r.c.CreateQP(mlx5.QPOptions{PD: r.pd, SendCQ: r.cq, RecvCQ: r.cq, MaxSendWR: 4})
		}()
		go func() { defer wg.Done(); cerr = r.cq.Close() }()
		wg.Wait()
		switch {
		case qerr == nil && cerr == nil:
			t.Fatal("a QP was created on a CQ that was destroyed")
		case qerr == nil:
			if !errors.Is(cerr, unix.EBUSY) {
				t.Fatalf("close of a CQ with a QP: %v, want EBUSY", cerr)
			}
			if err := qp.Close(); err != nil {
				t.Fatal(err)
			}
		case !errors.Is(qerr, mlx5.ErrClosed):
			t.Fatalf("create on a closed CQ: %v, want ErrClosed", qerr)
		}
		r.c.Close()
		if n := r.dev.Objects(); n != 0 {
			t.Fatalf("%d objects left", n)
		}
	}
}

// Item 6: Context.Close closes every child, so posts fail and mappings
// go; unreachable Buffers and UARs are unmapped by their cleanup.
func TestContextCloseClosesChildren(t *testing.T) {
	before := mlx5.LiveBuffers()
	r := newRig(t, "cx7", model.Options{}, 64)
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 8, MkeyConfigure: true}, true)
	m := mkey(t, r, r.pd, 1)
	uar, err := r.c.AllocUAR(mlx5.UARNonCached)
	if err != nil {
		t.Fatal(err)
	}
	q, err := r.c.NewAsyncCmdQueue()
	if err != nil {
		t.Fatal(err)
	}
	if mlx5.LiveBuffers() <= before+1 {
		t.Fatalf("the QP and CQ map no queues?")
	}
	if err := r.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend(r.write(1, 0, r.mr.RKey())); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("post after Context.Close: %v, want ErrClosed", err)
	}
	if err := qp.PostMkeyConfigure(r.configure(1, m)); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("configure after Context.Close: %v, want ErrClosed", err)
	}
	if _, err := r.cq.Poll(make([]mlx5.Completion, 1)); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("poll after Context.Close: %v, want ErrClosed", err)
	}
	if _, err := q.Next(t.Context(), make([]byte, 64)); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("async queue after Context.Close: %v, want ErrClosed", err)
	}
	if uar.Page() != nil {
		t.Error("the UAR is still mapped")
	}
	if got := mlx5.LiveBuffers(); got != before+1 { // the rig's own buffer
		t.Errorf("%d buffer mappings left, want %d", got, before+1)
	}
	if n := r.dev.Objects(); n != 0 {
		t.Errorf("%d model objects left", n)
	}
	for _, x := range []interface{ Close() error }{m, qp, r.cq, r.mr, r.pd, uar, q} {
		if err := x.Close(); err != nil {
			t.Errorf("%T.Close after the context: %v", x, err)
		}
	}
}

func TestUnreachableBufferAndUARAreUnmapped(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	base, objs := mlx5.LiveBuffers(), r.dev.Objects()
	func() {
		if _, err := mlx5.AllocBuffer(4096); err != nil {
			t.Fatal(err)
		}
		if _, err := r.c.AllocUAR(mlx5.UARNonCached); err != nil {
			t.Fatal(err)
		}
	}()
	for i := 0; i < 100 && (mlx5.LiveBuffers() != base || r.dev.Objects() != objs); i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := mlx5.LiveBuffers(); got != base {
		t.Errorf("an unreachable Buffer is still mapped (%d, want %d)", got, base)
	}
	if got := r.dev.Objects(); got != objs {
		t.Errorf("an unreachable UAR is still allocated or mapped (%d model objects, want %d)", got, objs)
	}
}

// Item 7: a closed mkey is refused before anything is posted.
func TestClosedMkeyIsRefused(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 8, MkeyConfigure: true}, true)
	m := mkey(t, r, r.pd, 1)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostMkeyConfigure(r.configure(2, m)); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("configure of a closed mkey: %v, want ErrClosed", err)
	}
	if err := qp.PostSend(r.write(3, mlx5.SendSignaled, r.mr.RKey())); err != nil {
		t.Fatal(err)
	}
	if got, err := r.poll(t, 1, time.Second); err != nil || len(got) != 1 || got[0].Status != mlx5.WCSuccess {
		t.Errorf("the QP after the refused configure: %+v %v, want one good completion", got, err)
	}
}

// Item 9: a poster and a poller in two goroutines are race-clean.
func TestPosterAndPollerAreRaceClean(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 1024)
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 64, MaxRecvWR: 64}, true)
	const n = 3000
	done := make(chan error, 1)
	go func() {
		for i := range n {
			for {
				err := qp.PostSend(r.write(uint64(i), mlx5.SendSignaled, r.mr.RKey()))
				if err == nil {
					break
				}
				if !errors.Is(err, mlx5.ErrQueueFull) {
					done <- err
					return
				}
				runtime.Gosched()
			}
		}
		done <- nil
	}()
	wc := make([]mlx5.Completion, 16)
	for got := 0; got < n; {
		k, err := r.cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range wc[:k] {
			if c.WrID != uint64(got) || c.Status != mlx5.WCSuccess {
				t.Fatalf("completion %d: %+v", got, c)
			}
			got++
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Item 13: nil work requests, validation before room, errors that name
// the operation and the QP, ErrClosed after Close, a firmware status
// printed once.
func TestPostErrors(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 2, MkeyConfigure: true}, false)
	if err := qp.PostSend(nil); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) {
		t.Errorf("PostSend(nil): %v", err)
	}
	if err := qp.PostMkeyConfigure(nil); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) {
		t.Errorf("PostMkeyConfigure(nil): %v", err)
	}
	for {
		if err := qp.PostSend(r.write(1, 0, r.mr.RKey())); err != nil {
			if !errors.Is(err, mlx5.ErrQueueFull) {
				t.Fatal(err)
			}
			want := fmt.Sprintf("mlx5: post send QP %#x: work queue full", qp.QPN())
			if err.Error() != want {
				t.Errorf("full: %q, want %q", err, want)
			}
			break
		}
	}
	bad := r.write(3, 0, r.mr.RKey())
	bad.SGL = append(bad.SGL, bad.SGL[0], bad.SGL[0]) // 3 SGEs, the QP takes 1
	if err := qp.PostSend(bad); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) || !errors.Is(err, wqe.ErrTooManySGEs) {
		t.Errorf("an invalid WR on a full queue: %v, want its own error", err)
	}
	if err := qp.PostSend(&mlx5.SendWR{Opcode: 0x77}); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) {
		t.Errorf("unknown opcode: %v", err)
	}
}

func TestCallsAfterCloseReturnErrClosed(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	o, _ := create(t, r.c, mailbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD), 16)
	q, err := r.c.NewAsyncCmdQueue()
	if err != nil {
		t.Fatal(err)
	}
	query := mailbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	o2, _ := create(t, r.c, mailbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD), 16)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 2}, false)
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	path, _ := r.c.LoopbackPath(1)
	for name, err := range map[string]error{
		"DevxObj.Query":        o.Query(query, make([]byte, 272)),
		"DevxObj.Modify":       o.Modify(query, make([]byte, 272)),
		"DevxObj.QueryAsync":   o.QueryAsync(query, 272, 1, q),
		"QueryAsync on closed": o2.QueryAsync(query, 272, 1, q),
		"QP.Connect":           qp.Connect(qp.QPN(), path),
	} {
		if !errors.Is(err, mlx5.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if _, err := q.Next(t.Context(), make([]byte, 64)); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("AsyncCmdQueue.Next after Close: %v", err)
	}
	o2.Close()
}

func TestFirmwareErrorPrintsStatusOnce(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	in := mailbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_VPORT_STATE)
	err := r.c.GeneralCmd(in, make([]byte, 64))
	if !errors.Is(mlx5.Checked(t, err), prm.MLX5_CMD_STAT_BAD_OP_ERR) || !errors.Is(err, unix.EREMOTEIO) {
		t.Fatalf("%v: want BAD_OP_ERR and EREMOTEIO", err)
	}
	if s := err.Error(); strings.Count(s, "BAD_OP_ERR") != 1 || strings.Count(s, "QUERY_VPORT_STATE") != 1 {
		t.Errorf("status or command printed more than once: %s", s)
	}
}

// waitState waits until the model's QP qpn is in state st.
func waitState(t *testing.T, dev *model.Device, qpn uint32, st uint8) {
	t.Helper()
	for end := time.Now().Add(mustCome); time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
		if s, _ := dev.QPState(qpn); s == st {
			return
		}
	}
	s, _ := dev.QPState(qpn)
	t.Fatalf("QP %#x in state %#x, want %#x", qpn, s, st)
}

// Item 1: the CQEs of a closed QP are never reported, not even as those
// of the next QP, which the firmware gave the same number.
func TestCloseDropsStaleCQEs(t *testing.T) {
	r := newRig(t, "cx7", model.Options{ReuseQPN: true}, 64)
	a := r.qp(t, mlx5.QPOptions{MaxSendWR: 8}, true)
	for i := range 3 {
		if err := a.PostSend(r.write(uint64(100+i), mlx5.SendSignaled, r.mr.RKey())); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.PostSend(r.write(103, mlx5.SendSignaled, 0xbad00)); err != nil {
		t.Fatal(err)
	}
	// In ERR, all four CQEs are in the CQ, unpolled.
	waitState(t, r.dev, a.QPN(), model.StateERR)
	qpn := a.QPN()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := r.qp(t, mlx5.QPOptions{MaxSendWR: 8}, true)
	if b.QPN() != qpn {
		t.Fatalf("the model gave QPN %#x, not the closed QP's %#x", b.QPN(), qpn)
	}
	if err := b.PostSend(r.write(200, mlx5.SendSignaled, r.mr.RKey())); err != nil {
		t.Fatal(err)
	}
	got, err := r.poll(t, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []mlx5.Completion{{WrID: 200, Status: mlx5.WCSuccess, Opcode: mlx5.WCRDMAWrite, QPN: qpn}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("completions after the QP number came back:\n got %+v\nwant %+v", got, want)
	}
}

// Item 8: an overrun is reported: the device raises the CQ error event,
// and Poll returns ErrCQOverrun after the CQEs it did write.
func TestCQOverrunIsReported(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 2) // a ring of 4
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 8}, true)
	for i := range 6 {
		if err := qp.PostSend(r.write(uint64(i), mlx5.SendSignaled, r.mr.RKey())); err != nil {
			t.Fatal(err)
		}
	}
	// Poll only once the device has overrun the ring: a poll racing the
	// device would free entries and let up to 5 of the 6 in, which is
	// right but says nothing of the ring's bound.
	for end := time.Now().Add(mustCome); !slices.ContainsFunc(r.dev.Faults(), func(f string) bool { return strings.Contains(f, "overran") }); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("6 completions due on a CQ of 4: the device never overran it (faults %q)", r.dev.Faults())
		}
	}
	var got []mlx5.Completion
	var err error
	wc := make([]mlx5.Completion, 8)
	for end := time.Now().Add(mustCome); err == nil && time.Now().Before(end); time.Sleep(time.Millisecond) {
		var n int
		n, err = r.cq.Poll(wc)
		got = append(got, wc[:n]...)
	}
	if !errors.Is(mlx5.Checked(t, err), mlx5.ErrCQOverrun) || !strings.Contains(err.Error(), fmt.Sprintf("CQ %#x", r.cq.CQN())) {
		t.Fatalf("6 completions due on a CQ of 2: %d completions, then %v; want ErrCQOverrun naming the CQ", len(got), err)
	}
	if len(got) > r.cq.Size() {
		t.Errorf("%d completions from a CQ of %d entries", len(got), r.cq.Size())
	}
	for i, c := range got {
		if c.WrID != uint64(i) || c.Status != mlx5.WCSuccess {
			t.Errorf("completion %d: %+v", i, c)
		}
	}
	if _, err := r.cq.Poll(wc); !errors.Is(mlx5.Checked(t, err), mlx5.ErrCQOverrun) {
		t.Errorf("the next poll: %v, want ErrCQOverrun again", err)
	}
}

// Item 10: a device without block signature offload refuses signature
// mkeys before any command, as libmlx5 does (EOPNOTSUPP).
func TestCreateMkeyNeedsSignatureCaps(t *testing.T) {
	r := newRig(t, "cx5", model.Options{}, 8)
	before := r.dev.Objects()
	_, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
	if !errors.Is(mlx5.Checked(t, err), mlx5.ErrUnsupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatalf("signature mkey on cx5: %v, want ErrUnsupported and EOPNOTSUPP", err)
	}
	if n := r.dev.Objects(); n != before {
		t.Errorf("the refused create left %d objects", n-before)
	}
	m, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1})
	if err != nil {
		t.Fatalf("an indirect mkey without signature: %v", err)
	}
	m.Close()
}

// Context.Close unmaps even what the device refused to destroy: a CQ a
// QP made behind the driver's back (the model's Exec) still uses.
func TestContextCloseUnmapsWhatTheDeviceRefused(t *testing.T) {
	before := mlx5.LiveBuffers()
	r := newRig(t, "cx7", model.Options{}, 64)
	in := mailbox(prm.CreateQpIn.Layout(), prm.MLX5_CMD_OP_CREATE_QP)
	qpc := prm.CreateQpIn.Qpc
	prm.Qpc.Pd.At(qpc).Set(in, uint64(r.pd.PDN()))
	prm.Qpc.CqnSnd.At(qpc).Set(in, uint64(r.cq.CQN()))
	prm.Qpc.CqnRcv.At(qpc).Set(in, uint64(r.cq.CQN()))
	prm.Qpc.RqType.At(qpc).Set(in, 3)
	prm.Qpc.NoSq.At(qpc).Set(in, 0)
	if st := r.dev.Exec(in, make([]byte, 16)); st != prm.MLX5_CMD_STAT_OK {
		t.Fatalf("CREATE_QP through Exec: %v", st)
	}
	if err := r.cq.Close(); err == nil {
		t.Fatal("the device destroyed a CQ a QP uses")
	}
	r.buf.Close()
	if err := r.c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mlx5.LiveBuffers(); got != before {
		t.Errorf("%d buffer mappings left after Context.Close, want %d", got, before)
	}
	if _, err := r.cq.Poll(make([]mlx5.Completion, 1)); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("poll: %v, want ErrClosed", err)
	}
}
