package model

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/seam"
	"golang.org/x/sys/unix"
)

func TestVerbsPDMR(t *testing.T) {
	d := newDev(t, "cx6dx")
	mem := make([]byte, 4096) // never accessed: no WQE names it
	pd, pdn, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.h.pds[pdn]; !ok {
		t.Fatalf("pdn %#x is not in the PD table", pdn)
	}
	for _, c := range []struct {
		access uint32
		errno  unix.Errno
	}{
		{accessRemoteWrite, unix.EINVAL},                     // remote write without local write
		{accessRemoteAtomic | accessRemoteRead, unix.EINVAL}, // atomic without local write
		{1 << 8, unix.EINVAL},                                // unknown
		{accessOnDemand, unix.EOPNOTSUPP},
	} {
		if _, err := d.RegMR(pd, mem, c.access); !errors.Is(err, c.errno) {
			t.Errorf("RegMR access %#x: %v, want %v", c.access, err, c.errno)
		}
	}
	if _, err := d.RegMR(pd, nil, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("RegMR of nothing: %v", err)
	}
	if _, err := d.RegMR(pd+100, mem, 0); !errors.Is(err, unix.ENOENT) {
		t.Errorf("RegMR on no PD: %v", err)
	}
	access := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite | accessRemoteAtomic | 1<<20)
	mr, err := d.RegMR(pd, mem, access)
	if err != nil {
		t.Fatal(err)
	}
	if mr.LKey != mr.RKey {
		t.Errorf("lkey %#x, rkey %#x", mr.LKey, mr.RKey)
	}
	mk, ok := d.h.mkeys[mr.LKey>>8]
	if !ok {
		t.Fatalf("no mkey %#x", mr.LKey>>8)
	}
	for f, want := range map[*prm.Field]uint64{
		&prm.Mkc.Free: 0, &prm.Mkc.Lr: 1, &prm.Mkc.Lw: 1, &prm.Mkc.Rr: 1, &prm.Mkc.Rw: 1, &prm.Mkc.A: 1,
		&prm.Mkc.AccessMode10: accessModeMTT, &prm.Mkc.Pd: uint64(pdn), &prm.Mkc.Mkey70: uint64(uint8(mr.LKey)),
		&prm.Mkc.StartAddr: addr(mem), &prm.Mkc.Len: 4096,
	} {
		if got := f.Get(mk.mkc); got != want {
			t.Errorf("mkc.%s = %#x, want %#x", f.Name, got, want)
		}
	}
	mr2, err := d.RegMR(pd, mem, 0)
	if err != nil {
		t.Fatal(err)
	}
	if mr2.LKey == mr.LKey || uint8(mr2.LKey) == uint8(mr.LKey) {
		t.Errorf("two MRs with keys %#x and %#x: the variant byte should differ", mr.LKey, mr2.LKey)
	}
	if f := prm.Mkc.Lw.Get(d.h.mkeys[mr2.LKey>>8].mkc); f != 0 {
		t.Errorf("an MR without LOCAL_WRITE has lw %d", f)
	}
	// A DEVX object on the verbs PD holds it too.
	psv := mbox(prm.CreatePsvIn.Layout(), prm.MLX5_CMD_OP_CREATE_PSV)
	prm.CreatePsvIn.NumPsv.Set(psv, 1)
	prm.CreatePsvIn.Pd.Set(psv, uint64(pdn))
	psvH, _ := mustCreate(t, d, psv, 32)

	if err := d.DeallocPD(pd); !errors.Is(err, unix.EBUSY) {
		t.Errorf("DeallocPD with MRs: %v, want EBUSY", err)
	}
	if err := d.DeregMR(mr.Handle + 100); !errors.Is(err, unix.ENOENT) {
		t.Errorf("DeregMR of no handle: %v, want ENOENT", err)
	}
	if err := d.DeregMR(pd); !errors.Is(err, unix.EINVAL) {
		t.Errorf("DeregMR of a PD handle: %v, want EINVAL", err)
	}
	if err := d.DeallocPD(mr.Handle); !errors.Is(err, unix.EINVAL) {
		t.Errorf("DeallocPD of an MR handle: %v, want EINVAL", err)
	}
	// DEVX cannot destroy an MR's mkey.
	destroy := mbox(prm.DestroyMkeyIn.Layout(), prm.MLX5_CMD_OP_DESTROY_MKEY)
	prm.DestroyMkeyIn.MkeyIndex.Set(destroy, uint64(mr.LKey>>8))
	if st := d.Exec(destroy, make([]byte, 16)); st != prm.MLX5_CMD_STAT_BAD_RES_ERR {
		t.Errorf("DESTROY_MKEY of an MR's mkey: %v", st)
	}
	for _, h := range []seam.Handle{mr.Handle, mr2.Handle} {
		if err := d.DeregMR(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeregMR(mr.Handle); !errors.Is(err, unix.ENOENT) {
		t.Errorf("second DeregMR: %v, want ENOENT", err)
	}
	if err := d.DeallocPD(pd); !errors.Is(err, unix.EBUSY) {
		t.Errorf("DeallocPD with a PSV: %v, want EBUSY", err)
	}
	destroyH(t, d, psvH)
	if err := d.DeallocPD(pd); err != nil {
		t.Errorf("DeallocPD: %v", err)
	}
	if err := d.DeallocPD(pd); !errors.Is(err, unix.ENOENT) {
		t.Errorf("second DeallocPD: %v, want ENOENT", err)
	}
	if n := d.Objects(); n != 0 {
		t.Errorf("Objects() = %d after releasing everything", n)
	}

	// Close releases what is left, and the calls fail after it.
	pd, _, _ = d.AllocPD()
	if _, err := d.RegMR(pd, mem, accessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if n := d.Objects(); n != 4 { // PD and mkey, two handles
		t.Errorf("Objects() = %d with a PD and an MR", n)
	}
	d.Close()
	if n := d.Objects(); n != 0 {
		t.Errorf("Objects() = %d after Close", n)
	}
	if _, _, err := d.AllocPD(); !errors.Is(err, unix.EBADF) {
		t.Errorf("AllocPD after Close: %v", err)
	}
}

func destroyH(t testing.TB, d *Device, h seam.Handle) {
	t.Helper()
	if err := d.ObjDestroy(h); err != nil {
		t.Fatal(err)
	}
}

// pattern fills b with bytes from seed.
func pattern(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// pair is two connected RC QPs, each with a send and a receive CQ.
func pair(t *testing.T, r *rig, o qpOpts) (a, b *tqp) {
	ao, bo := o, o
	ao.uidx, bo.uidx = 0x11, 0x22
	a = r.qp(r.cq(6), r.cq(6), ao)
	b = r.qp(r.cq(6), r.cq(6), bo)
	connect(a, b, !o.noRemoteAccess)
	return a, b
}

func checkCQE(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s CQE:\n got %x\nwant %x", what, got, want)
	}
}

func TestLoopbackRC(t *testing.T) {
	r := newRig(t, "cx6dx")
	a, b := pair(t, r, qpOpts{})
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	src, smr := r.mr(8192, all)
	dst, dmr := r.mr(8192, all)
	pattern(src, 1)

	// SEND of two SGEs into a receive WQE of two.
	ridx := b.recv(tsge{1000, dmr.LKey, addr(dst)}, tsge{2000, dmr.LKey, addr(dst[4096:])})
	sidx := a.post(twqe{opcode: tOpSend, fm: tSignaled, sges: []tsge{{700, smr.LKey, addr(src)}, {900, smr.LKey, addr(src[3000:])}}})
	checkCQE(t, "receive (SEND)", b.rcq.next(), b.wantResp(2, ridx, 1600, 0, a.qpn, 0))
	checkCQE(t, "SEND", a.scq.next(), a.wantReq(tOpSend, sidx, 0, 0))
	want := append(append([]byte(nil), src[:700]...), src[3000:3900]...)
	if !bytes.Equal(dst[:1000], want[:1000]) || !bytes.Equal(dst[4096:4096+600], want[1000:]) {
		t.Error("SEND: the receive buffers do not hold the message")
	}

	// SEND_IMM with inline data.
	ridx = b.recv(tsge{64, dmr.LKey, addr(dst[100:])})
	sidx = a.post(twqe{opcode: tOpSendImm, fm: tSignaled, imm: 0xcafef00d, inline: []byte("inline send, 32 bytes long.....!")})
	checkCQE(t, "receive (SEND_IMM)", b.rcq.next(), b.wantResp(3, ridx, 32, 0xcafef00d, a.qpn, 0))
	checkCQE(t, "SEND_IMM", a.scq.next(), a.wantReq(tOpSendImm, sidx, 0, 0))
	if string(dst[100:132]) != "inline send, 32 bytes long.....!" {
		t.Errorf("inline SEND: %q", dst[100:132])
	}

	// RDMA WRITE, unsignaled, then a signaled one: one CQE.
	a.post(twqe{opcode: tOpRDMAWrite, hasRaddr: true, raddr: addr(dst[5000:]), rkey: dmr.RKey, sges: []tsge{{1234, smr.LKey, addr(src[10:])}}})
	sidx = a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst[7000:]), rkey: dmr.RKey, sges: []tsge{{100, smr.LKey, addr(src[2000:])}}})
	checkCQE(t, "RDMA WRITE", a.scq.next(), a.wantReq(tOpRDMAWrite, sidx, 0, 0))
	if !bytes.Equal(dst[5000:5000+1234], src[10:1244]) || !bytes.Equal(dst[7000:7100], src[2000:2100]) {
		t.Error("RDMA WRITE: the remote buffer does not hold the data")
	}
	b.rcq.none(time.Millisecond)

	// RDMA WRITE_IMM consumes a receive WQE.
	ridx = b.recv(tsge{16, dmr.LKey, addr(dst)})
	sidx = a.post(twqe{opcode: tOpRDMAWriteImm, fm: tSignaled, imm: 0x01020304, hasRaddr: true, raddr: addr(dst[6000:]), rkey: dmr.RKey, sges: []tsge{{300, smr.LKey, addr(src[4000:])}}})
	checkCQE(t, "receive (RDMA WRITE_IMM)", b.rcq.next(), b.wantResp(1, ridx, 300, 0x01020304, a.qpn, 0))
	checkCQE(t, "RDMA WRITE_IMM", a.scq.next(), a.wantReq(tOpRDMAWriteImm, sidx, 0, 0))
	if !bytes.Equal(dst[6000:6300], src[4000:4300]) {
		t.Error("RDMA WRITE_IMM: the remote buffer does not hold the data")
	}

	// RDMA READ into two local SGEs.
	pattern(dst, 2)
	sidx = a.post(twqe{opcode: tOpRDMARead, fm: tSignaled, hasRaddr: true, raddr: addr(dst[512:]), rkey: dmr.RKey,
		sges: []tsge{{100, smr.LKey, addr(src[8000:])}, {400, smr.LKey, addr(src)}}})
	checkCQE(t, "RDMA READ", a.scq.next(), a.wantReq(tOpRDMARead, sidx, 500, 0))
	if !bytes.Equal(src[8000:8100], dst[512:612]) || !bytes.Equal(src[:400], dst[612:1012]) {
		t.Error("RDMA READ: the local buffers do not hold the remote data")
	}

	// B sends back to A too: both directions work.
	ridx = a.recv(tsge{8, smr.LKey, addr(src)})
	sidx = b.post(twqe{opcode: tOpSend, fm: tSignaled, inline: []byte("pong....")})
	checkCQE(t, "receive at A", a.rcq.next(), a.wantResp(2, ridx, 8, 0, b.qpn, 0))
	checkCQE(t, "SEND from B", b.scq.next(), b.wantReq(tOpSend, sidx, 0, 0))
	if f := r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}
