package mlx5

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"

	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// events is the context's DEVX event channel and the goroutine that
// reads it in the netpoller. It is made with the first CQ; a kernel
// without DEVX events leaves it off, and CQ errors then go unreported.
type events struct {
	mu      sync.Mutex
	tried   bool
	ch      seam.EventChannel
	cancel  context.CancelFunc
	done    chan struct{}
	cqs     map[uint32]*CQ // subscribed CQs by cqn
	stopped bool
}

// subscribeCQ subscribes the CQ to its error event (MLX5_EVENT_TYPE_
// CQ_ERROR: an overrun or an access violation). It starts the channel
// and its reader with the context's first CQ.
func (c *Context) subscribeCQ(cq *CQ) error {
	e := &c.ev
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return ErrClosed
	}
	if !e.tried {
		e.tried = true
		ch, err := c.dev.NewEventChannel(false)
		switch {
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EPROTONOSUPPORT):
			return nil // no DEVX events on this kernel: CQ errors go unreported
		case err != nil:
			e.tried = false
			return fmt.Errorf("devx event channel: %w", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		e.ch, e.cancel, e.done, e.cqs = ch, cancel, make(chan struct{}), map[uint32]*CQ{}
		go e.read(ctx, ch)
	}
	if e.ch == nil {
		return nil
	}
	if err := c.dev.Subscribe(e.ch, cq.obj.handle, []uint16{mlx5abi.MLX5_EVENT_TYPE_CQ_ERROR}, uint64(cq.cqn)); err != nil {
		return fmt.Errorf("subscribe to CQ errors: %w", err)
	}
	e.cqs[cq.cqn] = cq
	return nil
}

// unsubscribeCQ forgets a destroyed CQ (the kernel ended its
// subscription with the object). The channel closes with the last CQ.
func (c *Context) unsubscribeCQ(cq *CQ) {
	e := &c.ev
	e.mu.Lock()
	if e.cqs[cq.cqn] == cq {
		delete(e.cqs, cq.cqn)
	}
	if len(e.cqs) > 0 || e.ch == nil {
		e.mu.Unlock()
		return
	}
	ch, cancel, done := e.ch, e.cancel, e.done
	e.ch, e.tried = nil, false
	e.mu.Unlock()
	cancel()
	<-done
	ch.Close()
}

// read delivers events until the context closes.
func (e *events) read(ctx context.Context, ch seam.EventChannel) {
	defer close(e.done)
	buf := make([]byte, seam.EventHeaderSize+seam.EQESize)
	for {
		n, err := ch.Next(ctx, buf)
		switch {
		case err == nil:
		case errors.Is(err, unix.EOVERFLOW) && ctx.Err() == nil:
			continue // the kernel dropped events it had no room for; read on
		default:
			return // the context is closing, or the channel failed
		}
		if n < len(buf) {
			continue
		}
		eqe := (*mlx5abi.Mlx5Eqe)(unsafe.Pointer(&buf[seam.EventHeaderSize]))
		switch eqe.Type {
		case mlx5abi.MLX5_EVENT_TYPE_CQ_ERROR:
			d := (*mlx5abi.Mlx5EqeCqErr)(unsafe.Pointer(&eqe.Data))
			cqn := binary.BigEndian.Uint32(d.Cqn[:]) & 0xffffff
			e.mu.Lock()
			cq := e.cqs[cqn]
			e.mu.Unlock()
			if cq != nil {
				cq.failed(d.Syndrome)
			}
		}
	}
}

// stop ends the reader and closes the channel.
func (e *events) stop() {
	e.mu.Lock()
	e.stopped = true
	ch, cancel, done := e.ch, e.cancel, e.done
	e.ch = nil
	e.mu.Unlock()
	if ch == nil {
		return
	}
	cancel()
	<-done
	ch.Close()
}
