package main

import (
	"encoding/binary"
	"errors"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

// call is one RDMA_VERBS_IOCTL as ib_uverbs_ioctl receives it: the header
// and its attributes, copied from the caller (the shim sends them, with
// the buffer of each attribute over 8 bytes). What the bridge writes goes
// back in the result: the attributes (flags, new handles), the buffers it
// changed and the fds it made (passes).
type call struct {
	hdr   *uverbsabi.IbUverbsIoctlHdr
	attrs []uverbsabi.IbUverbsAttr
	// bufs are the attributes' buffers by index: the caller's bytes for
	// one over 8 bytes; for a shorter one, once outBuf asks for it, a
	// buffer of its length (an output: its data is the caller's pointer).
	bufs [][]byte
	// orig are the caller's bytes of bufs, to find what changed.
	orig [][]byte
	// small are the short attributes outBuf made a buffer for: always
	// sent back.
	small map[int]bool
	// passes are the fds the result hands over.
	passes []pass
}

// A pass is an fd the call made for the caller: the shim receives it
// (SCM_RIGHTS), writes its number where the pass says (the attribute's
// data, or 4 bytes at off in its buffer) and answers with the number
// (FDMAP); install then registers the caller's number.
type pass struct {
	index   int
	inBuf   bool
	off     uint32
	fd      int
	install func(callerFD int)
}

// errMissing is a mandatory attribute that is absent: EINVAL, as
// uverbs_process_attr's checks give.
var errMissing = unix.EINVAL

func (c *call) attr(id uint16) *uverbsabi.IbUverbsAttr {
	if i := c.index(id); i >= 0 {
		return &c.attrs[i]
	}
	return nil
}

func (c *call) index(id uint16) int {
	for i := range c.attrs {
		if c.attrs[i].AttrID == id {
			return i
		}
	}
	return -1
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
		return binary.NativeEndian.AppendUint64(nil, a.Data)[:a.Len]
	}
	return c.bufs[c.index(id)]
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

// outBuf is an output attribute's buffer (nil when absent): what the
// bridge writes there goes back to the caller.
func (c *call) outBuf(id uint16) []byte {
	i := c.index(id)
	if i < 0 {
		return nil
	}
	if c.bufs[i] == nil && c.attrs[i].Len > 0 {
		c.bufs[i] = make([]byte, c.attrs[i].Len)
		c.small[i] = true
	}
	return c.bufs[i]
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
	buf := c.outBuf(id)
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

// setNew returns a new object's handle in its attribute's data.
func (c *call) setNew(id uint16, v uint64) {
	if a := c.attr(id); a != nil {
		a.Data = v
	}
}

// passFD hands the caller fd, made for attribute id: its number goes in
// the attribute's data (inBuf false) or at off in its buffer. install
// runs with the caller's number once the shim has it; fd is the bridge's
// to close after that.
func (c *call) passFD(id uint16, inBuf bool, off uint32, fd int, install func(callerFD int)) {
	i := c.index(id)
	if i < 0 {
		unix.Close(fd)
		return
	}
	if inBuf {
		c.outBuf(id)
	}
	c.passes = append(c.passes, pass{index: i, inBuf: inBuf, off: off, fd: fd, install: install})
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

// parseCall decodes an OP_IOCTL payload: the header, its attributes and
// the buffers of the attributes over 8 bytes, in order.
func parseCall(p []byte) (*call, error) {
	if len(p) < uverbsabi.SizeofIbUverbsIoctlHdr {
		return nil, unix.EINVAL
	}
	hdr := new(uverbsabi.IbUverbsIoctlHdr)
	if _, err := binary.Decode(p, binary.NativeEndian, hdr); err != nil {
		return nil, unix.EINVAL
	}
	n := uverbsabi.SizeofIbUverbsIoctlHdr + int(hdr.NumAttrs)*uverbsabi.SizeofIbUverbsAttr
	if int(hdr.Length) != n || len(p) < n {
		return nil, unix.EINVAL
	}
	c := &call{hdr: hdr, attrs: make([]uverbsabi.IbUverbsAttr, hdr.NumAttrs), small: map[int]bool{}}
	if _, err := binary.Decode(p[uverbsabi.SizeofIbUverbsIoctlHdr:n], binary.NativeEndian, c.attrs); err != nil {
		return nil, unix.EINVAL
	}
	c.bufs = make([][]byte, len(c.attrs))
	c.orig = make([][]byte, len(c.attrs))
	rest := p[n:]
	for i, a := range c.attrs {
		if a.Len <= 8 {
			continue
		}
		if len(rest) < int(a.Len) {
			return nil, unix.EINVAL
		}
		c.bufs[i] = append([]byte(nil), rest[:a.Len]...)
		c.orig[i] = rest[:a.Len]
		rest = rest[a.Len:]
	}
	if len(rest) != 0 {
		return nil, unix.EINVAL
	}
	return c, nil
}

// ioctl runs the call: 0 or an errno.
func (x *context) ioctl(c *call) unix.Errno {
	err := x.dispatch(c)
	var e unix.Errno
	switch {
	case err == nil:
	case errors.As(err, &e):
	default:
		e = unix.EINVAL
	}
	if trace {
		hdr := c.hdr
		name := methodName(hdr.ObjectID, hdr.MethodID)
		if hdr.ObjectID == uverbsabi.UVERBS_OBJECT_DEVICE && hdr.MethodID == uverbsabi.UVERBS_METHOD_INVOKE_WRITE {
			name += "(" + writeName(uint32(c.inU64(uverbsabi.UVERBS_ATTR_WRITE_CMD, 0))) + ")"
		}
		tracef("ioctl %s attrs %d: %v (%v)", name, hdr.NumAttrs, e, err)
	}
	return e
}
