package cm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/mlx5"
)

// TestLabOpenVerbs is what a new user of cm on rxe writes, with nothing
// but cm's adapter for a device that is not mlx5 (cm.OpenVerbs) and its
// QPs: an RC connection to Debian's ucmatose, which ucmatose ends; RC and
// UD connections between two of mlx5go's managers, each side on its own
// VerbsDevice, with both QPs in RTS and connected to each other; and a
// missing device refused with the call named.
func TestLabOpenVerbs(t *testing.T) {
	labenv.Require(t)
	noKernelLeak(t)
	d, err := cm.OpenVerbs(labenv.RXEDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Name() != labenv.RXEDevice || d.NodeGUID() == 0 {
		t.Errorf("device %q, node GUID %#x", d.Name(), d.NodeGUID())
	}
	m := labCM(t)
	newQP := func(typ mlx5.QPType) func() cm.QP {
		return func() cm.QP {
			qp, err := d.CreateQP(typ)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { qp.Close() })
			return qp
		}
	}

	t.Run("ucmatose", func(t *testing.T) {
		ctx := labCtx(t)
		srv := startTool(t, "ucmatose", "-b", labAddr, "-p", "7480", "-c", "1", "-C", "0")
		c := dialTool(ctx, t, m, "tcp", labAddr+":7480", newQP(mlx5.QPTypeRC))
		if a, err := c.QP().Query(mlx5.QPAttrState); err != nil || a.State != mlx5.QPStateRTS {
			t.Errorf("the dialer's QP: %v, %v; want RTS", a.State, err)
		}
		waitEnded(ctx, t, []*cm.Conn{c}) // ucmatose disconnects
		if code, out := srv.exit(t, 60*time.Second); code != 0 || !strings.Contains(out, "return status 0") {
			t.Errorf("ucmatose exited %d", code)
		}
	})

	t.Run("mlx5go both sides", func(t *testing.T) {
		ctx := labCtx(t)
		peer, err := cm.OpenVerbs(labenv.RXEDevice)
		if err != nil {
			t.Fatal(err)
		}
		defer peer.Close()
		pm := labCM(t)
		for _, network := range []string{"tcp", "udp"} {
			typ := mlx5.QPTypeRC
			if network == "udp" {
				typ = mlx5.QPTypeUD
			}
			l, err := pm.Listen(ctx, network, labAddr+":0", nil)
			if err != nil {
				t.Fatal(err)
			}
			sqp, err := peer.CreateQP(typ)
			if err != nil {
				t.Fatal(err)
			}
			var guid uint64
			done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) {
				guid = r.NodeGUID()
				return r.Accept(ctx, &cm.AcceptOptions{QP: sqp, PrivateData: []byte("accepted on " + peer.Name())})
			})
			c, err := m.Dial(ctx, network, l.Addr().String(), &cm.DialOptions{QP: newQP(typ)()})
			if err != nil {
				t.Fatalf("%s: %v", network, err)
			}
			res := <-done
			if res.err != nil {
				t.Fatalf("%s: %v", network, res.err)
			}
			if guid != peer.NodeGUID() {
				t.Errorf("%s: the request came in on %#x, the device is %#x", network, guid, peer.NodeGUID())
			}
			if pd := c.PrivateData(); !strings.HasPrefix(string(pd), "accepted on "+labenv.RXEDevice) {
				t.Errorf("%s: reply private data %q", network, pd)
			}
			for _, q := range []cm.QP{c.QP(), sqp} {
				if a, err := q.Query(mlx5.QPAttrState); err != nil || a.State != mlx5.QPStateRTS {
					t.Errorf("%s: QP %#x: %v, %v; want RTS", network, q.QPN(), a.State, err)
				}
			}
			if typ == mlx5.QPTypeRC {
				if a, err := c.QP().Query(mlx5.QPAttrDestQPN); err != nil || a.DestQPN != sqp.QPN() {
					t.Errorf("the dialer's QP is connected to %#x (%v), want %#x", a.DestQPN, err, sqp.QPN())
				}
				if err := c.Disconnect(); err != nil {
					t.Error(err)
				}
				waitEnded(ctx, t, []*cm.Conn{res.c})
			} else if p := c.UDPeer(); p.QPN != sqp.QPN() {
				t.Errorf("UD peer QP %#x, want %#x", p.QPN, sqp.QPN())
			}
			c.Close()
			res.c.Close()
			l.Close()
			sqp.Close()
		}
	})

	if d, err := cm.OpenVerbs("no-such-device"); err == nil {
		d.Close()
		t.Error("OpenVerbs opened no-such-device")
	} else if !strings.Contains(err.Error(), "open verbs device no-such-device: ") {
		t.Errorf("OpenVerbs(no-such-device): %v", err)
	}
}
