package mlx5_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// The errors of the public API (issue 15, item 5): each is a
// *mlx5.Error naming the operation and the object once, errors.Is reaches
// its sentinel and errno, and its reason is the right one.

// TestKernelRefusalsAreErrors: a kernel refusal of a DEVX call is a
// *mlx5.Error that wraps the errno, like every other failure.
func TestKernelRefusalsAreErrors(t *testing.T) {
	c, _ := onModel(t, "cx7")
	o := createAll(t, c)
	query := mailbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(query, uint64(o.qpn))
	for _, k := range []struct {
		name string
		call func() error
	}{
		{"CreateObj of a query command", func() error { _, err := c.CreateObj(query, make([]byte, 272)); return err }},
		{"GeneralCmd of a create command", func() error {
			return c.GeneralCmd(mailbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD), make([]byte, 16))
		}},
		{"DevxObj.Query naming another object", func() error { return o.cq.Query(query, make([]byte, 272)) }},
		{"DevxObj.Modify naming another object", func() error { return o.cq.Modify(query, make([]byte, 272)) }},
	} {
		err := k.call()
		if !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", k.name, err)
		}
		var ke *model.KernelError
		if !errors.As(err, &ke) {
			t.Errorf("%s: %v does not carry the kernel's refusal", k.name, err)
		}
		mlx5.CheckAPIError(t, err)
	}
}

// TestPostMkeyConfigureClosed: a configure on a closed QP names the
// operation it is, not "post send".
func TestPostMkeyConfigureClosed(t *testing.T) {
	c := mlx5test.New(t, "cx7")
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 8, MkeyConfigure: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	err = qp.PostMkeyConfigure(&mlx5.MkeyConfigureWR{Mkey: m, List: []mlx5.KLM{{ByteCount: 8}}})
	var e *mlx5.Error
	if !errors.Is(err, mlx5.ErrClosed) || !errors.As(err, &e) || e.Op != "post mkey configure" {
		t.Errorf("configure on a closed QP: %v, want ErrClosed from \"post mkey configure\"", err)
	}
	mlx5.CheckAPIError(t, err)
	// The first work request of a batch names its operation.
	err = qp.Begin().AddMkeyConfigure(&mlx5.MkeyConfigureWR{Mkey: m}).Add(&mlx5.SendWR{Opcode: mlx5.OpNOP}).Commit()
	if !errors.Is(err, mlx5.ErrClosed) || !errors.As(err, &e) || e.Op != "post mkey configure" {
		t.Errorf("a batch of a configure, then a NOP, on a closed QP: %v, want ErrClosed from \"post mkey configure\"", err)
	}
	err = qp.Begin().Add(&mlx5.SendWR{Opcode: mlx5.OpNOP}).AddMkeyConfigure(&mlx5.MkeyConfigureWR{Mkey: m}).Commit()
	if !errors.Is(err, mlx5.ErrClosed) || !errors.As(err, &e) || e.Op != "post send" {
		t.Errorf("a batch of a NOP, then a configure, on a closed QP: %v, want ErrClosed from \"post send\"", err)
	}
}

// TestDEVXQPTransitions: a DEVX QP refuses a move the IB spec has not
// (RTS to INIT) as invalid (EINVAL, as ib_modify_qp_is_ok refuses it for
// a verbs QP), and a move into or out of SQD, which the IB spec has but a
// DEVX QP does not, as unsupported; the message names the operation and
// the QP once.
func TestDEVXQPTransitions(t *testing.T) {
	c := mlx5test.New(t, "cx7")
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16, DEVX: true})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 8, MaxRecvWR: 8, DEVX: true})
	if err != nil {
		t.Fatal(err)
	}
	path, err := c.LoopbackPath(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Connect(qp.QPN(), path); err != nil {
		t.Fatal(err)
	}
	err = qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateInit}, mlx5.QPAttrState)
	if !errors.Is(err, mlx5.ErrInvalid) || !errors.Is(err, unix.EINVAL) || errors.Is(err, mlx5.ErrUnsupported) ||
		!strings.Contains(err.Error(), "RTS to INIT") || strings.Contains(err.Error(), "SQD") {
		t.Errorf("RTS to INIT: %v, want ErrInvalid (EINVAL) naming RTS to INIT", err)
	}
	mlx5.CheckAPIError(t, err)
	err = qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateSQD}, mlx5.QPAttrState)
	if !errors.Is(err, mlx5.ErrUnsupported) || !errors.Is(err, unix.EOPNOTSUPP) || !strings.Contains(err.Error(), "RTS to SQD") {
		t.Errorf("RTS to SQD: %v, want ErrUnsupported (EOPNOTSUPP) naming RTS to SQD", err)
	}
	mlx5.CheckAPIError(t, err)
	if st, err := qp.Query(mlx5.QPAttrState); err != nil || st.State != mlx5.QPStateRTS {
		t.Errorf("after the refused moves: %v %v, want RTS", st.State, err)
	}
	// Connect names its step, once.
	err = qp.Connect(qp.QPN(), path)
	if err == nil || !strings.Contains(err.Error(), "to INIT") {
		t.Errorf("Connect of a QP in RTS: %v, want a failure naming the move to INIT", err)
	}
	mlx5.CheckAPIError(t, err)
}

// TestBusyCQNamesItsQPs: a CQ that one QP uses for both send and receive
// says so, not "2 QPs".
func TestBusyCQNamesItsQPs(t *testing.T) {
	c := mlx5test.New(t, "cx7")
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.CreateCQ(mlx5.CQOptions{Entries: 16})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 8, MaxRecvWR: 8})
	if err != nil {
		t.Fatal(err)
	}
	qpName := fmt.Sprintf("QP %#x", qp.QPN())
	err = cq.Close()
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), qpName+" uses it") || strings.Contains(err.Error(), "2 QPs") {
		t.Errorf("a CQ one QP uses twice: %v, want EBUSY saying %s uses it", err, qpName)
	}
	mlx5.CheckAPIError(t, err)
	qp2, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: other, MaxSendWR: 8, MaxRecvWR: 8})
	if err != nil {
		t.Fatal(err)
	}
	err = cq.Close()
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "2 QPs use it") {
		t.Errorf("a CQ two QPs use: %v, want EBUSY saying 2 QPs use it", err)
	}
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	qp2Name := fmt.Sprintf("QP %#x", qp2.QPN())
	if err := other.Close(); !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), qp2Name+" uses it") {
		t.Errorf("a receive CQ: %v, want EBUSY saying %s uses it", err, qp2Name)
	}
}

// TestCommitWithoutBegin: a Commit with no batch begun names the QP, or
// says the batch is none of a QP's.
func TestCommitWithoutBegin(t *testing.T) {
	var zero mlx5.Batch
	err := zero.Commit()
	if !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("Commit of a zero Batch: %v, want ErrInvalid", err)
	}
	mlx5.CheckAPIError(t, err)
	c := mlx5test.New(t, "cx7")
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 8})
	if err != nil {
		t.Fatal(err)
	}
	b := qp.Begin()
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	err = b.Commit()
	var e *mlx5.Error
	if !errors.Is(err, mlx5.ErrInvalid) || !errors.As(err, &e) || e.Obj != fmt.Sprintf("QP %#x", qp.QPN()) {
		t.Errorf("a second Commit: %v, want ErrInvalid naming the QP", err)
	}
	mlx5.CheckAPIError(t, err)
}

// udPair is two UD QPs ready on a context of the model, and what a send
// between them needs.
type udPair struct {
	c    *mlx5.Context
	pd   *mlx5.PD
	cq   *mlx5.CQ
	mr   *mlx5.MR
	a, b *mlx5.QP
	path mlx5.AddressPath
}

const udQKey = 0x11111111

func newUDPair(t *testing.T) *udPair {
	t.Helper()
	c := mlx5test.New(t, "cx7")
	u := &udPair{c: c}
	var err error
	if u.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	buf, err := mlx5.AllocBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	if u.mr, err = u.pd.RegMR(buf.Bytes(), mlx5.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if u.cq, err = c.CreateCQ(mlx5.CQOptions{Entries: 16}); err != nil {
		t.Fatal(err)
	}
	opt := mlx5.QPOptions{Type: mlx5.QPTypeUD, PD: u.pd, SendCQ: u.cq, RecvCQ: u.cq, MaxSendWR: 8, MaxInlineData: 64, MaxRecvWR: 8, MaxRecvSGE: 1}
	for _, qp := range []**mlx5.QP{&u.a, &u.b} {
		if *qp, err = c.CreateQP(opt); err != nil {
			t.Fatal(err)
		}
		if err := (*qp).Ready(1, udQKey); err != nil {
			t.Fatal(err)
		}
	}
	if u.path, err = c.LoopbackPath(1); err != nil {
		t.Fatal(err)
	}
	if err := u.b.PostRecv(1, []mlx5.SGE{{Addr: u.mr.Addr, Length: 4096, LKey: u.mr.LKey}}); err != nil {
		t.Fatal(err)
	}
	return u
}

func (u *udPair) send(ah *mlx5.AH) error {
	return u.a.PostSend(&mlx5.SendWR{WrID: 2, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled,
		Inline: [][]byte{[]byte("datagram")}, AH: ah, RemoteQPN: u.b.QPN(), QKey: udQKey})
}

// completions polls the pair's CQ for a while.
func (u *udPair) completions(t *testing.T) []mlx5.Completion {
	t.Helper()
	var got []mlx5.Completion
	wc := make([]mlx5.Completion, 4)
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
		n, err := u.cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, wc[:n]...)
	}
	return got
}

// TestUDSendAH: a UD send with a closed AH fails with ErrClosed, one with
// an AH of another context with ErrInvalid, and nothing is posted; a good
// AH then still works.
func TestUDSendAH(t *testing.T) {
	u := newUDPair(t)
	closed, err := u.pd.CreateAH(u.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	err = u.send(closed)
	if !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("a send with a closed AH: %v, want ErrClosed", err)
	}
	mlx5.CheckAPIError(t, err)

	c2 := mlx5test.New(t, "cx7")
	pd2, err := c2.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := pd2.CreateAH(u.path)
	if err != nil {
		t.Fatal(err)
	}
	err = u.send(foreign)
	if !errors.Is(err, mlx5.ErrInvalid) || !strings.Contains(err.Error(), "another context") {
		t.Errorf("a send with an AH of another context: %v, want ErrInvalid", err)
	}
	mlx5.CheckAPIError(t, err)
	if got := u.completions(t); len(got) != 0 {
		t.Fatalf("the refused sends completed: %+v", got)
	}

	ah, err := u.pd.CreateAH(u.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.send(ah); err != nil {
		t.Fatal(err)
	}
	got := u.completions(t)
	if len(got) != 2 || got[0].Status != mlx5.WCSuccess || got[1].Status != mlx5.WCSuccess {
		t.Errorf("a good send after the refused ones: %+v, want a send and a receive", got)
	}
}

// TestContextErrorsWrap: a wait that ctx ends is the operation's error,
// wrapping ctx's.
func TestContextErrorsWrap(t *testing.T) {
	c := mlx5test.New(t, "cx7")
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16, Events: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = cq.Wait(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("CQ.Wait: %v, want context.Canceled", err)
	}
	mlx5.CheckAPIError(t, err)
	_, err = c.NextEvent(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("NextEvent: %v, want context.Canceled", err)
	}
	mlx5.CheckAPIError(t, err)
	q, err := c.NewAsyncCmdQueue()
	if err != nil {
		t.Fatal(err)
	}
	_, err = q.Next(ctx, make([]byte, 64))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("AsyncCmdQueue.Next: %v, want context.Canceled", err)
	}
	mlx5.CheckAPIError(t, err)
}
