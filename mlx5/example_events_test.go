package mlx5_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
)

// A DEVX CQ's completion events on an event channel of the program's own:
// the CQ is armed, a SEND completes on it, and the event names the CQ by
// the cookie it was subscribed with and, in its EQE (struct mlx5_eqe_comp),
// by its number.
func ExampleEventChannel() {
	c, err := mlx5test.Open("cx7")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	buf, err := mlx5.AllocBuffer(1 << 12)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), mlx5.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	// Events gives the DEVX CQ Arm and Wait.
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16, DEVX: true, Events: true})
	if err != nil {
		log.Fatal(err)
	}
	ch, err := c.NewEventChannel(mlx5.EventChannelOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	const comp = 0x00 // MLX5_EVENT_TYPE_COMP
	if err := ch.Subscribe(cq, []uint16{comp}, 0xfeed); err != nil {
		log.Fatal(err)
	}

	opt := mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxSendSGE: 1, MaxRecvWR: 4, MaxRecvSGE: 1, DEVX: true}
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
	if err := b.PostRecv(1, []mlx5.SGE{{Addr: mr.Addr() + 64, Length: 64, LKey: mr.LKey()}}); err != nil {
		log.Fatal(err)
	}
	if err := cq.Arm(false); err != nil {
		log.Fatal(err)
	}
	batch := a.Begin()
	batch.Add(&mlx5.SendWR{WrID: 2, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled,
		SGL: []mlx5.SGE{{Addr: mr.Addr(), Length: 8, LKey: mr.LKey()}}})
	if err := batch.Commit(); err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := ch.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	cqn := binary.BigEndian.Uint32(ev.EQE[0x38:]) & 0xffffff // mlx5_eqe_comp.cqn
	fmt.Printf("event type %#x, cookie %#x, its CQ's: %v\n", ev.Type(), ev.Cookie, cqn == cq.CQN())
	// The CQ's own completion channel got the same event.
	if err := cq.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	var wc [4]mlx5.Completion
	n := 0
	for n < 2 {
		k, err := cq.Poll(wc[n:])
		if err != nil {
			log.Fatal(err)
		}
		n += k
	}
	fmt.Println("completions:", n)
	// Output:
	// event type 0x0, cookie 0xfeed, its CQ's: true
	// completions: 2
}
