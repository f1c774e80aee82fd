package uverbs

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/labdmabuf"
	"github.com/mlx5go/mlx5go/internal/labenv"
)

// TestLabUdmabufLayout checks struct udmabuf_create on the kernel, which
// has no BTF of it: UDMABUF_CREATE's number carries the struct's size
// (a wrong one is ENOTTY), and a dma-buf made from offset 4096 for 8192
// bytes is 8192 bytes long and holds the memfd's bytes from 4096. It also
// checks what a dma-buf fd reads as in /proc/self/fd, which is how the
// model tells a dma-buf (model/verbs_dmabuf.go).
func TestLabUdmabufLayout(t *testing.T) {
	labenv.Require(t)
	if ok, why := labdmabuf.Available(); !ok {
		t.Skip(why)
	}
	memfd := labdmabuf.SealedMemfd(t, 1<<16)
	if _, err := unix.Pwrite(memfd, []byte("at 4096"), 4096); err != nil {
		t.Fatal(err)
	}
	dmabuf := labdmabuf.NewAt(t, memfd, 4096, 8192)
	if size, err := unix.Seek(dmabuf, 0, unix.SEEK_END); err != nil || size != 8192 {
		t.Errorf("the dma-buf is %d bytes, %v; want 8192", size, err)
	}
	m, err := unix.Mmap(dmabuf, 0, 8192, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if string(m[:7]) != "at 4096" {
		t.Errorf("the dma-buf starts with %q, want the memfd's bytes at 4096", m[:7])
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
// UVERBS_METHOD_REG_DMABUF_MR. rxe has no reg_user_mr_dmabuf in the
// lab's kernels (6.1, 6.12, 7.x), and ib_uverbs' handler refuses the call
// with EOPNOTSUPP before it looks at the fd: the test asserts that errno
// (errors.Is) for the udmabuf (6.12, 7.x: 6.1 has no udmabuf), a memfd
// that is no dma-buf, and a closed fd alike. A kernel whose rxe took the
// udmabuf would get the MR closed again.
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
// with: ib_uverbs' handler finds no reg_user_mr_dmabuf in the device's
// ops.
var labDmabufErrno = unix.EOPNOTSUPP
