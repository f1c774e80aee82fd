package main

import (
	ctxpkg "context"
	"encoding/binary"

	"github.com/mlx5go/mlx5go/internal/seam"
	u "github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

// A pump carries one event source of the model (the async event file, a
// completion channel, a DEVX async command fd) to a real fd that
// libibverbs reads, polls and closes: the read end is the caller's, the
// bridge writes each event whole to the other end (a pipe: events are
// shorter than PIPE_BUF, so each write is atomic; a SOCK_SEQPACKET pair
// where the reader takes one record per read).
type pump struct {
	c      *context
	w      int // the bridge's end
	cancel ctxpkg.CancelFunc
	close  func() error // closes the model's source; nil for none
	counts map[uint64]uint32
	size   int
}

func (p *pump) stop() {
	p.cancel()
	if p.close != nil {
		if err := p.close(); err != nil {
			tracef("close event source: %v", err)
		}
	}
	unix.Close(p.w)
}

// startPump makes the fd pair and runs next in a goroutine until it fails
// (the source closed or the pump stopped); the read end is for the
// caller (passPump). What the caller reads of the pump is counted
// (readNotice) in counts,
// one event per size bytes, by the user handle in its first 8 bytes, as
// ib_uverbs_event_read counts the events read for the destroy
// responses; nil counts nothing.
func (x *context) startPump(seqpacket bool, closeSrc func() error, next func(ctx ctxpkg.Context) ([]byte, error), counts map[uint64]uint32, size int) (int, *pump, error) {
	var fds [2]int
	var err error
	if seqpacket {
		var sv [2]int
		sv, err = unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		fds = sv
	} else {
		err = unix.Pipe2(fds[:], unix.O_CLOEXEC)
	}
	if err != nil {
		return -1, nil, err
	}
	ctx, cancel := ctxpkg.WithCancel(ctxpkg.Background())
	p := &pump{c: x, w: fds[1], cancel: cancel, close: closeSrc, counts: counts, size: size}
	go func() {
		for {
			b, err := next(ctx)
			if err != nil {
				return
			}
			if _, err := unix.Write(p.w, b); err != nil {
				return
			}
		}
	}()
	return fds[0], p, nil
}

// passPump hands the pump's read end to the caller in attribute id of c
// (its data, or at off in its buffer with inBuf); once the shim names the
// caller's number for it, the pump is the caller's fd's, and also runs
// with it.
func (x *context) passPump(c *call, id uint16, inBuf bool, off uint32, rfd int, p *pump, also func(fd int)) {
	c.passFD(id, inBuf, off, rfd, func(fd int) {
		mu.Lock()
		defer mu.Unlock()
		if fd < 0 {
			p.stop()
			return
		}
		evfds[fd] = p
		if also != nil {
			also(fd)
		}
	})
}

// asyncEventFD is ASYNC_EVENT_ALLOC: the context's async event file.
func (x *context) asyncEventFD(c *call, id uint16) error {
	fd, p, err := x.startPump(false, nil, func(ctx ctxpkg.Context) ([]byte, error) {
		ev, err := x.d.NextAsyncEvent(ctx)
		if err != nil {
			return nil, err
		}
		return encode(&u.IbUverbsAsyncEventDesc{Element: ev.Element, EventType: ev.Type}), nil
	}, x.asyncEvents, u.SizeofIbUverbsAsyncEventDesc)
	if err != nil {
		return err
	}
	x.passPump(c, id, false, 0, fd, p, nil)
	return nil
}

// compChannelFD is CREATE_COMP_CHANNEL: each event is struct
// ib_uverbs_comp_event_desc, the CQ's user handle. The fd goes at off in
// attribute id's buffer (the response's fd).
func (x *context) compChannelFD(c *call, id uint16, off uint32) error {
	ch, err := x.d.NewCompChannel()
	if err != nil {
		return err
	}
	fd, p, err := x.startPump(false, ch.Close, func(ctx ctxpkg.Context) ([]byte, error) {
		h, err := ch.Next(ctx)
		if err != nil {
			return nil, err
		}
		return binary.NativeEndian.AppendUint64(nil, h), nil
	}, x.compEvents, 8)
	if err != nil {
		ch.Close()
		return err
	}
	x.passPump(c, id, true, off, fd, p, func(fd int) { x.comps[fd] = ch })
	return nil
}

// asyncCmd is a DEVX async command fd: the model's, and the caller's end.
type asyncCmd struct {
	fd seam.AsyncCmdFD
}

// maxAsyncOut bounds one async query's output (the mailbox is at most a
// page in every command libmlx5 sends asynchronously).
const maxAsyncOut = 1 << 16

func (x *context) asyncCmdFD(c *call, id uint16) error {
	af, err := x.d.NewAsyncCmdFD()
	if err != nil {
		return err
	}
	fd, p, err := x.startPump(true, af.Close, func(ctx ctxpkg.Context) ([]byte, error) {
		buf := make([]byte, 8+maxAsyncOut)
		n, err := af.Next(ctx, buf)
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}, nil, 0)
	if err != nil {
		af.Close()
		return err
	}
	x.passPump(c, id, false, 0, fd, p, func(fd int) { x.asyncFDs[fd] = &asyncCmd{fd: af} })
	return nil
}

// read counts the events the caller read from fd: b is what it read.
// Held under mu.
func (p *pump) read(b []byte) {
	if p.counts == nil {
		return
	}
	for len(b) >= p.size {
		p.counts[binary.NativeEndian.Uint64(b)]++
		b = b[p.size:]
	}
}
