// Package mlx5hook lets the repository's own packages make an
// mlx5.Context on any seam.Device (the software device model), which
// package mlx5 cannot export without putting an internal type in its API:
// mlx5test opens its contexts with it, and so do mlx5probe's -sim and
// tests that need the model's device itself (hwtest/flows).
//
// Package mlx5 sets NewContext in its init. This package cannot import
// mlx5 (mlx5 imports it), so the context comes back as any; callers, who
// import mlx5 (which also makes sure its init has run), assert it:
//
//	c := mlx5hook.NewContext(dev).(*mlx5.Context)
package mlx5hook

import "github.com/mlx5go/mlx5go/internal/seam"

// NewContext returns mlx5's *Context on dev, as mlx5.Open makes one on the
// kernel's device. A nil dev makes a context every method of which fails
// with ErrInvalid.
var NewContext func(dev seam.Device) any
