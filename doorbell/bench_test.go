package doorbell

import (
	"encoding/json"
	"os"
	"testing"
)

// The benchmarks ring into ordinary memory, as the oracle's libmlx5 bench
// does (its UAR is a fake page, not write-combining MMIO), so they measure
// the CPU cost of the record store, the barriers and the register stores.

func benchSQ(b *testing.B) (*SQ, *fakeDevice) {
	d := newFake()
	q, err := NewSQ(d.rec, d.reg(256), 256)
	if err != nil {
		b.Fatal(err)
	}
	return q, d
}

// BenchmarkRing: the 8-byte doorbell of a multi-WQE post.
func BenchmarkRing(b *testing.B) {
	q, _ := benchSQ(b)
	ctrl := make([]byte, WQEBB)
	b.ReportAllocs()
	var c uint16
	for b.Loop() {
		c++
		_ = q.Ring(c, ctrl)
	}
}

// BenchmarkRingBF64: the BlueFlame copy of a one-WQEBB WQE (the oracle's
// wr_rdma_write_sge1 post).
func BenchmarkRingBF64(b *testing.B) { benchBF(b, 1) }

// BenchmarkRingBF256: the BlueFlame copy of a full half (4 WQEBBs).
func BenchmarkRingBF256(b *testing.B) { benchBF(b, 4) }

func benchBF(b *testing.B, wqebbs int) {
	q, _ := benchSQ(b)
	wqe := make([]byte, wqebbs*WQEBB)
	b.ReportAllocs()
	b.SetBytes(int64(len(wqe)))
	var c uint16
	for b.Loop() {
		c++
		_ = q.RingBF(c, wqe, nil)
	}
}

// BenchmarkRQRing: the receive counter.
func BenchmarkRQRing(b *testing.B) {
	d := newFake()
	q, _ := NewRQ(d.rec)
	b.ReportAllocs()
	var c uint16
	for b.Loop() {
		c++
		q.Ring(c)
	}
}

// BenchmarkCQArm: a CQ arm (record word and the UAR write at 0x20).
func BenchmarkCQArm(b *testing.B) {
	d := newFake()
	c, _ := NewCQ(d.rec, d.uar, 0x401)
	b.ReportAllocs()
	var ci uint32
	for b.Loop() {
		ci++
		c.Arm(ci, ArmNext, ci)
	}
}

// TestRingAllocs: the hot-path methods allocate nothing.
func TestRingAllocs(t *testing.T) {
	d := newFake()
	q, _ := NewSQ(d.rec, d.reg(256), 256)
	rq, _ := NewRQ(d.rec)
	cq, _ := NewCQ(u64bytes(8), d.uar, 1)
	wqe := make([]byte, 2*WQEBB)
	for name, f := range map[string]func(){
		"Ring":   func() { _ = q.Ring(1, wqe) },
		"RingBF": func() { _ = q.RingBF(1, wqe[:WQEBB], wqe[WQEBB:]) },
		"RQ":     func() { rq.Ring(1) },
		"SetCI":  func() { cq.SetCI(1) },
		"Arm":    func() { cq.Arm(1, ArmSolicited, 1) },
		"errors": func() { _ = q.Ring(1, nil); _ = q.RingBF(1, nil, nil) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocs", name, n)
		}
	}
}

// TestBenchJSON keeps the libmlx5 figures docs/DOORBELL.md compares with
// readable: the copy in testdata must hold the post benches.
func TestBenchJSON(t *testing.T) {
	raw, err := os.ReadFile("testdata/bench.json")
	if err != nil {
		t.Fatal(err)
	}
	var bj struct {
		RDMACore string `json:"rdma_core"`
		Benches  []struct {
			Name    string  `json:"name"`
			NsPerOp float64 `json:"ns_per_op"`
		} `json:"benches"`
	}
	if err := json.Unmarshal(raw, &bj); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, b := range bj.Benches {
		got[b.Name] = b.NsPerOp
	}
	for _, n := range []string{"wr_rdma_write_sge1", "post_send_rdma_write_sge1", "wr_rdma_write_batch16"} {
		if got[n] <= 0 {
			t.Errorf("bench.json has no %s", n)
		}
	}
	if bj.RDMACore != "44.0-2" {
		t.Errorf("bench.json is for rdma-core %q", bj.RDMACore)
	}
}
