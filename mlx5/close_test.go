package mlx5_test

import (
	"sync"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
)

// Issue 23 item 1: Context.Close while other goroutines close the
// context's children. Close used to sort its children by the map
// forget deletes from, after releasing the lock: "fatal error:
// concurrent map read and map write". Each child is closed once (its
// own Close returns nil, whoever closed it first), none is left: no
// model object, no mapping.
func TestContextCloseRacesChildren(t *testing.T) {
	const mrs, qps, closers = 160, 20, 4
	for round := range 5 {
		before := mlx5.LiveBuffers()
		r := newRig(t, "cx7", model.Options{}, 1024)
		var kids []interface{ Close() error }
		for range mrs {
			mr, err := r.pd.RegMR(r.buf.Bytes()[:4096], mlx5.AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			kids = append(kids, mr)
		}
		for range qps {
			kids = append(kids, r.qp(t, mlx5.QPOptions{MaxSendWR: 8, MaxRecvWR: 8}, true))
		}
		kids = append(kids, r.mr)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, len(kids)+1)
		for g := range closers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := g; i < len(kids); i += closers {
					if err := kids[i].Close(); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := r.c.Close(); err != nil {
				errs <- err
			}
		}()
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
		for i, x := range kids {
			if err := x.Close(); err != nil {
				t.Errorf("round %d: child %d (%T) closed again: %v", round, i, x, err)
			}
		}
		if n := r.dev.Objects(); n != 0 {
			t.Errorf("round %d: %d model objects left", round, n)
		}
		if got := mlx5.LiveBuffers(); got != before+1 { // the rig's own buffer
			t.Errorf("round %d: %d buffer mappings left, want %d", round, got, before+1)
		}
		if t.Failed() {
			return
		}
	}
}
