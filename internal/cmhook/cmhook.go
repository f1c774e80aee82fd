// Package cmhook lets mlx5test make a cm.Manager on the software device
// model without package cm exporting a constructor that takes the
// internal seam: cm sets NewManager when it is initialized, and mlx5test,
// which imports cm, calls it.
package cmhook

import "github.com/mlx5go/mlx5go/internal/seam"

// NewManager returns a *cm.Manager over s; nil until package cm is
// initialized.
var NewManager func(s seam.CM) any
