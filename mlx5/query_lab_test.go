package mlx5

import (
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// TestLabContextQueries: a Context over the lab's rxe0 answers QueryDevice,
// QueryPort and QueryGID as uverbs' own queries on a second open of the
// device do, and passes on the kernel's refusals with their errnos.
func TestLabContextQueries(t *testing.T) {
	c := newContext(&kernelDevice{ctx: labRXE(t)})
	defer c.Close()
	ref, err := uverbs.Open(labenv.RXEDevice, &uverbs.Options{DriverID: uverbs.DriverRXE})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()

	da, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if da != want || da.NodeGUID == 0 || da.PhysPortCnt != 1 {
		t.Errorf("device:\n got %+v\nwant %+v", da, want)
	}
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	wp, err := ref.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if pa != wp || pa.State != 4 || pa.LinkLayer != 2 {
		t.Errorf("port 1:\n got %+v\nwant %+v", pa, wp)
	}
	if _, err := c.QueryPort(2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("port 2: %v, want the kernel's EINVAL", err)
	}
	table, err := ref.QueryGIDTable()
	if err != nil || len(table) == 0 {
		t.Fatalf("gid table: %v, %v", table, err)
	}
	for _, e := range table {
		g, err := c.QueryGID(uint8(e.Port), e.Index)
		if err != nil || g != e {
			t.Errorf("gid %d: %+v, %v; the table has %+v", e.Index, g, err, e)
		}
	}
	if _, err := c.QueryGID(1, wp.GIDTableLen); !errors.Is(err, unix.EINVAL) {
		t.Errorf("gid past the table of %d: %v, want EINVAL", wp.GIDTableLen, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.QueryPort(1); !errors.Is(err, ErrClosed) {
		t.Errorf("closed: %v, want ErrClosed", err)
	}
}
