package mlx5

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/doorbell"
	dp "github.com/mlx5go/mlx5go/internal/oracle/datapath"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// The dc family's data path (testdata/dc.jsonl: libmlx5 44.0's DCI work
// requests, testdata/README.md) through the public post API.

// dcRefused are the dc records whose work requests mlx5 refuses with
// ErrInvalid, writing nothing, where libmlx5 posts them: each with the
// reason (docs/MLX5.md, "Differences from libmlx5").
var dcRefused = map[string]string{
	"wr/no_dc_addr/send_sge1_alone":                            "no DC address: libmlx5 never finishes the WQE, yet rings the doorbell for it",
	"wr/no_dc_addr/send_sge1_then_send_with_dc_addr":           "no DC address on the first WR (libmlx5's next WR overwrites it)",
	"wr/misuse/local_inv_then_dc_addr":                         "a DC address on LOCAL_INV: libmlx5 writes the address vector over the UMR segments",
	"wr/addr/send_sge1/dct_81000001_over_24_bits":              "a DCT number over 24 bits: libmlx5 ORs it into dqp_dct unmasked",
	"wr/s8/stream/send_sge1/stream8_beyond_streams":            "stream 8 of a DCI of 2^3 streams",
	"wr/s8/stream/send_sge1/stream65535_beyond_streams":        "stream 0xffff of a DCI of 2^3 streams",
	"wr/s8/stream/batch10_rotating_streams_1_to_10":            "streams 8, 9, 10 of a DCI of 2^3 streams (rdma-core's good flow posts ids up to 2^log+2)",
	"wr/s64/stream/send_sge1/stream64_beyond_streams":          "stream 64 of a DCI of 2^6 streams",
	"wr/basic/stream/send_sge1/stream5_on_dci_without_streams": "stream 5 on a DCI without streams",
	"post_send/send/sge1/signaled":                             "ibv_post_send on a DCI: struct ibv_send_wr names no DCT, libmlx5 writes no address vector",
	"post_send/rdma_write/sge2/signaled":                       "as above (and no remote address segment)",
	"post_send/send/inline16/inline_signaled":                  "as above",
}

// dcOther are the dc records replayed otherwise, with the reason.
var dcOther = map[string]string{
	"wr/bind_mw/type2/signaled":            "memory windows: mlx5 has no BIND_MW",
	"wr/no_data_setter/send_dc_addr_alone": "no data setter: libmlx5 never finishes the WQE; mlx5 has no separate data setter and posts a SEND of no data (ds 4, as libmlx5 writes a zero-length SGE)",
}

// dcSendWR is a recorded work request of the dc family as mlx5's: the DC
// address through an AH of the QP's context.
func dcSendWR(t *testing.T, qp *QP, w *dp.WR) SendWR {
	wr := sendWR(t, "ibv_wr", w)
	if d := w.DC; d != nil {
		a := wqe.AHAttr{DLID: d.AH.DLID, SL: d.AH.SL, SrcPathBits: d.AH.SrcPathBits, StaticRate: d.AH.StaticRate, IsGlobal: d.AH.IsGlobal != 0}
		if g := d.AH.GRH; g != nil {
			copy(a.DGID[:], dp.Unhex(t, g.DGID))
			a.FlowLabel, a.SGIDIndex, a.HopLimit, a.TClass = g.FlowLabel, g.SGIDIndex, g.HopLimit, g.TrafficClass
		}
		wr.AH = testAH(&PD{c: qp.c}, wqe.IBAV(&a))
		wr.RemoteQPN, wr.DCAccessKey = uint32(dp.Num(t, d.RemoteDCTN)), dp.Num(t, d.RemoteDCKey)
		if d.StreamID != nil {
			wr.StreamID = uint16(*d.StreamID)
		}
	}
	return wr
}

// dcQP is oracleQP for a record's DCI.
func dcQP(t *testing.T, r *dp.Record) (*QP, []byte) {
	qp, uar := oracleQP(t, r)
	qp.typ = QPTypeDCI
	if s := r.QP.DCIStreams; s != nil {
		qp.dciStreams, qp.sq.maxStream = true, uint16(1<<s.LogNumConcurent-1)
	}
	qp.sq.setPost(qp.typ, qp.qpn)
	return qp, uar
}

// dcAPIs are the ways a record's posts go in: each ibv_wr_start ..
// ibv_wr_complete as a Begin .. Commit, as one PostSendList, or (posts of
// one work request) as PostSend.
var dcAPIs = []string{"Begin/Add/Commit", "PostSendList", "PostSend"}

// TestOracleDCPost posts every record of the dc family's data path
// through the public API, each through Begin/Add/Commit, PostSendList and
// (a post of one work request) PostSend, on a DCI of the record's
// geometry, streams and counters, and compares what the driver leaves
// with what libmlx5 44.0 left: every WQEBB, the doorbell record and each
// post's doorbell or BlueFlame write; libmlx5's failures (too many SGEs,
// too much inline data) fail the same work request. dcRefused and dcOther
// list the records where mlx5 deliberately differs.
func TestOracleDCPost(t *testing.T) {
	var exact, failed, refused, other int
	var seen []string
	dp.ReadDC(t, "testdata/dc.jsonl", func(r *dp.Record) {
		seen = append(seen, r.Case)
		if why, ok := dcOther[r.Case]; ok {
			other++
			if r.Case == "wr/no_data_setter/send_dc_addr_alone" {
				dcNoData(t, r)
			}
			t.Logf("%s: %s", r.Case, why)
			return
		}
		for _, api := range dcAPIs {
			single := true
			for _, p := range r.Input.Posts {
				single = single && len(p.WRs) == 1
			}
			if api == "PostSend" && !single {
				continue
			}
			switch k := dcCase(t, r, api); {
			case k == 1 && api == dcAPIs[0]:
				failed++
			case k == 2 && api == dcAPIs[0]:
				refused++
			case k == 0 && api == dcAPIs[0]:
				exact++
			}
		}
	})
	t.Logf("dc: %d records: %d byte-exact, %d failing as libmlx5, %d refused (dcRefused), %d otherwise (dcOther)", len(seen), exact, failed, refused, other)
	for k := range dcRefused {
		if !slices.Contains(seen, k) {
			t.Errorf("dcRefused: no record %s", k)
		}
	}
	if exact != 89 || failed != 5 || refused != len(dcRefused) || other != len(dcOther) {
		t.Errorf("%d exact, %d failed, %d refused, %d other; want 89, 5, %d, %d", exact, failed, refused, other, len(dcRefused), len(dcOther))
	}
}

// dcCase replays one record through api: 0 byte-exact, 1 failed as
// libmlx5 did, 2 refused as dcRefused says.
func dcCase(t *testing.T, r *dp.Record, api string) int {
	qp, uar := dcQP(t, r)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s (%s): %s", r.Case, api, fmt.Sprintf(format, args...))
	}
	_, refuse := dcRefused[r.Case]
	kind := 0
	for p, post := range r.Input.Posts {
		want := &r.Result.Posts[p]
		half := doorbell.BlueFlameOffset + qp.sq.bell.Half()
		clear(uar[doorbell.BlueFlameOffset : doorbell.BlueFlameOffset+2*qp.sq.bell.BlueFlameSize()])
		before := qp.sq.pi
		wrs := make([]SendWR, len(post.WRs))
		for k := range post.WRs {
			wrs[k] = dcSendWR(t, qp, &post.WRs[k])
		}
		var err error
		switch api {
		case "PostSendList":
			err = qp.PostSendList(wrs)
		case "PostSend":
			err = qp.PostSend(&wrs[0])
		default:
			b := qp.Begin()
			for k := range wrs {
				b.Add(&wrs[k])
			}
			err = b.Commit()
		}
		if want.Ret != 0 || refuse {
			if refuse && want.Ret != 0 {
				fail("post %d: libmlx5 refused it too (errno %d)", p, want.Ret)
			}
			if !errors.Is(err, ErrInvalid) || !errors.Is(err, unix.EINVAL) {
				fail("post %d: %v; want ErrInvalid (libmlx5: errno %d)", p, err, want.Ret)
			}
			var e *Error
			if !errors.As(err, &e) || e.Op != "post send" || e.Obj != qp.name {
				fail("post %d: %#v names no operation and QP", p, err)
			}
			if qp.sq.pi != before || !bytes.Equal(uar[half:half+qp.sq.bell.BlueFlameSize()], make([]byte, qp.sq.bell.BlueFlameSize())) {
				fail("post %d: the refused post moved the counter or rang", p)
			}
			// A rolled-back batch leaves zeros where it wrote; a refused
			// work request is refused before anything is written.
			for i := range qp.sq.slots {
				bb := qp.sq.ring.Slot(uint16(i))
				if bytes.Count(bb, []byte{junk}) != len(bb) && (refuse || bytes.Count(bb, []byte{0}) != len(bb)) && !inCase(r, i) {
					fail("post %d: ring index %d written: %x", p, i, bb)
				}
			}
			if refuse {
				kind = 2
			} else if kind == 0 {
				kind = 1
			}
			continue
		}
		if err != nil {
			fail("post %d: %v; libmlx5 posted it", p, err)
			continue
		}
		if got := int(qp.sq.pi); got != want.SQPIAfter || got != int(qp.sq.bell.Counter()) {
			fail("post %d: SQ counter %d (record %d), libmlx5 %d", p, got, qp.sq.bell.Counter(), want.SQPIAfter)
		}
		checkUARWrite(t, fail, p, uar[half:half+qp.sq.bell.BlueFlameSize()], &want.BF)
	}
	if kind != 0 {
		return kind
	}
	checkSQRing(qp, r, fail)
	return 0
}

// dcNoData: a DCI work request with a DC address and no data is a SEND
// of no bytes: ctrl and address vector, ds 4, libmlx5's bytes of its
// first WQEBB but for the ds libmlx5 never wrote.
func dcNoData(t *testing.T, r *dp.Record) {
	qp, _ := dcQP(t, r)
	wr := dcSendWR(t, qp, &r.Input.Posts[0].WRs[0])
	if err := qp.PostSend(&wr); err != nil {
		t.Fatalf("%s: %v", r.Case, err)
	}
	got := qp.sq.ring.Slot(0)
	stray := dp.Unhex(t, r.Stray[0].Hex)
	if qp.sq.pi != 1 || got[7] != 4 || !bytes.Equal(got[16:], stray[16:]) || !bytes.Equal(got[:4], stray[:4]) || !bytes.Equal(got[8:16], stray[8:16]) {
		t.Errorf("%s: counter %d, WQEBB\n got %x\nlibmlx5's unfinished one\n     %x", r.Case, qp.sq.pi, got, stray)
	}
}

// TestDCIPostRefusals: each DCI work request libmlx5 would post and mlx5
// refuses, through each post API, before anything is written: no AH, an
// AH of another context, a DCT number over 24 bits, a stream beyond the
// DCI's, a stream on a DCI without streams, a DC address or a stream on
// LOCAL_INV and NOP, a stream id on an RC QP (ErrInvalid); a closed AH
// (ErrClosed, as on a UD QP).
func TestDCIPostRefusals(t *testing.T) {
	ctx := &Context{}
	ah := testAH(&PD{c: ctx}, wqe.IBAV(&wqe.AHAttr{DLID: 0x22}))
	closed := &AH{pd: &PD{c: ctx}, name: "AH to LID 0x22"}
	closed.dead.Store(true)
	other := &AH{pd: &PD{c: &Context{}}}
	sge := []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}
	ok := SendWR{WrID: 1, Opcode: OpSend, SGL: sge, AH: ah, RemoteQPN: 0x1234, DCAccessKey: 7, StreamID: 3}
	for _, c := range []struct {
		name    string
		streams int // log2 of the DCI's streams, -1 none
		rc      bool
		edit    func(wr *SendWR)
		closed  bool
	}{
		{"no AH", 2, false, func(wr *SendWR) { wr.AH = nil }, false},
		{"an AH of another context", 2, false, func(wr *SendWR) { wr.AH = other }, false},
		{"a closed AH", 2, false, func(wr *SendWR) { wr.AH = closed }, true},
		{"DCT number 0x1000000", 2, false, func(wr *SendWR) { wr.RemoteQPN = 1 << 24 }, false},
		{"stream 4 of 4", 2, false, func(wr *SendWR) { wr.StreamID = 4 }, false},
		{"stream 0xffff of 4", 2, false, func(wr *SendWR) { wr.StreamID = 0xffff }, false},
		{"stream 3 without streams", -1, false, func(wr *SendWR) {}, false},
		{"stream 1 of 1", 0, false, func(wr *SendWR) { wr.StreamID = 1 }, false},
		{"LOCAL_INV with a DC address", 2, false, func(wr *SendWR) { wr.Opcode, wr.StreamID = OpLocalInv, 0 }, false},
		{"NOP on stream 3", 2, false, func(wr *SendWR) { wr.Opcode, wr.AH = OpNOP, nil }, false},
		{"a stream on an RC QP", 0, true, func(wr *SendWR) { wr.AH = nil }, false},
	} {
		for _, api := range dcAPIs {
			qp, uar := testQP(t, ctx, 64)
			qp.typ, qp.sq.maxWQE = QPTypeDCI, 64
			if c.rc {
				qp.typ = QPTypeRC
			}
			if c.streams >= 0 && !c.rc {
				qp.dciStreams, qp.sq.maxStream = true, uint16(1<<c.streams-1)
			}
			qp.sq.setPost(qp.typ, qp.qpn)
			for i := range qp.sq.ring {
				qp.sq.ring[i] = junk
			}
			wr := ok
			c.edit(&wr)
			var err error
			first := SendWR{WrID: 9, Opcode: OpNOP} // valid on every QP
			switch api {
			case "PostSendList":
				err = qp.PostSendList([]SendWR{first, wr})
			case "PostSend":
				err = qp.PostSend(&wr)
			default:
				err = qp.Begin().Add(&first).Add(&wr).Commit()
			}
			n := "work request 1 "
			if api == "PostSend" {
				n = "work request 0 "
			}
			if errors.Is(err, ErrInvalid) == c.closed || errors.Is(err, unix.EINVAL) == c.closed || errors.Is(err, ErrClosed) != c.closed || !strings.Contains(err.Error(), n) {
				t.Errorf("%s (%s): %v", c.name, api, err)
			}
			CheckAPIError(t, err)
			if qp.sq.pi != 0 || qp.sq.bell.Counter() != 0 || !bytes.Equal(uar[doorbell.BlueFlameOffset:doorbell.BlueFlameOffset+512], make([]byte, 512)) {
				t.Errorf("%s (%s): posted, counter %d", c.name, api, qp.sq.pi)
			}
			for i := range 64 {
				if bb := qp.sq.ring.Slot(uint16(i)); bytes.Count(bb, []byte{junk}) != len(bb) && bytes.Count(bb, []byte{0}) != len(bb) {
					t.Errorf("%s (%s): ring index %d holds a WQE", c.name, api, i)
				}
			}
		}
	}
	// The same work requests are posted where they are valid.
	qp, _ := testQP(t, ctx, 64)
	qp.typ, qp.dciStreams, qp.sq.maxStream, qp.sq.maxWQE = QPTypeDCI, true, 3, 64
	qp.sq.setPost(qp.typ, qp.qpn)
	for _, wr := range []SendWR{ok, {Opcode: OpLocalInv, InvalidateKey: 5}, {Opcode: OpNOP}} {
		if err := qp.PostSend(&wr); err != nil {
			t.Errorf("%v: %v", wr.Opcode, err)
		}
	}
}

// testAH is an AH of pd with the address vector av, encoded as CreateAH
// encodes it, without a kernel object.
func testAH(pd *PD, av wqe.AV) *AH {
	ah := &AH{pd: pd, av: av}
	ah.img = av.Image()
	return ah
}
