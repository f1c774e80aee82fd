package model

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// User memory: the addresses in mlx5's driver data (queue buffers,
// doorbell records). The kernel pins them with ib_umem_get and gives the
// device their DMA addresses; the model, which is the device and shares
// the process, views them in place, without copying: a []byte over
// [addr, addr+n), made with unsafe.Slice from an unsafe.Add of the
// address to a nil pointer (no uintptr-to-pointer conversion, so go vet's
// unsafeptr check has nothing to say, and checkptr accepts it because the
// memory is not the Go heap's).
//
// That is sound only under the seam's contract: the memory is outside the
// Go heap (mmap'd), so the garbage collector neither moves nor frees it,
// and the caller keeps it mapped while the object lives, as ib_umem_get
// keeps it pinned. What the model can check it checks, as pin_user_pages
// would: the range must be mapped, readable, and writable where the
// device writes (a CQ's ring). The kernel answers that itself:
// madvise(MADV_POPULATE_READ or _WRITE) faults the range in through the
// same get_user_pages path pin_user_pages takes, and fails for a hole or
// a missing permission, in one system call. Where that is not to be
// trusted (a kernel before 5.14, or qemu-user, which accepts any madvise
// advice it does not emulate and does nothing), the mapping is read from
// /proc/self/maps instead, which is exact but costs a read of the whole
// table per check (milliseconds under qemu-user, which generates it).
// That the memory is not the Go heap it cannot check (under -race,
// checkptr catches it).

// userMem returns n bytes at addr, as ib_umem_get(addr, n, access) pins
// them: EINVAL for an empty or wrapping range (ib_umem_get), EFAULT when
// a page of it is not mapped, not readable, or not writable with write
// (pin_user_pages with FOLL_WRITE).
func userMem(addr, n uint64, write bool) ([]byte, unix.Errno) {
	if n == 0 || addr+n < addr || addr+n > 1<<63 {
		return nil, unix.EINVAL
	}
	if !mapped(addr&^(pageSize-1), (addr+n+pageSize-1)&^(pageSize-1), write) {
		return nil, unix.EFAULT
	}
	p := unsafe.Add(unsafe.Pointer(nil), uintptr(addr))
	return unsafe.Slice((*byte)(p), int(n)), 0
}

// mapped reports whether [start, end), page-aligned, is covered by
// mappings of this process that are readable (and writable with write).
func mapped(start, end uint64, write bool) bool {
	if populateTrusted() {
		return populate(start, end, write) == nil
	}
	return mappedInMaps(start, end, write)
}

// populate is madvise(MADV_POPULATE_READ or MADV_POPULATE_WRITE) over
// [start, end): nil when every page is mapped with the permission (and
// now faulted in, as pin_user_pages leaves it); ENOMEM for a hole, EINVAL
// or EFAULT for a page without the permission.
func populate(start, end uint64, write bool) error {
	advice := unix.MADV_POPULATE_READ
	if write {
		advice = unix.MADV_POPULATE_WRITE
	}
	for {
		_, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), uintptr(advice))
		if e != unix.EINTR {
			if e != 0 {
				return e
			}
			return nil
		}
	}
}

var populateOnce struct {
	sync.Once
	ok bool
}

// populateTrusted reports whether populate answers for this process: it
// tries it once on a page mapped read-write, the same page read-only
// (for a write), and a range running into a hole, and trusts it only when
// each answers as get_user_pages would.
func populateTrusted() bool {
	populateOnce.Do(func() { populateOnce.ok = probePopulate() })
	return populateOnce.ok
}

func probePopulate() bool {
	// Raw calls: the probe unmaps half of its mapping, which unix.Munmap
	// does not.
	p, _, e := unix.Syscall6(unix.SYS_MMAP, 0, 2*pageSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_ANON|unix.MAP_PRIVATE, ^uintptr(0), 0)
	if e != 0 {
		return false
	}
	base := uint64(p)
	defer unix.Syscall(unix.SYS_MUNMAP, p, 2*pageSize, 0)
	if populate(base, base+2*pageSize, true) != nil {
		return false // no MADV_POPULATE_WRITE (before Linux 5.14)
	}
	if _, _, e := unix.Syscall(unix.SYS_MPROTECT, p, pageSize, unix.PROT_READ); e != 0 {
		return false
	}
	if populate(base, base+pageSize, false) != nil || populate(base, base+pageSize, true) == nil {
		return false
	}
	// Without its second page the range has a hole.
	if _, _, e := unix.Syscall(unix.SYS_MUNMAP, p+pageSize, pageSize, 0); e != 0 {
		return false
	}
	return populate(base, base+2*pageSize, false) != nil
}

// mappedInMaps is mapped from /proc/self/maps.
func mappedInMaps(start, end uint64, write bool) bool {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<16)
	for s.Scan() && start < end {
		// "start-end perms offset dev inode path", addresses in hex.
		fields := bytes.Fields(s.Bytes())
		if len(fields) < 2 {
			continue
		}
		lo, hi, ok := bytes.Cut(fields[0], []byte("-"))
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(string(lo), 16, 64)
		b, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || b <= start {
			continue
		}
		if a > start {
			return false // a hole
		}
		perms := fields[1]
		if len(perms) < 2 || perms[0] != 'r' || (write && perms[1] != 'w') {
			return false
		}
		start = b // maps are sorted: the next line may continue the range
	}
	return start >= end
}
