package mlx5test

import "github.com/mlx5go/mlx5go/mlx5"

// ExportDmabuf makes a zeroed buffer of size bytes (rounded up to whole
// pages) that the software ConnectX of c (a context Open made) takes as a
// dma-buf, standing in for a GPU driver's exported memory, and returns its
// fd (model.Device.ExportDmabuf). The caller closes the fd; registrations
// made from it keep the memory. Map the fd (MAP_SHARED) to reach the
// bytes from the CPU.
func ExportDmabuf(c *mlx5.Context, size int) (int, error) {
	dev, err := deviceOf(c)
	if err != nil {
		return -1, err
	}
	return dev.ExportDmabuf(size)
}
