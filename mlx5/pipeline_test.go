package mlx5_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"golang.org/x/sys/unix"
)

// RecoverSigStop refuses what it cannot do before doing anything: a QP
// without pipelining, another CQ, no poll buffer or deliver function, a
// transfer without a signature mkey, and a QP that is not stopped.
func TestRecoverSigStopRefusals(t *testing.T) {
	r := newCancelRig(t, model.Options{}, 16)
	wc := make([]mlx5.Completion, 4)
	deliver := func([]mlx5.Completion) {}
	open := []mlx5.SigTransfer{{Mkey: r.mk, Response: 1}}
	for name, c := range map[string]struct {
		qp      *mlx5.QP
		cq      *mlx5.CQ
		wc      []mlx5.Completion
		deliver func([]mlx5.Completion)
		open    []mlx5.SigTransfer
		want    error
	}{
		"no pipelining":  {r.b, r.pcq, wc, deliver, open, mlx5.ErrInvalid},
		"another CQ":     {r.a, r.pcq, wc, deliver, open, mlx5.ErrInvalid},
		"no buffer":      {r.a, r.scq, nil, deliver, open, mlx5.ErrInvalid},
		"no deliver":     {r.a, r.scq, wc, nil, open, mlx5.ErrInvalid},
		"no mkey":        {r.a, r.scq, wc, deliver, []mlx5.SigTransfer{{Response: 1}}, mlx5.ErrInvalid},
		"not stopped":    {r.a, r.scq, wc, deliver, open, mlx5.ErrNotDrained},
		"nothing opened": {r.a, r.scq, wc, deliver, nil, mlx5.ErrNotDrained},
	} {
		failed, err := c.qp.RecoverSigStop(c.cq, c.wc, c.deliver, c.open)
		if !errors.Is(err, c.want) || failed != nil {
			t.Errorf("%s: %v, %v; want %v", name, failed, err, c.want)
		}
		if errors.Is(c.want, mlx5.ErrNotDrained) && !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v does not wrap EINVAL", name, err)
		}
	}
	if at, err := r.a.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateRTS {
		t.Errorf("after the refusals: %v, %v; want RTS", at.State, err)
	}
}

// A stop with two open transfers of which one failed: RecoverSigStop
// delivers every completion it polls, cancels only the failed transfer's
// response, and resumes; the other response and the work behind go out.
func TestRecoverSigStop(t *testing.T) {
	r := newCancelRig(t, model.Options{}, 64)
	good, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r.peerRecv(t)
	}
	// A good transfer (its own clean mkey, not yet configured: a plain
	// configure with the same block, so it checks clean data) and a bad
	// one through the rig's mkey.
	// The good transfer reads its own copy of the data: the bad one's is
	// corrupted while the device may not have read the good one yet.
	const goodOff = 24576
	copy(r.buf.Bytes()[goodOff:], r.mem)
	cfg := r.configure(10)
	cfg.Mkey = good
	cfg.List = []mlx5.KLM{{Addr: r.mr.Addr + goodOff, ByteCount: uint32(len(r.mem)), Mkey: r.mr.LKey}}
	if err := r.a.PostMkeyConfigure(cfg); err != nil {
		t.Fatal(err)
	}
	w := r.write(11)
	w.SGL[0].LKey = good.LKey
	if err := r.a.PostSend(w); err != nil {
		t.Fatal(err)
	}
	if err := r.a.PostSend(r.resp(12, mlx5.SendSignaled|mlx5.SendFence)); err != nil {
		t.Fatal(err)
	}
	r.corrupt()
	defer r.corrupt()
	if err := r.a.PostSend(r.write(21)); err != nil {
		t.Fatal(err)
	}
	if err := r.a.PostSend(r.resp(22, mlx5.SendSignaled|mlx5.SendFence)); err != nil {
		t.Fatal(err)
	}
	if err := r.a.PostSend(r.resp(30, mlx5.SendSignaled)); err != nil { // work behind the stop
		t.Fatal(err)
	}
	r.drained(t)
	var delivered []uint64
	failed, err := r.a.RecoverSigStop(r.scq, make([]mlx5.Completion, 2), func(ws []mlx5.Completion) {
		for _, w := range ws {
			delivered = append(delivered, w.WrID)
		}
	}, []mlx5.SigTransfer{{Mkey: good, Response: 12}, {Mkey: r.mk, Response: 22}})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].Transfer != 1 || failed[0].Canceled != 1 || failed[0].Err.OK() {
		t.Fatalf("failed %+v, want transfer 1 with its response canceled", failed)
	}
	// Delivered: the configure, the good WRITE and response, the bad WRITE
	// (the work before the stop), in order.
	if want := []uint64{10, 11, 12, 21}; !slices.Equal(delivered, want) {
		t.Errorf("delivered %v, want %v", delivered, want)
	}
	// After the resume: the canceled response (a success) and 30.
	wcs := pollN(t, r.scq, 2, 5*time.Second)
	if wcs[0].WrID != 22 || wcs[0].Status != mlx5.WCSuccess || wcs[1].WrID != 30 {
		t.Errorf("after the resume: %+v", wcs)
	}
	// The client got 12 and 30, never 22.
	var got []uint64
	for _, w := range pollN(t, r.pcq, 2, 5*time.Second) {
		got = append(got, r.received(t, w))
	}
	if len(got) != 2 || got[0] != 12 || got[1] != 30 {
		t.Errorf("the client got responses %v, want [12 30]", got)
	}
}
