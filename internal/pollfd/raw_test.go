package pollfd

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// readOnce is a Wait callback that reads what the pipe holds, as rdma_cm's
// GET_EVENT takes an event: EAGAIN means wait.
func readOnce(buf []byte, n *int, rerr *error) func(fd uintptr) bool {
	return func(fd uintptr) bool {
		*n, *rerr = unix.Read(int(fd), buf)
		return !errors.Is(*rerr, unix.EAGAIN)
	}
}

func TestWaitCallsUntilReadable(t *testing.T) {
	f, w := pipe(t)
	go func() {
		time.Sleep(20 * time.Millisecond)
		unix.Write(w, []byte("event"))
	}()
	buf := make([]byte, 16)
	var n int
	var rerr error
	if err := f.Wait(context.Background(), readOnce(buf, &n, &rerr)); err != nil || rerr != nil || string(buf[:n]) != "event" {
		t.Fatalf("wait: %v, read %q, %v", err, buf[:n], rerr)
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	f, w := pipe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	var n int
	var rerr error
	calls := 0
	fn := readOnce(make([]byte, 8), &n, &rerr)
	count := func(fd uintptr) bool { calls++; return fn(fd) }
	if err := f.Wait(ctx, count); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on an idle pipe: %v", err)
	}
	if calls == 0 {
		t.Error("the callback never ran")
	}
	unix.Write(w, []byte("x"))
	if err := f.Wait(context.Background(), fn); err != nil || n != 1 {
		t.Fatalf("wait after a timed-out one: %v, %d bytes", err, n)
	}
}

func TestControlAfterClose(t *testing.T) {
	f, _ := pipe(t)
	var seen uintptr
	if err := f.Control(func(fd uintptr) { seen = fd }); err != nil || int(seen) != f.Fd() {
		t.Fatalf("control: %v, fd %d (want %d)", err, seen, f.Fd())
	}
	f.Close()
	called := false
	if err := f.Control(func(uintptr) { called = true }); err == nil || called {
		t.Errorf("control after close: %v, called %v", err, called)
	}
}
