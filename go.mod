module github.com/mlx5go/mlx5go

go 1.25.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/google/go-cmp v0.7.0
	golang.org/x/sys v0.47.0
)
