package mlx5

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/wqe"
)

// putCQE writes a CQE as the device would into slot index of cq: opcode,
// qpn (sop_drop_qpn), wqe_counter, the syndrome of an error CQE, and the
// owner bit of the pass index belongs to.
func putCQE(cq *CQ, index uint32, opcode uint8, qpn uint32, counter uint16, syndrome wqe.Syndrome) {
	size := uint32(1) << cq.logSize
	b := cq.ring[(index&(size-1))*cqeSize:][:cqeSize]
	clear(b)
	binary.BigEndian.PutUint32(b[56:], qpn)
	binary.BigEndian.PutUint16(b[60:], counter)
	b[55] = uint8(syndrome)
	b[63] = opcode<<4 | uint8(index>>cq.logSize)&1
}

// sqQP is a QP with a send ring of n WQEBBs in Go memory, attached to cq.
func sqQP(t *testing.T, cq *CQ, qpn uint32, n int) *QP {
	qp, _ := testQP(t, cq.c, n)
	qp.qpn = qpn
	cq.attachLocked(qp)
	return qp
}

func pollAll(t *testing.T, cq *CQ) []Completion {
	t.Helper()
	wc := make([]Completion, 64)
	n, err := cq.Poll(wc)
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return wc[:n]
}

// A destroyed QP's CQEs leave the CQ; the others stay, in order, with
// owner bits right for their new slots, also across the ring's end.
func TestCleanRemovesOnlyTheQPsCQEs(t *testing.T) {
	c := &Context{devx: true}
	cq := testCQ(t, c, 8, 5) // consumer index 5: the CQEs cross the end
	a, b := sqQP(t, cq, 0xa1, 16), sqQP(t, cq, 0xb2, 16)
	for i, q := range []*QP{a, b, a, a, b, a} {
		if err := q.PostSend(&SendWR{WrID: uint64(0x100*int(q.qpn&0xf0>>4) + i), Opcode: OpSend, Flags: SendSignaled,
			SGL: []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	// CQEs in the order the sends were posted; each QP's counters from 0.
	var ctr = map[*QP]uint16{}
	for i, q := range []*QP{a, b, a, a, b, a} {
		putCQE(cq, 5+uint32(i), wqe.CQEReq, q.qpn, ctr[q], 0)
		ctr[q]++
	}
	cq.cleanLocked(a.qpn, nil)
	cq.detachLocked(a)
	if cq.ci != 5+4 {
		t.Errorf("consumer index %d after removing 4 CQEs, want 9", cq.ci)
	}
	if got := cq.db.CI(); got != cq.ci {
		t.Errorf("doorbell record %d, want %d", got, cq.ci)
	}
	got := pollAll(t, cq)
	if len(got) != 2 || got[0].WrID != 0xb01 || got[1].WrID != 0xb04 || got[0].QPN != b.qpn {
		t.Fatalf("after the clean: %+v, want b's two sends", got)
	}
	// The device goes on at its producer index; the poller finds it.
	if err := b.PostSend(&SendWR{WrID: 0xb99, Opcode: OpSend, Flags: SendSignaled, SGL: []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}); err != nil {
		t.Fatal(err)
	}
	putCQE(cq, 5+6, wqe.CQEReq, b.qpn, 2, 0)
	if got := pollAll(t, cq); len(got) != 1 || got[0].WrID != 0xb99 {
		t.Fatalf("next CQE: %+v", got)
	}
}

// A SIG_ERR CQE of an mkey the context does not have fails the poll, once;
// the poll after it goes on.
func TestPollSigErrOfUnknownMkey(t *testing.T) {
	c := &Context{devx: true}
	cq := testCQ(t, c, 8, 0)
	qp := sqQP(t, cq, 0xa1, 16)
	if err := qp.PostSend(&SendWR{WrID: 7, Opcode: OpSend, Flags: SendSignaled, SGL: []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}); err != nil {
		t.Fatal(err)
	}
	putCQE(cq, 0, wqe.CQESigErr, 0, 0, 0)
	binary.BigEndian.PutUint32(cq.ring[36:], 0x4242) // mkey: unknown
	putCQE(cq, 1, wqe.CQEReq, qp.qpn, 0, 0)
	wc := make([]Completion, 4)
	if n, err := cq.Poll(wc); n != 0 || err == nil {
		t.Fatalf("poll over a SIG_ERR CQE of an unknown mkey: %d, %v; want an error", n, err)
	}
	if n, err := cq.Poll(wc); n != 1 || err != nil || wc[0].WrID != 7 {
		t.Fatalf("the poll after: %d %v %+v", n, err, wc[0])
	}
}

// A work request of several WQEs completes once, and gives its WQEBBs
// back only when the CQE of its last WQE arrives: until then a post may
// not write over them, even though its completion was reported.
func TestMultiWQERequestCompletesOnce(t *testing.T) {
	c := &Context{devx: true}
	cq := testCQ(t, c, 16, 0)
	qp := sqQP(t, cq, 0xa1, 8)
	qp.sq.maxWQE = 8
	// A configure-like request: a 4-WQEBB UMR and two 1-WQEBB SET_PSVs.
	qp.sq.track(1, WCUMR, 6, 5, 0)
	qp.sq.slots[0].last = 5
	if free := qp.sq.free(); free != 2 {
		t.Fatalf("free %d, want 2", free)
	}
	// The UMR fails: an error CQE for WQE 0, then flushes for 4 and 5.
	putCQE(cq, 0, wqe.CQEReqErr, qp.qpn, 0, wqe.SyndromeLocalProt)
	got := pollAll(t, cq)
	if len(got) != 1 || got[0].WrID != 1 || got[0].Status != WCLocProtErr || got[0].Opcode != WCUMR {
		t.Fatalf("the UMR's error: %+v", got)
	}
	if free := qp.sq.free(); free != 2 {
		t.Errorf("free %d after the first CQE, want still 2: the SET_PSVs are not done", free)
	}
	putCQE(cq, 1, wqe.CQEReqErr, qp.qpn, 4, wqe.SyndromeWRFlush)
	putCQE(cq, 2, wqe.CQEReqErr, qp.qpn, 5, wqe.SyndromeWRFlush)
	if got := pollAll(t, cq); len(got) != 0 {
		t.Fatalf("the SET_PSVs' flushes were reported: %+v", got)
	}
	if free := qp.sq.free(); free != 8 {
		t.Errorf("free %d after the last WQE's CQE, want 8", free)
	}
	// The next request on the same slots completes normally.
	if err := qp.PostSend(&SendWR{WrID: 2, Opcode: OpSend, Flags: SendSignaled, SGL: []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}); err != nil {
		t.Fatal(err)
	}
	putCQE(cq, 3, wqe.CQEReqErr, qp.qpn, 6, wqe.SyndromeWRFlush)
	if got := pollAll(t, cq); len(got) != 1 || got[0].WrID != 2 || got[0].Status != WCWRFlushErr {
		t.Fatalf("the next request: %+v", got)
	}
	if err := qp.PostSend(nil); !errors.Is(Checked(t, err), ErrInvalid) {
		t.Errorf("PostSend(nil): %v", err)
	}
}

// A DCI's streams may complete out of send queue order: a work request
// that completes ahead of an earlier one is reported at once, with its own
// wr_id, but the WQEBBs are freed only over work that is done, so a post
// never writes over a WQE (or the record of a work request) the device
// has not completed. libmlx5 moves its tail to the completed work request
// and frees the earlier ones' WQEBBs.
func TestOutOfOrderCompletionsFreeOnlyDoneWork(t *testing.T) {
	c := &Context{devx: true}
	cq := testCQ(t, c, 64, 0)
	// A DC SEND with one SGE is 2 WQEBBs (ctrl, the DC address, data):
	// 8 of them fill the 16-WQEBB ring; work request i is WQE 2i.
	qp := sqQP(t, cq, 0xa1, 16)
	qp.typ, qp.dciStreams, qp.sq.maxStream, qp.sq.maxWQE = QPTypeDCI, true, 3, 2
	qp.sq.streams = &streamBook{stream: make([]uint16, 16), doneTo: make([]uint16, 4), ahead: make([]bool, 4)}
	pd := &PD{c: c}
	ah := &AH{pd: pd}
	// WQE i is on stream streamOf[i]; wr_ids 0x10+i, then 0x20+i.
	streamOf := []uint16{0, 1, 1, 0, 2, 3, 2, 0, 1, 3, 2}
	next := 0
	send := func(id uint64) error {
		err := qp.PostSend(&SendWR{WrID: id, Opcode: OpSend, Flags: SendSignaled, SGL: []SGE{{Addr: 0x1000, Length: 8, LKey: 1}},
			AH: ah, RemoteQPN: 0x77, DCAccessKey: 1, StreamID: streamOf[next%len(streamOf)]})
		if err == nil {
			next++
		}
		return err
	}
	for i := range 8 {
		if err := send(uint64(0x10 + i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := send(0x99); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("a ninth send on an 8-WQEBB ring: %v, want ErrQueueFull", err)
	}
	// Streams (0 1 1 0 2 3 2 0): work requests 1, 2 (stream 1) and 5
	// (stream 3) complete first; 0 (stream 0, a slow target) is still
	// outstanding.
	ci := uint32(0)
	for _, w := range []uint16{1, 2, 5} {
		putCQE(cq, ci, wqe.CQEReq, qp.qpn, 2*w, 0)
		ci++
	}
	got := pollAll(t, cq)
	if len(got) != 3 || got[0].WrID != 0x11 || got[1].WrID != 0x12 || got[2].WrID != 0x15 {
		t.Fatalf("out of order completions: %+v, want wr_ids 0x11, 0x12, 0x15", got)
	}
	if free := qp.sq.free(); free != 0 {
		t.Fatalf("%d WQEBBs free while WQE 0 is outstanding, want 0: a post would overwrite it", free)
	}
	if err := send(0x99); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("a send while the earliest WQE is outstanding: %v, want ErrQueueFull", err)
	}
	// Work request 0 completes: the tail moves over 0, 1 and 2 (done),
	// and stops at 3 (stream 0, nothing of it completed past 0).
	putCQE(cq, ci, wqe.CQEReq, qp.qpn, 0, 0)
	ci++
	if got := pollAll(t, cq); len(got) != 1 || got[0].WrID != 0x10 {
		t.Fatalf("WQE 0: %+v", got)
	}
	if free := qp.sq.free(); free != 6 {
		t.Fatalf("%d WQEBBs free after work requests 0 to 2 completed, want 6", free)
	}
	// New work takes the freed slots; the rest complete, with an error on
	// one stream and its flush, in any order: every wr_id exactly once.
	for i := range 3 {
		if err := send(uint64(0x20 + i)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint64]int{}
	for _, w := range []uint16{4, 9, 3, 6, 8, 10, 7} {
		op, syn := uint8(wqe.CQEReq), wqe.Syndrome(0)
		if w == 6 {
			op, syn = wqe.CQEReqErr, wqe.SyndromeRemoteAccess
		}
		putCQE(cq, ci, op, qp.qpn, 2*w, syn)
		ci++
	}
	for _, g := range pollAll(t, cq) {
		seen[g.WrID]++
		if g.WrID == 0x16 && g.Status != WCRemAccessErr {
			t.Errorf("WQE 6: %v, want a remote access error", g.Status)
		}
	}
	for _, id := range []uint64{0x13, 0x14, 0x16, 0x17, 0x20, 0x21, 0x22} {
		if seen[id] != 1 {
			t.Errorf("wr_id %#x completed %d times, want once (%v)", id, seen[id], seen)
		}
	}
	if len(seen) != 7 {
		t.Errorf("completions %v", seen)
	}
	if free := qp.sq.free(); free != 16 {
		t.Errorf("%d WQEBBs free with nothing outstanding, want 16", free)
	}
}

// A requester's completion says whether its work request carried
// immediate data, and an atomic's length is its 8 bytes, as libmlx5's
// handle_good_req reports them.
func TestRequesterCompletionFlags(t *testing.T) {
	c := &Context{devx: true}
	cq := testCQ(t, c, 16, 0)
	qp := sqQP(t, cq, 0xa1, 8)
	qp.typ = QPTypeRC
	sge := []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}
	wrs := []SendWR{
		{WrID: 1, Opcode: OpSendImm, Imm: 5, SGL: sge},
		{WrID: 2, Opcode: OpRDMAWriteImm, Imm: 5, SGL: sge, RemoteAddr: 0x2000, RKey: 2},
		{WrID: 3, Opcode: OpSend, SGL: sge},
		{WrID: 4, Opcode: OpAtomicFAA, SGL: sge, RemoteAddr: 0x2000, RKey: 2, SwapAdd: 1},
		{WrID: 5, Opcode: OpAtomicCAS, SGL: sge, RemoteAddr: 0x2000, RKey: 2},
	}
	for i := range wrs {
		wrs[i].Flags = SendSignaled
		if err := qp.PostSend(&wrs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range wrs {
		putCQE(cq, uint32(i), wqe.CQEReq, qp.qpn, uint16(i), 0)
	}
	got := pollAll(t, cq)
	want := []struct {
		imm bool
		len uint32
	}{{true, 0}, {true, 0}, {false, 0}, {false, 8}, {false, 8}}
	if len(got) != len(want) {
		t.Fatalf("%d completions: %+v", len(got), got)
	}
	for i, w := range want {
		if got[i].WithImm != w.imm || got[i].ByteLen != w.len {
			t.Errorf("wr_id %d: WithImm %v, ByteLen %d; want %v, %d", got[i].WrID, got[i].WithImm, got[i].ByteLen, w.imm, w.len)
		}
	}
}
