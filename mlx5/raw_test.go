package mlx5_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/wqe"
)

// rawRig is a rig with an RC QP connected to itself, for raw WQEs.
type rawRig struct {
	*rig
	a   *mlx5.QP
	mem []byte
}

func newRawRig(t *testing.T, sendWR, sendSGE int) *rawRig {
	t.Helper()
	r := newRig(t, "cx7", model.Options{}, 256)
	a := r.qp(t, mlx5.QPOptions{MaxSendWR: sendWR, MaxSendSGE: sendSGE, MaxRecvWR: 1, MaxRecvSGE: 1}, true)
	return &rawRig{rig: r, a: a, mem: r.buf.Bytes()}
}

// write is an RDMA WRITE of the SGEs' bytes to dst, encoded with package
// wqe into a ring of its own (counter 0, QPN 0), signaled or not.
func (p *rawRig) write(t *testing.T, dst uint64, signaled bool, sgl ...wqe.SGE) []byte {
	t.Helper()
	s := &wqe.Send{Opcode: wqe.OpcodeRDMAWrite, RemoteAddr: p.mr.Addr() + dst, RKey: p.mr.RKey(), MaxSGE: len(sgl), SGL: sgl}
	if signaled {
		s.Flags = wqe.SendSignaled
	}
	w := make(wqe.Ring, 4*wqe.WQEBB)
	r, err := wqe.BuildSend(w, 0, 4, s)
	if err != nil {
		t.Fatal(err)
	}
	return w[:r.WQEBBs*wqe.WQEBB]
}

func (p *rawRig) sge(off uint64, n uint32) wqe.SGE {
	return wqe.SGE{Addr: p.mr.Addr() + off, Length: n, LKey: p.mr.LKey()}
}

// collect is the n completions that must come, and no more.
func (p *rawRig) collect(t *testing.T, n int) []mlx5.Completion {
	t.Helper()
	got, err := p.rig.poll(t, n, 0)
	if err != nil || len(got) != n {
		t.Fatalf("%d of %d completions: %v", len(got), n, err)
	}
	return got
}

// TestAddRawCompletesOnce: raw WQEs, one and two WQEBBs, mixed with
// ordinary work requests in batches that go round a send queue of 8
// WQEBBs many times (so raw WQEs cross its end): each work request
// completes exactly once, in order, raw ones with WCRaw, and every
// WRITE's bytes arrive.
func TestAddRawCompletesOnce(t *testing.T) {
	p := newRawRig(t, 8, 4)
	for i := range 4096 {
		p.mem[i] = byte(i*7 + 1)
	}
	next := uint64(1)
	for round := range 40 {
		b := p.a.Begin()
		var want []mlx5.WCOpcode
		dst := uint64(8192 + round*256)
		// One WQEBB raw, a two-WQEBB raw (4 SGEs), an ordinary WRITE.
		b.AddRaw(next, p.write(t, dst, true, p.sge(uint64(round), 16)))
		want = append(want, mlx5.WCRaw)
		b.AddRaw(next+1, p.write(t, dst+16, true, p.sge(100, 4), p.sge(200, 4), p.sge(300, 4), p.sge(400, 4)))
		want = append(want, mlx5.WCRaw)
		b.Add(&mlx5.SendWR{WrID: next + 2, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
			SGL: []mlx5.SGE{{Addr: p.mr.Addr() + 500, Length: 8, LKey: p.mr.LKey()}}, RemoteAddr: p.mr.Addr() + dst + 32, RKey: p.mr.RKey()})
		want = append(want, mlx5.WCRDMAWrite)
		if err := b.Commit(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got := p.collect(t, len(want))
		for i, w := range got {
			if w.WrID != next+uint64(i) || w.Opcode != want[i] || w.Status != mlx5.WCSuccess || w.QPN != p.a.QPN() {
				t.Fatalf("round %d completion %d: %+v, want wr %d %v", round, i, w, next+uint64(i), want[i])
			}
		}
		m := p.mem
		exp := append(append(bytes.Clone(m[round:round+16]), m[100:104]...), m[200:204]...)
		exp = append(append(append(exp, m[300:304]...), m[400:404]...), m[500:508]...)
		if got := m[dst : dst+40]; !bytes.Equal(got, exp) {
			t.Fatalf("round %d: written %x, want %x", round, got, exp)
		}
		next += uint64(len(want))
	}
}

// TestAddRawRefused: a malformed raw WQE poisons its batch with
// ErrInvalid and writes nothing into the send queue; one that fits the
// QP but not the room left is ErrQueueFull; the QP posts on afterwards,
// and no refused work request ever completes.
func TestAddRawRefused(t *testing.T) {
	p := newRawRig(t, 8, 1) // the largest WQE: one WQEBB
	good := p.write(t, 8192, true, p.sge(0, 8))
	ds := func(w []byte, d uint8) []byte { w = bytes.Clone(w); w[7] = d; return w }
	ring, _ := mlx5.SendRing(p.a)
	slots, maxWQE := len(ring)/wqe.WQEBB, mlx5.SendMaxWQE(p.a)
	// A NOP of one WQEBB more than the QP's largest work request, ds
	// consistent with it.
	long := make([]byte, (maxWQE+1)*wqe.WQEBB)
	long[3], long[7] = wqe.OpcodeNOP, uint8(maxWQE*4+1)
	if maxWQE >= 16 {
		t.Fatalf("the QP takes WQEs of %d WQEBBs", maxWQE)
	}
	for _, c := range []struct {
		name string
		w    []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"shorter than a ctrl segment", good[:15]},
		{"ds 0", ds(good, 0)},
		{"ds past its bytes", ds(good[:32], 3)},
		{"ds short of its last WQEBB", ds(long, 4)},
		{"over the QP's largest WQE", long},
		{"over 63 units", make([]byte, wqe.MaxRawWQE+64)},
	} {
		ring, pi := mlx5.SendRing(p.a)
		before := bytes.Clone(ring)
		err := p.a.Begin().AddRaw(1, c.w).Commit()
		if !errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
		ring2, pi2 := mlx5.SendRing(p.a)
		if pi2 != pi || !bytes.Equal(ring2, before) {
			t.Errorf("%s: the send queue changed (counter %d to %d)", c.name, pi, pi2)
		}
	}
	// A bad one after a good one in a batch: the batch is undone.
	if err := p.a.Begin().AddRaw(2, good).AddRaw(3, ds(good, 0)).Commit(); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("good then bad: %v", err)
	}
	// Full: the ring holds slots one-WQEBB WQEs; the next does not fit.
	b := p.a.Begin()
	for i := range slots + 1 {
		b.AddRaw(uint64(10+i), good)
	}
	if err := b.Commit(); !errors.Is(err, mlx5.ErrQueueFull) {
		t.Errorf("WQE %d: %v, want ErrQueueFull", slots, err)
	}
	if err := p.a.Begin().AddRaw(100, good).Commit(); err != nil {
		t.Fatal(err)
	}
	if got := p.collect(t, 1); got[0].WrID != 100 || got[0].Status != mlx5.WCSuccess {
		t.Fatalf("after the refusals: %+v", got[0])
	}

	// A nil batch, a QP with no send queue, a closed QP.
	var nb *mlx5.Batch
	if nb.AddRaw(1, good) != nil {
		t.Error("nil batch")
	}
	noSQ := p.qp(t, mlx5.QPOptions{MaxRecvWR: 1, MaxRecvSGE: 1}, false)
	if err := noSQ.Begin().AddRaw(1, good).Commit(); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("no send queue: %v", err)
	}
	if err := p.a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.a.Begin().AddRaw(1, good).Commit(); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("closed QP: %v, want ErrClosed", err)
	}
}

// TestAddRawInError: a well-formed raw WQE the device cannot run (its
// SGE's key is not a key) completes in error, and the raw WQEs after it
// are flushed, each once, with their own wrIDs.
func TestAddRawInError(t *testing.T) {
	p := newRawRig(t, 8, 1)
	bad := p.sge(0, 8)
	bad.LKey ^= 0xffff00
	b := p.a.Begin().AddRaw(1, p.write(t, 8192, true, bad))
	for i := range 3 {
		b.AddRaw(uint64(2+i), p.write(t, 8192, true, p.sge(0, 8)))
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	got := p.collect(t, 4)
	if got[0].WrID != 1 || got[0].Status == mlx5.WCSuccess || got[0].Status == mlx5.WCWRFlushErr {
		t.Errorf("the bad WQE: %+v", got[0])
	}
	for i, w := range got[1:] {
		if w.WrID != uint64(2+i) || w.Status != mlx5.WCWRFlushErr {
			t.Errorf("completion %d: %+v, want wr %d flushed", i+1, w, 2+i)
		}
	}
}

// TestAddRawNoAlloc: posting a raw WQE allocates nothing, as any other
// post. The QP is in INIT, where the device runs nothing (the model
// allocates as it runs WQEs, and AllocsPerRun counts every goroutine's
// allocations).
func TestAddRawNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := newRawRig(t, 8, 1)
	qp := p.qp(t, mlx5.QPOptions{MaxSendWR: 8, MaxSendSGE: 1, MaxRecvWR: 1, MaxRecvSGE: 1}, false)
	init := mlx5.QPAttrState | mlx5.QPAttrPKeyIndex | mlx5.QPAttrPort | mlx5.QPAttrAccessFlags
	if err := qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1}, init); err != nil {
		t.Fatal(err)
	}
	w := p.write(t, 8192, true, p.sge(0, 8))
	ring, _ := mlx5.SendRing(qp)
	allocs := testing.AllocsPerRun(len(ring)/wqe.WQEBB-2, func() {
		if err := qp.Begin().AddRaw(1, w).Commit(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations a post", allocs)
	}
}
