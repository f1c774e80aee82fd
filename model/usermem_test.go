package model

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestUserMemCheck: the check of user memory answers as pin_user_pages
// would, by either of its ways (MADV_POPULATE where the kernel has it,
// /proc/self/maps everywhere): a range over mappings of the permission
// passes, across mapping boundaries too; a hole, a read-only page for a
// write and a PROT_NONE page fail.
func TestUserMemCheck(t *testing.T) {
	mem, err := unix.Mmap(-1, 0, 4*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	// Pages: 0 read-write, 1 read-only, 2 no access, 3 read-write.
	if err := unix.Mprotect(mem[pageSize:2*pageSize], unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(mem[2*pageSize:3*pageSize], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	// A hole: a page mapped and unmapped again (nothing maps in between).
	hole, err := unix.Mmap(-1, 0, pageSize, unix.PROT_READ, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	h := uint64(uintptr(unsafe.Pointer(&hole[0])))
	if err := unix.Munmap(hole); err != nil {
		t.Fatal(err)
	}
	pg := func(i uint64) uint64 { return base + i*pageSize }
	checks := []struct {
		name       string
		start, end uint64
		write      bool
		want       bool
	}{
		{"read-write, for a write", pg(0), pg(1), true, true},
		{"read-write and read-only, for a read", pg(0), pg(2), false, true},
		{"read-only, for a write", pg(1), pg(2), true, false},
		{"read-write then read-only, for a write", pg(0), pg(2), true, false},
		{"no access", pg(2), pg(3), false, false},
		{"over a no-access page", pg(1), pg(4), false, false},
		{"read-write after no access", pg(3), pg(4), true, true},
		{"a hole", h, h + pageSize, false, false},
		{"page zero", 0, pageSize, false, false},
	}
	ways := []struct {
		name string
		f    func(start, end uint64, write bool) bool
	}{
		{"mapped", mapped},
		{"/proc/self/maps", mappedInMaps},
	}
	if populateTrusted() {
		ways = append(ways, struct {
			name string
			f    func(start, end uint64, write bool) bool
		}{"MADV_POPULATE", func(start, end uint64, write bool) bool { return populate(start, end, write) == nil }})
	} else {
		t.Log("MADV_POPULATE is not to be trusted here: the check reads /proc/self/maps")
	}
	for _, w := range ways {
		for _, c := range checks {
			if got := w.f(c.start, c.end, c.write); got != c.want {
				t.Errorf("%s: %s: %v, want %v", w.name, c.name, got, c.want)
			}
		}
	}
}
