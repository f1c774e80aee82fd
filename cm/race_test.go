package cm_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"golang.org/x/sys/unix"
)

// blockedAccepts starts n goroutines in l.Accept(context.Background())
// and returns what each returns.
func blockedAccepts(l *cm.Listener, n int) <-chan error {
	errs := make(chan error, n)
	for range n {
		go func() {
			r, err := l.Accept(context.Background())
			if err == nil {
				r.Reject(0, nil)
				err = errors.New("accepted a request")
			}
			errs <- err
		}()
	}
	// Let them block.
	time.Sleep(50 * time.Millisecond)
	return errs
}

// collect waits for n results of errs, at most d in all.
func collect(t *testing.T, errs <-chan error, n int, d time.Duration, want error) {
	t.Helper()
	timeout := time.After(d)
	for i := range n {
		select {
		case err := <-errs:
			if !errors.Is(err, want) {
				t.Errorf("accept %d: %v, want %v", i, err, want)
			}
		case <-timeout:
			t.Fatalf("%d of %d blocked Accepts returned within %v", i, n, d)
		}
	}
}

// TestListenerWakesEveryAccept: Close releases every Accept blocked on
// the listener with mlx5.ErrClosed, and its device's removal every one
// with ErrDeviceRemoved; requests that come at once each reach one of the
// Accepts waiting.
func TestListenerWakesEveryAccept(t *testing.T) {
	const waiters = 4
	t.Run("close", func(t *testing.T) {
		srv, _ := pair(t)
		l, err := srv.m.Listen(testCtx(t), "tcp", "192.0.2.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		errs := blockedAccepts(l, waiters)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		collect(t, errs, waiters, mustCome, mlx5.ErrClosed)
	})
	t.Run("device removal", func(t *testing.T) {
		srv, _ := pair(t)
		l, err := srv.m.Listen(testCtx(t), "tcp", "192.0.2.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		errs := blockedAccepts(l, waiters)
		if err := mlx5test.InjectCMDeviceRemoval(srv.c); err != nil {
			t.Fatal(err)
		}
		collect(t, errs, waiters, mustCome, cm.ErrDeviceRemoved)
	})
	t.Run("requests", func(t *testing.T) {
		for round := range 20 {
			srv, cli := pair(t)
			ctx := testCtx(t)
			l, err := srv.m.Listen(ctx, "tcp", "192.0.2.1:0", nil)
			if err != nil {
				t.Fatal(err)
			}
			reqs := make(chan *cm.Request, waiters)
			for range waiters {
				go func() {
					if r, err := l.Accept(ctx); err == nil {
						reqs <- r
					}
				}()
			}
			time.Sleep(10 * time.Millisecond)
			var wg sync.WaitGroup
			for range waiters {
				qp := cli.qp(t, mlx5.QPTypeRC)
				wg.Add(1)
				go func() {
					defer wg.Done()
					cli.m.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: qp})
				}()
			}
			timeout := time.After(mustCome)
			for i := range waiters {
				select {
				case r := <-reqs:
					r.Reject(0, nil)
				case <-timeout:
					t.Fatalf("round %d: %d of %d requests reached the %d waiting Accepts in %v", round, i, waiters, waiters, mustCome)
				}
			}
			wg.Wait()
			l.Close()
		}
	})
}

// TestDialRacesManagerClose closes a Manager while dials, listens and
// accepts run on it: each returns, connected or with mlx5.ErrClosed (or,
// for a dial, the reject of a peer that was closing too), never an errno
// of the closed file (EBADF), whose number another open file may have
// by then.
func TestDialRacesManagerClose(t *testing.T) {
	const rounds, dials = 40, 24
	sc := mlx5test.New(t, "")
	cc := mlx5test.NewPeer(t, sc)
	srv, cli := newHost(t, sc), newHost(t, cc)
	ctx := testCtx(t)
	l, err := srv.m.Listen(ctx, "tcp", "192.0.2.1:0", &cm.ListenOptions{Backlog: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sqps := make(chan *mlx5.QP, rounds*dials)
	go func() {
		for {
			r, err := l.Accept(ctx)
			if err != nil {
				return
			}
			qp := <-sqps
			go func() {
				if c, err := r.Accept(ctx, &cm.AcceptOptions{QP: qp}); err == nil {
					<-c.Done()
					c.Close()
				}
			}()
		}
	}()
	rnd := rand.New(rand.NewPCG(23, 10))
	var bad, closed, connected int
	for round := range rounds {
		m, err := mlx5test.OpenCM(cc)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		check := func(what string, err error) {
			mu.Lock()
			defer mu.Unlock()
			var rej *cm.RejectError
			switch {
			case err == nil:
				connected++
			case errors.Is(err, unix.EBADF):
				bad++
				if bad <= 5 {
					t.Errorf("round %d: %s: %v, want mlx5.ErrClosed", round, what, err)
				}
			case errors.Is(err, mlx5.ErrClosed):
				closed++
			case errors.As(err, &rej):
			default:
				t.Errorf("round %d: %s: %v", round, what, err)
			}
		}
		for i := range dials {
			cqp := cli.qp(t, mlx5.QPTypeRC)
			sqps <- srv.qp(t, mlx5.QPTypeRC)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%4 == 3 {
					ml, err := m.Listen(ctx, "tcp", "192.0.2.1:0", nil)
					check("listen", err)
					if err == nil {
						_, err := ml.Accept(ctx)
						check("accept", err)
					}
					return
				}
				_, err := m.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: cqp, PrivateData: []byte(fmt.Sprint(i))})
				check("dial", err)
			}()
		}
		time.Sleep(time.Duration(rnd.IntN(3000)) * time.Microsecond)
		if err := m.Close(); err != nil {
			t.Errorf("round %d: close: %v", round, err)
		}
		wg.Wait()
	}
	t.Logf("%d rounds of %d calls: %d connected, %d mlx5.ErrClosed, %d EBADF", rounds, dials, connected, closed, bad)
	if bad > 0 {
		t.Errorf("%d calls failed with the closed file's EBADF", bad)
	}
}
