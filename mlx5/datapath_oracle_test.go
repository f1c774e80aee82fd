package mlx5

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/doorbell"
	dp "github.com/mlx5go/mlx5go/internal/oracle/datapath"
	"github.com/mlx5go/mlx5go/wqe"
)

// ibvOpcode maps enum ibv_wr_opcode to the Opcode a user of mlx5 posts.
var ibvOpcode = map[int]Opcode{
	dp.IBVWRRDMAWrite: OpRDMAWrite, dp.IBVWRRDMAWriteImm: OpRDMAWriteImm, dp.IBVWRSend: OpSend,
	dp.IBVWRSendImm: OpSendImm, dp.IBVWRRDMARead: OpRDMARead, dp.IBVWRAtomicCS: OpAtomicCAS,
	dp.IBVWRAtomicFA: OpAtomicFAA, dp.IBVWRLocalInv: OpLocalInv, dp.IBVWRSendInv: OpSendInv,
}

// sendWR turns a recorded work request into mlx5's.
func sendWR(t *testing.T, api string, w *dp.WR) SendWR {
	op, ok := ibvOpcode[w.OpcodeValue]
	if !ok {
		op = Opcode(200) // an opcode libmlx5 refuses: so must mlx5
	}
	wr := SendWR{WrID: w.WrID, Opcode: op, Flags: SendFlags(w.SendFlags)}
	if w.ImmData != "" {
		wr.Imm = uint32(dp.Num(t, w.ImmData))
	}
	if w.InvalidateRKey != "" {
		wr.InvalidateKey = uint32(dp.Num(t, w.InvalidateRKey))
	}
	if r := w.RDMA; r != nil {
		wr.RemoteAddr, wr.RKey = dp.Num(t, r.RemoteAddr), uint32(dp.Num(t, r.RKey))
	}
	if a := w.Atomic; a != nil {
		wr.RemoteAddr, wr.RKey = dp.Num(t, a.RemoteAddr), uint32(dp.Num(t, a.RKey))
		if op == OpAtomicCAS {
			wr.Compare, wr.SwapAdd = dp.Num(t, a.CompareAdd), dp.Num(t, a.Swap)
		} else {
			wr.SwapAdd = dp.Num(t, a.CompareAdd)
		}
	}
	switch {
	case api == "ibv_post_send" && wr.Flags&SendInline != 0 && len(w.SGList) > 0:
		for _, g := range w.SGList { // ibv_post_send copies the SGEs' bytes
			wr.Inline = append(wr.Inline, dp.Unhex(t, *g.BytesHex))
		}
	case w.Setter == "ibv_wr_set_inline_data" || w.Setter == "ibv_wr_set_inline_data_list":
		for _, d := range w.InlineData {
			wr.Inline = append(wr.Inline, dp.Unhex(t, d.Hex))
		}
	default:
		for _, g := range w.SGList {
			wr.SGL = append(wr.SGL, SGE{Addr: dp.Num(t, g.Addr), Length: g.Length, LKey: uint32(dp.Num(t, g.Lkey))})
		}
	}
	if u := w.UD; u != nil {
		a := wqe.AHAttr{DLID: u.AH.DLID, SL: u.AH.SL, SrcPathBits: u.AH.SrcPathBits, StaticRate: u.AH.StaticRate, IsGlobal: u.AH.IsGlobal != 0}
		if g := u.AH.GRH; g != nil {
			copy(a.DGID[:], dp.Unhex(t, g.DGID))
			a.FlowLabel, a.SGIDIndex, a.HopLimit, a.TClass = g.FlowLabel, g.SGIDIndex, g.HopLimit, g.TrafficClass
		}
		wr.AH = testAH(oraclePD, wqe.IBAV(&a))
		wr.RemoteQPN, wr.QKey = uint32(dp.Num(t, u.RemoteQPN)), uint32(dp.Num(t, u.RemoteQKey))
	}
	return wr
}

const junk = 0xee // the rings before a case: every byte libmlx5 shows must be written

// oraclePD is the PD of the oracle's AHs, of the context of its QPs.
var oraclePD = &PD{c: &Context{}}

// oracleQP is a QP of the record's geometry in memory only, its rings
// full of junk, its counters where the case starts.
func oracleQP(t *testing.T, r *dp.Record) (*QP, []byte) {
	qp, uar := testQP(t, oraclePD.c, r.QP.SQWQECnt)
	qp.qpn, qp.sq.maxWQE = r.QP.QPN, r.QP.SQWQECnt
	qp.sq.maxSGE, qp.sq.maxInline = r.QP.SendCap.MaxSendSGE, r.QP.SendCap.MaxInlineData
	if r.QP.Type == "IBV_QPT_UD" {
		qp.typ = QPTypeUD
	}
	qp.sq.setPost(qp.typ, qp.qpn) // the work requests post takes go through it
	qp.sq.pi = uint16(r.Input.SQStart)
	qp.sq.tail.Store(uint32(qp.sq.pi)) // the harness completed what it posted to get there
	for i := range qp.sq.ring {
		qp.sq.ring[i] = junk
	}
	if r.QP.RQWQECnt > 0 {
		qp.rq.ring = bytes.Repeat([]byte{junk}, r.QP.RQWQECnt*r.QP.RQStride)
		qp.rq.stride, qp.rq.maxSGE = r.QP.RQStride, r.QP.RQStride/16
		qp.rq.wrID = make([]uint64, r.QP.RQWQECnt)
		qp.rq.pi = uint16(r.Input.RQStart)
		qp.rq.tail.Store(uint32(qp.rq.pi))
		var err error
		if qp.dbRQ, err = doorbell.NewRQ(make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
	}
	if r.QP.BFSize != qp.sq.bell.BlueFlameSize() {
		t.Fatalf("%s: BlueFlame size %d, the test QP's %d", r.Case, r.QP.BFSize, qp.sq.bell.BlueFlameSize())
	}
	return qp, uar
}

// TestOracleDatapathPost posts every record of the oracle's datapath
// family, and the datapath records of its wrap family, through the QP's
// batch (each ibv_wr_start..ibv_wr_complete is a Begin..Commit),
// PostSendList (each ibv_post_send) and PostRecvList (each ibv_post_recv),
// and compares what the driver leaves with what libmlx5 44.0 left: every
// WQEBB of the send and receive queues, the doorbell record's counters and
// each post's doorbell or BlueFlame write. Where libmlx5 fails a post, the
// same work request must fail with the matching error. The intended
// differences: a list (ibv_post_send, ibv_post_recv) with a bad work
// request posts nothing here, where libmlx5 posts the ones before it; and a
// failed batch leaves no byte behind, where libmlx5 leaves the WQEs it
// built past the counter.
func TestOracleDatapathPost(t *testing.T) {
	for path, want := range map[string][3]int{ // exact, errors as libmlx5, lists refused whole
		"../wqe/testdata/datapath.jsonl": {138, 7, 2},
		"../wqe/testdata/wrap.jsonl":     {38, 0, 0},
	} {
		var got [3]int
		dp.Read(t, path, func(r *dp.Record) {
			got[datapathCase(t, r)]++
		})
		t.Logf("%s: %d byte-exact, %d failing as libmlx5, %d lists refused whole", path, got[0], got[1], got[2])
		if got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}

// datapathCase replays one record: 0 byte-exact, 1 failed as libmlx5
// did, 2 a list refused whole (libmlx5 posted part of it).
func datapathCase(t *testing.T, r *dp.Record) int {
	qp, uar := oracleQP(t, r)
	kind := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: %s", r.Case, fmt.Sprintf(format, args...))
	}
	for p, post := range r.Input.Posts {
		want := &r.Result.Posts[p]
		half := doorbell.BlueFlameOffset + qp.sq.bell.Half()
		clear(uar[doorbell.BlueFlameOffset : doorbell.BlueFlameOffset+2*qp.sq.bell.BlueFlameSize()])
		sqBefore, rqBefore := qp.sq.pi, qp.rq.pi
		var err error
		switch post.API {
		case "ibv_post_recv":
			wrs := make([]RecvWR, len(post.WRs))
			for k, w := range post.WRs {
				wrs[k].WrID = w.WrID
				for _, g := range w.SGList {
					wrs[k].SGL = append(wrs[k].SGL, SGE{Addr: dp.Num(t, g.Addr), Length: g.Length, LKey: uint32(dp.Num(t, g.Lkey))})
				}
			}
			err = qp.PostRecvList(wrs)
		case "ibv_post_send":
			wrs := make([]SendWR, len(post.WRs))
			for k := range post.WRs {
				wrs[k] = sendWR(t, post.API, &post.WRs[k])
			}
			err = qp.PostSendList(wrs)
		default:
			b := qp.Begin()
			for k := range post.WRs {
				wr := sendWR(t, post.API, &post.WRs[k])
				b.Add(&wr)
			}
			err = b.Commit()
		}
		if want.Ret == 0 {
			if err != nil {
				fail("post %d: %v; libmlx5 posted it", p, err)
				continue
			}
		} else {
			// The failure libmlx5 had, on the same work request.
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrQueueFull) {
				fail("post %d: libmlx5 failed (errno %d), mlx5: %v", p, want.Ret, err)
			}
			if want.BadWR != nil && len(post.WRs) > 1 && !strings.Contains(err.Error(), fmt.Sprintf("work request %d ", *want.BadWR)) {
				fail("post %d: libmlx5's bad_wr is %d, mlx5's error: %v", p, *want.BadWR, err)
			}
			if want.BadWR != nil && *want.BadWR > 0 && post.API != "ibv_wr" {
				kind = 2
			} else if kind == 0 {
				kind = 1
			}
			// Nothing posted, nothing rung, no byte left.
			if qp.sq.pi != sqBefore || qp.rq.pi != rqBefore || !bytes.Equal(uar[half:half+qp.sq.bell.BlueFlameSize()], make([]byte, qp.sq.bell.BlueFlameSize())) {
				fail("post %d: the failed post moved a counter or rang", p)
			}
			for i := range qp.sq.slots {
				bb := qp.sq.ring.Slot(uint16(i))
				if bytes.Count(bb, []byte{junk}) != len(bb) && bytes.Count(bb, []byte{0}) != len(bb) && !inCase(r, i) {
					fail("post %d: ring index %d holds bytes of the failed post: %x", p, i, bb)
				}
			}
			continue
		}
		if got := int(qp.sq.pi); got != want.SQPIAfter || got != int(qp.sq.bell.Counter()) && post.API != "ibv_post_recv" {
			fail("post %d: SQ counter %d (record %d), libmlx5 %d", p, got, qp.sq.bell.Counter(), want.SQPIAfter)
		}
		if post.API == "ibv_post_recv" {
			if got := int(qp.rq.pi); got != want.RQPIAfter || got != int(qp.dbRQ.Counter()) {
				fail("post %d: RQ counter %d (record %d), libmlx5 %d", p, got, qp.dbRQ.Counter(), want.RQPIAfter)
			}
		}
		// The post's one write to the UAR.
		checkUARWrite(t, fail, p, uar[half:half+qp.sq.bell.BlueFlameSize()], &want.BF)
	}
	if kind != 0 {
		return kind
	}
	checkSQRing(qp, r, fail)
	if r.RQ != nil {
		for i, w := range r.RQ.WQEs {
			at := (r.Input.RQStart + i) % r.QP.RQWQECnt
			if g := hex.EncodeToString(qp.rq.ring[at*r.QP.RQStride : (at+1)*r.QP.RQStride]); at != w.Index || g != w.Hex {
				fail("receive WQE %d (index %d, libmlx5 %d)\n got %s\nwant %s", i, at, w.Index, g, w.Hex)
			}
		}
	}
	return 0
}

// inCase reports whether ring index i is one of the WQEBBs the record
// shows libmlx5 wrote.
func inCase(r *dp.Record, i int) bool {
	for _, w := range r.SQ.WQEBBs {
		if w.Index == i {
			return true
		}
	}
	return false
}

// checkUARWrite compares reg, the BlueFlame half a post wrote to, with
// the one UAR write libmlx5 recorded for the post (none: reg stays zero).
func checkUARWrite(t *testing.T, fail func(string, ...any), p int, reg []byte, bf *dp.BF) {
	t.Helper()
	switch w := bf.Writes; {
	case len(w) == 0:
		if !bytes.Equal(reg, make([]byte, len(reg))) {
			fail("post %d: rang %x, libmlx5 did not ring", p, reg)
		}
	case len(w) == 1:
		wb := dp.Unhex(t, w[0].Hex)
		if !bytes.Equal(reg[:len(wb)], wb) || !bytes.Equal(reg[len(wb):], make([]byte, len(reg)-len(wb))) {
			fail("post %d: UAR write\n got %x\nwant %x", p, reg, wb)
		}
	default:
		fail("post %d: %d UAR writes recorded", p, len(w))
	}
}

// checkSQRing checks that the send queue holds every WQEBB libmlx5
// wrote for record r, at its ring index, and nothing else: every other
// WQEBB still holds the junk written before the case.
func checkSQRing(qp *QP, r *dp.Record, fail func(string, ...any)) {
	for i, w := range r.SQ.WQEBBs {
		at := uint16(r.SQPIBefore) + uint16(i)
		if int(at)&(len(qp.sq.slots)-1) != w.Index {
			fail("WQEBB %d at ring index %d, libmlx5 %d", i, int(at)&(len(qp.sq.slots)-1), w.Index)
		}
		if g := hex.EncodeToString(qp.sq.ring.Slot(at)); g != w.Hex {
			fail("WQEBB %d\n got %s\nwant %s", i, g, w.Hex)
		}
	}
	for i := range qp.sq.slots {
		if !inCase(r, i) && bytes.Count(qp.sq.ring.Slot(uint16(i)), []byte{junk}) != wqe.WQEBB {
			fail("ring index %d written outside the posted WQEs", i)
		}
	}
}
