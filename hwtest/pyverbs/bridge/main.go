// Command bridge is built with -buildmode=c-shared into libmlx5bridge.so:
// preloaded (LD_PRELOAD) into a process that uses the unmodified
// libibverbs and libmlx5 (ibv_devinfo, a C program, pyverbs), it is the
// kernel under them, and the software ConnectX of package model is the
// device. shim.c interposes open, close, ioctl, write, mmap, munmap, stat,
// fstat and socket; this half decodes each uverbs ioctl (struct
// ib_uverbs_ioctl_hdr and its attributes, with internal/uverbsabi and
// internal/mlx5abi) and answers it with the model's seam.Device calls, as
// ib_uverbs and mlx5_ib would.
//
// The HCA is model.New(profile) with the profile named by
// MLX5B_PROFILE (cx5, cx6dx, cx7; default cx6dx); each open of
// /dev/infiniband/uverbs0 (one per ibv_open_device) is a context of its
// own (Device.Open). MLX5B_TRACE=1 prints each command and its result on
// stderr.
package main

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/model"
	"golang.org/x/sys/unix"
)

func main() {}

// The bridge's state: one HCA, the contexts by their command fd, and the
// event fds the pumps write to by their read end.
var (
	mu      sync.Mutex
	hca     *model.Device
	hcaErr  error
	ctxs    = map[int]*context{}
	evfds   = map[int]*pump{}
	mapping = map[uintptr]*mapped{}
	trace   = os.Getenv("MLX5B_TRACE") != ""
)

// profileName is the model profile the bridge's HCA has.
func profileName() string {
	if p := os.Getenv("MLX5B_PROFILE"); p != "" {
		return p
	}
	return "cx6dx"
}

// theHCA makes the HCA on first use; its first context is the bridge's
// own (sysfs and device facts), never a caller's.
func theHCA() (*model.Device, error) {
	if hca == nil && hcaErr == nil {
		hca, hcaErr = model.New(profileName())
	}
	return hca, hcaErr
}

// context is one ibv_open_device: a model context and what the kernel
// keeps for it.
type context struct {
	fd int
	d  *model.Device
	// uars are the UARs allocated, by mmap offset, for the mmap that follows.
	uars map[uint64]seam.UAR
	// comps are the completion channels by the fd the caller reads.
	comps map[int]seam.CompChannel
	// asyncFDs are the DEVX async command fds by the fd the caller reads.
	asyncFDs map[int]*asyncCmd
	// users are the user handles of the CQs, QPs and SRQs by handle; the
	// destroy responses report how many completion and async events the
	// bridge delivered for each (compEvents, asyncEvents, by user
	// handle), and libibverbs waits until it has acknowledged as many.
	users                   map[seam.Handle]uint64
	compEvents, asyncEvents map[uint64]uint32
}

// mapped is a mapping of a command fd (a UAR page or the clock page).
type mapped struct {
	c     *context
	page  []byte
	clock bool
}

func tracef(format string, args ...any) {
	if trace {
		fmt.Fprintf(os.Stderr, "mlx5b: "+format+"\n", args...)
	}
}

// errnoOf is the errno an error wraps (EINVAL if none): what the ioctl
// returns.
func errnoOf(err error) C.int {
	if err == nil {
		return 0
	}
	var e unix.Errno
	if asErrno(err, &e) {
		return C.int(e)
	}
	return C.int(unix.EINVAL)
}

//export mlx5bOpen
func mlx5bOpen(fd C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	h, err := theHCA()
	if err != nil {
		tracef("open: %v", err)
		return C.int(unix.ENODEV)
	}
	d, err := h.Open()
	if err != nil {
		tracef("open: %v", err)
		return errnoOf(err)
	}
	ctxs[int(fd)] = &context{fd: int(fd), d: d, uars: map[uint64]seam.UAR{},
		comps: map[int]seam.CompChannel{}, asyncFDs: map[int]*asyncCmd{},
		users: map[seam.Handle]uint64{}, compEvents: map[uint64]uint32{}, asyncEvents: map[uint64]uint32{}}
	tracef("open fd %d", fd)
	return 0
}

//export mlx5bClose
func mlx5bClose(fd C.int, kind C.int) {
	mu.Lock()
	defer mu.Unlock()
	switch kind {
	case C.BRIDGE_FD_CMD:
		c := ctxs[int(fd)]
		if c == nil {
			return
		}
		delete(ctxs, int(fd))
		for f, p := range evfds {
			if p.c == c {
				p.stop()
				delete(evfds, f)
			}
		}
		if err := c.d.Close(); err != nil {
			tracef("close context: %v", err)
		}
	case C.BRIDGE_FD_EVENT:
		if p := evfds[int(fd)]; p != nil {
			p.stop()
			delete(evfds, int(fd))
		}
	}
}

//export mlx5bIoctl
func mlx5bIoctl(fd C.int, req C.ulong, arg unsafe.Pointer) C.int {
	mu.Lock()
	c := ctxs[int(fd)]
	mu.Unlock()
	if c == nil {
		return C.int(unix.EBADF)
	}
	if uint64(req) != rdmaVerbsIoctl || arg == nil {
		return C.int(unix.ENOTTY)
	}
	return C.int(c.ioctl(arg))
}

//export mlx5bMmap
func mlx5bMmap(fd C.int, off C.longlong, length C.size_t, errp *C.int) unsafe.Pointer {
	mu.Lock()
	defer mu.Unlock()
	c := ctxs[int(fd)]
	if c == nil {
		*errp = C.int(unix.EBADF)
		return nil
	}
	page, clock, err := c.mmap(uint64(off), uint64(length))
	if err != nil {
		tracef("mmap off %#x len %d: %v", uint64(off), uint64(length), err)
		*errp = errnoOf(err)
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(page))
	mapping[uintptr(p)] = &mapped{c: c, page: page, clock: clock}
	tracef("mmap off %#x len %d -> %p", uint64(off), uint64(length), p)
	return p
}

//export mlx5bMunmap
func mlx5bMunmap(addr unsafe.Pointer, length C.size_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	m := mapping[uintptr(addr)]
	if m == nil {
		return C.int(unix.EINVAL)
	}
	delete(mapping, uintptr(addr))
	var err error
	if m.clock {
		err = m.c.d.UnmapClockInfo(m.page)
	} else {
		err = m.c.d.UnmapUAR(m.page)
	}
	return errnoOf(err)
}

//export mlx5bRead
func mlx5bRead(fd C.int, buf unsafe.Pointer, n C.long) {
	mu.Lock()
	defer mu.Unlock()
	if p := evfds[int(fd)]; p != nil && n > 0 {
		p.read(unsafe.Slice((*byte)(buf), int(n)))
	}
}

//export mlx5bSysfs
func mlx5bSysfs(dir *C.char) {
	mu.Lock()
	defer mu.Unlock()
	h, err := theHCA()
	if err != nil {
		tracef("sysfs: %v", err)
		return
	}
	if err := writeSysfs(C.GoString(dir), h); err != nil {
		tracef("sysfs: %v", err)
	}
}

// markFD tells the shim that fd is the bridge's: its close reaches
// mlx5bClose.
func markFD(fd int) { C.bridge_mark_fd(C.int(fd), C.BRIDGE_FD_EVENT) }
