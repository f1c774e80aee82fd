package main

import (
	"encoding/binary"
	"errors"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

const rdmaVerbsIoctl = uverbsabi.RDMA_VERBS_IOCTL

// call is one RDMA_VERBS_IOCTL as ib_uverbs_ioctl receives it: the header
// and its attributes, in place in the caller's memory (outputs and new
// handles are written back there).
type call struct {
	hdr   *uverbsabi.IbUverbsIoctlHdr
	attrs []uverbsabi.IbUverbsAttr
}

// errMissing is a mandatory attribute that is absent: EINVAL, as
// uverbs_process_attr's checks give.
var errMissing = unix.EINVAL

func asErrno(err error, e *unix.Errno) bool { return errors.As(err, e) }

func (c *call) attr(id uint16) *uverbsabi.IbUverbsAttr {
	for i := range c.attrs {
		if c.attrs[i].AttrID == id {
			return &c.attrs[i]
		}
	}
	return nil
}

func (c *call) has(id uint16) bool { return c.attr(id) != nil }

// userBytes views n bytes of the caller's memory at addr.
func userBytes(addr uint64, n int) []byte {
	if n == 0 || addr == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(addr))), n)
}

// in returns an input attribute's bytes: inline in data up to 8 bytes
// (uverbs_attr_ptr_is_inline), else at the pointer data holds.
func (c *call) in(id uint16) []byte {
	a := c.attr(id)
	if a == nil {
		return nil
	}
	if a.Len <= 8 {
		return unsafe.Slice((*byte)(unsafe.Pointer(&a.Data)), a.Len)
	}
	return userBytes(a.Data, int(a.Len))
}

// inU64 reads an integer input attribute (u32 or u64, little end first),
// or def when it is absent.
func (c *call) inU64(id uint16, def uint64) uint64 {
	b := c.in(id)
	if b == nil && !c.has(id) {
		return def
	}
	var v [8]byte
	copy(v[:], b)
	return binary.NativeEndian.Uint64(v[:])
}

// outBuf is an output attribute's buffer (nil when absent).
func (c *call) outBuf(id uint16) []byte {
	a := c.attr(id)
	if a == nil {
		return nil
	}
	return userBytes(a.Data, int(a.Len))
}

// out copies b into an output attribute as uverbs_copy_to does (at most
// the attribute's length; the rest of the buffer zeroed, as the
// zero-filling copy does) and marks it valid. An absent attribute is no
// error: optional outputs the caller did not ask for.
func (c *call) out(id uint16, b []byte) {
	a := c.attr(id)
	if a == nil {
		return
	}
	buf := userBytes(a.Data, int(a.Len))
	clear(buf)
	copy(buf, b)
	a.Flags |= uverbsabi.UVERBS_ATTR_F_VALID_OUTPUT
}

func (c *call) outU64(id uint16, v uint64) {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	c.out(id, b[:])
}

func (c *call) outU32(id uint16, v uint32) {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	c.out(id, b[:])
}

// outStruct writes a uverbsabi or mlx5abi struct to an output attribute.
func (c *call) outStruct(id uint16, v any) { c.out(id, encode(v)) }

// setNew returns a new object's handle or fd in its attribute's data.
func (c *call) setNew(id uint16, v uint64) {
	if a := c.attr(id); a != nil {
		a.Data = v
	}
}

// idr is the handle an IDR attribute names.
func (c *call) idr(id uint16) (uint64, bool) {
	a := c.attr(id)
	if a == nil {
		return 0, false
	}
	return a.Data, true
}

func encode(v any) []byte {
	b, err := binary.Append(nil, binary.NativeEndian, v)
	if err != nil {
		panic("bridge: abi struct: " + err.Error())
	}
	return b
}

// decode reads a struct from in as the kernel copies it (min of both
// lengths; what in lacks is zero).
func decode(in []byte, v any) {
	b := make([]byte, binary.Size(v))
	copy(b, in)
	if _, err := binary.Decode(b, binary.NativeEndian, v); err != nil {
		panic("bridge: abi struct: " + err.Error())
	}
}

// ioctl decodes the header at arg and runs the method: 0 or an errno.
func (x *context) ioctl(arg unsafe.Pointer) unix.Errno {
	hdr := (*uverbsabi.IbUverbsIoctlHdr)(arg)
	if int(hdr.Length) != uverbsabi.SizeofIbUverbsIoctlHdr+int(hdr.NumAttrs)*uverbsabi.SizeofIbUverbsAttr {
		return unix.EINVAL
	}
	c := &call{hdr: hdr}
	if hdr.NumAttrs > 0 {
		c.attrs = unsafe.Slice((*uverbsabi.IbUverbsAttr)(unsafe.Add(arg, uverbsabi.SizeofIbUverbsIoctlHdr)), hdr.NumAttrs)
	}
	err := x.dispatch(c)
	var e unix.Errno
	switch {
	case err == nil:
	case errors.As(err, &e):
	default:
		e = unix.EINVAL
	}
	if trace {
		name := methodName(hdr.ObjectID, hdr.MethodID)
		if hdr.ObjectID == uverbsabi.UVERBS_OBJECT_DEVICE && hdr.MethodID == uverbsabi.UVERBS_METHOD_INVOKE_WRITE {
			name += "(" + writeName(uint32(c.inU64(uverbsabi.UVERBS_ATTR_WRITE_CMD, 0))) + ")"
		}
		tracef("ioctl %s attrs %d: %v (%v)", name, hdr.NumAttrs, e, err)
	}
	return e
}
