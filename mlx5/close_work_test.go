package mlx5_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"golang.org/x/sys/unix"
)

// quiet polls cq for d and fails if any completion of QP qpn arrives.
func quiet(t *testing.T, cq *mlx5.CQ, qpn uint32, d time.Duration) {
	t.Helper()
	wc := make([]mlx5.Completion, 16)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
		n, err := cq.Poll(wc)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		for _, c := range wc[:n] {
			if c.QPN == qpn {
				t.Errorf("a completion of the closed QP %#x: %+v", qpn, c)
			}
		}
	}
}

// What QP.Close's doc says becomes of each kind of work outstanding at
// Close (posted, its completion not polled), on the model: work the
// device had not run never completes, the completions of what it ran are
// removed unread, an SRQ's receives the QP had not consumed stay for its
// other QPs, a configure that did not complete leaves its mkey to be
// configured again, a DCI's streams are as sends; and the way to have
// everything complete: ERR, then poll, then Close.
func TestCloseOutstandingWork(t *testing.T) {
	const wait = 50 * time.Millisecond
	t.Run("sends not run", func(t *testing.T) {
		r := newEvRig(t, "cx7", model.Options{})
		cq := r.cq(t, 64, false)
		qp := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
		toInit(t, qp, rcAccess)
		r.toRTR(t, qp, qp.QPN()) // sends wait for RTS
		mem := r.buf.Bytes()
		copy(mem, bytes.Repeat([]byte{0xab}, 64))
		for i := range uint64(3) {
			post(t, qp, r.writeWR(i, r.mr.RKey()))
		}
		qpn := qp.QPN()
		if err := qp.Close(); err != nil {
			t.Fatal(err)
		}
		quiet(t, cq, qpn, wait)
		if !bytes.Equal(mem[8192:8192+64], make([]byte, 64)) {
			t.Error("a send of the closed QP ran")
		}
	})
	t.Run("sends run, completions unread", func(t *testing.T) {
		r := newEvRig(t, "cx7", model.Options{})
		cq := r.cq(t, 64, false)
		qp := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
		if err := qp.Connect(qp.QPN(), r.path); err != nil {
			t.Fatal(err)
		}
		mem := r.buf.Bytes()
		copy(mem, bytes.Repeat([]byte{0xab}, 64))
		for i := range uint64(4) {
			post(t, qp, r.writeWR(i, r.mr.RKey()))
		}
		for end := time.Now().Add(mustCome); !bytes.Equal(mem[8192:8192+64], mem[:64]); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(end) {
				t.Fatal("the writes did not land")
			}
		}
		qpn := qp.QPN()
		if err := qp.Close(); err != nil {
			t.Fatal(err)
		}
		quiet(t, cq, qpn, wait)
		// The CQ serves the next QP (which may get the same number) with
		// its own completions only.
		next := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
		if err := next.Connect(next.QPN(), r.path); err != nil {
			t.Fatal(err)
		}
		post(t, next, r.writeWR(100, r.mr.RKey()))
		if wc := pollN(t, cq, 1, 5*time.Second); wc[0].WrID != 100 || wc[0].Status != mlx5.WCSuccess {
			t.Errorf("the next QP's completion: %+v", wc[0])
		}
	})
	t.Run("receives", func(t *testing.T) {
		r := newEvRig(t, "cx7", model.Options{})
		scq, rcq := r.cq(t, 64, false), r.cq(t, 64, false)
		a, b := r.pair(t, scq, rcq)
		for i := range uint64(4) {
			r.recv(t, b, i)
		}
		// Two are consumed (their completions left unread), two wait.
		post(t, a, r.send(10, mlx5.SendSignaled))
		post(t, a, r.send(11, mlx5.SendSignaled))
		pollN(t, scq, 2, 5*time.Second)
		qpn := b.QPN()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		quiet(t, rcq, qpn, wait)
	})
	t.Run("SRQ receives", func(t *testing.T) {
		r := newEvRig(t, "cx7", model.Options{})
		cq := r.cq(t, 64, false)
		srq, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 16, MaxSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		q1 := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, SRQ: srq})
		q2 := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, SRQ: srq})
		for _, q := range []*mlx5.QP{q1, q2} {
			if err := q.Connect(q.QPN(), r.path); err != nil {
				t.Fatal(err)
			}
		}
		for i := range uint64(4) {
			if err := srq.PostRecv(200+i, []mlx5.SGE{{Addr: r.mr.Addr() + 4096 + 64*i, Length: 64, LKey: r.mr.LKey()}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q1.Close(); err != nil {
			t.Fatal(err)
		}
		for i := range uint64(4) {
			post(t, q2, r.send(10+i, 0))
		}
		got := map[uint64]bool{}
		for _, c := range pollN(t, cq, 4, 5*time.Second) {
			if c.QPN != q2.QPN() || c.Opcode != mlx5.WCRecv || c.Status != mlx5.WCSuccess {
				t.Errorf("completion %+v, want q2's receives", c)
			}
			got[c.WrID] = true
		}
		for i := range uint64(4) {
			if !got[200+i] {
				t.Errorf("SRQ receive %d did not survive the other QP's Close: %v", 200+i, got)
			}
		}
		if err := q2.Close(); err != nil {
			t.Fatal(err)
		}
		if err := srq.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("configures", func(t *testing.T) {
		r := newEvRig(t, "cx7", model.Options{})
		cq := r.cq(t, 64, false)
		m, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1})
		if err != nil {
			t.Fatal(err)
		}
		conf := func(id uint64) *mlx5.MkeyConfigureWR {
			return &mlx5.MkeyConfigureWR{WrID: id, Mkey: m, Flags: mlx5.SendSignaled, SetAccess: true, Access: mlx5.AccessLocalWrite,
				List: []mlx5.KLM{{Addr: r.mr.Addr(), ByteCount: 512, Mkey: r.mr.LKey()}}}
		}
		qp := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, MkeyConfigure: true})
		toInit(t, qp, rcAccess)
		r.toRTR(t, qp, qp.QPN()) // the configure waits for RTS
		if err := qp.PostMkeyConfigure(conf(1)); err != nil {
			t.Fatal(err)
		}
		qpn := qp.QPN()
		if err := qp.Close(); err != nil {
			t.Fatal(err)
		}
		quiet(t, cq, qpn, wait)
		// Configured again on another QP, the mkey works.
		q2 := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, MkeyConfigure: true})
		if err := q2.Connect(q2.QPN(), r.path); err != nil {
			t.Fatal(err)
		}
		if err := q2.PostMkeyConfigure(conf(2)); err != nil {
			t.Fatal(err)
		}
		if wc := pollN(t, cq, 1, 5*time.Second); wc[0].WrID != 2 || wc[0].Status != mlx5.WCSuccess || wc[0].Opcode != mlx5.WCUMR {
			t.Errorf("the configure again: %+v", wc[0])
		}
	})
	t.Run("Mkey.Close under a configure", func(t *testing.T) {
		// Mkey.Close waits for no work: the configure fails when it runs.
		r := newEvRig(t, "cx7", model.Options{})
		cq := r.cq(t, 64, false)
		m, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1})
		if err != nil {
			t.Fatal(err)
		}
		qp := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, MkeyConfigure: true})
		toInit(t, qp, rcAccess)
		r.toRTR(t, qp, qp.QPN())
		if err := qp.PostMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: 7, Mkey: m, Flags: mlx5.SendSignaled,
			List: []mlx5.KLM{{Addr: r.mr.Addr(), ByteCount: 512, Mkey: r.mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		toRTS(t, qp)
		if wc := pollN(t, cq, 1, 5*time.Second); wc[0].WrID != 7 || wc[0].Status != mlx5.WCLocProtErr || wc[0].Opcode != mlx5.WCUMR {
			t.Errorf("the configure of the closed mkey: %+v, want WCLocProtErr", wc[0])
		}
		if a, err := qp.Query(mlx5.QPAttrState); err != nil || a.State != mlx5.QPStateErr {
			t.Errorf("the QP after the failed configure: %v, %v, want ERR", a.State, err)
		}
	})
	t.Run("DC streams", func(t *testing.T) {
		r := newDCRig(t, "cx7", model.Options{})
		const key = 0xc105e
		dct := r.dct(t, key, mlx5.AccessRemoteWrite)
		dci := r.dci(t, mlx5.QPOptions{DCIStreams: &mlx5.DCIStreams{LogConcurrent: 2, LogErrored: 1}})
		r.recvs(t, 8, 0x8000, 100)
		to := func(wr mlx5.SendWR) mlx5.SendWR {
			wr.AH, wr.RemoteQPN, wr.DCAccessKey = r.ah, dct.QPN(), key
			wr.SGL = []mlx5.SGE{{Addr: r.addr(0), Length: 32, LKey: r.mr.LKey()}}
			return wr
		}
		// Stream 1 errs (a bad rkey) and flushes its next; streams 2
		// and 3 send. Nothing is polled.
		wrs := []mlx5.SendWR{
			to(mlx5.SendWR{WrID: 1, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: r.addr(0x4000), RKey: r.mr.RKey() ^ 0xff, StreamID: 1}),
			to(mlx5.SendWR{WrID: 2, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, StreamID: 2}),
			to(mlx5.SendWR{WrID: 3, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, StreamID: 1}),
			to(mlx5.SendWR{WrID: 4, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, StreamID: 3}),
		}
		if err := dci.PostSendList(wrs); err != nil {
			t.Fatal(err)
		}
		time.Sleep(wait) // the model runs them
		qpn := dci.QPN()
		if err := dci.Close(); err != nil {
			t.Fatal(err)
		}
		wc := make([]mlx5.Completion, 16)
		recvs := 0
		for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
			n, err := r.cq.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range wc[:n] {
				switch c.QPN {
				case qpn:
					t.Errorf("a completion of the closed DCI: %+v", c)
				case dct.QPN():
					recvs++ // the DCT's: not the DCI's to remove
				}
			}
		}
		if recvs != 2 {
			t.Errorf("%d receive completions of the DCT, want 2 (streams 2 and 3)", recvs)
		}
	})
	t.Run("ERR then Close", func(t *testing.T) {
		// The recipe of QP.Close's doc: every work request completes.
		r := newEvRig(t, "cx7", model.Options{})
		cq := r.cq(t, 64, false)
		qp := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq})
		toInit(t, qp, rcAccess)
		r.toRTR(t, qp, qp.QPN())
		post(t, qp, r.writeWR(1, r.mr.RKey()))
		post(t, qp, r.send(2, 0)) // unsignaled: flushed all the same
		r.recv(t, qp, 3)
		r.recv(t, qp, 4)
		modify(t, qp, mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState)
		got := map[uint64]mlx5.WCStatus{}
		for _, c := range pollN(t, cq, 4, 5*time.Second) {
			got[c.WrID] = c.Status
		}
		for id := uint64(1); id <= 4; id++ {
			if s, ok := got[id]; !ok || s != mlx5.WCWRFlushErr {
				t.Errorf("wr_id %d: %v (%v), want a flush", id, s, ok)
			}
		}
		if err := qp.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("SRQ.Close and CQ.Close", func(t *testing.T) {
		// An SRQ's and a CQ's Close wait for no work: they refuse while
		// a QP uses them (EBUSY); an SRQ's receives no QP consumed go
		// with it, never completed.
		r := newEvRig(t, "cx7", model.Options{})
		cq := r.cq(t, 64, false)
		srq, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 16, MaxSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		qp := r.qp(t, mlx5.QPOptions{SendCQ: cq, RecvCQ: cq, SRQ: srq})
		for i := range uint64(3) {
			if err := srq.PostRecv(i, []mlx5.SGE{{Addr: r.mr.Addr() + 4096, Length: 64, LKey: r.mr.LKey()}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := srq.Close(); !errors.Is(err, unix.EBUSY) {
			t.Errorf("SRQ.Close with a QP on it: %v, want EBUSY", err)
		}
		if err := cq.Close(); !errors.Is(err, unix.EBUSY) {
			t.Errorf("CQ.Close with a QP on it: %v, want EBUSY", err)
		}
		qpn := qp.QPN()
		if err := qp.Close(); err != nil {
			t.Fatal(err)
		}
		if err := srq.Close(); err != nil {
			t.Fatal(err)
		}
		quiet(t, cq, qpn, wait)
		if err := cq.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
