package mlx5

import (
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/model"
)

// TestDmabufUnsupportedDevice: a Device without seam.DmabufRegistrar
// gives ErrUnsupported for dma-bufs and page-size bitmaps, while RegUMem
// (the default page sizes) still works through Device.UMemReg.
func TestDmabufUnsupportedDevice(t *testing.T) {
	dev, err := model.New("cx7")
	if err != nil {
		t.Fatal(err)
	}
	c := newContext(struct{ seam.Device }{dev})
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := dev.ExportDmabuf(4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.RegDmabufMR(fd, 0, 4096, 0, AccessLocalWrite); !errors.Is(err, ErrUnsupported) {
		t.Errorf("RegDmabufMR: %v", err)
	}
	if _, err := c.RegDmabufUMem(fd, 0, 4096, UMemOptions{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("RegDmabufUMem: %v", err)
	}
	mem := make([]byte, 4096)
	if _, err := c.RegUMemWith(mem, UMemOptions{PageSizes: 1 << 12}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("RegUMemWith with page sizes: %v", err)
	}
	u, err := c.RegUMem(mem, AccessLocalWrite)
	if err != nil {
		t.Fatalf("RegUMem: %v", err)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultUMemPageSizes: the public default is the seam's, which the
// kernel device and the model use.
func TestDefaultUMemPageSizes(t *testing.T) {
	if DefaultUMemPageSizes != seam.DefaultUMemPageSizes {
		t.Fatalf("mlx5 %#x, seam %#x", DefaultUMemPageSizes, seam.DefaultUMemPageSizes)
	}
}
