package uverbs

import "github.com/mlx5go/mlx5go/internal/btfcheck"

// The device calls' constants and layouts, checked by TestLabBTFUverbs with
// the rest of the package's.
var (
	deviceConsts  = []btfcheck.Const{}
	deviceLayouts = []btfcheck.Layout{}
)
