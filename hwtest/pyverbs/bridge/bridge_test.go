package main

import (
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

func TestMirrorsGapsAndAdd(t *testing.T) {
	var m mirrors
	if g := m.gaps(0x1000, 0x3000); !cmp.Equal(g, [][2]uint64{{0x1000, 0x3000}}) {
		t.Errorf("gaps of nothing: %x", g)
	}
	m.add(0x2000, 0x3000)
	m.add(0x5000, 0x6000)
	m.add(0x3000, 0x4000) // joins the first
	if want := [][2]uint64{{0x2000, 0x4000}, {0x5000, 0x6000}}; !cmp.Equal(m.r, want) {
		t.Errorf("ranges %x, want %x", m.r, want)
	}
	for _, c := range []struct {
		lo, hi uint64
		want   [][2]uint64
	}{
		{0x2000, 0x4000, nil},
		{0x1000, 0x7000, [][2]uint64{{0x1000, 0x2000}, {0x4000, 0x5000}, {0x6000, 0x7000}}},
		{0x3000, 0x5800, [][2]uint64{{0x4000, 0x5000}}},
		{0x6000, 0x8000, [][2]uint64{{0x6000, 0x8000}}},
	} {
		if g := m.gaps(c.lo, c.hi); !cmp.Equal(g, c.want) {
			t.Errorf("gaps [%#x, %#x): %x, want %x", c.lo, c.hi, g, c.want)
		}
	}
}

// ioctlPayload is an OP_IOCTL payload: the header, attrs and the given
// buffers of the attributes over 8 bytes.
func ioctlPayload(attrs []uverbsabi.IbUverbsAttr, bufs ...[]byte) []byte {
	hdr := uverbsabi.IbUverbsIoctlHdr{Length: uint16(uverbsabi.SizeofIbUverbsIoctlHdr + len(attrs)*uverbsabi.SizeofIbUverbsAttr), NumAttrs: uint16(len(attrs))}
	b, _ := binary.Append(nil, binary.NativeEndian, &hdr)
	b, _ = binary.Append(b, binary.NativeEndian, attrs)
	for _, x := range bufs {
		b = append(b, x...)
	}
	return b
}

func TestParseCall(t *testing.T) {
	in := []byte("sixteen bytes in")
	attrs := []uverbsabi.IbUverbsAttr{
		{AttrID: 1, Len: 4, Data: 0x11223344},  // inline input
		{AttrID: 2, Len: 16, Data: 0xdead0000}, // a buffer
		{AttrID: 3, Len: 8, Data: 0xbeef0000},  // a short output, by pointer
		{AttrID: 4, Len: 0, Data: 7},           // a handle
	}
	c, err := parseCall(ioctlPayload(attrs, in))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.inU64(1, 0); got != 0x11223344 {
		t.Errorf("inline input %#x", got)
	}
	if got := c.in(2); string(got) != string(in) {
		t.Errorf("buffer %q", got)
	}
	if h, ok := c.idr(4); !ok || h != 7 {
		t.Errorf("handle %d %v", h, ok)
	}
	c.outU64(3, 42)
	c.out(2, []byte("out"))
	if !c.small[2] || binary.NativeEndian.Uint64(c.bufs[2]) != 42 || c.attrs[2].Flags&uverbsabi.UVERBS_ATTR_F_VALID_OUTPUT == 0 {
		t.Errorf("short output: %v %x %#x", c.small[2], c.bufs[2], c.attrs[2].Flags)
	}
	if want := append([]byte("out"), make([]byte, 13)...); string(c.bufs[1]) != string(want) || string(c.orig[1]) != string(in) {
		t.Errorf("buffer output %q (was %q)", c.bufs[1], c.orig[1])
	}

	for name, p := range map[string][]byte{
		"short header":    ioctlPayload(nil)[:10],
		"missing buffer":  ioctlPayload(attrs),
		"trailing bytes":  ioctlPayload(attrs, in, []byte{1}),
		"length mismatch": append(ioctlPayload(attrs[:1]), make([]byte, 16)...),
	} {
		if name == "length mismatch" {
			binary.NativeEndian.PutUint16(p, uint16(uverbsabi.SizeofIbUverbsIoctlHdr+2*uverbsabi.SizeofIbUverbsAttr))
		}
		if _, err := parseCall(p); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", name, err)
		}
	}
}

func TestPow2Above(t *testing.T) {
	for n, want := range map[uint64]uint64{0: 1, 1: 2, 3: 4, 4: 8, 255: 256, 1 << 40: maxQueueSz} {
		if got := pow2Above(n); got != want {
			t.Errorf("pow2Above(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestMapAtNeverOverOwnMemory: a mirror lands on free address space or an
// older mirror, never on a mapping of the bridge's own.
func TestMapAtNeverOverOwnMemory(t *testing.T) {
	// Raw calls: the test unmaps half of the mapping, which unix.Munmap
	// does not.
	p, _, e := unix.Syscall6(unix.SYS_MMAP, 0, 2*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE, ^uintptr(0), 0)
	if e != 0 {
		t.Fatal(e)
	}
	base := uint64(p)
	own := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), p)), pageSize)
	defer unix.Syscall(unix.SYS_MUNMAP, p, pageSize, 0)
	copy(own, "the bridge's own")
	fd, err := unix.MemfdCreate("mlx5b-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 2*pageSize); err != nil {
		t.Fatal(err)
	}
	if err := mapAt(base, pageSize, unix.PROT_READ|unix.PROT_WRITE, fd); !errors.Is(err, unix.EEXIST) {
		t.Errorf("a mirror over the bridge's own page: %v, want EEXIST", err)
	}
	if string(own[:16]) != "the bridge's own" {
		t.Errorf("the bridge's page changed: %q", own[:16])
	}

	// Free space: unmap the second page and mirror there, then again over
	// that mirror (the caller freed and reused the pages).
	free := base + pageSize
	if _, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(free), pageSize, 0); e != 0 {
		t.Fatal(e)
	}
	for i := range 2 {
		if err := mapAt(free, pageSize, unix.PROT_READ|unix.PROT_WRITE, fd); err != nil {
			t.Fatalf("mirror %d at free space: %v", i, err)
		}
	}
	// A range over the mirror and the bridge's own page is refused whole.
	if err := mapAt(base, 2*pageSize, unix.PROT_READ|unix.PROT_WRITE, fd); !errors.Is(err, unix.EEXIST) {
		t.Errorf("a mirror over a mirror and the bridge's own page: %v, want EEXIST", err)
	}
	if string(own[:16]) != "the bridge's own" {
		t.Errorf("the bridge's page changed: %q", own[:16])
	}
	unix.Syscall(unix.SYS_MUNMAP, uintptr(free), pageSize, 0)
	mirrored.mu.Lock()
	mirrored.r = nil
	mirrored.mu.Unlock()
}

// FuzzParseCall: whatever the shim sends, parseCall refuses it or
// returns a call whose attributes and buffers agree with the header.
func FuzzParseCall(f *testing.F) {
	f.Add(ioctlPayload([]uverbsabi.IbUverbsAttr{{AttrID: 2, Len: 16}}, []byte("sixteen bytes in")))
	f.Add(ioctlPayload([]uverbsabi.IbUverbsAttr{{AttrID: 1, Len: 4, Data: 9}, {AttrID: 4}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		c, err := parseCall(p)
		if err != nil {
			if !errors.Is(err, unix.EINVAL) {
				t.Fatalf("%v, want EINVAL", err)
			}
			return
		}
		if len(c.attrs) != int(c.hdr.NumAttrs) {
			t.Fatalf("%d attributes, header says %d", len(c.attrs), c.hdr.NumAttrs)
		}
		n := uverbsabi.SizeofIbUverbsIoctlHdr + len(c.attrs)*uverbsabi.SizeofIbUverbsAttr
		for i, a := range c.attrs {
			switch {
			case a.Len > 8 && len(c.bufs[i]) != int(a.Len):
				t.Fatalf("attribute %d: a buffer of %d bytes, length %d", i, len(c.bufs[i]), a.Len)
			case a.Len <= 8 && c.bufs[i] != nil:
				t.Fatalf("attribute %d of %d bytes has a buffer", i, a.Len)
			}
			if a.Len > 8 {
				n += int(a.Len)
			}
			// Reading any attribute as an input, or writing it as an
			// output, stays in bounds.
			c.in(a.AttrID)
			c.outU64(a.AttrID, 1)
		}
		if n != len(p) {
			t.Fatalf("%d bytes parsed of %d", n, len(p))
		}
	})
}
