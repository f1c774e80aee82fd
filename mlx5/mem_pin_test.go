package mlx5

import (
	"encoding/binary"
	"runtime"
	"testing"
	"weak"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// plainKernel is a Context on a recording kernel that grants every call,
// with a new handle each time. Like the real kernel, it keeps nothing of
// the memory a registration names but its address: only mlx5go can keep
// Go memory alive for the device.
func plainKernel(t *testing.T) *Context {
	t.Helper()
	next := uint32(100)
	uctx := uverbs.NewRecordingContext(uverbs.DriverMLX5, func(c *uverbs.Call) unix.Errno {
		next++
		for i, a := range c.Attrs {
			if a.Flags&uverbsabi.UVERBS_ATTR_F_MANDATORY != 0 && a.Len == 0 && a.Data == 0 {
				c.Attrs[i].Data = uint64(next)
			}
			if c.Hdr.ObjectID == uverbsabi.UVERBS_OBJECT_DEVICE && c.Hdr.MethodID == uverbsabi.UVERBS_METHOD_INVOKE_WRITE &&
				a.AttrID == uverbsabi.UVERBS_ATTR_CORE_OUT && len(c.Data[i]) >= 4 {
				binary.LittleEndian.PutUint32(c.Data[i], next) // the handle heads every response
			}
		}
		return 0
	})
	c := NewContext(&kernelDevice{ctx: uctx, devx: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// gcChurn runs the garbage collector with allocations in between.
func gcChurn() {
	for range 10 {
		junk := make([][]byte, 64)
		for i := range junk {
			junk[i] = make([]byte, 1<<12)
		}
		runtime.KeepAlive(junk)
		runtime.GC()
	}
}

// Go memory registered as an MR or a UMEM stays allocated while the
// registration lives, whatever the program keeps: the kernel pins its
// pages, and a device writing through the registration must not write
// into whatever the garbage collector would put there. Once the
// registration is closed it is the collector's again.
func TestRegisteredGoMemoryStaysAllocated(t *testing.T) {
	c := plainKernel(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	for _, kase := range []struct {
		name string
		reg  func([]byte) (interface{ Close() error }, error)
	}{
		{"MR", func(b []byte) (interface{ Close() error }, error) {
			return pd.RegMR(b, AccessLocalWrite|AccessRemoteWrite)
		}},
		{"UMEM", func(b []byte) (interface{ Close() error }, error) { return c.RegUMem(b, AccessLocalWrite) }},
	} {
		// The program registers a Go slice and keeps only the registration.
		reg, alive := func() (interface{ Close() error }, weak.Pointer[byte]) {
			mem := make([]byte, 1<<16)
			r, err := kase.reg(mem)
			if err != nil {
				t.Fatal(err)
			}
			return r, weak.Make(&mem[0])
		}()
		gcChurn()
		if alive.Value() == nil {
			t.Errorf("%s: the garbage collector freed the Go memory of a live registration; the device would write into whatever reuses it", kase.name)
		}
		if err := reg.Close(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20 && alive.Value() != nil; i++ {
			runtime.GC()
		}
		if alive.Value() != nil {
			t.Errorf("%s: the Go memory is still held after the registration closed", kase.name)
		}
	}
}

// Closing the context releases the Go memory of the registrations it
// closes.
func TestContextCloseReleasesGoMemory(t *testing.T) {
	c := plainKernel(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	alive := func() weak.Pointer[byte] {
		mem := make([]byte, 1<<16)
		if _, err := pd.RegMR(mem, AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
		return weak.Make(&mem[0])
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20 && alive.Value() != nil; i++ {
		runtime.GC()
	}
	if alive.Value() != nil {
		t.Error("the Go memory of an MR is still held after the context closed it")
	}
}
