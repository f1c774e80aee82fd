package mlx5

// SRQ is a shared receive queue (ibv_srq): receive work requests that any
// QP attached to it consumes.
type SRQ struct {
	c    *Context
	srqn uint32
}
