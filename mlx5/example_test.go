package mlx5_test

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
)

// Two RC QPs of one device, connected to each other: a batch of RDMA
// WRITEs and a SEND with immediate data rung with one doorbell, then the
// completions, waited for without busy polling. The device is the
// software ConnectX of package mlx5test; on a real one, open it with
// mlx5.Open("mlx5_0", nil) instead.
func Example() {
	c, err := mlx5test.Open("cx7")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	pd, err := c.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	// Memory the device reads and writes lives outside the Go heap.
	buf, err := mlx5.AllocBuffer(1 << 16)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 64, Events: true})
	if err != nil {
		log.Fatal(err)
	}
	opt := mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 16, MaxSendSGE: 1, MaxRecvWR: 16, MaxRecvSGE: 1}
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
	copy(mem, "hello, block storage")
	const src, dst, msg, inbox = 0, 4096, 8192, 12288
	copy(mem[msg:], "done")
	// B's receive for A's SEND.
	if err := b.PostRecv(100, []mlx5.SGE{{Addr: mr.Addr() + inbox, Length: 64, LKey: mr.LKey()}}); err != nil {
		log.Fatal(err)
	}

	// Four 5-byte RDMA WRITEs and the SEND, one doorbell. Only the SEND
	// asks for a completion; on an RC QP it completes after the WRITEs.
	batch := a.Begin()
	for i := range 4 {
		batch.Add(&mlx5.SendWR{WrID: uint64(i + 1), Opcode: mlx5.OpRDMAWrite,
			SGL:        []mlx5.SGE{{Addr: mr.Addr() + src + uint64(5*i), Length: 5, LKey: mr.LKey()}},
			RemoteAddr: mr.Addr() + dst + uint64(5*i), RKey: mr.RKey()})
	}
	batch.Add(&mlx5.SendWR{WrID: 5, Opcode: mlx5.OpSendImm, Imm: 0xcafe, Flags: mlx5.SendSignaled,
		SGL: []mlx5.SGE{{Addr: mr.Addr() + msg, Length: 4, LKey: mr.LKey()}}})
	if err := batch.Commit(); err != nil {
		log.Fatal(err)
	}

	// Wait for both completions: the SEND's and B's receive.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var done []mlx5.Completion
	var wc [4]mlx5.Completion
	for len(done) < 2 {
		if err := cq.Arm(false); err != nil {
			log.Fatal(err)
		}
		n, err := cq.Poll(wc[:])
		if err != nil {
			log.Fatal(err)
		}
		if done = append(done, wc[:n]...); n == 0 {
			if err := cq.Wait(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}
	// The two QPs' completions may come in either order.
	slices.SortFunc(done, func(x, y mlx5.Completion) int { return cmp.Compare(x.WrID, y.WrID) })
	for _, w := range done {
		fmt.Printf("wr %d: %v %v, %d bytes, imm %#x\n", w.WrID, w.Opcode, w.Status, w.ByteLen, w.Imm)
	}
	fmt.Printf("written: %q\n", mem[dst:dst+20])
	fmt.Printf("received: %q\n", mem[inbox:inbox+4])
	// Output:
	// wr 5: SEND success, 0 bytes, imm 0x0
	// wr 100: RECV success, 4 bytes, imm 0xcafe
	// written: "hello, block storage"
	// received: "done"
}

// Two UD QPs: an address handle for the destination port, a SEND to the
// other QP by number and Q_Key, and the receive, which starts with the
// 40-byte GRH the network put in front of the data (RoCE).
func Example_unreliableDatagram() {
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
	mr, err := pd.RegMR(buf.Bytes(), mlx5.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16})
	if err != nil {
		log.Fatal(err)
	}
	opt := mlx5.QPOptions{Type: mlx5.QPTypeUD, PD: pd, SendCQ: cq, RecvCQ: cq,
		MaxSendWR: 8, MaxSendSGE: 1, MaxInlineData: 64, MaxRecvWR: 8, MaxRecvSGE: 1}
	const qkey = 0x11111111
	var qps [2]*mlx5.QP
	for i := range qps {
		if qps[i], err = c.CreateQP(opt); err != nil {
			log.Fatal(err)
		}
		if err := qps[i].Ready(1, qkey); err != nil {
			log.Fatal(err)
		}
	}
	path, err := c.LoopbackPath(1)
	if err != nil {
		log.Fatal(err)
	}
	ah, err := pd.CreateAH(path)
	if err != nil {
		log.Fatal(err)
	}

	mem := buf.Bytes()
	const grh = 40
	if err := qps[1].PostRecv(1, []mlx5.SGE{{Addr: mr.Addr() + 4096, Length: grh + 1024, LKey: mr.LKey()}}); err != nil {
		log.Fatal(err)
	}
	if err := qps[0].PostSend(&mlx5.SendWR{WrID: 2, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled,
		Inline: [][]byte{[]byte("datagram")}, AH: ah, RemoteQPN: qps[1].QPN(), QKey: qkey}); err != nil {
		log.Fatal(err)
	}

	var wc [2]mlx5.Completion
	got := 0
	for deadline := time.Now().Add(10 * time.Second); got < 2 && time.Now().Before(deadline); {
		n, err := cq.Poll(wc[got:])
		if err != nil {
			log.Fatal(err)
		}
		got += n
	}
	for _, w := range wc[:got] {
		if w.Opcode == mlx5.WCRecv {
			fmt.Printf("received %q from QP %v with GRH %v\n", mem[4096+grh:4096+w.ByteLen], w.SrcQP == qps[0].QPN(), w.GRH)
		} else {
			fmt.Printf("sent: %v\n", w.Status)
		}
	}
	// Unordered output:
	// sent: success
	// received "datagram" from QP true with GRH true
}
