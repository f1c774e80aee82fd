package mlx5

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// testQP is a QP in memory only (no device): a send ring of n WQEBBs, a
// doorbell record and a UAR page, for the post path's tests and
// benchmarks.
func testQP(tb testing.TB, c *Context, n int) (*QP, []byte) {
	tb.Helper()
	buf, err := AllocBuffer(n*wqe.WQEBB + 2*4096)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { buf.Close() })
	mem := buf.Bytes()
	qp := &QP{c: c, qpn: 0x1a2, name: qpName(0x1a2)}
	qp.sq.maxWQE = 1
	qp.initErrors()
	qp.g.open()
	qp.sq.ring = wqe.Ring(mem[:n*wqe.WQEBB])
	qp.sq.slots = make([]sqSlot, n)
	qp.sq.maxSGE = 4
	rec := mem[n*wqe.WQEBB : n*wqe.WQEBB+8]
	uar := mem[n*wqe.WQEBB+4096:]
	if qp.sq.bell, err = doorbell.NewSQ(rec, uar[doorbell.BlueFlameOffset:], benchBFSize); err != nil {
		tb.Fatal(err)
	}
	return qp, uar
}

// An RDMA WRITE of one SGE: built, tracked, rung; the doorbell record has
// the new producer counter and the UAR the WQE.
func TestPostSendRings(t *testing.T) {
	qp, uar := testQP(t, &Context{}, 64)
	wr := SendWR{WrID: 7, Opcode: OpRDMAWrite, Flags: SendSignaled, RemoteAddr: 0x1000, RKey: 0x55,
		SGL: []SGE{{Addr: 0x2000, Length: 64, LKey: 0x66}}}
	for i := range 3 {
		if err := qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		if got := qp.sq.bell.Counter(); got != uint16(i+1) {
			t.Errorf("post %d: doorbell record %d", i, got)
		}
		// BlueFlame: the whole WQE (3 segments) in the half this post used.
		half := doorbell.BlueFlameOffset + (i%2)*benchBFSize
		if got := binary.BigEndian.Uint32(uar[half:]); got != uint32(i)<<8|uint32(wqe.OpcodeRDMAWrite) {
			t.Errorf("post %d: UAR word %#x, want WQE index %d and RDMA_WRITE", i, got, i)
		}
		if got := binary.BigEndian.Uint32(uar[half+4:]); got != 0x1a2<<8|3 {
			t.Errorf("post %d: UAR qpn_ds %#x", i, got)
		}
		if s := qp.sq.slots[i]; s != (sqSlot{wrID: 7, op: WCRDMAWrite, next: uint16(i + 1), last: uint16(i)}) {
			t.Errorf("post %d: tracked %+v", i, s)
		}
	}
}

// A full send queue refuses posts until completions free it.
func TestPostSendQueueFull(t *testing.T) {
	qp, _ := testQP(t, &Context{}, 4)
	wr := SendWR{Opcode: OpSend, SGL: []SGE{{Addr: 0x2000, Length: 8, LKey: 1}}}
	for range 4 {
		if err := qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
	}
	if err := qp.PostSend(&wr); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("fifth post: %v, want ErrQueueFull", err)
	}
	qp.sq.tail.Store(1)
	if err := qp.PostSend(&wr); err != nil {
		t.Fatalf("after a completion: %v", err)
	}
}

func BenchmarkPostRDMAWrite(b *testing.B) {
	qp, _ := testQP(b, &Context{}, 256)
	qp.sq.setPost(qp.typ, qp.qpn)
	wr := SendWR{Opcode: OpRDMAWrite, Flags: SendSignaled, RemoteAddr: 0x1000, RKey: 0x55,
		SGL: []SGE{{Addr: 0x2000, Length: 4096, LKey: 0x66}}}
	b.ReportAllocs()
	for b.Loop() {
		qp.sq.tail.Store(uint32(qp.sq.pi)) // as if polled
		if err := qp.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPostDCRDMAWrite is BenchmarkPostRDMAWrite on a DCI with
// streams: the same RDMA WRITE of one SGE to a DCT (its AH, number and
// key) on stream 5, a 2-WQEBB WQE copied to the BlueFlame register.
func BenchmarkPostDCRDMAWrite(b *testing.B) { benchDC(b, true, 1) }

// BenchmarkPostDCRDMAWriteNoStreams is BenchmarkPostDCRDMAWrite on a DCI
// without streams (stream 0).
func BenchmarkPostDCRDMAWriteNoStreams(b *testing.B) { benchDC(b, false, 1) }

// BenchmarkBatchDCRDMAWrite16 is a batch of 16 of BenchmarkPostDCRDMAWrite's
// RDMA WRITEs, the last signaled, on streams 0 to 7 in turn: one 8-byte
// doorbell.
func BenchmarkBatchDCRDMAWrite16(b *testing.B) { benchDC(b, true, 16) }

// benchDC posts n DC RDMA WRITEs of one SGE a batch (PostSend for 1) on a
// 256-WQEBB DCI, with 8 streams or none.
func benchDC(b *testing.B, streams bool, n int) {
	c := &Context{}
	qp, _ := testQP(b, c, 256)
	qp.typ, qp.sq.maxWQE = QPTypeDCI, 2
	if streams {
		qp.dciStreams, qp.sq.maxStream = true, 7
		qp.sq.streams = &streamBook{stream: make([]uint16, 256), doneTo: make([]uint16, 8), ahead: make([]bool, 8)}
	}
	qp.sq.setPost(qp.typ, qp.qpn)
	ah := testAH(&PD{c: c}, wqe.IBAV(&wqe.AHAttr{DLID: 0x22, SL: 3, SrcPathBits: 1}))
	wrs := make([]SendWR, n)
	for i := range wrs {
		wrs[i] = SendWR{Opcode: OpRDMAWrite, RemoteAddr: 0x1000, RKey: 0x55,
			SGL: []SGE{{Addr: 0x2000, Length: 4096, LKey: 0x66}},
			AH:  ah, RemoteQPN: 0x1234, DCAccessKey: 0x0123456789abcdef}
		if streams {
			wrs[i].StreamID = uint16(5+i) & 7
		}
	}
	wrs[n-1].Flags = SendSignaled
	b.ReportAllocs()
	for b.Loop() {
		qp.sq.tail.Store(uint32(qp.sq.pi)) // as if polled
		err := error(nil)
		if n == 1 {
			err = qp.PostSend(&wrs[0])
		} else {
			err = commitAll(qp, wrs)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// commitAll posts wrs as one batch: Begin, an Add each, Commit.
func commitAll(qp *QP, wrs []SendWR) error {
	bt := qp.Begin()
	for i := range wrs {
		bt.Add(&wrs[i])
	}
	return bt.Commit()
}

// The benchmarks below measure what libmlx5's own benchmark measures
// (../shared/oracle, bench.sh), the same work the same way: a 1024-WQEBB
// send queue posted full in timed chunks, freed outside the timer as if
// polled; a 1024-entry CQ pre-filled with REQ CQEs, polled one at a
// time, refilled outside the timer.

// BenchmarkPostRDMAWriteChunked is libmlx5's post_send_rdma_write_sge1:
// one signaled RDMA WRITE of one 4096-byte SGE and its BlueFlame doorbell.
func BenchmarkPostRDMAWriteChunked(b *testing.B) {
	qp, _ := testQP(b, &Context{}, 1024)
	wr := SendWR{Opcode: OpRDMAWrite, Flags: SendSignaled, RemoteAddr: 0x10000000, RKey: 0xabcd01,
		SGL: []SGE{{Addr: 0x7e5a00000000, Length: 4096, LKey: 0x200100}}}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n == 1024 {
			b.StopTimer()
			qp.sq.tail.Store(uint32(qp.sq.pi))
			n = 0
			b.StartTimer()
		}
		if err := qp.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// BenchmarkPostMkeyConfigure is libmlx5's umr_sig_t10dif_both_list1: an
// mkey reconfigured with access, a one-entry list layout and T10-DIF in
// both domains: a 4-WQEBB UMR, two SET_PSVs and one 8-byte doorbell.
func BenchmarkPostMkeyConfigure(b *testing.B) { benchPostMkeyConfigure(b, false) }

// benchPostMkeyConfigure runs BenchmarkPostMkeyConfigure's configures;
// with newTag, the wire domain's reference tag changes before each.
func benchPostMkeyConfigure(b *testing.B, newTag bool) {
	c := &Context{devx: true}
	qp, _ := testQP(b, c, 1024)
	qp.sq.maxWQE, qp.mkeyConf, qp.sq.maxInline = 1024, true, mainQPInline
	m := &Mkey{c: c, lkey: 0x200200, rkey: 0x200200, maxEntries: 4, sigMkey: true, psvIndex: [2]uint32{0x301, 0x302}, sentErrs: ^uint32(0),
		sigCaps: sig.Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 3, CRCType: 7}, checkCaps: true} // as CreateMkey makes it on cx7
	wire := &sig.T10DIF{Seed: 0xffff, AppTag: 0xabcd, RefTag: 0x11223344, Flags: sig.T10DIFAppEscape}
	wr := MkeyConfigureWR{Mkey: m, Flags: SendSignaled | SendInline, SetAccess: true,
		Access: AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite,
		List:   []KLM{{Addr: 0x7e5a00000000, ByteCount: 4096, Mkey: 0x200100}},
		Sig: &sig.BlockAttr{
			Mem:       &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512, T10DIF: &sig.T10DIF{AppTag: 0x1234, RefTag: 0x5678}},
			Wire:      &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize520, T10DIF: wire},
			CheckMask: 0xff,
		}}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n == 1024/6 {
			b.StopTimer()
			qp.sq.tail.Store(uint32(qp.sq.pi))
			n = 0
			b.StartTimer()
		}
		if newTag {
			wire.RefTag += 8
		}
		if err := qp.PostMkeyConfigure(&wr); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// BenchmarkPollPrefilled is libmlx5's poll_cq_single: one Poll of one
// CQE from a CQ the device filled, each a REQ CQE of the next WQE.
func BenchmarkPollPrefilled(b *testing.B) { benchPoll(b, 1) }

// BenchmarkPollBatchN are libmlx5's poll_cq_batchN: one Poll returning N
// CQEs.
func BenchmarkPollBatch4(b *testing.B)  { benchPoll(b, 4) }
func BenchmarkPollBatch16(b *testing.B) { benchPoll(b, 16) }
func BenchmarkPollBatch64(b *testing.B) { benchPoll(b, 64) }

// benchPoll polls a 1024-entry CQ the device filled with REQ CQEs of
// successive signaled RDMA WRITEs, per polls of n, refilled outside the
// timer when drained, as libmlx5's bench does.
func benchPoll(b *testing.B, n int) {
	c := &Context{}
	cq := testCQ(b, c, 1024, 0)
	qp, _ := testQP(b, c, 1024)
	cq.attachLocked(qp)
	wr := SendWR{Opcode: OpRDMAWrite, Flags: SendSignaled, RemoteAddr: 0x10000000, RKey: 0xabcd01,
		SGL: []SGE{{Addr: 0x7e5a00000000, Length: 4096, LKey: 0x200100}}}
	fill := func() {
		qp.sq.tail.Store(uint32(qp.sq.pi))
		for i := range uint32(1024) {
			if err := qp.PostSend(&wr); err != nil {
				b.Fatal(err)
			}
			ci := cq.ci + i
			e := cq.ring[(ci&1023)*cqeSize:][:cqeSize]
			clear(e)
			binary.BigEndian.PutUint32(e[56:], 0x08<<24|qp.qpn)
			binary.BigEndian.PutUint16(e[60:], qp.sq.pi-1)
			e[63] = byte(ci>>10) & 1 // REQ, owner bit of its pass
		}
	}
	fill()
	wc := make([]Completion, n)
	b.ReportAllocs()
	polled := 0
	for b.Loop() {
		if polled+n > 1024 {
			b.StopTimer()
			fill()
			polled = 0
			b.StartTimer()
		}
		if k, err := cq.Poll(wc); k != n || err != nil {
			b.Fatalf("%d of %d completions: %v", k, n, err)
		}
		polled += n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/cqe")
}

// BenchmarkPollSigErr is one Poll of a corrupted transfer's CQEs: the
// SIG_ERR CQE the Poll hands to its mkey, then the work request's REQ CQE.
// The mkey keeps the first report (no Check runs): every later one is
// counted and dropped.
func BenchmarkPollSigErr(b *testing.B) {
	c := &Context{}
	cq := testCQ(b, c, 1024, 0)
	qp, _ := testQP(b, c, 1024)
	cq.attachLocked(qp)
	m := &Mkey{c: c, sigMkey: true, lkey: 0x200200, rkey: 0x200200, maxEntries: 1, sentErrs: ^uint32(0)}
	c.addMkey(m)
	wr := SendWR{Opcode: OpRDMAWrite, Flags: SendSignaled, RemoteAddr: 0x10000000, RKey: 0xabcd01,
		SGL: []SGE{{Addr: 0, Length: 4096, LKey: m.lkey}}}
	fill := func() {
		qp.sq.tail.Store(uint32(qp.sq.pi))
		for i := range uint32(512) {
			if err := qp.PostSend(&wr); err != nil {
				b.Fatal(err)
			}
			ci := cq.ci + 2*i
			e := cq.ring[(ci&1023)*cqeSize:][:cqeSize]
			clear(e)
			binary.BigEndian.PutUint16(e[32:], 0x2000) // a bad guard
			e[35] = 1                                  // in the memory domain
			binary.BigEndian.PutUint32(e[36:], m.lkey)
			binary.BigEndian.PutUint32(e[56:], qp.qpn)
			e[63] = wqe.CQESigErr<<4 | byte(ci>>10)&1
			e = cq.ring[((ci+1)&1023)*cqeSize:][:cqeSize]
			clear(e)
			binary.BigEndian.PutUint32(e[56:], 0x08<<24|qp.qpn)
			binary.BigEndian.PutUint16(e[60:], qp.sq.pi-1)
			e[63] = byte((ci+1)>>10) & 1 // REQ, owner bit of its pass
		}
	}
	fill()
	wc := make([]Completion, 1)
	b.ReportAllocs()
	polled := 0
	for b.Loop() {
		if polled == 512 {
			b.StopTimer()
			fill()
			polled = 0
			b.StartTimer()
		}
		if k, err := cq.Poll(wc); k != 1 || err != nil {
			b.Fatalf("%d completions: %v", k, err)
		}
		polled++
	}
}

// BenchmarkPostRecv is one receive of one SGE: the WQE and the doorbell
// record.
func BenchmarkPostRecv(b *testing.B) {
	qp, _ := testQP(b, &Context{}, 16)
	qp.rq.wrID, qp.rq.ring, qp.rq.stride, qp.rq.maxSGE = make([]uint64, 256), make([]byte, 256*16), 16, 1
	rec := make([]byte, 8)
	qp.dbRQ, _ = doorbell.NewRQ(rec)
	sgl := []SGE{{Addr: 0x7e5a00000000, Length: 4096, LKey: 0x200100}}
	b.ReportAllocs()
	for b.Loop() {
		qp.rq.tail.Store(uint32(qp.rq.pi))
		if err := qp.PostRecv(1, sgl); err != nil {
			b.Fatal(err)
		}
	}
}

// benchBatch is libmlx5's wr_rdma_write_batchN (list: post_send_listN):
// n RDMA WRITEs of one 4096-byte SGE, the last signaled, one doorbell,
// on a 1024-WQEBB queue posted full in timed chunks.
func benchBatch(b *testing.B, n int, list bool) {
	qp, _ := testQP(b, &Context{}, 1024)
	wrs := make([]SendWR, n)
	for i := range wrs {
		wrs[i] = SendWR{Opcode: OpRDMAWrite, RemoteAddr: 0x10000000, RKey: 0xabcd01,
			SGL: []SGE{{Addr: 0x7e5a00000000, Length: 4096, LKey: 0x200100}}}
	}
	wrs[n-1].Flags = SendSignaled
	b.ReportAllocs()
	posted := 0
	for b.Loop() {
		if posted+n > 1024 {
			b.StopTimer()
			qp.sq.tail.Store(uint32(qp.sq.pi))
			posted = 0
			b.StartTimer()
		}
		var err error
		if list {
			err = qp.PostSendList(wrs)
		} else {
			err = commitAll(qp, wrs)
		}
		if err != nil {
			b.Fatal(err)
		}
		posted += n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/wr")
}

func BenchmarkBatchRDMAWrite4(b *testing.B)  { benchBatch(b, 4, false) }
func BenchmarkBatchRDMAWrite16(b *testing.B) { benchBatch(b, 16, false) }
func BenchmarkBatchRDMAWrite64(b *testing.B) { benchBatch(b, 64, false) }
func BenchmarkPostSendList4(b *testing.B)    { benchBatch(b, 4, true) }
func BenchmarkPostSendList16(b *testing.B)   { benchBatch(b, 16, true) }
func BenchmarkPostSendList64(b *testing.B)   { benchBatch(b, 64, true) }

// benchBFSize is the BlueFlame buffer of the benchmarks' QPs: half of
// mlx5_ib's usual 512-byte bf_reg_size, as libmlx5's bench QPs have it.
const benchBFSize = 256
