// Package flows holds the device flows that run both on a real ConnectX
// (package hwtest) and on the software device model, so the two are
// checked by the same code.
package flows

import (
	"context"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/prm"
)

// Constants of the kernel's <linux/mlx5/cq.h> and <linux/mlx5/mlx5_ifc.h>
// that prm does not declare.
const (
	cqModifyPeriod = 1 << 0 // MLX5_CQ_MODIFY_PERIOD
	mkcAccessKLMs  = 2      // MLX5_MKC_ACCESS_MODE_KLMS
	cqeSize64      = 0      // cqc.cqe_sz for 64-byte CQEs
)

// cmd returns an input mailbox of n bytes with the opcode set.
func cmd(n uint32, opcode uint16) []byte {
	in := make([]byte, n)
	prm.MboxIn.Opcode.Set(in, uint64(opcode))
	return in
}

// mmap returns n bytes of memory outside the Go heap (an mlx5.Buffer,
// closed at t's cleanup).
func mmap(t testing.TB, n int) []byte {
	t.Helper()
	b, err := mlx5.AllocBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Bytes()
}

func closeAll(t testing.TB, cs ...interface{ Close() error }) {
	t.Helper()
	for _, c := range cs {
		if err := c.Close(); err != nil {
			t.Errorf("close %T: %v", c, err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("close %T twice: %v", c, err)
		}
	}
}

// DEVX runs every DEVX call on c with real firmware commands: QUERY_HCA_CAP
// (general command); ALLOC_PD and CREATE_MKEY (objects), QUERY_MKEY
// synchronously and asynchronously; a UMEM, a UAR and an EQ number for
// CREATE_CQ; MODIFY_CQ and QUERY_CQ to see the change; and the destroys.
func DEVX(t *testing.T, c *mlx5.Context) {
	in := cmd(prm.QueryHcaCapIn.Layout().Size, prm.MLX5_CMD_OP_QUERY_HCA_CAP)
	prm.QueryHcaCapIn.OpMod.Set(in, uint64(prm.QueryHCACapOpMod(prm.MLX5_CAP_GENERAL, true)))
	caps := make([]byte, prm.QueryHcaCapOut.Layout().Size)
	if err := c.GeneralCmd(in, caps); err != nil {
		t.Fatalf("QUERY_HCA_CAP: %v", err)
	}
	hca := prm.QueryHcaCapOut.Capability
	logMaxCQSz := prm.CmdHcaCap.LogMaxCqSz.At(hca).Get(caps)
	t.Logf("log_max_qp %d, log_max_cq_sz %d", prm.CmdHcaCap.LogMaxQp.At(hca).Get(caps), logMaxCQSz)
	if logMaxCQSz < 6 {
		t.Fatalf("log_max_cq_sz %d: the device reports no usable CQ size", logMaxCQSz)
	}

	// A protection domain, then a free KLM mkey in it for UMR.
	out := make([]byte, prm.AllocPdOut.Layout().Size)
	pdObj, err := c.CreateObj(cmd(prm.AllocPdIn.Layout().Size, prm.MLX5_CMD_OP_ALLOC_PD), out)
	if err != nil {
		t.Fatalf("ALLOC_PD: %v", err)
	}
	pd := prm.AllocPdOut.Pd.Get(out)

	in = cmd(prm.CreateMkeyIn.Layout().Size, prm.MLX5_CMD_OP_CREATE_MKEY)
	mkc := prm.CreateMkeyIn.MemoryKeyMkeyEntry
	prm.Mkc.Free.At(mkc).Set(in, 1)
	prm.Mkc.UmrEn.At(mkc).Set(in, 1)
	prm.Mkc.Lr.At(mkc).Set(in, 1)
	prm.Mkc.Lw.At(mkc).Set(in, 1)
	prm.Mkc.AccessMode10.At(mkc).Set(in, mkcAccessKLMs)
	prm.Mkc.Qpn.At(mkc).Set(in, 0xffffff)
	prm.Mkc.Pd.At(mkc).Set(in, pd)
	prm.Mkc.TranslationsOctwordSize.At(mkc).Set(in, 4)
	out = make([]byte, prm.CreateMkeyOut.Layout().Size)
	mkey, err := c.CreateObj(in, out)
	if err != nil {
		t.Fatalf("CREATE_MKEY: %v", err)
	}
	index := prm.CreateMkeyOut.MkeyIndex.Get(out)

	in = cmd(prm.QueryMkeyIn.Layout().Size, prm.MLX5_CMD_OP_QUERY_MKEY)
	prm.QueryMkeyIn.MkeyIndex.Set(in, index)
	out = make([]byte, prm.QueryMkeyOut.Layout().Size)
	if err := mkey.Query(in, out); err != nil {
		t.Fatalf("QUERY_MKEY: %v", err)
	}
	qmkc := prm.QueryMkeyOut.MemoryKeyMkeyEntry
	if got := prm.Mkc.Pd.At(qmkc).Get(out); got != pd {
		t.Errorf("QUERY_MKEY: pd %#x, created in %#x", got, pd)
	}
	if got := prm.Mkc.AccessMode10.At(qmkc).Get(out); got != mkcAccessKLMs {
		t.Errorf("QUERY_MKEY: access_mode_1_0 %d, want KLMs (2)", got)
	}

	// The same query, asynchronously.
	q, err := c.NewAsyncCmdQueue()
	if err != nil {
		t.Fatal(err)
	}
	const wrID = 0x1122334455667788
	if err := mkey.QueryAsync(in, len(out), wrID, q); err != nil {
		t.Fatalf("QUERY_MKEY async: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), mustCome)
	defer cancel()
	comp, err := q.Next(ctx, make([]byte, 8+len(out)))
	if err != nil {
		t.Fatalf("async completion: %v", err)
	}
	if comp.WrID != wrID || comp.Err != nil || prm.Mkc.Pd.At(qmkc).Get(comp.Out) != pd {
		t.Errorf("async completion: wr_id %#x (want %#x), err %v, pd %#x", comp.WrID, uint64(wrID), comp.Err, prm.Mkc.Pd.At(qmkc).Get(comp.Out))
	}

	// A CQ of 64 entries in a UMEM, its doorbell record in another, on an
	// NC UAR page and completion vector 0's EQ.
	buf, dbr := mmap(t, 64*64), mmap(t, 4096)
	bufMem, err := c.RegUMem(buf, mlx5.AccessLocalWrite)
	if err != nil {
		t.Fatalf("UMEM (CQ buffer): %v", err)
	}
	dbrMem, err := c.RegUMem(dbr, mlx5.AccessLocalWrite)
	if err != nil {
		t.Fatalf("UMEM (doorbell record): %v", err)
	}
	uar, err := c.AllocUAR(mlx5.UARNonCached)
	if err != nil {
		t.Fatalf("UAR: %v", err)
	}
	eqn, err := c.QueryEQN(0)
	if err != nil {
		t.Fatalf("EQN: %v", err)
	}
	in = cmd(prm.CreateCqIn.Layout().Size, prm.MLX5_CMD_OP_CREATE_CQ)
	cqc := prm.CreateCqIn.CqContext
	prm.Cqc.CqeSz.At(cqc).Set(in, cqeSize64)
	prm.Cqc.LogCqSize.At(cqc).Set(in, 6)
	prm.Cqc.UarPage.At(cqc).Set(in, uint64(uar.PageID()))
	prm.Cqc.CEqnOrApuElement.At(cqc).Set(in, uint64(eqn))
	prm.Cqc.LogPageSize.At(cqc).Set(in, 0) // 4 KiB pages, in units of 4 KiB
	prm.Cqc.DbrUmemValid.At(cqc).Set(in, 1)
	prm.Cqc.DbrUmemId.At(cqc).Set(in, uint64(dbrMem.ID()))
	prm.CreateCqIn.CqUmemValid.Set(in, 1)
	prm.CreateCqIn.CqUmemId.Set(in, uint64(bufMem.ID()))
	out = make([]byte, prm.CreateCqOut.Layout().Size)
	cq, err := c.CreateObj(in, out)
	if err != nil {
		t.Fatalf("CREATE_CQ: %v", err)
	}
	cqn := prm.CreateCqOut.Cqn.Get(out)

	in = cmd(prm.ModifyCqIn.Layout().Size, prm.MLX5_CMD_OP_MODIFY_CQ)
	prm.ModifyCqIn.Cqn.Set(in, cqn)
	prm.ModifyCqIn.ModifyFieldSelectResizeFieldSelect.Set(in, cqModifyPeriod)
	prm.Cqc.CqPeriod.At(prm.ModifyCqIn.CqContext).Set(in, 16)
	if err := cq.Modify(in, make([]byte, prm.ModifyCqOut.Layout().Size)); err != nil {
		t.Fatalf("MODIFY_CQ: %v", err)
	}
	in = cmd(prm.QueryCqIn.Layout().Size, prm.MLX5_CMD_OP_QUERY_CQ)
	prm.QueryCqIn.Cqn.Set(in, cqn)
	out = make([]byte, prm.QueryCqOut.Layout().Size)
	if err := cq.Query(in, out); err != nil {
		t.Fatalf("QUERY_CQ: %v", err)
	}
	if got := prm.Cqc.CqPeriod.At(prm.QueryCqOut.CqContext).Get(out); got != 16 {
		t.Errorf("QUERY_CQ after MODIFY_CQ: cq_period %d, want 16", got)
	}
	if got := prm.Cqc.LogCqSize.At(prm.QueryCqOut.CqContext).Get(out); got != 6 {
		t.Errorf("QUERY_CQ: log_cq_size %d, want 6", got)
	}

	// A command on the wrong object: QUERY_CQ through the mkey's handle.
	if err := mkey.Query(in, out); err == nil {
		t.Errorf("QUERY_CQ on the mkey's handle succeeded")
	}

	closeAll(t, cq, uar, dbrMem, bufMem, q, mkey, pdObj)
}
