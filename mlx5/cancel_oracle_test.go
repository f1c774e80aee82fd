package mlx5

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/uverbs"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// cancelRecord is one record of testdata/cancel.jsonl (the oracle's
// cancel family: ../shared/oracle/README.md).
type cancelRecord struct {
	Case  string `json:"case"`
	Input struct {
		UMRFirst bool `json:"umr_first"`
		Posts    []struct {
			Opcode  string `json:"opcode"`
			WrID    uint64 `json:"wr_id"`
			WrFlags uint32 `json:"wr_flags"`
			SGE     struct {
				LKey   string `json:"lkey"`
				Length uint32 `json:"length"`
			} `json:"sge"`
		} `json:"posts"`
		ModifyToSQD bool   `json:"modify_to_sqd"`
		HWCounter   uint16 `json:"hw_sq_wqebb_counter"`
		CancelWrID  uint64 `json:"cancel_wr_id"`
	} `json:"input"`
	QP struct {
		QPN    uint32 `json:"qpn"`
		WQECnt int    `json:"sq_wqe_cnt"`
	} `json:"qp"`
	Result struct {
		CancelRet int `json:"cancel_ret"`
	} `json:"result"`
	PIBefore int           `json:"sq_pi_before"`
	PIAfter  int           `json:"sq_pi_after"`
	Before   cancelSQ      `json:"sq_before_cancel"`
	After    cancelSQ      `json:"sq_after_cancel"`
	Changed  []int         `json:"changed_wqebbs"`
	Calls    []oracle.Call `json:"kernel_cmds"`
	// handle is the verbs QP's handle, the idr_in value of QUERY_QP's
	// first attribute (oracle.Attr does not carry values).
	handle uint64
}

// recordedValues reads the values of the kernel calls' attributes.
type recordedValues struct {
	Calls []struct {
		Method string `json:"method"`
		Attrs  []struct {
			Value uint64 `json:"value"`
		} `json:"attrs"`
	} `json:"kernel_cmds"`
}

type cancelSQ struct {
	WQEBBs []struct {
		Index int    `json:"index"`
		Hex   string `json:"hex"`
	} `json:"wqebbs"`
}

// ring lays the dump's WQEBBs into a ring of n.
func (d cancelSQ) ring(t *testing.T, n int) []byte {
	t.Helper()
	r := make([]byte, n*wqe.WQEBB)
	for _, w := range d.WQEBBs {
		b, err := hex.DecodeString(w.Hex)
		if err != nil || len(b) != wqe.WQEBB {
			t.Fatalf("WQEBB %d: %d bytes, %v", w.Index, len(b), err)
		}
		copy(r[w.Index*wqe.WQEBB:], b)
	}
	return r
}

// The harness's mkey configure before the posts of umr_first records
// (src/harness.c run_cancel_case): wr_id 0x77, INLINE|SIGNALED, local
// write, one KLM over the MR's first 4096 bytes, a T10-DIF memory domain.
const cancelUMRWrID = 0x77

// libmlx5Misses are the records where libmlx5 44.0's walk goes wrong and
// what mlx5 does instead: after a 4-WQEBB UMR its walk follows the stale
// wqe_head of the UMR's other WQEBBs and never reaches the SEND with wr_id
// 11, returning 0; mlx5 cancels it.
var libmlx5Misses = map[string]struct {
	ret     int
	changed []int
}{
	"cancel/after_umr_sig_cancel_send_11": {1, []int{6}},
}

// TestOracleCancel replays the oracle's cancel family through
// QP.CancelPostedSends on a recording kernel that answers the DEVX
// QUERY_QP as the oracle's fake kernel answered libmlx5: the WRs are
// posted through the driver (the ring must then hold libmlx5's bytes,
// sq_before_cancel), over send queue records primed with stale work as
// the harness primed libmlx5's; the cancel must leave libmlx5's bytes
// (sq_after_cancel), change the same WQEBBs, return what libmlx5
// returned, and send the same QUERY_QP. The one record where libmlx5
// misses a WR (libmlx5Misses) is checked against what mlx5 does instead.
func TestOracleCancel(t *testing.T) {
	var records, exact, differ int
	oracle.Lines(t, "testdata/cancel.jsonl", func(line []byte) {
		var rec cancelRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		var v recordedValues
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatal(err)
		}
		for _, c := range v.Calls {
			if c.Method == "DEVX_OBJ_QUERY" && len(c.Attrs) > 0 {
				rec.handle = c.Attrs[0].Value
			}
		}
		records++
		if replayCancel(t, &rec) {
			if _, ok := libmlx5Misses[rec.Case]; ok {
				differ++
			} else {
				exact++
			}
		}
	})
	t.Logf("%d records: %d byte-exact (WQEBBs before and after, changed WQEBBs, return, QUERY_QP), %d where libmlx5 44.0 misses the WR and mlx5 cancels it", records, exact, differ)
	if records != 10 || exact != 9 || differ != 1 {
		t.Errorf("%d records, %d exact, %d differing as documented; want 10, 9, 1", records, exact, differ)
	}
}

func replayCancel(t *testing.T, rec *cancelRecord) bool {
	t.Helper()
	query := oracleCall(t, rec, "MLX5_DEVX_OBJ", "DEVX_OBJ_QUERY")
	answer, err := hex.DecodeString(query.Attrs[2].OutHex)
	if err != nil {
		t.Fatal(err)
	}
	handle := rec.handle
	qpc := prm.QueryQpOut.Qpc
	if st, hw := prm.Qpc.State.At(qpc).Get(answer), prm.Qpc.HwSqWqebbCounter.At(qpc).Get(answer); (st == qpcStateSQDrained) != rec.Input.ModifyToSQD || hw != uint64(rec.Input.HWCounter) {
		t.Fatalf("%s: the fake kernel answered state %#x, counter %d; the harness set SQD %v, %d", rec.Case, st, hw, rec.Input.ModifyToSQD, rec.Input.HWCounter)
	}
	r := newRecorded(t)
	var queries int
	r.fill = func(c *uverbs.Call) {
		queries++
		copy(c.Data[2], answer) // CMD_OUT, as the fake kernel answered
	}
	n := rec.QP.WQECnt
	qp, _ := testQP(t, r.Context, n)
	qp.qpn, qp.name, qp.verbs, qp.handle = rec.QP.QPN, qpName(rec.QP.QPN), true, seam.Handle(handle)
	qp.sq.maxWQE, qp.mkeyConf, qp.sq.maxInline = n, true, mainQPInline
	qp.initErrors()
	// Stale records, as the harness left libmlx5's: slot i last held a
	// one-WQEBB SEND, WR number i, wr_id 0xdead0000+i.
	for i := range qp.sq.slots {
		qp.sq.slots[i] = sqSlot{wrID: 0xdead0000 + uint64(i), next: uint16(i + 1), last: uint16(i), op: WCSend}
	}
	qp.sq.pi = uint16(rec.PIBefore)
	qp.sq.tail.Store(uint32(qp.sq.pi))
	before := rec.Before.ring(t, n)
	after := rec.After.ring(t, n)

	if rec.Input.UMRFirst {
		umr := before[rec.PIBefore*wqe.WQEBB:]
		psv := binary.BigEndian.Uint32(before[(rec.PIBefore+4)*wqe.WQEBB+16:]) // the SET_PSV's psv_index
		m := &Mkey{c: r.Context, lkey: binary.BigEndian.Uint32(umr[12:]), maxEntries: 1, sigMkey: true,
			sentErrs: ^uint32(0), psvIndex: [2]uint32{psv, psv + 1}}
		m.rkey, m.name = m.lkey, mkeyName(m.lkey)
		klm := before[(rec.PIBefore+2)*wqe.WQEBB:] // the inline KLM: byte_count, key, address
		attr := &sig.BlockAttr{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
			T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x1234, RefTag: 0x5678}}, CheckMask: 0xff}
		if err := qp.PostMkeyConfigure(&MkeyConfigureWR{WrID: cancelUMRWrID, Mkey: m, Flags: SendInline | SendSignaled,
			SetAccess: true, Access: AccessLocalWrite, Sig: attr,
			List: []KLM{{Addr: binary.BigEndian.Uint64(klm[8:]), ByteCount: binary.BigEndian.Uint32(klm), Mkey: binary.BigEndian.Uint32(klm[4:])}}}); err != nil {
			t.Fatalf("%s: configure: %v", rec.Case, err)
		}
	}
	b := qp.Begin()
	for i, p := range rec.Input.Posts {
		lkey, err := strconv.ParseUint(p.SGE.LKey, 0, 32)
		if err != nil {
			t.Fatal(err)
		}
		wr := SendWR{WrID: p.WrID, Flags: SendFlags(p.WrFlags), RKey: 0xabc00}
		at := int(qp.sq.pi) * wqe.WQEBB
		data := at + 16 // the data segment, after the ctrl (and the remote address)
		switch p.Opcode {
		case "IBV_WR_RDMA_WRITE":
			wr.Opcode, wr.RemoteAddr, data = OpRDMAWrite, 0x100000+uint64(i)*0x1000, data+16
		case "IBV_WR_RDMA_READ":
			wr.Opcode, wr.RemoteAddr, data = OpRDMARead, 0x200000+uint64(i)*0x1000, data+16
		case "IBV_WR_SEND":
			wr.Opcode = OpSend
		default:
			t.Fatalf("%s: opcode %s", rec.Case, p.Opcode)
		}
		// The SGE's address is the harness's heap: take it from its WQE.
		wr.SGL = []SGE{{Addr: binary.BigEndian.Uint64(before[data+8:]), Length: p.SGE.Length, LKey: uint32(lkey)}}
		b.Add(&wr)
	}
	if err := b.Commit(); err != nil {
		t.Fatalf("%s: post: %v", rec.Case, err)
	}
	ok := true
	if int(qp.sq.pi) != rec.PIAfter {
		t.Errorf("%s: producer counter %d after the posts, libmlx5 %d", rec.Case, qp.sq.pi, rec.PIAfter)
		ok = false
	}
	if !bytes.Equal(qp.sq.ring, before) {
		t.Errorf("%s: the posts left other bytes than libmlx5's:\n%s", rec.Case, ringDiff(qp.sq.ring, before))
		ok = false
	}

	canceled, err := qp.CancelPostedSends(rec.Input.CancelWrID)
	want, wantChanged := rec.Result.CancelRet, rec.Changed
	if m, miss := libmlx5Misses[rec.Case]; miss {
		want, wantChanged = m.ret, m.changed
		// libmlx5's after is its before; mlx5's has the missed WR's
		// opcode byte NOP.
		if !bytes.Equal(after, before) || rec.Result.CancelRet != 0 {
			t.Fatalf("%s: the record no longer shows libmlx5's miss", rec.Case)
		}
		for _, i := range m.changed {
			after[i*wqe.WQEBB+3] = wqe.OpcodeNOP
		}
	}
	switch {
	case want < 0:
		if !errors.Is(err, unix.Errno(-want)) || !errors.Is(err, ErrNotDrained) || canceled != 0 {
			t.Errorf("%s: %d, %v; libmlx5 returned %d (want ErrNotDrained)", rec.Case, canceled, err, want)
			ok = false
		}
	case err != nil || canceled != want:
		t.Errorf("%s: canceled %d, %v; libmlx5 %d", rec.Case, canceled, err, want)
		ok = false
	}
	if !bytes.Equal(qp.sq.ring, after) {
		t.Errorf("%s: after the cancel:\n%s", rec.Case, ringDiff(qp.sq.ring, after))
		ok = false
	}
	var changed []int
	for i := range n {
		if !bytes.Equal(qp.sq.ring.Slot(uint16(i)), before[i*wqe.WQEBB:(i+1)*wqe.WQEBB]) {
			changed = append(changed, i)
		}
	}
	if !slices.Equal(changed, wantChanged) && (len(changed) > 0 || len(wantChanged) > 0) {
		t.Errorf("%s: changed WQEBBs %v, want %v", rec.Case, changed, wantChanged)
		ok = false
	}
	if queries != 1 || r.last == nil {
		t.Fatalf("%s: %d calls answered, want the one QUERY_QP", rec.Case, queries)
	}
	oracle.Compare(t, query, got(r.last))
	if h := r.last.Attrs[0].Data; h != handle {
		t.Errorf("%s: QUERY_QP on handle %d, libmlx5 on the verbs QP's %d", rec.Case, h, handle)
		ok = false
	}
	return ok && !t.Failed()
}

// oracleCall is the record's one kernel call on object and method.
func oracleCall(t *testing.T, rec *cancelRecord, object, method string) oracle.Call {
	t.Helper()
	var found []oracle.Call
	for _, c := range rec.Calls {
		if c.Object == object && c.Method == method {
			found = append(found, c)
		}
	}
	if len(found) != 1 || len(found[0].Attrs) != 3 {
		t.Fatalf("%s: %d %s %s calls", rec.Case, len(found), object, method)
	}
	return found[0]
}

// ringDiff lists the WQEBBs in which two rings differ.
func ringDiff(got, want []byte) string {
	var s string
	for i := 0; i < len(got); i += wqe.WQEBB {
		if g, w := got[i:i+wqe.WQEBB], want[i:i+wqe.WQEBB]; !bytes.Equal(g, w) {
			s += "WQEBB " + strconv.Itoa(i/wqe.WQEBB) + "\n got " + hex.EncodeToString(g) + "\nwant " + hex.EncodeToString(w) + "\n"
		}
	}
	return s
}
