package flows

import (
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
)

// Objects says how a flow makes its CQs and QPs.
type Objects int

const (
	// VerbsObjects are made through the kernel's verbs with mlx5's driver
	// data, as libmlx5 makes them: mlx5's default.
	VerbsObjects Objects = iota
	// DEVXObjects are DEVX objects on UMEMs (CQOptions.DEVX,
	// QPOptions.DEVX).
	DEVXObjects
)

func (o Objects) String() string {
	if o == DEVXObjects {
		return "devx"
	}
	return "verbs"
}

// Loopback is two RC QPs of one context connected to each other, with the
// PD and the CQ they share: the smallest data path a flow can run.
type Loopback struct {
	PD   *mlx5.PD
	CQ   *mlx5.CQ
	A, B *mlx5.QP
}

// NewLoopback creates the pair on port 1, its CQ and QPs made as objs
// says, and connects it; t's cleanup closes it.
func NewLoopback(t testing.TB, c *mlx5.Context, objs Objects) *Loopback {
	t.Helper()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatalf("alloc pd: %v", err)
	}
	devx := objs == DEVXObjects
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 64, DEVX: devx})
	if err != nil {
		pd.Close()
		t.Fatalf("create cq: %v", err)
	}
	l := &Loopback{PD: pd, CQ: cq}
	t.Cleanup(func() { closeAll(t, l.A, l.B, l.CQ, l.PD) })
	opt := mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 16, MaxSendSGE: 2, MaxRecvWR: 16, MaxRecvSGE: 2,
		MkeyConfigure: true, MaxMkeyEntries: 4, DEVX: devx}
	for _, qp := range []**mlx5.QP{&l.A, &l.B} {
		if *qp, err = c.CreateQP(opt); err != nil {
			t.Fatalf("create qp: %v", err)
		}
	}
	path, err := c.LoopbackPath(1)
	if err != nil {
		t.Fatalf("loopback path: %v", err)
	}
	if err := l.A.Connect(l.B.QPN(), path); err != nil {
		t.Fatal(err)
	}
	if err := l.B.Connect(l.A.QPN(), path); err != nil {
		t.Fatal(err)
	}
	return l
}

// Wait polls the CQ until n completions arrived, failing the test after 10
// seconds.
func (l *Loopback) Wait(t testing.TB, n int) []mlx5.Completion {
	t.Helper()
	wc := make([]mlx5.Completion, n)
	got := 0
	deadline := time.Now().Add(10 * time.Second)
	for got < n {
		k, err := l.CQ.Poll(wc[got:])
		if err != nil {
			t.Fatalf("poll after %d of %d completions: %v", got, n, err)
		}
		got += k
		if got < n && time.Now().After(deadline) {
			t.Fatalf("%d of %d completions after 10 s: %+v", got, n, wc[:got])
		}
		if got < n {
			time.Sleep(50 * time.Microsecond)
		}
	}
	return wc
}

// buffer returns n bytes of registered device memory (mlx5.Buffer and
// MR) closed at t's cleanup.
func buffer(t testing.TB, pd *mlx5.PD, n int, access mlx5.AccessFlags) ([]byte, *mlx5.MR) {
	t.Helper()
	b, err := mlx5.AllocBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(b.Bytes(), access)
	if err != nil {
		b.Close()
		t.Fatalf("reg mr: %v", err)
	}
	t.Cleanup(func() { closeAll(t, mr, b) })
	return b.Bytes(), mr
}
