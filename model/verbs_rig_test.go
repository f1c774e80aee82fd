package model

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// A test rig for the verbs objects, written as libmlx5 uses them: a
// context with a PD, a non-cached UAR page for CQ doorbells (the page
// libmlx5 allocates at open) and a BlueFlame one for QPs, queues in
// mmap'd memory whose addresses go in mlx5's driver data, WQEs from wqe's
// encoders and doorbells as libmlx5 rings them.

type vrig struct {
	t      testing.TB
	d      *Device
	pd     seam.Handle
	pdn    uint32
	bf, nc seam.UAR
	bfPage []byte
	ncPage []byte
	half   atomic.Uint32
	maps   [][]byte
}

func newVRig(t testing.TB, profile string) *vrig {
	t.Helper()
	return newVRigOpts(t, profile, Options{})
}

func newVRigOpts(t testing.TB, profile string, opt Options) *vrig {
	t.Helper()
	d, err := NewWithOptions(profile, opt)
	if err != nil {
		t.Fatal(err)
	}
	return newVRigOn(t, d)
}

// newVRigOn is the rig on an open context (one Open made, say); the
// test's cleanup closes it.
func newVRigOn(t testing.TB, d *Device) *vrig {
	t.Helper()
	var err error
	r := &vrig{t: t, d: d}
	t.Cleanup(func() {
		d.Close()
		for _, p := range [][]byte{r.bfPage, r.ncPage} {
			if p != nil {
				d.UnmapUAR(p)
			}
		}
		for _, m := range r.maps {
			unix.Munmap(m)
		}
	})
	if r.pd, r.pdn, err = d.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if r.nc, err = d.UARAlloc(1); err != nil {
		t.Fatal(err)
	}
	if r.ncPage, err = d.MapUAR(r.nc); err != nil {
		t.Fatal(err)
	}
	if r.bf, err = d.UARAlloc(0); err != nil {
		t.Fatal(err)
	}
	if r.bfPage, err = d.MapUAR(r.bf); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *vrig) mmap(n int) []byte {
	r.t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		r.t.Fatal(err)
	}
	r.maps = append(r.maps, b)
	return b
}

func (r *vrig) mr(n int, access uint32) ([]byte, seam.MR) {
	r.t.Helper()
	mem := r.mmap(n)
	m, err := r.d.RegMR(r.pd, mem, access)
	if err != nil {
		r.t.Fatal(err)
	}
	return mem, m
}

// drv encodes a driver-data struct as the C struct's bytes.
func drv(v any) []byte {
	b, err := binary.Append(nil, binary.NativeEndian, v)
	if err != nil {
		panic(err)
	}
	return b
}

// vcqT is a verbs CQ as libmlx5 makes one: 64-byte CQEs, the ring and
// the doorbell record in their own pages, the NC UAR page's index.
type vcqT struct {
	r       *vrig
	h       seam.Handle
	cqn     uint32
	entries uint32
	buf     []byte
	dbr     []byte
	ci      uint32
	sn      uint32
}

func (r *vrig) cqCmd(cqe uint32) (seam.CQCreate, []byte, []byte, []byte) {
	n := roundPow2(uint64(cqe) + 1)
	buf := r.mmap(int(n) * 64)
	wqe.InitCQE(buf)
	dbr := r.mmap(4096)
	in := drv(&mlx5abi.Mlx5IbCreateCq{BufAddr: addr(buf), DbAddr: addr(dbr), CqeSize: 64,
		Flags: mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX, UarPageIndex: uint16(r.nc.PageID)})
	return seam.CQCreate{CQE: cqe, UserHandle: 0xc0 + uint64(cqe)}, in, buf, dbr
}

func (r *vrig) cq(cqe uint32, ch seam.CompChannel) *vcqT {
	r.t.Helper()
	c, in, buf, dbr := r.cqCmd(cqe)
	c.Channel = ch
	out := make([]byte, 8)
	h, n, err := r.d.CreateCQ(c, in, out)
	if err != nil {
		r.t.Fatal(err)
	}
	return &vcqT{r: r, h: h, cqn: binary.NativeEndian.Uint32(out), entries: n + 1, buf: buf, dbr: dbr}
}

// ready returns the CQE at the consumer index if software owns it.
func (c *vcqT) ready() []byte {
	slot := c.buf[64*(c.ci&(c.entries-1)):][:64]
	o := opOwn(slot)
	if o>>4 == 0xf || uint32(o&1) != (c.ci/c.entries)&1 {
		return nil
	}
	return slot
}

// next waits for the next CQE, consumes it and publishes the consumer
// index.
func (c *vcqT) next() []byte {
	c.r.t.Helper()
	deadline := time.Now().Add(mustCome)
	for {
		if slot := c.ready(); slot != nil {
			out := append([]byte(nil), slot...)
			c.ci++
			c.setWord(0, c.ci&0xffffff)
			return out
		}
		if time.Now().After(deadline) {
			c.r.t.Fatalf("CQ %#x: no CQE at %d; faults %q, WQE errors %q", c.cqn, c.ci, c.r.d.Faults(), c.r.d.WQEErrors())
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// none checks that no CQE arrives within d.
func (c *vcqT) none(d time.Duration) {
	c.r.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if slot := c.ready(); slot != nil {
			c.r.t.Fatalf("CQ %#x: unexpected CQE %x", c.cqn, slot)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func (c *vcqT) setWord(i int, v uint32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.dbr[4*i])), binary.NativeEndian.Uint32(b[:]))
}

// arm is mlx5_arm_cq (armRaw), then a wait until the model has taken the
// doorbell.
func (c *vcqT) arm(solicited bool) {
	c.r.t.Helper()
	c.armRaw(solicited)
	deadline := time.Now().Add(mustCome)
	for atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.r.ncPage[0x20]))) != 0 {
		if time.Now().After(deadline) {
			c.r.t.Fatal("the CQ doorbell was not taken")
		}
		time.Sleep(10 * time.Microsecond)
	}
	// The arm is applied under the lock the doorbell goroutine took it
	// with: a call that takes the lock waits for that.
	_ = c.r.d.Objects()
}

// armRaw is mlx5_arm_cq: the arm word in the doorbell record, then the
// word and the CQN to the CQ doorbell of the NC page.
func (c *vcqT) armRaw(solicited bool) {
	cmd := uint32(0)
	if solicited {
		cmd = 1 << 24
	}
	w := (c.sn&3)<<28 | cmd | c.ci&0xffffff
	c.setWord(1, w)
	var b [8]byte
	binary.BigEndian.PutUint32(b[0:], w)
	binary.BigEndian.PutUint32(b[4:], c.cqn)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.r.ncPage[0x20])), binary.NativeEndian.Uint64(b[:]))
}

// event is ibv_get_cq_event with ibv_ack_cq_events: the channel's next
// event, which must be this CQ's, and the arm sequence number advances.
func (c *vcqT) event(ch seam.CompChannel, user uint64) {
	c.r.t.Helper()
	got := nextComp(c.r.t, ch, mustCome)
	if got != user {
		c.r.t.Fatalf("completion event for %#x, want %#x", got, user)
	}
	c.sn++
}

// vqpT is a verbs QP as libmlx5 makes one: RQ then SQ in one buffer, the
// doorbell record, the BF UAR page's index (MLX5_QP_FLAG_UAR_PAGE_INDEX).
type vqpT struct {
	r          *vrig
	h          seam.Handle
	qpn        uint32
	uidx       uint32
	typ        uint8
	scq, rcq   *vcqT
	sq         wqe.Ring
	rq         []byte
	rqStride   int
	rqCount    int
	dbr        []byte
	sqPI, rqPI uint16
	resp       mlx5abi.Mlx5IbCreateQpResp
}

type vqpOpts struct {
	typ      uint8  // seam.QPType*
	sqWQEBBs uint32 // 0: 64
	rqWQEs   uint32 // 0: 16; with srq, none
	rqShift  uint32 // 0: 6 (four data segments)
	uidx     uint32
	srq      seam.Handle // seam.NoHandle (0 here means none too)
	flags    uint32      // extra MLX5_QP_FLAG_*
	sigAll   bool
	noRQ     bool
}

func (r *vrig) qpCmd(scq, rcq *vcqT, o vqpOpts) (seam.QPCreate, mlx5abi.Mlx5IbCreateQp, []byte, []byte) {
	if o.sqWQEBBs == 0 {
		o.sqWQEBBs = 64
	}
	if o.rqShift == 0 {
		o.rqShift = 6
	}
	srq := seam.NoHandle
	if o.srq != 0 && o.srq != seam.NoHandle {
		srq = o.srq
		o.noRQ = true
	}
	if o.rqWQEs == 0 && !o.noRQ {
		o.rqWQEs = 16
	}
	if o.noRQ {
		o.rqWQEs, o.rqShift = 0, 0
	}
	q := seam.QPCreate{Type: o.typ, PD: r.pd, SendCQ: scq.h, RecvCQ: rcq.h, SRQ: srq, SigAll: o.sigAll,
		UserHandle: 0x9000 + uint64(o.uidx),
		Cap:        seam.QPCap{MaxSendWR: o.sqWQEBBs / 2, MaxRecvWR: o.rqWQEs, MaxSendSGE: 4, MaxRecvSGE: 4}}
	if o.noRQ {
		q.Cap.MaxRecvSGE = 0
	}
	size := int(o.rqWQEs)<<o.rqShift + int(o.sqWQEBBs)*64
	buf := r.mmap(max(size, 4096))
	dbr := r.mmap(4096)
	u := mlx5abi.Mlx5IbCreateQp{BufAddr: addr(buf), DbAddr: addr(dbr), SqWqeCount: o.sqWQEBBs, RqWqeCount: o.rqWQEs,
		RqWqeShift: o.rqShift, Flags: mlx5abi.MLX5_QP_FLAG_UAR_PAGE_INDEX | o.flags, Uidx: o.uidx,
		BfregIndex: r.bf.PageID, EceOptions: eceVersion1}
	return q, u, buf, dbr
}

func (r *vrig) qp(scq, rcq *vcqT, o vqpOpts) *vqpT {
	r.t.Helper()
	q, u, buf, dbr := r.qpCmd(scq, rcq, o)
	out := make([]byte, 40)
	h, got, err := r.d.CreateQP(q, drv(&u), out)
	if err != nil {
		r.t.Fatal(err)
	}
	v := &vqpT{r: r, h: h, qpn: got.QPN, uidx: o.uidx, typ: o.typ, scq: scq, rcq: rcq, dbr: dbr}
	rqBytes := int(u.RqWqeCount) << u.RqWqeShift
	v.rq = buf[:rqBytes]
	v.rqStride = 1 << u.RqWqeShift
	v.rqCount = int(u.RqWqeCount)
	v.sq = wqe.Ring(buf[rqBytes : rqBytes+int(u.SqWqeCount)*64])
	if _, err := binary.Decode(out, binary.NativeEndian, &v.resp); err != nil {
		r.t.Fatal(err)
	}
	return v
}

func (q *vqpT) setDBR(i int, v uint16) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(v))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&q.dbr[4*i])), binary.NativeEndian.Uint32(b[:]))
}

// post builds the WQE of s with wqe.BuildSend, updates the doorbell
// record and rings the 8-byte doorbell on the BF page.
func (q *vqpT) post(s wqe.Send) uint16 {
	q.r.t.Helper()
	return q.postVia(q.r, s)
}

// postVia is post with the doorbell rung on the BF page of rig via
// (another context's, to test that the model refuses it).
func (q *vqpT) postVia(via *vrig, s wqe.Send) uint16 {
	q.r.t.Helper()
	s.QPN = q.qpn
	s.MaxSGE, s.MaxInline = 4, 256
	idx := q.sqPI
	res, err := wqe.BuildSend(q.sq, q.sqPI, len(q.sq)/64, &s)
	if err != nil {
		q.r.t.Fatal(err)
	}
	q.sqPI += uint16(res.WQEBBs)
	q.setDBR(1, q.sqPI)
	off := 0x800 + 0x100*(via.half.Add(1)&1)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], res.Doorbell)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&via.bfPage[off])), binary.NativeEndian.Uint64(b[:]))
	return idx
}

// recv posts a receive WQE with wqe.PutRecv.
func (q *vqpT) recv(sgl ...wqe.SGE) uint16 {
	q.r.t.Helper()
	idx := q.rqPI
	slot := q.rq[q.rqStride*(int(idx)%q.rqCount):][:q.rqStride]
	if err := wqe.PutRecv(slot, sgl); err != nil {
		q.r.t.Fatal(err)
	}
	q.rqPI++
	q.setDBR(0, q.rqPI)
	return idx
}

// roceAH is the address of the port from its GID index gid (3: the RoCE v2
// IPv4-mapped GID).
func (r *vrig) roceAH(gid uint8) seam.AHAttr {
	t := r.d.h.gidTable()
	return seam.AHAttr{IsGlobal: true, Port: 1, GRH: seam.GlobalRoute{DGID: t[gid].GID, SGIDIndex: gid, HopLimit: 64}}
}

// connect moves an RC or UC QP through INIT and RTR to RTS with peer as
// its destination over the port's RoCE v2 GID, as ibv_modify_qp with the
// attributes rdma-core's tests use.
func (q *vqpT) connect(peer *vqpT, access uint32) {
	q.r.t.Helper()
	d := q.r.d
	rc := q.typ == seam.QPTypeRC
	steps := []struct {
		a    seam.QPAttr
		mask uint32
	}{
		{seam.QPAttr{State: QPStateInit, Port: 1, AccessFlags: access}, maskState | maskPKey | maskPort | maskAccess},
		{seam.QPAttr{State: QPStateRTR, PathMTU: ibMTU1024, DestQPN: peer.qpn, RQPSN: 0x123, AH: q.r.roceAH(3),
			MaxDestRdAtomic: 1, MinRNRTimer: 12}, maskState | maskAV | maskPathMTU | maskDestQPN | maskRQPSN},
		{seam.QPAttr{State: QPStateRTS, SQPSN: 0x456, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}, maskState | maskSQPSN},
	}
	if rc {
		steps[1].mask |= maskMaxDestRdAtomic | maskMinRNRTimer
		steps[2].mask |= maskTimeout | maskRetryCnt | maskRNRRetry | maskMaxQPRdAtomic
	}
	for _, s := range steps {
		a := s.a
		if err := d.ModifyQP(q.h, &a, s.mask, nil, nil); err != nil {
			q.r.t.Fatalf("QP %#x to %d: %v", q.qpn, s.a.State, err)
		}
	}
}

// udReady moves a UD QP to RTS with Q_Key qkey.
func (q *vqpT) udReady(qkey uint32) {
	q.r.t.Helper()
	for _, s := range []struct {
		a    seam.QPAttr
		mask uint32
	}{
		{seam.QPAttr{State: QPStateInit, Port: 1, QKey: qkey}, maskState | maskPKey | maskPort | maskQKey},
		{seam.QPAttr{State: QPStateRTR}, maskState},
		{seam.QPAttr{State: QPStateRTS, SQPSN: 1}, maskState | maskSQPSN},
	} {
		a := s.a
		if err := q.r.d.ModifyQP(q.h, &a, s.mask, nil, nil); err != nil {
			q.r.t.Fatalf("UD QP %#x to %d: %v", q.qpn, s.a.State, err)
		}
	}
}

// nextComp reads a completion channel with a timeout.
func nextComp(t testing.TB, ch seam.CompChannel, d time.Duration) uint64 {
	t.Helper()
	ctx, cancel := ctxTimeout(d)
	defer cancel()
	u, err := ch.Next(ctx)
	if err != nil {
		t.Fatalf("completion channel: %v", err)
	}
	return u
}

// noComp checks that no completion event comes within d.
func noComp(t testing.TB, ch seam.CompChannel, d time.Duration) {
	t.Helper()
	ctx, cancel := ctxTimeout(d)
	defer cancel()
	if u, err := ch.Next(ctx); err == nil {
		t.Fatalf("unexpected completion event for %#x", u)
	}
}

// nextAsync reads the async event file with a timeout.
func nextAsync(t testing.TB, d *Device, timeout time.Duration) seam.AsyncEvent {
	t.Helper()
	ctx, cancel := ctxTimeout(timeout)
	defer cancel()
	e, err := d.NextAsyncEvent(ctx)
	if err != nil {
		t.Fatalf("async event: %v", err)
	}
	return e
}

func noAsync(t testing.TB, d *Device, timeout time.Duration) {
	t.Helper()
	ctx, cancel := ctxTimeout(timeout)
	defer cancel()
	if e, err := d.NextAsyncEvent(ctx); err == nil {
		t.Fatalf("unexpected async event %+v", e)
	}
}

// oracleCmd is one kernel command of an oracle record: its object, method
// and attributes by name (input bytes, output bytes).
type oracleCmd struct {
	Object, Method string
	In, Out        map[string][]byte
}

// oracleCmds returns the ioctls of the records of file (under testdata/)
// named name, in order, with the commands of the result's *_cmds lists
// too (dci.jsonl keeps them there).
func oracleCmds(t *testing.T, file, name string) []oracleCmd {
	t.Helper()
	type attr struct {
		Name   string `json:"name"`
		Dir    string `json:"dir"`
		Hex    string `json:"hex"`
		OutHex string `json:"out_hex"`
	}
	type cmd struct {
		Op     string `json:"op"`
		Object string `json:"object"`
		Method string `json:"method"`
		Attrs  []attr `json:"attrs"`
	}
	var found bool
	var cmds []oracleCmd
	readJSONL(t, "testdata/"+file, func(line []byte) {
		var rec struct {
			Case   string                     `json:"case"`
			Cmds   []cmd                      `json:"kernel_cmds"`
			Result map[string]json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Case != name {
			return
		}
		found = true
		all := rec.Cmds
		for _, k := range []string{"create_cmds", "modify_cmds", "stream_id_reset_0_cmds", "destroy_cmds"} {
			var more []cmd
			if raw, ok := rec.Result[k]; ok {
				if err := json.Unmarshal(raw, &more); err != nil {
					t.Fatal(err)
				}
			}
			all = append(all, more...)
		}
		for _, c := range all {
			if c.Op != "ioctl" {
				continue
			}
			oc := oracleCmd{Object: c.Object, Method: c.Method, In: map[string][]byte{}, Out: map[string][]byte{}}
			for _, a := range c.Attrs {
				if a.Hex != "" {
					oc.In[a.Name] = unhex(t, a.Hex)
				}
				if a.OutHex != "" {
					oc.Out[a.Name] = unhex(t, a.OutHex)
				}
			}
			cmds = append(cmds, oc)
		}
	})
	if !found {
		t.Fatalf("%s: no record %q", file, name)
	}
	return cmds
}

// oracleCmdOf returns the first command of the record with that object and
// method.
func oracleCmdOf(t *testing.T, file, name, object, method string) oracleCmd {
	t.Helper()
	for _, c := range oracleCmds(t, file, name) {
		if c.Object == object && c.Method == method {
			return c
		}
	}
	t.Fatalf("%s %s: no %s %s", file, name, object, method)
	return oracleCmd{}
}

func ctxTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// vsrqT is an SRQ as libmlx5 keeps one: WQEs linked through their next
// segments, a head the next post takes and a tail freed WQEs go after.
type vsrqT struct {
	r          *vrig
	h          seam.Handle
	srqn       uint32
	buf, dbr   []byte
	stride, n  int
	head, tail uint16
	counter    uint16
}

func (r *vrig) srqCmd(maxWR, maxSGE uint32) (seam.SRQCreate, []byte, []byte, []byte, int, int) {
	n := int(roundPow2(uint64(maxWR) + 1))
	stride := int(max(roundPow2(16+16*uint64(maxSGE)), 32))
	buf := r.mmap(max(n*stride, 4096))
	for i := range n {
		binary.BigEndian.PutUint16(buf[i*stride+2:], uint16((i+1)&(n-1)))
	}
	dbr := r.mmap(4096)
	in := drv(&mlx5abi.Mlx5IbCreateSrq{BufAddr: addr(buf), DbAddr: addr(dbr)})
	return seam.SRQCreate{PD: r.pd, MaxWR: maxWR, MaxSGE: maxSGE, UserHandle: 0x5e0}, in, buf, dbr, n, stride
}

func (r *vrig) srq(maxWR, maxSGE uint32) *vsrqT {
	r.t.Helper()
	c, in, buf, dbr, n, stride := r.srqCmd(maxWR, maxSGE)
	out := make([]byte, 8)
	h, got, err := r.d.CreateSRQ(c, in, out)
	if err != nil {
		r.t.Fatal(err)
	}
	if got.SRQN != binary.NativeEndian.Uint32(out) || got.MaxWR != uint32(n-1) {
		r.t.Fatalf("SRQ created %+v, response %x", got, out)
	}
	return &vsrqT{r: r, h: h, srqn: got.SRQN, buf: buf, dbr: dbr, stride: stride, n: n, tail: uint16(n - 1)}
}

// post is mlx5_post_srq_recv: the head WQE takes the SGEs (with the
// terminator when there is room), the head follows its link, the counter
// goes into the doorbell record.
func (s *vsrqT) post(sgl ...wqe.SGE) uint16 {
	idx := s.head
	w := s.buf[int(idx)*s.stride:][:s.stride]
	s.head = binary.BigEndian.Uint16(w[2:])
	seg := w[16:]
	clear(seg)
	o := 0
	for _, g := range sgl {
		binary.BigEndian.PutUint32(seg[o:], g.Length)
		binary.BigEndian.PutUint32(seg[o+4:], g.LKey)
		binary.BigEndian.PutUint64(seg[o+8:], g.Addr)
		o += 16
	}
	if o < len(seg) {
		binary.BigEndian.PutUint32(seg[o+4:], 0x100)
	}
	s.counter++
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(s.counter))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&s.dbr[0])), binary.NativeEndian.Uint32(b[:]))
	return idx
}

// free is mlx5_free_srq_wqe: WQE idx, completed, goes after the tail.
func (s *vsrqT) free(idx uint16) {
	binary.BigEndian.PutUint16(s.buf[int(s.tail)*s.stride+2:], idx)
	s.tail = idx
}
