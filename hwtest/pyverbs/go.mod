module github.com/mlx5go/mlx5go/hwtest/pyverbs

go 1.25.0

require (
	github.com/mlx5go/mlx5go v0.0.0
	golang.org/x/sys v0.47.0
)

require github.com/google/go-cmp v0.7.0

replace github.com/mlx5go/mlx5go => ../..
