package model

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// Event helpers, from struct mlx5_ib_uapi_devx_async_event_hdr (the
// cookie, native endian) and struct mlx5_eqe (include/linux/mlx5/
// device.h: type at byte 1, data at 0x20; cq_err: cqn, syndrome at +11;
// qp_srq: type at +20, qp_srq_n at +24), independently of the model's
// constants.

type tevent struct {
	cookie uint64
	typ    uint8
	eqe    []byte
}

// nextEvent reads one event from ch within the timeout.
func nextEvent(t *testing.T, ch seam.EventChannel, timeout time.Duration) tevent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	buf := make([]byte, 8+64)
	n, err := ch.Next(ctx, buf)
	if err != nil || n != 72 {
		t.Fatalf("Next: %d, %v; want an event of 72 bytes", n, err)
	}
	return tevent{cookie: binary.NativeEndian.Uint64(buf), typ: buf[8+1], eqe: buf[8:]}
}

// noEvent checks that nothing arrives on ch within d.
func noEvent(t *testing.T, ch seam.EventChannel, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	buf := make([]byte, 72)
	if n, err := ch.Next(ctx, buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next: %d, %v (%x); want no event", n, err, buf[:n])
	}
}

func (e tevent) cqErr() (cqn uint32, syndrome uint8) {
	return binary.BigEndian.Uint32(e.eqe[0x20:]) & 0xffffff, e.eqe[0x20+11]
}

func (e tevent) qpSrq() (typ uint8, qpn uint32) {
	return e.eqe[0x20+20], binary.BigEndian.Uint32(e.eqe[0x20+24:]) & 0xffffff
}

func newChannel(t *testing.T, d *Device) seam.EventChannel {
	t.Helper()
	ch, err := d.NewEventChannel(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// TestSubscribeRules checks MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT's errnos:
// the channel (the uverbs FD lookup), the object (the IDR lookup), the
// event list (the attribute's minimum size, MAX_NUM_EVENTS,
// is_valid_events_legacy).
func TestSubscribeRules(t *testing.T) {
	d := newDev(t, "cx6dx")
	other, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ch := newChannel(t, d)
	foreign := newChannel(t, other)
	closed, _ := d.NewEventChannel(false)
	closed.Close()
	cqH, _ := newCQ(t, d)
	umemH, _, err := d.UMemReg(make([]byte, 64), accessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	sixteen := make([]uint16, 16)
	for i := range sixteen {
		sixteen[i] = evCQError
	}
	for _, c := range []struct {
		name  string
		ch    seam.EventChannel
		h     seam.Handle
		types []uint16
		want  error
	}{
		{"CQ_ERROR on a CQ", ch, cqH, []uint16{0x04}, nil},
		{"every legacy object event", ch, cqH, []uint16{0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x07, 0x10, 0x11, 0x12, 0x13, 0x14, 0x18, 0x1c, 0x1d}, nil},
		{"16 events", ch, cqH, sixteen, nil},
		{"SQ_DRAINED on a CQ (devx.c does not check the object's type)", ch, cqH, []uint16{0x03}, nil},
		{"17 events", ch, cqH, append(sixteen, evCQError), unix.EINVAL},
		{"no events", ch, cqH, nil, unix.EINVAL},
		{"PORT_CHANGE (unaffiliated)", ch, cqH, []uint16{0x09}, unix.EINVAL},
		{"INTERNAL_ERROR", ch, cqH, []uint16{0x04, 0x08}, unix.EINVAL},
		{"an event past 255", ch, cqH, []uint16{0x104}, unix.EINVAL},
		{"no such handle", ch, 999, []uint16{0x04}, unix.ENOENT},
		{"a UMEM handle", ch, umemH, []uint16{0x04}, unix.EINVAL},
		{"another context's channel", foreign, cqH, []uint16{0x04}, unix.EBADF},
		{"a closed channel", closed, cqH, []uint16{0x04}, unix.EBADF},
		{"no channel", nil, cqH, []uint16{0x04}, unix.EBADF},
		{"an async command FD", mustAsyncFD(t, d), cqH, []uint16{0x04}, unix.EBADF},
		{"bad channel before bad handle", closed, 999, nil, unix.EBADF},
		{"bad handle before bad list", ch, 999, nil, unix.ENOENT},
	} {
		err := d.Subscribe(c.ch, c.h, c.types, 1)
		if (c.want == nil) != (err == nil) || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		var ke *KernelError
		if err != nil && !errors.As(err, &ke) {
			t.Errorf("%s: %T is not a *KernelError", c.name, err)
		}
	}
	d.Close()
	if err := d.Subscribe(ch, cqH, []uint16{0x04}, 1); !errors.Is(err, unix.EBADF) {
		t.Errorf("after Close: %v, want EBADF", err)
	}
}

// mustAsyncFD is an async command FD posing as an event channel.
type asyncAsChannel struct{ seam.AsyncCmdFD }

func mustAsyncFD(t *testing.T, d *Device) seam.EventChannel {
	t.Helper()
	fd, err := d.NewAsyncCmdFD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fd.Close() })
	return asyncAsChannel{fd}
}

// TestEventChannelRead checks devx_async_event_read's answers and the
// channel's life: EINVAL for a short buffer (the event stays), EIO once
// the context closes (a waiting reader wakes), EBADF after Close, and
// Objects counting the channel.
func TestEventChannelRead(t *testing.T) {
	d, err := NewWithOptions("cx6dx", Options{ManualDrain: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := setupQP(t, d)
	qpH, qpn := s.create(t, d, stRC)
	base := d.Objects()
	ch, err := d.NewEventChannel(false)
	if err != nil {
		t.Fatal(err)
	}
	if n := d.Objects(); n != base+1 {
		t.Errorf("Objects() = %d with a channel, want %d", n, base+1)
	}
	if err := d.Subscribe(ch, qpH, []uint16{evSQDrained}, 42); err != nil {
		t.Fatal(err)
	}
	driveQP(t, d, qpn, StateSQDraining)
	noEvent(t, ch, 5*time.Millisecond)
	if err := d.FinishDrain(qpn); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []int{0, 8, 71} {
		if _, err := ch.Next(ctx, make([]byte, n)); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Next with %d bytes: %v, want EINVAL", n, err)
		}
	}
	ev := nextEvent(t, ch, mustCome) // still there
	if ev.cookie != 42 || ev.typ != evSQDrained {
		t.Errorf("event: cookie %d type %#x, want 42 and SQ_DRAINED", ev.cookie, ev.typ)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ch.Next(cctx, make([]byte, 72)); !errors.Is(err, context.Canceled) {
		t.Errorf("Next with a done context: %v", err)
	}
	done := make(chan error)
	go func() { _, err := ch.Next(ctx, make([]byte, 72)); done <- err }()
	time.Sleep(10 * time.Millisecond)
	d.Close()
	select {
	case err := <-done:
		if !errors.Is(err, unix.EIO) {
			t.Errorf("Next across Close: %v, want EIO", err)
		}
	case <-time.After(mustCome):
		t.Fatal("Next did not wake on Close")
	}
	if _, err := ch.Next(ctx, make([]byte, 72)); !errors.Is(err, unix.EIO) {
		t.Errorf("Next after the context closed: %v, want EIO", err)
	}
	if n := d.Objects(); n != 0 {
		t.Errorf("Objects() = %d after Close", n)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Next(ctx, make([]byte, 72)); !errors.Is(err, unix.EBADF) {
		t.Errorf("Next after the channel's Close: %v, want EBADF", err)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCQOverrunEvent is rdma-core's test_mlx5_devx_async_events.py
// (test_cq_error_event_cookie) on the model: traffic into a CQ nobody
// polls overruns it, and a channel subscribed to CQ_ERROR on the CQ gets
// exactly one event with its cookie, the CQ number and syndrome 1
// (MLX5_CQ_ERROR_SYNDROME_CQ_OVERRUN).
func TestCQOverrunEvent(t *testing.T) {
	r := newRig(t, "cx6dx")
	scq := r.cq(1) // 2 CQEs
	a := r.qp(scq, r.cq(4), qpOpts{})
	b := r.qp(r.cq(4), r.cq(4), qpOpts{})
	connect(a, b, false)
	ch := newChannel(t, r.d)
	twice := newChannel(t, r.d)
	other := newChannel(t, r.d)
	const cookie = 100
	if err := r.d.Subscribe(ch, scq.h, []uint16{evCQError}, cookie); err != nil {
		t.Fatal(err)
	}
	// The same event twice on one channel is delivered twice (two
	// subscriptions); another event type on the CQ, and CQ_ERROR on
	// another object, get nothing.
	if err := r.d.Subscribe(twice, scq.h, []uint16{evCQError, evCQError}, 7); err != nil {
		t.Fatal(err)
	}
	if err := r.d.Subscribe(other, scq.h, []uint16{evSQDrained, evComp}, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.d.Subscribe(other, a.h, []uint16{evCQError}, 2); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		a.post(twqe{opcode: tOpNOP, fm: tSignaled})
	}
	ev := nextEvent(t, ch, mustCome)
	cqn, syndrome := ev.cqErr()
	if ev.cookie != cookie || ev.typ != 0x04 || cqn != scq.cqn || syndrome != 0x01 {
		t.Errorf("event: cookie %d, type %#x, cqn %#x, syndrome %#x; want %d, CQ_ERROR, %#x, CQ_OVERRUN", ev.cookie, ev.typ, cqn, syndrome, cookie, scq.cqn)
	}
	for i := range 2 {
		if ev := nextEvent(t, twice, mustCome); ev.cookie != 7 || ev.typ != 0x04 {
			t.Errorf("twice, event %d: %+v", i, ev)
		}
	}
	// More traffic into the overrun CQ: no more events.
	for range 4 {
		a.post(twqe{opcode: tOpNOP, fm: tSignaled})
	}
	waitFaults(t, r.d, 1)
	noEvent(t, ch, 5*time.Millisecond)
	noEvent(t, twice, time.Millisecond)
	noEvent(t, other, time.Millisecond)
	out := prm.QueryCqOut.Layout().New()
	in := mbox(prm.QueryCqIn.Layout(), prm.MLX5_CMD_OP_QUERY_CQ)
	prm.QueryCqIn.Cqn.Set(in, uint64(scq.cqn))
	if err := r.d.ObjQuery(scq.h, in, out); err != nil {
		t.Fatal(err)
	}
	if st := prm.Cqc.Status.At(prm.QueryCqOut.CqContext).Get(out); st != 0x9 {
		t.Errorf("cqc.status %#x, want CQ_OVERFLOW", st)
	}
}

// TestSQDrainedEvent: a signature error on a QP with drain_sigerr stops
// its send queue in SQ_DRAINING (0x7); SQD_RTS is refused there; the drain
// ends in SQD (0x5, what mlx5dv_qp_cancel_posted_send_wrs's QUERY_QP
// wants) with one SQ_DRAINED event for the QP's subscribers; SQD_RTS then
// resumes it.
func TestSQDrainedEvent(t *testing.T) {
	for _, c := range []struct {
		name   string
		manual bool
	}{{"doorbell goroutine", false}, {"FinishDrain", true}} {
		t.Run(c.name, func(t *testing.T) {
			r := newRigOpts(t, "cx7", Options{ManualDrain: c.manual})
			a, _ := pair(t, r, qpOpts{drainSigerr: true})
			ch := newChannel(t, r.d)
			if err := r.d.Subscribe(ch, a.h, []uint16{evSQDrained}, 9); err != nil {
				t.Fatal(err)
			}
			if err := r.d.InjectSigErr(a.qpn); err != nil {
				t.Fatal(err)
			}
			if c.manual {
				if st := queryQPState(t, r.d, a); st != StateSQDraining {
					t.Fatalf("QUERY_QP state %#x, want SQ_DRAINING", st)
				}
				if st := r.d.Exec(transitionIn(prm.MLX5_CMD_OP_SQD_RTS_QP, a.qpn), make([]byte, 16)); st != prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR {
					t.Errorf("SQD_RTS while draining: %v, want BAD_RES_STATE_ERR", st)
				}
				noEvent(t, ch, 5*time.Millisecond)
				if err := r.d.FinishDrain(a.qpn); err != nil {
					t.Fatal(err)
				}
			}
			ev := nextEvent(t, ch, mustCome)
			typ, qpn := ev.qpSrq()
			if ev.cookie != 9 || ev.typ != 0x03 || typ != 0 || qpn != a.qpn {
				t.Errorf("event: cookie %d, type %#x, queue type %d, qpn %#x; want 9, SQ_DRAINED, QP, %#x", ev.cookie, ev.typ, typ, qpn, a.qpn)
			}
			if st := queryQPState(t, r.d, a); st != StateSQD {
				t.Errorf("QUERY_QP state %#x after the event, want SQD", st)
			}
			if err := r.d.FinishDrain(a.qpn); err == nil {
				t.Error("FinishDrain of a drained QP succeeded")
			}
			noEvent(t, ch, 2*time.Millisecond)
			a.modify(prm.MLX5_CMD_OP_SQD_RTS_QP, nil)
			idx := a.post(twqe{opcode: tOpNOP, fm: tSignaled})
			checkCQE(t, "NOP after SQD_RTS", a.scq.next(), a.wantReq(tOpNOP, idx, 0, 0))
		})
	}
}

func queryQPState(t *testing.T, d *Device, q *tqp) uint8 {
	t.Helper()
	in := mbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(in, uint64(q.qpn))
	out := prm.QueryQpOut.Layout().New()
	if err := d.ObjQuery(q.h, in, out); err != nil {
		t.Fatal(err)
	}
	return uint8(prm.Qpc.State.At(prm.QueryQpOut.Qpc).Get(out))
}

// TestSubscriptionEnds: a subscription ends when its object is destroyed
// (a QP that takes the number next gets nothing, ReuseQPN) or its channel
// closes; nothing is left filed.
func TestSubscriptionEnds(t *testing.T) {
	d, err := NewWithOptions("cx6dx", Options{ReuseQPN: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := setupQP(t, d)
	ch := newChannel(t, d)
	h, qpn := s.create(t, d, stRC)
	if err := d.Subscribe(ch, h, []uint16{evSQDrained}, 1); err != nil {
		t.Fatal(err)
	}
	driveQP(t, d, qpn, StateSQD) // no UAR page mapped: the drain ends at once
	if ev := nextEvent(t, ch, mustCome); ev.typ != evSQDrained {
		t.Fatalf("event %+v", ev)
	}
	destroy(t, d, h)
	h2, qpn2 := s.create(t, d, stRC)
	if qpn2 != qpn {
		t.Fatalf("ReuseQPN: QPN %#x after %#x was destroyed", qpn2, qpn)
	}
	driveQP(t, d, qpn2, StateSQD)
	noEvent(t, ch, 5*time.Millisecond)
	if len(d.h.subs) != 0 {
		t.Errorf("%d subscription keys left after the object's destroy", len(d.h.subs))
	}
	ch2, _ := d.NewEventChannel(false)
	if err := d.Subscribe(ch2, h2, []uint16{evSQDrained, evCQError}, 2); err != nil {
		t.Fatal(err)
	}
	ch2.Close()
	if len(d.h.subs) != 0 || len(d.handles[h2].subs) != 0 {
		t.Errorf("subscriptions left after the channel's Close: %d keys, %d on the QP", len(d.h.subs), len(d.handles[h2].subs))
	}
}

// TestReuseQPN: by default a destroyed QP's number does not come back
// soon; with Options.ReuseQPN the lowest free one is taken at once, for
// the model's QPs and the Exec ones alike.
func TestReuseQPN(t *testing.T) {
	for _, c := range []struct {
		reuse bool
		want  func(a, b uint32) uint32 // the third QP's number after a's destroy
	}{
		{false, func(a, b uint32) uint32 { return b + 1 }},
		{true, func(a, b uint32) uint32 { return a }},
	} {
		d, err := NewWithOptions("cx5", Options{ReuseQPN: c.reuse})
		if err != nil {
			t.Fatal(err)
		}
		s := setupQP(t, d)
		ha, a := s.create(t, d, stRC)
		_, b := s.create(t, d, stRC)
		destroy(t, d, ha)
		if _, got := s.create(t, d, stRC); got != c.want(a, b) {
			t.Errorf("ReuseQPN %v: QPNs %#x, %#x, then %#x after the first's destroy; want %#x", c.reuse, a, b, got, c.want(a, b))
		}
		// Another context of the HCA shares the numbering.
		o, err := d.Open()
		if err != nil {
			t.Fatal(err)
		}
		so := setupQP(t, o)
		_, n := so.create(t, o, stRC)
		if c.reuse && n != b+1 || !c.reuse && n != b+2 {
			t.Errorf("ReuseQPN %v: the second context's QP is %#x", c.reuse, n)
		}
		o.Close()
		d.Close()
	}
}

// TestReuseQPNStaleCQE shows the hazard ReuseQPN is for: a CQE of a QP
// destroyed before its CQ was polled carries the same QP number as the
// CQE of the QP that took the number next.
func TestReuseQPNStaleCQE(t *testing.T) {
	r := newRigOpts(t, "cx6dx", Options{ReuseQPN: true})
	cq := r.cq(4)
	a := r.qp(cq, cq, qpOpts{})
	b := r.qp(r.cq(4), r.cq(4), qpOpts{})
	connect(a, b, false)
	old := a.post(twqe{opcode: tOpNOP, fm: tSignaled})
	waitCQ(t, r.d, cq.cqn, 1)
	destroyH(t, r.d, a.h)
	c := r.qp(cq, cq, qpOpts{})
	if c.qpn != a.qpn {
		t.Fatalf("the new QP is %#x, want %#x", c.qpn, a.qpn)
	}
	c.modify(prm.MLX5_CMD_OP_RST2INIT_QP, nil)
	c.modify(prm.MLX5_CMD_OP_INIT2RTR_QP, func(in []byte, qpc prm.Field) { prm.Qpc.RemoteQpn.At(qpc).Set(in, uint64(b.qpn)) })
	c.modify(prm.MLX5_CMD_OP_RTR2RTS_QP, nil)
	idx := c.post(twqe{opcode: tOpNOP, fm: tSignaled})
	checkCQE(t, "the destroyed QP's NOP", cq.next(), a.wantReq(tOpNOP, old, 0, 0))
	checkCQE(t, "the new QP's NOP", cq.next(), c.wantReq(tOpNOP, idx, 0, 0))
}

// TestEventChannelReadSizes: devx_async_event_read's answer to the
// buffer's size, with and without event data (an event of 72 bytes, or
// the 8-byte cookie): one byte short is EINVAL and the event stays
// queued; a buffer of exactly one event takes it; a buffer with room for
// two takes one event a read, in the order they were raised.
func TestEventChannelReadSizes(t *testing.T) {
	for _, omit := range []bool{false, true} {
		t.Run(fmt.Sprintf("omit=%v", omit), func(t *testing.T) {
			d, err := NewWithOptions("cx6dx", Options{ManualDrain: true})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			s := setupQP(t, d)
			ch, err := d.NewEventChannel(omit)
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			size := seam.EventHeaderSize + seam.EQESize
			if omit {
				size = seam.EventHeaderSize
			}
			cookies := []uint64{7, 8, 9}
			for _, cookie := range cookies {
				qpH, qpn := s.create(t, d, stRC)
				if err := d.Subscribe(ch, qpH, []uint16{evSQDrained}, cookie); err != nil {
					t.Fatal(err)
				}
				driveQP(t, d, qpn, StateSQDraining)
				if err := d.FinishDrain(qpn); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			for _, n := range []int{0, 1, size - 1} {
				if got, err := ch.Next(ctx, make([]byte, n)); !errors.Is(err, unix.EINVAL) || got != 0 {
					t.Errorf("Next with %d bytes: %d, %v; want EINVAL", n, got, err)
				}
			}
			for i, buf := range [][]byte{make([]byte, size), make([]byte, 2*size+5), make([]byte, 4096)} {
				n, err := ch.Next(ctx, buf)
				if err != nil || n != size {
					t.Fatalf("read %d into %d bytes: %d, %v; want one event of %d", i, len(buf), n, err, size)
				}
				if c := binary.NativeEndian.Uint64(buf); c != cookies[i] {
					t.Errorf("read %d: cookie %d, want %d", i, c, cookies[i])
				}
				if !omit && buf[8+1] != evSQDrained {
					t.Errorf("read %d: event type %#x, want SQ_DRAINED", i, buf[8+1])
				}
			}
			noEvent(t, ch, 5*time.Millisecond)
		})
	}
}
