package pollfd

import (
	"context"
	"errors"
	"os"
	"time"
)

// Control calls fn with the descriptor, which stays open for the call
// (a concurrent Close waits for it); after Close it returns the runtime's
// "use of closed file" error without calling fn.
func (p *File) Control(fn func(fd uintptr)) error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(fn)
}

// Wait calls fn with the descriptor until fn reports done, waiting in the
// netpoller for the descriptor to become readable between calls, or until
// ctx is done; then it returns ctx's error. It is for the kernel files
// whose events are taken by a command rather than a read (rdma_cm's
// GET_EVENT is a write(2) that fails with EAGAIN on a non-blocking file
// with no event, and the file polls readable when one is queued). One
// Wait or Read runs at a time.
func (p *File) Wait(ctx context.Context, fn func(fd uintptr) (done bool)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.f.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	rc, err := p.f.SyscallConn()
	if err != nil {
		return err
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		p.f.SetReadDeadline(time.Unix(1, 0))
		close(fired)
	})
	err = rc.Read(fn)
	if !stop() {
		<-fired
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
