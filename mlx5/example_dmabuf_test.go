package mlx5_test

import (
	"fmt"
	"log"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
)

// A GPU buffer, as a dma-buf fd, registered for RDMA: an MR that peers
// write to at the iova, and a UMEM for DEVX objects with 4 KiB and 2 MiB
// pages. On the model, mlx5test.ExportDmabuf stands in for the GPU
// driver's exporter (CUDA's cuMemGetHandleForAddressRange, a DRM PRIME
// fd).
func ExamplePD_RegDmabufMR() {
	c, err := mlx5test.Open("cx7")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fd, err := mlx5test.ExportDmabuf(c, 4<<20)
	if err != nil {
		log.Fatal(err)
	}
	defer unix.Close(fd)
	pd, err := c.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	mr, err := pd.RegDmabufMR(fd, 0, 2<<20, 0x7f0000000000, mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	fmt.Printf("MR at %#x, %d bytes\n", mr.Addr(), mr.Len())
	u, err := c.RegDmabufUMem(fd, 2<<20, 2<<20, mlx5.UMemOptions{Access: mlx5.AccessLocalWrite, PageSizes: 1<<12 | 1<<21})
	if err != nil {
		log.Fatal(err)
	}
	defer u.Close()
	fmt.Println("UMEM registered:", u.ID() != 0)
	// Output:
	// MR at 0x7f0000000000, 2097152 bytes
	// UMEM registered: true
}
