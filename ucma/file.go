package ucma

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/pollfd"
	"github.com/mlx5go/mlx5go/internal/ucmaabi"
	"golang.org/x/sys/unix"
)

// DevicePath is the rdma_ucm character device (the misc device
// "infiniband/rdma_cm" of drivers/infiniband/core/ucma.c).
const DevicePath = "/dev/infiniband/rdma_cm"

// ABIVersionPath is where the kernel publishes its rdma_ucm ABI version
// (librdmacm's check_abi_version_sysfs reads it).
const ABIVersionPath = "/sys/class/misc/rdma_cm/abi_version"

// File is an open rdma_cm device: an event channel and the ids made on
// it. Commands may be issued from any goroutine; GetEvent calls take
// turns. Closing the File destroys every id on it, as the kernel does
// when the last reference to the file goes (ucma_close).
type File struct {
	p      *pollfd.File
	closed atomic.Bool
}

// Open opens DevicePath. Without the rdma_ucm module the device is
// missing, and the error says so.
func Open() (*File, error) {
	fd, err := unix.Open(DevicePath, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("ucma: open %s: %w (is the rdma_ucm module loaded?)", DevicePath, err)
		}
		return nil, fmt.Errorf("ucma: open %s: %w", DevicePath, err)
	}
	p, err := pollfd.New(fd, DevicePath)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ucma: %w", err)
	}
	return &File{p: p}, nil
}

// Fd returns the descriptor, still owned by the File (MigrateID names a
// File by it).
func (f *File) Fd() int { return f.p.Fd() }

// Close closes the file: the kernel destroys its ids, disconnecting or
// rejecting their connections. A GetEvent in progress returns
// os.ErrClosed. Closing twice is safe.
func (f *File) Close() error {
	if f.closed.Swap(true) {
		return nil
	}
	return f.p.Close()
}

// writeHook, when set, replaces the write(2) of a command: buf is the
// command with its header, out the response the command names (nil if
// none), which the hook may fill. Encoding tests record commands with it.
var writeHook func(buf, out []byte) unix.Errno

// command writes one command (struct rdma_ucm_cmd_hdr, then in) whose
// response, if any, the kernel writes into out: in holds out's address,
// and out is pinned for the call. op names the command in errors.
func (f *File) command(op string, cmd uint32, in []byte, out []byte) error {
	return f.write(op, header(cmd, in, len(out)), out)
}

func (f *File) write(op string, buf, out []byte) error {
	if f.closed.Load() {
		return fmt.Errorf("ucma: %s: %w", op, os.ErrClosed)
	}
	var errno unix.Errno
	if writeHook != nil {
		errno = writeHook(buf, out)
	} else if cerr := f.p.Control(func(fd uintptr) { errno = rawWrite(fd, buf, out) }); cerr != nil {
		return fmt.Errorf("ucma: %s: %w", op, os.ErrClosed)
	}
	if errno != 0 {
		return &CallError{Op: op, Errno: errno}
	}
	return nil
}

// rawWrite writes buf to fd with out, the response buf names, pinned.
func rawWrite(fd uintptr, buf, out []byte) unix.Errno {
	var pin runtime.Pinner
	if len(out) > 0 {
		pin.Pin(&out[0])
	}
	defer pin.Unpin()
	n, err := unix.Write(int(fd), buf)
	switch {
	case err != nil:
		return err.(unix.Errno)
	case n != len(buf):
		return unix.ENODATA // librdmacm's answer to a short write
	}
	return 0
}

// header prefixes in with struct rdma_ucm_cmd_hdr.
func header(cmd uint32, in []byte, outLen int) []byte {
	buf := make([]byte, unsafe.Sizeof(ucmaabi.RdmaUcmCmdHdr{})+uintptr(len(in)))
	hdr := (*ucmaabi.RdmaUcmCmdHdr)(unsafe.Pointer(&buf[0]))
	*hdr = ucmaabi.RdmaUcmCmdHdr{Cmd: cmd, In: uint16(len(in)), Out: uint16(outLen)}
	copy(buf[unsafe.Sizeof(*hdr):], in)
	return buf
}

// addr is the address the kernel writes a response to.
func addr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}

// bytesOf views a struct as its bytes.
func bytesOf[T any](v *T) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v)) }

// GetEvent takes the next event of the file, waiting in the netpoller
// until one is queued or ctx is done (RDMA_USER_CM_CMD_GET_EVENT on a
// non-blocking file answers EAGAIN while there is none). The kernel counts
// the event as reported to its id (DestroyID's answer).
func (f *File) GetEvent(ctx context.Context) (Event, error) {
	const op = "get event"
	var resp ucmaabi.RdmaUcmEventResp
	out := bytesOf(&resp)
	cmd := ucmaabi.RdmaUcmGetEvent{Response: addr(out)}
	buf := header(ucmaabi.RDMA_USER_CM_CMD_GET_EVENT, bytesOf(&cmd), len(out))
	if writeHook != nil || f.closed.Load() {
		if err := f.write(op, buf, out); err != nil {
			return Event{}, err
		}
		return decodeEvent(&resp), nil
	}
	var errno unix.Errno
	err := f.p.Wait(ctx, func(fd uintptr) bool {
		errno = rawWrite(fd, buf, out)
		return errno != unix.EAGAIN
	})
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return Event{}, err
	case err != nil || f.closed.Load():
		return Event{}, fmt.Errorf("ucma: %s: %w", op, os.ErrClosed)
	case errno != 0:
		return Event{}, &CallError{Op: op, Errno: errno}
	}
	return decodeEvent(&resp), nil
}

// decodeEvent decodes both members of the event's union; the caller
// reads the one of its id's QP type.
func decodeEvent(r *ucmaabi.RdmaUcmEventResp) Event {
	ev := Event{UID: r.Uid, ID: ID(r.Id), Type: EventType(r.Event), Status: int32(r.Status),
		ECE: ECE{VendorID: r.Ece.VendorId, AttrMod: r.Ece.AttrMod}}
	var conn ucmaabi.RdmaUcmConnParam
	copy(bytesOf(&conn), r.Param[:])
	ev.Conn = connParamOf(&conn)
	var ud ucmaabi.RdmaUcmUdParam
	copy(bytesOf(&ud), r.Param[:])
	ev.UD = UDParam{QPN: ud.QpNum, QKey: ud.Qkey, AH: ahOf(&ud.AhAttr),
		PrivateData: append([]byte(nil), ud.PrivateData[:ud.PrivateDataLen]...)}
	return ev
}

func connParamOf(c *ucmaabi.RdmaUcmConnParam) ConnParam {
	return ConnParam{QPN: c.QpNum, QKey: c.Qkey, PrivateData: append([]byte(nil), c.PrivateData[:c.PrivateDataLen]...),
		SRQ: c.Srq != 0, ResponderResources: c.ResponderResources, InitiatorDepth: c.InitiatorDepth,
		FlowControl: c.FlowControl, RetryCount: c.RetryCount, RNRRetryCount: c.RnrRetryCount}
}

func ahOf(a *ucmaabi.IbUverbsAhAttr) AHAttr {
	return AHAttr{GRH: GlobalRoute{DGID: a.Grh.Dgid, FlowLabel: a.Grh.FlowLabel, SGIDIndex: a.Grh.SgidIndex,
		HopLimit: a.Grh.HopLimit, TrafficClass: a.Grh.TrafficClass}, DLID: a.Dlid, SL: a.Sl,
		SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate, IsGlobal: a.IsGlobal != 0, Port: a.PortNum}
}
