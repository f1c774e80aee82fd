package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// Contexts without DEVX (Options.NoDEVX): what each DEVX method answers
// such a context, its verbs objects end to end, and contexts with and
// without DEVX on one HCA kept apart.

// wantKernel checks that err is the kernel's errno from the rule named.
func wantKernel(t *testing.T, what string, err error, errno unix.Errno, rule string) {
	t.Helper()
	var ke *KernelError
	if !errors.As(err, &ke) || ke.Errno != errno || !strings.Contains(ke.Rule, rule) {
		t.Errorf("%s: %v, want %v from %s", what, err, errno, rule)
	}
}

func hcaCapIn() []byte {
	in := mbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_HCA_CAP)
	prm.QueryHcaCapIn.OpMod.Set(in, uint64(prm.QueryHCACapOpMod(prm.MLX5_CAP_GENERAL, true)))
	return in
}

func TestNoDEVXMethods(t *testing.T) {
	r := newVRigOpts(t, "cx6dx", Options{NoDEVX: true})
	d := r.d
	if d.UID() != 0 || d.DEVX() {
		t.Fatalf("uid %d, DEVX %v: want 0, false", d.UID(), d.DEVX())
	}
	dx, err := d.OpenWithOptions(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dx.Close()
	if dx.UID() == 0 || !dx.DEVX() || dx.UID() == d.h.whitelistUID || d.h.whitelistUID == 0 {
		t.Fatalf("DEVX context uid %d, whitelist uid %d", dx.UID(), d.h.whitelistUID)
	}
	if !bytes.Equal(d.DriverContext(), dx.DriverContext()) {
		t.Error("the driver context differs with DEVX (set_ucontext_resp reads no devx_uid)")
	}
	cq := r.cq(15, nil)
	q := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
	base := d.Objects()

	// DEVX_OTHER: QUERY_HCA_CAP is whitelisted and runs as the device's
	// whitelist uid; the same answer as a DEVX context's.
	out, want := make([]byte, prm.QueryHcaCapOut.Layout().Size), make([]byte, prm.QueryHcaCapOut.Layout().Size)
	if err := d.GeneralCmd(hcaCapIn(), out); err != nil {
		t.Fatalf("QUERY_HCA_CAP without DEVX: %v", err)
	}
	if err := dx.GeneralCmd(hcaCapIn(), want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Error("QUERY_HCA_CAP answers differ with and without DEVX")
	}
	// QUERY_ESW_FUNCTIONS is whitelisted and general: the kernel passes it,
	// the model's firmware does not implement it.
	esw := make([]byte, 16)
	prm.MboxIn.Opcode.Set(esw, prm.MLX5_CMD_OP_QUERY_ESW_FUNCTIONS)
	var fe *FirmwareError
	if err := d.GeneralCmd(esw, make([]byte, 16)); !errors.As(err, &fe) || fe.Cmd.Status != prm.MLX5_CMD_STAT_BAD_OP_ERR {
		t.Errorf("QUERY_ESW_FUNCTIONS without DEVX: %v, want the firmware's BAD_OP_ERR", err)
	}
	for _, op := range []uint16{prm.MLX5_CMD_OP_QUERY_ADAPTER, prm.MLX5_CMD_OP_NOP, prm.MLX5_CMD_OP_QUERY_ISSI, prm.MLX5_CMD_OP_ALLOC_PD} {
		in := make([]byte, 64)
		prm.MboxIn.Opcode.Set(in, uint64(op))
		wantKernel(t, "general "+prm.OpcodeName(op), d.GeneralCmd(in, make([]byte, 64)), unix.EINVAL, "devx_get_uid")
	}
	wantKernel(t, "short general", d.GeneralCmd(hcaCapIn()[:8], out), unix.EINVAL, "UVERBS_ATTR_MIN_SIZE")

	// OBJ_CREATE: devx_get_uid, then devx_is_obj_create_cmd for what the
	// whitelist lets through.
	_, err = d.ObjCreate(mbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD), make([]byte, 16))
	wantKernel(t, "create ALLOC_PD", err, unix.EINVAL, "devx_get_uid")
	_, err = d.ObjCreate(hcaCapIn(), out)
	wantKernel(t, "create QUERY_HCA_CAP", err, unix.EINVAL, "devx_is_obj_create_cmd")

	// OBJ_QUERY, OBJ_MODIFY, OBJ_ASYNC_QUERY on the verbs QP and CQ: the
	// handle is found, then devx_get_uid refuses.
	qq := mbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(qq, uint64(q.qpn))
	qout := make([]byte, prm.QueryQpOut.Layout().Size)
	wantKernel(t, "query QP", d.ObjQuery(q.h, qq, qout), unix.EINVAL, "devx_get_uid")
	wantKernel(t, "query with no handle", d.ObjQuery(999, qq, qout), unix.ENOENT, "no handle")
	cqq := mbox(prm.QueryCqIn.Layout(), prm.MLX5_CMD_OP_QUERY_CQ)
	prm.QueryCqIn.Cqn.Set(cqq, uint64(cq.cqn))
	wantKernel(t, "query CQ", d.ObjQuery(cq.h, cqq, make([]byte, prm.QueryCqOut.Layout().Size)), unix.EINVAL, "devx_get_uid")
	i2i := mbox(prm.Init2initQpIn.Layout(), prm.MLX5_CMD_OP_INIT2INIT_QP)
	prm.Init2initQpIn.Qpn.Set(i2i, uint64(q.qpn))
	wantKernel(t, "modify QP", d.ObjModify(q.h, i2i, make([]byte, 16)), unix.EINVAL, "devx_get_uid")
	fd, err := d.NewAsyncCmdFD()
	if err != nil {
		t.Fatalf("async cmd FD without DEVX: %v", err)
	}
	wantKernel(t, "async query", d.ObjQueryAsync(q.h, qq, len(qout), 7, fd), unix.EINVAL, "devx_get_uid")
	ctx, cancel := ctxTimeout(10 * time.Millisecond)
	if n, err := fd.Next(ctx, make([]byte, 4096)); err == nil {
		t.Errorf("a refused query completed: %d bytes", n)
	}
	cancel()
	// OBJ_DESTROY takes DEVX objects only.
	wantKernel(t, "destroy a verbs QP", d.ObjDestroy(q.h), unix.EINVAL, "not a DEVX object")
	wantKernel(t, "destroy no handle", d.ObjDestroy(999), unix.ENOENT, "no handle")

	// Event channels are allocated; there is nothing to subscribe to.
	ch, err := d.NewEventChannel(false)
	if err != nil {
		t.Fatalf("event channel without DEVX: %v", err)
	}
	wantKernel(t, "subscribe a verbs CQ", d.Subscribe(ch, cq.h, []uint16{0}, 1), unix.EINVAL, "not a DEVX object")
	wantKernel(t, "subscribe no handle", d.Subscribe(ch, 999, []uint16{0}, 1), unix.ENOENT, "no handle")

	// UMEM_REG: the devx_uid check comes before the access flags.
	mem := r.mmap(4096)
	_, _, err = d.UMemReg(mem, accessLocalWrite)
	wantKernel(t, "umem reg", err, unix.EINVAL, "devx_uid")
	_, _, err = d.UMemReg(mem, 1<<9)
	wantKernel(t, "umem reg, bad access", err, unix.EINVAL, "devx_uid")
	wantKernel(t, "umem dereg", d.UMemDereg(999), unix.ENOENT, "no handle")

	// QUERY_EQN and UAR_OBJ_ALLOC read no uid.
	eqn, err := d.QueryEQN(3)
	if weqn, _ := dx.QueryEQN(3); err != nil || eqn != weqn {
		t.Errorf("QUERY_EQN without DEVX: %d, %v; with: %d", eqn, err, weqn)
	}
	_, err = d.QueryEQN(8)
	wantKernel(t, "QUERY_EQN past the vectors", err, unix.ENOENT, "mlx5_vector2eqn")
	_, err = d.UARAlloc(2)
	wantKernel(t, "UAR type 2", err, unix.EOPNOTSUPP, "MLX5_IB_UAPI_UAR_ALLOC_TYPE")
	u, err := d.UARAlloc(0)
	if err != nil {
		t.Fatalf("UAR_OBJ_ALLOC without DEVX: %v", err)
	}
	page, err := d.MapUAR(u)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.UnmapUAR(page); err != nil {
		t.Fatal(err)
	}
	if err := d.UARFree(u.Handle); err != nil {
		t.Fatal(err)
	}

	// The device without a whitelist uid: the whitelisted commands are
	// EOPNOTSUPP, the others still EINVAL; a DEVX context is not affected.
	d.h.mu.Lock()
	wl := d.h.whitelistUID
	d.h.whitelistUID = 0
	d.h.mu.Unlock()
	wantKernel(t, "QUERY_HCA_CAP with no whitelist uid", d.GeneralCmd(hcaCapIn(), out), unix.EOPNOTSUPP, "devx_get_uid")
	_, err = d.ObjCreate(hcaCapIn(), out)
	wantKernel(t, "create QUERY_HCA_CAP with no whitelist uid", err, unix.EOPNOTSUPP, "devx_get_uid")
	wantKernel(t, "query QP with no whitelist uid", d.ObjQuery(q.h, qq, qout), unix.EINVAL, "devx_get_uid")
	if err := dx.GeneralCmd(hcaCapIn(), want); err != nil {
		t.Errorf("a DEVX context's QUERY_HCA_CAP with no whitelist uid: %v", err)
	}
	d.h.mu.Lock()
	d.h.whitelistUID = wl
	d.h.mu.Unlock()

	if err := fd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if n := d.Objects(); n != base {
		t.Errorf("%d objects after the refused calls, %d before", n, base)
	}

	// The firmware objects mlx5_ib made for the context carry uid 0.
	srq := r.srq(7, 1)
	_, mr := r.mr(4096, accessLocalWrite)
	d.h.mu.Lock()
	uids := map[string]uint16{"PD": d.h.pds[r.pdn].uid, "CQ": d.h.cqs[cq.cqn].uid, "QP": d.h.qps[q.qpn].uid,
		"SRQ": d.h.srqs[srq.srqn].uid, "MR": d.h.mkeys[mr.LKey>>8].uid, "UAR": d.h.uars[r.bf.PageID].uid}
	d.h.mu.Unlock()
	for k, uid := range uids {
		if uid != 0 {
			t.Errorf("%s of a context without DEVX has uid %d", k, uid)
		}
	}
}

// TestNoDEVXVerbs runs the verbs objects of a context without DEVX end to
// end: PD, MR, CQs on a completion channel, an RC pair (SEND, RDMA WRITE
// with immediate, RDMA READ), UD with an AH, an SRQ, the async event file;
// then everything goes, and Close leaves nothing.
func TestNoDEVXVerbs(t *testing.T) {
	r := newVRigOpts(t, "cx7", Options{NoDEVX: true})
	d := r.d
	base := d.Objects()
	ch, err := d.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	scq, rcq := r.cq(63, ch), r.cq(63, nil)
	mem, mr := r.mr(1<<16, accessLocalWrite|remoteRW)
	pattern(mem[:4096], 5)

	// RC.
	a := r.qp(scq, rcq, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
	b := r.qp(scq, rcq, vqpOpts{typ: seam.QPTypeRC, uidx: 2})
	a.connect(b, remoteRW)
	b.connect(a, remoteRW)
	scq.arm(false)
	ridx := b.recv(wqe.SGE{Addr: addr(mem[8192:]), Length: 1024, LKey: mr.LKey})
	sidx := a.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: []wqe.SGE{{Addr: addr(mem), Length: 300, LKey: mr.LKey}}})
	if c := decode(t, rcq.next()); c.Opcode != wqe.CQERespSend || c.QPN != b.qpn || c.WQECounter != ridx || c.ByteCount != 300 {
		t.Errorf("SEND, responder: %+v", c)
	}
	if c := decode(t, scq.next()); c.Opcode != wqe.CQEReq || c.WQECounter != sidx {
		t.Errorf("SEND, requester: %+v", c)
	}
	scq.event(ch, 0xc0+63)
	if !bytes.Equal(mem[8192:8192+300], mem[:300]) {
		t.Error("SEND: data differs")
	}
	b.recv(wqe.SGE{Addr: addr(mem[8192:]), Length: 16, LKey: mr.LKey})
	a.post(wqe.Send{Opcode: wqe.OpcodeRDMAWriteImm, Flags: wqe.SendSignaled, Imm: 0x5a5a, RemoteAddr: addr(mem[16384:]), RKey: mr.RKey,
		SGL: []wqe.SGE{{Addr: addr(mem[100:]), Length: 500, LKey: mr.LKey}}})
	if c := decode(t, rcq.next()); c.Opcode != wqe.CQERespWRImm || c.Imm != 0x5a5a || c.ByteCount != 500 {
		t.Errorf("RDMA WRITE with immediate: %+v", c)
	}
	decode(t, scq.next())
	a.post(wqe.Send{Opcode: wqe.OpcodeRDMARead, Flags: wqe.SendSignaled, RemoteAddr: addr(mem[1000:]), RKey: mr.RKey,
		SGL: []wqe.SGE{{Addr: addr(mem[32768:]), Length: 200, LKey: mr.LKey}}})
	if c := decode(t, scq.next()); c.Opcode != wqe.CQEReq || c.ByteCount != 200 {
		t.Errorf("RDMA READ: %+v", c)
	}
	if !bytes.Equal(mem[16384:16384+500], mem[100:600]) || !bytes.Equal(mem[32768:32768+200], mem[1000:1200]) {
		t.Error("RDMA WRITE or READ: data differs")
	}
	if at, err := d.QueryQP(a.h, maskState); err != nil || at.State != QPStateRTS || at.DestQPN != b.qpn {
		t.Errorf("query QP: %+v, %v", at, err)
	}

	// UD with an AH.
	const qkey = 0x1234
	u1 := r.qp(scq, rcq, vqpOpts{typ: seam.QPTypeUD, uidx: 3})
	u2 := r.qp(scq, rcq, vqpOpts{typ: seam.QPTypeUD, uidx: 4})
	u1.udReady(qkey)
	u2.udReady(qkey)
	ah := r.roceAH(3)
	resp := make([]byte, 16)
	ahH, err := d.CreateAH(r.pd, &ah, 1, resp)
	if err != nil {
		t.Fatal(err)
	}
	u2.recv(wqe.SGE{Addr: addr(mem[40960:]), Length: 4096, LKey: mr.LKey})
	u1.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, UD: &wqe.UD{AV: roceAV(ah, [6]byte(resp[4:10])), RemoteQPN: u2.qpn, QKey: qkey},
		SGL: []wqe.SGE{{Addr: addr(mem), Length: 64, LKey: mr.LKey}}})
	if c := decode(t, rcq.next()); c.Opcode != wqe.CQERespSend || c.ByteCount != 40+64 || c.SrcQP() != u1.qpn || c.QPN != u2.qpn {
		t.Errorf("UD receive: %+v", c)
	}
	decode(t, scq.next())
	if !bytes.Equal(mem[40960+40:40960+40+64], mem[:64]) {
		t.Error("UD: data differs")
	}

	// An SRQ, and a QP on it that enters ERR: IB_EVENT_QP_LAST_WQE_REACHED
	// on the async event file.
	srq := r.srq(7, 1)
	s := r.qp(scq, rcq, vqpOpts{typ: seam.QPTypeRC, uidx: 5, srq: srq.h})
	p := r.qp(scq, rcq, vqpOpts{typ: seam.QPTypeRC, uidx: 6})
	s.connect(p, 0)
	p.connect(s, 0)
	widx := srq.post(wqe.SGE{Addr: addr(mem[49152:]), Length: 256, LKey: mr.LKey})
	p.post(wqe.Send{Opcode: wqe.OpcodeSend, SGL: []wqe.SGE{{Addr: addr(mem), Length: 100, LKey: mr.LKey}}})
	if c := decode(t, rcq.next()); c.Opcode != wqe.CQERespSend || c.QPN != s.qpn || c.WQECounter != widx || c.SrqnUIdx != 5 {
		t.Errorf("SRQ receive: %+v", c)
	}
	toErr := seam.QPAttr{State: QPStateErr}
	if err := d.ModifyQP(s.h, &toErr, maskState, nil, nil); err != nil {
		t.Fatal(err)
	}
	if e := nextAsync(t, d, mustCome); e.Type != ibEventQPLastWQEReached || e.Element != 0x9000+5 {
		t.Errorf("async event %+v, want LAST_WQE_REACHED of the SRQ's QP", e)
	}

	// Everything goes: the handles, then Close leaves nothing.
	for _, q := range []*vqpT{a, b, u1, u2, s, p} {
		if err := d.DestroyQP(q.h); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DestroyAH(ahH); err != nil {
		t.Fatal(err)
	}
	if err := d.DestroySRQ(srq.h); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*vcqT{scq, rcq} {
		if err := d.DestroyCQ(c.h); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeregMR(mr.Handle); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if n := d.Objects(); n != base {
		t.Errorf("%d objects after the teardown, %d before", n, base)
	}
	if f := d.Faults(); len(f) != 0 {
		t.Errorf("faults %q", f)
	}
	// Close releases the rest (the PD, the UAR pages); the mappings stay
	// until unmapped.
	d.Close()
	if n := d.Objects(); n != 2 {
		t.Errorf("%d objects after Close, want the 2 UAR mappings", n)
	}
}

// fwObjects counts the firmware objects of the HCA that context d's
// commands created.
func fwObjects(d *Device) int {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	n := 0
	count := func(c ctxID) {
		if c == d.id {
			n++
		}
	}
	for _, o := range d.h.pds {
		count(o.ctx)
	}
	for _, o := range d.h.mkeys {
		count(o.ctx)
	}
	for _, o := range d.h.psvs {
		count(o.ctx)
	}
	for _, o := range d.h.cqs {
		count(o.ctx)
	}
	for _, o := range d.h.qps {
		count(o.ctx)
	}
	for _, o := range d.h.srqs {
		count(o.ctx)
	}
	for _, o := range d.h.umems {
		count(o.ctx)
	}
	for _, o := range d.h.uars {
		count(o.ctx)
	}
	return n
}

// TestNoDEVXContextsApart opens two contexts without DEVX and one with DEVX
// on one HCA. The two without share uid 0, so the firmware cannot tell
// their objects apart: the kernel's handles do (each context's handles are
// its own), and so does the model, by context.
func TestNoDEVXContextsApart(t *testing.T) {
	a := newVRigOpts(t, "cx7", Options{NoDEVX: true})
	bd, err := a.d.OpenWithOptions(Options{NoDEVX: true})
	if err != nil {
		t.Fatal(err)
	}
	b := newVRigOn(t, bd)
	cd, err := a.d.OpenWithOptions(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newVRigOn(t, cd)
	if a.d.UID() != 0 || b.d.UID() != 0 || c.d.UID() == 0 || a.d.id == b.d.id {
		t.Fatalf("uids %d, %d, %d", a.d.UID(), b.d.UID(), c.d.UID())
	}
	if o, err := c.d.Open(); err != nil || !o.DEVX() {
		t.Errorf("Open of a DEVX context: DEVX %v, %v", o != nil && o.DEVX(), err)
	} else {
		o.Close()
	}
	if o, err := b.d.Open(); err != nil || o.DEVX() {
		t.Errorf("Open of a context without DEVX: DEVX %v, %v", o != nil && o.DEVX(), err)
	} else {
		o.Close()
	}

	type side struct {
		r      *vrig
		cq     *vcqT
		p, q   *vqpT
		mem    []byte
		mr     seam.MR
		extra  *vqpT // a's only: a handle b does not have
		extraP seam.Handle
	}
	mk := func(r *vrig) *side {
		s := &side{r: r, cq: r.cq(63, nil)}
		s.mem, s.mr = r.mr(1<<14, accessLocalWrite|remoteRW)
		s.p = r.qp(s.cq, s.cq, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
		s.q = r.qp(s.cq, s.cq, vqpOpts{typ: seam.QPTypeRC, uidx: 2})
		s.p.connect(s.q, remoteRW)
		s.q.connect(s.p, remoteRW)
		return s
	}
	sa, sb, sc := mk(a), mk(b), mk(c)
	sa.extra = a.qp(sa.cq, sa.cq, vqpOpts{typ: seam.QPTypeRC, uidx: 3})
	var pdn uint32
	if sa.extraP, pdn, err = a.d.AllocPD(); err != nil {
		t.Fatal(err)
	}
	traffic := func(s *side) {
		t.Helper()
		s.q.recv(wqe.SGE{Addr: addr(s.mem[4096:]), Length: 256, LKey: s.mr.LKey})
		s.p.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: []wqe.SGE{{Addr: addr(s.mem), Length: 32, LKey: s.mr.LKey}}})
		var got []uint8
		for range 2 {
			got = append(got, decode(t, s.cq.next()).Opcode)
		}
		slices.Sort(got)
		if !slices.Equal(got, []uint8{wqe.CQEReq, wqe.CQERespSend}) {
			t.Errorf("traffic: CQE opcodes %v", got)
		}
	}
	for _, s := range []*side{sa, sb, sc} {
		traffic(s)
	}

	// a's handles are not b's: a handle only a has is not found in b.
	if _, err := b.d.QueryQP(sa.extra.h, maskState); !errors.Is(err, unix.ENOENT) {
		t.Errorf("b queries a's QP handle: %v, want ENOENT", err)
	}
	if err := b.d.DestroyQP(sa.extra.h); !errors.Is(err, unix.ENOENT) {
		t.Errorf("b destroys a's QP handle: %v, want ENOENT", err)
	}
	if err := b.d.DeallocPD(sa.extraP); !errors.Is(err, unix.ENOENT) {
		t.Errorf("b deallocates a's PD handle: %v, want ENOENT", err)
	}
	if _, err := b.d.RegMR(sa.extraP, sb.mem, accessLocalWrite); !errors.Is(err, unix.ENOENT) {
		t.Errorf("b registers memory in a's PD handle: %v, want ENOENT", err)
	}
	// The DEVX context cannot reach a's firmware objects (uid 0): its uid is
	// not theirs.
	in := mbox(prm.CreateMkeyIn.Layout(), prm.MLX5_CMD_OP_CREATE_MKEY)
	prm.Mkc.AccessMode10.At(prm.CreateMkeyIn.MemoryKeyMkeyEntry).Set(in, accessModeKLMS)
	prm.Mkc.Pd.At(prm.CreateMkeyIn.MemoryKeyMkeyEntry).Set(in, uint64(pdn))
	var fe *FirmwareError
	if _, err := c.d.ObjCreate(in, make([]byte, 16)); !errors.As(err, &fe) || fe.Cmd.Status != prm.MLX5_CMD_STAT_BAD_RES_ERR {
		t.Errorf("the DEVX context makes an mkey in a's PD: %v, want BAD_RES_ERR", err)
	}
	qq := mbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(qq, uint64(sa.p.qpn))
	if st := c.d.Exec(qq, make([]byte, prm.QueryQpOut.Layout().Size)); st != prm.MLX5_CMD_STAT_BAD_RES_ERR {
		t.Errorf("the DEVX context's QUERY_QP of a's QP: %v, want BAD_RES_ERR", st)
	}
	// Exec of a context without DEVX runs as uid 0, the kernel's: the
	// firmware answers for any context's uid 0 objects.
	if st := b.d.Exec(qq, make([]byte, prm.QueryQpOut.Layout().Size)); st != prm.MLX5_CMD_STAT_OK {
		t.Errorf("b's QUERY_QP of a's QP as uid 0: %v", st)
	}
	if err := b.d.InjectSendError(sa.p.qpn); err == nil {
		t.Error("b injected an error into a's QP")
	}

	// A doorbell of b naming a's QP, and a CQ doorbell of b naming a's CQ:
	// faults of b, and a's queue does not run.
	sa.q.recv(wqe.SGE{Addr: addr(sa.mem[4096:]), Length: 256, LKey: sa.mr.LKey})
	sa.p.postVia(b, wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: []wqe.SGE{{Addr: addr(sa.mem), Length: 8, LKey: sa.mr.LKey}}})
	var db [8]byte
	binary.BigEndian.PutUint32(db[4:], sa.cq.cqn)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b.ncPage[0x20])), binary.NativeEndian.Uint64(db[:]))
	sa.cq.none(30 * time.Millisecond)
	var qpFault, cqFault bool
	for _, f := range b.d.Faults() {
		qpFault = qpFault || strings.Contains(f, "names QP") && strings.Contains(f, "not this context's")
		cqFault = cqFault || strings.Contains(f, "names CQ") && strings.Contains(f, "not this context's")
	}
	if !qpFault || !cqFault {
		t.Errorf("b's faults %q: want its doorbells on a's QP and CQ", b.d.Faults())
	}
	if f := a.d.Faults(); len(f) != 0 {
		t.Errorf("a's faults %q: b's doorbells are b's", f)
	}
	// Rung through a's own page, it runs, with the next.
	sa.q.recv(wqe.SGE{Addr: addr(sa.mem[8192:]), Length: 256, LKey: sa.mr.LKey})
	sa.p.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: []wqe.SGE{{Addr: addr(sa.mem), Length: 8, LKey: sa.mr.LKey}}})
	var got []uint8
	for range 4 {
		got = append(got, decode(t, sa.cq.next()).Opcode)
	}
	slices.Sort(got)
	if !slices.Equal(got, []uint8{wqe.CQEReq, wqe.CQEReq, wqe.CQERespSend, wqe.CQERespSend}) {
		t.Errorf("a's own doorbell: CQE opcodes %v", got)
	}

	// b keeps a firmware object its Exec made (uid 0, like a's).
	pdIn := mbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD)
	if st := b.d.Exec(pdIn, make([]byte, 16)); st != prm.MLX5_CMD_STAT_OK {
		t.Fatal(st)
	}

	// Closing a takes a's objects and no other's; b and c go on.
	nb, nc := fwObjects(b.d), fwObjects(c.d)
	a.d.Close()
	if n := fwObjects(a.d); n != 0 {
		t.Errorf("%d firmware objects of a after its Close", n)
	}
	if n, m := fwObjects(b.d), fwObjects(c.d); n != nb || m != nc {
		t.Errorf("a's Close: b has %d firmware objects (had %d), c %d (had %d)", n, nb, m, nc)
	}
	traffic(sb)
	traffic(sc)
	b.d.Close()
	if n, m := fwObjects(b.d), fwObjects(c.d); n != 0 || m != nc {
		t.Errorf("b's Close: b has %d firmware objects, c %d (had %d)", n, m, nc)
	}
	traffic(sc)
	c.d.Close()
	c.d.h.mu.Lock()
	left, uids := c.d.h.objects(), len(c.d.h.uids)
	c.d.h.mu.Unlock()
	if left != 0 || uids != 1 {
		t.Errorf("all closed: %d firmware objects, %d uids (want the whitelist uid alone)", left, uids)
	}
}
