package mlx5test_test

import (
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"github.com/mlx5go/mlx5go/model"
)

func TestOpenEveryProfile(t *testing.T) {
	if len(mlx5test.Profiles()) == 0 {
		t.Fatal("no profiles")
	}
	for _, p := range append([]string{""}, mlx5test.Profiles()...) {
		c := mlx5test.New(t, p)
		if !c.DEVX() {
			t.Errorf("profile %q: no DEVX", p)
		}
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatalf("profile %q: %v", p, err)
		}
		cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16})
		if err != nil {
			t.Fatalf("profile %q: %v", p, err)
		}
		qp, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4})
		if err != nil {
			t.Fatalf("profile %q: %v", p, err)
		}
		for _, o := range []interface{ Close() error }{qp, cq, pd} {
			if err := o.Close(); err != nil {
				t.Error(err)
			}
		}
	}
}

func TestOpenUnknownProfile(t *testing.T) {
	if c, err := mlx5test.Open("cx99"); err == nil {
		c.Close()
		t.Fatal("opened a ConnectX-99")
	}
}

// TestPeerAndCM: a peer context is on the same software ConnectX (its
// node GUID), and the connection manager counts its ids; a context
// mlx5test did not open has neither.
func TestPeerAndCM(t *testing.T) {
	c := mlx5test.New(t, "")
	p := mlx5test.NewPeer(t, c)
	g1, _ := c.NodeGUID()
	g2, _ := p.NodeGUID()
	if g1 == 0 || g1 != g2 {
		t.Errorf("node GUIDs %#x and %#x", g1, g2)
	}
	m := mlx5test.NewCM(t, p)
	l, err := m.Listen(t.Context(), "tcp", "192.0.2.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := mlx5test.CMIDs(c); err != nil || n != 1 {
		t.Errorf("%d ids, %v; want the listener's", n, err)
	}
	l.Close()
	if n, _ := mlx5test.CMIDs(c); n != 0 {
		t.Errorf("%d ids after the listener closed", n)
	}
	foreign := &mlx5.Context{}
	if _, err := mlx5test.OpenCM(foreign); err == nil {
		t.Error("OpenCM on a context mlx5test did not open")
	}
	if _, err := mlx5test.OpenPeer(foreign); err == nil {
		t.Error("OpenPeer on a context mlx5test did not open")
	}
	if _, err := mlx5test.CMIDs(foreign); err == nil {
		t.Error("CMIDs on a context mlx5test did not open")
	}
}

// OpenWithOptions makes the model the options describe: without DEVX, a
// context speaks verbs only.
func TestOpenWithOptions(t *testing.T) {
	c, err := mlx5test.OpenWithOptions("cx6dx", model.Options{NoDEVX: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.DEVX() {
		t.Error("a NoDEVX model's context has DEVX")
	}
	if _, err := c.AllocPD(); err != nil {
		t.Errorf("verbs without DEVX: %v", err)
	}
	if c, err := mlx5test.OpenWithOptions("cx99", model.Options{}); err == nil {
		c.Close()
		t.Error("opened a ConnectX-99")
	}
}
