package cm_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"golang.org/x/sys/unix"
)

// host is one side: a context on the shared software ConnectX, its
// connection manager, and what its QPs need.
type host struct {
	c  *mlx5.Context
	m  *cm.Manager
	pd *mlx5.PD
	cq *mlx5.CQ
}

// pair opens two contexts on one software ConnectX, each with its own
// connection manager, as two processes on a host with one RDMA device.
func pair(t *testing.T) (srv, cli *host) {
	t.Helper()
	sc := mlx5test.New(t, "")
	cc := mlx5test.NewPeer(t, sc)
	return newHost(t, sc), newHost(t, cc)
}

func newHost(t *testing.T, c *mlx5.Context) *host {
	t.Helper()
	h := &host{c: c, m: mlx5test.NewCM(t, c)}
	var err error
	if h.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if h.cq, err = c.CreateCQ(mlx5.CQOptions{Entries: 64}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.cq.Close(); h.pd.Close() })
	return h
}

func (h *host) qp(t *testing.T, typ mlx5.QPType) *mlx5.QP {
	t.Helper()
	qp, err := h.c.CreateQP(mlx5.QPOptions{Type: typ, PD: h.pd, SendCQ: h.cq, RecvCQ: h.cq, MaxSendWR: 8, MaxSendSGE: 1,
		MaxInlineData: 64, MaxRecvWR: 8, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Close() })
	return qp
}

// listen listens on h's TCP port space at 192.0.2.1, a port of the
// manager's choosing; the caller closes the listener.
func (h *host) listen(t *testing.T, ctx context.Context) *cm.Listener {
	t.Helper()
	l, err := h.m.Listen(ctx, "tcp", "192.0.2.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), mustCome)
	t.Cleanup(cancel)
	return ctx
}

// accepted runs fn on the next request of l in a goroutine and returns
// its connection and error through the channel.
type result struct {
	c   *cm.Conn
	err error
}

func serveOne(ctx context.Context, l *cm.Listener, fn func(*cm.Request) (*cm.Conn, error)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err != nil {
			ch <- result{err: err}
			return
		}
		c, err := fn(r)
		ch <- result{c, err}
	}()
	return ch
}

func qpState(t *testing.T, qp *mlx5.QP) mlx5.QPState {
	t.Helper()
	a, err := qp.Query(mlx5.QPAttrState)
	if err != nil {
		t.Fatal(err)
	}
	return a.State
}

// TestRCConnectPrivateDataBothWays connects an RC QP of one context to
// one of another through their connection managers, with private data
// both ways, checks both QPs reached RTS connected to each other, and
// sends a message over them.
func TestRCConnectPrivateDataBothWays(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	l := srv.listen(t, ctx)
	defer l.Close()
	sqp, cqp := srv.qp(t, mlx5.QPTypeRC), cli.qp(t, mlx5.QPTypeRC)
	var gotReq []byte
	done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) {
		gotReq = r.PrivateData()
		return r.Accept(ctx, &cm.AcceptOptions{QP: sqp, PrivateData: []byte("welcome")})
	})
	conn, err := cli.m.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: cqp, PrivateData: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.c.Close()
	if len(gotReq) != cm.MaxRequestData || !bytes.Equal(gotReq[:5], []byte("hello")) || !bytes.Equal(gotReq[5:], make([]byte, cm.MaxRequestData-5)) {
		t.Errorf("request private data % x", gotReq)
	}
	if pd := conn.PrivateData(); len(pd) != cm.MaxReplyData || string(pd[:7]) != "welcome" {
		t.Errorf("reply private data % x", pd)
	}
	if !bytes.Equal(res.c.PrivateData(), gotReq) {
		t.Errorf("the accepted connection's private data differs from the request's")
	}
	for _, qp := range []*mlx5.QP{sqp, cqp} {
		if s := qpState(t, qp); s != mlx5.QPStateRTS {
			t.Errorf("QP %#x in %v, want RTS", qp.QPN(), s)
		}
	}
	a, err := cqp.Query(mlx5.QPAttrDestQPN)
	if err != nil || a.DestQPN != sqp.QPN() {
		t.Errorf("the dialer's QP is connected to %#x (%v), want %#x", a.DestQPN, err, sqp.QPN())
	}
	if conn.RemoteAddr().String() != l.Addr().String() || res.c.RemoteAddr().String() != conn.LocalAddr().String() {
		t.Errorf("addresses: dialer %v -> %v, listener side %v -> %v", conn.LocalAddr(), conn.RemoteAddr(), res.c.LocalAddr(), res.c.RemoteAddr())
	}
	for _, c := range []*cm.Conn{conn, res.c} {
		if ev, err := c.NextEvent(ctx); err != nil || ev.Type != cm.EventEstablished {
			t.Errorf("first event %v, %v", ev, err)
		}
	}
	exchange(t, srv, cli, sqp, cqp)
}

// recvBuffer is a page of h's registered for receives, both gone when
// the test ends.
func recvBuffer(t *testing.T, h *host) (*mlx5.Buffer, *mlx5.MR) {
	t.Helper()
	buf, err := mlx5.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	mr, err := h.pd.RegMR(buf.Bytes(), mlx5.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	return buf, mr
}

// exchange sends one message from the dialer's QP to the listener's.
func exchange(t *testing.T, srv, cli *host, sqp, cqp *mlx5.QP) {
	t.Helper()
	buf, mr := recvBuffer(t, srv)
	if err := sqp.PostRecv(7, []mlx5.SGE{{Addr: mr.Addr(), Length: 64, LKey: mr.LKey()}}); err != nil {
		t.Fatal(err)
	}
	if err := cqp.PostSend(&mlx5.SendWR{WrID: 8, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, Inline: [][]byte{[]byte("over the CM")}}); err != nil {
		t.Fatal(err)
	}
	var wc [2]mlx5.Completion
	got := map[uint64]mlx5.Completion{}
	for deadline := time.Now().Add(mustCome); len(got) < 2 && time.Now().Before(deadline); {
		for _, cq := range []*mlx5.CQ{srv.cq, cli.cq} {
			n, err := cq.Poll(wc[:])
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wc[:n] {
				got[w.WrID] = w
			}
		}
	}
	if w := got[7]; w.Status != mlx5.WCSuccess || string(buf.Bytes()[:w.ByteLen]) != "over the CM" {
		t.Errorf("receive %+v: %q", w, buf.Bytes()[:w.ByteLen])
	}
	if w := got[8]; w.Status != mlx5.WCSuccess {
		t.Errorf("send %+v", w)
	}
}

// TestRejectWithPrivateData rejects a request with private data and
// checks the dialer's error carries it, and that nothing is left.
func TestRejectWithPrivateData(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	l, err := srv.m.Listen(ctx, "tcp", "192.0.2.1:4420", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) {
		return nil, r.Reject(0, []byte{0x00, 0x06, 0x00, 0x02})
	})
	qp := cli.qp(t, mlx5.QPTypeRC)
	_, err = cli.m.Dial(ctx, "tcp", "192.0.2.1:4420", &cm.DialOptions{QP: qp})
	var rej *cm.RejectError
	if !errors.As(err, &rej) || !errors.Is(err, cm.ErrRejected) || !errors.Is(err, unix.ECONNREFUSED) {
		t.Fatalf("dial: %v, want a *RejectError", err)
	}
	if rej.Reason != cm.RejectConsumerDefined || len(rej.PrivateData) != cm.MaxRejectData || !bytes.Equal(rej.PrivateData[:4], []byte{0, 6, 0, 2}) {
		t.Errorf("reject reason %d, private data % x", rej.Reason, rej.PrivateData)
	}
	var me *mlx5.Error
	if !errors.As(err, &me) || me.Op != "dial" || me.Obj != "192.0.2.1:4420" {
		t.Errorf("error %q is not an *mlx5.Error naming dial and the address", err)
	}
	if res := <-done; res.err != nil {
		t.Fatal(res.err)
	}
	if s := qpState(t, qp); s != mlx5.QPStateErr {
		t.Errorf("the rejected dialer's QP is in %v, want ERR", s)
	}
	waitIDs(t, srv.c, 1) // the listener's
}

// waitIDs waits for the CM's ids on the device to come down to want.
func waitIDs(t *testing.T, c *mlx5.Context, want int) {
	t.Helper()
	var n int
	for deadline := time.Now().Add(mustCome); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var err error
		if n, err = mlx5test.CMIDs(c); err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
	}
	t.Errorf("%d CM ids alive, want %d", n, want)
}

// TestDisconnectFromEitherSide disconnects once from the dialer's side
// and once from the listener's, and checks both sides see
// DISCONNECTED, their QPs in ERR, and TIMEWAIT_EXIT afterwards.
func TestDisconnectFromEitherSide(t *testing.T) {
	for _, fromDialer := range []bool{true, false} {
		srv, cli := pair(t)
		ctx := testCtx(t)
		l, err := srv.m.Listen(ctx, "tcp", "192.0.2.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		sqp, cqp := srv.qp(t, mlx5.QPTypeRC), cli.qp(t, mlx5.QPTypeRC)
		done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) { return r.Accept(ctx, &cm.AcceptOptions{QP: sqp}) })
		dc, err := cli.m.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: cqp})
		if err != nil {
			t.Fatal(err)
		}
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		lc := res.c
		first, other := dc, lc
		if !fromDialer {
			first, other = lc, dc
		}
		if err := first.Disconnect(); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*cm.Conn{other, first} {
			select {
			case <-c.Done():
			case <-ctx.Done():
				t.Fatalf("%v: not disconnected", c)
			}
			if !errors.Is(c.Err(), cm.ErrDisconnected) {
				t.Errorf("%v: Err %v", c, c.Err())
			}
			var types []cm.EventType
			for len(types) < 3 {
				ev, err := c.NextEvent(ctx)
				if err != nil {
					t.Fatalf("%v: %v after %v", c, err, types)
				}
				types = append(types, ev.Type)
			}
			if types[0] != cm.EventEstablished || types[1] != cm.EventDisconnected || types[2] != cm.EventTimewaitExit {
				t.Errorf("%v: events %v", c, types)
			}
		}
		for _, qp := range []*mlx5.QP{sqp, cqp} {
			if s := qpState(t, qp); s != mlx5.QPStateErr {
				t.Errorf("QP %#x in %v after the disconnect, want ERR", qp.QPN(), s)
			}
		}
		if err := first.Disconnect(); err != nil {
			t.Errorf("second disconnect: %v", err)
		}
		for _, c := range []*cm.Conn{dc, lc, dc} {
			if err := c.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
		l.Close()
		waitIDs(t, srv.c, 0)
	}
}

// TestDeviceRemoval: the device going away ends a connection on both
// sides with ErrDeviceRemoved and EventDeviceRemoval, its QPs in ERR;
// the listener's Accept returns it; a new dial finds no RDMA device.
func TestDeviceRemoval(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	l := srv.listen(t, ctx)
	defer l.Close()
	sqp, cqp := srv.qp(t, mlx5.QPTypeRC), cli.qp(t, mlx5.QPTypeRC)
	done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) { return r.Accept(ctx, &cm.AcceptOptions{QP: sqp}) })
	dc, err := cli.m.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: cqp})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.c.Close()
	if err := mlx5test.InjectCMDeviceRemoval(srv.c); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*cm.Conn{dc, res.c} {
		select {
		case <-c.Done():
		case <-ctx.Done():
			t.Fatalf("%v did not end", c)
		}
		if !errors.Is(c.Err(), cm.ErrDeviceRemoved) {
			t.Errorf("%v: %v", c, c.Err())
		}
		c.NextEvent(ctx) // ESTABLISHED
		if ev, err := c.NextEvent(ctx); err != nil || ev.Type != cm.EventDeviceRemoval {
			t.Errorf("%v: event %v, %v", c, ev, err)
		}
	}
	for _, qp := range []*mlx5.QP{sqp, cqp} {
		if s := qpState(t, qp); s != mlx5.QPStateErr {
			t.Errorf("QP %#x in %v", qp.QPN(), s)
		}
	}
	if _, err := l.Accept(ctx); !errors.Is(err, cm.ErrDeviceRemoved) {
		t.Errorf("accept after the removal: %v", err)
	}
	if _, err := cli.m.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: cli.qp(t, mlx5.QPTypeRC)}); !errors.Is(err, unix.ENODEV) {
		t.Errorf("dial after the removal: %v, want ENODEV", err)
	}
}
