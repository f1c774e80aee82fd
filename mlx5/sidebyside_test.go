package mlx5

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// The side-by-side benchmarks (scripts/bench post, docs/PERFORMANCE.md)
// do what libmlx5's benchmark in ../shared/oracle (src/bench.c, harness
// --bench) does, through mlx5go's public API: the same work requests
// with the same inputs, so the same WQE bytes (TestSideBySideWQEs), on
// queues of the same geometry, timed the same way.
//
// libmlx5's runs on the oracle's fake device, which executes nothing;
// these run on queues in memory that no device consumes, made with the
// sizing CreateQP and CreateCQ use (the software ConnectX would run the
// WQEs in a goroutine beside the benchmark). A repetition posts as many
// operations as the send queue accepts (its granted MaxSendWR), or polls
// one full CQ, in one timed chunk; between chunks, untimed, one REQ CQE
// for the last WQE is polled, which frees the send queue (libmlx5's
// bench injects and polls the same CQE), or the CQ is refilled with REQ
// CQEs of posted signaled RDMA WRITEs. Each chunk is timed by the wall
// clock and by the thread's CPU time, in the order src/bench.c reads
// them; ns/op is the wall clock's, cpu-ns/op the CPU time's.

// Inputs of the oracle's bench (src/bench.c, src/oracle.h).
const (
	sbsRKey    = 0x00abcd01     // B_RKEY
	sbsRAddr   = 0x10000000     // B_RADDR
	sbsAddr    = 0x7e5a00000000 // MR_BUF_ADDR, the MR's fixed address
	sbsLKey    = 0x00200100     // the MR's lkey
	sbsLength  = 4096           // every SGE's length
	sbsWriteQP = 0x1a2          // bench_write: the post benches' QP (418)
	sbsUMRQP   = 0x1a3          // bench_umr (419)
	sbsPollQP  = 0x1a4          // bench_write again, for the poll benches (420)
	sbsMkey    = 0x00200200     // the signature mkey the UMR bench configures
	sbsMemPSV  = 0x301
	sbsWirePSV = 0x302
	// The DC benches (scripts/postbench/bench.diff): two DCIs, the
	// DCT they write to and the stream of the DCI with streams.
	sbsDCIQP        = 0x1a6 // bench_dci (422)
	sbsDCIStreamsQP = 0x1a7 // bench_dci_streams (423)
	sbsDCTN         = 0x001234
	sbsDCKey        = 0x0123456789abcdef
	sbsDCStream     = 5
)

// sbsOps are the benchmarks: what mlx5go calls, and the name of the
// oracle's bench that does the same with libmlx5. A sub-benchmark is
// named "go:oracle" (scripts/bench reads both).
var sbsOps = []struct{ goName, oracle string }{
	{"Batch1", "wr_rdma_write_sge1"},
	{"PostSend", "post_send_rdma_write_sge1"},
	{"Batch4", "wr_rdma_write_batch4"},
	{"Batch16", "wr_rdma_write_batch16"},
	{"Batch64", "wr_rdma_write_batch64"},
	{"PostSendList4", "post_send_list4"},
	{"PostSendList16", "post_send_list16"},
	{"PostSendList64", "post_send_list64"},
	{"BatchMkeyConfigure", "umr_sig_t10dif_both_list1"},
	{"PostMkeyConfigure", "umr_sig_t10dif_both_list1"},
	{"Poll1", "poll_cq_single"},
	{"Poll4", "poll_cq_batch4"},
	{"Poll16", "poll_cq_batch16"},
	{"Poll64", "poll_cq_batch64"},
	{"DCBatch1", "dc_wr_rdma_write_sge1"},
	{"DCPostSend", "dc_wr_rdma_write_sge1"},
	{"DCStreamBatch1", "dc_stream_wr_rdma_write_sge1"},
	{"DCStreamPostSend", "dc_stream_wr_rdma_write_sge1"},
	{"DCBatch16", "dc_wr_rdma_write_batch16"},
}

// sbsFixture is one benchmark's queues and work.
type sbsFixture struct {
	qp    *QP // posted to (post benches) or completed (poll benches)
	cq    *CQ // the QP's CQ: recycled, or polled
	perOp int // work requests or CQEs per op
	chunk int // ops per timed chunk
	// run does n ops, the first of sequence number seq (the oracle's
	// wr_id scheme).
	run func(n int, seq uint64) error
	// between readies the next chunk, untimed: frees the send queue, or
	// refills the CQ.
	between func() error
}

// benchCQ is a CQ in memory, sized as CreateCQ sizes one of entries.
func benchCQ(tb testing.TB, c *Context, entries int, cqn uint32) *CQ {
	tb.Helper()
	logSize := uint8(bits.Len(uint(entries)))
	n := 1 << logSize
	buf, err := AllocBuffer(n*cqeSize + 4096)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { buf.Close() })
	mem := buf.Bytes()
	cq := &CQ{c: c, cqn: cqn, name: cqName(cqn), logSize: logSize, ring: mem[:n*cqeSize]}
	for i := 0; i < len(cq.ring); i += cqeSize {
		wqe.InitCQE(cq.ring[i : i+cqeSize])
	}
	rec := mem[n*cqeSize:]
	if cq.db, err = doorbell.NewCQ(rec[:doorbell.RecordSize], rec[64:], cqn); err != nil {
		tb.Fatal(err)
	}
	cq.errClosed = opErr("poll", cq.name, ErrClosed)
	m := map[uint32]*QP{}
	cq.qps.Store(&m)
	cq.g.open()
	return cq
}

// benchQP is a QP in memory, as CreateQP makes one of options o (its
// geometry, grants and bookkeeping) on c, with number qpn, attached to
// o.SendCQ and o.RecvCQ, and a BlueFlame register of 256 bytes a half
// (libmlx5's on the oracle's device) in a UAR page of its own.
func benchQP(tb testing.TB, c *Context, o QPOptions, qpn uint32) *QP {
	tb.Helper()
	lim := c.caps.limits()
	sq, rq, largest, err := o.geometry(&lim)
	if err != nil {
		tb.Fatal(err)
	}
	wq := rq.wqeCnt<<rq.wqeShift + sq.wqeCnt*wqe.WQEBB
	buf, err := AllocBuffer(wq + 2*4096)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { buf.Close() })
	mem := buf.Bytes()
	qp := &QP{c: c, pd: o.PD, sendCQ: o.SendCQ, recvCQ: o.RecvCQ, mkeyConf: o.MkeyConfigure, typ: o.Type, qpn: qpn, name: qpName(qpn)}
	qp.sq.maxWQE = largest
	if s := o.DCIStreams; s != nil {
		qp.dciStreams, qp.sq.maxStream = true, uint16(1<<min(s.LogConcurrent, 16)-1)
	}
	qp.sq.maxSGE, qp.sq.maxInline, qp.sq.maxMsg = max(o.MaxSendSGE, 1), sq.maxInline, c.maxMessage()
	qp.caps = QPCaps{MaxSendWR: sq.maxPost, MaxSendSGE: sq.maxSGE, MaxInlineData: sq.maxInline, MaxRecvWR: rq.maxPost, MaxRecvSGE: rq.maxSGE}
	qp.rings(mem[:wq], sq, rq)
	rec := mem[wq : wq+doorbell.RecordSize]
	uar := mem[wq+4096:]
	if qp.sq.bell, err = doorbell.NewSQ(rec, uar[doorbell.BlueFlameOffset:], benchBFSize); err != nil {
		tb.Fatal(err)
	}
	if qp.dbRQ, err = doorbell.NewRQ(rec); err != nil {
		tb.Fatal(err)
	}
	qp.initErrors()
	qp.sq.setPost(qp.typ, qp.qpn)
	qp.g.open()
	for _, cq := range []*CQ{o.SendCQ, o.RecvCQ} {
		if cq != nil {
			cq.attachLocked(qp)
		}
	}
	return qp
}

// putReqCQE writes at consumer index ci of cq a REQ CQE (byte_cnt 0) of
// the WQE of counter wqeCounter and opcode opcode of QP qpn, with the
// owner bit of ci's pass, as the oracle's build_req_cqe does.
func putReqCQE(cq *CQ, ci uint32, qpn uint32, wqeCounter uint16, opcode uint8) {
	e := cq.ring[(ci&(1<<cq.logSize-1))*cqeSize:][:cqeSize]
	clear(e)
	binary.BigEndian.PutUint32(e[56:], uint32(opcode)<<24|qpn)
	binary.BigEndian.PutUint16(e[60:], wqeCounter)
	e[63] = wqe.CQEReq<<4 | byte(ci>>cq.logSize)&1
}

// sbsContext is the context of the fixtures: a device whose port says
// ConnectX's maximum message (1 GiB), with DEVX for the mkey.
func sbsContext() *Context { return &Context{devx: true, maxMsgSz: 1 << 30} }

// sbsWriteOptions are bench_write's: 1024 RDMA WRITEs of one SGE.
func sbsWriteOptions(cq *CQ) QPOptions {
	return QPOptions{PD: &PD{}, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1024, MaxSendSGE: 1, MaxRecvWR: 1, MaxRecvSGE: 1,
		SendOps: Opcodes(OpRDMAWrite)}
}

// sbsDCIOptions are bench_dci's (streams false) and bench_dci_streams's
// (2^3 stream channels, 2^2 errored): bench_write's send queue on a DCI,
// which has no receive queue.
func sbsDCIOptions(cq *CQ, streams bool) QPOptions {
	o := sbsWriteOptions(cq)
	o.Type, o.MaxRecvWR, o.MaxRecvSGE = QPTypeDCI, 0, 0
	if streams {
		o.DCIStreams = &DCIStreams{LogConcurrent: 3, LogErrored: 2}
	}
	return o
}

// sbsWrite is the RDMA WRITE of the post benches: k-th of a batch, the
// last of n signaled.
func sbsWrite(k, n int) SendWR {
	wr := SendWR{Opcode: OpRDMAWrite, RemoteAddr: sbsRAddr + uint64(k&15)*4096, RKey: sbsRKey,
		SGL: []SGE{{Addr: sbsAddr + uint64(k&15)*4096, Length: sbsLength, LKey: sbsLKey}}}
	if k == n-1 {
		wr.Flags = SendSignaled
	}
	return wr
}

// newSideBySide makes the fixture of the benchmark that mlx5go's
// goName names (sbsOps). A name that starts with DC (DCStream: on the
// DCI with streams) is its RC bench's operation on a DCI, every work
// request addressed to the bench's DCT.
func newSideBySide(tb testing.TB, goName string) *sbsFixture {
	tb.Helper()
	c := sbsContext()
	goName, dc := strings.CutPrefix(goName, "DC")
	goName, streams := strings.CutPrefix(goName, "Stream")
	if streams && !dc {
		tb.Fatalf("no side-by-side benchmark Stream%s", goName)
	}
	var n int
	switch {
	case goName == "PostSend":
		n = 1
	case sscan(goName, "Batch%d", &n), sscan(goName, "PostSendList%d", &n):
	case goName == "BatchMkeyConfigure" || goName == "PostMkeyConfigure":
		return newSBSConfigure(tb, c, goName == "PostMkeyConfigure")
	case sscan(goName, "Poll%d", &n):
		return newSBSPoll(tb, c, n)
	default:
		tb.Fatalf("no side-by-side benchmark %q", goName)
	}
	if n <= 0 {
		tb.Fatalf("side-by-side benchmark %q", goName)
	}
	cq := benchCQ(tb, c, 255, 0x401)
	o, qpn, last := sbsWriteOptions(cq), uint32(sbsWriteQP), uint16(1)
	var ah *AH
	if dc {
		// A DC RDMA WRITE of one SGE is two WQEBBs: its control
		// segment, address vector, remote address and data (96 bytes).
		o, qpn, last = sbsDCIOptions(cq, streams), sbsDCIQP, 2
		if streams {
			qpn = sbsDCIStreamsQP
		}
		// The oracle bench's AH (InfiniBand, made in userspace).
		ah = testAH(&PD{c: c}, wqe.IBAV(&wqe.AHAttr{DLID: 0x22, SL: 3, SrcPathBits: 1}))
	}
	qp := benchQP(tb, c, o, qpn)
	f := &sbsFixture{qp: qp, cq: cq, perOp: n, chunk: qp.caps.MaxSendWR / n}
	f.between = func() error { return sbsRecycle(qp, cq, wqe.OpcodeRDMAWrite, last) }
	wrs := make([]SendWR, n)
	for k := range wrs {
		wrs[k] = sbsWrite(k, n)
		if dc {
			wrs[k].AH, wrs[k].RemoteQPN, wrs[k].DCAccessKey = ah, sbsDCTN, sbsDCKey
			if streams {
				wrs[k].StreamID = sbsDCStream
			}
		}
	}
	switch {
	case goName == "PostSend":
		wr := &wrs[0]
		f.run = func(n int, seq uint64) error {
			for i := range n {
				wr.WrID = seq + uint64(i)
				if err := qp.PostSend(wr); err != nil {
					return err
				}
			}
			return nil
		}
	case goName == "Batch1": // op_wr_write: one work request, without an inner loop
		wr := &wrs[0]
		f.run = func(n int, seq uint64) error {
			for i := range n {
				wr.WrID = seq + uint64(i)
				if err := qp.Begin().Add(wr).Commit(); err != nil {
					return err
				}
			}
			return nil
		}
	case strings.HasPrefix(goName, "Batch"): // ibv_wr_start, N x (ibv_wr_rdma_write, ibv_wr_set_sge), ibv_wr_complete
		f.run = func(n int, seq uint64) error {
			for i := range n {
				b := qp.Begin()
				for k := range wrs {
					wrs[k].WrID = (seq+uint64(i))*uint64(len(wrs)) + uint64(k)
					b.Add(&wrs[k])
				}
				if err := b.Commit(); err != nil {
					return err
				}
			}
			return nil
		}
	default: // ibv_post_send of a list
		f.run = func(n int, seq uint64) error {
			for i := range n {
				for k := range wrs {
					wrs[k].WrID = (seq+uint64(i))*uint64(len(wrs)) + uint64(k)
				}
				if err := qp.PostSendList(wrs); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return f
}

func sscan(s, format string, n *int) bool {
	_, err := fmt.Sscanf(s, format, n)
	return err == nil
}

// sbsRecycle frees qp's send queue as libmlx5's bench does between
// chunks (recycle_sq): one REQ CQE for its last WQE, which is last
// WQEBBs, polled from cq.
func sbsRecycle(qp *QP, cq *CQ, opcode uint8, last uint16) error {
	if qp.sq.pi == uint16(qp.sq.tail.Load()) {
		return nil
	}
	putReqCQE(cq, cq.ci, qp.qpn, qp.sq.pi-last, opcode)
	var wc [1]Completion
	if n, err := cq.Poll(wc[:]); n != 1 || err != nil || wc[0].Status != WCSuccess {
		return fmt.Errorf("recycling: %d completions (%+v), %v", n, wc[0], err)
	}
	if qp.sq.pi != uint16(qp.sq.tail.Load()) {
		return fmt.Errorf("recycling: tail %d, producer %d", qp.sq.tail.Load(), qp.sq.pi)
	}
	return nil
}

// newSBSConfigure is umr_sig_t10dif_both_list1: an mkey configured with
// access flags, a list layout of one SGE and T10-DIF in both domains (the
// oracle's README sample), as a batch (ibv_wr_start ..
// ibv_wr_complete), or with post PostMkeyConfigure.
func newSBSConfigure(tb testing.TB, c *Context, post bool) *sbsFixture {
	cq := benchCQ(tb, c, 255, 0x402)
	qp := benchQP(tb, c, QPOptions{PD: &PD{}, SendCQ: cq, RecvCQ: cq, MaxSendWR: 256, MaxSendSGE: 1, MaxRecvWR: 1, MaxRecvSGE: 1,
		MaxInlineData: 128, SendOps: Opcodes(OpRDMAWrite, OpSend), MkeyConfigure: true}, sbsUMRQP)
	// As CreateMkey makes it (INDIRECT | BLOCK_SIGNATURE, max_entries 4),
	// on a device with every signature cap.
	m := &Mkey{c: c, lkey: sbsMkey, rkey: sbsMkey, maxEntries: 4, sigMkey: true, psvIndex: [2]uint32{sbsMemPSV, sbsWirePSV},
		sentErrs: ^uint32(0), name: mkeyName(sbsMkey),
		sigCaps: sig.Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 3, CRCType: 7}, checkCaps: true}
	wr := MkeyConfigureWR{Mkey: m, Flags: SendSignaled | SendInline, SetAccess: true,
		Access: AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite,
		List:   []KLM{{Addr: sbsAddr, ByteCount: sbsLength, Mkey: sbsLKey}},
		Sig: &sig.BlockAttr{
			Mem:       &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512, T10DIF: &sig.T10DIF{AppTag: 0x1234, RefTag: 0x5678}},
			Wire:      &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize520, T10DIF: &sig.T10DIF{Seed: 0xffff, AppTag: 0xabcd, RefTag: 0x11223344, Flags: sig.T10DIFAppEscape}},
			CheckMask: 0xff,
		}}
	f := &sbsFixture{qp: qp, cq: cq, perOp: 3, chunk: qp.caps.MaxSendWR / 3}
	f.between = func() error { return sbsRecycle(qp, cq, wqe.OpcodeSetPSV, 1) }
	if post {
		f.run = func(n int, seq uint64) error {
			for i := range n {
				wr.WrID = seq + uint64(i)
				if err := qp.PostMkeyConfigure(&wr); err != nil {
					return err
				}
			}
			return nil
		}
	} else {
		f.run = func(n int, seq uint64) error {
			for i := range n {
				wr.WrID = seq + uint64(i)
				if err := qp.Begin().AddMkeyConfigure(&wr).Commit(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return f
}

// newSBSPoll is poll_cq_single (n 1) and poll_cq_batchN: Poll of n CQEs
// from a 1024-entry CQ full of REQ CQEs of successive signaled RDMA
// WRITEs of one QP, each completion's status checked. Between chunks the
// CQ is refilled: the QP posts 1024 WRITEs (its queue is empty then) and
// the CQ gets a CQE for each, as the oracle's fill_cq writes them.
func newSBSPoll(tb testing.TB, c *Context, n int) *sbsFixture {
	cq := benchCQ(tb, c, 1023, 0x403)
	qp := benchQP(tb, c, sbsWriteOptions(cq), sbsPollQP)
	wr := sbsWrite(0, 1)
	f := &sbsFixture{qp: qp, cq: cq, perOp: n, chunk: cq.Size() / n}
	f.between = func() error {
		if qp.sq.pi != uint16(qp.sq.tail.Load()) {
			return fmt.Errorf("refill: %d WQEBBs not completed", qp.sq.pi-uint16(qp.sq.tail.Load()))
		}
		for i := range uint32(cq.Size()) {
			if err := qp.PostSend(&wr); err != nil {
				return err
			}
			putReqCQE(cq, cq.ci+i, qp.qpn, qp.sq.pi-1, wqe.OpcodeRDMAWrite)
		}
		return nil
	}
	wc := make([]Completion, n)
	f.run = func(calls int, _ uint64) error {
		for range calls {
			got, err := cq.Poll(wc)
			if got != n || err != nil {
				return fmt.Errorf("%d of %d completions: %v", got, n, err)
			}
			for k := range got {
				if wc[k].Status != WCSuccess {
					return fmt.Errorf("completion %d: %v", k, wc[k].Status)
				}
			}
		}
		return nil
	}
	return f
}

// BenchmarkSideBySide runs the side-by-side benchmarks: b.N ops in
// chunks, each timed alone. Besides ns/op (the wall clock) and allocs/op
// it reports cpu-ns/op, the thread's CPU time (which a busy machine
// disturbs less), and ns per work request or CQE.
func BenchmarkSideBySide(b *testing.B) {
	for _, op := range sbsOps {
		b.Run(op.goName+":"+op.oracle, func(b *testing.B) {
			f := newSideBySide(b, op.goName)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			var wall, cpu time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(f.chunk, b.N-done)
				if err := f.between(); err != nil {
					b.Fatal(err)
				}
				u0 := threadCPU()
				t0 := time.Now()
				err := f.timed(n, uint64(done))
				t1 := time.Now()
				u1 := threadCPU()
				if err != nil {
					b.Fatal(err)
				}
				wall += t1.Sub(t0)
				cpu += u1 - u0
				done += n
			}
			per := "ns/wr"
			if strings.HasPrefix(op.goName, "Poll") {
				per = "ns/cqe"
			}
			b.ReportMetric(float64(wall.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*f.perOp), "cpu-"+per)
		})
	}
}

// timed is the timed region: f.run. Not inlined, so that a profile can
// count what it runs alone (valgrind --tool=callgrind
// --toggle-collect='*sbsFixture*timed', docs/PERFORMANCE.md).
//
//go:noinline
func (f *sbsFixture) timed(n int, seq uint64) error { return f.run(n, seq) }

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID,
// as the oracle's cpu_ns).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// sbsRecord is a bench of the oracle's bench.json (testdata/bench_wqe.jsonl):
// its QP's geometry and the WQEs its first op wrote.
type sbsRecord struct {
	Name string `json:"name"`
	QP   struct {
		QPN      uint32 `json:"qpn"`
		WQECnt   int    `json:"sq_wqe_cnt"`
		MaxPost  int    `json:"max_post"`
		MaxInl   int    `json:"max_inline_data"`
		BFSize   int    `json:"bf_size"`
		Name     string `json:"name"`
		Requests int    `json:"max_send_wr_requested"`
	} `json:"qp"`
	CQ *struct {
		CQECnt int `json:"cqe_cnt"`
	} `json:"cq"`
	Sample *struct {
		PIBefore uint16 `json:"sq_pi_before"`
		SQ       struct {
			WQEBBs []struct {
				Index int    `json:"index"`
				Hex   string `json:"hex"`
			} `json:"wqebbs"`
		} `json:"sq"`
	} `json:"wqe_sample"`
}

// The side-by-side benchmarks do libmlx5's work: their queues have the
// geometry of the oracle bench's (ring, granted work requests and inline
// data, BlueFlame size, CQ size, QP number), and the first op of each
// post benchmark writes the WQE bytes libmlx5's first op wrote, every
// WQEBB of them.
func TestSideBySideWQEs(t *testing.T) {
	seen := map[string]bool{}
	oracle.Records(t, "testdata/bench_wqe.jsonl", nil, func(r *sbsRecord) {
		for _, op := range sbsOps {
			if op.oracle != r.Name {
				continue
			}
			name := op.goName
			seen[name] = true
			f := newSideBySide(t, name)
			qp := f.qp
			if qp.qpn != r.QP.QPN || len(qp.sq.slots) != r.QP.WQECnt || qp.caps.MaxSendWR != r.QP.MaxPost ||
				qp.caps.MaxInlineData != r.QP.MaxInl || qp.sq.bell.BlueFlameSize() != r.QP.BFSize {
				t.Errorf("%s: QP %#x of %d WQEBBs, MaxSendWR %d, MaxInlineData %d, BlueFlame %d; libmlx5's %s: %#x, %d, %d, %d, %d",
					name, qp.qpn, len(qp.sq.slots), qp.caps.MaxSendWR, qp.caps.MaxInlineData, qp.sq.bell.BlueFlameSize(),
					r.QP.Name, r.QP.QPN, r.QP.WQECnt, r.QP.MaxPost, r.QP.MaxInl, r.QP.BFSize)
			}
			if r.CQ != nil {
				if f.cq.Size() != r.CQ.CQECnt {
					t.Errorf("%s: CQ of %d CQEs, libmlx5's %d", name, f.cq.Size(), r.CQ.CQECnt)
				}
				if err := f.between(); err != nil {
					t.Fatal(err)
				}
				if err := f.run(f.chunk, 0); err != nil {
					t.Errorf("%s: %v", name, err)
				}
				continue
			}
			if r.Sample == nil || qp.sq.pi != r.Sample.PIBefore {
				t.Fatalf("%s: no sample, or one at producer counter %+v", name, r.Sample)
			}
			if err := f.run(1, 0); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got, want := int(qp.sq.pi-r.Sample.PIBefore), len(r.Sample.SQ.WQEBBs); got != want {
				t.Errorf("%s: %d WQEBBs posted, libmlx5 %d", name, got, want)
			}
			for _, w := range r.Sample.SQ.WQEBBs {
				if got := qp.sq.ring.Slot(uint16(w.Index)); !bytes.Equal(got, oracle.Unhex(t, w.Hex)) {
					t.Errorf("%s: WQEBB %d\n got %x\nwant %s", name, w.Index, got, w.Hex)
				}
			}
			// The chunk loop goes on from there: a chunk fits, and the
			// recycling frees it.
			if err := f.run(f.chunk-1, 1); err != nil {
				t.Errorf("%s: the rest of a chunk: %v", name, err)
			}
			if err := f.between(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
	for _, op := range sbsOps {
		if !seen[op.goName] {
			t.Errorf("%s: %s is not in testdata/bench_wqe.jsonl", op.goName, op.oracle)
		}
	}
}
