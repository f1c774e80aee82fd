package model

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// maxAsyncBytes is MAX_ASYNC_BYTES_IN_USE in devx.c: the output bytes of
// asynchronous commands an FD may hold unread.
const maxAsyncBytes = 1 << 20

// asyncFD is the model's DEVX async command FD: completions queue in
// memory, each an 8-byte wr_id and the output mailbox (struct
// mlx5_ib_uapi_devx_async_cmd_hdr).
type asyncFD struct {
	d *Device

	mu        sync.Mutex
	queue     [][]byte // header and output, ready to copy
	inUse     int      // output bytes queued or in flight
	closed    bool     // Close was called
	destroyed bool     // the context was closed
	wake      chan struct{}
}

// NewAsyncCmdFD is MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC. Its handler
// reads no uid: a context without DEVX gets one too (its queries are then
// refused, devx_get_uid).
func (d *Device) NewAsyncCmdFD() (seam.AsyncCmdFD, error) {
	const call = "devx async cmd fd alloc"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return nil, err
	}
	fd := &asyncFD{d: d, wake: make(chan struct{}, 1)}
	d.fds[fd] = true
	return fd, nil
}

// ObjQueryAsync is MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY. The model's
// firmware answers at once; the completion waits on fd until read.
func (d *Device) ObjQueryAsync(h seam.Handle, in []byte, outLen int, wrID uint64, fd seam.AsyncCmdFD) error {
	const call = "devx obj query async"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	if len(in) < hdrLen {
		return kerr(call, unix.EINVAL, "UVERBS_ATTR_MIN_SIZE: the input holds at least the 16-byte command header")
	}
	if prm.GeneralObjInCmdHdr.VhcaTunnelId.Get(in) != 0 {
		return kerr(call, unix.EINVAL, "vhca_tunnel_id is not allowed on DEVX object methods")
	}
	o, err := d.lookup(call, h)
	if err != nil {
		return err
	}
	uid, err := d.devxUID(call, in)
	if err != nil {
		return err
	}
	if !isQueryCmd(in) {
		return kerr(call, unix.EINVAL, "devx_is_obj_query_cmd: "+prm.OpcodeName(uint16(prm.MboxIn.Opcode.Get(in)))+" is not a query")
	}
	if outLen < 0 || outLen > 0xffff {
		return kerr(call, unix.EINVAL, "uverbs_get_const: out_len is a u16")
	}
	if !validObjID(o, in) {
		return kerr(call, unix.EINVAL, "devx_is_valid_obj_id: the command names another object than the handle")
	}
	f, ok := fd.(*asyncFD)
	if !ok || f.d != d || !d.fds[f] {
		return kerr(call, unix.EBADF, "the FD is not an async command FD of this context")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inUse+outLen > maxAsyncBytes {
		return kerr(call, unix.EAGAIN, "MAX_ASYNC_BYTES_IN_USE: 1 MiB of output is unread on the FD")
	}
	ev := make([]byte, 8+outLen)
	binary.NativeEndian.PutUint64(ev, wrID)
	d.h.exec(uid, d.id, cmdAs(in, uid), ev[8:])
	f.inUse += outLen
	f.queue = append(f.queue, ev)
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return nil
}

// Next waits for a completion, as read(2) on the FD: ENOSPC if buf cannot
// hold it (it stays queued), EIO once the context is closed, and ctx's
// error if ctx is done first.
func (f *asyncFD) Next(ctx context.Context, buf []byte) (int, error) {
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		f.mu.Lock()
		switch {
		case f.closed:
			f.mu.Unlock()
			return 0, fmt.Errorf("model: devx async cmd fd: %w", unix.EBADF)
		case len(f.queue) > 0:
			ev := f.queue[0]
			if len(buf) < len(ev) {
				f.mu.Unlock()
				return 0, fmt.Errorf("model: devx async cmd fd: completion of %d bytes, buffer of %d: %w", len(ev), len(buf), unix.ENOSPC)
			}
			f.queue = f.queue[1:]
			f.inUse -= len(ev) - 8
			f.mu.Unlock()
			return copy(buf, ev), nil
		case f.destroyed:
			f.mu.Unlock()
			return 0, fmt.Errorf("model: devx async cmd fd: the context is closed: %w", unix.EIO)
		}
		f.mu.Unlock()
		select {
		case <-f.wake:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Fd returns -1: the model's FD is no kernel descriptor.
func (f *asyncFD) Fd() int { return -1 }

// Close releases the FD and drops what it holds. Closing twice returns nil.
func (f *asyncFD) Close() error {
	f.d.h.mu.Lock()
	delete(f.d.fds, f)
	f.d.h.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		f.queue, f.inUse = nil, 0
		close(f.wake)
	}
	return nil
}

// destroy is devx_async_cmd_event_destroy_uobj: the context closed.
func (f *asyncFD) destroy() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.destroyed = true
	f.queue, f.inUse = nil, 0
	select {
	case f.wake <- struct{}{}:
	default:
	}
}
