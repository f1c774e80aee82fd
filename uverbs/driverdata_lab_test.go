package uverbs

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"golang.org/x/sys/unix"
)

// TestLabDriverDataEINVAL: rxe0's kernel driver refuses a CQ, QP or SRQ
// without room for its answer with EINVAL, by ioctl and by write(), and
// the error says how much driver data out it needs; with
// DriverOutSizesOf's sizes each create succeeds.
func TestLabDriverDataEINVAL(t *testing.T) {
	for _, forceWrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("write=%v", forceWrite), func(t *testing.T) {
			labenv.Require(t)
			c, err := Open(labenv.RXEDevice, &Options{ForceWrite: forceWrite})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sz, ok := DriverOutSizesOf(c.driverID)
			if !ok || c.driverID != DriverRXE {
				t.Fatalf("driver %d: sizes %+v, %v", c.driverID, sz, ok)
			}
			pd, err := c.AllocPD(nil)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, err error, need int) {
				t.Helper()
				if want := fmt.Sprintf("needs %d bytes of driver data out", need); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), want) {
					t.Errorf("%s without driver data out: %v; want EINVAL saying %q", what, err, want)
				} else {
					t.Logf("%s without driver data out: %v", what, err)
				}
			}
			_, err = c.CreateCQ(CQOptions{CQE: 16})
			check("create cq", err, sz.CQ)
			cq, err := c.CreateCQ(CQOptions{CQE: 16, DriverOut: make([]byte, sz.CQ)})
			if err != nil {
				t.Fatal(err)
			}
			init := QPInit{Type: QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
			_, err = c.CreateQP(init)
			check("create qp", err, sz.QP)
			init.DriverOut = make([]byte, sz.QP)
			if _, err := c.CreateQP(init); err != nil {
				t.Fatal(err)
			}
			_, err = pd.CreateSRQ(SRQOptions{MaxWR: 4, MaxSGE: 1})
			check("create srq", err, sz.SRQ)
			if _, err := pd.CreateSRQ(SRQOptions{MaxWR: 4, MaxSGE: 1, DriverOut: make([]byte, sz.SRQ)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
