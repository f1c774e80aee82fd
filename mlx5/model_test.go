package mlx5_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// These tests drive mlx5's DEVX calls through the seam into the software
// ConnectX: the mailboxes are built with prm's accessors, mlx5 carries
// them, and the model parses them on its own.

func onModel(t testing.TB, profile string) (*mlx5.Context, *model.Device) {
	t.Helper()
	dev, err := model.New(profile)
	if err != nil {
		t.Fatal(err)
	}
	c := mlx5.NewContext(dev)
	t.Cleanup(func() { c.Close() })
	return c, dev
}

func mailbox(l *prm.Layout, op uint16) []byte {
	b := l.New()
	prm.MboxIn.Opcode.Set(b, uint64(op))
	return b
}

func create(t testing.TB, c *mlx5.Context, in []byte, outLen int) (*mlx5.DevxObj, []byte) {
	t.Helper()
	out := make([]byte, outLen)
	o, err := c.CreateObj(in, out)
	if err != nil {
		t.Fatalf("create %s: %v", prm.OpcodeName(uint16(prm.MboxIn.Opcode.Get(in))), err)
	}
	return o, out
}

// objects is a PD, an MTT mkey, a PSV, a CQ and an RC QP with its UMEM.
type objects struct {
	pd, mkey, psv, cq, qp  *mlx5.DevxObj
	pdn, mkeyIdx, cqn, qpn uint32
	umem                   *mlx5.UMem
}

func createAll(t testing.TB, c *mlx5.Context) objects {
	t.Helper()
	var o objects
	var out []byte
	o.pd, out = create(t, c, mailbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD), 16)
	o.pdn = uint32(prm.AllocPdOut.Pd.Get(out))

	in := mailbox(prm.CreateMkeyIn.Layout(), prm.MLX5_CMD_OP_CREATE_MKEY)
	mkc := prm.CreateMkeyIn.MemoryKeyMkeyEntry
	prm.Mkc.AccessMode10.At(mkc).Set(in, 1) // MTT
	prm.Mkc.Pd.At(mkc).Set(in, uint64(o.pdn))
	prm.Mkc.Mkey70.At(mkc).Set(in, 0xa5)
	prm.Mkc.Lw.At(mkc).Set(in, 1)
	prm.Mkc.Lr.At(mkc).Set(in, 1)
	prm.Mkc.Len.At(mkc).Set(in, 4096)
	o.mkey, out = create(t, c, in, 16)
	o.mkeyIdx = uint32(prm.CreateMkeyOut.MkeyIndex.Get(out))

	in = mailbox(prm.CreatePsvIn.Layout(), prm.MLX5_CMD_OP_CREATE_PSV)
	prm.CreatePsvIn.NumPsv.Set(in, 1)
	prm.CreatePsvIn.Pd.Set(in, uint64(o.pdn))
	o.psv, _ = create(t, c, in, int(prm.CreatePsvOut.Layout().Size))

	eqn, err := c.QueryEQN(0)
	if err != nil {
		t.Fatal(err)
	}
	in = mailbox(prm.CreateCqIn.Layout(), prm.MLX5_CMD_OP_CREATE_CQ)
	prm.Cqc.LogCqSize.At(prm.CreateCqIn.CqContext).Set(in, 10)
	prm.Cqc.CEqnOrApuElement.At(prm.CreateCqIn.CqContext).Set(in, uint64(eqn))
	o.cq, out = create(t, c, in, 16)
	o.cqn = uint32(prm.CreateCqOut.Cqn.Get(out))

	mem, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	o.umem, err = c.RegUMem(mem, 1) // IB_ACCESS_LOCAL_WRITE
	if err != nil {
		t.Fatal(err)
	}
	in = mailbox(prm.CreateQpIn.Layout(), prm.MLX5_CMD_OP_CREATE_QP)
	qpc := prm.CreateQpIn.Qpc
	prm.Qpc.St.At(qpc).Set(in, 0) // RC
	prm.Qpc.Pd.At(qpc).Set(in, uint64(o.pdn))
	prm.Qpc.CqnSnd.At(qpc).Set(in, uint64(o.cqn))
	prm.Qpc.CqnRcv.At(qpc).Set(in, uint64(o.cqn))
	prm.Qpc.LogSqSize.At(qpc).Set(in, 4)
	prm.Qpc.LogRqSize.At(qpc).Set(in, 4)
	prm.Qpc.DbrUmemId.At(qpc).Set(in, uint64(o.umem.ID()))
	prm.CreateQpIn.WqUmemId.Set(in, uint64(o.umem.ID()))
	o.qp, out = create(t, c, in, 16)
	o.qpn = uint32(prm.CreateQpOut.Qpn.Get(out))
	return o
}

func TestModelGeneralCmd(t *testing.T) {
	for _, p := range model.Profiles() {
		t.Run(p, func(t *testing.T) {
			c, _ := onModel(t, p)
			in := mailbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_HCA_CAP)
			prm.QueryHcaCapIn.OpMod.Set(in, uint64(prm.QueryHCACapOpMod(prm.MLX5_CAP_GENERAL, true)))
			out := prm.QueryHcaCapOut.Layout().New()
			if err := c.GeneralCmd(in, out); err != nil {
				t.Fatal(err)
			}
			caps := prm.QueryHcaCapOut.Capability
			if prm.CmdHcaCap.LogMaxQp.At(caps).Get(out) == 0 || prm.CmdHcaCap.Rc.At(caps).Get(out) != 1 {
				t.Errorf("general caps: %x", out[16:80])
			}
			drain := prm.CmdHcaCap.DrainSigerr.At(caps).Get(out)
			if want := p != "cx5"; (drain == 1) != want {
				t.Errorf("drain_sigerr %d on %s", drain, p)
			}
			out = prm.QueryAdapterOut.Layout().New()
			if err := c.GeneralCmd(mailbox(prm.QueryAdapterIn.Layout(), prm.MLX5_CMD_OP_QUERY_ADAPTER), out); err != nil {
				t.Fatal(err)
			}
			if prm.QueryAdapterParamBlock.VsdVendorId.At(prm.QueryAdapterOut.QueryAdapterStruct).Get(out) != 0x15b3 {
				t.Error("QUERY_ADAPTER: vsd_vendor_id")
			}
			out = prm.QueryIssiOut.Layout().New()
			if err := c.GeneralCmd(mailbox(prm.QueryIssiIn.Layout(), prm.MLX5_CMD_OP_QUERY_ISSI), out); err != nil {
				t.Fatal(err)
			}
			if prm.QueryIssiOut.CurrentIssi.Get(out) != 1 {
				t.Error("QUERY_ISSI: current_issi")
			}
		})
	}
}

// TestModelNamedErrors: firmware failures are *prm.CmdError with the
// status by name; kernel refusals are errnos.
func TestModelNamedErrors(t *testing.T) {
	c, _ := onModel(t, "cx5")
	out := prm.QueryHcaCapOut.Layout().New()
	in := mailbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_VPORT_STATE)
	err := c.GeneralCmd(in, out)
	var ce *prm.CmdError
	if !errors.Is(mlx5.Checked(t, err), prm.MLX5_CMD_STAT_BAD_OP_ERR) || !errors.As(err, &ce) || ce.Syndrome != model.SyndromeBadOpcode {
		t.Errorf("unimplemented opcode: %v, want BAD_OP_ERR", err)
	}
	in = mailbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_HCA_CAP)
	prm.QueryHcaCapIn.OpMod.Set(in, uint64(prm.QueryHCACapOpMod(prm.MLX5_CAP_GENERAL_2, false)))
	if err := c.GeneralCmd(in, out); !errors.Is(mlx5.Checked(t, err), prm.MLX5_CMD_STAT_BAD_PARAM_ERR) {
		t.Errorf("cmd_hca_cap_2 on cx5: %v, want BAD_PARAM_ERR", err)
	}
	o := createAll(t, c)
	// RTR2RTS from RST.
	tr := mailbox(prm.Rtr2rtsQpIn.Layout(), prm.MLX5_CMD_OP_RTR2RTS_QP)
	prm.Rtr2rtsQpIn.Qpn.Set(tr, uint64(o.qpn))
	if err := o.qp.Modify(tr, make([]byte, 16)); !errors.Is(mlx5.Checked(t, err), prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR) {
		t.Errorf("RTR2RTS from RST: %v, want BAD_RES_STATE_ERR", err)
	}
	// drain_sigerr on a ConnectX-5.
	r2i := mailbox(prm.Rst2initQpIn.Layout(), prm.MLX5_CMD_OP_RST2INIT_QP)
	prm.Rst2initQpIn.Qpn.Set(r2i, uint64(o.qpn))
	prm.Qpc.DrainSigerr.At(prm.Rst2initQpIn.Qpc).Set(r2i, 1)
	if err := o.qp.Modify(r2i, make([]byte, 16)); !errors.Is(mlx5.Checked(t, err), prm.MLX5_CMD_STAT_BAD_PARAM_ERR) {
		t.Errorf("drain_sigerr on cx5: %v, want BAD_PARAM_ERR", err)
	}
	// Destroying the PD the QP uses.
	if err := o.pd.Close(); !errors.Is(mlx5.Checked(t, err), prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR) || !errors.Is(err, unix.EINVAL) {
		t.Errorf("destroy of a used PD: %v, want BAD_RES_STATE_ERR and EINVAL", err)
	}
	// Kernel rules.
	query := mailbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(query, uint64(o.qpn))
	if _, err := c.CreateObj(query, make([]byte, 272)); !errors.Is(mlx5.Checked(t, err), unix.EINVAL) {
		t.Errorf("CreateObj(QUERY_QP): %v, want EINVAL", err)
	}
	if err := o.cq.Query(query, make([]byte, 272)); !errors.Is(mlx5.Checked(t, err), unix.EINVAL) {
		t.Errorf("QUERY_QP on the CQ's handle: %v, want EINVAL", err)
	}
	sqd := mailbox(prm.Sqd2rtsQpIn.Layout(), prm.MLX5_CMD_OP_SQD_RTS_QP)
	prm.Sqd2rtsQpIn.Qpn.Set(sqd, uint64(o.qpn))
	if err := o.qp.Modify(sqd, make([]byte, 16)); !errors.Is(mlx5.Checked(t, err), unix.EINVAL) {
		t.Errorf("SQD2RTS through DEVX: %v, want EINVAL", err)
	}
	if err := c.GeneralCmd(mailbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD), make([]byte, 16)); !errors.Is(mlx5.Checked(t, err), unix.EINVAL) {
		t.Errorf("ALLOC_PD as a general command: %v, want EINVAL", err)
	}
}

// TestModelObjects creates every object type, queries and modifies them,
// walks the QP to RTS and back, and closes.
func TestModelObjects(t *testing.T) {
	c, dev := onModel(t, "cx6dx")
	base := dev.Objects() // the context's own UAR page
	o := createAll(t, c)

	in := mailbox(prm.QueryMkeyIn.Layout(), prm.MLX5_CMD_OP_QUERY_MKEY)
	prm.QueryMkeyIn.MkeyIndex.Set(in, uint64(o.mkeyIdx))
	out := prm.QueryMkeyOut.Layout().New()
	if err := o.mkey.Query(in, out); err != nil {
		t.Fatal(err)
	}
	mkc := prm.QueryMkeyOut.MemoryKeyMkeyEntry
	if prm.Mkc.Mkey70.At(mkc).Get(out) != 0xa5 || prm.Mkc.Pd.At(mkc).Get(out) != uint64(o.pdn) || prm.Mkc.Len.At(mkc).Get(out) != 4096 {
		t.Errorf("QUERY_MKEY does not return the mkey context: %x", out[16:80])
	}

	mod := mailbox(prm.ModifyCqIn.Layout(), prm.MLX5_CMD_OP_MODIFY_CQ)
	prm.ModifyCqIn.Cqn.Set(mod, uint64(o.cqn))
	prm.ModifyCqIn.ModifyFieldSelectResizeFieldSelect.Set(mod, 1<<1) // MLX5_CQ_MODIFY_COUNT
	prm.Cqc.CqMaxCount.At(prm.ModifyCqIn.CqContext).Set(mod, 64)
	if err := o.cq.Modify(mod, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	in = mailbox(prm.QueryCqIn.Layout(), prm.MLX5_CMD_OP_QUERY_CQ)
	prm.QueryCqIn.Cqn.Set(in, uint64(o.cqn))
	out = prm.QueryCqOut.Layout().New()
	if err := o.cq.Query(in, out); err != nil {
		t.Fatal(err)
	}
	if got := prm.Cqc.CqMaxCount.At(prm.QueryCqOut.CqContext).Get(out); got != 64 {
		t.Errorf("cq_max_count %d after MODIFY_CQ, want 64", got)
	}

	steps := []struct {
		l     *prm.Layout
		op    uint16
		state uint8
	}{
		{prm.Rst2initQpIn.Layout(), prm.MLX5_CMD_OP_RST2INIT_QP, model.StateINIT},
		{prm.Init2initQpIn.Layout(), prm.MLX5_CMD_OP_INIT2INIT_QP, model.StateINIT},
		{prm.Init2rtrQpIn.Layout(), prm.MLX5_CMD_OP_INIT2RTR_QP, model.StateRTR},
		{prm.Rtr2rtsQpIn.Layout(), prm.MLX5_CMD_OP_RTR2RTS_QP, model.StateRTS},
		{prm.Rts2rtsQpIn.Layout(), prm.MLX5_CMD_OP_RTS2RTS_QP, model.StateRTS},
		{prm.Qp2errIn.Layout(), prm.MLX5_CMD_OP_2ERR_QP, model.StateERR},
		{prm.Qp2rstIn.Layout(), prm.MLX5_CMD_OP_2RST_QP, model.StateRST},
	}
	for _, s := range steps {
		in := mailbox(s.l, s.op)
		qpn, _ := s.l.Field("qpn")
		qpn.Set(in, uint64(o.qpn))
		if s.op == prm.MLX5_CMD_OP_INIT2INIT_QP {
			qpc, _ := s.l.Field("qpc")
			prm.Qpc.DrainSigerr.At(qpc).Set(in, 1)
		}
		if err := o.qp.Modify(in, make([]byte, 16)); err != nil {
			t.Fatalf("%s: %v", prm.OpcodeName(s.op), err)
		}
		in = mailbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
		prm.QueryQpIn.Qpn.Set(in, uint64(o.qpn))
		out := prm.QueryQpOut.Layout().New()
		if err := o.qp.Query(in, out); err != nil {
			t.Fatal(err)
		}
		if got := prm.Qpc.State.At(prm.QueryQpOut.Qpc).Get(out); got != uint64(s.state) {
			t.Errorf("after %s QUERY_QP reports state %#x, want %#x", prm.OpcodeName(s.op), got, s.state)
		}
		if s.op == prm.MLX5_CMD_OP_INIT2INIT_QP && prm.Qpc.DrainSigerr.At(prm.QueryQpOut.Qpc).Get(out) != 1 {
			t.Error("drain_sigerr not stored")
		}
	}

	for _, obj := range []*mlx5.DevxObj{o.qp, o.cq, o.psv, o.mkey, o.pd} {
		if err := obj.Close(); err != nil {
			t.Fatal(err)
		}
		if err := obj.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
	if err := o.umem.Close(); err != nil {
		t.Fatal(err)
	}
	if n := dev.Objects(); n != base {
		t.Errorf("%d objects left", n-base)
	}
}

func TestModelAsyncQuery(t *testing.T) {
	c, _ := onModel(t, "cx7")
	o := createAll(t, c)
	q, err := c.NewAsyncCmdQueue()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	in := mailbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(in, uint64(o.qpn))
	outLen := int(prm.QueryQpOut.Layout().Size)
	if err := o.qp.QueryAsync(in, outLen, 42, q); err != nil {
		t.Fatal(err)
	}
	bad := mailbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(bad, uint64(o.qpn+1))
	if err := o.qp.QueryAsync(bad, outLen, 43, q); !errors.Is(mlx5.Checked(t, err), unix.EINVAL) {
		t.Errorf("async query of another QP: %v, want EINVAL", err)
	}
	buf := make([]byte, 8+outLen)
	comp, err := q.Next(context.Background(), buf)
	if err != nil || comp.Err != nil || comp.WrID != 42 || len(comp.Out) != outLen {
		t.Fatalf("completion %+v, %v", comp, err)
	}
	if prm.Qpc.Pd.At(prm.QueryQpOut.Qpc).Get(comp.Out) != uint64(o.pdn) {
		t.Error("async QUERY_QP output lacks the QP's pd")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := q.Next(ctx, buf); !errors.Is(mlx5.Checked(t, err), context.Canceled) {
		t.Errorf("Next on cancel: %v, want context.Canceled", err)
	}
	// A failed query arrives as a completion carrying the firmware's error.
	in = mailbox(prm.QueryCqIn.Layout(), prm.MLX5_CMD_OP_QUERY_CQ)
	prm.QueryCqIn.Cqn.Set(in, uint64(o.cqn))
	if err := o.cq.QueryAsync(in, 16, 44, q); err != nil {
		t.Fatal(err)
	}
	comp, err = q.Next(context.Background(), buf)
	if err != nil || comp.WrID != 44 || !errors.Is(comp.Err, prm.MLX5_CMD_STAT_BAD_OUTP_LEN_ERR) {
		t.Errorf("16-byte QUERY_CQ: %+v, %v; want BAD_OUTP_LEN_ERR", comp, err)
	}
}

func TestModelUARAndEQN(t *testing.T) {
	c, dev := onModel(t, "cx6dx")
	base := dev.Objects() // the context's own UAR page
	u, err := c.AllocUAR(mlx5.UARNonCached)
	if err != nil {
		t.Fatal(err)
	}
	if u.PageID() == 0 || len(u.Page()) != 4096 {
		t.Fatalf("UAR page %d, page of %d bytes", u.PageID(), len(u.Page()))
	}
	u.Page()[0x800] = 1 // a doorbell write lands in the mapping
	if _, err := c.QueryEQN(1 << 20); !errors.Is(mlx5.Checked(t, err), unix.ENOENT) {
		t.Errorf("EQN of vector 2^20: %v, want ENOENT", err)
	}
	eqn, err := c.QueryEQN(3)
	if err != nil || eqn == 0 {
		t.Errorf("EQN of vector 3: %d, %v", eqn, err)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if n := dev.Objects(); n != base {
		t.Errorf("%d objects after the UAR's Close", n-base)
	}
}

// TestModelContextClose leaves objects of every kind and closes the
// context: the model releases them; the objects' Close is then a no-op.
func TestModelContextClose(t *testing.T) {
	dev, err := model.New("cx7")
	if err != nil {
		t.Fatal(err)
	}
	c := mlx5.NewContext(dev)
	o := createAll(t, c)
	u, err := c.AllocUAR(mlx5.UARBlueFlame)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewAsyncCmdQueue(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []*mlx5.DevxObj{o.qp, o.cq, o.psv, o.mkey, o.pd} {
		if err := obj.Close(); err != nil {
			t.Errorf("Close after the context's: %v", err)
		}
	}
	if err := o.umem.Close(); err != nil {
		t.Error(err)
	}
	if err := u.Close(); err != nil { // unmaps the page
		t.Error(err)
	}
	if n := dev.Objects(); n != 0 {
		t.Errorf("%d objects after the context's Close", n)
	}
}

// TestModelLeak runs 10,000 create/destroy cycles of each object type
// through mlx5 and the seam.
func TestModelLeak(t *testing.T) {
	const cycles = 10000
	c, dev := onModel(t, "cx6dx")
	base := createAll(t, c)
	baseline := dev.Objects()
	qpIn := func() []byte {
		in := mailbox(prm.CreateQpIn.Layout(), prm.MLX5_CMD_OP_CREATE_QP)
		prm.Qpc.Pd.At(prm.CreateQpIn.Qpc).Set(in, uint64(base.pdn))
		prm.Qpc.CqnSnd.At(prm.CreateQpIn.Qpc).Set(in, uint64(base.cqn))
		prm.Qpc.CqnRcv.At(prm.CreateQpIn.Qpc).Set(in, uint64(base.cqn))
		prm.Qpc.DbrUmemId.At(prm.CreateQpIn.Qpc).Set(in, uint64(base.umem.ID()))
		prm.CreateQpIn.WqUmemId.Set(in, uint64(base.umem.ID()))
		return in
	}()
	mkIn := mailbox(prm.CreateMkeyIn.Layout(), prm.MLX5_CMD_OP_CREATE_MKEY)
	prm.Mkc.AccessMode10.At(prm.CreateMkeyIn.MemoryKeyMkeyEntry).Set(mkIn, 2) // KLMS
	prm.Mkc.Pd.At(prm.CreateMkeyIn.MemoryKeyMkeyEntry).Set(mkIn, uint64(base.pdn))
	psvIn := mailbox(prm.CreatePsvIn.Layout(), prm.MLX5_CMD_OP_CREATE_PSV)
	prm.CreatePsvIn.NumPsv.Set(psvIn, 1)
	prm.CreatePsvIn.Pd.Set(psvIn, uint64(base.pdn))
	eqn, _ := c.QueryEQN(0)
	cqIn := mailbox(prm.CreateCqIn.Layout(), prm.MLX5_CMD_OP_CREATE_CQ)
	prm.Cqc.CEqnOrApuElement.At(prm.CreateCqIn.CqContext).Set(cqIn, uint64(eqn))

	for _, k := range []struct {
		name   string
		in     []byte
		outLen int
	}{
		{"pd", mailbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD), 16},
		{"mkey", mkIn, 16},
		{"psv", psvIn, 32},
		{"cq", cqIn, 16},
		{"qp", qpIn, 16},
	} {
		start := time.Now()
		out := make([]byte, k.outLen)
		for range cycles {
			o, err := c.CreateObj(k.in, out)
			if err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
			if err := o.Close(); err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
		}
		if n := dev.Objects(); n != baseline {
			t.Errorf("%s: %d objects after %d cycles, want %d", k.name, n, cycles, baseline)
		}
		t.Logf("%s: %d create/destroy cycles in %v", k.name, cycles, time.Since(start))
	}
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	start := time.Now()
	for range cycles {
		u, err := c.RegUMem(mem, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.Close(); err != nil {
			t.Fatal(err)
		}
		uar, err := c.AllocUAR(mlx5.UARNonCached)
		if err != nil {
			t.Fatal(err)
		}
		if err := uar.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := dev.Objects(); n != baseline {
		t.Errorf("umem, uar: %d objects after %d cycles, want %d", n, cycles, baseline)
	}
	t.Logf("umem+uar: %d cycles in %v", cycles, time.Since(start))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := dev.Objects(); n != 0 {
		t.Errorf("%d objects after the context's Close", n)
	}
}
