package flows_test

import (
	"testing"

	"github.com/mlx5go/mlx5go/hwtest/flows"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
)

// The flows hwtest runs on a ConnectX, run on the software ConnectX of
// every profile.
func TestDEVXOnModel(t *testing.T) {
	for _, p := range model.Profiles() {
		t.Run(p, func(t *testing.T) {
			dev, err := model.New(p)
			if err != nil {
				t.Fatal(err)
			}
			c := mlx5.NewContext(dev, mlx5.Caps{SQD2RTS: true})
			defer c.Close()
			flows.DEVX(t, c)
			if n := dev.Objects(); n != 0 {
				t.Errorf("%d objects left in the model after the flow closed everything", n)
			}
		})
	}
}
