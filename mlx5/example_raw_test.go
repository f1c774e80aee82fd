package mlx5_test

import (
	"context"
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
	opt := mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 8, MaxSendSGE: 1, MaxRecvWR: 1, MaxRecvSGE: 1}
	a, err := c.CreateQP(opt)
	if err != nil {
		log.Fatal(err)
	}
	b, err := c.CreateQP(opt)
	if err != nil {
		log.Fatal(err)
	}
	path, err := c.LoopbackPath(1)
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Connect(b.QPN(), path); err != nil {
		log.Fatal(err)
	}
	if err := b.Connect(a.QPN(), path); err != nil {
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
	if err := a.Begin().AddRaw(7, w[:r.WQEBBs*wqe.WQEBB]).Commit(); err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wc [1]mlx5.Completion
	for {
		n, err := cq.Poll(wc[:])
		if err != nil {
			log.Fatal(err)
		}
		if n == 1 {
			break
		}
		if ctx.Err() != nil {
			log.Fatal(ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("wr %d: opcode %d (WCRaw %v), %v\n", wc[0].WrID, wc[0].Opcode, wc[0].Opcode == mlx5.WCRaw, wc[0].Status)
	fmt.Printf("written: %q\n", mem[4096:4096+14])
	// Output:
	// wr 7: opcode 136 (WCRaw true), success
	// written: "raw and direct"
}
