package mlx5_test

import (
	"os"
	"time"

	"github.com/mlx5go/mlx5go/internal/labenv"
)

// mustCome bounds a wait for something that must come (a completion, an
// event, a state, a call's return): the wait ends as soon as it comes, so
// the bound costs nothing when all is well, and it is long enough that a
// loaded machine or qemu-user does not fail a test that is right, while a
// loss still fails it, a minute late.
const mustCome = 60 * time.Second

// underQEMUUser: the tests run under qemu-user (scripts/test's linux/arm64
// step), where the model runs some ten to fifty times slower, as under the
// race detector; the tests sized by work rather than time size themselves
// for it as they do for -race.
var underQEMUUser = os.Getenv(labenv.QEMUUserVar) == "1"
