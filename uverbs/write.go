package uverbs

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// The legacy write() ABI. Every call in this package goes through
// RDMA_VERBS_IOCTL first; write() is used only where the kernel has nothing
// else:
//
//   - ENOTTY from the ioctl: the kernel has no RDMA_VERBS_IOCTL at all. The
//     context remembers it and sends every later command by write().
//   - EPROTONOSUPPORT: the kernel has the ioctl but not this object or
//     method (or not UVERBS_METHOD_INVOKE_WRITE). That one call is retried
//     by write().
//
// Any other errno is the kernel's answer and is returned as it is.

// isFallback reports whether err means the kernel has no ioctl path for a
// call, and remembers a missing ioctl on the context.
func (c *Context) isFallback(err error) bool {
	// Calls return a *CallError as it is, never wrapped: a plain type
	// assertion keeps the success path free of allocation.
	ce, ok := err.(*CallError)
	if !ok {
		return false
	}
	switch ce.Errno {
	case unix.ENOTTY:
		c.noIoctl.Store(true)
		return true
	case unix.EPROTONOSUPPORT:
		return true
	}
	return false
}

// useWrite reports whether calls go straight to write().
func (c *Context) useWrite() bool { return c.forceWrite || c.noIoctl.Load() }

// ioctlOrWrite runs viaIoctl unless the context uses write(), and falls back
// to viaWrite when the kernel has no ioctl path for the call.
func (c *Context) ioctlOrWrite(viaIoctl, viaWrite func() error) error {
	if !c.useWrite() {
		err := viaIoctl()
		if !c.isFallback(err) {
			return err
		}
	}
	return viaWrite()
}

// write sends a command by write(2). cmd may carry
// IB_USER_VERBS_CMD_FLAG_EXTENDED. For a legacy command, coreIn is the
// whole command struct; if the command has a response, coreIn starts with
// the 8-byte response pointer, which write fills in. For an extended
// command coreIn has no response field. coreOut and drvOut receive the
// kernel's response and the provider's.
func (c *Context) write(op string, cmd uint32, coreIn, coreOut, drvIn, drvOut []byte) error {
	c.fdMu.RLock()
	defer c.fdMu.RUnlock()
	if c.fd < 0 {
		return fmt.Errorf("uverbs: %s: %w", op, ErrClosed)
	}
	op += " (write)"
	ext := cmd&uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED != 0
	unit := 4
	if ext {
		unit = 8
	}
	for _, b := range [][]byte{coreIn, coreOut, drvIn, drvOut} {
		if len(b)%unit != 0 {
			return fmt.Errorf("uverbs: %s: write() lengths must be multiples of %d bytes, have %d", op, unit, len(b))
		}
	}
	resp := make([]byte, len(coreOut)+len(drvOut))
	var respAddr uint64
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(resp) > 0 {
		pin.Pin(&resp[0])
		respAddr = uint64(uintptr(unsafe.Pointer(&resp[0])))
	}
	var buf []byte
	if ext {
		const hdrs = int(unsafe.Sizeof(uverbsabi.IbUverbsCmdHdr{}) + unsafe.Sizeof(uverbsabi.IbUverbsExCmdHdr{}))
		buf = make([]byte, hdrs, hdrs+len(coreIn)+len(drvIn))
		hdr := (*uverbsabi.IbUverbsCmdHdr)(unsafe.Pointer(&buf[0]))
		ex := (*uverbsabi.IbUverbsExCmdHdr)(unsafe.Pointer(&buf[unsafe.Sizeof(uverbsabi.IbUverbsCmdHdr{})]))
		*hdr = uverbsabi.IbUverbsCmdHdr{Command: cmd, InWords: uint16(len(coreIn) / 8), OutWords: uint16(len(coreOut) / 8)}
		*ex = uverbsabi.IbUverbsExCmdHdr{Response: respAddr, ProviderInWords: uint16(len(drvIn) / 8), ProviderOutWords: uint16(len(drvOut) / 8)}
		buf = append(append(buf, coreIn...), drvIn...)
	} else {
		const hdrLen = int(unsafe.Sizeof(uverbsabi.IbUverbsCmdHdr{}))
		buf = make([]byte, hdrLen, hdrLen+len(coreIn)+len(drvIn))
		buf = append(append(buf, coreIn...), drvIn...)
		if len(resp) > 0 {
			if len(coreIn) < 8 {
				return fmt.Errorf("uverbs: %s: command has no response field", op)
			}
			*(*uint64)(unsafe.Pointer(&buf[hdrLen])) = respAddr
		}
		*(*uverbsabi.IbUverbsCmdHdr)(unsafe.Pointer(&buf[0])) = uverbsabi.IbUverbsCmdHdr{Command: cmd, InWords: uint16(len(buf) / 4), OutWords: uint16(len(resp) / 4)}
	}
	if len(buf) > 0xffff*4 {
		return fmt.Errorf("uverbs: %s: command of %d bytes is too long", op, len(buf))
	}
	var errno unix.Errno
	if writeHook != nil {
		errno = writeHook(c.fd, buf, resp)
	} else {
		n, _, e := unix.Syscall(unix.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		errno = e
		if errno == 0 && int(n) != len(buf) {
			return fmt.Errorf("uverbs: %s: short write (%d of %d bytes)", op, n, len(buf))
		}
	}
	if errno != 0 {
		return &CallError{Op: op, Errno: errno}
	}
	copy(coreOut, resp)
	copy(drvOut, resp[len(coreOut):])
	return nil
}

// writeHook, when set, replaces write(2) (encoding tests).
var writeHook func(fd int, buf, resp []byte) unix.Errno
