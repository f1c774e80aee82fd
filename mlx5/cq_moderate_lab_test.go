package mlx5

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/internal/rxeabi"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// TestLabModerationCaps: Moderate's rule on the caps a real kernel's rxe0
// reports (0 and 0: no moderation) refuses every count and period with
// ErrUnsupported, nothing sent, and with the errno the kernel itself
// answers a modify CQ on rxe (EOPNOTSUPP: rxe has no modify_cq).
func TestLabModerationCaps(t *testing.T) {
	uctx := labRXE(t)
	c := newContext(&kernelDevice{ctx: uctx})
	defer c.Close()
	da, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	caps := da.CQModerationCaps
	ucq, err := uctx.CreateCQ(uverbs.CQOptions{CQE: 16, DriverOut: make([]byte, unsafe.Sizeof(rxeabi.RxeCreateCqResp{}))})
	if err != nil {
		t.Fatal(err)
	}
	defer ucq.Close()
	kerr := ucq.Moderate(1, 1)
	for _, m := range [][2]int{{1, 1}, {0, 0}, {MaxCQModerationCount, MaxCQModerationPeriod}} {
		err := checkModeration("modify cq", "cq", int(caps.MaxCQCount), int(caps.MaxCQPeriod), m[0], m[1])
		if !errors.Is(err, ErrUnsupported) || !errors.Is(err, unix.EOPNOTSUPP) || !errors.Is(kerr, unix.EOPNOTSUPP) {
			t.Errorf("moderate %v on caps %+v: %v; the kernel: %v; want ErrUnsupported and EOPNOTSUPP from both", m, caps, err, kerr)
		}
	}
	t.Logf("rxe caps %+v: mlx5go %v; the kernel %v", caps, checkModeration("modify cq", "cq", int(caps.MaxCQCount), int(caps.MaxCQPeriod), 1, 1), kerr)
}

// labRXE opens the lab's rxe0 through uverbs (skipping outside the lab);
// the context's Close is up to the caller's mlx5 Context, or the test's
// end.
func labRXE(t *testing.T) *uverbs.Context {
	t.Helper()
	labenv.Require(t)
	uctx, err := uverbs.Open(labenv.RXEDevice, &uverbs.Options{DriverID: uverbs.DriverRXE})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uctx.Close() })
	return uctx
}
