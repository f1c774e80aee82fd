package flows_test

import (
	"testing"

	"github.com/mlx5go/mlx5go/hwtest/flows"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/sig"
)

// onEveryProfile runs flow on a context of the software ConnectX of every
// profile, then checks that the flow left no object behind.
func onEveryProfile(t *testing.T, flow func(*testing.T, *mlx5.Context)) {
	for _, p := range model.Profiles() {
		t.Run(p, func(t *testing.T) {
			dev, err := model.New(p)
			if err != nil {
				t.Fatal(err)
			}
			c := mlx5.NewContext(dev, mlx5.Caps{SQD2RTS: true})
			defer c.Close()
			t.Run("flow", func(t *testing.T) { flow(t, c) })
			if n := dev.Objects(); n != 0 {
				t.Errorf("%d objects left in the model after the flow closed everything", n)
			}
		})
	}
}

// The flows hwtest runs on a ConnectX, run on the software ConnectX.
func TestDEVXOnModel(t *testing.T)   { onEveryProfile(t, flows.DEVX) }
func TestBasicOnModel(t *testing.T)  { onEveryProfile(t, flows.Basic) }
func TestT10DIFOnModel(t *testing.T) { onEveryProfile(t, flows.T10DIF) }

// The CRC64_XP10 flow on the model: the model computes sig's default
// CRC64_XP10 parameters with the seed as initial value, so the flow must
// find that candidate (the published set for the all-ones seed, its init-0
// variant for seed 0) through the whole data path: signature mkey, UMR,
// RDMA WRITE, inserted signatures, CQ.
func TestCRC64XP10OnModel(t *testing.T) {
	onEveryProfile(t, func(t *testing.T, c *mlx5.Context) {
		results := flows.CRC64XP10(t, c)
		if len(results) != 2 {
			t.Fatalf("%d results, want one per seed", len(results))
		}
		for _, r := range results {
			want := sig.DefaultCRC64XP10
			want.Init = r.Seed
			found := false
			for _, m := range r.Matches {
				p := m.Candidate.Params64
				if p.Poly == want.Poly && p.RefIn == want.RefIn && p.RefOut == want.RefOut && p.XorOut == want.XorOut && p.Init == want.Init {
					found = true
				}
			}
			if !found {
				t.Errorf("%v: the model's parameters (%s with init %#x) are not among the matches", r, want.Name, want.Init)
			}
		}
	})
}
