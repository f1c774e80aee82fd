package uverbs

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// rxeRecorder answers a recording context as rxe's kernel driver does
// (rxe_create_cq, rxe_create_qp, rxe_create_srq in
// drivers/infiniband/sw/rxe/rxe_verbs.c): a create whose driver data out
// is shorter than the driver's response fails with EINVAL.
func rxeRecorder(need map[uint16]int) Recorder {
	return func(c *Call) unix.Errno {
		n, ok := need[c.Hdr.ObjectID]
		if !ok {
			return 0
		}
		have := 0
		for _, a := range c.Attrs {
			if a.AttrID == uverbsabi.UVERBS_ATTR_UHW_OUT {
				have = int(a.Len)
			}
		}
		if have < n {
			return unix.EINVAL
		}
		for i, a := range c.Attrs {
			if a.AttrID == 0 { // UVERBS_ATTR_CREATE_{CQ,QP,SRQ}_HANDLE: the new object's handle
				c.Attrs[i].Data = 7
			}
		}
		return 0
	}
}

// TestDriverDataEINVALSaysWhatIsMissing: a provider's kernel driver that
// needs room for its answer (rxe) refuses a create without it with a bare
// EINVAL; the error says which call, how many bytes of driver data out
// the provider needs and how many it had, and still is EINVAL. A create
// with the room succeeds; EINVAL from another provider, or with room
// enough, gets no such note.
func TestDriverDataEINVALSaysWhatIsMissing(t *testing.T) {
	need := map[uint16]int{uverbsabi.UVERBS_OBJECT_CQ: 16, uverbsabi.UVERBS_OBJECT_QP: 32, uverbsabi.UVERBS_OBJECT_SRQ: 24}
	c := NewRecordingContext(DriverRXE, rxeRecorder(need))
	defer c.Close()
	pd, err := c.AllocPD(nil)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQOptions{CQE: 16, DriverOut: make([]byte, 16)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		create func() error
		want   []string
	}{
		{"cq", func() error { _, err := c.CreateCQ(CQOptions{CQE: 16}); return err },
			[]string{"uverbs: create cq: ", "rxe", "16 bytes of driver data out", "struct rxe_create_cq_resp", "CQOptions.DriverOut has 0"}},
		{"qp", func() error {
			_, err := c.CreateQP(QPInit{Type: QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 1, MaxSendSGE: 1},
				DriverOut: make([]byte, 8)})
			return err
		}, []string{"uverbs: create qp: ", "rxe", "32 bytes of driver data out", "struct rxe_create_qp_resp", "QPInit.DriverOut has 8"}},
		{"srq", func() error { _, err := pd.CreateSRQ(SRQOptions{MaxWR: 4, MaxSGE: 1}); return err },
			[]string{"uverbs: create srq: ", "rxe", "24 bytes of driver data out", "struct rxe_create_srq_resp", "SRQOptions.DriverOut has 0"}},
	} {
		err := tc.create()
		if !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
	if _, err := c.CreateQP(QPInit{Type: QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 1, MaxSendSGE: 1},
		DriverOut: make([]byte, 32)}); err != nil {
		t.Errorf("create qp with rxe's 32 bytes: %v", err)
	}

	// Room enough, and EINVAL for another reason: no note.
	refuse := NewRecordingContext(DriverRXE, func(*Call) unix.Errno { return unix.EINVAL })
	defer refuse.Close()
	if _, err := refuse.CreateCQ(CQOptions{CQE: 16, DriverOut: make([]byte, 16)}); !errors.Is(err, unix.EINVAL) || strings.Contains(err.Error(), "driver data") {
		t.Errorf("create cq with room, refused: %v", err)
	}
	// A provider whose needs uverbs does not know (mlx5 sends its own).
	other := NewRecordingContext(DriverMLX5, func(*Call) unix.Errno { return unix.EINVAL })
	defer other.Close()
	if _, err := other.CreateCQ(CQOptions{CQE: 16}); !errors.Is(err, unix.EINVAL) || strings.Contains(err.Error(), "driver data") {
		t.Errorf("mlx5 create cq refused: %v", err)
	}
}
