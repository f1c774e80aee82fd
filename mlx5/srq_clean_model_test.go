package mlx5_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
)

// TestSRQReceiveOfClosedQPCompletes: an SRQ's receive work request that
// a QP consumed (a SEND landed in its buffer, its CQE is in the CQ) and
// that QP then closed, or moved to RESET, before the CQ was polled, still
// completes, once, with the completion the device wrote: its wr_id,
// status, byte count and sender, and the QP number of the QP that
// consumed it. For a DCT (whose receives are all an SRQ's), an RC QP on
// an SRQ closed, and one moved to RESET. The SRQ loses no WQE: a QP
// made on it afterwards consumes the next receive, and the SRQ takes as
// many receives as it grants.
func TestSRQReceiveOfClosedQPCompletes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// dc: the receiver is a DCT and the sender a DCI, else an RC pair;
		// reset: the receiver is moved to RESET, not closed.
		dc, reset bool
	}{
		{name: "DCT closed", dc: true},
		{name: "RC on an SRQ closed"},
		{name: "RC on an SRQ moved to RESET", reset: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newDCRig(t, "cx7", model.Options{})
			scq := r.cq // the senders'
			rcq := r.evRig.cq(t, 64, false)
			srq := r.srq
			const key = 0xd0c
			var sender, receiver *mlx5.QP
			pair := func() {
				if tc.dc {
					receiver = dctOn(t, r, rcq, srq, key)
					if sender == nil {
						sender = r.dci(t, mlx5.QPOptions{})
					}
					return
				}
				receiver = r.qp(t, mlx5.QPOptions{SendCQ: rcq, RecvCQ: rcq, SRQ: srq})
				t.Cleanup(func() { receiver.Close() })
				sender = r.qp(t, mlx5.QPOptions{SendCQ: scq, RecvCQ: scq})
				t.Cleanup(func() { sender.Close() })
				if err := sender.Connect(receiver.QPN(), r.path); err != nil {
					t.Fatal(err)
				}
				if err := receiver.Connect(sender.QPN(), r.path); err != nil {
					t.Fatal(err)
				}
			}
			send := func(id uint64) {
				t.Helper()
				wr := r.send(id, mlx5.SendSignaled)
				if tc.dc {
					wr.AH, wr.RemoteQPN, wr.DCAccessKey = r.ah, receiver.QPN(), key
				}
				post(t, sender, wr)
				if c := pollN(t, scq, 1, 5*time.Second)[0]; c.WrID != id || c.Status != mlx5.WCSuccess {
					t.Fatalf("the SEND's completion: %+v", c)
				}
			}
			checkRecv := func(c mlx5.Completion, id uint64, qpn, from uint32) {
				t.Helper()
				if c.WrID != id || c.Status != mlx5.WCSuccess || c.Opcode != mlx5.WCRecv || c.ByteLen != 16 || c.QPN != qpn || (tc.dc && c.SrcQP != from) {
					t.Errorf("receive %d: %+v, want a successful receive of 16 bytes on QP %#x from %#x", id, c, qpn, from)
				}
			}

			pair()
			r.recvs(t, 4, 0x8000, 100)
			for i := range uint64(3) {
				send(1 + i) // consumes receive 100 + i
			}
			gone, from := receiver.QPN(), sender.QPN()
			if tc.reset {
				modify(t, receiver, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
			} else if err := receiver.Close(); err != nil {
				t.Fatal(err)
			}
			// The three receives the QP consumed, each once, in order: they
			// were in the CQ before the QP went, so Poll has them at once.
			var got []mlx5.Completion
			wc := make([]mlx5.Completion, 8)
			for end := time.Now().Add(mustCome); len(got) < 3 && time.Now().Before(end); time.Sleep(time.Millisecond) {
				n, err := rcq.Poll(wc)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, wc[:n]...)
			}
			if len(got) != 3 {
				t.Fatalf("%d of the 3 receives (wr_ids 100 to 102) QP %#x consumed before it went completed: %+v", len(got), gone, got)
			}
			for i, c := range got {
				checkRecv(c, 100+uint64(i), gone, from)
			}

			// The SRQ lost nothing: the next SEND takes receive 103.
			if tc.reset { // both sides again from RESET, their PSNs from 0
				modify(t, sender, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
				if err := sender.Connect(receiver.QPN(), r.path); err != nil {
					t.Fatal(err)
				}
				if err := receiver.Connect(sender.QPN(), r.path); err != nil {
					t.Fatal(err)
				}
			} else {
				pair()
			}
			send(9)
			checkRecv(pollN(t, rcq, 1, 5*time.Second)[0], 103, receiver.QPN(), sender.QPN())
			// Nothing outstanding: the SRQ takes what it grants, and no more.
			n := srq.Caps().MaxWR
			for i := range n {
				if err := srq.PostRecv(uint64(1000+i), []mlx5.SGE{{Addr: r.addr(0x8000), Length: 256, LKey: r.mr.LKey()}}); err != nil {
					t.Fatalf("receive %d of the %d the SRQ grants: %v", i, n, err)
				}
			}
			if err := srq.PostRecv(1, []mlx5.SGE{{Addr: r.addr(0x8000), Length: 256, LKey: r.mr.LKey()}}); !errors.Is(err, mlx5.ErrQueueFull) {
				t.Errorf("a receive past the %d the SRQ grants: %v, want ErrQueueFull", n, err)
			}
		})
	}
}

// dctOn makes a DCT of key on srq whose receive completions go to cq, in
// RTR.
func dctOn(t testing.TB, r *dcRig, cq *mlx5.CQ, srq *mlx5.SRQ, key uint64) *mlx5.QP {
	t.Helper()
	q, err := r.c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCT, PD: r.pd, SendCQ: cq, RecvCQ: cq, SRQ: srq, DCAccessKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	modify(t, q, mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1, Access: mlx5.AccessRemoteWrite},
		mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort|mlx5.QPAttrAccessFlags)
	modify(t, q, mlx5.QPAttr{State: mlx5.QPStateRTR, Path: r.path, MinRNRTimer: 1},
		mlx5.QPAttrState|mlx5.QPAttrAV|mlx5.QPAttrPathMTU|mlx5.QPAttrMinRNRTimer)
	return q
}

// TestSRQReceiveOfClosedDCTWhilePolled: a poller goroutine polls a DCT's
// CQ while the DCIs' SENDs land and while the DCT is closed: each of the
// SRQ's receives the DCT consumed completes exactly once, before the
// close (polled from the ring) or after it (kept by the close's clean),
// and nothing else completes. For the race detector too.
func TestSRQReceiveOfClosedDCTWhilePolled(t *testing.T) {
	r := newDCRig(t, "cx7", model.Options{})
	rcq := r.evRig.cq(t, 256, false)
	const key, n = 0xd0c, 128
	dct := dctOn(t, r, rcq, r.srq, key)
	dci := r.dci(t, mlx5.QPOptions{MaxSendWR: 32})
	r.recvs(t, n, 0x8000, 1000)
	gone := dct.QPN()

	seen := make(chan map[uint64]int, 1)
	var stop atomic.Bool
	go func() {
		got := map[uint64]int{}
		wc := make([]mlx5.Completion, 7)
		for end := time.Now().Add(mustCome); len(got) < n && time.Now().Before(end); {
			closed := stop.Load() // then this Poll has what the close kept
			k, err := rcq.Poll(wc)
			if err != nil {
				break
			}
			for _, c := range wc[:k] {
				if c.QPN != gone || c.Status != mlx5.WCSuccess || c.Opcode != mlx5.WCRecv {
					got[^uint64(0)]++ // not a receive of the DCT's
				}
				got[c.WrID]++
			}
			if k == 0 {
				if closed {
					break
				}
				runtime.Gosched()
			}
		}
		seen <- got
	}()
	// The DCI's completions, every SEND signaled: polled while the ring
	// is full, then until all n came.
	sends, wc := 0, make([]mlx5.Completion, 32)
	pollSends := func() {
		t.Helper()
		for end := time.Now().Add(mustCome); ; runtime.Gosched() {
			k, err := r.cq.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range wc[:k] {
				if c.Status != mlx5.WCSuccess {
					t.Fatalf("a SEND failed: %+v", c)
				}
			}
			if sends += k; k > 0 {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("%d of %d SENDs completed", sends, n)
			}
		}
	}
	for i := range uint64(n) {
		wr := r.send(i, mlx5.SendSignaled)
		wr.AH, wr.RemoteQPN, wr.DCAccessKey = r.ah, dct.QPN(), key
		for {
			err := dci.PostSend(wr)
			if err == nil {
				break
			}
			if !errors.Is(err, mlx5.ErrQueueFull) {
				t.Fatal(err)
			}
			pollSends()
		}
	}
	for sends < n { // every SEND done: the DCT consumed n receives
		pollSends()
	}
	if err := dct.Close(); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	got := <-seen
	if len(got) != n || got[^uint64(0)] != 0 {
		t.Fatalf("%d distinct wr_ids of the %d receives the closed DCT consumed (%d not the DCT's receives)", len(got), n, got[^uint64(0)])
	}
	for i := uint64(1000); i < 1000+n; i++ {
		if got[i] != 1 {
			t.Errorf("receive %d completed %d times", i, got[i])
		}
	}
}
