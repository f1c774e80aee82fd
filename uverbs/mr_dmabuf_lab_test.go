package uverbs

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labdmabuf"
	"github.com/mlx5go/mlx5go/internal/labenv"
)

// TestLabUdmabufLayout checks struct udmabuf_create against the running
// kernel's BTF, and what a dma-buf fd reads as in /proc/self/fd (what the
// model takes for a dma-buf).
func TestLabUdmabufLayout(t *testing.T) {
	labenv.Require(t)
	dmabuf, _ := labdmabuf.New(t, 1<<16)
	s, err := btfcheck.Load()
	if err != nil {
		t.Fatal(err)
	}
	if size, err := s.StructSize("udmabuf_create"); err != nil || size != uint32(unsafe.Sizeof(labdmabuf.Create{})) {
		t.Errorf("struct udmabuf_create: %d bytes, %v; Go %d", size, err, unsafe.Sizeof(labdmabuf.Create{}))
	}
	for name, off := range map[string]uintptr{"memfd": unsafe.Offsetof(labdmabuf.Create{}.Memfd), "flags": unsafe.Offsetof(labdmabuf.Create{}.Flags),
		"offset": unsafe.Offsetof(labdmabuf.Create{}.Offset), "size": unsafe.Offsetof(labdmabuf.Create{}.Size)} {
		if got, err := s.MemberOffset("udmabuf_create", name); err != nil || got != uint32(off) {
			t.Errorf("udmabuf_create.%s at %d, %v; Go %d", name, got, err, off)
		}
	}
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(dmabuf))
	if err != nil {
		t.Fatal(err)
	}
	if link != "anon_inode:dmabuf" && !strings.HasPrefix(link, "/dmabuf:") {
		t.Errorf("a dma-buf fd links to %q, which model/verbs_dmabuf.go would not take for a dma-buf", link)
	}
	t.Logf("dma-buf fd: %s", link)
}

// TestLabRegDmabufMR registers a udmabuf on rxe0 through
// UVERBS_METHOD_REG_DMABUF_MR. rxe has no reg_user_mr_dmabuf in these
// kernels, so ib_uverbs does not offer the method for it and the kernel
// refuses the call before looking at the fd: the test asserts that errno
// (errors.Is) for the udmabuf, a memfd that is no dma-buf, and a closed fd
// alike. A kernel whose rxe took it would get the MR closed again.
func TestLabRegDmabufMR(t *testing.T) {
	labenv.Require(t)
	c, err := Open(labenv.RXEDevice, &Options{DriverID: DriverRXE})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pd, err := c.AllocPD(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	memfd := labdmabuf.SealedMemfd(t, 1<<16)
	closed, err := unix.Dup(memfd)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(closed)
	fds := map[string]int{"memfd": memfd, "closed fd": closed}
	if ok, why := labdmabuf.Available(); ok {
		fds["udmabuf"], _ = labdmabuf.New(t, 1<<16)
	} else {
		t.Log(why)
	}
	for name, fd := range fds {
		mr, err := pd.RegDmabufMR(0, 4096, 0, fd, AccessLocalWrite|AccessRemoteWrite)
		var ce *CallError
		switch {
		case err == nil:
			t.Logf("%s: rxe0 registered it: lkey %#x", name, mr.LKey)
			if name != "udmabuf" {
				t.Errorf("%s: the kernel took a file that is no dma-buf", name)
			}
			mr.Close()
		case !errors.As(err, &ce):
			t.Errorf("%s: %v, not the kernel's answer", name, err)
		case !errors.Is(err, ce.Errno) || !errors.Is(err, labDmabufErrno):
			t.Errorf("%s: %v (errno %d), want %v", name, err, int(ce.Errno), labDmabufErrno)
		default:
			t.Logf("%s: %v", name, err)
		}
	}
}

// labDmabufErrno is what the lab's kernels answer REG_DMABUF_MR on rxe0
// with: the method does not exist for a device without
// reg_user_mr_dmabuf (UAPI_DEF_METHOD_NEEDS_FN), and ib_uverbs answers an
// unknown method with EPROTONOSUPPORT.
var labDmabufErrno = unix.EPROTONOSUPPORT
