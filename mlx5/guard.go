package mlx5

import (
	"runtime"
	"sync/atomic"
	"time"
)

// guard keeps the memory of an object mapped while calls use it: the hot
// path enters and exits with one atomic add each (no lock), Close sets a
// bit that makes later enters fail and waits for the calls in flight to
// exit before it unmaps anything. A pause bit stops new entries for a
// moment (a CQ clean) without closing.
type guard struct {
	v atomic.Int32
}

const (
	guardClosed = 1 << 30
	guardPaused = 1 << 29
	guardCount  = guardPaused - 1
)

// enter returns false once the object is closed. A pause makes it wait
// (yielding) until the pause ends.
func (g *guard) enter() bool {
	for {
		v := g.v.Add(1)
		if v&(guardClosed|guardPaused) == 0 {
			return true
		}
		g.v.Add(-1)
		if v&guardClosed != 0 {
			return false
		}
		runtime.Gosched()
	}
}

func (g *guard) exit() { g.v.Add(-1) }

// closed reports whether close was called.
func (g *guard) closed() bool { return g.v.Load()&guardClosed != 0 }

// close makes every later enter fail and waits until the calls that
// entered before it have exited.
func (g *guard) close() {
	g.v.Or(guardClosed)
	g.drain()
}

// pause holds new entries until resume and waits for the calls in
// flight. One pause at a time (the caller serialises them).
func (g *guard) pause() {
	g.v.Or(guardPaused)
	g.drain()
}

func (g *guard) resume() { g.v.And(^int32(guardPaused)) }

// drain waits until no call is inside.
func (g *guard) drain() {
	for spin := 0; g.v.Load()&guardCount != 0; spin++ {
		if spin < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(10 * time.Microsecond)
		}
	}
}
