package mlx5

import "github.com/mlx5go/mlx5go/seam"

// SRQ is a shared receive queue (ibv_srq): receive work requests that any
// QP attached to it consumes.
type SRQ struct {
	c      *Context
	handle seam.Handle
	srqn   uint32
}
