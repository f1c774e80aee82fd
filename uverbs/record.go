package uverbs

import (
	"fmt"
	"math"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// A Call is one RDMA_VERBS_IOCTL as a recording context saw it: the header,
// the attributes, and a copy of the memory each pointer attribute points to
// (nil for inline and handle attributes).
type Call struct {
	Op    string
	Hdr   IoctlHdr
	Attrs []Attr
	Data  [][]byte
}

// IoctlHdr is the header of an RDMA_VERBS_IOCTL call (struct
// ib_uverbs_ioctl_hdr) as a recording context sends it: the length of the
// header and its attributes, the object and method ids, the number of
// attributes and the driver the call names.
type IoctlHdr struct {
	Length, ObjectID, MethodID, NumAttrs uint16
	DriverID                             DriverID
}

// A Recorder receives the calls of a recording context and answers them:
// it may fill output attributes (through Data, which is copied back) and
// new handles (Attrs[i].Data), and returns the errno the call fails with,
// or 0.
type Recorder func(c *Call) unix.Errno

// NewRecordingContext returns a Context on no device: its ioctl calls go to
// rec instead of the kernel. Providers use it to test their encodings (for
// instance against rdma-core's recorded calls). It has no write() path, and
// its FD is not a descriptor. Its async event file is a pipe that
// RecordAsyncEvent writes to; if the pipe cannot be made, the context has
// none and creates that pass it (CQ, QP, SRQ) fail.
func NewRecordingContext(driverID DriverID, rec Recorder) *Context {
	c := &Context{fd: math.MaxInt32, driverID: driverID, recorder: rec, children: map[closer]struct{}{},
		events: map[uint64]any{}, recAsync: -1}
	var p [2]int
	if unix.Pipe2(p[:], unix.O_CLOEXEC) == nil {
		ev, err := newEventFile(p[0], "recorded async events")
		if err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return c
		}
		c.async, c.recAsync = ev, p[1]
	}
	return c
}

// RecordGetContext runs GET_CONTEXT on a recording context with opt's
// driver data (DriverIn, DriverOut), as Open does on a device: the
// recorder answers it, and DriverResponse then returns what it wrote.
func (c *Context) RecordGetContext(opt *Options) error {
	if c.recorder == nil {
		return fmt.Errorf("uverbs: record get context: not a recording context: %w", unix.EINVAL)
	}
	if opt == nil {
		opt = &Options{}
	}
	return c.getContext(opt.DriverIn, opt.DriverOut)
}

// RecordAsyncEvent writes an event into a recording context's async event
// file, as the kernel would (struct ib_uverbs_async_event_desc).
func (c *Context) RecordAsyncEvent(typ EventType, element uint64) error {
	if c.recorder == nil || c.recAsync < 0 {
		return fmt.Errorf("uverbs: record async event: not a recording context: %w", unix.EINVAL)
	}
	d := uverbsabi.IbUverbsAsyncEventDesc{Element: element, EventType: uint32(typ)}
	if _, err := unix.Write(c.recAsync, asBytes(&d)); err != nil {
		return fmt.Errorf("uverbs: record async event: %w", err)
	}
	return nil
}

func (c *Context) record(op string, object, method uint16, a *Attrs) error {
	if a.err != nil {
		return &CallError{Op: op, Errno: unix.EINVAL}
	}
	call := &Call{Op: op, Hdr: IoctlHdr{
		Length: uint16(uverbsabi.SizeofIbUverbsIoctlHdr + uverbsabi.SizeofIbUverbsAttr*a.n), ObjectID: object, MethodID: method,
		NumAttrs: uint16(a.n), DriverID: c.driverID}}
	call.Attrs = make([]Attr, a.n)
	call.Data = make([][]byte, a.n)
	for i := 0; i < a.n; i++ {
		call.Attrs[i] = attrOf(&a.attrs[i])
		if a.pins[i] != nil {
			call.Data[i] = append([]byte(nil), unsafe.Slice((*byte)(a.pins[i]), a.attrs[i].Len)...)
		}
	}
	errno := c.recorder(call)
	for i := 0; i < a.n; i++ {
		a.attrs[i].Data = call.Attrs[i].Data
		a.attrs[i].Flags = call.Attrs[i].Flags
		if a.pins[i] != nil {
			copy(unsafe.Slice((*byte)(a.pins[i]), a.attrs[i].Len), call.Data[i])
		}
	}
	if errno != 0 {
		return &CallError{Op: op, Errno: errno}
	}
	return nil
}
