package cm_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/mlx5"
)

// TestFailedAcceptRejects: an Accept that fails on its arguments (too
// much private data, a QP of the wrong type or not in RESET) answers the
// request with a reject, which the dialer's Dial returns at once as a
// *RejectError (reason 28, or the SIDR reject for UD), not at the end of
// its context; its error says so and is still mlx5.ErrInvalid; the QP,
// which Accept did not move, is left as it was (in RESET); the request is
// answered (a second Accept is refused) and no CM id is left but the
// listener's.
func TestFailedAcceptRejects(t *testing.T) {
	for _, c := range []struct {
		name    string
		network string
		opt     func(srv *host, qp *mlx5.QP) *cm.AcceptOptions
		qpState mlx5.QPState // of the QP the options name
		want    string
	}{
		{"tcp private data", "tcp", func(_ *host, qp *mlx5.QP) *cm.AcceptOptions {
			return &cm.AcceptOptions{QP: qp, PrivateData: make([]byte, cm.MaxReplyData+1)}
		}, mlx5.QPStateReset, "at most 196"},
		{"tcp UD QP", "tcp", func(srv *host, _ *mlx5.QP) *cm.AcceptOptions {
			return &cm.AcceptOptions{QP: srv.qp(t, mlx5.QPTypeUD)}
		}, mlx5.QPStateReset, "cannot carry"},
		{"tcp no QP", "tcp", func(*host, *mlx5.QP) *cm.AcceptOptions { return &cm.AcceptOptions{} }, 0, "no QP"},
		{"udp private data", "udp", func(_ *host, qp *mlx5.QP) *cm.AcceptOptions {
			return &cm.AcceptOptions{QP: qp, PrivateData: make([]byte, cm.MaxUDReplyData+1)}
		}, mlx5.QPStateReset, "at most 136"},
		{"udp RC QP", "udp", func(srv *host, _ *mlx5.QP) *cm.AcceptOptions {
			return &cm.AcceptOptions{QP: srv.qp(t, mlx5.QPTypeRC)}
		}, mlx5.QPStateReset, "cannot carry"},
		{"tcp nil VerbsQP", "tcp", func(*host, *mlx5.QP) *cm.AcceptOptions {
			return &cm.AcceptOptions{QP: (*cm.VerbsQP)(nil)}
		}, 0, "nil or zero VerbsQP"},
		{"tcp zero VerbsQP", "tcp", func(*host, *mlx5.QP) *cm.AcceptOptions {
			return &cm.AcceptOptions{QP: &cm.VerbsQP{}}
		}, 0, "nil or zero VerbsQP"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, cli := pair(t)
			ctx := testCtx(t)
			l, err := srv.m.Listen(ctx, c.network, "192.0.2.1:0", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			typ := mlx5.QPTypeRC
			if c.network == "udp" {
				typ = mlx5.QPTypeUD
			}
			sqp := srv.qp(t, typ)
			opt := c.opt(srv, sqp)
			type acceptResult struct {
				r   *cm.Request
				err error
			}
			accepted := make(chan acceptResult, 1)
			go func() {
				r, err := l.Accept(ctx)
				if err == nil {
					_, err = r.Accept(ctx, opt)
				}
				accepted <- acceptResult{r, err}
			}()
			// The reject comes at once; the dialer gives up after mustCome.
			dctx, cancel := context.WithTimeout(ctx, mustCome)
			defer cancel()
			start := time.Now()
			_, err = cli.m.Dial(dctx, c.network, l.Addr().String(), &cm.DialOptions{QP: cli.qp(t, typ)})
			var rej *cm.RejectError
			switch {
			case !errors.As(err, &rej):
				t.Errorf("dial after %v: %v, want the reject of the failed accept", time.Since(start).Round(time.Millisecond), err)
			case c.network == "tcp" && (rej.Reason != cm.RejectConsumerDefined || !bytes.Equal(rej.PrivateData, make([]byte, cm.MaxRejectData))):
				t.Errorf("dial: %v (reason %d, private data % x), want reason %d, no private data", err, rej.Reason, rej.PrivateData, cm.RejectConsumerDefined)
			case c.network == "udp" && (!rej.UD || rej.Reason != cm.SIDRReject):
				t.Errorf("dial: %v (%+v), want the SIDR reject", err, rej)
			}
			res := <-accepted
			if !isInvalid(res.err) || !strings.Contains(res.err.Error(), c.want) || !strings.Contains(res.err.Error(), "rejected") {
				t.Errorf("accept: %v, want ErrInvalid saying %q and that the request was rejected", res.err, c.want)
			}
			if res.r == nil {
				t.FailNow()
			}
			if _, err := res.r.Accept(ctx, &cm.AcceptOptions{QP: srv.qp(t, typ)}); !isInvalid(err) || !strings.Contains(err.Error(), "already") {
				t.Errorf("accept after the failed accept: %v, want ErrInvalid: already answered", err)
			}
			if q, ok := opt.QP.(*mlx5.QP); ok {
				if s := qpState(t, q); s != c.qpState {
					t.Errorf("the failed accept's QP is in %v, want %v", s, c.qpState)
				}
			}
			waitIDs(t, srv.c, 1) // the listener's
		})
	}
}

// TestUDCloseLeavesSharedQP: one UD QP on each side serves two
// connections; closing one (on either side) leaves the QPs in RTS, as
// rdma_destroy_id leaves a UD QP, and the other connection and a new one
// on the same QPs work: a datagram goes through.
func TestUDCloseLeavesSharedQP(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	l, err := srv.m.Listen(ctx, "udp", "192.0.2.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sqp, cqp := srv.qp(t, mlx5.QPTypeUD), cli.qp(t, mlx5.QPTypeUD)
	connect := func() (dc, lc *cm.Conn) {
		t.Helper()
		done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) { return r.Accept(ctx, &cm.AcceptOptions{QP: sqp}) })
		dc, err := cli.m.Dial(ctx, "udp", l.Addr().String(), &cm.DialOptions{QP: cqp})
		if err != nil {
			t.Fatal(err)
		}
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		return dc, res.c
	}
	d1, l1 := connect()
	d2, l2 := connect()
	defer d2.Close()
	defer l2.Close()
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	for _, qp := range []*mlx5.QP{sqp, cqp} {
		if s := qpState(t, qp); s != mlx5.QPStateRTS {
			t.Errorf("the shared UD QP %#x is in %v after one of its connections closed, want RTS", qp.QPN(), s)
		}
	}
	select {
	case <-d2.Done():
		t.Errorf("the other connection ended: %v", d2.Err())
	case <-l2.Done():
		t.Errorf("the other connection ended: %v", l2.Err())
	default:
	}
	d3, l3 := connect()
	defer d3.Close()
	defer l3.Close()
	sendUD(t, srv, cli, sqp, cqp, d3.UDPeer(), []byte("still served"))
}

// sendUD sends msg as a datagram from cqp to peer, which is sqp, and
// checks that it arrives, from cqp.
func sendUD(t *testing.T, srv, cli *host, sqp, cqp *mlx5.QP, peer cm.UDPeer, msg []byte) {
	t.Helper()
	ah, err := cli.pd.CreateAH(peer.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	buf, mr := recvBuffer(t, srv)
	const grh = 40
	if err := sqp.PostRecv(1, []mlx5.SGE{{Addr: mr.Addr(), Length: grh + 256, LKey: mr.LKey()}}); err != nil {
		t.Fatal(err)
	}
	if err := cqp.PostSend(&mlx5.SendWR{WrID: 2, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, Inline: [][]byte{msg},
		AH: ah, RemoteQPN: peer.QPN, QKey: peer.QKey}); err != nil {
		t.Fatal(err)
	}
	var wc [2]mlx5.Completion
	var recv *mlx5.Completion
	for deadline := time.Now().Add(mustCome); recv == nil && time.Now().Before(deadline); {
		n, err := srv.cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		for i := range wc[:n] {
			if wc[i].WrID == 1 {
				recv = &wc[i]
			}
		}
	}
	if recv == nil || recv.Status != mlx5.WCSuccess || recv.SrcQP != cqp.QPN() || !bytes.Equal(buf.Bytes()[grh:recv.ByteLen], msg) {
		t.Fatalf("receive %+v", recv)
	}
}
