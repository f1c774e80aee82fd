package pollfd

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func pipe(t *testing.T) (*File, int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	f, err := New(p[0], "test pipe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); unix.Close(p[1]) })
	return f, p[1]
}

func TestReadWaitsForData(t *testing.T) {
	f, w := pipe(t)
	go func() {
		time.Sleep(20 * time.Millisecond)
		unix.Write(w, []byte("event"))
	}()
	buf := make([]byte, 16)
	n, err := f.Read(context.Background(), buf)
	if err != nil || string(buf[:n]) != "event" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

func TestReadEndsWithContext(t *testing.T) {
	f, w := pipe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := f.Read(ctx, make([]byte, 8)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read on an idle pipe: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("returned %v after a 30 ms deadline", d)
	}
	// The deadline is not left behind: the next read gets the data.
	unix.Write(w, []byte("x"))
	if n, err := f.Read(context.Background(), make([]byte, 8)); err != nil || n != 1 {
		t.Fatalf("read after a cancelled one: %d, %v", n, err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if _, err := f.Read(cctx, make([]byte, 8)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestCloseTwice(t *testing.T) {
	f, _ := pipe(t)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}
