package uverbs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// Open a device, create a PD, CQ and RC QP, and take the QP to INIT.
func Example() {
	c, err := uverbs.Open("rxe0", &uverbs.Options{DriverID: uverbs.DriverRXE})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // releases whatever is still open

	pd, err := c.AllocPD(nil)
	if err != nil {
		log.Fatal(err)
	}
	// rxe requires room for its queue descriptions in the driver data
	// out (without it, EINVAL that says how much).
	sz, _ := uverbs.DriverOutSizesOf(uverbs.DriverRXE)
	cq, err := c.CreateCQ(uverbs.CQOptions{CQE: 64, DriverOut: make([]byte, sz.CQ)})
	if err != nil {
		log.Fatal(err)
	}
	qp, err := c.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq,
		Cap:       uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1},
		DriverOut: make([]byte, sz.QP)})
	if err != nil {
		log.Fatal(err)
	}
	err = qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, Port: 1, AccessFlags: uverbs.AccessLocalWrite},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags)
	if errors.Is(err, unix.EINVAL) {
		log.Fatal("the kernel refused the transition: ", err)
	}
	fmt.Println("QP", qp.QPN, "in INIT")
}

// Wait for the next async event, for at most a second.
func ExampleContext_NextAsyncEvent() {
	c, err := uverbs.Open("rxe0", &uverbs.Options{DriverID: uverbs.DriverRXE})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ev, err := c.NextAsyncEvent(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Println("no event")
	case err != nil:
		log.Fatal(err)
	case ev.Type == uverbs.EventSQDrained:
		fmt.Println("send queue drained on QP", ev.QP.QPN)
	}
}
