package uverbs

import "github.com/mlx5go/mlx5go/internal/btfcheck"

// The objects calls' constants and layouts, checked by TestLabBTFUverbs with
// the rest of the package's.
var (
	objectConsts  = []btfcheck.Const{}
	objectLayouts = []btfcheck.Layout{}
)
