package flows

import (
	"errors"
	"slices"
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
	devx := objs == DEVXObjects
	opt := mlx5.QPOptions{MaxSendWR: 16, MaxSendSGE: 2, MaxRecvWR: 16, MaxRecvSGE: 2,
		MkeyConfigure: true, MaxMkeyEntries: 4, DEVX: devx}
	return newLoopback(t, c, mlx5.CQOptions{Entries: 64, DEVX: devx}, opt, opt)
}

// newLoopback creates a PD, a CQ of cqOpt, A of optA and B of optB on
// them (their PD and CQs filled in), and connects the pair on port 1.
// A QP option the device does not have (ErrUnsupported) skips the test.
func newLoopback(t testing.TB, c *mlx5.Context, cqOpt mlx5.CQOptions, optA, optB mlx5.QPOptions) *Loopback {
	t.Helper()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatalf("alloc pd: %v", err)
	}
	cq, err := c.CreateCQ(cqOpt)
	if err != nil {
		pd.Close()
		t.Fatalf("create cq: %v", err)
	}
	l := &Loopback{PD: pd, CQ: cq}
	t.Cleanup(func() { closeAll(t, l.A, l.B, l.CQ, l.PD) })
	for _, q := range []struct {
		qp  **mlx5.QP
		opt mlx5.QPOptions
	}{{&l.A, optA}, {&l.B, optB}} {
		q.opt.PD, q.opt.SendCQ, q.opt.RecvCQ = pd, cq, cq
		*q.qp, err = c.CreateQP(q.opt)
		if errors.Is(err, mlx5.ErrUnsupported) {
			t.Skipf("create qp: %v", err)
		}
		if err != nil {
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

// mustCome bounds the flows' waits for what must come (completions,
// events, responses, progress): a wait ends as soon as it comes, and the
// bound is long enough that a loaded machine or qemu-user does not fail a
// flow that is right, while a loss still fails it, a minute late.
const mustCome = 60 * time.Second

// Wait polls the CQ until n completions arrived, failing the test after
// mustCome.
func (l *Loopback) Wait(t testing.TB, n int) []mlx5.Completion {
	t.Helper()
	wc := make([]mlx5.Completion, n)
	got := 0
	deadline := time.Now().Add(mustCome)
	for got < n {
		k, err := l.CQ.Poll(wc[got:])
		if err != nil {
			t.Fatalf("poll after %d of %d completions: %v", got, n, err)
		}
		got += k
		if got < n && time.Now().After(deadline) {
			t.Fatalf("%d of %d completions after %v: %+v", got, n, mustCome, wc[:got])
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

// post posts wr on qp, failing the test if the driver refuses it.
func post(t testing.TB, qp *mlx5.QP, wr mlx5.SendWR) {
	t.Helper()
	if err := qp.PostSend(&wr); err != nil {
		t.Fatalf("post %d: %v", wr.WrID, err)
	}
}

// recv posts a receive of one SGE on qp.
func recv(t testing.TB, qp *mlx5.QP, wrID uint64, sge mlx5.SGE) {
	t.Helper()
	if err := qp.PostRecv(wrID, []mlx5.SGE{sge}); err != nil {
		t.Fatalf("post receive %d: %v", wrID, err)
	}
}

// want is a completion a flow expects: its work request, QP and status;
// for a success also its opcode and, for receives and RDMA READs, its
// byte length. (The opcode of a failed completion is undefined, as
// ibv_poll_cq(3) says.)
type want struct {
	wrID    uint64
	qp      *mlx5.QP
	status  mlx5.WCStatus
	opcode  mlx5.WCOpcode
	byteLen uint32
}

// ok is the successful completion of a send work request of qp; okLen
// that of a receive or an RDMA READ of n bytes.
func ok(qp *mlx5.QP, wrID uint64, op mlx5.WCOpcode) want {
	return want{wrID: wrID, qp: qp, opcode: op}
}

func okLen(qp *mlx5.QP, wrID uint64, op mlx5.WCOpcode, n uint32) want {
	return want{wrID: wrID, qp: qp, opcode: op, byteLen: n}
}

// expect polls the CQ for exactly the completions wants lists, in any
// order (the two QPs' completions interleave), each once: a completion
// of another work request, or a second one of the same, fails the test,
// and so does one that arrives within a millisecond after the last.
func (l *Loopback) expect(t testing.TB, wants ...want) {
	t.Helper()
	seen := make([]bool, len(wants))
	for _, wc := range l.Wait(t, len(wants)) {
		i := slices.IndexFunc(wants, func(w want) bool { return w.wrID == wc.WrID && w.qp.QPN() == wc.QPN })
		switch {
		case i < 0:
			t.Fatalf("completion of a work request nobody waits for: %+v (want %v)", wc, wants)
		case seen[i]:
			t.Fatalf("a second completion of work request %d of QP %#x: %+v", wc.WrID, wc.QPN, wc)
		}
		seen[i] = true
		w := wants[i]
		switch {
		case wc.Status != w.status:
			t.Errorf("work request %d of QP %#x: %v (vendor syndrome %#x), want %v", wc.WrID, wc.QPN, wc.Status, wc.VendorErr, w.status)
		case w.status != mlx5.WCSuccess:
		case wc.Opcode != w.opcode:
			t.Errorf("work request %d of QP %#x: opcode %v, want %v", wc.WrID, wc.QPN, wc.Opcode, w.opcode)
		case (w.opcode == mlx5.WCRecv || w.opcode == mlx5.WCRDMARead) && wc.ByteLen != w.byteLen:
			t.Errorf("work request %d of QP %#x: %d bytes, want %d", wc.WrID, wc.QPN, wc.ByteLen, w.byteLen)
		}
	}
	l.quiet(t, time.Millisecond)
}

// quiet fails the test if a completion arrives within d.
func (l *Loopback) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	var wc [1]mlx5.Completion
	for deadline := time.Now().Add(d); ; {
		n, err := l.CQ.Poll(wc[:])
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if n != 0 {
			t.Fatalf("unexpected completion %+v", wc[0])
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}
