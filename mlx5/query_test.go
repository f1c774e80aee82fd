package mlx5_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"golang.org/x/sys/unix"
)

// TestContextQueries: the context's device, port and GID queries on the
// model agree with what the context learned at open and with the
// model's port (RoCE, active, its GID table), and refuse what the kernel
// refuses.
func TestContextQueries(t *testing.T) {
	c, err := mlx5test.Open("cx7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	caps := c.Caps()
	da, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if da.HCACoreClock != caps.CoreClockKHz || (da.AtomicCap != 0) != caps.Atomics || da.NodeGUID == 0 || int(da.PhysPortCnt) != caps.NumPorts || da.PhysPortCnt != 1 {
		t.Errorf("device: %+v; caps %+v", da, caps)
	}
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if pa.State != 4 || pa.LinkLayer != 2 || pa.MaxMsgSize == 0 || pa.GIDTableLen < 6 || pa.ActiveMTU == 0 || pa.ActiveMTU > pa.MaxMTU {
		t.Errorf("port 1: %+v", pa)
	}
	for _, p := range []uint8{2, 255} {
		if _, err := c.QueryPort(p); !errors.Is(err, unix.EINVAL) {
			t.Errorf("port %d: %v, want EINVAL", p, err)
		}
	}
	if _, err := c.QueryPort(0); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("port 0: %v, want ErrInvalid", err)
	}

	// The default GIDs: fe80::EUI-64, RoCE v1 then v2.
	for i, typ := range []uint32{1, 2} {
		g, err := c.QueryGID(1, uint32(i))
		if err != nil {
			t.Fatal(err)
		}
		if g.Index != uint32(i) || g.Port != 1 || uint32(g.Type) != typ || g.GID[0] != 0xfe || g.GID[1] != 0x80 {
			t.Errorf("gid %d: %+v", i, g)
		}
	}
	if _, err := c.QueryGID(1, pa.GIDTableLen-1); pa.GIDTableLen > 6 && !errors.Is(err, unix.ENODATA) {
		t.Errorf("last gid (empty): %v, want ENODATA", err)
	}
	for _, idx := range []uint32{pa.GIDTableLen, ^uint32(0)} {
		if _, err := c.QueryGID(1, idx); !errors.Is(err, unix.EINVAL) {
			t.Errorf("gid %d of %d: %v, want EINVAL", idx, pa.GIDTableLen, err)
		}
	}
	if _, err := c.QueryGID(2, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("gid of port 2: %v, want EINVAL", err)
	}
	if _, err := c.QueryGID(0, 0); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("gid of port 0: %v, want ErrInvalid", err)
	}

	// The answers are copies.
	pa.State = 1
	if again, _ := c.QueryPort(1); again.State != 4 {
		t.Error("a changed answer changed the next one")
	}
}

// TestContextQueriesMisuse: a nil context is ErrInvalid, a closed one
// ErrClosed, and queries racing Close either answer or fail with
// ErrClosed.
func TestContextQueriesMisuse(t *testing.T) {
	var nilc *mlx5.Context
	if _, err := nilc.QueryDevice(); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("nil context, device: %v", err)
	}
	if _, err := nilc.QueryPort(1); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("nil context, port: %v", err)
	}
	if _, err := nilc.QueryGID(1, 0); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("nil context, gid: %v", err)
	}
	if _, err := new(mlx5.Context).QueryPort(1); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("zero context: %v", err)
	}
	for range 20 {
		c, err := mlx5test.Open("cx7")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					_, e1 := c.QueryDevice()
					_, e2 := c.QueryPort(1)
					_, e3 := c.QueryGID(1, 1)
					for _, e := range []error{e1, e2, e3} {
						if e != nil && !errors.Is(e, mlx5.ErrClosed) {
							t.Errorf("racing Close: %v", e)
							return
						}
					}
				}
			}()
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if _, err := c.QueryGID(1, 0); !errors.Is(err, mlx5.ErrClosed) {
			t.Errorf("closed: %v", err)
		}
	}
}
