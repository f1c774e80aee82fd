package cm_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/mlx5"
)

// Connect a QP of rxe0, the kernel's soft RoCE, to a librdmacm server
// (rdmacm-utils' "ucmatose -b 192.0.2.1 -p 7471 -C 0") and wait for it to
// disconnect. OpenVerbs gives rxe's kernel driver the driver data it
// requires; the QP carries the connection, not data (mlx5go's data path
// is mlx5's). It needs rxe0 (rdma link add rxe0 type rxe netdev ...), so
// it does not run with the tests: the lab's TestLabOpenVerbs does the
// same.
func ExampleOpenVerbs() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := cm.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	dev, err := cm.OpenVerbs("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close() // after the connection's Close (the deferred calls run last first)
	qp, err := dev.CreateQP(mlx5.QPTypeRC)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := m.Dial(ctx, "tcp", "192.0.2.1:7471", &cm.DialOptions{QP: qp})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	a, _ := qp.Query(mlx5.QPAttrDestQPN)
	fmt.Printf("QP %#x connected to QP %#x\n", qp.QPN(), a.DestQPN)
	<-conn.Done() // ucmatose disconnects
	fmt.Println(conn.Err())
}
