package mlx5

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/internal/oracle/umrsig"
)

// mainQPInline is the max_inline_data libmlx5 granted the oracle
// harness's main QP (main_rc: 512 bytes asked with RDMA_WRITE, SEND and
// RDMA_READ, a 576-byte WQE less its 32 bytes of control and remote
// address segments and the inline header), as its create command carries
// it (create_cmds.jsonl, QP_CREATE's struct ib_uverbs_qp_cap, the last of
// its five words; TestOracleMkeyConfigurePost reads it there). The
// hand-made QPs that post that QP's configures grant the same: it is the
// room a configure's translations and BSF have.
const mainQPInline = 540

// TestOracleMkeyConfigurePost posts every mkey configure of the oracle's
// umr_sig family, and the umr_sig records of its wrap family, through
// QP.PostMkeyConfigure, and compares what the driver leaves with what
// libmlx5 44.0 left: every WQEBB, the doorbell record, and the one write
// to the UAR: the 8-byte doorbell (the last WQE's first 8 bytes) for a
// UMR with SET_PSVs, a BlueFlame copy of a single UMR that fits the
// 256-byte half. The records come from wqe's testdata (the same vectors
// wqe's builder is checked against); the sequence/* records reuse one
// mkey, so its state (BSF, counter update) carries over as in libmlx5.
func TestOracleMkeyConfigurePost(t *testing.T) {
	capAttr := findCall(t, loadCalls(t, "testdata/create_cmds.jsonl"), "create_qp_rc_sig_pipelining", "QP", "QP_CREATE").attr(t, "CAP").in(t)
	if got := int(binary.LittleEndian.Uint32(capAttr[16:])); got != mainQPInline {
		t.Fatalf("the harness's main QP grants %d inline bytes, not %d", got, mainQPInline)
	}
	for path, want := range map[string][4]int{ // exact, refused, without INLINE, not expressible
		"../wqe/testdata/umr_sig.jsonl": {236, 5, 1, 1},
		"../wqe/testdata/wrap.jsonl":    {18, 0, 0, 0},
	} {
		var records, exact, errs, inline, skipped int
		mkeys := map[uint32]*Mkey{}
		umrsig.Read(t, path, func(r *umrsig.Record) {
			records++
			in, ok, err := r.Configure()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				skipped++
				return
			}
			if SendFlags(in.Flags)&SendInline == 0 {
				// libmlx5 refuses a configure without IBV_SEND_INLINE
				// (EOPNOTSUPP); mlx5's API implies it.
				inline++
				return
			}
			m := mkeys[in.Mkey]
			if m == nil || r.Input.Mkey.Fresh {
				m = &Mkey{c: &Context{devx: true}, lkey: in.Mkey, rkey: in.Mkey, maxEntries: r.Input.Mkey.MaxEntries,
					sigMkey: r.Input.Mkey.BlockSignature, sentErrs: ^uint32(0), name: mkeyName(in.Mkey)}
				mkeys[in.Mkey] = m
			}
			psv, err := r.PSVIndexes()
			if err != nil {
				t.Fatal(err)
			}
			if len(psv) == 2 {
				m.psvIndex = [2]uint32{psv[0], psv[1]}
			}

			// The harness's QP, emptied at sq_pi_before, its small fence
			// consumed.
			qp, uar := testQP(t, m.c, r.QP.WQECnt)
			qp.qpn, qp.sq.maxWQE, qp.mkeyConf, qp.sq.maxInline = r.QP.QPN, r.QP.WQECnt, true, mainQPInline
			qp.sq.pi = uint16(r.PIBefore)
			qp.sq.tail.Store(uint32(qp.sq.pi))
			half := doorbell.BlueFlameOffset + qp.sq.bell.Half()

			err = qp.PostMkeyConfigure(configureWR(r, &in, m))
			if r.Result.WRComplete != 0 {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("%s: libmlx5 failed (errno %d), post: %v", r.Case, r.Result.WRComplete, err)
				}
				if !queueUntouched(qp, uint16(r.PIBefore)) {
					t.Errorf("%s: the refused post wrote to the queue", r.Case)
				}
				errs++
				return
			}
			if err != nil {
				t.Errorf("%s: %v", r.Case, err)
				return
			}
			want, ok := recordedWQEBBs(t, qp, r)
			for i, w := range want {
				if g := qp.sq.ring.Slot(uint16(r.PIBefore + i)); !bytes.Equal(g, w) {
					t.Errorf("%s: WQEBB %d\n got %x\nwant %x", r.Case, i, g, w)
					ok = false
				}
			}
			w := uarWrite(t, r)
			reg := uar[half : half+r.BF.Size]
			if !uarHolds(reg, w) {
				t.Errorf("%s: UAR write\n got %x\nwant %x (%d bytes)", r.Case, reg, w, len(w))
				ok = false
			}
			if ok {
				exact++
			}
		})
		t.Logf("%s: %d records, %d byte-exact (WQEBBs, doorbell record, UAR write), %d refused as libmlx5 refused them, %d without INLINE (mlx5 implies it), %d not expressible",
			path, records, exact, errs, inline, skipped)
		if got := [4]int{exact, errs, inline, skipped}; got != want {
			t.Errorf("%s: %v of %d records, want %v", path, got, records, want)
		}
	}
}

// recordedWQEBBs returns the WQEBBs libmlx5 wrote for r, and whether qp
// wrote as many and its doorbell record holds libmlx5's counter.
func recordedWQEBBs(t *testing.T, qp *QP, r *umrsig.Record) ([][]byte, bool) {
	t.Helper()
	want, err := r.WQEBBs()
	if err != nil {
		t.Fatal(err)
	}
	ok := int(qp.sq.pi-uint16(r.PIBefore)) == len(want) && int(qp.sq.bell.Counter()) == r.DBRec.Send
	if !ok {
		t.Errorf("%s: %d WQEBBs, doorbell record %d; libmlx5 %d, %d", r.Case, qp.sq.pi-uint16(r.PIBefore), qp.sq.bell.Counter(), len(want), r.DBRec.Send)
	}
	return want, ok
}

// queueUntouched reports whether qp's send queue is as a refused post
// leaves it: the producer counter at pi, the ring zero, no doorbell.
func queueUntouched(qp *QP, pi uint16) bool {
	return qp.sq.pi == pi && bytes.Equal(qp.sq.ring, make([]byte, len(qp.sq.ring))) && qp.sq.bell.Counter() == 0
}

// uarWrite is the one UAR write of a configure record: the 8-byte
// doorbell or the BlueFlame copy.
func uarWrite(t *testing.T, r *umrsig.Record) []byte {
	t.Helper()
	if len(r.BF.Writes) != 1 {
		t.Fatalf("%s: %d UAR writes recorded", r.Case, len(r.BF.Writes))
	}
	w, err := hex.DecodeString(r.BF.Writes[0].Hex)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// uarHolds reports whether the BlueFlame half reg holds w and zeros after
// it.
func uarHolds(reg, w []byte) bool {
	return bytes.Equal(reg[:len(w)], w) && bytes.Equal(reg[len(w):], make([]byte, len(reg)-len(w)))
}

// configureWR is the work request of a umr_sig record, in on mkey m.
func configureWR(r *umrsig.Record, in *umrsig.Configure, m *Mkey) *MkeyConfigureWR {
	wr := &MkeyConfigureWR{WrID: r.Input.WrID, Mkey: m, Flags: SendFlags(in.Flags), SetAccess: in.SetAccess,
		Access: AccessFlags(in.Access), RepeatCount: in.RepeatCount, Sig: in.Sig, ResetSig: in.ResetSig}
	for _, k := range in.List {
		wr.List = append(wr.List, KLM{Addr: k.Addr, ByteCount: k.ByteCount, Mkey: k.Key})
	}
	for _, e := range in.Interleaved {
		wr.Interleaved = append(wr.Interleaved, RepeatEntry{Addr: e.Addr, ByteCount: e.ByteCount, Skip: e.Skip, Mkey: e.Key})
	}
	return wr
}
