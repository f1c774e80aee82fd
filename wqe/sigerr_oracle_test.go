package wqe

import (
	"encoding/hex"
	"encoding/json"
	"testing"
)

// The layout of every mkey of the oracle's mkey_check cases (its sig.c,
// run_check_case): one SGE of 4096 bytes of the harness's only MR, which
// it maps at a fixed address; the fake kernel gives that MR the first MR
// key, 0x2001<<8 (the oracle's README, "Determinism" and "Fabricated
// ids").
var checkSGE = KLM{Addr: 0x7e5a00000000, ByteCount: 4096, Mkey: 0x2001 << 8}

// checkSQ is the size of the harness's send queue (main_rc, 1024 WQEBBs:
// create_cmds.jsonl, and the README's datapath QP table).
const checkSQ = 1024

// nextUMRRecord is what TestOracleNextUMRAfterError reads of a record of
// testdata/mkey_check.jsonl, besides mkeyCheckRecord.
type nextUMRRecord struct {
	Input struct {
		MkeyLKey string `json:"mkey_lkey"`
	} `json:"input"`
	Next *struct {
		WRComplete int `json:"wr_complete"`
		SQ         struct {
			WQEBBs []dpWQEBB `json:"wqebbs"`
			WQEs   []struct {
				QPN uint32 `json:"qpn"`
			} `json:"wqes"`
		} `json:"sq"`
	} `json:"next_umr_after_error"`
}

// TestOracleNextUMRAfterError replays each mkey_check case's mkey as the
// harness drove it: a fresh signature mkey configured with access
// LOCAL_WRITE, the layout and the case's signature block (INLINE |
// SIGNALED); the SIG_ERR CQEs the harness then had libmlx5 poll, each of
// which makes the next UMR update the signature error counter; then, on
// an emptied send queue (the harness resets the QP, consuming the small
// fence, and zeroes the ring), a layout-only reconfigure (INLINE). It
// rebuilds that reconfigure and compares every byte libmlx5 wrote: the
// UMR with the counter update and, after a signature error, the SET_PSVs
// of the mkey's block again. The qpn, the mkey and the PSV indexes vary
// (fabricated by the fake kernel); they come from the record: the qpn from
// its WQE decode, the mkey from the input, the PSV index of the first
// SET_PSV from its bytes (the other PSV is the next index: libmlx5
// creates the memory domain's PSV, then the wire domain's).
func TestOracleNextUMRAfterError(t *testing.T) {
	var records, exact, repost int
	readLines(t, "testdata/mkey_check.jsonl", func(line []byte) {
		var r mkeyCheckRecord
		var n nextUMRRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(line, &n); err != nil {
			t.Fatal(err)
		}
		records++
		next := n.Next
		if next == nil || next.WRComplete != 0 || len(next.SQ.WQEBBs) == 0 || len(next.SQ.WQEs) == 0 {
			t.Fatalf("%s: next_umr_after_error %+v", r.Case, next)
		}
		attr, err := r.Input.Attr.BlockAttr()
		if err != nil {
			t.Fatal(err)
		}
		want := make([][]byte, len(next.SQ.WQEBBs))
		for i, w := range next.SQ.WQEBBs {
			if w.Index != i {
				t.Fatalf("%s: WQEBB %d at ring index %d", r.Case, i, w.Index)
			}
			want[i] = unhex(t, w.Hex)
		}
		// The varying values.
		qpn := next.SQ.WQEs[0].QPN
		mkey := uint32(num(t, n.Input.MkeyLKey))
		var memPSV, wirePSV uint32
		if len(want) > 3 && want[3][3] == OpcodeSetPSV {
			p := be.Uint32(want[3][16:]) & 0xffffff
			memPSV, wirePSV = p, p+1
			if attr.Mem == nil {
				memPSV, wirePSV = p-1, p
			}
		}

		// The configure with the signature block.
		ring := make(Ring, checkSQ*WQEBB)
		c := MkeyConfigure{
			QPN: qpn, Mkey: mkey, Flags: SendInline | SendSignaled,
			SetAccess: true, Access: AccessLocalWrite, List: []KLM{checkSGE}, MaxEntries: 4,
			Sig: attr, MemPSV: memPSV, WirePSV: wirePSV, SigMkey: true, BSF: BSFInit, UpdateSigErr: true,
		}
		res, err := BuildMkeyConfigure(ring, 0, checkSQ, &c)
		if err != nil {
			t.Fatalf("%s: configure: %v", r.Case, err)
		}
		if res.PSVs != PSVsOf(attr).count() || res.PSVs == 0 {
			t.Errorf("%s: configure %+v", r.Case, res)
		}
		// The mkey's state after it, and after the CQEs libmlx5 polled.
		block, sigErrs, update := PSVsOf(attr), uint32(0), false
		for _, q := range r.Input.CQEs {
			var cqe CQE
			if err := cqe.Decode(unhex(t, q.Hex)); err != nil {
				t.Fatal(err)
			}
			if cqe.Opcode == CQESigErr {
				sigErrs++
				update = true
			}
		}

		// The reconfigure, on an emptied queue.
		clear(ring)
		c = MkeyConfigure{
			QPN: qpn, Mkey: mkey, Flags: SendInline,
			List: []KLM{checkSGE}, MaxEntries: 4,
			MemPSV: memPSV, WirePSV: wirePSV, SigMkey: true, BSF: BSFSet, Block: block,
			UpdateSigErr: update, SigErrs: sigErrs,
		}
		res, err = BuildMkeyConfigure(ring, 0, checkSQ, &c)
		if err != nil {
			t.Errorf("%s: reconfigure: %v", r.Case, err)
			return
		}
		ok := true
		if res.WQEBBs != len(want) || (res.PSVs > 0) != update {
			t.Errorf("%s: %d WQEBBs (%d SET_PSVs), libmlx5 %d", r.Case, res.WQEBBs, res.PSVs, len(want))
			ok = false
		}
		for i, w := range want {
			if got := ring.Slot(uint16(i)); string(got) != string(w) {
				t.Errorf("%s: WQEBB %d\n got %x\nwant %x", r.Case, i, got, w)
				ok = false
			}
		}
		for i := len(want); i < checkSQ; i++ {
			if got := ring.Slot(uint16(i)); string(got) != string(make([]byte, WQEBB)) {
				t.Errorf("%s: WQEBB %d written: %s", r.Case, i, hex.EncodeToString(got))
				ok = false
				break
			}
		}
		if ok {
			exact++
		}
		if res.PSVs > 0 {
			repost++
		}
	})
	t.Logf("mkey_check: %d records, %d next UMRs byte-exact, %d of them with the block's SET_PSVs again", records, exact, repost)
	if records != 18 || exact != records || repost != 17 {
		t.Errorf("%d records, %d byte-exact, %d with SET_PSVs; want 18, 18, 17", records, exact, repost)
	}
}
