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
// moment (a CQ clean) without closing. The zero guard is not open: enter
// fails until the object that owns it is made (open), so that a zero
// value of the object (&QP{}) is refused by the same test as a closed
// one, at no cost to the hot path.
//
// A hold is an entry Close does not wait for: a QP's open batch, which
// its poster may leave open for as long as it likes (or forever). Close
// goes on without it; what the holder may still write stays mapped, and
// handOff and unhold decide who unmaps it: the holder when it lets go
// after Close, or Close when no hold is left. One hold at a time (the
// holder serialises them).
//
// An object whose hot path has one caller at a time (a CQ, whose Poll,
// Arm and Wait are not safe for concurrent use with each other) can enter
// with enterOne instead: its entry is a word of its own, which exitOne
// clears with a plain store, one atomic instruction a call fewer.
type guard struct {
	v atomic.Int32
	// one is 1 while the caller of enterOne is inside (or trying to
	// enter); written by that caller only.
	one atomic.Uint32
}

const (
	guardClosed = 1 << 30
	guardPaused = 1 << 29
	guardOpen   = 1 << 28
	guardHeld   = 1 << 27 // a hold is taken
	guardHanded = 1 << 26 // Close left the unmapping to the holder
	guardCount  = guardHanded - 1
)

// open makes enter succeed: the object is made.
func (g *guard) open() { g.v.Or(guardOpen) }

// enter returns false once the object is closed, or if it was never
// opened. A pause makes it wait (yielding) until the pause ends. The
// common case, an open object, is small enough to inline into the hot
// path; the rest is enterSlow's.
func (g *guard) enter() bool {
	v := g.v.Add(1)
	return v&(guardOpen|guardClosed|guardPaused) == guardOpen || g.enterSlow(v)
}

// enterOne is enter for an object's single caller (a CQ's poller, a
// QP's PostSend): one locked instruction, a compare-and-swap of one from
// 0 to 1, then a load of v; close and pause change v, then load one
// (drain). Both are sequentially consistent atomics, so either the caller
// sees the close or the pause, or drain sees the caller inside and waits
// for its exitOne. The swap makes one a spin lock: a second goroutine that
// calls at the same time, which the objects' docs forbid, waits for the
// first to leave (enterOneSlow) instead of hiding it from Close, so that
// nothing is unmapped under either. Called rather than inlined: Poll's
// loop keeps more in registers without it (callgrind: 3 instructions a
// CQE fewer).
//
//go:noinline
func (g *guard) enterOne() bool {
	if g.one.CompareAndSwap(0, 1) {
		if g.v.Load()&(guardOpen|guardClosed|guardPaused) == guardOpen {
			return true
		}
		g.one.Store(0)
	}
	return g.enterOneSlow()
}

// enterOneSlow is enterOne when the object was closed, paused or not
// open, or another caller was inside: it fails on a closed object (or
// one never opened), and waits out a pause or the other caller.
func (g *guard) enterOneSlow() bool {
	for {
		if g.v.Load()&(guardOpen|guardClosed) != guardOpen {
			return false
		}
		runtime.Gosched()
		if g.one.CompareAndSwap(0, 1) {
			if g.v.Load()&(guardOpen|guardClosed|guardPaused) == guardOpen {
				return true
			}
			g.one.Store(0)
		}
	}
}

// exitOne is exit for a call that entered with enterOne: a release store
// (storeRelease: a plain store on amd64), after every access of the
// call's to the object's memory.
func (g *guard) exitOne() { storeRelease(&g.one, 0) }

// enterSlow is enter after its add found v: the object closed, paused
// or not open. It takes the add back, and waits out a pause.
func (g *guard) enterSlow(v int32) bool {
	for {
		g.v.Add(-1)
		if v&(guardOpen|guardClosed) != guardOpen {
			return false
		}
		runtime.Gosched()
		if v = g.v.Add(1); v&(guardOpen|guardClosed|guardPaused) == guardOpen {
			return true
		}
	}
}

func (g *guard) exit() { g.v.Add(-1) }

// hold is enter for a hold, which Close does not wait for: false once the
// object is closed, or if it was never opened. It sets the bit only on a
// guard open and not closed (a compare-and-swap, not an add taken back):
// a hold refused never shows, even for a moment, to the handOff of a
// Close, which would leave the unmapping to a holder that is not there.
// The common case is a guard open with nothing inside.
func (g *guard) hold() bool {
	return g.v.CompareAndSwap(guardOpen, guardOpen|guardHeld) || g.holdSlow()
}

// holdSlow is hold when the guard is not just open: calls inside (a
// receive posted meanwhile), or closed, paused or not open. It waits
// out a pause.
//
//go:noinline
func (g *guard) holdSlow() bool {
	for {
		v := g.v.Load()
		if v&(guardOpen|guardClosed) != guardOpen {
			return false
		}
		if v&guardPaused == 0 && g.v.CompareAndSwap(v, v|guardHeld) {
			return true
		}
		runtime.Gosched()
	}
}

// unhold lets the hold go, and reports whether Close handed the holder
// the unmapping (handOff): the holder then does it.
func (g *guard) unhold() (handed bool) { return g.v.Add(-guardHeld)&guardHanded != 0 }

// exitHeld is exit and unhold at once, for a holder that entered (a
// Commit ringing its doorbell). Close waits for the entry, so it cannot
// have handed anything over meanwhile.
func (g *guard) exitHeld() { g.v.Add(-1 - guardHeld) }

// handOff is Close's, after close: it reports whether a hold is taken,
// in which case the holder unmaps what it may write when it lets go
// (unhold says so); else nobody holds any more and Close unmaps it.
func (g *guard) handOff() (held bool) { return g.v.Or(guardHanded)&guardHeld != 0 }

// reopen undoes close, for an object whose destroy the device refused:
// enter succeeds again.
func (g *guard) reopen() { g.v.And(^int32(guardClosed)) }

// closed reports whether close was called.
func (g *guard) closed() bool { return g.v.Load()&guardClosed != 0 }

// opened reports whether open was called: the object was made (and may
// have been closed since).
func (g *guard) opened() bool { return g.v.Load()&guardOpen != 0 }

// close makes every later enter and hold fail and waits until the calls
// that entered before it have exited; it does not wait for a hold.
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

// drain waits until no call is inside, entered with enter or enterOne.
func (g *guard) drain() {
	for spin := 0; g.v.Load()&guardCount != 0 || g.one.Load() != 0; spin++ {
		if spin < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(10 * time.Microsecond)
		}
	}
}
