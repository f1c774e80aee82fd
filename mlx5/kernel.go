package mlx5

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"

	"github.com/mlx5go/mlx5go/internal/pollfd"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// kernelDevice is seam.Device over the kernel: DEVX methods of the mlx5_ib
// driver on a uverbs context.
type kernelDevice struct {
	ctx  *uverbs.Context
	devx bool // opened with a DEVX uid

	mu  sync.Mutex
	pds map[seam.Handle]*uverbs.PD
	mrs map[seam.Handle]*uverbs.MR

	verbs kernelVerbs // CQs, QPs, SRQs, AHs (kernel_verbs.go)
}

var _ seam.Device = (*kernelDevice)(nil)

func (k *kernelDevice) GeneralCmd(in, out []byte) error {
	var a uverbs.Attrs
	a.In(mlx5abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_IN, in)
	a.Out(mlx5abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT, out)
	return k.ctx.Invoke("devx general cmd", mlx5abi.MLX5_IB_OBJECT_DEVX, mlx5abi.MLX5_IB_METHOD_DEVX_OTHER, &a)
}

func (k *kernelDevice) ObjCreate(in, out []byte) (seam.Handle, error) {
	var a uverbs.Attrs
	h := a.NewIDR(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE)
	a.In(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN, in)
	a.Out(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT, out)
	if err := k.ctx.Invoke("devx obj create", mlx5abi.MLX5_IB_OBJECT_DEVX_OBJ, mlx5abi.MLX5_IB_METHOD_DEVX_OBJ_CREATE, &a); err != nil {
		return 0, err
	}
	return seam.Handle(a.Handle(h)), nil
}

func (k *kernelDevice) objCall(op string, method, hAttr, inAttr, outAttr uint16, h seam.Handle, in, out []byte) error {
	var a uverbs.Attrs
	a.IDR(hAttr, uint32(h))
	a.In(inAttr, in)
	a.Out(outAttr, out)
	return k.ctx.Invoke(op, mlx5abi.MLX5_IB_OBJECT_DEVX_OBJ, method, &a)
}

func (k *kernelDevice) ObjQuery(h seam.Handle, in, out []byte) error {
	return k.objCall("devx obj query", mlx5abi.MLX5_IB_METHOD_DEVX_OBJ_QUERY, mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE,
		mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN, mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT, h, in, out)
}

func (k *kernelDevice) ObjModify(h seam.Handle, in, out []byte) error {
	return k.objCall("devx obj modify", mlx5abi.MLX5_IB_METHOD_DEVX_OBJ_MODIFY, mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE,
		mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN, mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT, h, in, out)
}

func (k *kernelDevice) ObjDestroy(h seam.Handle) error {
	var a uverbs.Attrs
	a.IDR(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE, uint32(h))
	return k.ctx.Invoke("devx obj destroy", mlx5abi.MLX5_IB_OBJECT_DEVX_OBJ, mlx5abi.MLX5_IB_METHOD_DEVX_OBJ_DESTROY, &a)
}

func (k *kernelDevice) ObjQueryAsync(h seam.Handle, in []byte, outLen int, wrID uint64, fd seam.AsyncCmdFD) error {
	var a uverbs.Attrs
	a.IDR(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE, uint32(h))
	a.In(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN, in)
	a.InUint64(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN, uint64(outLen))
	a.InUint64(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID, wrID)
	a.FD(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD, fd.Fd())
	return k.ctx.Invoke("devx obj query async", mlx5abi.MLX5_IB_OBJECT_DEVX_OBJ, mlx5abi.MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY, &a)
}

func (k *kernelDevice) NewAsyncCmdFD() (seam.AsyncCmdFD, error) {
	var a uverbs.Attrs
	i := a.NewFD(mlx5abi.MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE)
	if err := k.ctx.Invoke("devx async cmd fd alloc", mlx5abi.MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD, mlx5abi.MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC, &a); err != nil {
		return nil, err
	}
	fd := int(a.Handle(i))
	p, err := pollfd.New(fd, "devx async cmd fd")
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return kernelAsyncFD{p}, nil
}

// kernelAsyncFD reads completions through the Go runtime's netpoller.
type kernelAsyncFD struct{ *pollfd.File }

func (q kernelAsyncFD) Next(ctx context.Context, buf []byte) (int, error) { return q.Read(ctx, buf) }

// UMemReg is libmlx5's mlx5dv_devx_umem_reg: UMemRegEx with the default
// page sizes, sent as an optional attribute (kernel_dmabuf.go).
func (k *kernelDevice) UMemReg(mem []byte, access uint32) (seam.Handle, uint32, error) {
	return k.UMemRegEx(seam.UMemRegEx{Mem: mem, Dmabuf: -1, Access: access})
}

func (k *kernelDevice) UMemDereg(h seam.Handle) error {
	var a uverbs.Attrs
	a.IDR(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE, uint32(h))
	return k.ctx.Invoke("devx umem dereg", mlx5abi.MLX5_IB_OBJECT_DEVX_UMEM, mlx5abi.MLX5_IB_METHOD_DEVX_UMEM_DEREG, &a)
}

func (k *kernelDevice) UARAlloc(typ uint32) (seam.UAR, error) {
	var a uverbs.Attrs
	var off [8]byte
	var length, page [4]byte
	h := a.NewIDR(mlx5abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE)
	a.InUint64(mlx5abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, uint64(typ))
	a.Out(mlx5abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, off[:])
	a.Out(mlx5abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, length[:])
	a.Out(mlx5abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, page[:])
	if err := k.ctx.Invoke("uar alloc", mlx5abi.MLX5_IB_OBJECT_UAR, mlx5abi.MLX5_IB_METHOD_UAR_OBJ_ALLOC, &a); err != nil {
		return seam.UAR{}, err
	}
	return seam.UAR{Handle: seam.Handle(a.Handle(h)), PageID: *(*uint32)(unsafe.Pointer(&page)),
		MMapOffset: *(*uint64)(unsafe.Pointer(&off)), MMapLength: *(*uint32)(unsafe.Pointer(&length))}, nil
}

func (k *kernelDevice) UARFree(h seam.Handle) error {
	var a uverbs.Attrs
	a.IDR(mlx5abi.MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, uint32(h))
	return k.ctx.Invoke("uar free", mlx5abi.MLX5_IB_OBJECT_UAR, mlx5abi.MLX5_IB_METHOD_UAR_OBJ_DESTROY, &a)
}

func (k *kernelDevice) QueryEQN(vector uint32) (uint32, error) {
	var a uverbs.Attrs
	var eqn [4]byte
	a.InUint32(mlx5abi.MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC, vector)
	a.Out(mlx5abi.MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN, eqn[:])
	if err := k.ctx.Invoke("devx query eqn", mlx5abi.MLX5_IB_OBJECT_DEVX, mlx5abi.MLX5_IB_METHOD_DEVX_QUERY_EQN, &a); err != nil {
		return 0, err
	}
	return *(*uint32)(unsafe.Pointer(&eqn)), nil
}

func (k *kernelDevice) Close() error { return k.ctx.Close() }

func (k *kernelDevice) MapUAR(u seam.UAR) ([]byte, error) {
	b, err := unix.Mmap(k.ctx.FD(), int64(u.MMapOffset), int(u.MMapLength), unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap UAR page %d: %w", u.PageID, err)
	}
	return b, nil
}

func (k *kernelDevice) UnmapUAR(page []byte) error { return unix.Munmap(page) }

// MapClockInfo maps the clock-info page as libmlx5 does: the mmap command
// MLX5_IB_MMAP_CLOCK_INFO at bit 8 of the page offset, the version
// (MLX5_IB_CLOCK_INFO_V1, 0) in the low byte, read-only.
func (k *kernelDevice) MapClockInfo() ([]byte, error) {
	const mmapClockInfo, clockInfoV1 = 7, 0
	ps := unix.Getpagesize()
	b, err := unix.Mmap(k.ctx.FD(), int64(mmapClockInfo<<8|clockInfoV1)*int64(ps), ps, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap clock info page: %w", err)
	}
	return b, nil
}

func (k *kernelDevice) UnmapClockInfo(page []byte) error { return unix.Munmap(page) }

var _ seam.ClockMapper = (*kernelDevice)(nil)

func (k *kernelDevice) AllocPD() (seam.Handle, uint32, error) {
	var resp mlx5abi.Mlx5IbAllocPdResp
	pd, err := k.ctx.AllocPD(unsafe.Slice((*byte)(unsafe.Pointer(&resp)), unsafe.Sizeof(resp)))
	if err != nil {
		return 0, 0, err
	}
	h := seam.Handle(pd.Handle())
	k.mu.Lock()
	if k.pds == nil {
		k.pds = map[seam.Handle]*uverbs.PD{}
	}
	k.pds[h] = pd
	k.mu.Unlock()
	return h, resp.Pdn, nil
}

func (k *kernelDevice) DeallocPD(h seam.Handle) error {
	k.mu.Lock()
	pd := k.pds[h]
	delete(k.pds, h)
	k.mu.Unlock()
	if pd == nil {
		return fmt.Errorf("dealloc pd: handle %d: %w", h, unix.ENOENT)
	}
	return pd.Close()
}

func (k *kernelDevice) RegMR(pdh seam.Handle, mem []byte, access uint32) (seam.MR, error) {
	pd, err := k.pd("reg mr", pdh)
	if err != nil {
		return seam.MR{}, err
	}
	if len(mem) == 0 {
		return seam.MR{}, fmt.Errorf("reg mr: empty region: %w", unix.EINVAL)
	}
	return k.keepMR(pd.RegMR(mem, uint64(uintptr(unsafe.Pointer(&mem[0]))), uverbs.AccessFlags(access), nil, nil))
}

// keepMR keeps a new MR for DeregMR.
func (k *kernelDevice) keepMR(mr *uverbs.MR, err error) (seam.MR, error) {
	if err != nil {
		return seam.MR{}, err
	}
	h := seam.Handle(mr.Handle())
	k.mu.Lock()
	if k.mrs == nil {
		k.mrs = map[seam.Handle]*uverbs.MR{}
	}
	k.mrs[h] = mr
	k.mu.Unlock()
	return seam.MR{Handle: h, LKey: mr.LKey, RKey: mr.RKey}, nil
}

func (k *kernelDevice) DeregMR(h seam.Handle) error {
	k.mu.Lock()
	mr := k.mrs[h]
	delete(k.mrs, h)
	k.mu.Unlock()
	if mr == nil {
		return fmt.Errorf("dereg mr: handle %d: %w", h, unix.ENOENT)
	}
	return mr.Close()
}

// NewEventChannel allocates a DEVX event channel
// (MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC) with the flags
// mlx5dv_devx_create_event_channel sends: 0, so events carry their EQE,
// or OMIT_DATA, so they carry only the cookie.
func (k *kernelDevice) NewEventChannel(omitData bool) (seam.EventChannel, error) {
	var flags uint32
	size := eventSize
	if omitData {
		flags, size = mlx5abi.MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA, seam.EventHeaderSize
	}
	var a uverbs.Attrs
	i := a.NewFD(mlx5abi.MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE)
	a.InUint32(mlx5abi.MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS, flags)
	if err := k.ctx.Invoke("devx async event fd alloc", mlx5abi.MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD, mlx5abi.MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC, &a); err != nil {
		return nil, err
	}
	fd := int(a.Handle(i))
	p, err := pollfd.New(fd, "devx event channel")
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return kernelEventChannel{p, size}, nil
}

// eventSize is one event read from a channel without OMIT_DATA: struct
// mlx5_ib_uapi_devx_async_event_hdr, then struct mlx5_eqe.
const eventSize = seam.EventHeaderSize + seam.EQESize

// kernelEventChannel reads events through the Go runtime's netpoller. The
// kernel hands out one whole event per read, of size bytes; it fails a
// read with EOVERFLOW once after it had to drop events, and with EIO once
// the channel is being destroyed.
type kernelEventChannel struct {
	*pollfd.File
	size int
}

func (c kernelEventChannel) Next(ctx context.Context, buf []byte) (int, error) {
	if len(buf) < c.size {
		return 0, fmt.Errorf("devx event: buffer of %d bytes, an event takes %d: %w", len(buf), c.size, unix.EINVAL)
	}
	n, err := c.Read(ctx, buf[:c.size])
	if err != nil {
		return n, err
	}
	if n != c.size {
		return n, fmt.Errorf("devx event: read %d bytes, an event takes %d: %w", n, c.size, io.ErrUnexpectedEOF)
	}
	return n, nil
}

// Subscribe is MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT with the attributes of
// mlx5dv_devx_subscribe_devx_event, in its order: the channel, the
// cookie, the object, the event types (u16, native byte order). There is
// no FD_NUM: events go to the channel, not to an eventfd.
func (k *kernelDevice) Subscribe(ch seam.EventChannel, h seam.Handle, types []uint16, cookie uint64) error {
	const call = "devx subscribe event"
	if len(types) == 0 {
		return fmt.Errorf("%s: no event type: %w", call, unix.EINVAL)
	}
	fd, err := channelFd(call, ch)
	if err != nil {
		return err
	}
	var a uverbs.Attrs
	a.FD(mlx5abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE, fd)
	a.InUint64(mlx5abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE, cookie)
	a.IDR(mlx5abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE, uint32(h))
	a.In(mlx5abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(types))), 2*len(types)))
	return k.ctx.Invoke(call, mlx5abi.MLX5_IB_OBJECT_DEVX, mlx5abi.MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT, &a)
}

// SubscribeFD is MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT with the attributes
// of mlx5dv_devx_subscribe_devx_event_fd, in its order: the channel, the
// object, the one event type, and the eventfd (FD_NUM, an s32). It has no
// cookie: the kernel signals the eventfd instead of queueing an event.
func (k *kernelDevice) SubscribeFD(ch seam.EventChannel, h seam.Handle, typ uint16, fd int) error {
	const call = "devx subscribe event fd"
	chfd, err := channelFd(call, ch)
	if err != nil {
		return err
	}
	var a uverbs.Attrs
	a.FD(mlx5abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE, chfd)
	a.IDR(mlx5abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE, uint32(h))
	a.In(mlx5abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST, binary.NativeEndian.AppendUint16(nil, typ))
	a.InUint32(mlx5abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM, uint32(int32(fd)))
	return k.ctx.Invoke(call, mlx5abi.MLX5_IB_OBJECT_DEVX, mlx5abi.MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT, &a)
}

// channelFd is the descriptor a subscribe call names ch by: EINVAL for
// no channel, EBADF for a closed one.
func channelFd(call string, ch seam.EventChannel) (int, error) {
	if ch == nil {
		return -1, fmt.Errorf("%s: no channel: %w", call, unix.EINVAL)
	}
	fd := ch.Fd()
	if fd < 0 {
		return -1, fmt.Errorf("%s: channel closed: %w", call, unix.EBADF)
	}
	return fd, nil
}

// DEVX reports whether the context was opened with a DEVX uid.
func (k *kernelDevice) DEVX() bool { return k.devx }
