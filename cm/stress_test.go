package cm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"golang.org/x/sys/unix"
)

// TestConcurrentConnects runs 200 dials at once against one listener.
// The listener rejects some requests (with private data), accepts some
// with a context it cancels at a random moment, and accepts the rest; the
// dialers cancel some of their dials at random moments; every connection
// that comes up is disconnected from a random side. Every dial is
// accounted for (connected, rejected, canceled or failed) against what
// the listener did with its request, which it saw once (the dial's
// number is the request's private data): a connected dial got the reply
// the listener accepted with, a rejected one the listener's reject and
// its private data, or an accept that gave up. Every connection ends on
// both sides, and closing leaves no CM id or
// goroutine behind. (The QPs are the test's: it closes them.)
func TestConcurrentConnects(t *testing.T) {
	const dials = 200
	sc := mlx5test.New(t, "")
	cc := mlx5test.NewPeer(t, sc)
	srvM, err := mlx5test.OpenCM(sc)
	if err != nil {
		t.Fatal(err)
	}
	cliM, err := mlx5test.OpenCM(cc)
	if err != nil {
		t.Fatal(err)
	}
	srv := &host{c: sc, m: srvM}
	cli := &host{c: cc, m: cliM}
	for _, h := range []*host{srv, cli} {
		if h.pd, err = h.c.AllocPD(); err != nil {
			t.Fatal(err)
		}
		if h.cq, err = h.c.CreateCQ(mlx5.CQOptions{Entries: 1024}); err != nil {
			t.Fatal(err)
		}
	}
	// What runs without the managers: each context's device and event
	// goroutines.
	baseGoroutines := runtime.NumGoroutine() - 2
	newQP := func(h *host, typ mlx5.QPType) *mlx5.QP {
		qp, err := h.c.CreateQP(mlx5.QPOptions{Type: typ, PD: h.pd, SendCQ: h.cq, RecvCQ: h.cq, MaxSendWR: 1, MaxRecvWR: 1})
		if err != nil {
			t.Error(err)
		}
		return qp
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := srvM.Listen(ctx, "tcp", "192.0.2.1:0", &cm.ListenOptions{Backlog: dials})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var qps []*mlx5.QP
	keep := func(qp *mlx5.QP) {
		mu.Lock()
		qps = append(qps, qp)
		mu.Unlock()
	}
	// The listener's side.
	var serverConns sync.Map // remote address -> *cm.Conn
	var served sync.WaitGroup
	var requests, accepted, rejects, acceptFailures int
	// What the listener did with each dial's request, by the dial's
	// number the request's private data carries.
	answers := map[int]string{}
	answer := func(r *cm.Request, what string) {
		mu.Lock()
		defer mu.Unlock()
		answers[dialOf(r.PrivateData())] = what
	}
	served.Add(1)
	go func() {
		defer served.Done()
		rnd := rand.New(rand.NewPCG(1, 2))
		for {
			r, err := l.Accept(ctx)
			if err != nil {
				if !errors.Is(err, mlx5.ErrClosed) {
					t.Errorf("listener accept: %v", err)
				}
				return
			}
			mu.Lock()
			requests++
			if i := dialOf(r.PrivateData()); i < 0 || i >= dials {
				t.Errorf("a request with private data %q", r.PrivateData())
			} else if _, dup := answers[i]; dup {
				t.Errorf("dial %d: a second request", i)
			} else {
				answers[i] = "pending"
			}
			mu.Unlock()
			choice, delay := rnd.IntN(10), time.Duration(rnd.IntN(2000))*time.Microsecond
			served.Add(1)
			go func() {
				defer served.Done()
				switch {
				case choice < 2:
					err := r.Reject(0, []byte("busy"))
					if err == nil {
						answer(r, "busy")
					}
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						rejects++
					case errors.Is(err, unix.EINVAL):
						// The dialer gave up first, and the IB CM left
						// the request (cm_rej_handler).
						acceptFailures++
					default:
						t.Errorf("reject: %v", err)
					}
					return
				case choice < 3:
					actx, acancel := context.WithTimeout(ctx, delay)
					defer acancel()
					qp := newQP(srv, mlx5.QPTypeRC)
					keep(qp)
					c, err := r.Accept(actx, &cm.AcceptOptions{QP: qp})
					if err != nil {
						mu.Lock()
						acceptFailures++
						mu.Unlock()
						return
					}
					serverConns.Store(c.RemoteAddr().String(), c)
					answer(r, "")
					mu.Lock()
					accepted++
					mu.Unlock()
				default:
					qp := newQP(srv, mlx5.QPTypeRC)
					keep(qp)
					c, err := r.Accept(ctx, &cm.AcceptOptions{QP: qp, PrivateData: []byte("ok")})
					if err != nil {
						// The dialer canceled meanwhile.
						mu.Lock()
						acceptFailures++
						mu.Unlock()
						return
					}
					serverConns.Store(c.RemoteAddr().String(), c)
					answer(r, "ok")
					mu.Lock()
					accepted++
					mu.Unlock()
				}
			}()
		}
	}()

	// The dialers.
	type outcome struct {
		conn *cm.Conn
		err  error
	}
	outcomes := make([]outcome, dials)
	var dialed sync.WaitGroup
	for i := range dials {
		dialed.Add(1)
		go func() {
			defer dialed.Done()
			rnd := rand.New(rand.NewPCG(uint64(i), 3))
			qp := newQP(cli, mlx5.QPTypeRC)
			keep(qp)
			dctx := ctx
			if rnd.IntN(5) == 0 {
				var dcancel context.CancelFunc
				dctx, dcancel = context.WithTimeout(ctx, time.Duration(rnd.IntN(3000))*time.Microsecond)
				defer dcancel()
			}
			c, err := cliM.Dial(dctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: qp, PrivateData: []byte(fmt.Sprint(i))})
			outcomes[i] = outcome{c, err}
		}()
	}
	dialed.Wait()

	var connected, rejected, canceled, failed int
	for i, o := range outcomes {
		var rej *cm.RejectError
		switch {
		case o.err == nil:
			connected++
		case errors.As(o.err, &rej):
			rejected++
		case errors.Is(o.err, context.DeadlineExceeded):
			canceled++
		default:
			// The listener's accept gave up between its REP and the
			// dialer's RTU.
			failed++
			t.Logf("dial %d: %v", i, o.err)
		}
	}
	// Disconnect every connection from a random side; both ends must
	// see it.
	rnd := rand.New(rand.NewPCG(5, 6))
	var ends sync.WaitGroup
	matched := map[*cm.Conn]bool{}
	for _, o := range outcomes {
		if o.conn == nil {
			continue
		}
		dc := o.conn
		// The listener's side, or, if its accept gave up after the
		// dialer's RTU, the end that destroying its id brought.
		var lc *cm.Conn
		ended := false
		for deadline := time.Now().Add(10 * time.Second); lc == nil && !ended && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if v, ok := serverConns.Load(dc.LocalAddr().String()); ok {
				lc = v.(*cm.Conn)
			}
			select {
			case <-dc.Done():
				ended = lc == nil
			default:
			}
		}
		if lc == nil {
			if !ended {
				t.Errorf("%v: connected, but the listener's side has no connection and the connection is up", dc)
			}
			dc.Close()
			continue
		}
		matched[lc] = true
		first := dc
		if rnd.IntN(2) == 0 {
			first = lc
		}
		if err := first.Disconnect(); err != nil {
			t.Errorf("%v: disconnect: %v", first, err)
		}
		for _, c := range []*cm.Conn{dc, lc} {
			ends.Add(1)
			go func() {
				defer ends.Done()
				select {
				case <-c.Done():
					if !errors.Is(c.Err(), cm.ErrDisconnected) {
						t.Errorf("%v ended with %v", c, c.Err())
					}
				case <-ctx.Done():
					t.Errorf("%v: no disconnect", c)
				}
				c.Close()
			}()
		}
	}
	ends.Wait()
	l.Close()
	served.Wait()
	// With the listener done, its answers are final: "pending" is an
	// accept that gave up.
	for i, o := range outcomes {
		ans, asked := answers[i]
		var rej *cm.RejectError
		switch {
		case o.err == nil:
			// The listener saw the request, and the reply is what
			// it accepted with (or it gave up after the RTU).
			switch got := string(bytes.TrimRight(o.conn.PrivateData(), "\x00")); {
			case !asked:
				t.Errorf("dial %d connected, but the listener never saw its request", i)
			case ans != "pending" && got != ans:
				t.Errorf("dial %d connected with reply %q, the listener accepted with %q", i, got, ans)
			}
		case errors.As(o.err, &rej):
			// An explicit reject carries its private data; any other
			// comes from an accept that gave up (or, if the listener
			// never saw the request, there is none).
			got := string(bytes.TrimRight(rej.PrivateData, "\x00"))
			switch {
			case !asked:
				t.Errorf("dial %d rejected (%v), but the listener never saw its request", i, rej)
			case ans == "busy" && (got != "busy" || rej.Reason != cm.RejectConsumerDefined):
				t.Errorf("dial %d: rejected with reason %d and %q, the listener sent %d and \"busy\"", i, rej.Reason, got, cm.RejectConsumerDefined)
			case ans != "busy" && ans != "pending":
				t.Errorf("dial %d rejected (%v), the listener answered %q", i, rej, ans)
			}
		}
	}
	t.Logf("%d dials: %d connected, %d rejected, %d canceled, %d failed; listener: %d requests, %d accepted, %d rejected, %d given up",
		dials, connected, rejected, canceled, failed, requests, accepted, rejects, acceptFailures)
	if accepted+rejects+acceptFailures != requests {
		t.Errorf("the listener answered %d of its %d requests", accepted+rejects+acceptFailures, requests)
	}
	// (A dialer may be connected while the listener's accept gave up:
	// its context ended between the dialer's RTU and the ESTABLISHED
	// event, and destroying its id disconnected the dialer, which the
	// loop above saw end.)
	if requests > dials {
		t.Errorf("%d requests for %d dials", requests, dials)
	}
	// Every connected or rejected dial's request reached the listener,
	// which answered it; a dial connects only if the listener accepted
	// or gave up after its accept was sent, and is rejected only if the
	// listener rejected or gave up.
	if connected+rejected > requests {
		t.Errorf("%d dials connected or rejected, %d requests", connected+rejected, requests)
	}
	if connected > accepted+acceptFailures {
		t.Errorf("%d dials connected, %d accepted, %d given up", connected, accepted, acceptFailures)
	}
	if rejected > rejects+acceptFailures {
		t.Errorf("%d dials rejected, %d rejects sent, %d given up", rejected, rejects, acceptFailures)
	}
	// A connection the listener accepted whose dialer is not connected
	// (it gave up after the accept) must have ended.
	serverConns.Range(func(_, v any) bool {
		if c := v.(*cm.Conn); !matched[c] {
			select {
			case <-c.Done():
			case <-ctx.Done():
				t.Errorf("%v: accepted, its dialer gone, and still up", c)
			}
		}
		return true
	})
	if connected == 0 || rejected == 0 || canceled == 0 {
		t.Errorf("the mix did not happen: %d connected, %d rejected, %d canceled", connected, rejected, canceled)
	}
	if rejected < rejects {
		t.Errorf("%d rejects sent, %d dials rejected", rejects, rejected)
	}
	// Every connection ended: count what is left, close the rest.
	serverConns.Range(func(_, v any) bool { v.(*cm.Conn).Close(); return true })
	waitIDs(t, sc, 0)
	for _, qp := range qps {
		if err := qp.Close(); err != nil {
			t.Errorf("close QP: %v", err)
		}
	}
	for _, h := range []*host{srv, cli} {
		if err := h.cq.Close(); err != nil {
			t.Errorf("close CQ: %v", err)
		}
		if err := h.pd.Close(); err != nil {
			t.Errorf("close PD: %v", err)
		}
	}
	if err := srvM.Close(); err != nil {
		t.Error(err)
	}
	if err := cliM.Close(); err != nil {
		t.Error(err)
	}
	var g int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if g = runtime.NumGoroutine(); g <= baseGoroutines {
			return
		}
	}
	buf := make([]byte, 1<<16)
	t.Errorf("%d goroutines, %d before:\n%s", g, baseGoroutines, buf[:runtime.Stack(buf, true)])
}

// dialOf is the dial number a request's private data carries (the
// decimal digits before its zeros), or -1.
func dialOf(privateData []byte) int {
	i, err := strconv.Atoi(string(bytes.TrimRight(privateData, "\x00")))
	if err != nil {
		return -1
	}
	return i
}
