package mlx5_test

import (
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"golang.org/x/sys/unix"
)

// The data path objects' rules on the model: bad input refused before
// any command, a CQ in use not destroyed, use after Close an error (not a
// crash), and every object closable after its context, twice.
func TestModelDataPathLifecycle(t *testing.T) {
	c, dev := onModel(t, "cx6dx")
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCQ(mlx5.CQOptions{Entries: 0}); err == nil {
		t.Error("CQ of 0 entries created")
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 100})
	if err != nil {
		t.Fatal(err)
	}
	if cq.Size() != 128 {
		t.Errorf("CQ of 100 entries has %d, want 128", cq.Size())
	}
	before := dev.Objects()
	for _, bad := range []mlx5.QPOptions{
		{SendCQ: cq, RecvCQ: cq, MaxSendWR: 1},
		{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 0},
		{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1, MaxSendSGE: 53}, // a 1024-byte WQE holds 52 after the default operations' 192
		{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1, MaxSendSGE: 31, DEVX: true},
		{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1 << 15, MkeyConfigure: true},
	} {
		if _, err := c.CreateQP(bad); err == nil {
			t.Errorf("CreateQP(%+v) succeeded", bad)
		}
	}
	if n := dev.Objects(); n != before {
		t.Errorf("failed creates left %d objects", n-before)
	}
	qp, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Connect(qp.QPN(), mlx5.AddressPath{Port: 1, MTU: 9}); err == nil {
		t.Error("Connect with MTU 9 succeeded")
	}
	if err := cq.Close(); !errors.Is(mlx5.Checked(t, err), unix.EBUSY) {
		t.Errorf("closing a CQ in use: %v, want EBUSY", err)
	}
	m, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 2, BlockSignature: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wr := mlx5.SendWR{Opcode: mlx5.OpSend, SGL: []mlx5.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}
	for i := range 2 {
		for _, o := range []interface{ Close() error }{m, qp, cq, pd} {
			if err := o.Close(); err != nil {
				t.Errorf("close %T after the context (%d): %v", o, i, err)
			}
		}
	}
	if err := qp.PostSend(&wr); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("post on a closed QP: %v", err)
	}
	if err := qp.PostRecv(1, nil); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("post recv on a closed QP: %v", err)
	}
	if n, err := cq.Poll(make([]mlx5.Completion, 1)); n != 0 || !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("poll of a closed CQ: %d, %v; want 0 and ErrClosed", n, err)
	}
	if n := dev.Objects(); n != 0 {
		t.Errorf("%d objects left", n)
	}
}
