package mlx5_test

import (
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
)

// TestQPInfo: what a QP tells of itself, and the device's node GUID: the
// same for the contexts of one device, another for another device.
func TestQPInfo(t *testing.T) {
	c := mlx5test.New(t, "cx7")
	peer := mlx5test.NewPeer(t, c)
	other := mlx5test.New(t, "cx7")
	g1, err := c.NodeGUID()
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := peer.NodeGUID()
	g3, _ := other.NodeGUID()
	if g1 == 0 || g1 != g2 || g1 == g3 {
		t.Errorf("node GUIDs %#x (peer %#x, other device %#x)", g1, g2, g3)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16})
	if err != nil {
		t.Fatal(err)
	}
	srq, err := c.CreateSRQ(mlx5.SRQOptions{PD: pd, MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	ud, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeUD, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1, MaxRecvWR: 1})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: srq, MaxSendWR: 1})
	if err != nil {
		t.Fatal(err)
	}
	devx, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1, MaxRecvWR: 1, DEVX: true})
	if err != nil {
		t.Fatal(err)
	}
	if ud.Type() != mlx5.QPTypeUD || ud.Context() != c || ud.DEVX() || ud.SRQ() != nil {
		t.Errorf("UD QP: %v %v %v %v", ud.Type(), ud.Context() == c, ud.DEVX(), ud.SRQ())
	}
	if rc.Type() != mlx5.QPTypeRC || rc.DEVX() || rc.SRQ() != srq {
		t.Errorf("RC QP on an SRQ: %v %v %v", rc.Type(), rc.DEVX(), rc.SRQ() == srq)
	}
	if !devx.DEVX() || devx.SRQ() != nil {
		t.Errorf("DEVX QP: %v %v", devx.DEVX(), devx.SRQ())
	}
	for _, o := range []interface{ Close() error }{ud, rc, devx, srq, cq, pd} {
		o.Close()
	}
	c2 := mlx5test.New(t, "cx7")
	c2.Close()
	if _, err := c2.NodeGUID(); err == nil {
		t.Error("node GUID of a closed context")
	}
}
