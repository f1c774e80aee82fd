package cm_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/mlx5"
)

// TestManagerCloseTearsDown closes one side's Manager while it has
// established connections, dials whose requests the listener holds
// unanswered (taken by Accept) or queued (not yet taken), and a
// listener: every dial returns an error, every connection ends on both
// sides with the reason its side should see, every held request can no
// longer be accepted and leaves its QP out of RTS, and once both
// managers are closed no CM id and no goroutine of theirs is left.
func TestManagerCloseTearsDown(t *testing.T) {
	for _, closing := range []string{"dialer", "listener"} {
		t.Run(closing, func(t *testing.T) {
			srv, cli := pair(t)
			ctx := testCtx(t)
			// Each manager runs one reader goroutine.
			base := runtime.NumGoroutine() - 2
			l, err := srv.m.Listen(ctx, "tcp", "192.0.2.1:0", &cm.ListenOptions{Backlog: 8})
			if err != nil {
				t.Fatal(err)
			}
			const established, held, queued = 3, 2, 2
			var sconns, cconns []*cm.Conn
			var sqps, cqps []*mlx5.QP
			for i := range established {
				sqp, cqp := srv.qp(t, mlx5.QPTypeRC), cli.qp(t, mlx5.QPTypeRC)
				done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) { return r.Accept(ctx, &cm.AcceptOptions{QP: sqp}) })
				c, err := cli.m.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: cqp, PrivateData: []byte(fmt.Sprint(i))})
				if err != nil {
					t.Fatal(err)
				}
				res := <-done
				if res.err != nil {
					t.Fatal(res.err)
				}
				sconns, cconns = append(sconns, res.c), append(cconns, c)
				sqps, cqps = append(sqps, sqp), append(cqps, cqp)
			}
			dials := make(chan error, held+queued)
			dial := func() {
				qp := cli.qp(t, mlx5.QPTypeRC)
				go func() {
					_, err := cli.m.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: qp})
					dials <- err
				}()
			}
			var reqs []*cm.Request
			for range held {
				dial()
				r, err := l.Accept(ctx)
				if err != nil {
					t.Fatal(err)
				}
				reqs = append(reqs, r)
			}
			for range queued {
				dial()
			}
			// The listener's id, both ends of each connection and of
			// each request.
			waitIDs(t, srv.c, 1+2*(established+held+queued))

			if closing == "dialer" {
				if err := cli.m.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := srv.m.Close(); err != nil {
					t.Fatal(err)
				}
			}
			for range held + queued {
				select {
				case err := <-dials:
					var rej *cm.RejectError
					switch {
					case err == nil:
						t.Error("a dial connected")
					case closing == "dialer" && !errors.Is(err, mlx5.ErrClosed):
						t.Errorf("dial after its manager closed: %v, want mlx5.ErrClosed", err)
					case closing == "listener" && !errors.As(err, &rej):
						t.Errorf("dial to a closed listener: %v, want a *cm.RejectError", err)
					}
				case <-ctx.Done():
					t.Fatal("a dial did not return")
				}
			}
			// The closing side's connections end closed, the other's
			// disconnected; every QP leaves RTS.
			closed, other := cconns, sconns
			if closing == "listener" {
				closed, other = sconns, cconns
			}
			for i := range established {
				for _, c := range []struct {
					conn *cm.Conn
					want error
				}{{closed[i], mlx5.ErrClosed}, {other[i], cm.ErrDisconnected}} {
					select {
					case <-c.conn.Done():
						if !errors.Is(c.conn.Err(), c.want) {
							t.Errorf("%v ended with %v, want %v", c.conn, c.conn.Err(), c.want)
						}
					case <-ctx.Done():
						t.Fatalf("%v did not end", c.conn)
					}
				}
				for _, qp := range []*mlx5.QP{sqps[i], cqps[i]} {
					if s := qpState(t, qp); s != mlx5.QPStateErr {
						t.Errorf("QP %#x in %v after its connection ended, want ERR", qp.QPN(), s)
					}
				}
			}
			if closing == "dialer" {
				// The listener goes on, and still hands out the queued
				// requests: the kernel's ucma drops the events of a
				// connection not yet accepted (ucma_event_handler: no
				// uid until ucma_accept sets one), so the dialer's REJ
				// cannot be seen before the accept, which then fails.
				for range queued {
					r, err := l.Accept(ctx)
					if err != nil {
						t.Fatalf("accept of a queued request: %v", err)
					}
					reqs = append(reqs, r)
				}
			} else if _, err := l.Accept(ctx); !errors.Is(err, mlx5.ErrClosed) {
				t.Errorf("accept after the manager closed: %v, want mlx5.ErrClosed", err)
			}
			for _, r := range reqs {
				qp := srv.qp(t, mlx5.QPTypeRC)
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				c, err := r.Accept(actx, &cm.AcceptOptions{QP: qp})
				cancel()
				if err == nil {
					c.Close()
					t.Errorf("%v accepted after the %s's manager closed", r, closing)
				} else {
					t.Logf("%v: %v", r, err)
				}
				if closing == "listener" && !errors.Is(err, mlx5.ErrClosed) {
					t.Errorf("accept of a request its closed listener dropped: %v, want mlx5.ErrClosed", err)
				}
				if s := qpState(t, qp); s == mlx5.QPStateRTS || s == mlx5.QPStateRTR {
					t.Errorf("a failed accept left its QP in %v", s)
				}
			}
			for _, c := range other {
				c.Close()
			}
			cli.m.Close()
			srv.m.Close()
			waitIDs(t, srv.c, 0)
			var g int
			for deadline := time.Now().Add(mustCome); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if g = runtime.NumGoroutine(); g <= base {
					return
				}
			}
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines, %d before the managers:\n%s", g, base, buf[:runtime.Stack(buf, true)])
		})
	}
}
