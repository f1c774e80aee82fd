package uverbs

import (
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"golang.org/x/sys/unix"
)

// checkBaseline fails if the kernel's resource counts differ from base.
func checkBaseline(t *testing.T, index uint32, base map[string]uint64, when string) {
	t.Helper()
	after, err := ResourceCounts(index)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range base {
		if after[k] != v {
			t.Errorf("%s: %s count %d, baseline %d", when, k, after[k], v)
		}
	}
}

// Error paths give the kernel's errno and leave nothing behind.
func TestLabObjectErrors(t *testing.T) {
	labenv.Require(t)
	nd := labNLDevice(t)
	base, err := ResourceCounts(nd.Index)
	if err != nil {
		t.Fatal(err)
	}
	c := openLab(t)
	l := newLabQPs(t, c)
	qp := l.qp(t, QPTypeRC)
	bogusPD := &PD{object{ctx: c, handle: 0x7fff}}
	bogusCQ := &CQ{object: object{ctx: c, handle: 0x7fff}}
	mem := labMem(t, 1<<16)
	for _, tc := range []struct {
		name string
		want unix.Errno
		err  error
	}{
		// Handle lookups fail with ENOENT, in the ioctl methods and in
		// the write commands INVOKE_WRITE carries alike.
		{"destroy a CQ that does not exist", unix.ENOENT, bogusCQ.Close()},
		{"create a QP on a PD that does not exist", unix.ENOENT, func() error {
			_, err := c.CreateQP(QPInit{Type: QPTypeRC, PD: bogusPD, SendCQ: l.cq, RecvCQ: l.cq, Cap: QPCap{MaxSendWR: 1, MaxSendSGE: 1}, DriverOut: make([]byte, rxeCreateQPResp)})
			return err
		}()},
		{"register an MR on a PD that does not exist", unix.ENOENT, func() error {
			_, err := bogusPD.RegMR(mem, uint64(unsafePointer(mem)), AccessLocalWrite, nil, nil)
			return err
		}()},
		// ib_modify_qp_is_ok: a transition the state machine lacks, or
		// missing required attributes.
		{"RESET -> RTS", unix.EINVAL, qp.Modify(&QPAttr{State: QPStateRTS}, QPAttrState)},
		{"RESET -> INIT without the port", unix.EINVAL, qp.Modify(&QPAttr{State: QPStateInit}, QPAttrState|QPAttrPKeyIndex|QPAttrAccessFlags)},
		{"RESET -> INIT with an RTR attribute", unix.EINVAL, qp.Modify(&QPAttr{State: QPStateInit, Port: 1, DestQPN: 1},
			QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags|QPAttrDestQPN)},
		{"a CQ with more entries than the device has", unix.EINVAL, func() error {
			_, err := c.CreateCQ(CQOptions{CQE: 1 << 30, DriverOut: make([]byte, rxeCreateCQResp)})
			return err
		}()},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, tc.err)
		}
	}
	if got, err := qp.Query(QPAttrState); err != nil || got.State != QPStateReset {
		t.Errorf("after the failed modifies: state %v, %v; want RESET", got.State, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	checkBaseline(t, nd.Index, base, "after the error paths")
}

// Creating and destroying 10,000 objects of each type leaves the kernel's
// resource counts at their baseline; so does closing a context with live
// objects of every type.
func TestLabLeaksObjects(t *testing.T) {
	labenv.Require(t)
	nd := labNLDevice(t)
	base, err := ResourceCounts(nd.Index)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("baseline: %v", base)
	c := openLab(t)
	l := newLabQPs(t, c)
	mem := labMem(t, 1<<16)
	av := l.av()
	srq, err := l.pd.CreateSRQ(SRQOptions{MaxWR: 4, MaxSGE: 1, DriverOut: make([]byte, rxeCreateSRQResp)})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	type obj interface{ Close() error }
	kinds := []struct {
		name   string
		create func() (obj, error)
	}{
		{"mr", func() (obj, error) {
			return l.pd.RegMR(mem, uint64(unsafePointer(mem)), AccessLocalWrite|AccessRemoteRead, nil, nil)
		}},
		{"cq", func() (obj, error) { return c.CreateCQ(CQOptions{CQE: 16, DriverOut: make([]byte, rxeCreateCQResp)}) }},
		{"cq on a channel", func() (obj, error) {
			return c.CreateCQ(CQOptions{CQE: 16, Channel: ch, DriverOut: make([]byte, rxeCreateCQResp)})
		}},
		{"rc qp", func() (obj, error) {
			return c.CreateQP(QPInit{Type: QPTypeRC, PD: l.pd, SendCQ: l.cq, RecvCQ: l.cq,
				Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}, DriverOut: make([]byte, rxeCreateQPResp)})
		}},
		{"ud qp on an srq", func() (obj, error) {
			return c.CreateQP(QPInit{Type: QPTypeUD, PD: l.pd, SendCQ: l.cq, RecvCQ: l.cq, SRQ: srq,
				Cap: QPCap{MaxSendWR: 4, MaxSendSGE: 1}, DriverOut: make([]byte, rxeCreateQPResp)})
		}},
		{"ah", func() (obj, error) { return l.pd.CreateAH(&av, nil) }},
		{"srq", func() (obj, error) {
			return l.pd.CreateSRQ(SRQOptions{MaxWR: 4, MaxSGE: 1, DriverOut: make([]byte, rxeCreateSRQResp)})
		}},
		{"comp channel", func() (obj, error) { return c.CreateCompChannel() }},
	}
	for _, k := range kinds {
		for i := 0; i < 10000; i++ {
			o, err := k.create()
			if err != nil {
				t.Fatalf("%s, cycle %d: %v", k.name, i, err)
			}
			if err := o.Close(); err != nil {
				t.Fatalf("%s, cycle %d: close: %v", k.name, i, err)
			}
		}
	}
	for _, k := range kinds {
		if _, err := k.create(); err != nil { // left live for the context to release
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	checkBaseline(t, nd.Index, base, "after 10,000 cycles of each type and a context closed with live objects")
}
