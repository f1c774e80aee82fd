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
	qp.maxWQE = 8
	// A configure-like request: a 4-WQEBB UMR and two 1-WQEBB SET_PSVs.
	qp.track(1, WCUMR, 6, 5)
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
