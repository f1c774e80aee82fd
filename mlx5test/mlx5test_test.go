package mlx5test_test

import (
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
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
