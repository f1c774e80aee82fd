package mlx5

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/doorbell"
)

// fastPair is two QPs alike in memory: fast posts through Add (its fast
// lane where a work request takes it), slow with the fast lane off (the
// general path alone).
type fastPair struct{ fast, slow *QP }

func newFastPair(tb testing.TB, typ QPType, maxMsg uint32) fastPair {
	tb.Helper()
	c := sbsContext()
	var p fastPair
	for i, q := range []**QP{&p.fast, &p.slow} {
		cq := benchCQ(tb, c, 255, 0x401+uint32(i))
		o := QPOptions{Type: typ, PD: &PD{}, SendCQ: cq, RecvCQ: cq, MaxSendWR: 64, MaxSendSGE: 4, MaxInlineData: 64,
			MaxRecvWR: 1, MaxRecvSGE: 1}
		*q = benchQP(tb, c, o, 0x1a2)
		(*q).sq.maxMsg = maxMsg
		(*q).initFast()
	}
	p.slow.fast = 0
	if p.fast.fast == 0 {
		tb.Fatalf("a %v QP takes no opcode through the fast lane", typ)
	}
	return p
}

// randomSendWR is a work request of every shape Add meets: valid and
// invalid opcodes (some past numOpcodes, one that is a fast opcode
// modulo 64), every flag, 0 to 5 SGEs of lengths around the limits,
// inline data, a stream id.
func randomSendWR(r *rand.Rand, wrID uint64) SendWR {
	ops := []Opcode{OpSend, OpSendImm, OpSendInv, OpRDMAWrite, OpRDMAWriteImm, OpRDMARead,
		OpAtomicCAS, OpAtomicFAA, OpLocalInv, OpNOP, 0, numOpcodes, 64 + OpSend, 64 + OpRDMAWrite, 128 + OpRDMARead, 255}
	wr := SendWR{WrID: wrID, Opcode: ops[r.IntN(len(ops))], Flags: SendFlags(r.IntN(32)),
		Imm: r.Uint32(), InvalidateKey: r.Uint32(), RemoteAddr: r.Uint64(), RKey: r.Uint32(),
		Compare: r.Uint64(), SwapAdd: r.Uint64()}
	if r.IntN(8) > 0 { // mostly the common shapes
		wr.Opcode = ops[r.IntN(6)]
	}
	lengths := []uint32{0, 1, 8, 4096, 1 << 20, 1<<20 + 1, 1<<31 - 1, 1 << 31, 1<<32 - 1}
	n := r.IntN(6)
	if r.IntN(2) == 0 {
		n = 1
	}
	for range n {
		l := lengths[r.IntN(len(lengths))]
		if r.IntN(4) > 0 {
			l = uint32(r.IntN(8192))
		}
		wr.SGL = append(wr.SGL, SGE{Addr: r.Uint64(), Length: l, LKey: r.Uint32()})
	}
	if r.IntN(20) == 0 {
		wr.Inline = [][]byte{make([]byte, r.IntN(80))}
	}
	if r.IntN(20) == 0 {
		wr.StreamID = uint16(r.IntN(4))
	}
	return wr
}

// errText is err's message, or "<nil>".
func errText(err error) string { return fmt.Sprint(err) }

// TestFastPathSameWQEs posts the same random batches on two QPs, one
// through Add's fast lane (and PostSend's) and one through the general
// path only, and
// requires the same outcome of each: the same errors, the same ring,
// bookkeeping, producer counter and small fence, the same doorbell
// record and register bytes. The rings are small (64 WQEBBs) so that
// batches run out of room and WQEs cross the ring's end; half the time
// the QPs' maximum message is 1 MiB.
func TestFastPathSameWQEs(t *testing.T) {
	for _, typ := range []QPType{QPTypeRC, QPTypeUC} {
		for _, maxMsg := range []uint32{1 << 30, 1 << 20} {
			t.Run(fmt.Sprintf("%v/maxmsg%d", typ, maxMsg), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(typ), uint64(maxMsg)))
				p := newFastPair(t, typ, maxMsg)
				const batches = 3000
				posted := p.run(t, r, batches)
				// Most batches hold a bad work request; enough must post
				// for the comparison to mean something.
				if posted < batches/10 {
					t.Fatalf("%d of %d batches posted", posted, batches)
				}
				t.Logf("%d of %d batches posted", posted, batches)
			})
		}
	}
}

// FuzzFastPath is TestFastPathSameWQEs's comparison for batches drawn
// from the fuzzer's seeds.
func FuzzFastPath(f *testing.F) {
	f.Add(uint64(1), uint64(2), false, false)
	f.Add(uint64(17), uint64(4), true, true)
	f.Fuzz(func(t *testing.T, s1, s2 uint64, uc, smallMsg bool) {
		typ, maxMsg := QPTypeRC, uint32(1<<30)
		if uc {
			typ = QPTypeUC
		}
		if smallMsg {
			maxMsg = 1 << 20
		}
		p := newFastPair(t, typ, maxMsg)
		p.run(t, rand.New(rand.NewPCG(s1, s2)), 200)
	})
}

// run posts the same random batches on both QPs and compares them after
// each; it returns how many batches posted.
func (p fastPair) run(t *testing.T, r *rand.Rand, batches int) (posted int) {
	t.Helper()
	var wrID uint64
	for batch := range batches {
		wrs := make([]SendWR, 1+r.IntN(12))
		if r.IntN(2) == 0 {
			wrs = wrs[:1]
		}
		for i := range wrs {
			wrID++
			wrs[i] = randomSendWR(r, wrID)
		}
		// Each QP posts its own copy: the outcome must not depend on
		// what the other wrote.
		commit := r.IntN(8) > 0
		// A single work request goes half the time through PostSend on
		// the fast QP (its lane without a batch), and always as a batch
		// of one on the general path's.
		postSend := commit && len(wrs) == 1 && r.IntN(2) == 0
		var errs [2]string
		for i, qp := range []*QP{p.fast, p.slow} {
			if postSend && i == 0 {
				wr := wrs[0]
				errs[i] = errText(qp.PostSend(&wr))
				continue
			}
			b := qp.Begin()
			for k := range wrs {
				wr := wrs[k]
				b.Add(&wr)
			}
			if commit {
				errs[i] = errText(b.Commit())
			} else {
				b.Abort()
			}
		}
		if errs[0] != errs[1] {
			t.Fatalf("batch %d: the fast lane's Commit says %s, the general path's %s", batch, errs[0], errs[1])
		}
		if commit && errs[0] == "<nil>" {
			posted++
		}
		p.compare(t, batch)
		// Complete everything now and then, so that the room changes
		// from batch to batch.
		if r.IntN(3) == 0 {
			for _, qp := range []*QP{p.fast, p.slow} {
				qp.sq.tail.Store(uint32(qp.sq.pi))
			}
		}
	}
	return posted
}

// compare fails t if the pair's send queues differ.
func (p fastPair) compare(t *testing.T, batch int) {
	t.Helper()
	f, s := p.fast, p.slow
	if f.sq.pi != s.sq.pi || f.fmCache != s.fmCache {
		t.Fatalf("batch %d: fast lane at counter %d, small fence %v; general path at %d, %v", batch, f.sq.pi, f.fmCache, s.sq.pi, s.fmCache)
	}
	if !bytes.Equal(f.sq.ring, s.sq.ring) {
		for i := range f.sq.ring {
			if f.sq.ring[i] != s.sq.ring[i] {
				t.Fatalf("batch %d: ring byte %d (WQEBB %d): fast lane %#x, general path %#x", batch, i, i/64, f.sq.ring[i], s.sq.ring[i])
			}
		}
	}
	for i := range f.sq.slots {
		if f.sq.slots[i] != s.sq.slots[i] {
			t.Fatalf("batch %d: slot %d: fast lane %+v, general path %+v", batch, i, f.sq.slots[i], s.sq.slots[i])
		}
	}
	if f.dbSQ.Half() != s.dbSQ.Half() {
		t.Fatalf("batch %d: next BlueFlame half %d; general path %d", batch, f.dbSQ.Half(), s.dbSQ.Half())
	}
	if fr, sr := registerOf(f), registerOf(s); !bytes.Equal(fr, sr) {
		t.Fatalf("batch %d: doorbell record and BlueFlame register: fast lane\n%x\ngeneral path\n%x", batch, fr, sr)
	}
}

// registerOf is the doorbell record and the BlueFlame register (both
// halves) of a benchQP, which lay them out after the send queue's ring:
// the record at its end, the UAR page 4096 bytes on.
func registerOf(qp *QP) []byte {
	end := unsafe.Add(unsafe.Pointer(unsafe.SliceData(qp.sq.ring)), len(qp.sq.ring))
	rec := unsafe.Slice((*byte)(end), doorbell.RecordSize)
	reg := unsafe.Slice((*byte)(unsafe.Add(end, 4096+doorbell.BlueFlameOffset)), 2*benchBFSize)
	return append(append([]byte(nil), rec...), reg...)
}
