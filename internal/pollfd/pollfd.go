// Package pollfd reads a file descriptor through the Go runtime's netpoller
// with a context: the kernel's event files (uverbs async events, completion
// channels, DEVX async command completions) wait there, not in a blocked
// thread.
package pollfd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// File is a non-blocking descriptor in the netpoller. One Read runs at a
// time.
type File struct {
	f  *os.File
	mu sync.Mutex
}

// New takes ownership of fd, makes it non-blocking and registers it with
// the netpoller. On error fd is left open for the caller.
func New(fd int, name string) (*File, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("%s: set non-blocking: %w", name, err)
	}
	return &File{f: os.NewFile(uintptr(fd), name)}, nil
}

// Fd returns the descriptor, still owned by the File.
func (p *File) Fd() int { return int(p.f.Fd()) }

// Name is the name given to New.
func (p *File) Name() string { return p.f.Name() }

// Close closes the file, waking a reader with os.ErrClosed. Closing twice
// is safe.
func (p *File) Close() error {
	if err := p.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// Read reads once into buf, waiting until data arrives or ctx is done; then
// it returns ctx's error.
func (p *File) Read(ctx context.Context, buf []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.f.SetReadDeadline(time.Time{}); err != nil {
		return 0, err
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		// A deadline in the past wakes the netpoller's waiter.
		p.f.SetReadDeadline(time.Unix(1, 0))
		close(fired)
	})
	n, err := p.f.Read(buf)
	if !stop() {
		<-fired
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return n, err
}
