package uverbs

import (
	"math"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Call is one RDMA_VERBS_IOCTL as a recording context saw it: the header,
// the attributes, and a copy of the memory each pointer attribute points to
// (nil for inline and handle attributes).
type Call struct {
	Op    string
	Hdr   IbUverbsIoctlHdr
	Attrs []IbUverbsAttr
	Data  [][]byte
}

// A Recorder receives the calls of a recording context and answers them:
// it may fill output attributes (through Data, which is copied back) and
// new handles (Attrs[i].Data), and returns the errno the call fails with,
// or 0.
type Recorder func(c *Call) unix.Errno

// NewRecordingContext returns a Context on no device: its ioctl calls go to
// rec instead of the kernel. Providers use it to test their encodings (for
// instance against rdma-core's recorded calls); it has no async event file
// and no write() path. Its FD is not a descriptor.
func NewRecordingContext(driverID uint32, rec Recorder) *Context {
	return &Context{fd: math.MaxInt32, driverID: driverID, recorder: rec, children: map[closer]struct{}{}, events: map[uint64]any{}}
}

func (c *Context) record(op string, object, method uint16, a *Attrs) error {
	if a.err != nil {
		return &CallError{Op: op, Errno: unix.EINVAL}
	}
	call := &Call{Op: op, Hdr: IbUverbsIoctlHdr{
		Length: uint16(SizeofIoctlHdr + SizeofAttr*a.n), ObjectID: object, MethodID: method,
		NumAttrs: uint16(a.n), DriverID: c.driverID}}
	call.Attrs = append([]IbUverbsAttr(nil), a.attrs[:a.n]...)
	call.Data = make([][]byte, a.n)
	for i := 0; i < a.n; i++ {
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
