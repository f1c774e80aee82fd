package mlx5_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"golang.org/x/sys/unix"
)

// Issue 11's "State and events", end to end through the public API on the
// software ConnectX: every asynchronous event the model raises reaches
// Context.NextEvent naming the mlx5 object; the QP state machine of each
// QP type through Modify and Query; CQ.Arm and CQ.Wait.

// evRig is a context on the model with a PD, a registered buffer and the
// loopback path.
type evRig struct {
	c    *mlx5.Context
	dev  *model.Device
	pd   *mlx5.PD
	buf  *mlx5.Buffer
	mr   *mlx5.MR
	path mlx5.AddressPath
}

func newEvRig(t testing.TB, profile string, opt model.Options) *evRig {
	t.Helper()
	dev, err := model.NewWithOptions(profile, opt)
	if err != nil {
		t.Fatal(err)
	}
	c := mlx5.NewContext(dev)
	t.Cleanup(func() { c.Close() })
	r := &evRig{c: c, dev: dev}
	if r.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if r.buf, err = mlx5.AllocBuffer(1 << 16); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.buf.Close() })
	if r.mr, err = r.pd.RegMR(r.buf.Bytes(), mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	if r.path, err = c.LoopbackPath(1); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *evRig) cq(t testing.TB, entries int, events bool) *mlx5.CQ {
	t.Helper()
	cq, err := r.c.CreateCQ(mlx5.CQOptions{Entries: entries, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	return cq
}

// qp creates a QP of o on the rig's PD and the CQs given (o's CQs if nil).
func (r *evRig) qp(t testing.TB, o mlx5.QPOptions) *mlx5.QP {
	t.Helper()
	o.PD = r.pd
	if o.Type != mlx5.QPTypeDCT && o.MaxSendWR == 0 {
		o.MaxSendWR = 16
	}
	if o.SRQ == nil && o.Type != mlx5.QPTypeDCI && o.MaxRecvWR == 0 {
		o.MaxRecvWR, o.MaxRecvSGE = 16, 1
	}
	qp, err := r.c.CreateQP(o)
	if err != nil {
		t.Fatal(err)
	}
	return qp
}

func modify(t testing.TB, qp *mlx5.QP, a mlx5.QPAttr, mask mlx5.QPAttrMask) {
	t.Helper()
	if err := qp.Modify(&a, mask); err != nil {
		t.Fatalf("%v to %v: %v", qp.QPN(), a.State, err)
	}
}

const rcAccess = mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead | mlx5.AccessRemoteAtomic

// toInit, toRTR and toRTS take an RC QP through the states one at a time.
func toInit(t testing.TB, qp *mlx5.QP, access mlx5.AccessFlags) {
	t.Helper()
	modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1, Access: access},
		mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort|mlx5.QPAttrAccessFlags)
}

func (r *evRig) toRTR(t testing.TB, qp *mlx5.QP, dest uint32) {
	t.Helper()
	modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateRTR, Path: r.path, DestQPN: dest, MaxDestRdAtomic: 1, MinRNRTimer: 1},
		mlx5.QPAttrState|mlx5.QPAttrAV|mlx5.QPAttrPathMTU|mlx5.QPAttrDestQPN|mlx5.QPAttrRQPSN|mlx5.QPAttrMaxDestRdAtomic|mlx5.QPAttrMinRNRTimer)
}

func toRTS(t testing.TB, qp *mlx5.QP) {
	t.Helper()
	modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
		mlx5.QPAttrState|mlx5.QPAttrTimeout|mlx5.QPAttrRetryCnt|mlx5.QPAttrRNRRetry|mlx5.QPAttrSQPSN|mlx5.QPAttrMaxQPRdAtomic)
}

// pair makes two RC QPs, a and b, connected to each other, a's work on
// scq and b's on rcq.
func (r *evRig) pair(t testing.TB, scq, rcq *mlx5.CQ) (a, b *mlx5.QP) {
	t.Helper()
	a = r.qp(t, mlx5.QPOptions{SendCQ: scq, RecvCQ: scq})
	b = r.qp(t, mlx5.QPOptions{SendCQ: rcq, RecvCQ: rcq})
	if err := a.Connect(b.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(a.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// send is a SEND of 16 bytes of the rig's buffer.
func (r *evRig) send(wrID uint64, flags mlx5.SendFlags) *mlx5.SendWR {
	return &mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpSend, Flags: flags, SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: 16, LKey: r.mr.LKey()}}}
}

// recv posts a receive of 64 bytes into the rig's buffer.
func (r *evRig) recv(t testing.TB, qp *mlx5.QP, wrID uint64) {
	t.Helper()
	if err := qp.PostRecv(wrID, []mlx5.SGE{{Addr: r.mr.Addr() + 4096, Length: 64, LKey: r.mr.LKey()}}); err != nil {
		t.Fatal(err)
	}
}

// writeWR is an RDMA WRITE of 64 bytes into the rig's buffer with rkey.
func (r *evRig) writeWR(wrID uint64, rkey uint32) *mlx5.SendWR {
	return &mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: r.mr.Addr() + 8192, RKey: rkey,
		SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: 64, LKey: r.mr.LKey()}}}
}

func post(t testing.TB, qp *mlx5.QP, wr *mlx5.SendWR) {
	t.Helper()
	if err := qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
}

// pollN polls cq until it has n completions (failing after d, or
// mustCome if that is longer: they must come), then checks that no more
// come within a millisecond.
func pollN(t testing.TB, cq *mlx5.CQ, n int, d time.Duration) []mlx5.Completion {
	t.Helper()
	var got []mlx5.Completion
	wc := make([]mlx5.Completion, 16)
	for end := time.Now().Add(max(d, mustCome)); len(got) < n; time.Sleep(20 * time.Microsecond) {
		k, err := cq.Poll(wc)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		got = append(got, wc[:k]...)
		if len(got) < n && time.Now().After(end) {
			t.Fatalf("%d of %d completions on CQ %#x: %+v", len(got), n, cq.CQN(), got)
		}
	}
	time.Sleep(time.Millisecond)
	if k, err := cq.Poll(wc); k != 0 || err != nil {
		t.Fatalf("after %d completions on CQ %#x: %d more %+v, %v", n, cq.CQN(), k, wc[:k], err)
	}
	return got
}

// producer is the CQ's producer counter as the device has it (QUERY_CQ):
// how many CQEs it wrote.
func producer(t testing.TB, cq *mlx5.CQ) (pi uint32, st uint8) {
	t.Helper()
	in := mailbox(prm.QueryCqIn.Layout(), prm.MLX5_CMD_OP_QUERY_CQ)
	prm.QueryCqIn.Cqn.Set(in, uint64(cq.CQN()))
	out := prm.QueryCqOut.Layout().New()
	if err := cq.DevxQuery(in, out); err != nil {
		t.Fatal(err)
	}
	cqc := prm.QueryCqOut.CqContext
	return uint32(prm.Cqc.ProducerCounter.At(cqc).Get(out)), uint8(prm.Cqc.St.At(cqc).Get(out))
}

// waitCQEs waits until the device wrote n CQEs into cq, without polling
// them.
func waitCQEs(t testing.TB, cq *mlx5.CQ, n uint32) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Microsecond) {
		pi, _ := producer(t, cq)
		if pi >= n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("CQ %#x: %d CQEs written, want %d", cq.CQN(), pi, n)
		}
	}
}

// nextEvent waits up to d (or mustCome if that is longer: it must come)
// for the context's next event.
func nextEvent(t testing.TB, c *mlx5.Context, d time.Duration) mlx5.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), max(d, mustCome))
	defer cancel()
	e, err := c.NextEvent(ctx)
	if err != nil {
		t.Fatalf("next event: %v", err)
	}
	return e
}

// noEvent checks that no event comes within d.
func noEvent(t testing.TB, c *mlx5.Context, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if e, err := c.NextEvent(ctx); !errors.Is(mlx5.Checked(t, err), context.DeadlineExceeded) {
		t.Fatalf("want no event, got %v (%v)", e, err)
	}
}

func wantQPEvent(t testing.TB, e mlx5.Event, typ mlx5.EventType, qp *mlx5.QP) {
	t.Helper()
	if e.Type != typ || e.QP != qp || e.CQ != nil || e.SRQ != nil || e.Port != 0 {
		t.Fatalf("event %v (%+v), want %v on QP %#x (%p)", e, e, typ, qp.QPN(), qp)
	}
}

// COMM_EST: the first message that reaches a QP in RTR; once per RTR.
func TestEventCommEst(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.cq(t, 64, false)
	a := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
	b := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
	if err := a.Connect(b.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	toInit(t, b, rcAccess)
	r.toRTR(t, b, a.QPN())
	r.recv(t, b, 100)
	r.recv(t, b, 101)
	post(t, a, r.send(1, mlx5.SendSignaled))
	wantQPEvent(t, nextEvent(t, r.c, 5*time.Second), mlx5.EventCommEst, b)
	post(t, a, r.send(2, mlx5.SendSignaled))
	pollN(t, cq, 4, 5*time.Second)
	noEvent(t, r.c, 5*time.Millisecond) // once per RTR
	toRTS(t, b)
	r.recv(t, b, 102)
	post(t, a, r.send(3, mlx5.SendSignaled))
	pollN(t, cq, 2, 5*time.Second)
	noEvent(t, r.c, 5*time.Millisecond) // not in RTS
}

// QP_ACCESS_ERR: an RDMA WRITE with a bad rkey, on the responder (which
// goes to ERR); QP_REQ_ERR: an RDMA WRITE to a QP without remote write.
func TestEventQPAccessAndReqErr(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.cq(t, 64, false)
	a, b := r.pair(t, cq, cq)
	post(t, a, r.writeWR(1, 0xbad00))
	wantQPEvent(t, nextEvent(t, r.c, 5*time.Second), mlx5.EventQPAccessErr, b)
	if wc := pollN(t, cq, 1, 5*time.Second); wc[0].Status != mlx5.WCRemAccessErr || wc[0].WrID != 1 {
		t.Errorf("bad rkey: %+v", wc)
	}
	if at, err := b.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateErr {
		t.Errorf("the responder: %v, %v; want ERR", at.State, err)
	}

	// A responder without remote write: INIT with read access only.
	c := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
	d := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
	if err := c.Connect(d.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	toInit(t, d, mlx5.AccessRemoteRead)
	r.toRTR(t, d, c.QPN())
	toRTS(t, d)
	post(t, c, r.writeWR(2, r.mr.RKey()))
	wantQPEvent(t, nextEvent(t, r.c, 5*time.Second), mlx5.EventQPReqErr, d)
	if wc := pollN(t, cq, 1, 5*time.Second); wc[0].Status != mlx5.WCRemInvReqErr || wc[0].WrID != 2 {
		t.Errorf("write without remote write: %+v", wc)
	}
	noEvent(t, r.c, 5*time.Millisecond)
}

// QP_LAST_WQE_REACHED: a QP on an SRQ moved to ERR; SRQ_LIMIT_REACHED:
// an armed SRQ that falls below its limit, once.
func TestEventSRQ(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.cq(t, 64, false)
	srq, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
	b := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, SRQ: srq})
	if err := a.Connect(b.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(a.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := srq.PostRecv(uint64(100+i), []mlx5.SGE{{Addr: r.mr.Addr() + 4096, Length: 64, LKey: r.mr.LKey()}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := srq.Arm(4); err != nil {
		t.Fatal(err)
	}
	post(t, a, r.send(1, mlx5.SendSignaled)) // 5 left: not below 4
	pollN(t, cq, 2, 5*time.Second)
	noEvent(t, r.c, 5*time.Millisecond)
	post(t, a, r.send(2, mlx5.SendSignaled)) // 4 left
	pollN(t, cq, 2, 5*time.Second)
	noEvent(t, r.c, 5*time.Millisecond)
	post(t, a, r.send(3, mlx5.SendSignaled)) // 3 left: below
	e := nextEvent(t, r.c, 5*time.Second)
	if e.Type != mlx5.EventSRQLimitReached || e.SRQ != srq || e.QP != nil || e.CQ != nil {
		t.Fatalf("event %v, want SRQ_LIMIT_REACHED on %#x", e, srq.SRQN())
	}
	post(t, a, r.send(4, mlx5.SendSignaled)) // 2 left: the limit fired once
	pollN(t, cq, 4, 5*time.Second)
	noEvent(t, r.c, 5*time.Millisecond)

	modify(t, b, mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState)
	wantQPEvent(t, nextEvent(t, r.c, 5*time.Second), mlx5.EventQPLastWQEReached, b)
	noEvent(t, r.c, 5*time.Millisecond)

	// SRQOptions.Limit is the create's srq_limit, which mlx5_ib does not
	// arm: only Arm does.
	srq2, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 16, MaxSGE: 1, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	c := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, SRQ: srq2})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
	if err := a.Connect(c.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(a.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	pollN(t, cq, 0, time.Second)
	for i := range 6 {
		if err := srq2.PostRecv(uint64(200+i), []mlx5.SGE{{Addr: r.mr.Addr() + 4096, Length: 64, LKey: r.mr.LKey()}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 { // 3 left, below the create's limit
		post(t, a, r.send(uint64(10+i), mlx5.SendSignaled))
		pollN(t, cq, 2, 5*time.Second)
	}
	noEvent(t, r.c, 5*time.Millisecond)
	if err := srq2.Arm(2); err != nil {
		t.Fatal(err)
	}
	post(t, a, r.send(20, mlx5.SendSignaled)) // 2 left
	pollN(t, cq, 2, 5*time.Second)
	noEvent(t, r.c, 5*time.Millisecond)
	post(t, a, r.send(21, mlx5.SendSignaled)) // 1 left
	if e := nextEvent(t, r.c, 5*time.Second); e.Type != mlx5.EventSRQLimitReached || e.SRQ != srq2 {
		t.Fatalf("event %v, want SRQ_LIMIT_REACHED on %#x", e, srq2.SRQN())
	}
	pollN(t, cq, 2, 5*time.Second)
}

// CQ_ERR: a verbs CQ that overruns; Poll reports ErrCQOverrun, and the
// event names the CQ.
func TestEventCQErr(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	small := r.cq(t, 2, false) // a ring of 4
	other := r.cq(t, 64, false)
	qp := r.qp(t, mlx5.QPOptions{SendCQ: small, RecvCQ: other})
	if err := qp.Connect(qp.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		post(t, qp, r.writeWR(uint64(i), r.mr.RKey()))
	}
	e := nextEvent(t, r.c, 5*time.Second)
	if e.Type != mlx5.EventCQErr || e.CQ != small || e.QP != nil || e.SRQ != nil {
		t.Fatalf("event %v, want CQ_ERR on CQ %#x", e, small.CQN())
	}
	wc := make([]mlx5.Completion, 8)
	n, err := small.Poll(wc)
	if !errors.Is(mlx5.Checked(t, err), mlx5.ErrCQOverrun) || n > small.Size() {
		t.Errorf("poll after the overrun: %d, %v; want at most %d completions and ErrCQOverrun", n, err, small.Size())
	}
	if _, err := other.Poll(wc); err != nil {
		t.Errorf("the other CQ: %v", err)
	}
	noEvent(t, r.c, 5*time.Millisecond)
}

// NextEvent honours its ctx; after Context.Close it returns ErrClosed, and
// so does a NextEvent blocked when Close came.
func TestNextEventContextAndClose(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.c.NextEvent(ctx); !errors.Is(mlx5.Checked(t, err), context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	start := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.c.NextEvent(ctx); !errors.Is(mlx5.Checked(t, err), context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Errorf("deadline: %v after %v", err, time.Since(start))
	}
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			_, err := r.c.NextEvent(context.Background())
			errs <- err
		}()
	}
	time.Sleep(5 * time.Millisecond)
	if err := r.c.Close(); err != nil {
		t.Fatal(err)
	}
	for range cap(errs) {
		select {
		case err := <-errs:
			if !errors.Is(err, mlx5.ErrClosed) {
				t.Errorf("NextEvent blocked at Close: %v, want ErrClosed", err)
			}
		case <-time.After(mustCome):
			t.Fatalf("NextEvent still blocked %v after Close", mustCome)
		}
	}
	if _, err := r.c.NextEvent(context.Background()); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// A Close racing the first NextEvent (whose reader it starts) still ends
// it with ErrClosed.
func TestNextEventRacesClose(t *testing.T) {
	for range 50 {
		dev, err := model.New("cx7")
		if err != nil {
			t.Fatal(err)
		}
		c := mlx5.NewContext(dev)
		errc := make(chan error, 1)
		go func() {
			_, err := c.NextEvent(context.Background())
			errc <- err
		}()
		c.Close()
		select {
		case err := <-errc:
			if !errors.Is(err, mlx5.ErrClosed) {
				t.Fatalf("NextEvent racing Close: %v, want ErrClosed", err)
			}
		case <-time.After(mustCome):
			t.Fatalf("NextEvent still blocked %v after Close", mustCome)
		}
	}
}

// waitQueued waits until the context's event reader holds n events.
func waitQueued(t testing.TB, c *mlx5.Context, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); mlx5.QueuedEvents(c) < n; time.Sleep(20 * time.Microsecond) {
		if time.Now().After(end) {
			t.Fatalf("%d events queued, want %d", mlx5.QueuedEvents(c), n)
		}
	}
}

// lastWQE raises QP_LAST_WQE_REACHED on qp, a QP on an SRQ in RESET: to
// INIT, then ERR.
func lastWQE(t testing.TB, qp *mlx5.QP) {
	t.Helper()
	toInit(t, qp, rcAccess)
	modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState)
}

// A closed QP's events are never delivered, not even those the reader had
// already taken from the kernel, and never as those of the next QP, which
// the firmware gave the same number (Options.ReuseQPN).
func TestEventOfClosedQP(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{ReuseQPN: true})
	cq := r.cq(t, 64, false)
	srq, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	o := mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, SRQ: srq}
	for i := range 40 {
		a := r.qp(t, o)
		lastWQE(t, a)
		switch i % 4 {
		case 0, 1:
			// The reader has it: NextEvent would return it.
			waitQueued(t, r.c, 1)
		case 2:
			// Still in the kernel, or taken by now: either way it goes.
		case 3:
			// Delivered: it names a, which is still open.
			wantQPEvent(t, nextEvent(t, r.c, 5*time.Second), mlx5.EventQPLastWQEReached, a)
		}
		qpn := a.QPN()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if i%4 == 1 {
			noEvent(t, r.c, time.Millisecond)
		}
		b := r.qp(t, o)
		if b.QPN() != qpn {
			t.Fatalf("the model gave QPN %#x, not the closed QP's %#x", b.QPN(), qpn)
		}
		lastWQE(t, b)
		wantQPEvent(t, nextEvent(t, r.c, 5*time.Second), mlx5.EventQPLastWQEReached, b)
		noEvent(t, r.c, time.Millisecond)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// The events of a closed CQ and SRQ go with them too.
func TestEventOfClosedCQAndSRQ(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	small := r.cq(t, 2, false)
	other := r.cq(t, 64, false)
	qp := r.qp(t, mlx5.QPOptions{SendCQ: small, RecvCQ: other})
	if err := qp.Connect(qp.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		post(t, qp, r.writeWR(uint64(i), r.mr.RKey()))
	}
	waitQueued(t, r.c, 1)
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := small.Close(); err != nil {
		t.Fatal(err)
	}
	noEvent(t, r.c, time.Millisecond)

	srq, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := r.qp(t, mlx5.QPOptions{SendCQ: other, RecvCQ: other})
	b := r.qp(t, mlx5.QPOptions{SendCQ: other, RecvCQ: other, SRQ: srq})
	if err := a.Connect(b.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(a.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	if err := srq.PostRecv(1, []mlx5.SGE{{Addr: r.mr.Addr() + 4096, Length: 64, LKey: r.mr.LKey()}}); err != nil {
		t.Fatal(err)
	}
	if err := srq.Arm(1); err != nil {
		t.Fatal(err)
	}
	post(t, a, r.send(1, mlx5.SendSignaled))
	pollN(t, other, 2, 5*time.Second)
	waitQueued(t, r.c, 1)
	for _, x := range []interface{ Close() error }{b, srq} {
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	}
	noEvent(t, r.c, time.Millisecond)
}

// Concurrent NextEvent callers share the events: each is delivered once.
func TestNextEventConcurrent(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.cq(t, 64, false)
	srq, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	qps := make([]*mlx5.QP, 8)
	for i := range qps {
		qps[i] = r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, SRQ: srq})
	}
	ctx, cancel := context.WithTimeout(context.Background(), mustCome)
	defer cancel()
	got := make(chan mlx5.Event, n)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				e, err := r.c.NextEvent(ctx)
				if err != nil {
					errs <- err
					return
				}
				select {
				case got <- e:
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
			}
		}()
	}
	count := map[*mlx5.QP]int{}
	for i := range n {
		qp := qps[i%len(qps)]
		lastWQE(t, qp)
		modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
		count[qp]++
	}
	for range n {
		select {
		case e := <-got:
			if e.Type != mlx5.EventQPLastWQEReached || e.QP == nil {
				t.Fatalf("event %v", e)
			}
			count[e.QP]--
		case err := <-errs:
			t.Fatalf("NextEvent: %v", err)
		}
	}
	for qp, k := range count {
		if k != 0 {
			t.Errorf("QP %#x: %d events raised and not delivered (negative: delivered twice)", qp.QPN(), k)
		}
	}
	cancel()
	for range 4 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Errorf("NextEvent after cancel: %v", err)
		}
	}
	if len(got) != 0 {
		t.Errorf("%d events more than raised", len(got))
	}
}

// Past 4096 unread events the oldest go: the reader keeps the newest 4096.
func TestNextEventDropsOldest(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.cq(t, 64, false)
	srq, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	old := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, SRQ: srq})
	recent := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, SRQ: srq})
	const keep, extra = 4096, 10
	raise := func(qp *mlx5.QP, n int) {
		for range n {
			lastWQE(t, qp)
			modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
		}
	}
	raise(old, extra)
	raise(recent, keep)
	// The reader takes them all from the kernel, keeping 4096: the oldest
	// 10 go.
	for end := time.Now().Add(5 * time.Second); mlx5.DroppedEvents(r.c) < extra; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(end) {
			t.Fatalf("%d events dropped, %d queued; want %d dropped", mlx5.DroppedEvents(r.c), mlx5.QueuedEvents(r.c), extra)
		}
	}
	time.Sleep(time.Millisecond)
	if n, d := mlx5.QueuedEvents(r.c), mlx5.DroppedEvents(r.c); n != keep || d != extra {
		t.Fatalf("%d events queued, %d dropped; want %d and %d", n, d, keep, extra)
	}
	for i := range keep {
		if e := nextEvent(t, r.c, 5*time.Second); e.QP != recent || e.Type != mlx5.EventQPLastWQEReached {
			t.Fatalf("event %d: %v, want the newest events (QP %#x)", i, e, recent.QPN())
		}
	}
	noEvent(t, r.c, time.Millisecond)
}

// SQ_DRAINED: a signature-pipelining QP whose RDMA WRITE gathers from a
// signature mkey with a bad guard stops its send queue (drain_sigerr).
// Held in SQ_DRAINING (Options.ManualDrain), Query says SQD and
// SQDraining, and SQD to RTS is refused; then the drain ends, SQ_DRAINED
// names the QP, and SQD to RTS runs the work behind the failed one.
func TestEventSQDrained(t *testing.T) {
	for _, manual := range []bool{true, false} {
		r := newEvRig(t, "cx7", model.Options{ManualDrain: manual})
		cq := r.cq(t, 64, false)
		qp := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, SigPipelining: true, MkeyConfigure: true, MaxMkeyEntries: 1})
		if err := qp.Connect(qp.QPN(), r.path); err != nil {
			t.Fatal(err)
		}
		attr := &sig.BlockAttr{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
			T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x1234, RefTag: 7, Flags: sig.T10DIFRefRemap}},
			CheckMask: 0xff}
		eng, err := sig.NewEngine(attr)
		if err != nil {
			t.Fatal(err)
		}
		mem := r.buf.Bytes()[16384 : 16384+4*520]
		for i := range mem {
			mem[i] = byte(i*7 + i>>9)
		}
		if err := eng.Generate(sig.DomainMemory, mem); err != nil {
			t.Fatal(err)
		}
		mk, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := qp.PostMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: 1, Mkey: mk, Flags: mlx5.SendSignaled,
			List: []mlx5.KLM{{Addr: r.mr.Addr() + 16384, ByteCount: 4 * 520, Mkey: r.mr.LKey()}}, Sig: attr}); err != nil {
			t.Fatal(err)
		}
		pollN(t, cq, 1, 5*time.Second)
		mem[2*520+17] ^= 0x40 // block 2's guard no longer matches
		post(t, qp, &mlx5.SendWR{WrID: 2, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: r.mr.Addr() + 32768, RKey: r.mr.RKey(),
			SGL: []mlx5.SGE{{Addr: 0, Length: 4 * 512, LKey: mk.LKey()}}}) // wire bytes: the PI is stripped
		post(t, qp, &mlx5.SendWR{WrID: 3, Opcode: mlx5.OpNOP, Flags: mlx5.SendSignaled})
		if wc := pollN(t, cq, 1, 5*time.Second); wc[0].WrID != 2 || wc[0].Status != mlx5.WCSuccess {
			t.Fatalf("the write: %+v; %q", wc, r.dev.WQEErrors())
		}
		if me, err := mk.Check(); err != nil || me.Type != sig.MkeyErrBadGuard {
			t.Errorf("mkey check: %v, %v; want a bad guard", me, err)
		}
		toRTS := func() error {
			return qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTS, CurState: mlx5.QPStateSQD}, mlx5.QPAttrState|mlx5.QPAttrCurState)
		}
		if manual {
			at, err := qp.Query(mlx5.QPAttrState)
			if err != nil || at.State != mlx5.QPStateSQD || !at.SQDraining {
				t.Fatalf("draining: %v, draining %v, %v; want SQD, draining", at.State, at.SQDraining, err)
			}
			if err := toRTS(); !errors.Is(mlx5.Checked(t, err), unix.EINVAL) {
				t.Errorf("SQD to RTS while draining: %v, want EINVAL", err)
			}
			noEvent(t, r.c, 5*time.Millisecond)
			if err := r.dev.FinishDrain(qp.QPN()); err != nil {
				t.Fatal(err)
			}
		}
		wantQPEvent(t, nextEvent(t, r.c, 5*time.Second), mlx5.EventSQDrained, qp)
		at, err := qp.Query(mlx5.QPAttrState)
		if err != nil || at.State != mlx5.QPStateSQD || at.SQDraining {
			t.Fatalf("drained: %v, draining %v, %v; want SQD, not draining", at.State, at.SQDraining, err)
		}
		if wc := make([]mlx5.Completion, 1); func() int { n, _ := cq.Poll(wc); return n }() != 0 {
			t.Fatalf("the NOP ran in SQD: %+v", wc)
		}
		if err := toRTS(); err != nil {
			t.Fatalf("SQD to RTS: %v", err)
		}
		if wc := pollN(t, cq, 1, 5*time.Second); wc[0].WrID != 3 || wc[0].Status != mlx5.WCSuccess || wc[0].Opcode != mlx5.WCNOP {
			t.Errorf("after SQD to RTS: %+v, want the NOP", wc)
		}
		if at, err := qp.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateRTS {
			t.Errorf("after SQD to RTS: %v, %v", at.State, err)
		}
		noEvent(t, r.c, time.Millisecond)

		// ERR and RESET from SQD (and from SQD while draining): the
		// signature error again, as the data path makes it.
		for _, to := range []mlx5.QPState{mlx5.QPStateErr, mlx5.QPStateReset} {
			if err := r.dev.InjectSigErr(qp.QPN()); err != nil {
				t.Fatal(err)
			}
			if !manual {
				wantQPEvent(t, nextEvent(t, r.c, 5*time.Second), mlx5.EventSQDrained, qp)
			}
			if at, err := qp.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateSQD || at.SQDraining != manual {
				t.Fatalf("after a signature error: %v, draining %v, %v", at.State, at.SQDraining, err)
			}
			modify(t, qp, mlx5.QPAttr{State: to}, mlx5.QPAttrState)
			if at, err := qp.Query(mlx5.QPAttrState); err != nil || at.State != to {
				t.Errorf("SQD->%v: %v, %v", to, at.State, err)
			}
			modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
			if err := qp.Connect(qp.QPN(), r.path); err != nil {
				t.Fatal(err)
			}
			post(t, qp, &mlx5.SendWR{WrID: 4, Opcode: mlx5.OpNOP, Flags: mlx5.SendSignaled})
			if wc := pollN(t, cq, 1, 5*time.Second); wc[0].WrID != 4 || wc[0].Status != mlx5.WCSuccess {
				t.Errorf("after SQD->%v->RESET->RTS: %+v", to, wc)
			}
		}
		noEvent(t, r.c, time.Millisecond)
	}
}

// step is one Modify and what Query must then answer of the fields seen
// so far.
type step struct {
	a    mlx5.QPAttr
	mask mlx5.QPAttrMask
}

// qpMachine is a QP type's walk through the states: RESET to INIT, INIT
// to INIT, INIT to RTR, RTR to RTS, RTS to RTS.
type qpMachine struct {
	typ                         mlx5.QPType
	init, init2, rtr, rts, rts2 step
	// access are the remote rights Query reports after each of the five
	// steps: mlx5_ib keeps only remote write while the responder depth
	// (max_dest_rd_atomic) is 0 (set_qpc_atomic_flags).
	access [5]mlx5.AccessFlags
}

// queryMask is every attribute Query reads.
const queryMask = mlx5.QPAttrState | mlx5.QPAttrAccessFlags | mlx5.QPAttrPKeyIndex | mlx5.QPAttrPort | mlx5.QPAttrQKey |
	mlx5.QPAttrAV | mlx5.QPAttrPathMTU | mlx5.QPAttrTimeout | mlx5.QPAttrRetryCnt | mlx5.QPAttrRNRRetry | mlx5.QPAttrRQPSN |
	mlx5.QPAttrMaxQPRdAtomic | mlx5.QPAttrMinRNRTimer | mlx5.QPAttrSQPSN | mlx5.QPAttrMaxDestRdAtomic | mlx5.QPAttrDestQPN

// merge sets in want what s sets.
func merge(want *mlx5.QPAttr, seen *mlx5.QPAttrMask, s step) {
	a, m := &s.a, s.mask
	*seen |= m
	want.State = a.State
	if m&mlx5.QPAttrPKeyIndex != 0 {
		want.PKeyIndex = a.PKeyIndex
	}
	if m&mlx5.QPAttrPort != 0 {
		want.Port = a.Port
	}
	if m&mlx5.QPAttrQKey != 0 {
		want.QKey = a.QKey
	}
	if m&mlx5.QPAttrAV != 0 {
		mtu := want.Path.MTU
		want.Path = a.Path
		want.Path.MTU, want.Path.MAC = mtu, [6]byte{} // Query has no MAC: the kernel resolves it
		want.Port = a.Path.Port
		*seen |= mlx5.QPAttrPort
	}
	if m&mlx5.QPAttrPathMTU != 0 {
		want.Path.MTU = a.Path.MTU
	}
	for _, f := range []struct {
		bit      mlx5.QPAttrMask
		dst, src any
	}{
		{mlx5.QPAttrTimeout, &want.Timeout, a.Timeout}, {mlx5.QPAttrRetryCnt, &want.RetryCnt, a.RetryCnt},
		{mlx5.QPAttrRNRRetry, &want.RNRRetry, a.RNRRetry}, {mlx5.QPAttrMaxQPRdAtomic, &want.MaxRdAtomic, a.MaxRdAtomic},
		{mlx5.QPAttrMinRNRTimer, &want.MinRNRTimer, a.MinRNRTimer}, {mlx5.QPAttrMaxDestRdAtomic, &want.MaxDestRdAtomic, a.MaxDestRdAtomic},
	} {
		if m&f.bit != 0 {
			*f.dst.(*uint8) = f.src.(uint8)
		}
	}
	if m&mlx5.QPAttrRQPSN != 0 {
		want.RQPSN = a.RQPSN
	}
	if m&mlx5.QPAttrSQPSN != 0 {
		want.SQPSN = a.SQPSN
	}
	if m&mlx5.QPAttrDestQPN != 0 {
		want.DestQPN = a.DestQPN
	}
}

// checkQuery compares Query with want in the fields seen.
func checkQuery(t testing.TB, what string, qp *mlx5.QP, typ mlx5.QPType, want mlx5.QPAttr, seen mlx5.QPAttrMask) {
	t.Helper()
	got, err := qp.Query(queryMask)
	if err != nil {
		t.Fatalf("%s: query: %v", what, err)
	}
	type field struct {
		bit       mlx5.QPAttrMask
		name      string
		got, want any
	}
	fields := []field{
		{mlx5.QPAttrState, "state", got.State, want.State},
		{mlx5.QPAttrState, "sq draining", got.SQDraining, false},
		{mlx5.QPAttrAccessFlags, "access", got.Access, want.Access},
		{mlx5.QPAttrPKeyIndex, "pkey index", got.PKeyIndex, want.PKeyIndex},
		{mlx5.QPAttrPort, "port", got.Port, want.Port},
		{mlx5.QPAttrQKey, "qkey", got.QKey, want.QKey},
		{mlx5.QPAttrPathMTU, "path MTU", got.Path.MTU, want.Path.MTU},
		{mlx5.QPAttrTimeout, "timeout", got.Timeout, want.Timeout},
		{mlx5.QPAttrRetryCnt, "retry count", got.RetryCnt, want.RetryCnt},
		{mlx5.QPAttrRNRRetry, "RNR retry", got.RNRRetry, want.RNRRetry},
		{mlx5.QPAttrRQPSN, "RQ PSN", got.RQPSN, want.RQPSN},
		{mlx5.QPAttrSQPSN, "SQ PSN", got.SQPSN, want.SQPSN},
		{mlx5.QPAttrMaxQPRdAtomic, "max rd atomic", got.MaxRdAtomic, want.MaxRdAtomic},
		{mlx5.QPAttrMaxDestRdAtomic, "max dest rd atomic", got.MaxDestRdAtomic, want.MaxDestRdAtomic},
		{mlx5.QPAttrMinRNRTimer, "min RNR timer", got.MinRNRTimer, want.MinRNRTimer},
		{mlx5.QPAttrDestQPN, "dest QPN", got.DestQPN, want.DestQPN},
	}
	if typ == mlx5.QPTypeRC || typ == mlx5.QPTypeUC {
		p := got.Path
		p.MTU = want.Path.MTU
		fields = append(fields, field{mlx5.QPAttrAV, "path", p, want.Path})
	}
	for _, f := range fields {
		if seen&f.bit != 0 && f.got != f.want {
			t.Errorf("%s: %s %v, want %v", what, f.name, f.got, f.want)
		}
	}
}

// refused checks that a Modify is the kernel's EINVAL and changes nothing.
func refused(t testing.TB, what string, qp *mlx5.QP, a mlx5.QPAttr, mask mlx5.QPAttrMask) {
	t.Helper()
	// A DCT answers Query in RTR only.
	before, qerr := qp.Query(mlx5.QPAttrState)
	err := qp.Modify(&a, mask)
	if !errors.Is(mlx5.Checked(t, err), unix.EINVAL) {
		t.Errorf("%s: %v, want EINVAL", what, err)
	}
	var me *mlx5.Error
	if err != nil && (!errors.As(err, &me) || me.Op != "modify") {
		t.Errorf("%s: %v is not the modify's *mlx5.Error", what, err)
	}
	if after, err := qp.Query(mlx5.QPAttrState); qerr == nil && (err != nil || after.State != before.State) {
		t.Errorf("%s: the refused modify moved the QP from %v to %v (%v)", what, before.State, after.State, err)
	}
}

func (r *evRig) machines(self uint32) []qpMachine {
	path := r.path
	path.MTU = 3
	const ww, wr = mlx5.AccessRemoteWrite, mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	return []qpMachine{
		{typ: mlx5.QPTypeRC,
			init: step{mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1, Access: rcAccess},
				mlx5.QPAttrState | mlx5.QPAttrPKeyIndex | mlx5.QPAttrPort | mlx5.QPAttrAccessFlags},
			init2: step{mlx5.QPAttr{State: mlx5.QPStateInit, Access: wr}, mlx5.QPAttrState | mlx5.QPAttrAccessFlags},
			rtr: step{mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path, DestQPN: self, RQPSN: 0x123456, MaxDestRdAtomic: 8, MinRNRTimer: 12},
				mlx5.QPAttrState | mlx5.QPAttrAV | mlx5.QPAttrPathMTU | mlx5.QPAttrDestQPN | mlx5.QPAttrRQPSN | mlx5.QPAttrMaxDestRdAtomic | mlx5.QPAttrMinRNRTimer},
			rts: step{mlx5.QPAttr{State: mlx5.QPStateRTS, Timeout: 17, RetryCnt: 5, RNRRetry: 6, SQPSN: 0xabcdef, MaxRdAtomic: 4},
				mlx5.QPAttrState | mlx5.QPAttrTimeout | mlx5.QPAttrRetryCnt | mlx5.QPAttrRNRRetry | mlx5.QPAttrSQPSN | mlx5.QPAttrMaxQPRdAtomic},
			rts2:   step{mlx5.QPAttr{State: mlx5.QPStateRTS, MinRNRTimer: 20, Access: rcAccess}, mlx5.QPAttrState | mlx5.QPAttrMinRNRTimer | mlx5.QPAttrAccessFlags},
			access: [5]mlx5.AccessFlags{ww, ww, wr, wr, rcAccess}},
		{typ: mlx5.QPTypeUC,
			init: step{mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1, Access: ww},
				mlx5.QPAttrState | mlx5.QPAttrPKeyIndex | mlx5.QPAttrPort | mlx5.QPAttrAccessFlags},
			init2: step{mlx5.QPAttr{State: mlx5.QPStateInit}, mlx5.QPAttrState | mlx5.QPAttrPKeyIndex},
			rtr: step{mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path, DestQPN: self, RQPSN: 0x222},
				mlx5.QPAttrState | mlx5.QPAttrAV | mlx5.QPAttrPathMTU | mlx5.QPAttrDestQPN | mlx5.QPAttrRQPSN},
			rts:    step{mlx5.QPAttr{State: mlx5.QPStateRTS, SQPSN: 0x333}, mlx5.QPAttrState | mlx5.QPAttrSQPSN},
			rts2:   step{mlx5.QPAttr{State: mlx5.QPStateRTS, Access: ww}, mlx5.QPAttrState | mlx5.QPAttrAccessFlags},
			access: [5]mlx5.AccessFlags{ww, ww, ww, ww, ww}},
		{typ: mlx5.QPTypeUD,
			init: step{mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1, QKey: 0x1111},
				mlx5.QPAttrState | mlx5.QPAttrPKeyIndex | mlx5.QPAttrPort | mlx5.QPAttrQKey},
			init2: step{mlx5.QPAttr{State: mlx5.QPStateInit, QKey: 0x2222}, mlx5.QPAttrState | mlx5.QPAttrQKey},
			rtr:   step{mlx5.QPAttr{State: mlx5.QPStateRTR, QKey: 0x3333}, mlx5.QPAttrState | mlx5.QPAttrQKey},
			rts:   step{mlx5.QPAttr{State: mlx5.QPStateRTS, SQPSN: 0x444}, mlx5.QPAttrState | mlx5.QPAttrSQPSN},
			rts2:  step{mlx5.QPAttr{State: mlx5.QPStateRTS, QKey: 0x5555}, mlx5.QPAttrState | mlx5.QPAttrQKey}},
		{typ: mlx5.QPTypeDCI,
			init:  step{mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1}, mlx5.QPAttrState | mlx5.QPAttrPKeyIndex | mlx5.QPAttrPort},
			init2: step{mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1}, mlx5.QPAttrState | mlx5.QPAttrPort},
			rtr:   step{mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path}, mlx5.QPAttrState | mlx5.QPAttrPathMTU | mlx5.QPAttrAV},
			rts: step{mlx5.QPAttr{State: mlx5.QPStateRTS, Timeout: 17, RetryCnt: 5, RNRRetry: 6, MaxRdAtomic: 4, SQPSN: 0x555},
				mlx5.QPAttrState | mlx5.QPAttrTimeout | mlx5.QPAttrRetryCnt | mlx5.QPAttrRNRRetry | mlx5.QPAttrMaxQPRdAtomic | mlx5.QPAttrSQPSN},
			rts2: step{mlx5.QPAttr{State: mlx5.QPStateRTS, MinRNRTimer: 9}, mlx5.QPAttrState | mlx5.QPAttrMinRNRTimer}},
	}
}

// walk takes qp from RESET to RTS by m's steps (RTS to RTS too), checking
// Query after each, and returns what Query must answer.
func walk(t testing.TB, qp *mlx5.QP, m *qpMachine, check bool) (mlx5.QPAttr, mlx5.QPAttrMask) {
	t.Helper()
	var want mlx5.QPAttr
	var seen mlx5.QPAttrMask
	for i, s := range []step{m.init, m.init2, m.rtr, m.rts, m.rts2} {
		modify(t, qp, s.a, s.mask)
		merge(&want, &seen, s)
		want.Access = m.access[i]
		if m.typ == mlx5.QPTypeUD {
			want.Path.MTU, seen = 5, seen|mlx5.QPAttrPathMTU // mlx5_ib gives a UD QP 4096
		}
		if check {
			checkQuery(t, "after "+[]string{"RESET->INIT", "INIT->INIT", "INIT->RTR", "RTR->RTS", "RTS->RTS"}[i], qp, m.typ, want, seen)
		}
	}
	return want, seen
}

// dataPath checks that qp moves data: an RDMA WRITE to itself (RC, UC),
// a SEND to itself (UD: a send and a receive completion). A DCI moves
// none on the model.
func (r *evRig) dataPath(t testing.TB, qp *mlx5.QP, typ mlx5.QPType, cq *mlx5.CQ, qkey uint32, wrID uint64) {
	t.Helper()
	switch typ {
	case mlx5.QPTypeRC, mlx5.QPTypeUC:
		post(t, qp, r.writeWR(wrID, r.mr.RKey()))
		if wc := pollN(t, cq, 1, 5*time.Second); wc[0].WrID != wrID || wc[0].Status != mlx5.WCSuccess {
			t.Fatalf("%v write: %+v", typ, wc)
		}
	case mlx5.QPTypeUD:
		ah, err := r.pd.CreateAH(r.path)
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Close()
		r.recv(t, qp, wrID+1)
		wr := r.send(wrID, mlx5.SendSignaled)
		wr.AH, wr.RemoteQPN, wr.QKey = ah, qp.QPN(), qkey
		post(t, qp, wr)
		wc := pollN(t, cq, 2, 5*time.Second)
		for _, c := range wc {
			if c.Status != mlx5.WCSuccess || c.WrID != wrID && c.WrID != wrID+1 {
				t.Fatalf("UD send: %+v", wc)
			}
		}
	}
}

// The QP state machine of RC, UC, UD and DCI QPs through Modify and Query:
// every legal transition, with the attributes Query reports; the illegal
// ones refused with the kernel's EINVAL; ERR and RESET from every state;
// SQE to RTS; and after RESET the queues start over.
func TestQPStateMachine(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.cq(t, 256, false)
	for _, typ := range []mlx5.QPType{mlx5.QPTypeRC, mlx5.QPTypeUC, mlx5.QPTypeUD, mlx5.QPTypeDCI} {
		t.Run(typ.String(), func(t *testing.T) {
			qp := r.qp(t, mlx5.QPOptions{Type: typ, SendCQ: cq, RecvCQ: cq})
			defer qp.Close()
			m := r.machines(qp.QPN())[typ]
			if at, err := qp.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateReset {
				t.Fatalf("created: %v, %v", at.State, err)
			}
			// From RESET only INIT (and RESET).
			for _, s := range []step{m.rtr, m.rts, {mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState},
				{mlx5.QPAttr{State: mlx5.QPStateSQD}, mlx5.QPAttrState}, {mlx5.QPAttr{State: mlx5.QPStateSQE}, mlx5.QPAttrState}} {
				refused(t, "RESET->"+s.a.State.String(), qp, s.a, s.mask)
			}
			modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
			// INIT needs its attributes; then not RTS or SQD.
			init := m.init
			refused(t, "RESET->INIT without the port", qp, init.a, init.mask&^mlx5.QPAttrPort)
			modify(t, qp, init.a, init.mask)
			refused(t, "INIT->RTS", qp, m.rts.a, m.rts.mask)
			refused(t, "INIT->SQD", qp, mlx5.QPAttr{State: mlx5.QPStateSQD}, mlx5.QPAttrState)
			refused(t, "INIT->INIT with RTR's attributes", qp, mlx5.QPAttr{State: mlx5.QPStateInit, SQPSN: 1}, mlx5.QPAttrState|mlx5.QPAttrSQPSN)
			if m.rtr.mask != mlx5.QPAttrState|mlx5.QPAttrQKey { // UD's RTR needs no attribute
				refused(t, "INIT->RTR without the MTU", qp, m.rtr.a, m.rtr.mask&^mlx5.QPAttrPathMTU)
			}
			modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)

			// The whole walk, and Query after each step.
			want, seen := walk(t, qp, &m, true)
			for _, s := range []step{m.init, m.rtr, {mlx5.QPAttr{State: mlx5.QPStateSQD}, mlx5.QPAttrState},
				{mlx5.QPAttr{State: mlx5.QPStateSQD, EnSQDAsyncNotify: true}, mlx5.QPAttrState | mlx5.QPAttrEnSQDAsyncNotify},
				{mlx5.QPAttr{State: mlx5.QPStateRTS, DestQPN: 1}, mlx5.QPAttrState | mlx5.QPAttrDestQPN}} {
				refused(t, "RTS->"+s.a.State.String(), qp, s.a, s.mask)
			}
			checkQuery(t, "after the refusals", qp, typ, want, seen)
			r.dataPath(t, qp, typ, cq, 0x5555, 10)

			// SQE to RTS: the device moved the send queue to SQE.
			if err := r.dev.InjectSendError(qp.QPN()); err != nil {
				t.Fatal(err)
			}
			cur := mlx5.QPAttr{State: mlx5.QPStateRTS, CurState: mlx5.QPStateSQE}
			switch typ {
			case mlx5.QPTypeUC, mlx5.QPTypeUD:
				// The kernel takes the current state from the caller.
				modify(t, qp, cur, mlx5.QPAttrState|mlx5.QPAttrCurState)
			case mlx5.QPTypeRC:
				// IB_QP_CUR_STATE is no attribute of an RC QP's SQE to RTS:
				// the kernel learns the state from Query.
				refused(t, "SQE->RTS with the current state", qp, cur, mlx5.QPAttrState|mlx5.QPAttrCurState)
				if at, err := qp.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateSQE {
					t.Fatalf("after a send queue error: %v, %v", at.State, err)
				}
				modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateRTS}, mlx5.QPAttrState)
			case mlx5.QPTypeDCI:
				// modify_dci_qp_is_ok has no SQE to RTS.
				if at, err := qp.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateSQE {
					t.Fatalf("after a send queue error: %v, %v", at.State, err)
				}
				refused(t, "SQE->RTS", qp, mlx5.QPAttr{State: mlx5.QPStateRTS}, mlx5.QPAttrState)
				modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState)
				modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
				walk(t, qp, &m, false)
			}
			checkQuery(t, "after SQE->RTS", qp, typ, want, seen)
			r.dataPath(t, qp, typ, cq, 0x5555, 20)

			// ERR, and from ERR only RESET (and ERR).
			modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState)
			for _, s := range []step{m.init, m.rtr, m.rts} {
				refused(t, "ERR->"+s.a.State.String(), qp, s.a, s.mask)
			}
			modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState)
			if at, err := qp.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateErr {
				t.Fatalf("ERR: %v, %v", at.State, err)
			}

			// ERR and RESET from every state.
			type reach struct {
				name string
				to   func()
			}
			reset := func() { modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState) }
			states := []reach{
				{"RESET", func() {}},
				{"INIT", func() { modify(t, qp, m.init.a, m.init.mask) }},
				{"RTR", func() { modify(t, qp, m.init.a, m.init.mask); modify(t, qp, m.rtr.a, m.rtr.mask) }},
				{"RTS", func() { walk(t, qp, &m, false) }},
				{"SQE", func() {
					walk(t, qp, &m, false)
					if err := r.dev.InjectSendError(qp.QPN()); err != nil {
						t.Fatal(err)
					}
				}},
				{"ERR", func() { walk(t, qp, &m, false); modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState) }},
			}
			for _, from := range states {
				for _, to := range []mlx5.QPState{mlx5.QPStateErr, mlx5.QPStateReset} {
					reset()
					from.to()
					if from.name == "RESET" && to == mlx5.QPStateErr {
						refused(t, "RESET->ERR", qp, mlx5.QPAttr{State: to}, mlx5.QPAttrState)
						continue
					}
					modify(t, qp, mlx5.QPAttr{State: to}, mlx5.QPAttrState)
					if at, err := qp.Query(mlx5.QPAttrState); err != nil || at.State != to {
						t.Errorf("%s->%v: %v, %v", from.name, to, at.State, err)
					}
				}
			}
			reset()
			walk(t, qp, &m, false)
			r.dataPath(t, qp, typ, cq, 0x5555, 30)
			pollN(t, cq, 0, time.Second)
		})
	}
}

// RESET starts a QP over: its completions still in the CQ are cleaned
// out, work posted before it never runs, and after RESET to RTS the
// queues work from their start (libmlx5's __mlx5_cq_clean and
// mlx5_modify_qp's reset of the queues).
func TestQPResetStartsOver(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	for _, typ := range []mlx5.QPType{mlx5.QPTypeRC, mlx5.QPTypeUC, mlx5.QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			cq := r.cq(t, 64, false)
			qp := r.qp(t, mlx5.QPOptions{Type: typ, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4})
			m := r.machines(qp.QPN())[typ]
			ah, err := r.pd.CreateAH(r.path)
			if err != nil {
				t.Fatal(err)
			}
			defer ah.Close()
			op := func(wrID uint64) *mlx5.SendWR {
				if typ == mlx5.QPTypeUD {
					wr := r.send(wrID, mlx5.SendSignaled)
					wr.AH, wr.RemoteQPN, wr.QKey = ah, qp.QPN(), m.rts2.a.QKey
					return wr
				}
				return r.writeWR(wrID, r.mr.RKey())
			}
			for round := range 3 {
				walk(t, qp, &m, false)
				// Completions left in the CQ: sends, and for UD receives;
				// and receives still posted.
				base := uint64(round * 100)
				pi, _ := producer(t, cq)
				n := uint32(3)
				for i := range uint64(3) {
					if typ == mlx5.QPTypeUD {
						r.recv(t, qp, base+50+i)
						n++
					}
					post(t, qp, op(base+i))
				}
				r.recv(t, qp, base+60)
				waitCQEs(t, cq, pi+n)
				modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
				if wc := pollN(t, cq, 0, time.Second); len(wc) != 0 {
					t.Fatalf("round %d: completions of the QP before RESET: %+v", round, wc)
				}
				// Posted in RTR, then RESET: it never runs.
				modify(t, qp, m.init.a, m.init.mask)
				modify(t, qp, m.rtr.a, m.rtr.mask)
				post(t, qp, op(base+70))
				modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
				walk(t, qp, &m, false)
				pollN(t, cq, 0, time.Second)
				// From the start: every queue entry once more.
				for i := range uint64(5) {
					if typ != mlx5.QPTypeUC { // UC: an RDMA WRITE consumes no receive
						r.recv(t, qp, base+80+i)
					}
					wr := op(base + 10 + i)
					if typ == mlx5.QPTypeRC {
						wr = r.send(base+10+i, mlx5.SendSignaled)
					}
					post(t, qp, wr)
					want := map[uint64]bool{base + 10 + i: true}
					if typ != mlx5.QPTypeUC {
						want[base+80+i] = true
					}
					for _, c := range pollN(t, cq, len(want), 5*time.Second) {
						if !want[c.WrID] || c.Status != mlx5.WCSuccess {
							t.Fatalf("round %d, work request %d after RESET: %+v", round, i, c)
						}
						delete(want, c.WrID)
					}
				}
				modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
			}
			qp.Close()
			cq.Close()
		})
	}
}

// A DCT moves RESET to INIT to RTR only, each with exactly its
// attributes (mlx5_ib_modify_dct), takes its number at RTR, and answers
// Query in RTR only.
func TestDCTStates(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.cq(t, 16, false)
	srq, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	dct := r.qp(t, mlx5.QPOptions{Type: mlx5.QPTypeDCT, SendCQ: cq, RecvCQ: cq, SRQ: srq, DCAccessKey: 0x1234})
	path := r.path
	path.MTU = 3
	path.TrafficClass, path.FlowLabel = 0x20, 0x12345
	const dctQuery = mlx5.QPAttrState | mlx5.QPAttrAccessFlags | mlx5.QPAttrPort | mlx5.QPAttrMinRNRTimer | mlx5.QPAttrAV |
		mlx5.QPAttrPathMTU | mlx5.QPAttrPKeyIndex
	init := step{mlx5.QPAttr{State: mlx5.QPStateInit, Access: mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead, Port: 1},
		mlx5.QPAttrState | mlx5.QPAttrAccessFlags | mlx5.QPAttrPKeyIndex | mlx5.QPAttrPort}
	rtr := step{mlx5.QPAttr{State: mlx5.QPStateRTR, MinRNRTimer: 12, Path: path}, mlx5.QPAttrState | mlx5.QPAttrMinRNRTimer | mlx5.QPAttrAV | mlx5.QPAttrPathMTU}
	if _, err := dct.Query(dctQuery); !errors.Is(mlx5.Checked(t, err), unix.EINVAL) {
		t.Errorf("query in RESET: %v, want EINVAL", err)
	}
	refused(t, "RESET->RTR", dct, rtr.a, rtr.mask)
	refused(t, "RESET->INIT without the access", dct, init.a, init.mask&^mlx5.QPAttrAccessFlags)
	refused(t, "RESET->INIT with a Q_Key", dct, init.a, init.mask|mlx5.QPAttrQKey)
	modify(t, dct, init.a, init.mask)
	refused(t, "INIT->INIT", dct, init.a, init.mask)
	refused(t, "INIT->RTR with a dest QPN", dct, rtr.a, rtr.mask|mlx5.QPAttrDestQPN)
	refused(t, "INIT->ERR", dct, mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState)
	if dct.QPN() != 0 {
		t.Errorf("a DCT before RTR has number %#x", dct.QPN())
	}
	modify(t, dct, rtr.a, rtr.mask)
	if dct.QPN() == 0 {
		t.Error("a DCT in RTR has no number")
	}
	got, err := dct.Query(dctQuery)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != mlx5.QPStateRTR || got.Access != init.a.Access || got.Port != 1 || got.MinRNRTimer != 12 || got.Path.MTU != 3 ||
		got.PKeyIndex != 0 || got.Path.TrafficClass != 0x20 || got.Path.FlowLabel != 0x12345 || got.Path.SGIDIndex != path.SGIDIndex ||
		got.Path.HopLimit != path.HopLimit {
		t.Errorf("DCT query %+v", got)
	}
	if _, err := dct.Query(dctQuery | mlx5.QPAttrDestQPN); !errors.Is(mlx5.Checked(t, err), unix.EINVAL) {
		t.Errorf("query of a dest QPN: %v, want EINVAL", err)
	}
	for _, s := range []mlx5.QPState{mlx5.QPStateRTS, mlx5.QPStateErr, mlx5.QPStateReset, mlx5.QPStateInit} {
		if err := dct.Modify(&mlx5.QPAttr{State: s}, mlx5.QPAttrState); !errors.Is(mlx5.Checked(t, err), unix.EINVAL) {
			t.Errorf("RTR->%v: %v, want EINVAL", s, err)
		}
	}
	// Its events name it by its RTR number: none here (the model runs no
	// DC traffic), and it closes cleanly.
	if err := dct.Close(); err != nil {
		t.Fatal(err)
	}
	noEvent(t, r.c, time.Millisecond)
}

// Modify refuses what is no QP state, and a mask of bits it does not
// know, before the kernel: ErrInvalid with EINVAL.
func TestModifyRefusedBeforeTheKernel(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.cq(t, 16, false)
	qp := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
	for _, c := range []struct {
		a    *mlx5.QPAttr
		mask mlx5.QPAttrMask
	}{
		{nil, mlx5.QPAttrState},
		{&mlx5.QPAttr{State: mlx5.QPStateErr + 1}, mlx5.QPAttrState},
		{&mlx5.QPAttr{State: mlx5.QPStateInit}, mlx5.QPAttrState | 1<<14}, // an alternate path: not in the API
		{&mlx5.QPAttr{State: mlx5.QPStateInit}, mlx5.QPAttrState | mlx5.QPAttrCap},
	} {
		if err := qp.Modify(c.a, c.mask); !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("modify %+v mask %#x: %v, want ErrInvalid and EINVAL", c.a, uint32(c.mask), err)
		}
	}
	if at, err := qp.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateReset {
		t.Errorf("after the refusals: %v, %v", at.State, err)
	}
	qp.Close()
	if err := qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateInit}, mlx5.QPAttrState); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("modify after Close: %v, want ErrClosed", err)
	}
	if _, err := qp.Query(mlx5.QPAttrState); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("query after Close: %v, want ErrClosed", err)
	}
}

// waitFor is CQ.Wait with a deadline of d.
func waitFor(cq *mlx5.CQ, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return cq.Wait(ctx)
}

func mustWait(t testing.TB, cq *mlx5.CQ) {
	t.Helper()
	if err := waitFor(cq, mustCome); err != nil {
		t.Fatalf("wait on CQ %#x: %v", cq.CQN(), err)
	}
}

func noWait(t testing.TB, cq *mlx5.CQ) {
	t.Helper()
	if err := waitFor(cq, 10*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on CQ %#x: %v, want no event", cq.CQN(), err)
	}
}

func arm(t testing.TB, cq *mlx5.CQ, solicited bool) {
	t.Helper()
	if err := cq.Arm(solicited); err != nil {
		t.Fatal(err)
	}
}

// sendRecv sends from a to b (whose receive CQ is the one under test)
// with flags, its receive posted first.
func (r *evRig) sendRecv(t testing.TB, a, b *mlx5.QP, wrID uint64, flags mlx5.SendFlags) {
	t.Helper()
	r.recv(t, b, wrID+1000)
	post(t, a, r.send(wrID, flags))
}

// cqc.st (mlx5_ifc.h): armed for the next completion, for a solicited
// one, fired.
const (
	cqcSolArmed = 0x6
	cqcArmed    = 0x9
	cqcFired    = 0xa
)

// waitArmed waits until the device took the CQ's arm: cqc.st is st.
func waitArmed(t testing.TB, cq *mlx5.CQ, st uint8) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Microsecond) {
		_, got := producer(t, cq)
		if got == st {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("CQ %#x: cqc.st %#x, want %#x", cq.CQN(), got, st)
		}
	}
}

// A next-completion arm fires once, at the next CQE; one CQE already
// past the consumer index fires it at once.
func TestCQArmNext(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	scq, rcq := r.cq(t, 64, false), r.cq(t, 64, true)
	a, b := r.pair(t, scq, rcq)
	arm(t, rcq, false)
	noWait(t, rcq)
	r.sendRecv(t, a, b, 1, mlx5.SendSignaled)
	mustWait(t, rcq)
	pollN(t, rcq, 1, 5*time.Second)
	// Fired: the next CQEs raise nothing until the next arm.
	r.sendRecv(t, a, b, 2, mlx5.SendSignaled)
	r.sendRecv(t, a, b, 3, mlx5.SendSignaled)
	waitCQEs(t, rcq, 3)
	noWait(t, rcq)
	// Armed behind CQEs it has not polled: at once, once.
	arm(t, rcq, false)
	mustWait(t, rcq)
	noWait(t, rcq)
	pollN(t, rcq, 2, 5*time.Second)
	// Two CQEs after one arm: one event.
	arm(t, rcq, false)
	r.sendRecv(t, a, b, 4, mlx5.SendSignaled)
	r.sendRecv(t, a, b, 5, mlx5.SendSignaled)
	waitCQEs(t, rcq, 5)
	mustWait(t, rcq)
	noWait(t, rcq)
	pollN(t, rcq, 2, 5*time.Second)
	pollN(t, scq, 5, 5*time.Second)
}

// A solicited arm fires only for a solicited or an error CQE.
func TestCQArmSolicited(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	scq, rcq := r.cq(t, 64, false), r.cq(t, 64, true)
	a, b := r.pair(t, scq, rcq)
	arm(t, rcq, true)
	r.sendRecv(t, a, b, 1, mlx5.SendSignaled)
	waitCQEs(t, rcq, 1)
	noWait(t, rcq)
	pollN(t, rcq, 1, 5*time.Second)
	r.sendRecv(t, a, b, 2, mlx5.SendSignaled|mlx5.SendSolicited)
	mustWait(t, rcq)
	pollN(t, rcq, 1, 5*time.Second)
	// Armed solicited behind an unsolicited CQE: nothing; then a
	// solicited one fires it.
	r.sendRecv(t, a, b, 3, mlx5.SendSignaled)
	waitCQEs(t, rcq, 3)
	arm(t, rcq, true)
	noWait(t, rcq)
	r.sendRecv(t, a, b, 4, mlx5.SendSignaled|mlx5.SendSolicited)
	mustWait(t, rcq)
	pollN(t, rcq, 2, 5*time.Second)
	// A next-completion arm is not weakened by a solicited one. (The
	// model sees the arms when its doorbell goroutine scans: wait until
	// it took the first, or it would see only the second.)
	arm(t, rcq, false)
	waitArmed(t, rcq, cqcArmed)
	arm(t, rcq, true)
	time.Sleep(time.Millisecond)
	if _, st := producer(t, rcq); st != cqcArmed {
		t.Errorf("after a solicited arm on a next-completion arm: cqc.st %#x, want armed (%#x)", st, cqcArmed)
	}
	r.sendRecv(t, a, b, 5, mlx5.SendSignaled)
	mustWait(t, rcq)
	pollN(t, rcq, 1, 5*time.Second)
	// An error CQE fires a solicited arm: b's posted receive flushed.
	arm(t, rcq, true)
	r.recv(t, b, 99)
	noWait(t, rcq)
	modify(t, b, mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState)
	mustWait(t, rcq)
	if wc := pollN(t, rcq, 1, 5*time.Second); wc[0].WrID != 99 || wc[0].Status != mlx5.WCWRFlushErr {
		t.Errorf("flushed receive: %+v", wc)
	}
	pollN(t, scq, 5, 5*time.Second)
}

// The classic race: poll empty, a completion lands, then the arm. The arm
// names the consumer index, so the CQE behind it fires the event at once:
// no wakeup is lost. And the loop of libibverbs' example, Wait, Arm, poll
// until empty, misses none of a stream of completions.
func TestCQArmNoLostWakeup(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	scq, rcq := r.cq(t, 256, false), r.cq(t, 256, true)
	a, b := r.pair(t, scq, rcq)
	wc := make([]mlx5.Completion, 16)
	for i := range 20 {
		if n, err := rcq.Poll(wc); n != 0 || err != nil {
			t.Fatalf("poll: %d %v", n, err)
		}
		pi, _ := producer(t, rcq)
		r.sendRecv(t, a, b, uint64(i), mlx5.SendSignaled)
		waitCQEs(t, rcq, pi+1) // it landed between the poll and the arm
		arm(t, rcq, false)
		mustWait(t, rcq)
		pollN(t, rcq, 1, 5*time.Second)
		pollN(t, scq, 1, 5*time.Second)
	}

	// A stream at random moments against the loop. The producer posts
	// the receives and sends and polls the send CQ; the consumer only
	// polls the receive CQ. At most 16 receives are outstanding.
	const n = 400
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			swc := make([]mlx5.Completion, 16)
			for i := range n {
				for {
					err := b.PostRecv(uint64(5000+i), []mlx5.SGE{{Addr: r.mr.Addr() + 4096, Length: 64, LKey: r.mr.LKey()}})
					if !errors.Is(err, mlx5.ErrQueueFull) {
						if err != nil {
							return err
						}
						break
					}
					time.Sleep(20 * time.Microsecond)
				}
				for {
					err := a.PostSend(r.send(uint64(i), mlx5.SendSignaled))
					if _, perr := scq.Poll(swc); perr != nil {
						return perr
					}
					if !errors.Is(err, mlx5.ErrQueueFull) {
						if err != nil {
							return err
						}
						break
					}
				}
				if i%3 == 0 {
					time.Sleep(time.Duration(i%4) * 30 * time.Microsecond)
				}
			}
			return nil
		}()
	}()
	got := 0
	arm(t, rcq, false)
	for got < n {
		for {
			k, err := rcq.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range wc[:k] {
				if c.Status != mlx5.WCSuccess || c.WrID != uint64(5000+got) {
					t.Fatalf("completion %d: %+v", got, c)
				}
				got++
			}
			if k == 0 {
				break
			}
		}
		if got == n {
			break
		}
		if err := waitFor(rcq, 5*time.Second); err != nil {
			select {
			case perr := <-done:
				t.Fatalf("after %d of %d completions: %v; the producer: %v", got, n, err, perr)
			default:
			}
			t.Fatalf("after %d of %d completions: %v (a lost wakeup)", got, n, err)
		}
		arm(t, rcq, false)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Two CQs of a context armed back to back: they share the context's
// non-cached UAR page, whose CQ doorbell on the model is memory, so the
// second ring overwrites the first before the model's doorbell goroutine
// scans. The model recovers the first arm from its CQ's doorbell record,
// which doorbell.CQ.Arm writes before it rings, as libmlx5's mlx5_arm_cq
// does (docs/MODEL.md, "Completion events"). It cannot when the record's
// word did not change: a CQ's first arm at consumer index 0 is word 0, so
// there the test lets the model take the first arm before the second.
func TestCQArmSharedDoorbell(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	c1, c2 := r.cq(t, 64, true), r.cq(t, 64, true)
	a, b := r.pair(t, c1, c2) // a's receives complete on c1, b's on c2
	both := func(id uint64) {
		r.sendRecv(t, b, a, id, mlx5.SendSignaled|mlx5.SendSolicited)
		r.sendRecv(t, a, b, id+1, mlx5.SendSignaled|mlx5.SendSolicited)
		mustWait(t, c1)
		mustWait(t, c2)
		pollN(t, c1, 2, 5*time.Second)
		pollN(t, c2, 2, 5*time.Second)
	}
	// The first arms (word 0), one at a time.
	arm(t, c1, false)
	waitArmed(t, c1, cqcArmed)
	arm(t, c2, false)
	both(10)
	// Back to back, from sequence number 1 and consumer index 2 on: the
	// first arm is in c1's record. Every other time c1's arm is
	// solicited (the SENDs are).
	for i := range 20 {
		arm(t, c1, i%2 == 1)
		arm(t, c2, i%3 == 1)
		both(uint64(100 + 10*i))
	}
}

// Arm and Wait need a completion channel (CQOptions.Events): a clear
// error otherwise, for verbs and DEVX CQs alike; with one, both have them.
func TestCQArmNeedsEvents(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	plain := r.cq(t, 16, false)
	devx, err := r.c.CreateCQ(mlx5.CQOptions{Entries: 16, DEVX: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, cq := range []*mlx5.CQ{plain, devx} {
		for name, err := range map[string]error{"arm": cq.Arm(false), "arm solicited": cq.Arm(true), "wait": cq.Wait(context.Background())} {
			if !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) || !errors.Is(err, unix.EINVAL) {
				t.Errorf("%s on CQ %#x without Events: %v, want ErrInvalid", name, cq.CQN(), err)
			}
		}
	}
	// A DEVX CQ with Events has Arm and Wait too (TestEventChannelDevxCQCompletions).
	cq, err := r.c.CreateCQ(mlx5.CQOptions{Entries: 16, DEVX: true, Events: true})
	if err != nil {
		t.Fatalf("a DEVX CQ with Events: %v", err)
	}
	if err := cq.Arm(false); err != nil {
		t.Errorf("arm a DEVX CQ with Events: %v", err)
	}
}

// Wait honours its ctx and leaves no goroutine behind; Close ends a Wait
// blocked on the CQ with ErrClosed, and Arm and Wait after Close are
// ErrClosed; so after Context.Close.
func TestCQWaitContextAndClose(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.cq(t, 16, true)
	settle := func() int {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		return runtime.NumGoroutine()
	}
	before := settle()
	arm(t, cq, false)
	for i := range 50 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		if i%2 == 1 {
			// Canceled, with no deadline that could pass first on a slow
			// machine (qemu-user) before cancel runs.
			cancel()
			ctx, cancel = context.WithCancel(context.Background())
			cancel()
		}
		err := cq.Wait(ctx)
		cancel()
		if want := []error{context.DeadlineExceeded, context.Canceled}[i%2]; !errors.Is(mlx5.Checked(t, err), want) {
			t.Fatalf("wait %d: %v, want %v", i, err, want)
		}
	}
	if after := settle(); after > before {
		t.Errorf("%d goroutines before 50 Waits that timed out, %d after", before, after)
	}

	errc := make(chan error, 1)
	go func() { errc <- cq.Wait(context.Background()) }()
	time.Sleep(5 * time.Millisecond)
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, mlx5.ErrClosed) {
			t.Errorf("Wait blocked at Close: %v, want ErrClosed", err)
		}
	case <-time.After(mustCome):
		t.Fatalf("Wait still blocked %v after Close", mustCome)
	}
	if err := cq.Wait(context.Background()); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("Wait after Close: %v", err)
	}
	if err := cq.Arm(false); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("Arm after Close: %v", err)
	}

	other := r.cq(t, 16, true)
	go func() { errc <- other.Wait(context.Background()) }()
	time.Sleep(5 * time.Millisecond)
	r.c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, mlx5.ErrClosed) {
			t.Errorf("Wait blocked at Context.Close: %v, want ErrClosed", err)
		}
	case <-time.After(mustCome):
		t.Fatalf("Wait still blocked %v after Context.Close", mustCome)
	}
	if err := other.Arm(false); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("Arm after Context.Close: %v", err)
	}
	if after := settle(); after > before {
		t.Errorf("%d goroutines before, %d after the CQs and the context closed", before, after)
	}
}

// A Wait blocks in the runtime (a channel on the model, the netpoller on
// a kernel), not by polling: 200 ms of Wait cost little CPU.
func TestCQWaitDoesNotSpin(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.cq(t, 16, true)
	arm(t, cq, false)
	cpu := func() time.Duration {
		var u unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_SELF, &u); err != nil {
			t.Fatal(err)
		}
		return time.Duration(u.Utime.Nano() + u.Stime.Nano())
	}
	const d = 200 * time.Millisecond
	// The model's doorbell goroutine polls the context's UAR pages, and
	// more under -race; measure its share with nothing waiting first.
	c0 := cpu()
	time.Sleep(d)
	idle := cpu() - c0
	c0 = cpu()
	start := time.Now()
	if err := waitFor(cq, d); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	wall, used := time.Since(start), cpu()-c0
	t.Logf("wait %v: CPU %v, idle %v", wall, used, idle)
	if used > idle+wall/4 {
		t.Errorf("a Wait of %v used %v of CPU (the process idle: %v)", wall, used, idle)
	}
}
