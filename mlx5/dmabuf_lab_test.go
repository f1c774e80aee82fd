package mlx5_test

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/labdmabuf"
	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
)

// TestLabModelTakesUdmabuf gives the model a dma-buf the real kernel made
// (a udmabuf over a sealed memfd): the model takes it as the kernel's
// dma_buf_get does, maps it as a device's DMA reaches it, and a WRITE,
// READ and SEND through the MR move the memfd's bytes. The memfd itself,
// no dma-buf, the model refuses with dma_buf_get's EINVAL, which the lab's
// rxe cannot show (it has no dma-buf MRs: uverbs' TestLabRegDmabufMR).
// Skips, with the reason, on kernels without udmabuf (Debian's 6.1).
func TestLabModelTakesUdmabuf(t *testing.T) {
	labenv.Require(t)
	const size = 1 << 16
	dmabuf, memfd := labdmabuf.New(t, size)
	c := mlx5test.New(t, "cx7")
	r := newDmabufRigOn(t, c, dmabuf, memfd, size)
	r.dataPath(t, 4096, 32768, 0x1000_0000)
	if _, err := r.pd.RegDmabufMR(memfd, 0, 4096, 0, mlx5.AccessLocalWrite); !errors.Is(err, unix.EINVAL) {
		t.Errorf("the memfd behind the udmabuf: %v, want EINVAL", err)
	}
	if _, err := r.pd.RegDmabufMR(dmabuf, size-4096, 8192, 0, mlx5.AccessLocalWrite); !errors.Is(err, unix.EINVAL) {
		t.Errorf("past the udmabuf's end: %v, want EINVAL", err)
	}
	u, err := c.RegDmabufUMem(dmabuf, 0, size, mlx5.UMemOptions{Access: mlx5.AccessLocalWrite})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
}
