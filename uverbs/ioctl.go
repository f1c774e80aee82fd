package uverbs

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// maxAttrs bounds the attributes of one call; the kernel's own methods use
// far fewer.
const maxAttrs = 16

// Attrs is the attribute list of one RDMA_VERBS_IOCTL call. Byte slices
// given to it are pinned for the duration of the call; nothing is copied.
// An Attrs is used for one call and must not be shared between goroutines.
type Attrs struct {
	n     int
	attrs [maxAttrs]uverbsabi.IbUverbsAttr
	pins  [maxAttrs]unsafe.Pointer
	err   error
}

func (a *Attrs) add(at uverbsabi.IbUverbsAttr, pin unsafe.Pointer) int {
	if a.n == maxAttrs {
		a.err = fmt.Errorf("uverbs: more than %d attributes", maxAttrs)
		return a.n - 1
	}
	i := a.n
	a.attrs[i] = at
	a.pins[i] = pin
	a.n++
	return i
}

func ptrOf(b []byte) (uint64, unsafe.Pointer) {
	if len(b) == 0 {
		return 0, nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	return uint64(uintptr(p)), p
}

// In adds a mandatory input attribute. Data of 8 bytes or less travels
// inline in the attribute, as the kernel requires; longer data by pointer.
func (a *Attrs) In(id uint16, b []byte) {
	if len(b) > 0xffff {
		a.err = fmt.Errorf("uverbs: attribute %#x: %d bytes is too long", id, len(b))
		return
	}
	at := uverbsabi.IbUverbsAttr{AttrID: id, Len: uint16(len(b)), Flags: uverbsabi.UVERBS_ATTR_F_MANDATORY}
	if len(b) <= 8 {
		var v [8]byte
		copy(v[:], b)
		at.Data = *(*uint64)(unsafe.Pointer(&v))
		a.add(at, nil)
		return
	}
	var p unsafe.Pointer
	at.Data, p = ptrOf(b)
	a.add(at, p)
}

// InUint64 adds a mandatory 8-byte inline input (rdma-core's
// fill_attr_const_in and fill_attr_in_uint64 send every small constant as 8
// bytes, and so do we).
func (a *Attrs) InUint64(id uint16, v uint64) {
	a.add(uverbsabi.IbUverbsAttr{AttrID: id, Len: 8, Flags: uverbsabi.UVERBS_ATTR_F_MANDATORY, Data: v}, nil)
}

// Out adds an output attribute the kernel fills. Mandatory outputs make the
// call fail if the kernel cannot write them.
func (a *Attrs) Out(id uint16, b []byte) {
	if len(b) > 0xffff {
		a.err = fmt.Errorf("uverbs: attribute %#x: %d bytes is too long", id, len(b))
		return
	}
	at := uverbsabi.IbUverbsAttr{AttrID: id, Len: uint16(len(b)), Flags: uverbsabi.UVERBS_ATTR_F_MANDATORY}
	var p unsafe.Pointer
	at.Data, p = ptrOf(b)
	a.add(at, p)
}

// IDR adds an existing object handle (an IDR attribute: in, destroy or
// access).
func (a *Attrs) IDR(id uint16, handle uint32) {
	a.add(uverbsabi.IbUverbsAttr{AttrID: id, Flags: uverbsabi.UVERBS_ATTR_F_MANDATORY, Data: uint64(handle)}, nil)
}

// NewIDR adds an attribute for an object the call creates; after the call,
// Handle(i) returns its handle. It returns the attribute index.
func (a *Attrs) NewIDR(id uint16) int {
	return a.add(uverbsabi.IbUverbsAttr{AttrID: id, Flags: uverbsabi.UVERBS_ATTR_F_MANDATORY}, nil)
}

// FD adds an existing file descriptor attribute.
func (a *Attrs) FD(id uint16, fd int) {
	a.add(uverbsabi.IbUverbsAttr{AttrID: id, Flags: uverbsabi.UVERBS_ATTR_F_MANDATORY, Data: uint64(int64(fd))}, nil)
}

// NewFD adds an attribute for a file descriptor the call creates; after the
// call Handle(i) returns it. It returns the attribute index.
func (a *Attrs) NewFD(id uint16) int { return a.NewIDR(id) }

// Enum adds an enum attribute selecting element elem, with optional data.
func (a *Attrs) Enum(id uint16, elem uint8, b []byte) {
	a.In(id, b)
	if a.n > 0 {
		a.attrs[a.n-1].AttrData = uint16(elem)
	}
}

// Handle returns what the kernel wrote into attribute i's data (a new
// object handle or file descriptor).
func (a *Attrs) Handle(i int) uint64 { return a.attrs[i].Data }

// Valid reports whether the kernel marked output attribute i as written.
func (a *Attrs) Valid(i int) bool { return a.attrs[i].Flags&uverbsabi.UVERBS_ATTR_F_VALID_OUTPUT != 0 }

// Len is the number of attributes.
func (a *Attrs) Len() int { return a.n }

// Attr returns attribute i as it will be (or was) sent.
func (a *Attrs) Attr(i int) Attr { return attrOf(&a.attrs[i]) }

// Attr is one attribute of an RDMA_VERBS_IOCTL call as it is sent (struct
// ib_uverbs_attr): its id, the length of its data, its flags
// (AttrMandatory, AttrValidOutput), the enum element of an enum attribute
// (AttrData's low byte) and its data, inline (8 bytes or less, a handle, a
// file descriptor) or a pointer to it.
type Attr struct {
	AttrID, Len, Flags, AttrData uint16
	Data                         uint64
}

// Attribute flags (struct ib_uverbs_attr.flags): the kernel fails a call
// whose mandatory attribute it does not know, and marks the outputs it
// wrote valid.
const (
	AttrMandatory   = 1 << 0 // UVERBS_ATTR_F_MANDATORY
	AttrValidOutput = 1 << 1 // UVERBS_ATTR_F_VALID_OUTPUT
)

func attrOf(a *uverbsabi.IbUverbsAttr) Attr {
	return Attr{AttrID: a.AttrID, Len: a.Len, Flags: a.Flags, AttrData: a.AttrData, Data: a.Data}
}

// CallError is a failed RDMA_VERBS_IOCTL. It unwraps to the errno.
type CallError struct {
	Op    string // e.g. "alloc pd (INVOKE_WRITE ALLOC_PD)"
	Errno unix.Errno
}

func (e *CallError) Error() string { return fmt.Sprintf("uverbs: %s: %v", e.Op, e.Errno) }
func (e *CallError) Unwrap() error { return e.Errno }

// ioctlHook, when set, replaces the system call (encoding tests record what
// would be sent); data[i] is the memory attribute i points to, if any.
var ioctlHook func(fd int, hdr *uverbsabi.IbUverbsIoctlHdr, attrs []uverbsabi.IbUverbsAttr, data []unsafe.Pointer) unix.Errno

// invoke issues one RDMA_VERBS_IOCTL on fd. op names the call in errors.
func invoke(fd int, op string, object, method uint16, driverID DriverID, a *Attrs) error {
	if a.err != nil {
		return fmt.Errorf("uverbs: %s: %w", op, a.err)
	}
	// The header and the attribute array must be contiguous.
	var buf struct {
		hdr   uverbsabi.IbUverbsIoctlHdr
		attrs [maxAttrs]uverbsabi.IbUverbsAttr
	}
	buf.hdr = uverbsabi.IbUverbsIoctlHdr{
		Length:   uint16(uverbsabi.SizeofIbUverbsIoctlHdr + uverbsabi.SizeofIbUverbsAttr*a.n),
		ObjectID: object,
		MethodID: method,
		NumAttrs: uint16(a.n),
		DriverID: uint32(driverID),
	}
	copy(buf.attrs[:], a.attrs[:a.n])
	var errno unix.Errno
	if ioctlHook != nil {
		// Copies, so that only tests pay for handing memory to a func
		// value (which makes it escape to the heap).
		h, pins := buf, a.pins
		errno = ioctlHook(fd, &h.hdr, h.attrs[:a.n], pins[:a.n])
		buf = h
	} else {
		var pin runtime.Pinner
		for i := 0; i < a.n; i++ {
			if a.pins[i] != nil {
				pin.Pin(a.pins[i])
			}
		}
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uverbsabi.RDMA_VERBS_IOCTL, uintptr(unsafe.Pointer(&buf)))
		pin.Unpin()
	}
	copy(a.attrs[:a.n], buf.attrs[:a.n])
	if errno != 0 {
		return &CallError{Op: op, Errno: errno}
	}
	return nil
}

// InUint32 adds a mandatory 4-byte inline input.
func (a *Attrs) InUint32(id uint16, v uint32) {
	a.add(uverbsabi.IbUverbsAttr{AttrID: id, Len: 4, Flags: uverbsabi.UVERBS_ATTR_F_MANDATORY, Data: uint64(v)}, nil)
}

// Optional clears the MANDATORY flag of the attribute added last: the
// kernel ignores it if it does not know it.
func (a *Attrs) Optional() {
	if a.n > 0 {
		a.attrs[a.n-1].Flags &^= uverbsabi.UVERBS_ATTR_F_MANDATORY
	}
}
