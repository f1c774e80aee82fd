package mlx5

import (
	"bytes"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/wqe"
)

// rawRecord is a record of testdata/raw_wqe.jsonl (testdata/README.md):
// the WQE given to libmlx5's mlx5dv_wr_raw_wqe, the send queue's WQEBBs
// it wrote, and what ibv_poll_cq said of its completion.
type rawRecord struct {
	Case  string
	Input struct {
		WrID     uint64 `json:"wr_id"`
		QPN      uint32
		SQWQECnt int    `json:"sq_wqe_cnt"`
		PIBefore uint16 `json:"pi_before"`
		WQE      string
	}
	Result struct {
		Ret     int
		PIAfter uint16 `json:"pi_after"`
		SQ      struct {
			WQEBBs []struct {
				Index int
				Hex   string
			}
		}
		WC struct {
			Polled int
			WrID   uint64 `json:"wr_id"`
			Status int
			Opcode int
		}
	}
}

// TestOracleRawWQE: wqe.BuildRaw, as AddRaw calls it, writes the WQEBBs
// libmlx5's mlx5dv_wr_raw_wqe wrote for the same WQE at the same
// producer counter (across the ring's end too), and a raw WQE's
// completion opcode is libmlx5's, WCRaw. One difference is expected:
// libmlx5 keeps the QP number the caller wrote, BuildRaw writes the QP's.
func TestOracleRawWQE(t *testing.T) {
	n := 0
	oracle.Records(t, "testdata/raw_wqe.jsonl", nil, func(r *rawRecord) {
		n++
		in := &r.Input
		w := oracle.Unhex(t, in.WQE)
		ring := make(wqe.Ring, in.SQWQECnt*wqe.WQEBB)
		res, err := wqe.BuildRaw(ring, in.PIBefore, in.SQWQECnt, in.QPN, w)
		if err != nil || r.Result.Ret != 0 {
			t.Fatalf("%s: %v (libmlx5: %d)", r.Case, err, r.Result.Ret)
		}
		if want := int(r.Result.PIAfter - in.PIBefore); res.WQEBBs != want || len(r.Result.SQ.WQEBBs) != want {
			t.Errorf("%s: %d WQEBBs, libmlx5 %d", r.Case, res.WQEBBs, want)
		}
		for i, bb := range r.Result.SQ.WQEBBs {
			want := oracle.Unhex(t, bb.Hex)
			if i == 0 && r.Case == "foreign_qpn_kept" {
				if !bytes.Equal(want[4:7], w[4:7]) {
					t.Errorf("%s: libmlx5 wrote qpn %x, the caller %x", r.Case, want[4:7], w[4:7])
				}
				want = bytes.Clone(want)
				want[4], want[5], want[6] = byte(in.QPN>>16), byte(in.QPN>>8), byte(in.QPN)
			}
			got := ring.Slot(in.PIBefore + uint16(i))
			if bb.Index != int(in.PIBefore+uint16(i))&(in.SQWQECnt-1) || !bytes.Equal(got, want) {
				t.Errorf("%s: WQEBB %d (libmlx5's index %d):\n got %x\nwant %x", r.Case, i, bb.Index, got, want)
			}
		}
		if wc := r.Result.WC; wc.Polled != 1 || wc.Status != 0 || WCOpcode(wc.Opcode) != WCRaw || wc.WrID != in.WrID {
			t.Errorf("%s: libmlx5's completion %+v; WCRaw is %d", r.Case, wc, WCRaw)
		}
	})
	if n != 8 {
		t.Fatalf("%d records, want 8", n)
	}
}
