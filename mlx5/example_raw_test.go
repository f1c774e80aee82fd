package mlx5_test

import (
	"fmt"
	"log"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"github.com/mlx5go/mlx5go/wqe"
)

// A WQE encoded by the caller with package wqe, posted with
// Batch.AddRaw: an RDMA WRITE built into a one-WQEBB ring of its own. The
// driver sets the WQE's counter and QP number; the completion, asked for
// by the WQE's own CQ update bit, reports the raw WQE's opcode.
func ExampleBatch_AddRaw() {
	c, err := mlx5test.Open("cx7")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	buf, err := mlx5.AllocBuffer(8192)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16})
	if err != nil {
		log.Fatal(err)
	}
	// An RC QP connected to itself: its WRITE lands in its own memory.
	qp, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 8, MaxSendSGE: 1, MaxRecvWR: 1, MaxRecvSGE: 1})
	if err != nil {
		log.Fatal(err)
	}
	path, err := c.LoopbackPath(1)
	if err != nil {
		log.Fatal(err)
	}
	if err := qp.Connect(qp.QPN(), path); err != nil {
		log.Fatal(err)
	}

	mem := buf.Bytes()
	copy(mem, "raw and direct")
	// The WQE: QPN and counter are left 0 for the driver to set.
	w := make(wqe.Ring, wqe.WQEBB)
	r, err := wqe.BuildSend(w, 0, 1, &wqe.Send{Opcode: wqe.OpcodeRDMAWrite, Flags: wqe.SendSignaled,
		RemoteAddr: mr.Addr() + 4096, RKey: mr.RKey(), MaxSGE: 1,
		SGL: []wqe.SGE{{Addr: mr.Addr(), Length: 14, LKey: mr.LKey()}}})
	if err != nil {
		log.Fatal(err)
	}
	if err := qp.Begin().AddRaw(7, w[:r.WQEBBs*wqe.WQEBB]).Commit(); err != nil {
		log.Fatal(err)
	}

	var wc [1]mlx5.Completion
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if n, err := cq.Poll(wc[:]); err != nil {
			log.Fatal(err)
		} else if n == 1 {
			break
		} else if time.Now().After(deadline) {
			log.Fatal("no completion")
		}
	}
	fmt.Printf("wr %d: opcode %d (WCRaw %v), %v\n", wc[0].WrID, wc[0].Opcode, wc[0].Opcode == mlx5.WCRaw, wc[0].Status)
	fmt.Printf("written: %q\n", mem[4096:4096+14])
	// Output:
	// wr 7: opcode 136 (WCRaw true), success
	// written: "raw and direct"
}
