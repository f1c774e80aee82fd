package cm_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"golang.org/x/sys/unix"
)

// nothingLeft checks a failed call left nothing: no CM id but the
// listeners' (want), the QP still in RESET.
func nothingLeft(t *testing.T, c *mlx5.Context, want int, qp *mlx5.QP) {
	t.Helper()
	waitIDs(t, c, want)
	if qp != nil {
		if s := qpState(t, qp); s != mlx5.QPStateReset {
			t.Errorf("QP %#x in %v after the failed call, want RESET", qp.QPN(), s)
		}
	}
}

func isInvalid(err error) bool {
	var me *mlx5.Error
	return errors.As(err, &me) && errors.Is(err, mlx5.ErrInvalid) && errors.Is(err, unix.EINVAL)
}

// TestAcceptTwice: a second Accept of a request, or a Reject after the
// Accept, is refused before anything is sent, and the connection the
// first made works on.
func TestAcceptTwice(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	l := srv.listen(t, ctx)
	defer l.Close()
	sqp, sqp2, cqp := srv.qp(t, mlx5.QPTypeRC), srv.qp(t, mlx5.QPTypeRC), cli.qp(t, mlx5.QPTypeRC)
	reqc := make(chan *cm.Request, 1)
	done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) {
		reqc <- r
		return r.Accept(ctx, &cm.AcceptOptions{QP: sqp})
	})
	conn, err := cli.m.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: cqp})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.c.Close()
	r := <-reqc
	if _, err := r.Accept(ctx, &cm.AcceptOptions{QP: sqp2}); !isInvalid(err) || !strings.Contains(err.Error(), "already accepted") {
		t.Errorf("second accept: %v, want ErrInvalid", err)
	}
	if err := r.Reject(0, nil); !isInvalid(err) {
		t.Errorf("reject after accept: %v, want ErrInvalid", err)
	}
	if s := qpState(t, sqp2); s != mlx5.QPStateReset {
		t.Errorf("the second accept's QP moved to %v", s)
	}
	select {
	case <-res.c.Done():
		t.Fatalf("the accepted connection ended: %v", res.c.Err())
	case <-conn.Done():
		t.Fatalf("the dialed connection ended: %v", conn.Err())
	default:
	}
	exchange(t, srv, cli, sqp, cqp)
}

// TestPrivateDataTooLong: more private data than the IB CM message
// carries is refused with a clear error before anything is sent; a
// request whose Reject is refused so can still be answered, and an
// Accept refused so answers it with a reject.
func TestPrivateDataTooLong(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	for _, c := range []struct {
		network string
		limit   int
	}{{"tcp", cm.MaxRequestData}, {"udp", cm.MaxUDRequestData}} {
		typ := mlx5.QPTypeRC
		if c.network == "udp" {
			typ = mlx5.QPTypeUD
		}
		qp := cli.qp(t, typ)
		_, err := cli.m.Dial(ctx, c.network, "192.0.2.1:4420", &cm.DialOptions{QP: qp, PrivateData: make([]byte, c.limit+1)})
		if !isInvalid(err) || !strings.Contains(err.Error(), "at most") {
			t.Errorf("%s dial with %d bytes: %v", c.network, c.limit+1, err)
		}
		nothingLeft(t, cli.c, 0, qp)
	}
	l := srv.listen(t, ctx)
	defer l.Close()
	sqp := srv.qp(t, mlx5.QPTypeRC)
	done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) {
		if err := r.Reject(0, make([]byte, cm.MaxRejectData+1)); !isInvalid(err) {
			t.Errorf("reject with %d bytes: %v", cm.MaxRejectData+1, err)
		}
		_, err := r.Accept(ctx, &cm.AcceptOptions{QP: sqp, PrivateData: make([]byte, cm.MaxReplyData+1)})
		if !isInvalid(err) || !strings.Contains(err.Error(), "rejected") {
			t.Errorf("accept with %d bytes: %v", cm.MaxReplyData+1, err)
		}
		return nil, nil
	})
	var rej *cm.RejectError
	if _, err := cli.m.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: cli.qp(t, mlx5.QPTypeRC)}); !errors.As(err, &rej) {
		t.Errorf("dial whose accept had too much private data: %v, want its reject", err)
	}
	<-done
	done = serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) {
		return r.Accept(ctx, &cm.AcceptOptions{QP: sqp, PrivateData: make([]byte, cm.MaxReplyData)})
	})
	conn, err := cli.m.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: cli.qp(t, mlx5.QPTypeRC), PrivateData: make([]byte, cm.MaxRequestData)})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if res := <-done; res.err != nil {
		t.Fatal(res.err)
	} else {
		res.c.Close()
	}
}

// TestNoRDMADevice: an address with no RDMA device behind it (loopback,
// whose netdev is lo: refused before anything is sent, as the kernel's CM
// would take it for the unspecified address), or that is not this
// host's, fails to listen and to dial, with an errno and nothing left.
func TestNoRDMADevice(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	for _, c := range []struct {
		addr  string
		errno unix.Errno
	}{{"127.0.0.1:4420", unix.ENODEV}, {"[::1]:4420", unix.ENODEV}, {"198.51.100.7:4420", unix.EADDRNOTAVAIL}} {
		if l, err := srv.m.Listen(ctx, "tcp", c.addr, nil); !errors.Is(err, c.errno) {
			l.Close()
			t.Errorf("listen on %s: %v, want %v", c.addr, err, c.errno)
		}
	}
	nothingLeft(t, srv.c, 0, nil)
	for _, c := range []struct {
		addr     string
		errno    unix.Errno
		sentinel error
	}{{"127.0.0.1:4420", unix.ENODEV, cm.ErrResolve}, {"[::1]:4420", unix.ENODEV, cm.ErrResolve}, {"198.51.100.7:4420", unix.ENETUNREACH, cm.ErrResolve}} {
		qp := cli.qp(t, mlx5.QPTypeRC)
		_, err := cli.m.Dial(ctx, "tcp", c.addr, &cm.DialOptions{QP: qp})
		if !errors.Is(err, c.errno) || !errors.Is(err, c.sentinel) {
			t.Errorf("dial %s: %v, want %v with %v", c.addr, err, c.sentinel, c.errno)
		}
		nothingLeft(t, cli.c, 0, qp)
	}
}

// TestConnectOnListeningAddress: dialing from the address and port a
// listener holds is refused, and the listener goes on taking requests.
func TestConnectOnListeningAddress(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	l, err := srv.m.Listen(ctx, "tcp", "192.0.2.1:4791", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	qp := srv.qp(t, mlx5.QPTypeRC)
	src := l.Addr().(cm.Addr).AddrPort
	if _, err := srv.m.Dial(ctx, "tcp", "192.0.2.1:4791", &cm.DialOptions{QP: qp, Source: src}); !errors.Is(err, unix.EADDRINUSE) {
		t.Errorf("dial from the listener's address: %v, want EADDRINUSE", err)
	}
	nothingLeft(t, srv.c, 1, qp)
	sqp, cqp := srv.qp(t, mlx5.QPTypeRC), cli.qp(t, mlx5.QPTypeRC)
	done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) { return r.Accept(ctx, &cm.AcceptOptions{QP: sqp}) })
	conn, err := cli.m.Dial(ctx, "tcp", "192.0.2.1:4791", &cm.DialOptions{QP: cqp})
	if err != nil {
		t.Fatalf("the listener took no request after the refused dial: %v", err)
	}
	conn.Close()
	if res := <-done; res.err != nil {
		t.Fatal(res.err)
	} else {
		res.c.Close()
	}
}

// TestQPChecks: the QP must be there, of the port space's type, in
// RESET, on the device the address resolves to; nothing is sent
// otherwise.
func TestQPChecks(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	other := newHost(t, mlx5test.New(t, ""))
	ud := cli.qp(t, mlx5.QPTypeUD)
	busy := cli.qp(t, mlx5.QPTypeRC)
	path, err := cli.c.LoopbackPath(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := busy.Connect(busy.QPN(), path); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opt  *cm.DialOptions
		want string
	}{
		{"no QP", &cm.DialOptions{}, "no QP"},
		{"UD QP for tcp", &cm.DialOptions{QP: ud}, "cannot carry"},
		{"QP in RTS", &cm.DialOptions{QP: busy}, "from RESET"},
		{"QP of another device", &cm.DialOptions{QP: other.qp(t, mlx5.QPTypeRC)}, "resolves to device"},
	} {
		_, err := cli.m.Dial(ctx, "tcp", "192.0.2.1:1", c.opt)
		if !isInvalid(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
	}
	nothingLeft(t, cli.c, 0, nil)
	_ = srv
	for _, c := range []struct{ network, addr string }{{"sctp", "192.0.2.1:1"}, {"tcp", "192.0.2.1"}, {"tcp4", "[2001:db8::1]:1"}, {"tcp", "0.0.0.0:1"}} {
		if _, err := cli.m.Dial(ctx, c.network, c.addr, &cm.DialOptions{QP: cli.qp(t, mlx5.QPTypeRC)}); !isInvalid(err) {
			t.Errorf("dial %s %s: %v, want ErrInvalid", c.network, c.addr, err)
		}
	}
}

// TestClosedAndNil: calls after Close, and on nil or zero values, give
// errors, never a panic; Close twice is safe.
func TestClosedAndNil(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	l, err := srv.m.Listen(ctx, "tcp", "192.0.2.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := l.Accept(ctx); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("accept on a closed listener: %v", err)
	}
	m := mlx5test.NewCM(t, cli.c)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	qp := cli.qp(t, mlx5.QPTypeRC)
	if _, err := m.Dial(ctx, "tcp", "192.0.2.1:1", &cm.DialOptions{QP: qp}); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("dial on a closed manager: %v", err)
	}
	if _, err := m.Listen(ctx, "tcp", "192.0.2.1:0", nil); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("listen on a closed manager: %v", err)
	}
	var nm *cm.Manager
	if _, err := nm.Dial(ctx, "tcp", "192.0.2.1:1", nil); !isInvalid(err) {
		t.Errorf("nil manager: %v", err)
	}
	if err := nm.Close(); err != nil {
		t.Errorf("close of a nil manager: %v", err)
	}
	var nl *cm.Listener
	if _, err := nl.Accept(ctx); !isInvalid(err) {
		t.Errorf("nil listener: %v", err)
	}
	var nr *cm.Request
	if _, err := nr.Accept(ctx, nil); !isInvalid(err) {
		t.Errorf("nil request: %v", err)
	}
	if err := (&cm.Request{}).Reject(0, nil); !isInvalid(err) {
		t.Errorf("zero request: %v", err)
	}
	var nc *cm.Conn
	if err := nc.Disconnect(); !isInvalid(err) {
		t.Errorf("nil conn: %v", err)
	}
	if err := nc.Close(); err != nil {
		t.Errorf("close of a nil conn: %v", err)
	}
	_ = context.Background
}
