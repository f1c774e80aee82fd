package mlx5

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/wqe"
)

// fastPair is two QPs alike in memory: fast posts through Add, which
// takes the work requests post writes (sendq.go) there, slow with post
// off (sendQueue.heads and anyHeads all 0), so that every work request goes the general way,
// through wqe.BuildSend, the encoder the oracle's bytes check
// (wqe/datapath_oracle_test.go, wqe/dc_oracle_test.go).
type fastPair struct{ fast, slow *QP }

func newFastPair(tb testing.TB, typ QPType, maxMsg uint32) fastPair {
	tb.Helper()
	c := sbsContext()
	var p fastPair
	for i, q := range []**QP{&p.fast, &p.slow} {
		cq := benchCQ(tb, c, 255, 0x401+uint32(i))
		o := QPOptions{Type: typ, PD: &PD{c: c}, SendCQ: cq, RecvCQ: cq, MaxSendWR: 64, MaxSendSGE: 4, MaxInlineData: 64,
			MaxRecvWR: 1, MaxRecvSGE: 1}
		if typ == QPTypeDCI {
			o.DCIStreams = &DCIStreams{LogConcurrent: 2, LogErrored: 1}
		}
		*q = benchQP(tb, c, o, 0x1a2)
		(*q).sq.maxMsg = maxMsg
		(*q).sq.setPost((*q).typ, (*q).qpn)
	}
	p.slow.sq.heads, p.slow.sq.anyHeads = [16]wqe.CtrlHead{}, [16]wqe.CtrlHead{}
	if p.fast.sq.anyHeads == ([16]wqe.CtrlHead{}) {
		tb.Fatalf("post takes no opcode on a %v QP", typ)
	}
	return p
}

// address gives wr, a work request for a UD QP (ud) or a DCI of context
// c, a destination: mostly a good one (an AH of c), sometimes none, an AH of
// another context or a closed one, a DCT or QP number over 24 bits, a
// stream past the DCI's 4.
func address(r *rand.Rand, c *Context, wr *SendWR, ud bool) {
	av := wqe.IBAV(&wqe.AHAttr{DLID: uint16(r.Uint32()), SL: uint8(r.IntN(16)), SrcPathBits: uint8(r.IntN(128)),
		StaticRate: uint8(r.IntN(20)), IsGlobal: r.IntN(2) == 0, DGID: [16]byte{0xfe, 0x80, 15: uint8(r.Uint32())},
		FlowLabel: r.Uint32() & 0xfffff, SGIDIndex: uint8(r.IntN(4)), HopLimit: uint8(r.Uint32()), TClass: uint8(r.Uint32())})
	wr.AH = testAH(&PD{c: c}, av)
	wr.RemoteQPN, wr.QKey, wr.DCAccessKey = r.Uint32()&0xffffff, r.Uint32(), r.Uint64()
	wr.StreamID = uint16(r.IntN(4))
	if ud && r.IntN(4) > 0 {
		// Mostly the two operations a UD QP takes.
		wr.Opcode = []Opcode{OpSend, OpSendImm}[r.IntN(2)]
	}
	switch r.IntN(40) {
	case 0:
		wr.AH = nil
	case 1:
		wr.AH.pd = &PD{c: &Context{}}
	case 2:
		wr.AH.dead.Store(true)
	case 3:
		wr.RemoteQPN = 1<<24 | r.Uint32()
	case 4:
		wr.StreamID = 4 + uint16(r.IntN(4))
	}
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

// TestPostSameWQEs posts the same random batches on two QPs, one through
// Add, where post writes the work requests it takes (and PostSend), and
// one through the general path only (wqe.BuildSend), and requires the same
// outcome of each: the same errors, the same ring, bookkeeping, producer
// counter and small fence, the same doorbell record and register bytes.
// The rings are small (64 WQEBBs) so that batches run out of room and
// WQEs cross the ring's end; half the time the QPs' maximum message is 1
// MiB. On a UD QP and a DCI (4 streams) each work request gets an
// address, now and then a bad one.
func TestPostSameWQEs(t *testing.T) {
	for _, typ := range []QPType{QPTypeRC, QPTypeUC, QPTypeUD, QPTypeDCI} {
		for _, maxMsg := range []uint32{1 << 30, 1 << 20} {
			t.Run(fmt.Sprintf("%v/maxmsg%d", typ, maxMsg), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(typ), uint64(maxMsg)))
				p := newFastPair(t, typ, maxMsg)
				const batches = 3000
				posted := p.run(t, r, batches)
				// Most batches hold a bad work request; enough must post
				// for the comparison to mean something.
				if posted < batches/20 {
					t.Fatalf("%d of %d batches posted", posted, batches)
				}
				t.Logf("%d of %d batches posted", posted, batches)
			})
		}
	}
}

// FuzzPost is TestPostSameWQEs's comparison for batches drawn from the
// fuzzer's seeds.
func FuzzPost(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint8(QPTypeRC), false)
	f.Add(uint64(17), uint64(4), uint8(QPTypeUC), true)
	f.Add(uint64(5), uint64(9), uint8(QPTypeDCI), false)
	f.Add(uint64(3), uint64(8), uint8(QPTypeUD), false)
	f.Fuzz(func(t *testing.T, s1, s2 uint64, typ uint8, smallMsg bool) {
		maxMsg := uint32(1 << 30)
		if smallMsg {
			maxMsg = 1 << 20
		}
		p := newFastPair(t, []QPType{QPTypeRC, QPTypeUC, QPTypeUD, QPTypeDCI}[typ%4], maxMsg)
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
			if t := p.fast.typ; t == QPTypeUD || t == QPTypeDCI {
				address(r, p.fast.c, &wrs[i], t == QPTypeUD)
			}
		}
		// Each QP posts its own copy: the outcome must not depend on
		// what the other wrote.
		commit := r.IntN(8) > 0
		// A single work request goes half the time through PostSend on
		// the fast QP (post without a batch), and always as a batch of
		// one on the general path's.
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
			t.Fatalf("batch %d: Commit says %s with post, %s on the general path", batch, errs[0], errs[1])
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
	if f.sq.pi != s.sq.pi || f.sq.fm != s.sq.fm {
		t.Fatalf("batch %d: with post at counter %d, small fence %v; general path at %d, %v", batch, f.sq.pi, f.sq.fm, s.sq.pi, s.sq.fm)
	}
	if !bytes.Equal(f.sq.ring, s.sq.ring) {
		for i := range f.sq.ring {
			if f.sq.ring[i] != s.sq.ring[i] {
				t.Fatalf("batch %d: ring byte %d (WQEBB %d): with post %#x, general path %#x", batch, i, i/64, f.sq.ring[i], s.sq.ring[i])
			}
		}
	}
	for i := range f.sq.slots {
		if f.sq.slots[i] != s.sq.slots[i] {
			t.Fatalf("batch %d: slot %d: with post %+v, general path %+v", batch, i, f.sq.slots[i], s.sq.slots[i])
		}
	}
	if f.sq.bell.Half() != s.sq.bell.Half() {
		t.Fatalf("batch %d: next BlueFlame half %d; general path %d", batch, f.sq.bell.Half(), s.sq.bell.Half())
	}
	if ds := f.sq.streams; ds != nil && !slices.Equal(ds.stream, s.sq.streams.stream) {
		t.Fatalf("batch %d: streams %v with post; general path %v", batch, ds.stream, s.sq.streams.stream)
	}
	if fr, sr := registerOf(f), registerOf(s); !bytes.Equal(fr, sr) {
		t.Fatalf("batch %d: doorbell record and BlueFlame register: with post\n%x\ngeneral path\n%x", batch, fr, sr)
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
