package mlx5_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
)

// TestDCQPFootprint measures what a DCI and a DCT take on the driver's
// side, as a storage initiator of many of them sees it (hwtest/flows'
// DCScale: DCIs of 128 RDMA WRITEs and READs with 2^3 streams, DCTs on
// one SRQ), on the cx7 model: the memory mapped for each QP's queues,
// exactly, and the Go heap each holds, logged. A DCI maps its send ring
// (the RDMA operations' 80-byte overhead, libmlx5's _sq_overhead: 128-byte
// WQEs, 128 of them, 16 KiB) and a page for its doorbell record; a DCT
// maps nothing (libmlx5 creates it without buffers: create_dct). The heap
// is counted twice: every allocation still held (HeapAlloc, the model's
// objects included), and those made by the driver's code alone (the heap
// profile's allocation sites).
func TestDCQPFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement")
	}
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	r := newDCRig(t, "cx7", model.Options{})
	const nDCI, nDCT = 64, 256

	heap := func() (all, driver uint64) {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		recs := make([]runtime.MemProfileRecord, 1<<16)
		n, ok := runtime.MemProfile(recs, false)
		if !ok {
			t.Fatalf("heap profile of %d records", n)
		}
		for _, rec := range recs[:n] {
			if rec.InUseBytes() > 0 && allocatedBy(rec.Stack()) {
				driver += uint64(rec.InUseBytes())
			}
		}
		return ms.HeapAlloc, driver
	}
	var dcis, dcts []*mlx5.QP
	defer func() {
		for _, q := range append(dcis, dcts...) {
			q.Close()
		}
	}()
	all0, drv0 := heap()
	for range nDCI {
		q, err := r.c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCI, PD: r.pd, SendCQ: r.cq, RecvCQ: r.cq, MaxSendWR: 128,
			SendOps: mlx5.Opcodes(mlx5.OpRDMAWrite, mlx5.OpRDMARead), DCIStreams: &mlx5.DCIStreams{LogConcurrent: 3, LogErrored: 2}})
		if err != nil {
			t.Fatal(err)
		}
		r.toRTS(t, q)
		dcis = append(dcis, q)
	}
	all1, drv1 := heap()
	for range nDCT {
		q, err := r.c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCT, PD: r.pd, SendCQ: r.cq, RecvCQ: r.cq, SRQ: r.srq, DCAccessKey: 7})
		if err != nil {
			t.Fatal(err)
		}
		dcts = append(dcts, q)
	}
	all2, drv2 := heap()

	const ring, record = 128 * 128, 4096
	for _, q := range dcis {
		if got := mlx5.QueueBytes(q); got != ring+record {
			t.Errorf("DCI %#x maps %d bytes, want %d (a %d-byte send ring and a page for the doorbell record)", q.QPN(), got, ring+record, ring)
		}
	}
	for _, q := range dcts {
		if got := mlx5.QueueBytes(q); got != 0 {
			t.Errorf("DCT %#x maps %d bytes, want none", q.QPN(), got)
		}
	}
	if drv1 <= drv0 || drv2 <= drv1 {
		t.Errorf("the driver's heap did not grow with its QPs: %d, %d, %d bytes", drv0, drv1, drv2)
	}
	per := func(a, b uint64, n int) int64 { return (int64(b) - int64(a)) / int64(n) }
	t.Logf("a DCI (128 WRs, 2^3 streams): %d bytes mapped, %d bytes of heap in the driver, %d with the model's", mlx5.QueueBytes(dcis[0]), per(drv0, drv1, nDCI), per(all0, all1, nDCI))
	t.Logf("a DCT: %d bytes mapped, %d bytes of heap in the driver, %d with the model's", mlx5.QueueBytes(dcts[0]), per(drv1, drv2, nDCT), per(all1, all2, nDCT))
}

// allocatedBy says whether stack is the driver's allocation: made by
// code of mlx5go's module (package mlx5 or what it builds on: wqe,
// doorbell, prm, uverbs, internal) with no frame of the model (which
// uses prm too) and none of a test.
func allocatedBy(stack []uintptr) bool {
	const module = "github.com/mlx5go/mlx5go/"
	driver := false
	frames := runtime.CallersFrames(stack)
	for more := true; more; {
		var f runtime.Frame
		f, more = frames.Next()
		switch {
		case strings.HasPrefix(f.Function, module+"model."):
			return false
		case strings.HasSuffix(f.File, "_test.go"):
			return driver
		case strings.HasPrefix(f.Function, module):
			driver = true
		}
	}
	return driver
}
