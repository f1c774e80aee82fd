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
	if err := u.b.PostRecv(1, []mlx5.SGE{{Addr: u.mr.Addr(), Length: 4096, LKey: u.mr.LKey()}}); err != nil {
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

// TestAPIErrorScenarios drives the error paths of the public API, one
// scenario each, on the software ConnectX (with and without the firmware
// status in the output mailbox), and checks every error: a *mlx5.Error
// naming the operation and the object once (CheckAPIError), wrapping what
// it must.
func TestAPIErrorScenarios(t *testing.T) {
	for _, statusErrno := range []bool{false, true} {
		t.Run(fmt.Sprintf("StatusErrno=%v", statusErrno), func(t *testing.T) {
			dev, err := model.NewWithOptions("cx7", model.Options{StatusErrno: statusErrno})
			if err != nil {
				t.Fatal(err)
			}
			c := mlx5.NewContext(dev)
			t.Cleanup(func() { c.Close() })
			apiErrorScenarios(t, c, statusErrno)
		})
	}
}

func apiErrorScenarios(t *testing.T, c *mlx5.Context, statusErrno bool) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pd, err := c.AllocPD()
	must(err)
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16})
	must(err)
	devxCQ, err := c.CreateCQ(mlx5.CQOptions{Entries: 16, DEVX: true})
	must(err)
	qp, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, MkeyConfigure: true})
	must(err)
	devxQP, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: devxCQ, RecvCQ: devxCQ, MaxSendWR: 4, MaxRecvWR: 4, DEVX: true})
	must(err)
	srq, err := c.CreateSRQ(mlx5.SRQOptions{PD: pd, MaxWR: 4, MaxSGE: 1})
	must(err)
	mkey, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
	must(err)
	buf, err := mlx5.AllocBuffer(1 << 14)
	must(err)
	t.Cleanup(func() { buf.Close() })
	mr, err := pd.RegMR(buf.Bytes()[:4096], mlx5.AccessLocalWrite)
	must(err)
	umem, err := c.RegUMem(buf.Bytes()[4096:8192], mlx5.AccessLocalWrite)
	must(err)
	q, err := c.NewAsyncCmdQueue()
	must(err)
	closedCQ, err := c.CreateCQ(mlx5.CQOptions{Entries: 16})
	must(err)
	must(closedCQ.Close())
	closedPD, err := c.AllocPD()
	must(err)
	must(closedPD.Close())

	// A DEVX QP of the UMEM, for the firmware's refusals.
	in := mailbox(prm.CreateQpIn.Layout(), prm.MLX5_CMD_OP_CREATE_QP)
	qpc := prm.CreateQpIn.Qpc
	prm.Qpc.Pd.At(qpc).Set(in, uint64(pd.PDN()))
	prm.Qpc.CqnSnd.At(qpc).Set(in, uint64(devxCQ.CQN()))
	prm.Qpc.CqnRcv.At(qpc).Set(in, uint64(devxCQ.CQN()))
	prm.Qpc.LogSqSize.At(qpc).Set(in, 4)
	prm.Qpc.LogRqSize.At(qpc).Set(in, 4)
	prm.Qpc.DbrUmemId.At(qpc).Set(in, uint64(umem.ID()))
	prm.CreateQpIn.WqUmemId.Set(in, uint64(umem.ID()))
	out := make([]byte, 16)
	obj, err := c.CreateObj(in, out)
	must(err)
	objQPN := prm.CreateQpOut.Qpn.Get(out)
	rtr2rts := mailbox(prm.Rtr2rtsQpIn.Layout(), prm.MLX5_CMD_OP_RTR2RTS_QP)
	prm.Rtr2rtsQpIn.Qpn.Set(rtr2rts, objQPN)
	badCap := mailbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_VPORT_STATE)

	noRecv, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4})
	must(err)

	// The firmware's refusals: the status, or the errno Linux 6.1 turns
	// it into (model.Options.StatusErrno).
	fw := func(st prm.Status) error {
		if statusErrno {
			return unix.EINVAL
		}
		return st
	}
	for _, s := range []struct {
		name string
		want error // what the error wraps
		call func() error
	}{
		{"CreateQP without a PD", mlx5.ErrInvalid, func() error { _, err := c.CreateQP(mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, MaxSendWR: 1}); return err }},
		{"CreateQP too large", mlx5.ErrInvalid, func() error {
			_, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1 << 20})
			return err
		}},
		{"CreateQP on a closed CQ", mlx5.ErrClosed, func() error {
			_, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: closedCQ, RecvCQ: closedCQ, MaxSendWR: 1})
			return err
		}},
		{"CreateQP in a closed PD", mlx5.ErrClosed, func() error {
			_, err := c.CreateQP(mlx5.QPOptions{PD: closedPD, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1})
			return err
		}},
		{"CreateQP of a UD DEVX QP", mlx5.ErrInvalid, func() error {
			_, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeUD, PD: pd, SendCQ: devxCQ, RecvCQ: devxCQ, MaxSendWR: 1, DEVX: true})
			return err
		}},
		{"CreateQP of a UC mkey-configure QP", mlx5.ErrUnsupported, func() error {
			_, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeUC, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1, MkeyConfigure: true})
			return err
		}},
		{"CreateCQ of 0 entries", mlx5.ErrInvalid, func() error { _, err := c.CreateCQ(mlx5.CQOptions{}); return err }},
		{"CreateSRQ without a PD", mlx5.ErrInvalid, func() error { _, err := c.CreateSRQ(mlx5.SRQOptions{MaxWR: 1}); return err }},
		{"CreateSRQ in a closed PD", mlx5.ErrClosed, func() error { _, err := c.CreateSRQ(mlx5.SRQOptions{PD: closedPD, MaxWR: 1}); return err }},
		{"CreateMkey of 0 entries", mlx5.ErrInvalid, func() error { _, err := pd.CreateMkey(mlx5.MkeyOptions{}); return err }},
		{"CreateMkey in a closed PD", mlx5.ErrClosed, func() error { _, err := closedPD.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1}); return err }},
		{"CreateAH on port 9", mlx5.ErrInvalid, func() error { _, err := pd.CreateAH(mlx5.AddressPath{Port: 9}); return err }},
		{"RegMR of nothing", mlx5.ErrInvalid, func() error { _, err := pd.RegMR(nil, mlx5.AccessLocalWrite); return err }},
		{"RegMR of remote write without local write", mlx5.ErrInvalid, func() error {
			_, err := pd.RegMR(buf.Bytes()[:64], mlx5.AccessRemoteWrite)
			return err
		}},
		{"RegUMem with atomic access", mlx5.ErrInvalid, func() error {
			_, err := c.RegUMem(buf.Bytes()[:64], mlx5.AccessRemoteAtomic)
			return err
		}},
		{"AllocUAR of type 7", mlx5.ErrInvalid, func() error { _, err := c.AllocUAR(7); return err }},
		{"AllocBuffer of 0 bytes", mlx5.ErrInvalid, func() error { _, err := mlx5.AllocBuffer(0); return err }},
		{"QueryEQN of vector 2^20", unix.ENOENT, func() error { _, err := c.QueryEQN(1 << 20); return err }},
		{"GeneralCmd of a short mailbox", mlx5.ErrInvalid, func() error { return c.GeneralCmd(make([]byte, 8), make([]byte, 16)) }},
		{"GeneralCmd of an opcode the firmware lacks", fw(prm.MLX5_CMD_STAT_BAD_OP_ERR), func() error {
			return c.GeneralCmd(badCap, prm.QueryHcaCapOut.Layout().New())
		}},
		{"QueryHCACap of cap type 0x7f", fw(prm.MLX5_CMD_STAT_BAD_PARAM_ERR), func() error { _, err := c.QueryHCACap(0x7f, true); return err }},
		{"DevxObj.Modify RTR2RTS from RST", fw(prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR), func() error { return obj.Modify(rtr2rts, make([]byte, 16)) }},
		{"DevxObj.Close of a PD in use", unix.EINVAL, func() error {
			pdIn := mailbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD)
			pdOut := make([]byte, 16)
			p, err := c.CreateObj(pdIn, pdOut)
			if err != nil {
				return err
			}
			in := mailbox(prm.CreatePsvIn.Layout(), prm.MLX5_CMD_OP_CREATE_PSV)
			prm.CreatePsvIn.NumPsv.Set(in, 1)
			prm.CreatePsvIn.Pd.Set(in, prm.AllocPdOut.Pd.Get(pdOut))
			if _, err := c.CreateObj(in, make([]byte, prm.CreatePsvOut.Layout().Size)); err != nil {
				return err
			}
			return p.Close()
		}},
		{"UMem.Close of a UMEM in use", unix.EINVAL, func() error { return umem.Close() }},
		{"DevxObj.QueryAsync of 8 bytes", mlx5.ErrInvalid, func() error { return obj.QueryAsync(make([]byte, 16), 8, 1, q) }},
		{"QP.DevxQuery of a short mailbox", mlx5.ErrInvalid, func() error { return qp.DevxQuery(make([]byte, 4), make([]byte, 16)) }},
		{"QP.Modify to state 9", mlx5.ErrInvalid, func() error { return qp.Modify(&mlx5.QPAttr{State: 9}, mlx5.QPAttrState) }},
		{"QP.Modify RESET to RTS", unix.EINVAL, func() error { return qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTS}, mlx5.QPAttrState) }},
		{"DEVX QP.Modify RESET to RTS", mlx5.ErrInvalid, func() error {
			return devxQP.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTS}, mlx5.QPAttrState)
		}},
		{"QP.Connect on port 0", mlx5.ErrInvalid, func() error { return qp.Connect(1, mlx5.AddressPath{}) }},
		{"QP.Ready of an RC QP", mlx5.ErrInvalid, func() error { return qp.Ready(1, 0) }},
		{"QP.PostSend in RESET of too many SGEs", mlx5.ErrInvalid, func() error {
			return qp.PostSend(&mlx5.SendWR{Opcode: mlx5.OpSend, SGL: make([]mlx5.SGE, 64)})
		}},
		{"QP.PostSendList of a bad second", mlx5.ErrInvalid, func() error {
			return qp.PostSendList([]mlx5.SendWR{{Opcode: mlx5.OpNOP}, {Opcode: 0x77}})
		}},
		{"QP.PostRecv without a receive queue", mlx5.ErrInvalid, func() error { return noRecv.PostRecv(1, nil) }},
		{"QP.PostMkeyConfigure of a list longer than the mkey takes", mlx5.ErrInvalid, func() error {
			return qp.PostMkeyConfigure(&mlx5.MkeyConfigureWR{Mkey: mkey, List: make([]mlx5.KLM, 8)})
		}},
		{"QP.CancelPostedSends outside SQD", mlx5.ErrNotDrained, func() error { _, err := qp.CancelPostedSends(1); return err }},
		{"QP.RecoverSigStop without pipelining", mlx5.ErrInvalid, func() error {
			_, err := qp.RecoverSigStop(cq, make([]mlx5.Completion, 1), func([]mlx5.Completion) {}, nil)
			return err
		}},
		{"SRQ.PostRecv of too many SGEs", mlx5.ErrInvalid, func() error { return srq.PostRecv(1, make([]mlx5.SGE, 8)) }},
		{"SRQ.Arm over MaxWR", mlx5.ErrInvalid, func() error { return srq.Arm(1 << 20) }},
		{"CQ.Arm without events", mlx5.ErrInvalid, func() error { return cq.Arm(false) }},
		{"CQ.Close in use", unix.EBUSY, func() error { return cq.Close() }},
		{"SRQ.Close in use", nil, func() error {
			onSRQ, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: srq, MaxSendWR: 1})
			if err != nil {
				return err
			}
			defer onSRQ.Close()
			return srq.Close()
		}},
		{"Mkey.Check of a plain mkey", mlx5.ErrInvalid, func() error {
			m, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1})
			if err != nil {
				return err
			}
			_, err = m.Check()
			return err
		}},
		{"PD.Close in use", nil, func() error { return pd.Close() }},
		{"MR.Close twice", nil, func() error {
			if err := mr.Close(); err != nil {
				return err
			}
			return mr.Close()
		}},
		{"Open of no device", nil, func() error { _, err := mlx5.Open("mlx5_no_such_device", nil); return err }},
		{"Open with NoDEVX and RequireDEVX", mlx5.ErrInvalid, func() error {
			_, err := mlx5.Open("mlx5_0", &mlx5.Options{NoDEVX: true, RequireDEVX: true})
			return err
		}},
		{"Open with more low-latency BlueFlame registers than all", mlx5.ErrInvalid, func() error {
			_, err := mlx5.Open("mlx5_0", &mlx5.Options{TotalBFRegs: 4, LowLatencyBFRegs: 4})
			return err
		}},
	} {
		err := s.call()
		if s.name == "MR.Close twice" {
			if err != nil {
				t.Errorf("%s: %v", s.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", s.name)
			continue
		}
		if s.want != nil && !errors.Is(err, s.want) {
			t.Errorf("%s: %v, want %v", s.name, err, s.want)
		}
		if d := apiErrorDefect(err); d != "" {
			t.Errorf("%s: %s", s.name, d)
		}
	}
}
