package mlx5

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGuardEnterOne: a call entered with enterOne holds close and pause
// off until its exitOne; enterOne waits out a pause, fails on a guard
// never opened or closed, and leaves nothing behind when it fails.
func TestGuardEnterOne(t *testing.T) {
	var zero guard
	if zero.enterOne() || zero.one.Load() != 0 {
		t.Fatalf("enterOne of a guard never opened: entered, or one %d", zero.one.Load())
	}

	var g guard
	g.open()
	// close and pause wait for a call inside.
	for _, name := range []string{"pause", "close"} {
		if !g.enterOne() {
			t.Fatalf("%s: enterOne of an open guard failed", name)
		}
		var done atomic.Bool
		go func() {
			if name == "pause" {
				g.pause()
			} else {
				g.close()
			}
			done.Store(true)
		}()
		time.Sleep(20 * time.Millisecond)
		if done.Load() {
			t.Fatalf("%s returned while a call was inside", name)
		}
		g.exitOne()
		for !done.Load() {
			time.Sleep(time.Millisecond)
		}
		if name == "pause" {
			// A paused guard: enterOne waits for resume.
			var in atomic.Bool
			go func() {
				in.Store(g.enterOne())
				g.exitOne()
			}()
			time.Sleep(20 * time.Millisecond)
			if in.Load() {
				t.Fatal("enterOne entered a paused guard")
			}
			g.resume()
			for !in.Load() {
				time.Sleep(time.Millisecond)
			}
			g.drain()
		}
	}
	if g.enterOne() || g.one.Load() != 0 {
		t.Fatalf("enterOne of a closed guard: entered, or one %d", g.one.Load())
	}
	g.drain() // returns: nothing is inside
}

// TestGuardEnterOneRacesClose: whenever close returns, no call entered
// with enterOne is inside, and none enters after.
func TestGuardEnterOneRacesClose(t *testing.T) {
	for range 200 {
		var g guard
		g.open()
		var inside, after atomic.Int32
		var closed atomic.Bool
		stop := make(chan struct{})
		go func() {
			defer close(stop)
			for {
				if !g.enterOne() {
					return
				}
				inside.Add(1)
				if closed.Load() {
					after.Add(1)
				}
				inside.Add(-1)
				g.exitOne()
			}
		}()
		g.close()
		closed.Store(true)
		if n := inside.Load(); n != 0 {
			t.Fatalf("close returned with %d calls inside", n)
		}
		<-stop
		if n := after.Load(); n != 0 {
			t.Fatalf("%d calls entered after close returned", n)
		}
	}
}

// TestGuardEnterOneTwoCallers: two goroutines that enter with enterOne
// at once, which the objects' docs forbid (one poller a CQ, one poster a
// QP), take turns: at most one is inside at a time, so that neither
// hides the other from a close, which then waits for both and returns
// with none inside.
func TestGuardEnterOneTwoCallers(t *testing.T) {
	for round := range 50 {
		var g guard
		g.open()
		var inside, most atomic.Int32
		var closed atomic.Bool
		var after atomic.Int32
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for g.enterOne() {
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					if closed.Load() {
						after.Add(1)
					}
					runtime.Gosched()
					inside.Add(-1)
					g.exitOne()
				}
			}()
		}
		for range 20 {
			runtime.Gosched()
		}
		g.close()
		closed.Store(true)
		if n := inside.Load(); n != 0 {
			t.Fatalf("round %d: close returned with %d calls inside", round, n)
		}
		wg.Wait()
		if n := after.Load(); n != 0 {
			t.Fatalf("round %d: %d calls entered after close returned", round, n)
		}
		if n := most.Load(); n > 1 {
			t.Fatalf("round %d: %d callers were inside at once", round, n)
		}
	}
}
