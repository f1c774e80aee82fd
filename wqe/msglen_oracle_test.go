package wqe

import (
	"errors"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle/datapath"
)

// TestOracleLengthsLibmlx5Posts: libmlx5 44.0 checks no length. It posts
// an SGE of 2^31 bytes or more as a data segment whose byte_count has
// bit 31 (MLX5_INLINE_SEG) set, which the device reads as an inline
// segment; it posts a message past ConnectX's max_msg_sz (2^30), past the
// IB's 2^31, and a datagram past the port's MTU; it posts a receive SGE
// of 2^31 bytes (testdata/msglen.jsonl, made by a patched oracle:
// testdata/README.md). The builders refuse each, writing nothing: this is
// where mlx5go differs from libmlx5 on purpose (docs/MLX5.md).
func TestOracleLengthsLibmlx5Posts(t *testing.T) {
	const (
		connectXMaxMsg = 1 << 30 // ibv_query_port's max_msg_sz on ConnectX (the oracle's fake port says the same)
		portMTU        = 4096    // the oracle's port: IB, active MTU 4096
	)
	n := 0
	datapath.Read(t, "testdata/msglen.jsonl", func(r *dpRecord) {
		n++
		post, res := r.Input.Posts[0], r.Result.Posts[0]
		wr := &post.WRs[0]
		if res.Ret != 0 {
			t.Errorf("%s: libmlx5 refused it (%d)", r.Case, res.Ret)
		}
		var want error
		var or uint32
		var sum uint64
		for _, g := range wr.SGList {
			or |= g.Length
			sum += uint64(g.Length)
		}
		switch {
		case or&InlineSeg != 0:
			want = ErrSGELength
		case sum > connectXMaxMsg, strings.Contains(r.Case, "/ud/") && sum > portMTU:
			want = ErrMsgTooLong
		default:
			t.Fatalf("%s: a length that fits", r.Case)
		}
		if post.API == "ibv_post_recv" {
			// libmlx5 wrote the length as it is.
			if got := be.Uint32(unhex(t, r.RQ.WQEs[0].Hex)); got != wr.SGList[0].Length {
				t.Errorf("%s: libmlx5's byte_count %#x", r.Case, got)
			}
			w := make([]byte, r.RQ.Stride)
			if err := PutRecv(w, []SGE{{Addr: num(t, wr.SGList[0].Addr), Length: wr.SGList[0].Length, LKey: uint32(num(t, wr.SGList[0].Lkey))}}); !errors.Is(err, want) {
				t.Errorf("%s: PutRecv %v, want %v", r.Case, err, want)
			}
			return
		}
		// libmlx5's first data segment: after the ctrl segment and the
		// remote address (RDMA) or datagram (UD) segment.
		off := CtrlSegSize
		switch {
		case wr.UD != nil:
			off += DatagramSegSize
		case wr.RDMA != nil:
			off += RaddrSegSize
		}
		wqe := unhex(t, r.SQ.WQEBBs[0].Hex)
		if len(r.SQ.WQEBBs) > 1 {
			wqe = append(wqe, unhex(t, r.SQ.WQEBBs[1].Hex)...)
		}
		if got := be.Uint32(wqe[off:]); got != wr.SGList[0].Length {
			t.Errorf("%s: libmlx5's byte_count %#x, want the SGE's length %#x", r.Case, got, wr.SGList[0].Length)
		}
		s, _ := sendOf(t, r, post.API, wr)
		s.MaxMessage = connectXMaxMsg
		if s.UD != nil {
			s.MaxMessage = portMTU
		}
		ring := make(Ring, 8*WQEBB)
		if _, err := BuildSend(ring, 0, 8, s); !errors.Is(err, want) {
			t.Errorf("%s: BuildSend %v, want %v", r.Case, err, want)
		}
		if string(ring) != string(make([]byte, len(ring))) {
			t.Errorf("%s: ring written", r.Case)
		}
	})
	if n != 15 {
		t.Errorf("%d records, want 15", n)
	}
}
