package flows

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/sig"
)

// Signature pipelining (mlx5dv_qp_cancel_posted_send_wrs(3)): A is created
// with QPOptions.SigPipelining, B is its peer.

// pipelinedLoopback is NewLoopback with A a signature-pipelining QP of
// sendWR send work requests. Pipelining needs a verbs QP (SQD to RTS goes
// through the kernel), DEVX (the INIT2INIT with drain_sigerr, and cancel's
// QUERY_QP) and a kernel that moves QPs from SQD to RTS; without them the
// test is skipped with the reason.
func pipelinedLoopback(t testing.TB, c *mlx5.Context, objs Objects, sendWR int) *Loopback {
	t.Helper()
	switch {
	case objs == DEVXObjects:
		t.Skip("signature pipelining needs a verbs QP: a DEVX QP has no SQD to RTS")
	case !c.DEVX():
		t.Skip("signature pipelining needs DEVX (its INIT2INIT with drain_sigerr and cancel's QUERY_QP)")
	case !c.Caps().SQD2RTS:
		t.Skip("the kernel does not move QPs from SQD to RTS (no MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS): no signature pipelining")
	}
	opt := mlx5.QPOptions{MaxSendWR: sendWR, MaxSendSGE: 1, MaxRecvWR: sendWR, MaxRecvSGE: 1, MkeyConfigure: true, MaxMkeyEntries: 1}
	pipelined := opt
	pipelined.SigPipelining = true
	return newLoopback(t, c, mlx5.CQOptions{Entries: 4 * sendWR}, pipelined, opt)
}

// sqDrained waits for A's SQ_DRAINED, failing on any other event of A or
// after mustCome.
func sqDrained(t testing.TB, c *mlx5.Context, qp *mlx5.QP) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mustCome)
	defer cancel()
	for {
		ev, err := c.NextEvent(ctx)
		if err != nil {
			t.Fatalf("waiting for SQ_DRAINED: %v", err)
		}
		if ev.QP != qp {
			continue
		}
		if ev.Type != mlx5.EventSQDrained {
			t.Fatalf("event %v on the pipelining QP, want SQ_DRAINED", ev.Type)
		}
		return
	}
}

// pipelineSetup is rdma-core's reg_mr_sig_pipelining_client and _server:
// A's signature mkey over 512 data bytes and their CRC32 in memory (not
// filled in: the CRC is wrong), plain on the wire, checked with
// checkMask; B's, configured without a signature, over 512 bytes that A
// may write. It returns
// them and the 16-byte response buffers of A and B.
func pipelineSetup(t testing.TB, l *Loopback, checkMask sig.Mask) (mA, mB *mlx5.Mkey, respA, respB *mlx5.MR) {
	t.Helper()
	lw := mlx5.AccessLocalWrite
	bufA, mrA := buffer(t, l.PD, 516, lw)
	fill(bufA, 'c')
	_, mrB := buffer(t, l.PD, 512, lw|mlx5.AccessRemoteWrite)
	mA, mB = sigMkey(t, l.PD), sigMkey(t, l.PD) // both with block signature, as rdma-core creates them; B's configured without one
	configure(t, l, l.A, mA, mrA, 516, &sig.BlockAttr{Mem: crc32Domain(), CheckMask: checkMask}, lw)
	configureWR(t, l, l.B, &mlx5.MkeyConfigureWR{WrID: 2, Mkey: mB, Flags: mlx5.SendSignaled, SetAccess: true,
		Access: lw | mlx5.AccessRemoteWrite, List: []mlx5.KLM{{Addr: mrB.Addr(), ByteCount: 512, Mkey: mrB.LKey()}}})
	ra, respA := buffer(t, l.PD, 16, lw)
	copy(ra, "GOOD RESPONSE!!!")
	_, respB = buffer(t, l.PD, 16, lw)
	return mA, mB, respA, respB
}

// pipelineTransaction posts rdma-core's transaction on A: an unsignaled
// 512-byte RDMA WRITE from A's signature mkey into B's mkey, and the
// response, a fenced, signaled 16-byte SEND (wr_id 1); B has a receive
// (wr_id 100) for it.
func pipelineTransaction(t testing.TB, l *Loopback, mA, mB *mlx5.Mkey, respA, respB *mlx5.MR) {
	t.Helper()
	recv(t, l.B, 100, sge(respB, 16))
	b := l.A.Begin()
	b.Add(&mlx5.SendWR{WrID: 2, Opcode: mlx5.OpRDMAWrite, RemoteAddr: 0, RKey: mB.RKey(), SGL: []mlx5.SGE{mkeySGE(mA, 512)}})
	b.Add(&mlx5.SendWR{WrID: 1, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled | mlx5.SendFence, SGL: []mlx5.SGE{sge(respA, 16)}})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

// PipeliningGood is rdma-core's test_mkey_sig_pipelining_good: the
// transaction's WRITE reads a block whose CRC is wrong but not checked
// (check mask 0), so nothing stops: the response completes on A and
// arrives at B, and neither mkey reports an error.
func PipeliningGood(t *testing.T, c *mlx5.Context, objs Objects) {
	l := pipelinedLoopback(t, c, objs, 16)
	mA, mB, respA, respB := pipelineSetup(t, l, 0)
	pipelineTransaction(t, l, mA, mB, respA, respB)
	l.expect(t, ok(l.A, 1, mlx5.WCSend), okLen(l.B, 100, mlx5.WCRecv, 16))
	checkMkey(t, l, mA, sig.MkeyErr{})
	if at, err := l.A.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateRTS {
		t.Errorf("after a good transaction the QP is %v (%v), want RTS", at.State, err)
	}
}

// PipeliningBad is rdma-core's test_mkey_sig_pipelining_bad: the WRITE's
// CRC is checked and wrong. The send queue stops before the fenced
// response: SQ_DRAINED, no completion on either side, A's mkey reports a
// bad guard and B's nothing. Canceling wr_id 1 turns the response into a
// NOP (1 canceled); the response is posted again, the QP goes from SQD to
// RTS, and the canceled one completes as a SEND that sent nothing while
// the new one completes and arrives.
func PipeliningBad(t *testing.T, c *mlx5.Context, objs Objects) {
	l := pipelinedLoopback(t, c, objs, 16)
	mA, mB, respA, respB := pipelineSetup(t, l, sig.MaskCRC32)
	pipelineTransaction(t, l, mA, mB, respA, respB)
	sqDrained(t, c, l.A)
	var wc [1]mlx5.Completion
	if n, err := l.CQ.Poll(wc[:]); n != 0 || err != nil {
		t.Fatalf("after the stop: %d completions %+v, %v; want none", n, wc[:n], err)
	}
	me, err := mA.Check()
	if err != nil || me.Type != sig.MkeyErrBadGuard {
		t.Fatalf("A's mkey: %v, %v; want a bad guard", me, err)
	}
	if at, err := l.A.Query(mlx5.QPAttrState); err != nil || at.State != mlx5.QPStateSQD || at.SQDraining {
		t.Fatalf("the stopped QP: %v (draining %v), %v; want SQD", at.State, at.SQDraining, err)
	}
	n, err := l.A.CancelPostedSends(1)
	if err != nil || n != 1 {
		t.Fatalf("cancel wr_id 1: %d, %v; want 1", n, err)
	}
	post(t, l.A, mlx5.SendWR{WrID: 1, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: []mlx5.SGE{sge(respA, 16)}})
	if err := l.A.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTS, CurState: mlx5.QPStateSQD}, mlx5.QPAttrState|mlx5.QPAttrCurState); err != nil {
		t.Fatalf("SQD to RTS: %v", err)
	}
	// Two completions of wr_id 1 on A (the canceled response, then the new
	// one) and B's one receive: expect pairs wr_ids with QPs, so take A's
	// two in turn.
	got := l.Wait(t, 3)
	var a, b int
	for _, w := range got {
		switch {
		case w.QPN == l.A.QPN() && w.WrID == 1 && w.Status == mlx5.WCSuccess && w.Opcode == mlx5.WCSend:
			a++
		case w.QPN == l.B.QPN() && w.WrID == 100 && w.Status == mlx5.WCSuccess && w.ByteLen == 16:
			b++
		default:
			t.Errorf("unexpected completion %+v", w)
		}
	}
	if a != 2 || b != 1 {
		t.Errorf("completions %+v: want two SENDs of wr_id 1 on A and one receive on B", got)
	}
	l.quiet(t, time.Millisecond)
	checkMkey(t, l, mB, sig.MkeyErr{})
}

// TargetLoad is what TargetPipeline serves.
type TargetLoad struct {
	Reads int // reads to serve
	// CorruptPercent is each protected block's chance, in percent, of a
	// flipped bit (1 when 0).
	CorruptPercent int
	Seed           uint64 // draws the batches, the plain reads and the corruption
}

// TargetStats is what TargetPipeline saw.
type TargetStats struct {
	Reads, Plain, Corrupted int
	// Stops is how many times the send queue stopped, MaxFailed the most
	// failed reads one stop found.
	Stops, MaxFailed int
	// PastFailure counts the work requests posted behind a failed read's
	// WRITE that completed before its stop: those the device ran in the
	// window mlx5dv_qp_cancel_posted_send_wrs(3) allows between a failing
	// WQE and the next fenced one.
	PastFailure int
}

// TargetPipeline is a storage target's read path with pipelining, at
// scale (issue 12's target-side scenario): load.Reads reads, posted in
// batches of 1 to 4 with one doorbell each, the data first and the
// responses of protected reads last. Three in four reads are protected:
// they RDMA WRITE their blocks (T10-DIF with a CRC guard in the target's
// memory, plain on the wire) through one of 8 signature mkeys, and their
// GOOD response SEND is fenced; a block is corrupted with a chance of
// load.CorruptPercent. The others read unprotected memory and respond at
// once, unfenced, right behind their WRITE: work a stop may run past a
// failure. The device may stop anywhere from the failing WRITE to the
// next fenced response, with more than one read failed by then. After
// each stop (SQ_DRAINED), RecoverSigStop finds the failed reads, cancels
// their GOOD responses and resumes; the target then sends a BAD response
// for each. The client must get exactly one response per read, GOOD for
// the clean reads and BAD for the corrupted ones, with the clean reads'
// data intact; every work request (configure, WRITE, response, all
// signaled) must complete exactly once (good, or canceled: a success that
// sent nothing); and clean reads take no extra step (no more stops than
// corrupted reads).
func TargetPipeline(t *testing.T, c *mlx5.Context, objs Objects, load TargetLoad) TargetStats {
	const (
		mkeys   = 8
		blocks  = 4
		stored  = blocks * 520
		window  = mkeys // reads in flight: one per slot
		respLen = 16
		maxRun  = 4 // reads per batch
	)
	reads := load.Reads
	pct := load.CorruptPercent
	if pct == 0 {
		pct = 1
	}
	l := pipelinedLoopback(t, c, objs, 4*window+4)
	// The reads are drawn in order from the seed; the batches from a
	// stream of their own, as the free slots (the timing) allow.
	rng := rand.New(rand.NewPCG(load.Seed, load.Seed^0x5eed))
	batches := rand.New(rand.NewPCG(load.Seed, load.Seed^0xba7c))
	lw := mlx5.AccessLocalWrite
	mem, memMR := buffer(t, l.PD, mkeys*stored, lw)
	plain, plainMR := buffer(t, l.PD, mkeys*blocks*512, lw)
	dst, dstMR := buffer(t, l.PD, mkeys*blocks*512, lw|mlx5.AccessRemoteWrite)
	resp, respMR := buffer(t, l.PD, (reads+1)*respLen, lw)
	inbox, inboxMR := buffer(t, l.PD, (reads+1)*respLen, lw)
	// Each read's block: its reference tags count from its first LBA.
	attrOf := func(lba int) *sig.BlockAttr {
		return &sig.BlockAttr{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
			T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x1234, RefTag: uint32(lba), Flags: sig.T10DIFRefRemap}},
			CheckMask: sig.MaskT10DIFGuard}
	}
	mks := make([]*mlx5.Mkey, mkeys)
	for i := range mks {
		mks[i] = sigMkey(t, l.PD)
	}

	type read struct {
		plain, corrupt, done, answered bool
		bad                            bool  // the client got BAD
		flips                          []int // bits flipped in a protected read's stored blocks
		slot                           int
	}
	rs := make([]read, reads)
	var st TargetStats
	st.Reads = reads
	for i := range rs {
		if rs[i].plain = rng.IntN(4) == 0; rs[i].plain {
			st.Plain++
			continue
		}
		for blk := range blocks {
			if rng.IntN(100) < pct {
				rs[i].flips = append(rs[i].flips, 8*(blk*520+rng.IntN(512))+rng.IntN(8))
			}
		}
		if rs[i].corrupt = len(rs[i].flips) > 0; rs[i].corrupt {
			st.Corrupted++
		}
	}
	wrDone := map[uint64]int{} // completions per wr_id of A
	seq := map[uint64]int{}    // A's work requests in the order posted
	posted := 0
	var sinceStop []uint64 // A's completions since the last stop
	var open []mlx5.SigTransfer
	var openRead []int
	var inflight []int // reads whose response has not completed
	free := make([]int, mkeys)
	for i := range free {
		free[i] = i
	}
	respond := func(i int, good bool) mlx5.SendWR {
		off := uint64(i * respLen)
		word := "GOOD"
		if !good {
			word = "BAD "
		}
		copy(resp[off:], word)
		binary.LittleEndian.PutUint64(resp[off+8:], uint64(i))
		wr := mlx5.SendWR{WrID: uint64(3*i + 2), Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled,
			SGL: []mlx5.SGE{{Addr: respMR.Addr() + off, Length: respLen, LKey: respMR.LKey()}}}
		if !rs[i].plain {
			wr.Flags |= mlx5.SendFence
		}
		return wr
	}
	badResp := func(i int) mlx5.SendWR {
		wr := respond(i, false)
		wr.WrID = uint64(3*reads + i) // its own wr_id
		wr.Flags = mlx5.SendSignaled
		return wr
	}
	deliver := func(ws []mlx5.Completion) {
		for _, w := range ws {
			switch {
			case w.QPN == l.B.QPN():
				i := int(binary.LittleEndian.Uint64(inbox[w.WrID*respLen+8:]))
				if w.Status != mlx5.WCSuccess || w.ByteLen != respLen || i < 0 || i >= reads || rs[i].answered {
					t.Fatalf("client completion %+v (read %d)", w, i)
				}
				rs[i].answered = true
				rs[i].bad = string(inbox[w.WrID*respLen:w.WrID*respLen+4]) == "BAD "
			case w.QPN == l.A.QPN():
				if w.Status != mlx5.WCSuccess {
					t.Fatalf("target completion %+v", w)
				}
				wrDone[w.WrID]++
				sinceStop = append(sinceStop, w.WrID)
			default:
				t.Fatalf("completion of another QP: %+v", w)
			}
		}
	}
	wc := make([]mlx5.Completion, 64)
	poll := func() int {
		n, err := l.CQ.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		deliver(wc[:n])
		return n
	}
	postA := func(b *mlx5.Batch, wr *mlx5.SendWR) {
		seq[wr.WrID] = posted
		posted++
		b.Add(wr)
	}
	// recoverStop handles a stop: the failed reads' GOOD responses are
	// canceled, BAD ones sent.
	recoverStop := func() {
		st.Stops++
		failed, err := l.A.RecoverSigStop(l.CQ, wc, deliver, open)
		if err != nil {
			t.Fatal(err)
		}
		if len(failed) == 0 {
			t.Fatal("a stop without a failed read")
		}
		st.MaxFailed = max(st.MaxFailed, len(failed))
		first := posted
		for _, f := range failed {
			i := openRead[f.Transfer]
			if !rs[i].corrupt || f.Canceled != 1 || f.Err.Type != sig.MkeyErrBadGuard {
				t.Fatalf("read %d (corrupt %v) reported %+v", i, rs[i].corrupt, f)
			}
			first = min(first, seq[uint64(3*i+1)])
		}
		for _, id := range sinceStop {
			if seq[id] > first {
				st.PastFailure++
			}
		}
		sinceStop = sinceStop[:0]
		for _, f := range failed {
			b := l.A.Begin()
			wr := badResp(openRead[f.Transfer])
			postA(b, &wr)
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	next := 0
	progress := time.Now()
	for next < reads || len(inflight) > 0 {
		// Post a batch while slots are free.
		if run := min(1+batches.IntN(maxRun), len(free), reads-next); run > 0 {
			b := l.A.Begin()
			var fenced []mlx5.SendWR
			for range run {
				i, slot := next, free[len(free)-1]
				free = free[:len(free)-1]
				next++
				rs[i].slot = slot
				if err := l.B.PostRecv(uint64(i), []mlx5.SGE{{Addr: inboxMR.Addr() + uint64(i*respLen), Length: respLen, LKey: inboxMR.LKey()}}); err != nil {
					t.Fatal(err)
				}
				inflight = append(inflight, i)
				remote := dstMR.Addr() + uint64(slot*blocks*512)
				if rs[i].plain {
					data := plain[slot*blocks*512 : (slot+1)*blocks*512]
					for j := range data {
						data[j] = byte(i*131 + (j/512*520+j%512)*7)
					}
					postA(b, &mlx5.SendWR{WrID: uint64(3*i + 1), Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: remote,
						RKey: dstMR.RKey(), SGL: []mlx5.SGE{{Addr: plainMR.Addr() + uint64(slot*blocks*512), Length: blocks * 512, LKey: plainMR.LKey()}}})
					gr := respond(i, true)
					postA(b, &gr)
					continue
				}
				data := mem[slot*stored : (slot+1)*stored]
				for j := range data {
					data[j] = byte(i*131 + j*7)
				}
				attr := attrOf(i * blocks)
				if err := engine(t, attr).Generate(sig.DomainMemory, data); err != nil {
					t.Fatal(err)
				}
				for _, f := range rs[i].flips {
					data[f/8] ^= 1 << (f % 8)
				}
				seq[uint64(3*i)] = posted
				posted++
				b.AddMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: uint64(3 * i), Mkey: mks[slot], Flags: mlx5.SendSignaled,
					List: []mlx5.KLM{{Addr: memMR.Addr() + uint64(slot*stored), ByteCount: stored, Mkey: memMR.LKey()}}, Sig: attr})
				postA(b, &mlx5.SendWR{WrID: uint64(3*i + 1), Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: remote,
					RKey: dstMR.RKey(), SGL: []mlx5.SGE{{Addr: 0, Length: blocks * 512, LKey: mks[slot].LKey()}}})
				fenced = append(fenced, respond(i, true))
				open = append(open, mlx5.SigTransfer{Mkey: mks[slot], Response: uint64(3*i + 2)})
				openRead = append(openRead, i)
			}
			for k := range fenced {
				postA(b, &fenced[k])
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		// Poll; a read is over when its response (GOOD, or the canceled
		// GOOD) completed on A.
		if poll() == 0 {
			at, err := l.A.Query(mlx5.QPAttrState)
			switch {
			case err != nil:
				t.Fatal(err)
			case at.State == mlx5.QPStateSQD && !at.SQDraining:
				sqDrained(t, c, l.A)
				recoverStop()
			case time.Since(progress) > mustCome:
				t.Fatalf("no progress for %v: QP %v, %d reads in flight", mustCome, at.State, len(inflight))
			default:
				time.Sleep(20 * time.Microsecond)
			}
		} else {
			progress = time.Now()
		}
		for k := 0; k < len(inflight); {
			i := inflight[k]
			if wrDone[uint64(3*i+2)] != 1 {
				k++
				continue
			}
			rs[i].done = true
			inflight = append(inflight[:k], inflight[k+1:]...)
			if j := slices.Index(openRead, i); j >= 0 {
				open = slices.Delete(open, j, j+1)
				openRead = slices.Delete(openRead, j, j+1)
			}
			if !rs[i].corrupt {
				if got := dst[rs[i].slot*blocks*512 : (rs[i].slot+1)*blocks*512]; !cleanData(got, i) {
					t.Fatalf("read %d (plain %v): the client's data differs", i, rs[i].plain)
				}
			}
			free = append(free, rs[i].slot)
		}
	}
	// Every response reaches the client.
	for deadline := time.Now().Add(mustCome); ; {
		all := true
		for i := range rs {
			if !rs[i].answered || (rs[i].corrupt && wrDone[uint64(3*reads+i)] != 1) {
				all = false
			}
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("responses missing after %v", mustCome)
		}
		poll()
	}
	for i, r := range rs {
		if r.bad != r.corrupt {
			t.Errorf("read %d (corrupt %v): the client got BAD %v", i, r.corrupt, r.bad)
		}
		ids := []uint64{uint64(3 * i), uint64(3*i + 1), uint64(3*i + 2)}
		if r.plain {
			ids = ids[1:]
		}
		for _, id := range ids {
			if wrDone[id] != 1 {
				t.Errorf("read %d: wr_id %d completed %d times", i, id, wrDone[id])
			}
		}
	}
	if want := 3*reads - st.Plain + st.Corrupted; len(wrDone) != want {
		t.Errorf("%d wr_ids completed, want %d", len(wrDone), want)
	}
	if st.Stops > st.Corrupted || (st.Corrupted > 0 && st.Stops == 0) {
		t.Errorf("%d stops for %d corrupted reads", st.Stops, st.Corrupted)
	}
	t.Logf("%d reads (%d plain), %d with a corrupted block, %d stops, at most %d failed reads in one, %d work requests run past a failure",
		reads, st.Plain, st.Corrupted, st.Stops, st.MaxFailed, st.PastFailure)
	return st
}

// cleanData reports whether a clean read's data (blocks of 512 bytes
// without their PI) arrived as read i wrote them.
func cleanData(got []byte, i int) bool {
	for j := range got {
		k := j / 512 * 520
		if got[j] != byte(i*131+(k+j%512)*7) {
			return false
		}
	}
	return true
}
