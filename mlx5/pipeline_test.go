package mlx5_test

import (
	"errors"
	"fmt"
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
		if !errors.Is(mlx5.Checked(t, err), c.want) || failed != nil {
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
	for _, stop := range sigStops() {
		t.Run(fmt.Sprintf("%v/%d/%d", stop.Policy, stop.After, stop.Seed), func(t *testing.T) { recoverSigStop(t, stop) })
	}
}

// sigStops are the stops the pipelining tests run under: right after the
// failing WQE, right before the next fenced one, one WQE into the window,
// and three seeded.
func sigStops() []model.SigStop {
	return []model.SigStop{{}, {Policy: model.SigStopLatest}, {Policy: model.SigStopAfter, After: 1},
		{Policy: model.SigStopSeeded, Seed: 1}, {Policy: model.SigStopSeeded, Seed: 2}, {Policy: model.SigStopSeeded, Seed: 3}}
}

func recoverSigStop(t *testing.T, stop model.SigStop) {
	r := newCancelRig(t, model.Options{SigStop: stop}, 64)
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
	cfg.List = []mlx5.KLM{{Addr: r.mr.Addr() + goodOff, ByteCount: uint32(len(r.mem)), Mkey: r.mr.LKey()}}
	if err := r.a.PostMkeyConfigure(cfg); err != nil {
		t.Fatal(err)
	}
	w := r.write(11)
	w.SGL[0].LKey = good.LKey()
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

// RecoverSigStop wherever the device stops in the window
// mlx5dv_qp_cancel_posted_send_wrs(3) allows (model.Options.SigStop): a
// target posts, with one doorbell, a transfer A whose check fails, the
// configure and transfer of a clean B, the configure and transfer of a
// failing C, the unfenced response of a read without protection, the
// fenced responses of A, B and C, and an unfenced response behind them.
// The model stops right after A (two stops: A, then C), right before A's
// response (one stop, both failures), inside B's configure, or anywhere
// in between by seed. At each stop RecoverSigStop finds the transfers
// that failed, and the target sends their BAD responses: the client gets
// exactly one response per read, BAD for A and C, and every work request
// completes exactly once.
func TestRecoverSigStopWindow(t *testing.T) {
	policies := []struct {
		stop  model.SigStop
		stops []int // failed transfers at each stop; nil: any
	}{
		{model.SigStop{}, []int{1, 1}},
		{model.SigStop{Policy: model.SigStopLatest}, []int{2}},
		{model.SigStop{Policy: model.SigStopAfter, After: 1}, []int{1, 1}}, // inside B's configure, then after the plain response
		{model.SigStop{Policy: model.SigStopAfter, After: 6}, []int{2}},    // right after C's transfer (a configure is a UMR and a SET_PSV)
	}
	for seed := range uint64(8) {
		policies = append(policies, struct {
			stop  model.SigStop
			stops []int
		}{model.SigStop{Policy: model.SigStopSeeded, Seed: seed}, nil})
	}
	for _, p := range policies {
		t.Run(fmt.Sprintf("%v/%d/%d", p.stop.Policy, p.stop.After, p.stop.Seed), func(t *testing.T) {
			got := recoverWindow(t, p.stop)
			if p.stops != nil && !slices.Equal(got, p.stops) {
				t.Errorf("failures per stop %v, want %v", got, p.stops)
			}
		})
	}
}

// recoverWindow runs TestRecoverSigStopWindow's target under stop and
// returns how many transfers failed at each stop.
func recoverWindow(t *testing.T, stop model.SigStop) []int {
	r := newCancelRig(t, model.Options{SigStop: stop}, 64)
	// B reads a clean copy of the rig's blocks, C a corrupted one, A the
	// rig's own, corrupted.
	const goodOff, badOff = 24576, 28672
	buf := r.buf.Bytes()
	copy(buf[goodOff:], r.mem)
	copy(buf[badOff:], r.mem)
	buf[badOff+520+3] ^= 0x01
	r.corrupt()
	defer r.corrupt()
	mkey := func() *mlx5.Mkey {
		m, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	good, bad := mkey(), mkey()
	configure := func(id uint64, m *mlx5.Mkey, off int) *mlx5.MkeyConfigureWR {
		c := r.configure(id)
		c.Mkey = m
		c.List = []mlx5.KLM{{Addr: r.mr.Addr() + uint64(off), ByteCount: uint32(len(r.mem)), Mkey: r.mr.LKey()}}
		return c
	}
	write := func(id uint64, m *mlx5.Mkey) *mlx5.SendWR {
		w := r.write(id)
		w.SGL[0].LKey = m.LKey()
		return w
	}
	fenced := mlx5.SendSignaled | mlx5.SendFence
	for range 5 {
		r.peerRecv(t)
	}
	b := r.a.Begin()
	b.Add(r.write(11))
	b.AddMkeyConfigure(configure(20, good, goodOff))
	b.Add(write(21, good))
	b.AddMkeyConfigure(configure(30, bad, badOff))
	b.Add(write(31, bad))
	b.Add(r.resp(40, mlx5.SendSignaled)) // an unprotected read's response
	b.Add(r.resp(12, fenced))
	b.Add(r.resp(22, fenced))
	b.Add(r.resp(32, fenced))
	b.Add(r.resp(50, mlx5.SendSignaled)) // work behind
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	open := []mlx5.SigTransfer{{Mkey: r.mk, Response: 12}, {Mkey: good, Response: 22}, {Mkey: bad, Response: 32}}
	names := map[uint64]string{12: "A", 22: "B", 32: "C"}
	done := map[uint64]int{}
	deliver := func(ws []mlx5.Completion) {
		for _, w := range ws {
			if w.Status != mlx5.WCSuccess {
				t.Fatalf("completion %+v", w)
			}
			done[w.WrID]++
			open = slices.DeleteFunc(open, func(o mlx5.SigTransfer) bool { return o.Response == w.WrID })
		}
	}
	want := []uint64{11, 20, 21, 30, 31, 40, 12, 22, 32, 50, 112, 132}
	var stops []int
	wc := make([]mlx5.Completion, 3)
	for end := time.Now().Add(mustCome); len(done) < len(want); {
		n, err := r.scq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		deliver(wc[:n])
		if n > 0 {
			continue
		}
		at, err := r.a.Query(mlx5.QPAttrState)
		switch {
		case err != nil:
			t.Fatal(err)
		case at.State == mlx5.QPStateSQD && !at.SQDraining:
			r.drained(t)
			// deliver takes transfers off open, in place, as their
			// responses complete; the indexes refer to open as passed.
			list := slices.Clone(open)
			failed, err := r.a.RecoverSigStop(r.scq, wc, deliver, open)
			if err != nil {
				t.Fatal(err)
			}
			stops = append(stops, len(failed))
			for _, f := range failed {
				id := list[f.Transfer].Response
				if (id != 12 && id != 32) || f.Response != id || f.Canceled != 1 || f.Err.OK() {
					t.Fatalf("transfer %s reported %+v", names[id], f)
				}
				post(t, r.a, r.resp(id+100, mlx5.SendSignaled))
			}
		case time.Now().After(end):
			t.Fatalf("stuck in %v; completions %v", at.State, done)
		default:
			time.Sleep(20 * time.Microsecond)
		}
	}
	for _, id := range want {
		if done[id] != 1 {
			t.Errorf("wr_id %d completed %d times", id, done[id])
		}
	}
	if len(done) != len(want) {
		t.Errorf("completions %v, want one each of %v", done, want)
	}
	var client []uint64
	for _, w := range pollN(t, r.pcq, 5, 5*time.Second) {
		client = append(client, r.received(t, w))
	}
	slices.Sort(client)
	if want := []uint64{22, 40, 50, 112, 132}; !slices.Equal(client, want) {
		t.Errorf("the client got %v, want %v: one response per read, BAD (1xx) for A and C", client, want)
	}
	if f := r.dev.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
	return stops
}

// A target that posts its reads' data before it posts their responses:
// two transfers whose checks fail, nothing fenced behind them yet. Right
// after the first failing WQE, the QP stops with only the first failed;
// at the end of the posted work, with both. Either way RecoverSigStop
// reports every failed transfer it is given, with nothing to cancel
// (Canceled 0): the target must list a transfer as open from the post of
// its data, and send BAD, not GOOD, for each failure.
func TestRecoverSigStopResponsesNotPosted(t *testing.T) {
	for _, c := range []struct {
		stop  model.SigStop
		stops []int
	}{{model.SigStop{}, []int{1, 1}}, {model.SigStop{Policy: model.SigStopLatest}, []int{2}}} {
		t.Run(c.stop.Policy.String(), func(t *testing.T) {
			r := newCancelRig(t, model.Options{SigStop: c.stop}, 64)
			const badOff = 28672
			buf := r.buf.Bytes()
			copy(buf[badOff:], r.mem)
			buf[badOff+3*520+100] ^= 0x80
			r.corrupt()
			defer r.corrupt()
			bad, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
			if err != nil {
				t.Fatal(err)
			}
			cfg := r.configure(20)
			cfg.Mkey = bad
			cfg.List = []mlx5.KLM{{Addr: r.mr.Addr() + badOff, ByteCount: uint32(len(r.mem)), Mkey: r.mr.LKey()}}
			if err := r.a.PostMkeyConfigure(cfg); err != nil {
				t.Fatal(err)
			}
			pollN(t, r.scq, 1, 5*time.Second)
			w := r.write(21)
			w.SGL[0].LKey = bad.LKey()
			b := r.a.Begin()
			b.Add(r.write(11))
			b.Add(w)
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			open := []mlx5.SigTransfer{{Mkey: r.mk, Response: 12}, {Mkey: bad, Response: 22}}
			var stops []int
			var done []uint64
			for len(open) > 0 {
				r.drained(t)
				failed, err := r.a.RecoverSigStop(r.scq, make([]mlx5.Completion, 4), func(ws []mlx5.Completion) {
					for _, w := range ws {
						done = append(done, w.WrID)
					}
				}, open)
				if err != nil {
					t.Fatal(err)
				}
				stops = append(stops, len(failed))
				var rest []mlx5.SigTransfer
				for i, o := range open {
					if !slices.ContainsFunc(failed, func(f mlx5.SigFailure) bool { return f.Transfer == i }) {
						rest = append(rest, o)
					}
				}
				for _, f := range failed {
					if f.Canceled != 0 || f.Err.OK() {
						t.Errorf("%+v, want a failure with nothing canceled", f)
					}
					r.peerRecv(t)
					post(t, r.a, r.resp(open[f.Transfer].Response+100, mlx5.SendSignaled))
				}
				open = rest
			}
			if !slices.Equal(stops, c.stops) {
				t.Errorf("failures per stop %v, want %v", stops, c.stops)
			}
			for _, w := range pollN(t, r.scq, 2, 5*time.Second) {
				done = append(done, w.WrID)
			}
			slices.Sort(done)
			if want := []uint64{11, 21, 112, 122}; !slices.Equal(done, want) {
				t.Errorf("completions %v, want %v", done, want)
			}
			var client []uint64
			for _, w := range pollN(t, r.pcq, 2, 5*time.Second) {
				client = append(client, r.received(t, w))
			}
			slices.Sort(client)
			if want := []uint64{112, 122}; !slices.Equal(client, want) {
				t.Errorf("the client got %v, want the BAD responses %v", client, want)
			}
		})
	}
}

// A deliver that takes each transfer off the caller's open list as its
// response completes, in place (slices.DeleteFunc on the slice it passed):
// the good transfer's response, run before the stop, completes during
// RecoverSigStop's poll. RecoverSigStop still checks the transfers it was
// given, as they were when it was called: the bad one fails, with its own
// index and response, and only its response is canceled; the client gets
// the good response and the one behind, never the bad one's.
func TestRecoverSigStopDeliverTakesOff(t *testing.T) {
	for _, stop := range sigStops() {
		t.Run(fmt.Sprintf("%v/%d/%d", stop.Policy, stop.After, stop.Seed), func(t *testing.T) { deliverTakesOff(t, stop) })
	}
}

func deliverTakesOff(t *testing.T, stop model.SigStop) {
	r := newCancelRig(t, model.Options{SigStop: stop}, 64)
	good, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r.peerRecv(t)
	}
	const goodOff = 24576
	copy(r.buf.Bytes()[goodOff:], r.mem)
	cfg := r.configure(10)
	cfg.Mkey = good
	cfg.List = []mlx5.KLM{{Addr: r.mr.Addr() + goodOff, ByteCount: uint32(len(r.mem)), Mkey: r.mr.LKey()}}
	w := r.write(11)
	w.SGL[0].LKey = good.LKey()
	r.corrupt()
	defer r.corrupt()
	b := r.a.Begin()
	b.AddMkeyConfigure(cfg)
	b.Add(w)
	b.Add(r.resp(12, mlx5.SendSignaled|mlx5.SendFence))
	b.Add(r.write(21))
	b.Add(r.resp(22, mlx5.SendSignaled|mlx5.SendFence))
	b.Add(r.resp(30, mlx5.SendSignaled))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	r.drained(t)
	open := []mlx5.SigTransfer{{Mkey: good, Response: 12}, {Mkey: r.mk, Response: 22}}
	orig := slices.Clone(open)
	var delivered []uint64
	failed, err := r.a.RecoverSigStop(r.scq, make([]mlx5.Completion, 4), func(ws []mlx5.Completion) {
		for _, w := range ws {
			delivered = append(delivered, w.WrID)
			open = slices.DeleteFunc(open, func(o mlx5.SigTransfer) bool { return o.Response == w.WrID })
		}
	}, open)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].Transfer != 1 || orig[failed[0].Transfer].Response != 22 || failed[0].Canceled != 1 {
		t.Fatalf("failed %+v, want transfer 1 (response 22) with its response canceled", failed)
	}
	if want := []uint64{10, 11, 12, 21}; !slices.Equal(delivered, want) {
		t.Errorf("delivered %v, want %v", delivered, want)
	}
	if wcs := pollN(t, r.scq, 2, 5*time.Second); wcs[0].WrID != 22 || wcs[1].WrID != 30 {
		t.Errorf("after the resume: %+v", wcs)
	}
	var client []uint64
	for _, w := range pollN(t, r.pcq, 2, 5*time.Second) {
		client = append(client, r.received(t, w))
	}
	if !slices.Equal(client, []uint64{12, 30}) {
		t.Errorf("the client got %v, want [12 30]", client)
	}
}
