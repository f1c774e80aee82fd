package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// Traffic and events through verbs objects, end to end: created from
// mlx5's driver data, moved through the states with IB attributes, WQEs
// from wqe's encoders, CQEs read with wqe's decoder, events read from the
// completion channel and the async event file, torn down to nothing.

const remoteRW = ibAccessRemoteWrite | ibAccessRemoteRead

func decode(t *testing.T, b []byte) wqe.CQE {
	t.Helper()
	var c wqe.CQE
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestVerbsRCEndToEnd(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	base := d.Objects()
	ch, err := d.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	scq, rcq := r.cq(63, ch), r.cq(127, ch)
	a := r.qp(scq, rcq, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
	b := r.qp(scq, rcq, vqpOpts{typ: seam.QPTypeRC, uidx: 2})
	a.connect(b, remoteRW)
	b.connect(a, remoteRW)
	mem, mr := r.mr(1<<16, accessLocalWrite|remoteRW)
	pattern(mem[:4096], 7)

	// SEND, solicited and signaled, with both CQs armed: two completion
	// events, one per CQ.
	scq.arm(false)
	rcq.arm(false)
	ridx := b.recv(wqe.SGE{Addr: addr(mem[8192:]), Length: 1024, LKey: mr.LKey})
	sidx := a.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled | wqe.SendSolicited, SGL: []wqe.SGE{{Addr: addr(mem), Length: 300, LKey: mr.LKey}}})
	rc := decode(t, rcq.next())
	if rc.Opcode != wqe.CQERespSend || rc.QPN != b.qpn || rc.SrcQP() != a.qpn || rc.ByteCount != 300 || rc.WQECounter != ridx || rc.SrqnUIdx != 2 {
		t.Errorf("responder CQE %+v", rc)
	}
	sc := decode(t, scq.next())
	if sc.Opcode != wqe.CQEReq || sc.QPN != a.qpn || sc.WQECounter != sidx || sc.WQEOpcode != wqe.OpcodeSend || sc.SrqnUIdx != 1 {
		t.Errorf("requester CQE %+v", sc)
	}
	if !bytes.Equal(mem[8192:8192+300], mem[:300]) {
		t.Error("the message did not arrive")
	}
	got := []uint64{nextComp(t, ch, mustCome), nextComp(t, ch, mustCome)}
	slices.Sort(got)
	if !slices.Equal(got, []uint64{0xc0 + 63, 0xc0 + 127}) {
		t.Errorf("completion events %#x", got)
	}
	scq.sn++
	rcq.sn++
	noComp(t, ch, 20*time.Millisecond) // fired: disarmed

	// RDMA WRITE with immediate and RDMA READ.
	b.recv(wqe.SGE{Addr: addr(mem[8192:]), Length: 16, LKey: mr.LKey})
	a.post(wqe.Send{Opcode: wqe.OpcodeRDMAWriteImm, Flags: wqe.SendSignaled, Imm: 0x11223344, RemoteAddr: addr(mem[16384:]), RKey: mr.RKey,
		SGL: []wqe.SGE{{Addr: addr(mem[100:]), Length: 500, LKey: mr.LKey}}})
	if c := decode(t, rcq.next()); c.Opcode != wqe.CQERespWRImm || c.Imm != 0x11223344 || c.ByteCount != 500 {
		t.Errorf("RDMA WRITE with immediate: %+v", c)
	}
	decode(t, scq.next())
	if !bytes.Equal(mem[16384:16384+500], mem[100:600]) {
		t.Error("RDMA WRITE: data differs")
	}
	a.post(wqe.Send{Opcode: wqe.OpcodeRDMARead, Flags: wqe.SendSignaled, RemoteAddr: addr(mem[1000:]), RKey: mr.RKey,
		SGL: []wqe.SGE{{Addr: addr(mem[32768:]), Length: 200, LKey: mr.LKey}}})
	if c := decode(t, scq.next()); c.Opcode != wqe.CQEReq || c.ByteCount != 200 {
		t.Errorf("RDMA READ: %+v", c)
	}
	if !bytes.Equal(mem[32768:32768+200], mem[1000:1200]) {
		t.Error("RDMA READ: data differs")
	}

	// The attributes as the kernel reports them.
	attr, err := d.QueryQP(a.h, maskState)
	if err != nil {
		t.Fatal(err)
	}
	wantAH := r.roceAH(3)
	wantAH.GRH.HopLimit = resolvedHopLimit
	want := seam.QPAttr{State: QPStateRTS, CurState: QPStateRTS, PathMTU: ibMTU1024, RQPSN: 0x123, SQPSN: 0x456, DestQPN: b.qpn,
		AccessFlags: remoteRW, Cap: seam.QPCap{MaxRecvWR: 16, MaxRecvSGE: 4}, AH: wantAH, MaxRdAtomic: 1, MaxDestRdAtomic: 1,
		MinRNRTimer: 12, Port: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7}
	// The data path advanced the PSNs in no way the model tracks: they
	// are the attributes given.
	if attr != want {
		t.Errorf("query\n got %+v\nwant %+v", attr, want)
	}
	// The path mlx5_set_path wrote, through DEVX QUERY_QP on the verbs
	// handle: the resolved MAC, the UDP source port of the flow label
	// rdma_calc_flow_label made, the GID.
	in := mbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(in, uint64(a.qpn))
	out := make([]byte, prm.QueryQpOut.Layout().Size)
	if err := d.ObjQuery(a.h, in, out); err != nil {
		t.Fatal(err)
	}
	path := prm.Ads.Rmac310.At(prm.Qpc.PrimaryAddressPath.At(prm.QueryQpOut.Qpc))
	mac := append(prm.Ads.Rmac4732.At(prm.Qpc.PrimaryAddressPath.At(prm.QueryQpOut.Qpc)).Bytes(out), path.Bytes(out)...)
	sport := prm.Ads.UdpSport.At(prm.Qpc.PrimaryAddressPath.At(prm.QueryQpOut.Qpc)).Get(out)
	if !bytes.Equal(mac, portMAC[:]) || sport != uint64(flowLabelToUDPSport(calcFlowLabel(a.qpn, b.qpn))) {
		t.Errorf("path: rmac %x, udp_sport %#x", mac, sport)
	}

	// Teardown: a CQ in use is EBUSY; then everything goes.
	if err := d.DestroyCQ(scq.h); !errors.Is(err, unix.EBUSY) {
		t.Errorf("destroy a CQ in use: %v, want EBUSY", err)
	}
	if err := d.DeallocPD(r.pd); !errors.Is(err, unix.EBUSY) {
		t.Errorf("dealloc a PD in use: %v, want EBUSY", err)
	}
	for _, h := range []seam.Handle{a.h, b.h} {
		if err := d.DestroyQP(h); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []seam.Handle{scq.h, rcq.h} {
		if err := d.DestroyCQ(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeregMR(mr.Handle); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if n := d.Objects(); n != base-1 { // the MR's mkey was counted in base? no: base had the PD, UARs and maps
		t.Logf("objects %d, base %d", n, base)
	}
	if n := d.Objects(); n != base {
		t.Errorf("%d objects after the teardown, %d before", n, base)
	}
}

func TestCQArm(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	ch, _ := d.NewCompChannel()
	cq := r.cq(15, ch)
	user := uint64(0xc0 + 15)
	a := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
	b := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 2})
	a.connect(b, 0)
	b.connect(a, 0)
	mem, mr := r.mr(8192, accessLocalWrite)
	send := func(flags wqe.SendFlags) {
		b.recv(wqe.SGE{Addr: addr(mem[4096:]), Length: 64, LKey: mr.LKey})
		a.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: flags, SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}})
		cq.next()
	}
	cqcSt := func() uint64 {
		in := mbox(prm.QueryCqIn.Layout(), prm.MLX5_CMD_OP_QUERY_CQ)
		prm.QueryCqIn.Cqn.Set(in, uint64(cq.cqn))
		out := make([]byte, prm.QueryCqOut.Layout().Size)
		if err := d.ObjQuery(cq.h, in, out); err != nil {
			t.Fatal(err)
		}
		return prm.Cqc.St.At(prm.QueryCqOut.CqContext).Get(out)
	}

	// Not armed: no event.
	send(0)
	noComp(t, ch, 20*time.Millisecond)
	// Armed for the next completion: one event, then disarmed.
	cq.arm(false)
	if st := cqcSt(); st != cqcStArmed {
		t.Errorf("cqc.st %#x after the arm, want NOTIFICATION_REQUEST_ARMED", st)
	}
	send(0)
	cq.event(ch, user)
	if st := cqcSt(); st != cqcStFired {
		t.Errorf("cqc.st %#x after the event, want FIRED", st)
	}
	send(0)
	noComp(t, ch, 20*time.Millisecond)
	// An arm with the old sequence number is stale: ignored.
	cq.sn--
	cq.arm(false)
	cq.sn++
	send(0)
	noComp(t, ch, 20*time.Millisecond)
	// An arm below CQEs already written fires at once.
	b.recv(wqe.SGE{Addr: addr(mem[4096:]), Length: 64, LKey: mr.LKey})
	a.post(wqe.Send{Opcode: wqe.OpcodeSend, SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}})
	time.Sleep(20 * time.Millisecond) // the CQE is there, not polled
	cq.arm(false)
	cq.event(ch, user)
	cq.next()
	// Solicited: an unsolicited receive does not fire, a solicited one
	// does.
	cq.arm(true)
	if st := cqcSt(); st != cqcStSolArmed {
		t.Errorf("cqc.st %#x after a solicited arm", st)
	}
	send(0)
	noComp(t, ch, 20*time.Millisecond)
	send(wqe.SendSolicited)
	cq.event(ch, user)
	// ... and an error completion fires it too.
	cq.arm(true)
	a.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: 0xdead00}}})
	if c := decode(t, cq.next()); c.Opcode != wqe.CQEReqErr {
		t.Fatalf("CQE %+v, want an error", c)
	}
	cq.event(ch, user)
	// A doorbell naming another context's CQ, or through a page not the
	// CQ's, is a fault.
	var db [8]byte
	binary.BigEndian.PutUint32(db[4:], cq.cqn)
	copy(r.bfPage[0x20:], db[:])
	waitFaults(t, d, 1)
}

// TestDEVXCompEvent: a DEVX CQ armed through its UAR page raises the
// completion EQE (MLX5_EVENT_TYPE_COMP, the CQN) to the subscribers of
// COMP on it (devx_cq_comp).
func TestDEVXCompEvent(t *testing.T) {
	r := newRig(t, "cx6dx")
	cq := r.cq(4)
	ch := newChannel(t, r.d)
	if err := r.d.Subscribe(ch, cq.h, []uint16{evComp}, 0xc0de); err != nil {
		t.Fatal(err)
	}
	a, b := r.qp(cq, cq, qpOpts{uidx: 1}), r.qp(cq, cq, qpOpts{uidx: 2})
	connect(a, b, false)
	var w [8]byte
	binary.BigEndian.PutUint32(w[0:], 0) // sn 0, next completion, ci 0
	binary.BigEndian.PutUint32(w[4:], cq.cqn)
	copy(r.page[0x20:0x28], w[:])
	b.recv()
	a.post(twqe{opcode: tOpNOP, fm: tSignaled})
	e := nextEvent(t, ch, mustCome)
	if e.cookie != 0xc0de || e.eqe[eqeType] != evComp || binary.BigEndian.Uint32(e.eqe[eqeData+compCQN:])&0xffffff != cq.cqn {
		t.Errorf("event %+v", e)
	}
}

func TestVerbsAsyncEvents(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	cq := r.cq(255, nil)
	mem, mr := r.mr(8192, accessLocalWrite|remoteRW)

	// COMM_EST: the first message to a QP in RTR, once.
	a := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
	b := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 2})
	a.connect(b, 0)
	for _, s := range []struct {
		a    seam.QPAttr
		mask uint32
	}{
		{seam.QPAttr{State: QPStateInit, Port: 1}, maskState | maskPKey | maskPort | maskAccess},
		{seam.QPAttr{State: QPStateRTR, PathMTU: ibMTU1024, DestQPN: a.qpn, AH: r.roceAH(3)},
			maskState | maskAV | maskPathMTU | maskDestQPN | maskRQPSN | maskMaxDestRdAtomic | maskMinRNRTimer},
	} {
		at := s.a
		if err := d.ModifyQP(b.h, &at, s.mask, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		b.recv(wqe.SGE{Addr: addr(mem[4096:]), Length: 64, LKey: mr.LKey})
		a.post(wqe.Send{Opcode: wqe.OpcodeSend, SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}})
		cq.next()
	}
	if e := nextAsync(t, d, mustCome); e != (seam.AsyncEvent{Type: ibEventCommEst, Element: 0x9002}) {
		t.Errorf("event %+v, want COMM_EST of QP 2", e)
	}
	noAsync(t, d, 20*time.Millisecond)

	// QP_ACCESS_ERR: an RDMA WRITE with a bad rkey; QP_REQ_ERR: an RDMA
	// WRITE to a QP without remote write. The responder goes to ERR.
	for _, tc := range []struct {
		access uint32
		rkey   uint32
		event  uint32
		synd   wqe.Syndrome
	}{
		{remoteRW, 0xbad00, ibEventQPAccessErr, 0x13},
		{0, mr.RKey, ibEventQPReqErr, 0x12},
	} {
		p := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 3})
		q := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 4})
		p.connect(q, 0)
		q.connect(p, tc.access)
		p.post(wqe.Send{Opcode: wqe.OpcodeRDMAWrite, Flags: wqe.SendSignaled, RemoteAddr: addr(mem[4096:]), RKey: tc.rkey,
			SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}})
		if c := decode(t, cq.next()); c.Opcode != wqe.CQEReqErr || c.Syndrome != tc.synd {
			t.Errorf("requester CQE %+v, want syndrome %#x", c, tc.synd)
		}
		if e := nextAsync(t, d, mustCome); e != (seam.AsyncEvent{Type: tc.event, Element: 0x9004}) {
			t.Errorf("event %+v, want %d of QP 4", e, tc.event)
		}
		if at, _ := d.QueryQP(q.h, maskState); at.State != QPStateErr {
			t.Errorf("responder in %d, want ERR", at.State)
		}
		d.DestroyQP(p.h)
		d.DestroyQP(q.h)
	}

	// CQ_ERR: a CQ that overruns.
	small := r.cq(1, nil) // two CQEs
	p := r.qp(small, small, vqpOpts{typ: seam.QPTypeRC, uidx: 5})
	q := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 6})
	p.connect(q, 0)
	q.connect(p, 0)
	for range 3 {
		q.recv(wqe.SGE{Addr: addr(mem[4096:]), Length: 64, LKey: mr.LKey})
		p.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}})
		cq.next()
	}
	if e := nextAsync(t, d, mustCome); e != (seam.AsyncEvent{Type: ibEventCQErr, Element: 0xc0 + 1}) {
		t.Errorf("event %+v, want CQ_ERR", e)
	}

	// LAST_WQE_REACHED: a QP on an SRQ that enters ERR; SRQ_LIMIT_REACHED.
	srq := r.srq(7, 1)
	s := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 7, srq: srq.h})
	u := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 8})
	s.connect(u, 0)
	u.connect(s, 0)
	for range 3 {
		srq.post(wqe.SGE{Addr: addr(mem[4096:]), Length: 64, LKey: mr.LKey})
	}
	if err := d.ModifySRQ(srq.h, 8); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a limit of the SRQ's size: %v, want EINVAL", err)
	}
	if err := d.ModifySRQ(srq.h, 2); err != nil {
		t.Fatal(err)
	}
	u.post(wqe.Send{Opcode: wqe.OpcodeSend, SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}})
	cq.next() // two left: not below the limit
	noAsync(t, d, 20*time.Millisecond)
	u.post(wqe.Send{Opcode: wqe.OpcodeSend, SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}})
	cq.next()
	if e := nextAsync(t, d, mustCome); e != (seam.AsyncEvent{Type: ibEventSRQLimitReached, Element: 0x5e0}) {
		t.Errorf("event %+v, want SRQ_LIMIT_REACHED", e)
	}
	toErr := seam.QPAttr{State: QPStateErr}
	if err := d.ModifyQP(s.h, &toErr, maskState, nil, nil); err != nil {
		t.Fatal(err)
	}
	if e := nextAsync(t, d, mustCome); e != (seam.AsyncEvent{Type: ibEventQPLastWQEReached, Element: 0x9007}) {
		t.Errorf("event %+v, want QP_LAST_WQE_REACHED", e)
	}

	// A destroyed QP's unread events go with it.
	if err := d.ModifyQP(s.h, &seam.QPAttr{State: QPStateReset}, maskState, nil, nil); err != nil {
		t.Fatal(err)
	}
	q2 := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 10})
	q2.connect(u, remoteRW)
	d.h.mu.Lock()
	d.h.qpEvent(evWQCatasError, q2.fwQP(t))
	d.h.mu.Unlock()
	if err := d.DestroyQP(q2.h); err != nil {
		t.Fatal(err)
	}
	noAsync(t, d, 20*time.Millisecond)

	d.Close()
	if _, err := d.NextAsyncEvent(t.Context()); !errors.Is(err, unix.EIO) {
		t.Errorf("async event after Close: %v, want EIO", err)
	}
}

func (q *vqpT) fwQP(t *testing.T) *qpObj {
	t.Helper()
	f := q.r.d.h.qps[q.qpn]
	if f == nil {
		t.Fatalf("no QP %#x", q.qpn)
	}
	return f
}

func TestVerbsSRQ(t *testing.T) {
	r := newVRig(t, "cx7")
	d := r.d
	cq := r.cq(255, nil)
	mem, mr := r.mr(1<<16, accessLocalWrite)
	srq := r.srq(7, 2)
	if _, _, err := d.CreateSRQ(seam.SRQCreate{PD: r.pd, MaxWR: 1 << 15, MaxSGE: 1}, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("max_wr of the SRQ limit: %v, want EINVAL", err)
	}
	if _, _, err := d.CreateSRQ(seam.SRQCreate{PD: r.pd, MaxWR: 1, MaxSGE: 33}, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("max_sge over max_wqe_sz_rq/16: %v, want EINVAL", err)
	}
	a := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 1, srq: srq.h})
	b := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 2, srq: srq.h})
	s := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 3})
	t2 := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 4})
	a.connect(s, 0)
	s.connect(a, 0)
	b.connect(t2, 0)
	t2.connect(b, 0)
	if err := d.DestroySRQ(srq.h); !errors.Is(err, unix.EBUSY) {
		t.Errorf("destroy an SRQ in use: %v, want EBUSY", err)
	}
	// WQEs are taken in the order of their links, whichever QP receives,
	// and the CQE names the WQE by its index and the QP by its user index.
	var idx []uint16
	for i := range 6 {
		idx = append(idx, srq.post(wqe.SGE{Addr: addr(mem[4096+512*i:]), Length: 512, LKey: mr.LKey}))
	}
	for i := range 6 {
		from, to := s, a
		if i%2 == 1 {
			from, to = t2, b
		}
		from.post(wqe.Send{Opcode: wqe.OpcodeSend, Imm: uint32(i), SGL: []wqe.SGE{{Addr: addr(mem), Length: uint32(10 + i), LKey: mr.LKey}}})
		c := decode(t, cq.next())
		if c.Opcode != wqe.CQERespSend || c.WQECounter != idx[i] || c.QPN != to.qpn || c.SrqnUIdx != to.uidx || c.ByteCount != uint32(10+i) {
			t.Errorf("receive %d: %+v, want WQE %d on QP %#x", i, c, idx[i], to.qpn)
		}
		srq.free(c.WQECounter)
	}
	// Freed WQEs come back after the tail: posting more wraps the list.
	for i := range 8 {
		srq.post(wqe.SGE{Addr: addr(mem[4096+512*(i%8):]), Length: 512, LKey: mr.LKey})
	}
	for i := range 8 {
		s.post(wqe.Send{Opcode: wqe.OpcodeSend, SGL: []wqe.SGE{{Addr: addr(mem), Length: 4, LKey: mr.LKey}}})
		c := decode(t, cq.next())
		if c.Opcode != wqe.CQERespSend {
			t.Fatalf("receive %d after the wrap: %+v; WQE errors %q", i, c, d.WQEErrors())
		}
		srq.free(c.WQECounter)
	}
	// An empty SRQ: RNR, retried forever (rnr_retry 7), until a WQE comes.
	s.post(wqe.Send{Opcode: wqe.OpcodeSend, SGL: []wqe.SGE{{Addr: addr(mem), Length: 4, LKey: mr.LKey}}})
	cq.none(30 * time.Millisecond)
	srq.post(wqe.SGE{Addr: addr(mem[4096:]), Length: 64, LKey: mr.LKey})
	if c := decode(t, cq.next()); c.Opcode != wqe.CQERespSend {
		t.Errorf("after the RNR wait: %+v", c)
	}
	for _, q := range []*vqpT{a, b, s, t2} {
		d.DestroyQP(q.h)
	}
	if err := d.DestroySRQ(srq.h); err != nil {
		t.Fatal(err)
	}
}

// roceAV is the address vector libmlx5 builds for a RoCE AH (the kernel's
// MAC in rmac, the GRH's fields with the source GID index), as wqe.AV
// carries it: mlx5_create_ah leaves the GRH bit (30) 0 on Ethernet, where
// it is reserved.
func roceAV(ah seam.AHAttr, dmac [6]byte) wqe.AV {
	return wqe.AV{RMAC: dmac, HopLimit: ah.GRH.HopLimit, TClass: ah.GRH.TrafficClass, RGID: ah.GRH.DGID,
		GRHGidFl: uint32(ah.GRH.SGIDIndex)<<20 | ah.GRH.FlowLabel}
}

func TestVerbsAH(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	mcast4 := [16]byte{10: 0xff, 11: 0xff, 12: 239, 13: 1, 14: 2, 15: 3}
	mcast6 := [16]byte{0: 0xff, 1: 0x02, 12: 0xa, 13: 0xb, 14: 0xc, 15: 0xd}
	peerLL := [16]byte{0: 0xfe, 1: 0x80, 8: 0x02, 9: 0x11, 10: 0x22, 11: 0xff, 12: 0xfe, 13: 0x33, 14: 0x44, 15: 0x55}
	for _, tc := range []struct {
		name  string
		f     func(a *seam.AHAttr)
		out   int
		mac   [6]byte
		errno unix.Errno
	}{
		{"the port's v2 IPv4 GID", func(*seam.AHAttr) {}, 16, portMAC, 0},
		{"the port's link-local GID", func(a *seam.AHAttr) { a.GRH.DGID, a.GRH.SGIDIndex = r.roceAH(1).GRH.DGID, 1 }, 16, portMAC, 0},
		{"a peer's link-local GID from RoCE v1", func(a *seam.AHAttr) { a.GRH.DGID, a.GRH.SGIDIndex = peerLL, 0 }, 16, [6]byte{0, 0x11, 0x22, 0x33, 0x44, 0x55}, 0},
		{"IPv4 multicast", func(a *seam.AHAttr) { a.GRH.DGID = mcast4 }, 16, [6]byte{1, 0, 0x5e, 1, 2, 3}, 0},
		{"IPv6 multicast", func(a *seam.AHAttr) { a.GRH.DGID = mcast6 }, 10, [6]byte{0x33, 0x33, 0xa, 0xb, 0xc, 0xd}, 0},
		{"nobody", func(a *seam.AHAttr) { a.GRH.DGID[15] = 99 }, 16, portMAC, unix.ETIMEDOUT},
		{"a peer's link-local GID from RoCE v2", func(a *seam.AHAttr) { a.GRH.DGID = peerLL }, 16, portMAC, unix.ETIMEDOUT},
		{"no GRH", func(a *seam.AHAttr) { a.IsGlobal = false }, 16, portMAC, unix.EINVAL},
		{"empty GID index", func(a *seam.AHAttr) { a.GRH.SGIDIndex = 6 }, 16, portMAC, unix.EINVAL},
		{"port 2", func(a *seam.AHAttr) { a.Port = 2 }, 16, portMAC, unix.EINVAL},
		{"short response", func(*seam.AHAttr) {}, 9, portMAC, unix.EINVAL},
	} {
		a := r.roceAH(3)
		tc.f(&a)
		out := make([]byte, tc.out)
		h, err := d.CreateAH(r.pd, &a, 1, out)
		if tc.errno != 0 {
			if !errors.Is(err, tc.errno) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.errno)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if binary.NativeEndian.Uint32(out) != 10 || [6]byte(out[4:10]) != tc.mac {
			t.Errorf("%s: response %x, want length 10 and MAC %x", tc.name, out, tc.mac)
		}
		if err := d.DeallocPD(r.pd); !errors.Is(err, unix.EBUSY) {
			t.Errorf("%s: dealloc the AH's PD: %v, want EBUSY", tc.name, err)
		}
		if err := d.DestroyAH(h); err != nil {
			t.Fatal(err)
		}
	}
}

func TestVerbsUD(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	cq := r.cq(255, nil)
	mem, mr := r.mr(1<<16, accessLocalWrite)
	pattern(mem[:8192], 3)
	const qkey = 0x11111111
	a := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeUD, uidx: 1})
	b := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeUD, uidx: 2})
	a.udReady(qkey)
	b.udReady(qkey)
	ah := r.roceAH(3)
	ah.GRH.TrafficClass = 0x28
	ah.GRH.FlowLabel = 0x12345
	resp := make([]byte, 16)
	ahH, err := d.CreateAH(r.pd, &ah, 1, resp)
	if err != nil {
		t.Fatal(err)
	}
	av := roceAV(ah, [6]byte(resp[4:10]))
	rbuf := mem[32768:]
	send := func(dst uint32, key uint32, n int, av wqe.AV) uint16 {
		clear(rbuf[:4096])
		b.recv(wqe.SGE{Addr: addr(rbuf), Length: 4096, LKey: mr.LKey})
		return a.post(wqe.Send{Opcode: wqe.OpcodeSendImm, Flags: wqe.SendSignaled, Imm: 0xabcd,
			UD: &wqe.UD{AV: av, RemoteQPN: dst, QKey: key}, SGL: []wqe.SGE{{Addr: addr(mem), Length: uint32(n), LKey: mr.LKey}}})
	}
	// Delivered: the GRH (RoCE v2 over IPv4: 20 zero bytes, the IPv4
	// header) then the payload; the CQE has the GRH bit, the IPv4 header
	// type and the sender's QPN.
	sidx := send(b.qpn, qkey, 200, av)
	c := decode(t, cq.next())
	if c.Opcode != wqe.CQERespSendImm || c.ByteCount != 40+200 || c.SrcQP() != a.qpn || !c.GRH() || c.Imm != 0xabcd ||
		(c.FlagsRQPN>>24)&3 != cqeL3IPv4 || c.SrqnUIdx != 2 {
		t.Errorf("receive CQE %+v", c)
	}
	if s := decode(t, cq.next()); s.Opcode != wqe.CQEReq || s.WQECounter != sidx {
		t.Errorf("send CQE %+v", s)
	}
	ip := rbuf[20:40]
	if !zero(rbuf[:20]) || ip[0] != 0x45 || ip[1] != 0x28 || ip[8] != 64 || ip[9] != 17 || ipChecksum(ip) != 0 ||
		!bytes.Equal(ip[12:16], portIPv4[:]) || !bytes.Equal(ip[16:20], portIPv4[:]) ||
		binary.BigEndian.Uint16(ip[2:]) != 20+8+12+8+4+200+4 {
		t.Errorf("GRH %x", rbuf[:40])
	}
	if !bytes.Equal(rbuf[40:240], mem[:200]) {
		t.Error("UD payload differs")
	}
	ip0 := bytes.Clone(rbuf[:40])
	// The kernel's address vector (mlx5_ib's create_ib_ah) sets the GRH
	// bit, reserved on RoCE: delivered the same.
	kav := av
	kav.GRHGidFl |= 1 << 30
	send(b.qpn, qkey, 200, kav)
	if c := decode(t, cq.next()); c.Opcode != wqe.CQERespSendImm || c.ByteCount != 40+200 || !bytes.Equal(rbuf[:240], append(bytes.Clone(ip0), mem[:200]...)) {
		t.Errorf("with the GRH bit set: %+v, %x", c, rbuf[:64])
	}
	decode(t, cq.next())
	// A privileged Q_Key (high bit) stands for the sender's own.
	send(b.qpn, 0x80000000, 8, av)
	if c := decode(t, cq.next()); c.Opcode != wqe.CQERespSendImm {
		t.Errorf("with the sender's Q_Key: %+v", c)
	}
	decode(t, cq.next())
	// RoCE v2 over IPv6 (the link-local GID): the IPv6 header.
	ah6 := r.roceAH(1)
	send(b.qpn, qkey, 8, roceAV(ah6, portMAC))
	if c := decode(t, cq.next()); c.Opcode != wqe.CQERespSendImm || (c.FlagsRQPN>>24)&3 != cqeL3IPv6 || rbuf[0]>>4 != 6 || rbuf[6] != 17 {
		t.Errorf("RoCE v2 over IPv6: %+v, GRH %x", c, rbuf[:40])
	}
	decode(t, cq.next())
	// Lost, and the sender completes all the same: a wrong Q_Key, a QP
	// that is not there, a destination off the port, a message over the
	// MTU, no receive WQE.
	rc := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 9})
	rc.connect(rc, 0)
	off := av
	off.RGID[15] = 9
	wrongMAC := av
	wrongMAC.RMAC[5] ^= 1
	for _, tc := range []struct {
		name string
		dst  uint32
		key  uint32
		n    int
		av   wqe.AV
	}{
		{"wrong Q_Key", b.qpn, 0x22, 8, av},
		{"no QP", 0xfffff0, qkey, 8, av},
		{"an RC QP", rc.qpn, qkey, 8, av},
		{"another GID", b.qpn, qkey, 8, off},
		{"another MAC", b.qpn, qkey, 8, wrongMAC},
		{"over the MTU", b.qpn, qkey, 1025, av},
		// Over log_msg_max too (mlx5_ib's UD 12): the MTU's check comes
		// first, no local length error.
		{"over log_msg_max", b.qpn, qkey, 4097, av},
	} {
		send(tc.dst, tc.key, tc.n, tc.av)
		if c := decode(t, cq.next()); c.Opcode != wqe.CQEReq || c.QPN != a.qpn {
			t.Errorf("%s: %+v, want the send's completion only", tc.name, c)
		}
		b.rqPI-- // the receive WQE stays: post it again next time
		b.setDBR(0, b.rqPI)
	}
	cq.none(20 * time.Millisecond)
	// Not for a UD QP: RDMA WRITE.
	a.post(wqe.Send{Opcode: wqe.OpcodeRDMAWrite, Flags: wqe.SendSignaled, RemoteAddr: 1, RKey: 1, SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}})
	if c := decode(t, cq.next()); c.Opcode != wqe.CQEReqErr || c.Syndrome != wqe.Syndrome(SyndromeLocalQPOp) {
		t.Errorf("RDMA WRITE on UD: %+v", c)
	}
	if err := d.DestroyAH(ahH); err != nil {
		t.Fatal(err)
	}
}

func TestVerbsUC(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	cq := r.cq(255, nil)
	mem, mr := r.mr(1<<16, accessLocalWrite|ibAccessRemoteWrite)
	pattern(mem[:4096], 5)
	a := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeUC, uidx: 1})
	b := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeUC, uidx: 2})
	a.connect(b, 0)
	b.connect(a, ibAccessRemoteWrite)
	sge := []wqe.SGE{{Addr: addr(mem), Length: 100, LKey: mr.LKey}}
	// SEND with a receive WQE; without one it is lost, and no RNR.
	b.recv(wqe.SGE{Addr: addr(mem[8192:]), Length: 200, LKey: mr.LKey})
	a.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: sge})
	if c := decode(t, cq.next()); c.Opcode != wqe.CQERespSend || c.ByteCount != 100 {
		t.Errorf("UC receive %+v", c)
	}
	decode(t, cq.next())
	a.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: sge})
	if c := decode(t, cq.next()); c.Opcode != wqe.CQEReq {
		t.Errorf("UC send without a receive WQE: %+v, want a success", c)
	}
	// Too long for the receive WQE: lost, the WQE stays.
	b.recv(wqe.SGE{Addr: addr(mem[8192:]), Length: 50, LKey: mr.LKey})
	a.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: sge})
	if c := decode(t, cq.next()); c.Opcode != wqe.CQEReq {
		t.Errorf("UC send too long: %+v, want a success", c)
	}
	a.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: []wqe.SGE{{Addr: addr(mem), Length: 50, LKey: mr.LKey}}})
	if c := decode(t, cq.next()); c.Opcode != wqe.CQERespSend || c.ByteCount != 50 {
		t.Errorf("the WQE that stayed: %+v", c)
	}
	decode(t, cq.next())
	// RDMA WRITE; with a bad rkey it is lost.
	a.post(wqe.Send{Opcode: wqe.OpcodeRDMAWrite, Flags: wqe.SendSignaled, RemoteAddr: addr(mem[16384:]), RKey: mr.RKey, SGL: sge})
	decode(t, cq.next())
	if !bytes.Equal(mem[16384:16484], mem[:100]) {
		t.Error("UC RDMA WRITE: data differs")
	}
	a.post(wqe.Send{Opcode: wqe.OpcodeRDMAWrite, Flags: wqe.SendSignaled, RemoteAddr: addr(mem[16384:]), RKey: 0xbad00, SGL: sge})
	if c := decode(t, cq.next()); c.Opcode != wqe.CQEReq {
		t.Errorf("UC RDMA WRITE with a bad rkey: %+v, want a success", c)
	}
	if at, _ := d.QueryQP(b.h, maskState); at.State != QPStateRTS {
		t.Errorf("the UC responder went to %d", at.State)
	}
	// No RDMA READ on UC.
	a.post(wqe.Send{Opcode: wqe.OpcodeRDMARead, Flags: wqe.SendSignaled, RemoteAddr: addr(mem[16384:]), RKey: mr.RKey, SGL: sge})
	if c := decode(t, cq.next()); c.Opcode != wqe.CQEReqErr || c.Syndrome != wqe.Syndrome(SyndromeLocalQPOp) {
		t.Errorf("RDMA READ on UC: %+v", c)
	}
}

func TestVerbsDCT(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	cq := r.cq(63, nil)
	srq := r.srq(15, 1)
	q, u, _, _ := r.qpCmd(cq, cq, vqpOpts{typ: seam.QPTypeDriver, flags: 1 << 4, uidx: 5, srq: srq.h})
	u.SqBufAddr = 0x1234567890 // access_key
	h, got, err := d.CreateQP(q, drv(&u), make([]byte, 40))
	if err != nil {
		t.Fatal(err)
	}
	if got.QPN != 0 {
		t.Errorf("a DCT's QP number before RTR is %#x, want 0", got.QPN)
	}
	if _, err := d.QueryQP(h, maskState); !errors.Is(err, unix.EINVAL) {
		t.Errorf("query before RTR: %v, want EINVAL", err)
	}
	init := seam.QPAttr{State: QPStateInit, Port: 1, AccessFlags: remoteRW}
	if err := d.ModifyQP(h, &init, maskState|maskPort|maskAccess, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("RESET to INIT without pkey_index: %v, want EINVAL", err)
	}
	if err := d.ModifyQP(h, &init, maskState|maskPKey|maskPort|maskAccess, nil, nil); err != nil {
		t.Fatal(err)
	}
	rtr := seam.QPAttr{State: QPStateRTR, PathMTU: ibMTU1024, MinRNRTimer: 7, AH: r.roceAH(3)}
	rtr.AH.GRH.TrafficClass = 8
	if err := d.ModifyQP(h, &rtr, maskState|maskAV|maskPathMTU|maskMinRNRTimer, nil, make([]byte, 7)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("INIT to RTR with no room for the DCT number: %v, want EINVAL", err)
	}
	resp := make([]byte, 16)
	if err := d.ModifyQP(h, &rtr, maskState|maskAV|maskPathMTU|maskMinRNRTimer, drv(&struct{ a, b, c, e uint32 }{e: eceVersion1}), resp); err != nil {
		t.Fatal(err)
	}
	dctn := binary.NativeEndian.Uint32(resp[4:])
	if binary.NativeEndian.Uint32(resp) != 16 || dctn == 0 || binary.NativeEndian.Uint32(resp[8:]) != eceVersion1 {
		t.Errorf("RTR response %x", resp)
	}
	f := d.h.qps[dctn]
	if f == nil || !f.dct || prm.Qpc.DcAccessKey.Get(f.qpc) != 0x1234567890 || uint32(prm.Qpc.UserIndex.Get(f.qpc)) != 5 {
		t.Fatalf("no DCT %#x as created", dctn)
	}
	a, err := d.QueryQP(h, maskState|maskAccess|maskPort|maskMinRNRTimer|maskAV|maskPathMTU|maskPKey)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != QPStateRTR || a.AccessFlags != remoteRW || a.Port != 1 || a.MinRNRTimer != 7 || a.PathMTU != ibMTU1024 ||
		a.AH.GRH.TrafficClass != 8 || a.AH.GRH.SGIDIndex != 3 {
		t.Errorf("DCT query %+v", a)
	}
	if _, err := d.QueryQP(h, maskSQPSN); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a mask the DCT does not answer: %v, want EINVAL", err)
	}
	// QUERY_QP is no command for a DCT.
	in := mbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(in, uint64(dctn))
	if st := d.Exec(in, make([]byte, prm.QueryQpOut.Layout().Size)); st != prm.MLX5_CMD_STAT_BAD_RES_ERR {
		t.Errorf("QUERY_QP of a DCT: %v", st)
	}
	rts := seam.QPAttr{State: QPStateRTS}
	if err := d.ModifyQP(h, &rts, maskState, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a DCT to RTS: %v, want EINVAL", err)
	}
	if err := d.DestroySRQ(srq.h); !errors.Is(err, unix.EBUSY) {
		t.Errorf("destroy the DCT's SRQ: %v, want EBUSY", err)
	}
	if err := d.DestroyQP(h); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.h.qps[dctn]; ok {
		t.Error("the DCT is still there")
	}
}

func TestVerbsDCI(t *testing.T) {
	r := newVRig(t, "cx7")
	d := r.d
	cq := r.cq(63, nil)
	c := oracleCmdOf(t, "dci.jsonl", "dci_streams/log_conc_4_log_err_2", "QP", "QP_CREATE")
	q, in := r.qpCmdOf(t, c, cq, cq)
	h, got, err := d.CreateQP(q, in, make([]byte, 40))
	if err != nil {
		t.Fatal(err)
	}
	f := d.h.qps[got.QPN]
	if prm.Qpc.St.Get(f.qpc) != stDCI || prm.Qpc.LogNumDciStreamChannels.Get(f.qpc) != 4 || prm.Qpc.LogNumDciErroredStreams.Get(f.qpc) != 2 ||
		prm.Qpc.RqType.Get(f.qpc) != srqRQ {
		t.Errorf("DCI context: st %d, streams %d/%d, rq_type %d", prm.Qpc.St.Get(f.qpc), prm.Qpc.LogNumDciStreamChannels.Get(f.qpc),
			prm.Qpc.LogNumDciErroredStreams.Get(f.qpc), prm.Qpc.RqType.Get(f.qpc))
	}
	// libmlx5's modify to INIT (mask 0x31), then modify_dci_qp_is_ok's
	// other rules, and the DEVX RTS2RTS with the stream id of
	// mlx5dv_dci_stream_id_reset.
	mods := oracleCmds(t, "dci.jsonl", "dci_streams/log_conc_4_log_err_2")
	var core []byte
	for _, m := range mods {
		if m.Method == "INVOKE_WRITE" {
			core = m.In["CORE_IN"]
			break
		}
	}
	mask := binary.NativeEndian.Uint32(core[68:])
	a := seam.QPAttr{State: core[96], PKeyIndex: binary.NativeEndian.Uint16(core[92:]), Port: core[104]}
	if err := d.ModifyQP(h, &a, mask, nil, nil); err != nil {
		t.Fatalf("libmlx5's DCI RESET to INIT (mask %#x): %v", mask, err)
	}
	for _, s := range []struct {
		a     seam.QPAttr
		mask  uint32
		errno unix.Errno
	}{
		{seam.QPAttr{State: QPStateRTR}, maskState, unix.EINVAL}, // no MTU
		{seam.QPAttr{State: QPStateRTR, PathMTU: ibMTU1024}, maskState | maskPathMTU | maskDestQPN, unix.EINVAL},
		{seam.QPAttr{State: QPStateRTR, PathMTU: ibMTU1024, AH: r.roceAH(3)}, maskState | maskPathMTU | maskAV, 0},
		{seam.QPAttr{State: QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			maskState | maskTimeout | maskRetryCnt | maskRNRRetry | maskMaxQPRdAtomic | maskSQPSN, 0},
	} {
		at := s.a
		err := d.ModifyQP(h, &at, s.mask, nil, nil)
		if s.errno == 0 && err != nil || s.errno != 0 && !errors.Is(err, s.errno) {
			t.Errorf("DCI to %d mask %#x: %v, want %v", s.a.State, s.mask, err, s.errno)
		}
	}
	for _, m := range mods {
		if m.Method != "DEVX_OBJ_MODIFY" {
			continue
		}
		// The command reaches the firmware, which finds stream 0 of the
		// new DCI in no error (dc_test.go resets streams in error).
		cmd := append([]byte(nil), m.In["CMD_IN"]...)
		prm.Rts2rtsQpIn.Qpn.Set(cmd, uint64(got.QPN))
		if err := d.ObjModify(h, cmd, make([]byte, 16)); !errors.Is(err, prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR) {
			t.Errorf("libmlx5's DEVX RTS2RTS stream reset of a stream not in error: %v, want BAD_RES_STATE_ERR", err)
		}
	}
}

func TestVerbsModifyRules(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	cq := r.cq(63, nil)
	peer := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC})
	init := func() *vqpT {
		q := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC})
		a := seam.QPAttr{State: QPStateInit, Port: 1}
		if err := d.ModifyQP(q.h, &a, maskState|maskPKey|maskPort|maskAccess, nil, nil); err != nil {
			t.Fatal(err)
		}
		return q
	}
	rtr := func() seam.QPAttr {
		return seam.QPAttr{State: QPStateRTR, PathMTU: ibMTU1024, DestQPN: peer.qpn, AH: r.roceAH(3), MaxDestRdAtomic: 1}
	}
	const rtrMask = maskState | maskAV | maskPathMTU | maskDestQPN | maskRQPSN | maskMaxDestRdAtomic | maskMinRNRTimer
	ece := drv(&struct{ m, b1, b2, e uint32 }{e: eceVersion1})
	for _, tc := range []struct {
		name  string
		f     func(a *seam.QPAttr, mask *uint32, in *[]byte)
		errno unix.Errno
	}{
		{"ok", func(*seam.QPAttr, *uint32, *[]byte) {}, 0},
		{"ok with the driver data", func(_ *seam.QPAttr, _ *uint32, in *[]byte) { *in = ece }, 0},
		{"missing a required attribute", func(_ *seam.QPAttr, m *uint32, _ *[]byte) { *m &^= maskRQPSN }, unix.EINVAL},
		{"an attribute not allowed", func(_ *seam.QPAttr, m *uint32, _ *[]byte) { *m |= maskSQPSN }, unix.EINVAL},
		{"cur_state in INIT", func(a *seam.QPAttr, m *uint32, _ *[]byte) { *m |= maskCurState; a.CurState = QPStateInit }, unix.EINVAL},
		{"the AV's port is not the QP's", func(a *seam.QPAttr, _ *uint32, _ *[]byte) { a.AH.Port = 2 }, unix.EINVAL},
		{"an IB address", func(a *seam.QPAttr, _ *uint32, _ *[]byte) { a.AH.IsGlobal = false }, unix.EINVAL},
		{"an empty source GID", func(a *seam.QPAttr, _ *uint32, _ *[]byte) { a.AH.GRH.SGIDIndex = 9 }, unix.EINVAL},
		{"an unresolvable destination", func(a *seam.QPAttr, _ *uint32, _ *[]byte) { a.AH.GRH.DGID[15] = 77 }, unix.ETIMEDOUT},
		{"a static rate", func(a *seam.QPAttr, _ *uint32, _ *[]byte) { a.AH.StaticRate = 1 }, unix.EINVAL},
		{"a path MTU", func(a *seam.QPAttr, _ *uint32, _ *[]byte) { a.PathMTU = 6 }, unix.EINVAL},
		{"max_dest_rd_atomic", func(a *seam.QPAttr, _ *uint32, _ *[]byte) { a.MaxDestRdAtomic = 17 }, unix.EINVAL},
		{"pkey index", func(a *seam.QPAttr, m *uint32, _ *[]byte) { *m |= maskPKey; a.PKeyIndex = 1 }, unix.EINVAL},
		{"alternate path", func(a *seam.QPAttr, m *uint32, _ *[]byte) {
			*m |= maskAltPath
			a.AltPort, a.AltAH = 1, r.roceAH(3)
		}, unix.EINVAL},
		{"a state past ERR", func(a *seam.QPAttr, _ *uint32, _ *[]byte) { a.State = 7 }, unix.EINVAL},
		{"a mask bit past RATE_LIMIT", func(_ *seam.QPAttr, m *uint32, _ *[]byte) { *m |= 1 << 26 }, unix.EOPNOTSUPP},
		{"a reserved mask bit", func(_ *seam.QPAttr, m *uint32, _ *[]byte) { *m |= 1 << 21 }, unix.EOPNOTSUPP},
		{"short driver data", func(_ *seam.QPAttr, _ *uint32, in *[]byte) { *in = make([]byte, 8) }, unix.EINVAL},
		{"driver comp_mask", func(_ *seam.QPAttr, _ *uint32, in *[]byte) { *in = append([]byte{1}, make([]byte, 15)...) }, unix.EOPNOTSUPP},
		{"driver data tail", func(_ *seam.QPAttr, _ *uint32, in *[]byte) { *in = append(make([]byte, 16), 1) }, unix.EOPNOTSUPP},
	} {
		q := init()
		a, mask := rtr(), uint32(rtrMask)
		var in []byte
		tc.f(&a, &mask, &in)
		out := make([]byte, 16)
		err := d.ModifyQP(q.h, &a, mask, in, out)
		if tc.errno != 0 {
			if !errors.Is(err, tc.errno) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.errno)
			}
		} else if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		} else {
			// The QP's ECE (negotiated at create) is what the firmware
			// answers either way.
			if binary.NativeEndian.Uint32(out) != 16 || binary.NativeEndian.Uint32(out[8:]) != eceVersion1 {
				t.Errorf("%s: response %x", tc.name, out)
			}
		}
		d.DestroyQP(q.h)
	}
	// A privileged Q_Key, and RESET to RESET doing nothing.
	u := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeUD})
	a := seam.QPAttr{State: QPStateInit, Port: 1, QKey: 0x80000001}
	if err := d.ModifyQP(u.h, &a, maskState|maskPKey|maskPort|maskQKey, nil, nil); !errors.Is(err, unix.EPERM) {
		t.Errorf("privileged Q_Key: %v, want EPERM", err)
	}
	rst := seam.QPAttr{State: QPStateReset}
	if err := d.ModifyQP(u.h, &rst, maskState, nil, nil); err != nil {
		t.Errorf("RESET to RESET: %v", err)
	}
	// SQE to RTS through verbs (the kernel learns of SQE from a query, or
	// is told with cur_state); RC takes no cur_state there.
	q := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC})
	q.connect(peer, 0)
	if err := d.InjectSendError(q.qpn); err != nil {
		t.Fatal(err)
	}
	rts := seam.QPAttr{State: QPStateRTS, CurState: QPStateSQE}
	if err := d.ModifyQP(q.h, &rts, maskState|maskCurState, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("RC SQE to RTS with cur_state: %v, want EINVAL", err)
	}
	if at, _ := d.QueryQP(q.h, maskState); at.State != QPStateSQE {
		t.Fatalf("state %d after the send error", at.State)
	}
	if err := d.ModifyQP(q.h, &rts, maskState, nil, nil); err != nil {
		t.Errorf("SQE to RTS: %v", err)
	}
	if s, _ := d.QPState(q.qpn); s != StateRTS {
		t.Errorf("firmware state %#x", s)
	}
	// Back to RST and again: the kernel and the firmware agree.
	if err := d.ModifyQP(q.h, &rst, maskState, nil, nil); err != nil {
		t.Fatal(err)
	}
	if s, _ := d.QPState(q.qpn); s != StateRST {
		t.Errorf("firmware state %#x after RESET", s)
	}
}

// TestVerbsClose: a context closed with verbs objects of every kind holds
// nothing after, and its event files answer EIO.
func TestVerbsClose(t *testing.T) {
	r := newVRig(t, "cx7")
	d := r.d
	ch, _ := d.NewCompChannel()
	cq := r.cq(63, ch)
	srq := r.srq(15, 1)
	a := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 1, srq: srq.h})
	b := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeUD, uidx: 2})
	_ = a
	_ = b
	q, u, _, _ := r.qpCmd(cq, cq, vqpOpts{typ: seam.QPTypeDriver, flags: 1 << 4, uidx: 3, srq: srq.h})
	if _, _, err := d.CreateQP(q, drv(&u), nil); err != nil {
		t.Fatal(err)
	}
	ah := r.roceAH(3)
	if _, err := d.CreateAH(r.pd, &ah, 1, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	r.mr(4096, accessLocalWrite)
	d.Close()
	for _, p := range [][]byte{r.bfPage, r.ncPage} {
		d.UnmapUAR(p)
	}
	r.bfPage, r.ncPage = nil, nil
	if n := d.Objects(); n != 0 {
		t.Errorf("%d objects after Close", n)
	}
	if _, err := ch.Next(t.Context()); !errors.Is(err, unix.EIO) {
		t.Errorf("completion channel after Close: %v, want EIO", err)
	}
	if _, err := d.CreateAH(r.pd, &ah, 1, nil); !errors.Is(err, unix.EBADF) {
		t.Errorf("a call after Close: %v, want EBADF", err)
	}
}

// TestCQArmSharedDoorbell: all CQs of a context share the page's CQ
// doorbell; two arms rung back to back leave only the second in the
// model's memory, and the first is taken from its CQ's doorbell record.
func TestCQArmSharedDoorbell(t *testing.T) {
	r := newVRig(t, "cx6dx")
	ch, _ := r.d.NewCompChannel()
	c1, c2 := r.cq(15, ch), r.cq(31, ch)
	mem, mr := r.mr(8192, accessLocalWrite)
	a := r.qp(c1, c2, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
	b := r.qp(c2, c1, vqpOpts{typ: seam.QPTypeRC, uidx: 2})
	a.connect(b, 0)
	b.connect(a, 0)
	send := func() { // a's send completes on c1, b's receive on c1 too
		b.recv(wqe.SGE{Addr: addr(mem[4096:]), Length: 64, LKey: mr.LKey})
		a.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}})
		c1.next()
		c1.next()
	}
	sendB := func() { // b's send completes on c2, a's receive on c2 too
		a.recv(wqe.SGE{Addr: addr(mem[4096:]), Length: 64, LKey: mr.LKey})
		b.post(wqe.Send{Opcode: wqe.OpcodeSend, Flags: wqe.SendSignaled, SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}})
		c2.next()
		c2.next()
	}
	// One event each, with waits between the arms.
	c1.arm(false)
	send()
	c1.event(ch, 0xc0+15)
	c2.arm(false)
	sendB()
	c2.event(ch, 0xc0+31)
	// Now back to back: the words are not 0 (sequence number 1), so the
	// first arm is found in c1's record.
	c1.armRaw(false)
	c2.armRaw(false)
	send()
	sendB()
	got := []uint64{nextComp(t, ch, mustCome), nextComp(t, ch, mustCome)}
	slices.Sort(got)
	if !slices.Equal(got, []uint64{0xc0 + 15, 0xc0 + 31}) {
		t.Errorf("completion events %#x", got)
	}
}

// TestVerbsSQDraining: with the drain held (Options.ManualDrain) the
// query says SQD with sq_draining, SQD to RTS is refused until the drain
// ends (the firmware takes SQD_RTS from SQD only), then SQ_DRAINED comes
// and the QP resumes.
func TestVerbsSQDraining(t *testing.T) {
	r := newVRigOpts(t, "cx7", Options{ManualDrain: true})
	d := r.d
	cq := r.cq(63, nil)
	a := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
	b := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 2})
	a.connect(b, 0)
	b.connect(a, 0)
	// drain_sigerr through DEVX RTS2RTS on the verbs handle.
	in := transitionIn(prm.MLX5_CMD_OP_RTS2RTS_QP, a.qpn)
	prm.Qpc.DrainSigerr.At(transitions[prm.MLX5_CMD_OP_RTS2RTS_QP].qpc).Set(in, 1)
	if err := d.ObjModify(a.h, in, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	if err := d.InjectSigErr(a.qpn); err != nil {
		t.Fatal(err)
	}
	at, err := d.QueryQP(a.h, maskState)
	if err != nil {
		t.Fatal(err)
	}
	if at.State != QPStateSQD || !at.SQDraining {
		t.Errorf("draining: state %d, sq_draining %v", at.State, at.SQDraining)
	}
	rts := seam.QPAttr{State: QPStateRTS}
	if err := d.ModifyQP(a.h, &rts, maskState, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("SQD to RTS while draining: %v, want EINVAL", err)
	}
	noAsync(t, d, 20*time.Millisecond)
	if err := d.FinishDrain(a.qpn); err != nil {
		t.Fatal(err)
	}
	if e := nextAsync(t, d, mustCome); e != (seam.AsyncEvent{Type: ibEventSQDrained, Element: 0x9001}) {
		t.Errorf("event %+v, want SQ_DRAINED", e)
	}
	if at, _ := d.QueryQP(a.h, maskState); at.State != QPStateSQD || at.SQDraining {
		t.Errorf("drained: state %d, sq_draining %v", at.State, at.SQDraining)
	}
	// With cur_state, as the driver says it after the event, no query
	// needed; the kernel's own state is SQD already here.
	rts.CurState = QPStateSQD
	if err := d.ModifyQP(a.h, &rts, maskState|maskCurState, nil, nil); err != nil {
		t.Fatalf("SQD to RTS: %v", err)
	}
	if s, _ := d.QPState(a.qpn); s != StateRTS {
		t.Errorf("state %#x", s)
	}
}

// A doorbell rung just before its QP is destroyed, or a CQ arm just before
// its CQ is, belongs to the object: the device sees a doorbell as it is
// written, so the destroy takes it first and it is no fault (the poller
// used to find it after the destroy, naming an object that was gone).
func TestVerbsDoorbellThenDestroy(t *testing.T) {
	r := newVRig(t, "cx7")
	d := r.d
	cq := r.cq(255, nil)
	mem, mr := r.mr(4096, accessLocalWrite)
	for i := range 200 {
		q := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: uint32(i + 1)})
		q.post(wqe.Send{Opcode: wqe.OpcodeSend, SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}}) // in RST: it waits
		if err := d.DestroyQP(q.h); err != nil {
			t.Fatal(err)
		}
		c := r.cq(15, nil)
		c.armRaw(false)
		if err := d.DestroyCQ(c.h); err != nil {
			t.Fatal(err)
		}
	}
	if f := d.Faults(); len(f) > 0 {
		t.Errorf("%d faults, the first %q", len(f), f[0])
	}
}
