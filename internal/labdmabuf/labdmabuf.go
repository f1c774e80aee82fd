// Package labdmabuf makes dma-bufs that a real kernel hands over, for the
// lab tests: udmabuf (/dev/udmabuf, UDMABUF_CREATE) over a memfd sealed
// against shrinking. Debian's 6.12 and 7.x kernels have udmabuf built in
// (CONFIG_UDMABUF=y); 6.1's has none.
package labdmabuf

import (
	"fmt"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Create is struct udmabuf_create (<linux/udmabuf.h>). The kernels' BTF
// does not have it; the lab checks it on the kernel itself (uverbs'
// TestLabUdmabufLayout): the ioctl number carries its size, and a dma-buf
// made at an offset has the size asked for and the memfd's bytes from
// that offset.
type Create struct {
	Memfd, Flags uint32
	Offset, Size uint64
}

// createIoctl is UDMABUF_CREATE, _IOW('u', 0x42, struct udmabuf_create).
const createIoctl = 1<<30 | uint32(unsafe.Sizeof(Create{}))<<16 | 'u'<<8 | 0x42

// flagsCloexec is UDMABUF_FLAGS_CLOEXEC.
const flagsCloexec = 1

// SealedMemfd is a memfd of size bytes sealed against shrinking (as
// udmabuf requires), closed when t ends.
func SealedMemfd(t testing.TB, size int) int {
	t.Helper()
	fd, err := unix.MemfdCreate("mlx5go-lab-udmabuf", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		t.Fatal(err)
	}
	return fd
}

// Available reports whether the kernel has udmabuf, and why not.
func Available() (bool, string) {
	fd, err := unix.Open("/dev/udmabuf", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		var un unix.Utsname
		unix.Uname(&un)
		return false, fmt.Sprintf("kernel %s has no udmabuf: open /dev/udmabuf: %v", unix.ByteSliceToString(un.Release[:]), err)
	}
	unix.Close(fd)
	return true, ""
}

// New makes a dma-buf of size bytes from a new sealed memfd and returns it
// and the memfd, both closed when t ends. It skips t, with the reason,
// where the kernel has no udmabuf.
func New(t testing.TB, size int) (dmabuf, memfd int) {
	t.Helper()
	if ok, why := Available(); !ok {
		t.Skip(why)
	}
	memfd = SealedMemfd(t, size)
	return NewAt(t, memfd, 0, size), memfd
}

// NewAt makes a dma-buf of the size bytes of memfd from offset (both
// page-aligned), closed when t ends.
func NewAt(t testing.TB, memfd, offset, size int) int {
	t.Helper()
	dev, err := unix.Open("/dev/udmabuf", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dev)
	arg := Create{Memfd: uint32(memfd), Flags: flagsCloexec, Offset: uint64(offset), Size: uint64(size)}
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(dev), uintptr(createIoctl), uintptr(unsafe.Pointer(&arg)))
	if errno != 0 {
		t.Fatalf("UDMABUF_CREATE of %d bytes at %d: %v", size, offset, errno)
	}
	dmabuf := int(r)
	t.Cleanup(func() { unix.Close(dmabuf) })
	return dmabuf
}
