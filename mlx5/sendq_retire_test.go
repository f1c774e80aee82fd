package mlx5

import (
	"fmt"
	"testing"

	"github.com/mlx5go/mlx5go/wqe"
)

// retireStep is a requester CQE and what polling it must report: the
// completions (wr_id and status) and the send queue's tail after it.
type retireStep struct {
	opcode uint8 // wqe.CQEReq or wqe.CQEReqErr
	ctr    uint16
	syn    wqe.Syndrome
	want   []retireDone
	tail   uint16
}

type retireDone struct {
	wrID   uint64
	status WCStatus
}

// retireRecord writes the send queue's record of a work request of n
// WQEBBs at the producer counter, whose last WQE starts at lastOff from
// its first (what the poster records), and moves the producer counter.
func retireRecord(qp *QP, wrID uint64, op WCOpcode, n int, lastOff uint16) {
	at, mask := qp.sq.pi, len(qp.sq.slots)-1
	s := sqSlot{wrID: wrID, next: at + uint16(n), last: at + lastOff, op: op}
	for j := at; j != s.next; j++ {
		qp.sq.slots[int(j)&mask] = s
	}
	qp.sq.pi = s.next
}

// TestRetireSuccessAndErrorAgree: Poll completes a successful send in
// its loop and a failed one through QP.complete; both go through
// sendQueue.retire, so whatever the mix of successes and errors, every
// work request is reported once, with the status of its first CQE, and
// the tail moves over a work request (and the unsignaled work before it)
// on the CQE of its last WQE; a CQE of a counter no record covers
// reports nothing. Each sequence runs with one Poll a CQE and with all of
// its CQEs in one Poll.
//
// The work: A, an RDMA WRITE at WQEBB 0; B, an mkey configure at 1 to 5
// (a UMR of 3 WQEBBs, then SET_PSVs at 4 and 5); C, an RDMA WRITE at 6.
func TestRetireSuccessAndErrorAgree(t *testing.T) {
	const a, b, c = 0xa, 0xb, 0xc
	ok := func(id uint64) retireDone { return retireDone{id, WCSuccess} }
	req := func(ctr, tail uint16, want ...retireDone) retireStep {
		return retireStep{opcode: wqe.CQEReq, ctr: ctr, want: want, tail: tail}
	}
	fail := func(ctr uint16, syn wqe.Syndrome, tail uint16, want ...retireDone) retireStep {
		return retireStep{opcode: wqe.CQEReqErr, ctr: ctr, syn: syn, want: want, tail: tail}
	}
	flush := wqe.SyndromeWRFlush
	for _, tc := range []struct {
		name  string
		steps []retireStep
	}{
		{"all succeed", []retireStep{req(0, 1, ok(a)), req(5, 6, ok(b)), req(6, 7, ok(c))}},
		{"the UMR fails, the rest is flushed", []retireStep{
			req(0, 1, ok(a)),
			fail(1, wqe.SyndromeLocalProt, 1, retireDone{b, WCLocProtErr}),
			fail(4, flush, 1), fail(5, flush, 6),
			fail(6, flush, 7, retireDone{c, WCWRFlushErr})}},
		{"a SET_PSV fails, then a success", []retireStep{
			req(0, 1, ok(a)),
			fail(4, wqe.SyndromeRemoteAccess, 1, retireDone{b, WCRemAccessErr}),
			fail(5, flush, 6), req(6, 7, ok(c))}},
		{"the last WQE fails, A unsignaled", []retireStep{
			fail(5, wqe.SyndromeLocalProt, 6, retireDone{b, WCLocProtErr}), req(6, 7, ok(c))}},
		{"an error, then a success of the last WQE", []retireStep{
			fail(1, wqe.SyndromeLocalProt, 0, retireDone{b, WCLocProtErr}), req(5, 6), req(6, 7, ok(c))}},
		{"counters never posted, or of an earlier lap", []retireStep{
			req(0, 1, ok(a)), fail(7, flush, 1), fail(8, wqe.SyndromeLocalProt, 1), req(0x39, 1),
			req(5, 6, ok(b)), req(6, 7, ok(c))}},
		{"a success, then an error of the last WQE", []retireStep{
			req(1, 0, ok(b)), fail(5, wqe.SyndromeLocalProt, 6), fail(6, flush, 7, retireDone{c, WCWRFlushErr})}},
	} {
		for _, onePoll := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/onePoll=%v", tc.name, onePoll), func(t *testing.T) {
				cq := testCQ(t, &Context{devx: true}, 16, 0)
				qp := sqQP(t, cq, 0xa1, 8)
				retireRecord(qp, a, WCRDMAWrite, 1, 0)
				retireRecord(qp, b, WCUMR, 5, 4)
				retireRecord(qp, c, WCRDMAWrite, 1, 0)
				runRetireSteps(t, cq, qp, tc.steps, onePoll)
			})
		}
	}
}

// TestRetireStreamsSuccessAndError: on a DCI with streams a success and
// an error of different streams complete out of send queue order; each
// is reported once with its own status, and the tail moves only over
// work that is done, whichever path retired it.
func TestRetireStreamsSuccessAndError(t *testing.T) {
	for _, onePoll := range []bool{false, true} {
		t.Run(fmt.Sprintf("onePoll=%v", onePoll), func(t *testing.T) {
			cq := testCQ(t, &Context{devx: true}, 16, 0)
			qp := sqQP(t, cq, 0xa1, 8)
			qp.typ, qp.dciStreams = QPTypeDCI, true
			ds := &streamBook{stream: make([]uint16, 8), doneTo: make([]uint16, 2), ahead: make([]bool, 2)}
			qp.sq.streams = ds
			// Work requests 0 to 3, one WQEBB each, on streams 0 1 0 1.
			for i := range 4 {
				ds.stream[i] = uint16(i & 1)
				retireRecord(qp, uint64(0x10+i), WCSend, 1, 0)
			}
			runRetireSteps(t, cq, qp, []retireStep{
				{opcode: wqe.CQEReq, ctr: 1, tail: 0, want: []retireDone{{0x11, WCSuccess}}},
				{opcode: wqe.CQEReqErr, ctr: 0, syn: wqe.SyndromeRemoteAccess, tail: 2, want: []retireDone{{0x10, WCRemAccessErr}}},
				{opcode: wqe.CQEReqErr, ctr: 2, syn: wqe.SyndromeWRFlush, tail: 3, want: []retireDone{{0x12, WCWRFlushErr}}},
				{opcode: wqe.CQEReq, ctr: 3, tail: 4, want: []retireDone{{0x13, WCSuccess}}},
			}, onePoll)
		})
	}
}

// runRetireSteps writes the steps' CQEs to cq and polls them: one Poll
// a CQE, each step's completions and tail checked, or (onePoll) all of
// them in one Poll, checked against every step's completions and the
// last step's tail.
func runRetireSteps(t *testing.T, cq *CQ, qp *QP, steps []retireStep, onePoll bool) {
	t.Helper()
	check := func(got []Completion, want []retireDone, tail uint16, what string) {
		t.Helper()
		ok := len(got) == len(want)
		for i := 0; ok && i < len(got); i++ {
			ok = got[i].WrID == want[i].wrID && got[i].Status == want[i].status && got[i].QPN == qp.qpn
		}
		if !ok {
			t.Errorf("%s: completions %+v, want %+v", what, got, want)
		}
		if got := uint16(qp.sq.tail.Load()); got != tail {
			t.Errorf("%s: tail %d, want %d", what, got, tail)
		}
	}
	var all []retireDone
	for i, s := range steps {
		putCQE(cq, uint32(i), s.opcode, qp.qpn, s.ctr, s.syn)
		all = append(all, s.want...)
		if !onePoll {
			check(pollAll(t, cq), s.want, s.tail, fmt.Sprintf("CQE %d (opcode %#x, counter %d)", i, s.opcode, s.ctr))
		}
	}
	if onePoll {
		check(pollAll(t, cq), all, steps[len(steps)-1].tail, "one poll")
	}
	if got := pollAll(t, cq); len(got) != 0 {
		t.Errorf("after the last CQE: %+v", got)
	}
}
