package cm_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"golang.org/x/sys/unix"
)

// TestResolveErrorsAreErrResolve: every errno ErrResolve's doc lists
// comes as ErrResolve, whether the resolve command fails at once (no
// route: ENETUNREACH; a source that is not this host's: EADDRNOTAVAIL)
// or its event does (a neighbour that never answers: ETIMEDOUT; the
// device gone: ENODEV), and the QP is left in RESET; a listener's
// address that is not this host's is ErrResolve too.
func TestResolveErrorsAreErrResolve(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	for _, addr := range []string{"198.51.100.7:4420", "127.0.0.1:4420"} {
		if l, err := srv.m.Listen(ctx, "tcp", addr, nil); !errors.Is(err, cm.ErrResolve) {
			l.Close()
			t.Errorf("listen on %s: %v, want ErrResolve", addr, err)
		}
	}
	nothingLeft(t, srv.c, 0, nil)
	for _, c := range []struct {
		name  string
		addr  string
		opt   cm.DialOptions
		errno unix.Errno
	}{
		{"no route", "198.51.100.7:4420", cm.DialOptions{}, unix.ENETUNREACH},
		{"loopback", "127.0.0.1:4420", cm.DialOptions{}, unix.ENODEV},
		{"source not this host's", "192.0.2.1:4420", cm.DialOptions{Source: netip.MustParseAddrPort("198.51.100.9:0")}, unix.EADDRNOTAVAIL},
		{"neighbour silent", "192.0.2.77:4420", cm.DialOptions{ResolveTimeout: 50 * time.Millisecond}, unix.ETIMEDOUT},
	} {
		qp := cli.qp(t, mlx5.QPTypeRC)
		opt := c.opt
		opt.QP = qp
		_, err := cli.m.Dial(ctx, "tcp", c.addr, &opt)
		if !errors.Is(err, cm.ErrResolve) || !errors.Is(err, c.errno) {
			t.Errorf("%s: dial %s: %v, want ErrResolve with %v", c.name, c.addr, err, c.errno)
		}
		nothingLeft(t, cli.c, 0, qp)
	}
	if err := mlx5test.InjectCMDeviceRemoval(cli.c); err != nil {
		t.Fatal(err)
	}
	qp := cli.qp(t, mlx5.QPTypeRC)
	if _, err := cli.m.Dial(ctx, "tcp", "192.0.2.1:4420", &cm.DialOptions{QP: qp}); !errors.Is(err, cm.ErrResolve) || !errors.Is(err, unix.ENODEV) {
		t.Errorf("dial after the device's removal: %v, want ErrResolve with ENODEV", err)
	}
}
