package main

import (
	"encoding/binary"
	"fmt"
	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"sort"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mirrors. The device reads and writes the caller's memory in place (the
// model views queue buffers, doorbell records and registered memory at
// their addresses: model/usermem.go), and the caller is another process.
// So before the bridge gives the model an address range of the caller's,
// it asks the shim for it (OP_MIRROR): the shim moves the pages under the
// range, in place, into memfds, and passes them; the bridge maps each at
// the same address. From then on both processes see the same pages, as
// the device sees pinned user memory. Pages already mirrored are not sent
// again; holes and pages without read permission are left alone, and the
// model's own checks (ib_umem_get's) answer for them.

const pageSize = 4096

// mirrors are the ranges this process maps for the caller, sorted and
// disjoint: one set for the process, whichever context asked (a context
// closes, its pages stay mapped, and the next one may find them again).
type mirrors struct {
	mu sync.Mutex
	r  [][2]uint64
}

var mirrored mirrors

// add records [lo, hi), merging neighbours.
func (m *mirrors) add(lo, hi uint64) {
	m.r = append(m.r, [2]uint64{lo, hi})
	sort.Slice(m.r, func(i, j int) bool { return m.r[i][0] < m.r[j][0] })
	out := m.r[:0]
	for _, r := range m.r {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	m.r = out
}

// mirror makes [addr, addr+n) of the caller's memory (what of it is
// mapped) this process's too, at the same addresses: the shim's end of x
// moves the pages.
func (x link) mirror(addr, n uint64) error {
	if n == 0 || addr+n < addr {
		return nil
	}
	var req [24]byte
	binary.NativeEndian.PutUint32(req[0:], opMirror)
	binary.NativeEndian.PutUint64(req[8:], addr)
	binary.NativeEndian.PutUint64(req[16:], n)
	b, fds, err := x.exchange(req[:], nil)
	if err != nil {
		return err
	}
	defer closeFDs(fds)
	if len(b) < 16 || binary.NativeEndian.Uint32(b) != opMirrored {
		return fmt.Errorf("mirror: malformed answer: %w", unix.EPROTO)
	}
	if e := unix.Errno(binary.NativeEndian.Uint32(b[4:])); e != 0 {
		return fmt.Errorf("mirror [%#x, +%#x): the caller: %w", addr, n, e)
	}
	segs := int(binary.NativeEndian.Uint32(b[8:]))
	if segs != len(fds) || len(b) < 16+24*segs {
		return fmt.Errorf("mirror: %d segments, %d fds: %w", segs, len(fds), unix.EPROTO)
	}
	for i := range segs {
		s := b[16+24*i:]
		a, l, prot := binary.NativeEndian.Uint64(s), binary.NativeEndian.Uint64(s[8:]), int(binary.NativeEndian.Uint64(s[16:]))
		if err := mapAt(a, l, prot, fds[i]); err != nil {
			return err
		}
		tracef("mirror [%#x, %#x)", a, a+l)
	}
	return nil
}

// mapAt maps fd at [a, a+l): over older mirrors (pages the caller freed
// and reused) and free address space, never over a mapping of this
// process's own. The parts no mirror covers are first reserved with
// MAP_FIXED_NOREPLACE, which fails (EEXIST) where this process maps
// anything.
func mapAt(a, l uint64, prot, fd int) error {
	if a%pageSize != 0 || l%pageSize != 0 || l == 0 || a+l < a {
		return fmt.Errorf("mirror [%#x, +%#x): not whole pages: %w", a, l, unix.EPROTO)
	}
	mirrored.mu.Lock()
	defer mirrored.mu.Unlock()
	var reserved [][2]uint64
	for _, g := range mirrored.gaps(a, a+l) {
		if err := reserve(g[0], g[1]); err != nil {
			for _, r := range reserved {
				unix.Syscall(unix.SYS_MUNMAP, uintptr(r[0]), uintptr(r[1]-r[0]), 0)
			}
			return fmt.Errorf("mirror [%#x, +%#x): %w", a, l, err)
		}
		reserved = append(reserved, g)
	}
	if _, _, e := unix.Syscall6(unix.SYS_MMAP, uintptr(a), uintptr(l), uintptr(prot),
		unix.MAP_SHARED|unix.MAP_FIXED, uintptr(fd), 0); e != 0 {
		for _, r := range reserved {
			unix.Syscall(unix.SYS_MUNMAP, uintptr(r[0]), uintptr(r[1]-r[0]), 0)
		}
		return fmt.Errorf("mirror [%#x, +%#x): %w", a, l, e)
	}
	mirrored.add(a, a+l)
	return nil
}

// reserve maps [lo, hi) PROT_NONE where this process maps nothing.
func reserve(lo, hi uint64) error {
	p, _, e := unix.Syscall6(unix.SYS_MMAP, uintptr(lo), uintptr(hi-lo), unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE, ^uintptr(0), 0)
	if e != 0 {
		return fmt.Errorf("[%#x, %#x) is this process's own: %w", lo, hi, e)
	}
	if uint64(p) != lo {
		// A kernel before 4.17 takes MAP_FIXED_NOREPLACE for a hint.
		unix.Syscall(unix.SYS_MUNMAP, p, uintptr(hi-lo), 0)
		return fmt.Errorf("[%#x, %#x) is this process's own: %w", lo, hi, unix.EEXIST)
	}
	return nil
}

// gaps are the parts of [lo, hi) no mirror covers.
func (m *mirrors) gaps(lo, hi uint64) [][2]uint64 {
	var g [][2]uint64
	for _, r := range m.r {
		if r[1] <= lo {
			continue
		}
		if r[0] >= hi {
			break
		}
		if r[0] > lo {
			g = append(g, [2]uint64{lo, r[0]})
		}
		lo = r[1]
		if lo >= hi {
			return g
		}
	}
	if lo < hi {
		g = append(g, [2]uint64{lo, hi})
	}
	return g
}

// mirrorQueue mirrors a queue buffer or doorbell record the driver data
// names (nothing for address 0: no such buffer).
func (x *context) mirrorQueue(addr, n uint64) error {
	if addr == 0 {
		return nil
	}
	return x.mirror(addr, n)
}

// sharePage makes page (one the model mmap'd, page-aligned) a memfd's in
// place, and returns the memfd, for the caller to map the same page.
func sharePage(page []byte) (int, error) {
	fd, err := unix.MemfdCreate("mlx5b-page", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	if _, err := unix.Pwrite(fd, page, 0); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("memfd: %w", err)
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(page)))
	if _, _, e := unix.Syscall6(unix.SYS_MMAP, a, uintptr(len(page)), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_SHARED|unix.MAP_FIXED, uintptr(fd), 0); e != 0 {
		unix.Close(fd)
		return -1, fmt.Errorf("mmap memfd: %w", e)
	}
	return fd, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// The bounds below are of the queue memory mlx5's driver data names, for
// mirroring it: at least what mlx5_ib pins (the model checks the exact
// range itself, and a bound too short fails there, EFAULT), capped so
// that a wild count asks for no more than a bound's worth.
const (
	dbrBytes   = 64      // a doorbell record, and what follows it in its page
	maxQueueSz = 1 << 32 // the most a queue buffer mirror asks for
)

func pow2Above(n uint64) uint64 {
	p := uint64(1)
	for p <= n && p < maxQueueSz {
		p <<= 1
	}
	return p
}

func capQueue(n uint64) uint64 { return min(n, maxQueueSz) }

// mirrorCQ mirrors a CQ's ring (cqe entries, rounded up as mlx5_ib
// rounds them) and doorbell record.
func (x *context) mirrorCQ(cqe uint64, bufAddr, dbAddr uint64, cqeSize uint32) error {
	if cqeSize != 64 {
		cqeSize = 128
	}
	if err := x.mirrorQueue(bufAddr, capQueue(pow2Above(cqe)*uint64(cqeSize))); err != nil {
		return err
	}
	return x.mirrorQueue(dbAddr, dbrBytes)
}

// mirrorQP mirrors a QP's buffer (the receive queue, then the send queue
// of 64-byte basic blocks) and doorbell record.
func (x *context) mirrorQP(drv []byte) error {
	var q mlx5abi.Mlx5IbCreateQp
	decode(drv, &q)
	rq := uint64(0)
	if q.RqWqeShift < 32 {
		rq = uint64(q.RqWqeCount) << q.RqWqeShift
	}
	if err := x.mirrorQueue(q.BufAddr, capQueue(rq+uint64(q.SqWqeCount)<<6)); err != nil {
		return err
	}
	return x.mirrorQueue(q.DbAddr, dbrBytes)
}

// mirrorSRQ mirrors an SRQ's buffer (max_wr + 1 descriptors rounded up,
// of at most 16 bytes per scatter entry and one more, rounded up) and
// doorbell record.
func (x *context) mirrorSRQ(maxWR, maxSGE uint32, drv []byte) error {
	var q mlx5abi.Mlx5IbCreateSrq
	decode(drv, &q)
	desc := max(pow2Above(16+uint64(maxSGE)*16-1), 32)
	if err := x.mirrorQueue(q.BufAddr, capQueue(pow2Above(uint64(maxWR))*desc)); err != nil {
		return err
	}
	return x.mirrorQueue(q.DbAddr, dbrBytes)
}
