package mlx5

import "github.com/mlx5go/mlx5go/wqe"

// AH is an address handle (ibv_ah): where a UD send goes.
type AH struct {
	av wqe.AV
}
