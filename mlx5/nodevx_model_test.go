package mlx5_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
)

// A context without DEVX (the model opened with Options.NoDEVX, as the
// kernel makes one for a GET_CONTEXT without MLX5_IB_ALLOC_UCTX_DEVX):
// everything but mkeys and DEVX objects works through the verbs; what
// needs DEVX fails with ErrNoDEVX before the device hears of it.

// devxCalls is the model with the DEVX methods of the seam counted, so a
// test can tell that mlx5 refused a call itself.
type devxCalls struct {
	*model.Device
	mu    sync.Mutex
	calls []string
}

func (d *devxCalls) note(m string) {
	d.mu.Lock()
	d.calls = append(d.calls, m)
	d.mu.Unlock()
}

func (d *devxCalls) took() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.calls
	d.calls = nil
	return c
}

func (d *devxCalls) GeneralCmd(in, out []byte) error {
	d.note("GeneralCmd")
	return d.Device.GeneralCmd(in, out)
}

func (d *devxCalls) ObjCreate(in, out []byte) (seam.Handle, error) {
	d.note("ObjCreate")
	return d.Device.ObjCreate(in, out)
}

func (d *devxCalls) ObjQuery(h seam.Handle, in, out []byte) error {
	d.note("ObjQuery")
	return d.Device.ObjQuery(h, in, out)
}

func (d *devxCalls) ObjModify(h seam.Handle, in, out []byte) error {
	d.note("ObjModify")
	return d.Device.ObjModify(h, in, out)
}

func (d *devxCalls) ObjQueryAsync(h seam.Handle, in []byte, outLen int, wrID uint64, fd seam.AsyncCmdFD) error {
	d.note("ObjQueryAsync")
	return d.Device.ObjQueryAsync(h, in, outLen, wrID, fd)
}

func (d *devxCalls) NewAsyncCmdFD() (seam.AsyncCmdFD, error) {
	d.note("NewAsyncCmdFD")
	return d.Device.NewAsyncCmdFD()
}

func (d *devxCalls) NewEventChannel(omitData bool) (seam.EventChannel, error) {
	d.note("NewEventChannel")
	return d.Device.NewEventChannel(omitData)
}

func (d *devxCalls) UMemReg(mem []byte, access uint32) (seam.Handle, uint32, error) {
	d.note("UMemReg")
	return d.Device.UMemReg(mem, access)
}

func onModelNoDEVX(t testing.TB, profile string) (*mlx5.Context, *devxCalls) {
	t.Helper()
	m, err := model.NewWithOptions(profile, model.Options{NoDEVX: true})
	if err != nil {
		t.Fatal(err)
	}
	dev := &devxCalls{Device: m}
	c := mlx5.NewContext(dev)
	t.Cleanup(func() { c.Close() })
	return c, dev
}

// byWrID returns the completion of a work request.
func byWrID(t testing.TB, wcs []mlx5.Completion, id uint64) mlx5.Completion {
	t.Helper()
	for _, w := range wcs {
		if w.WrID == id {
			return w
		}
	}
	t.Fatalf("no completion of work request %d in %+v", id, wcs)
	return mlx5.Completion{}
}

func TestNoDEVXContextOnModel(t *testing.T) {
	c, dev := onModelNoDEVX(t, "cx6dx")
	if c.DEVX() {
		t.Fatal("the context reports DEVX")
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := mlx5.AllocBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mem := buf.Bytes()
	for i := range mem[:4096] {
		mem[i] = byte(i * 7)
	}
	mr, err := pd.RegMR(mem, mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	sge := func(off, n int) []mlx5.SGE {
		return []mlx5.SGE{{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}}
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 64, Events: true})
	if err != nil {
		t.Fatal(err)
	}
	path, err := c.LoopbackPath(1)
	if err != nil {
		t.Fatal(err)
	}

	// RC: SEND with the CQ armed, RDMA WRITE with immediate, RDMA READ.
	// (The model runs no atomics.)
	rc := func() *mlx5.QP {
		q, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 16, MaxRecvWR: 16})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	a, b := rc(), rc()
	if err := a.Connect(b.QPN(), path); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(a.QPN(), path); err != nil {
		t.Fatal(err)
	}
	if err := cq.Arm(false); err != nil {
		t.Fatal(err)
	}
	if err := b.PostRecv(1, sge(8192, 1024)); err != nil {
		t.Fatal(err)
	}
	if err := a.PostSend(&mlx5.SendWR{WrID: 2, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: sge(0, 300)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), mustCome)
	if err := cq.Wait(ctx); err != nil {
		t.Fatalf("wait for the completion event: %v", err)
	}
	cancel()
	wcs := pollN(t, cq, 2, 5*time.Second)
	if w := byWrID(t, wcs, 1); w.Status != mlx5.WCSuccess || w.Opcode != mlx5.WCRecv || w.ByteLen != 300 || w.QPN != b.QPN() {
		t.Errorf("SEND received: %+v", w)
	}
	if w := byWrID(t, wcs, 2); w.Status != mlx5.WCSuccess || w.Opcode != mlx5.WCSend || w.QPN != a.QPN() {
		t.Errorf("SEND sent: %+v", w)
	}
	if !bytes.Equal(mem[8192:8192+300], mem[:300]) {
		t.Error("SEND: data differs")
	}
	if err := b.PostRecv(3, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.PostSend(&mlx5.SendWR{WrID: 4, Opcode: mlx5.OpRDMAWriteImm, Flags: mlx5.SendSignaled, Imm: 0x01020304,
		RemoteAddr: mr.Addr() + 16384, RKey: mr.RKey(), SGL: sge(100, 500)}); err != nil {
		t.Fatal(err)
	}
	wcs = pollN(t, cq, 2, 5*time.Second)
	if w := byWrID(t, wcs, 3); w.Opcode != mlx5.WCRecvRDMAWithImm || !w.WithImm || w.Imm != 0x01020304 || w.ByteLen != 500 {
		t.Errorf("RDMA WRITE with immediate received: %+v", w)
	}
	if err := a.PostSend(&mlx5.SendWR{WrID: 5, Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled,
		RemoteAddr: mr.Addr() + 1000, RKey: mr.RKey(), SGL: sge(32768, 200)}); err != nil {
		t.Fatal(err)
	}
	if w := pollN(t, cq, 1, 5*time.Second)[0]; w.WrID != 5 || w.Status != mlx5.WCSuccess || w.Opcode != mlx5.WCRDMARead || w.ByteLen != 200 {
		t.Errorf("RDMA READ: %+v", w)
	}
	if !bytes.Equal(mem[16384:16384+500], mem[100:600]) || !bytes.Equal(mem[32768:32768+200], mem[1000:1200]) {
		t.Error("RDMA WRITE or READ: data differs")
	}
	if at, err := a.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateRTS {
		t.Errorf("query: %v, %v", at.State, err)
	}

	// UD through an AH.
	const qkey = 0x11111111
	ud := func() *mlx5.QP {
		q, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeUD, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Ready(1, qkey); err != nil {
			t.Fatal(err)
		}
		return q
	}
	u1, u2 := ud(), ud()
	ah, err := pd.CreateAH(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := u2.PostRecv(6, sge(40960, 4096)); err != nil {
		t.Fatal(err)
	}
	if err := u1.PostSend(&mlx5.SendWR{WrID: 7, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, AH: ah, RemoteQPN: u2.QPN(), QKey: qkey,
		SGL: sge(0, 64)}); err != nil {
		t.Fatal(err)
	}
	wcs = pollN(t, cq, 2, 5*time.Second)
	if w := byWrID(t, wcs, 6); w.Status != mlx5.WCSuccess || !w.GRH || w.SrcQP != u1.QPN() || w.ByteLen != 40+64 {
		t.Errorf("UD received: %+v", w)
	}
	if !bytes.Equal(mem[40960+40:40960+40+64], mem[:64]) {
		t.Error("UD: data differs")
	}

	// An SRQ with a limit: EventSRQLimitReached; a QP on it entering ERR:
	// EventQPLastWQEReached.
	srq, err := c.CreateSRQ(mlx5.SRQOptions{PD: pd, MaxWR: 8, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := srq.Arm(2); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: srq, MaxSendWR: 4})
	if err != nil {
		t.Fatal(err)
	}
	p := rc()
	if err := s.Connect(p.QPN(), path); err != nil {
		t.Fatal(err)
	}
	if err := p.Connect(s.QPN(), path); err != nil {
		t.Fatal(err)
	}
	for id := uint64(8); id < 10; id++ {
		if err := srq.PostRecv(id, sge(49152+256*int(id), 256)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.PostSend(&mlx5.SendWR{WrID: 10, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: sge(0, 100)}); err != nil {
		t.Fatal(err)
	}
	wcs = pollN(t, cq, 2, 5*time.Second)
	if w := byWrID(t, wcs, 8); w.Opcode != mlx5.WCRecv || w.QPN != s.QPN() || w.ByteLen != 100 {
		t.Errorf("SRQ receive: %+v", w)
	}
	if e := nextEvent(t, c, 5*time.Second); e.Type != mlx5.EventSRQLimitReached || e.SRQ != srq {
		t.Errorf("event %v, want the SRQ limit", e)
	}
	if err := s.Modify(&mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if e := nextEvent(t, c, 5*time.Second); e.Type != mlx5.EventQPLastWQEReached || e.QP != s {
		t.Errorf("event %v, want LAST_WQE_REACHED of the SRQ's QP", e)
	}
	if f := dev.Faults(); len(f) != 0 {
		t.Errorf("faults %q", f)
	}

	// The device's caps: QUERY_HCA_CAP goes to the kernel, which runs it
	// for a context without DEVX (devx_get_uid's whitelist uid), and
	// answers as on a DEVX context.
	dev.took()
	caps, err := c.QueryHCACap(prm.MLX5_CAP_GENERAL, true)
	if err != nil {
		t.Fatalf("QueryHCACap without DEVX: %v", err)
	}
	if calls := dev.took(); len(calls) != 1 || calls[0] != "GeneralCmd" {
		t.Errorf("QueryHCACap: the device heard %q", calls)
	}
	dc, _ := onModel(t, "cx6dx")
	if want, err := dc.QueryHCACap(prm.MLX5_CAP_GENERAL, true); err != nil || !bytes.Equal(caps, want) {
		t.Errorf("QueryHCACap differs from a DEVX context's (%v)", err)
	}

	// What needs DEVX fails with ErrNoDEVX, and the device hears nothing.
	dev.took()
	before := dev.Objects()
	umemBuf, err := mlx5.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer umemBuf.Close()
	queryQP := mailbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(queryQP, uint64(a.QPN()))
	queryCQ := mailbox(prm.QueryCqIn.Layout(), prm.MLX5_CMD_OP_QUERY_CQ)
	prm.QueryCqIn.Cqn.Set(queryCQ, uint64(cq.CQN()))
	adapter := mailbox(prm.QueryAdapterIn.Layout(), prm.MLX5_CMD_OP_QUERY_ADAPTER)
	for name, f := range map[string]func() error{
		"CreateMkey": func() error {
			_, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 2, BlockSignature: true})
			return err
		},
		"CreateMkey without a signature": func() error { _, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 2}); return err },
		"CreateObj": func() error {
			_, err := c.CreateObj(mailbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD), make([]byte, 16))
			return err
		},
		"RegUMem":    func() error { _, err := c.RegUMem(umemBuf.Bytes(), mlx5.AccessLocalWrite); return err },
		"GeneralCmd": func() error { return c.GeneralCmd(adapter, make([]byte, prm.QueryAdapterOut.Layout().Size)) },
		"QP DEVX": func() error {
			_, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, DEVX: true})
			return err
		},
		"CQ DEVX": func() error { _, err := c.CreateCQ(mlx5.CQOptions{Entries: 8, DEVX: true}); return err },
		"SigPipelining": func() error {
			_, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, SigPipelining: true})
			return err
		},
		"QP DevxQuery": func() error { return a.DevxQuery(queryQP, make([]byte, prm.QueryQpOut.Layout().Size)) },
		"QP DevxModify": func() error {
			return a.DevxModify(mailbox(prm.Init2initQpIn.Layout(), prm.MLX5_CMD_OP_INIT2INIT_QP), make([]byte, 16))
		},
		"CQ DevxQuery": func() error { return cq.DevxQuery(queryCQ, make([]byte, prm.QueryCqOut.Layout().Size)) },
		"SRQ DevxQuery": func() error {
			return srq.DevxQuery(mailbox(prm.QueryCqIn.Layout(), prm.MLX5_CMD_OP_QUERY_SRQ), make([]byte, 64))
		},
		"AsyncCmdQueue": func() error { _, err := c.NewAsyncCmdQueue(); return err },
		// The kernel would answer these two (UAR_OBJ_ALLOC and
		// DEVX_QUERY_EQN read no uid); mlx5 keeps them for DEVX objects.
		"AllocUAR": func() error { _, err := c.AllocUAR(mlx5.UARBlueFlame); return err },
		"QueryEQN": func() error { _, err := c.QueryEQN(0); return err },
	} {
		if err := f(); !errors.Is(mlx5.Checked(t, err), mlx5.ErrNoDEVX) {
			t.Errorf("%s: %v, want ErrNoDEVX", name, err)
		}
		if calls := dev.took(); len(calls) != 0 {
			t.Errorf("%s: the device heard %q", name, calls)
		}
		if n := dev.Objects(); n != before {
			t.Errorf("%s: %d objects, %d before", name, n, before)
		}
	}

	// Close releases everything.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := dev.Objects(); n != 0 {
		t.Errorf("%d objects after Close", n)
	}
}
