package mlx5

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/oracle"
)

// libmlx5 44.0's queue sizing, restated from the oracle's records and
// checked against every one of them: the verbs family's RC sizing, UC
// and SRQ cases, and the QPs of datapath_setup and create_cmds. The mlx5
// layer, which builds the create driver data, must size queues so
// (sq_wqe_count, rq_wqe_count, rq_wqe_shift), and grant and enforce what
// libmlx5 grants (ibv_query_qp's send caps, the create's receive caps).

// sizeLimits are the context's limits (mlx5_ib_alloc_ucontext_resp).
type sizeLimits struct {
	maxSQDesc, maxRQDesc, maxSendWQEBB, maxRecvWR, maxSRQRecvWR uint32
}

func limitsOf(r *mlx5abi.Mlx5IbAllocUcontextResp) sizeLimits {
	return sizeLimits{uint32(r.MaxSqDescSz), uint32(r.MaxRqDescSz), r.MaxSendWqebb, r.MaxRecvWr, r.MaxSrqRecvWr}
}

// Segment sizes a send WQE is built from.
const (
	segCtrl     = 16
	segRaddr    = 16
	segAtomic   = 16
	segUMRCtrl  = 48
	segMkeyCtx  = 64
	segUMRTrans = 64 // the translation room libmlx5 reserves (at least a KLM)
	segDatagram = 48
	segInline   = 4 // the inline segment's byte count
	segData     = 16
	segSRQNext  = 16
	wqebb       = 64
)

// sendOverhead is the part of a send WQE before its data: the control
// segment and the largest operation the QP may post; UD and DCI add the
// datagram segment.
func sendOverhead(ops string, datagram bool) uint32 {
	size := uint32(segCtrl)
	has := func(names ...string) bool {
		for _, n := range names {
			for _, o := range strings.Split(ops, "|") {
				if o == n {
					return true
				}
			}
		}
		return false
	}
	if has("RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "RDMA_READ") {
		size = max(size, segCtrl+segRaddr)
	}
	if has("ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD") {
		size = max(size, segCtrl+segRaddr+segAtomic)
	}
	if has("BIND_MW", "LOCAL_INV") {
		size = max(size, segCtrl+segUMRCtrl+segMkeyCtx+segUMRTrans)
	}
	if datagram {
		size += segDatagram
	}
	return size
}

// rcDefaultOps are the send operations libmlx5 assumes for an RC or UC QP
// created without IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (ibv_create_qp).
const rcDefaultOps = "SEND|SEND_WITH_INV|SEND_WITH_IMM|RDMA_WRITE|RDMA_WRITE_WITH_IMM|RDMA_READ|" +
	"ATOMIC_CMP_AND_SWP|ATOMIC_FETCH_AND_ADD|LOCAL_INV|BIND_MW"

func pow2(n uint64) uint64 {
	p := uint64(1)
	for p < n {
		p <<= 1
	}
	return p
}

func alignUp(n, a uint32) uint32 { return (n + a - 1) / a * a }

// qpSizing is what libmlx5 makes of a QP's caps.
type qpSizing struct {
	invalid                bool // EINVAL before any kernel command
	sqWQEs, maxSendWR      uint32
	maxInline              uint32
	rqWQEs, rqStride       uint32
	rqShift, maxRecvSGE    uint32
	grantedRecvWR, sendSGE uint32
}

func libmlx5QPSizing(l sizeLimits, overhead, sendWR, sendSGE, inline, recvWR, recvSGE uint32) qpSizing {
	s := qpSizing{sendSGE: sendSGE}
	if sendWR > 0 {
		if sendSGE > (l.maxSQDesc-overhead)/segData {
			return qpSizing{invalid: true}
		}
		size := overhead + sendSGE*segData
		if inline > 0 {
			size = max(size, overhead+alignUp(segInline+inline, 16))
		}
		if size > l.maxSQDesc {
			return qpSizing{invalid: true}
		}
		wqe := alignUp(size, wqebb)
		s.maxInline = wqe - overhead - segInline
		wq := pow2(uint64(sendWR) * uint64(wqe))
		s.sqWQEs, s.maxSendWR = uint32(wq/wqebb), uint32(wq/uint64(wqe))
		if s.sqWQEs > l.maxSendWQEBB {
			return qpSizing{invalid: true}
		}
	}
	if recvWR > 0 {
		if recvWR > l.maxRecvWR {
			return qpSizing{invalid: true}
		}
		size := segData * max(recvSGE, 1)
		if size > l.maxRQDesc {
			return qpSizing{invalid: true}
		}
		s.rqStride = uint32(pow2(uint64(size)))
		s.rqWQEs = uint32(max(pow2(uint64(recvWR))*uint64(s.rqStride), wqebb) / uint64(s.rqStride))
		for s.rqShift = 0; 1<<s.rqShift < s.rqStride; s.rqShift++ {
		}
		s.maxRecvSGE, s.grantedRecvWR = s.rqStride/segData, s.rqWQEs
	}
	return s
}

// srqSizing is what libmlx5 makes of an SRQ's size: the max_wr it sends
// the kernel (the ring: with a wait queue of the same size when the
// device allows it), the max_wr it grants, the SGEs its stride holds.
type srqSizing struct {
	invalid                   bool
	kernelMaxWR, grantedMaxWR uint32
	maxSGE, stride            uint32
}

func libmlx5SRQSizing(l sizeLimits, maxWR, maxSGE uint32) srqSizing {
	if maxWR > l.maxSRQRecvWR || maxSGE > l.maxRQDesc/segData {
		return srqSizing{invalid: true}
	}
	n := 2*maxWR + 1
	if n > l.maxSRQRecvWR {
		n = maxWR + 1
	}
	stride := uint32(pow2(uint64(max(32, segSRQNext+segData*maxSGE))))
	return srqSizing{kernelMaxWR: uint32(pow2(uint64(n))) - 1, grantedMaxWR: uint32(pow2(uint64(maxWR)+1)) - 1,
		maxSGE: (stride - segSRQNext) / segData, stride: stride}
}

func TestOracleLibmlx5QueueSizing(t *testing.T) {
	calls := loadCalls(t, "testdata/verbs_cases.jsonl")
	var resp mlx5abi.Mlx5IbAllocUcontextResp
	b := findCall(t, calls, "verbs/base", "DEVICE", "GET_CONTEXT").attr(t, "UHW_OUT").out(t)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&resp)), unsafe.Sizeof(resp)), b)
	l := limitsOf(&resp)
	createOf := func(kase string) *vcall {
		for _, c := range calls {
			if c.kase == kase && c.want.Method == "QP_CREATE" {
				return c
			}
		}
		return nil
	}

	type caps struct {
		MaxSendWR     uint32 `json:"max_send_wr"`
		MaxRecvWR     uint32 `json:"max_recv_wr"`
		MaxSendSGE    uint32 `json:"max_send_sge"`
		MaxRecvSGE    uint32 `json:"max_recv_sge"`
		MaxInlineData uint32 `json:"max_inline_data"`
	}
	type ring struct {
		WQECnt uint32 `json:"wqe_cnt"`
		Stride uint32 `json:"stride"`
	}
	type rec struct {
		Case  string `json:"case"`
		Input struct {
			API          string `json:"api"`
			MaxSendWR    uint32 `json:"max_send_wr"`
			MaxSendSGE   uint32 `json:"max_send_sge"`
			MaxInline    uint32 `json:"max_inline_data"`
			MaxRecvWR    uint32 `json:"max_recv_wr"`
			MaxRecvSGE   uint32 `json:"max_recv_sge"`
			SendOpsFlags string `json:"send_ops_flags"`
			MaxWR        uint32 `json:"max_wr"`
			MaxSGE       uint32 `json:"max_sge"`
		} `json:"input"`
		Result struct {
			Ret      int   `json:"ret"`
			SQ       ring  `json:"sq"`
			RQ       ring  `json:"rq"`
			After    *caps `json:"cap_after_create"`
			AfterUC  *caps `json:"cap_after"`
			Query    *caps `json:"query_init_attr_cap"`
			QueryUC  *caps `json:"init_attr_cap"`
			SRQAfter struct {
				MaxWR uint32 `json:"max_wr"`
			} `json:"attr_after"`
			DV struct {
				Stride uint32 `json:"stride"`
				Tail   uint32 `json:"tail"`
			} `json:"dv"`
		} `json:"result"`
	}
	recs := map[string]rec{}
	var order []string
	for _, raw := range loadLines(t, "testdata/verbs_cases.jsonl") {
		var r rec
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		recs[r.Case] = r
		order = append(order, r.Case)
	}
	n := map[string]int{}
	for _, name := range order {
		r := recs[name]
		switch {
		case strings.HasPrefix(name, "rc_sizing/") || name == "uc/create":
			in := r.Input
			ops := rcDefaultOps
			if in.API == "ibv_create_qp_ex" {
				ops = in.SendOpsFlags
			}
			want := libmlx5QPSizing(l, sendOverhead(ops, false), in.MaxSendWR, in.MaxSendSGE, in.MaxInline, in.MaxRecvWR, in.MaxRecvSGE)
			c := createOf(name)
			if want.invalid {
				if r.Result.Ret != 22 || c != nil {
					t.Errorf("%s: ret %d, libmlx5's rules say EINVAL before any command", name, r.Result.Ret)
				}
				n["invalid"]++
				continue
			}
			if r.Result.Ret != 0 || c == nil {
				t.Errorf("%s: ret %d, libmlx5's rules say it fits", name, r.Result.Ret)
				continue
			}
			var drv mlx5abi.Mlx5IbCreateQp
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&drv)), unsafe.Sizeof(drv)), c.attr(t, "UHW_IN").in(t))
			after, query := r.Result.After, r.Result.Query
			if name == "uc/create" {
				after, query = r.Result.AfterUC, recs["uc/query_cap"].Result.QueryUC
			}
			got := [...]uint32{drv.SqWqeCount, drv.RqWqeCount, drv.RqWqeShift, r.Result.SQ.WQECnt, r.Result.RQ.WQECnt,
				after.MaxSendWR, after.MaxRecvWR, after.MaxRecvSGE, query.MaxSendWR, query.MaxSendSGE, query.MaxInlineData}
			exp := [...]uint32{want.sqWQEs, want.rqWQEs, want.rqShift, want.sqWQEs, want.rqWQEs,
				want.maxSendWR, want.grantedRecvWR, want.maxRecvSGE, want.maxSendWR, want.sendSGE, want.maxInline}
			if got != exp {
				t.Errorf("%s: driver data sq/rq wqes, rq shift; mlx5dv sq/rq wqes; create's send wr, recv wr, recv sge; "+
					"query's send wr, send sge, inline\n %v\nrules\n %v", name, got, exp)
			}
			if want.rqWQEs > 0 && r.Result.RQ.Stride != want.rqStride {
				t.Errorf("%s: rq stride %d, rules %d", name, r.Result.RQ.Stride, want.rqStride)
			}
			n["qp"]++
		case strings.HasPrefix(name, "srq/") && strings.HasSuffix(name, "/create"):
			want := libmlx5SRQSizing(l, r.Input.MaxWR, r.Input.MaxSGE)
			var c *vcall
			for _, x := range calls {
				if x.kase == name && x.want.Method == "SRQ_CREATE" {
					c = x
				}
			}
			if want.invalid {
				if r.Result.Ret != 22 || c != nil {
					t.Errorf("%s: ret %d, libmlx5's rules say EINVAL before any command", name, r.Result.Ret)
				}
				n["invalid"]++
				continue
			}
			if c == nil {
				t.Fatalf("%s: no SRQ_CREATE", name)
			}
			got := [...]uint32{le32(c.attr(t, "MAX_WR").in(t)), le32(c.attr(t, "MAX_SGE").in(t)), r.Result.SRQAfter.MaxWR,
				r.Result.DV.Tail, r.Result.DV.Stride}
			exp := [...]uint32{want.kernelMaxWR, want.maxSGE, want.grantedMaxWR, want.grantedMaxWR, want.stride}
			if got != exp {
				t.Errorf("%s: max_wr and max_sge sent, max_wr granted, tail, stride %v; rules %v", name, got, exp)
			}
			n["srq"]++
		}
	}
	// The QPs of the other families: dp_rc, dp_ud (UD: the datagram
	// segment) and main_rc.
	for _, q := range []struct {
		file, create, query string
		ops                 string
		ud                  bool
		swr, ssge, inl, rwr uint32
		rsge                uint32
		wantSendWR, wantInl uint32
	}{
		{"testdata/datapath_setup.jsonl", "datapath_setup/create_qp_dp_rc", "datapath_setup/query_qp_dp_rc_cap",
			"RDMA_WRITE|RDMA_WRITE_WITH_IMM|SEND|SEND_WITH_IMM|RDMA_READ|ATOMIC_CMP_AND_SWP|ATOMIC_FETCH_AND_ADD|LOCAL_INV|SEND_WITH_INV",
			false, 64, 4, 256, 16, 4, 64, 316},
		{"testdata/datapath_setup.jsonl", "datapath_setup/create_qp_dp_ud", "datapath_setup/query_qp_dp_ud_cap",
			"SEND|SEND_WITH_IMM", true, 64, 2, 64, 16, 2, 85, 124},
		{"testdata/create_cmds.jsonl", "create_qp_rc_sig_pipelining", "", "RDMA_WRITE|SEND|RDMA_READ", false, 64, 1, 512, 16, 1, 113, 0},
	} {
		c := oracle.Load(t, q.file, q.create)
		var drv mlx5abi.Mlx5IbCreateQp
		u := c.Find(t, "QP", "QP_CREATE")
		for _, a := range u.Attrs {
			if a.Name == "UHW_IN" {
				copy(unsafe.Slice((*byte)(unsafe.Pointer(&drv)), unsafe.Sizeof(drv)), a.Bytes(t))
			}
		}
		want := libmlx5QPSizing(l, sendOverhead(q.ops, q.ud), q.swr, q.ssge, q.inl, q.rwr, q.rsge)
		if drv.SqWqeCount != want.sqWQEs || drv.RqWqeCount != want.rqWQEs || drv.RqWqeShift != want.rqShift ||
			want.maxSendWR != q.wantSendWR || (q.query != "" && want.maxInline != q.wantInl) {
			t.Errorf("%s: driver data sq %d rq %d shift %d, libmlx5 granted %d/%d; rules %+v", q.create,
				drv.SqWqeCount, drv.RqWqeCount, drv.RqWqeShift, q.wantSendWR, q.wantInl, want)
		}
		n["qp"]++
	}
	if n["qp"] != 28 || n["srq"] != 12 || n["invalid"] != 6 {
		t.Errorf("checked %v, want 28 QPs, 12 SRQs, 6 refused", n)
	}
}

// loadLines returns a vector file's records, raw.
func loadLines(t *testing.T, path string) []json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []json.RawMessage
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		out = append(out, json.RawMessage(l))
	}
	return out
}
