package mlx5test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"weak"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/internal/cmhook"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
)

// The connection manager of a software ConnectX. Every software ConnectX
// is a host with one RDMA device: its netdev holds 192.0.2.1/24,
// 2001:db8::1/64 and the link-local fe80::ff:fe00:1 on interface 2
// (zone "%2"), and its connection manager connects the QPs of the
// contexts opened on it (Peer opens more, as other processes of the host
// would), as rdma_cm connects two processes on one host through their
// device. The model follows the kernel's ucma.c, cma.c and cm.c: the same
// events, private data sizes, rejects and errors (docs/MODEL.md).
//
//	srv := mlx5test.New(t, "")            // a context on a new ConnectX
//	cli := mlx5test.NewPeer(t, srv)       // another context on it
//	l, _ := mlx5test.NewCM(t, srv).Listen(ctx, "tcp", "192.0.2.1:4420", nil)
//	conn, _ := mlx5test.NewCM(t, cli).Dial(ctx, "tcp", "192.0.2.1:4420", &cm.DialOptions{QP: qp})

// devices maps the contexts this package opened to their software
// ConnectX.
// The keys are weak, so that a context the test dropped is collected.
var devices sync.Map // weak.Pointer[mlx5.Context] -> *model.Device

func remember(c *mlx5.Context, dev *model.Device) {
	k := weak.Make(c)
	devices.Store(k, dev)
	runtime.AddCleanup(c, func(k weak.Pointer[mlx5.Context]) { devices.Delete(k) }, k)
}

func deviceOf(c *mlx5.Context) (*model.Device, error) {
	v, ok := devices.Load(weak.Make(c))
	if !ok {
		return nil, fmt.Errorf("mlx5test: the context was not opened by mlx5test")
	}
	return v.(*model.Device), nil
}

// OpenPeer opens another context on the software ConnectX of c, a
// context Open made: its QPs reach c's, and its connection manager
// connects to c's.
func OpenPeer(c *mlx5.Context) (*mlx5.Context, error) {
	dev, err := deviceOf(c)
	if err != nil {
		return nil, err
	}
	d2, err := dev.Open()
	if err != nil {
		return nil, fmt.Errorf("mlx5test: %w", err)
	}
	p := newContext(d2)
	remember(p, d2)
	return p, nil
}

// NewPeer is OpenPeer for a test: it fails tb on error and closes the
// context when tb ends.
func NewPeer(tb testing.TB, c *mlx5.Context) *mlx5.Context {
	tb.Helper()
	p, err := OpenPeer(c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Errorf("mlx5test: close: %v", err)
		}
	})
	return p
}

// OpenCM opens a connection manager on the software ConnectX of c, as
// cm.Open opens the kernel's: its listeners and connections reach those
// of every other connection manager of the same ConnectX.
func OpenCM(c *mlx5.Context) (*cm.Manager, error) {
	dev, err := deviceOf(c)
	if err != nil {
		return nil, err
	}
	f, err := dev.OpenCM()
	if err != nil {
		return nil, fmt.Errorf("mlx5test: %w", err)
	}
	return cmhook.NewManager(f).(*cm.Manager), nil
}

// NewCM is OpenCM for a test: it fails tb on error and closes the
// manager when tb ends.
func NewCM(tb testing.TB, c *mlx5.Context) *cm.Manager {
	tb.Helper()
	m, err := OpenCM(c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("mlx5test: close connection manager: %v", err)
		}
	})
	return m
}

// CMIDs counts the connection manager's ids alive on the software
// ConnectX of c (listeners, connections, requests not yet answered): a
// test checks with it that closing left none behind.
func CMIDs(c *mlx5.Context) (int, error) {
	dev, err := deviceOf(c)
	if err != nil {
		return 0, err
	}
	return dev.CMIDs(), nil
}

// Objects counts the firmware objects alive on the software ConnectX of
// c, of every context on it (QPs, CQs, mkeys, ...).
func Objects(c *mlx5.Context) (int, error) {
	dev, err := deviceOf(c)
	if err != nil {
		return 0, err
	}
	return dev.Objects(), nil
}

// InjectCMDeviceRemoval does to the connection manager of c's software
// ConnectX what the device's removal does: every listener and connection
// on it gets DEVICE_REMOVAL (a connection ends with cm.ErrDeviceRemoved,
// its QP in ERR; a listener's Accept returns it), and the netdev's
// addresses have no RDMA device behind them any more. For testing how an
// application takes a device going away.
func InjectCMDeviceRemoval(c *mlx5.Context) error {
	dev, err := deviceOf(c)
	if err != nil {
		return err
	}
	dev.InjectCMDeviceRemoval()
	return nil
}
