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

// The driver's queue sizing (sizing.go's sqSize and rqSize, srq.go's
// srqSize) checked against every QP and SRQ libmlx5 44.0 made in the
// oracle: the verbs family's RC sizing, UC and SRQ cases, and the QPs of
// datapath_setup and create_cmds. The driver data's sq_wqe_count,
// rq_wqe_count and rq_wqe_shift, the caps the create and ibv_query_qp
// granted, and the refusals must all come out as libmlx5's.

func limitsOf(r *mlx5abi.Mlx5IbAllocUcontextResp) (deviceLimits, int) {
	return deviceLimits{maxSQDesc: int(r.MaxSqDescSz), maxRQDesc: int(r.MaxRqDescSz), maxSendWQEBB: int(r.MaxSendWqebb),
		maxRecvWR: int(r.MaxRecvWr)}, int(r.MaxSrqRecvWr)
}

// opsOf parses the oracle's send_ops_flags names (ibv_create_qp's
// defaults when empty).
func opsOf(t *testing.T, typ QPType, names string) OpcodeSet {
	if names == "" {
		return defaultOps(typ)
	}
	byName := map[string]Opcode{"SEND": OpSend, "SEND_WITH_IMM": OpSendImm, "SEND_WITH_INV": OpSendInv,
		"RDMA_WRITE": OpRDMAWrite, "RDMA_WRITE_WITH_IMM": OpRDMAWriteImm, "RDMA_READ": OpRDMARead,
		"ATOMIC_CMP_AND_SWP": OpAtomicCAS, "ATOMIC_FETCH_AND_ADD": OpAtomicFAA, "LOCAL_INV": OpLocalInv}
	var s OpcodeSet
	for _, n := range strings.Split(names, "|") {
		op, ok := byName[n]
		if !ok {
			t.Fatalf("send op %q", n)
		}
		s |= Opcodes(op)
	}
	return s
}

// qpSizing is what the driver makes of a QP's caps.
type qpSizing struct {
	invalid                bool // refused before any kernel command
	sqWQEs, maxSendWR      uint32
	maxInline              uint32
	rqWQEs, rqStride       uint32
	rqShift, maxRecvSGE    uint32
	grantedRecvWR, sendSGE uint32
}

func driverQPSizing(l deviceLimits, typ QPType, ops OpcodeSet, sendWR, sendSGE, inline, recvWR, recvSGE uint32) qpSizing {
	sq, err := sqSize(&l, typ, ops, int(sendWR), int(sendSGE), int(inline))
	if err != nil {
		return qpSizing{invalid: true}
	}
	rq, err := rqSize(&l, int(recvWR), int(recvSGE))
	if err != nil {
		return qpSizing{invalid: true}
	}
	s := qpSizing{sendSGE: sendSGE, sqWQEs: uint32(sq.wqeCnt), maxSendWR: uint32(sq.maxPost), maxInline: uint32(sq.maxInline),
		rqWQEs: uint32(rq.wqeCnt), rqShift: uint32(rq.wqeShift), maxRecvSGE: uint32(rq.maxSGE), grantedRecvWR: uint32(rq.maxPost)}
	if rq.wqeCnt > 0 {
		s.rqStride = 1 << rq.wqeShift
	}
	return s
}

// srqSizing is what the driver makes of an SRQ's size: the max_wr it
// sends the kernel (the ring, with its wait queue), the max_wr it grants,
// the SGEs its stride holds.
type srqSizing struct {
	invalid                   bool
	kernelMaxWR, grantedMaxWR uint32
	maxSGE, stride            uint32
}

func TestOracleLibmlx5QueueSizing(t *testing.T) {
	calls := loadCalls(t, "testdata/verbs_cases.jsonl")
	var resp mlx5abi.Mlx5IbAllocUcontextResp
	b := findCall(t, calls, "verbs/base", "DEVICE", "GET_CONTEXT").attr(t, "UHW_OUT").out(t)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&resp)), unsafe.Sizeof(resp)), b)
	l, maxSRQ := limitsOf(&resp)
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
			typ, ops := QPTypeRC, ""
			if in.API == "ibv_create_qp_ex" {
				ops = in.SendOpsFlags
			}
			if name == "uc/create" {
				typ = QPTypeUC
			}
			want := driverQPSizing(l, typ, opsOf(t, typ, ops), in.MaxSendWR, in.MaxSendSGE, in.MaxInline, in.MaxRecvWR, in.MaxRecvSGE)
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
			var want srqSizing
			if in := r.Input; in.MaxWR < 1 || int(in.MaxWR) > maxSRQ || int(in.MaxSGE) > l.maxRQDesc/dataSegSize {
				want.invalid = true
			} else {
				g := srqSize(maxSRQ, int(in.MaxWR), int(in.MaxSGE))
				want = srqSizing{kernelMaxWR: uint32(g.wqes - 1), grantedMaxWR: uint32(g.maxPost), maxSGE: uint32(g.maxSGE), stride: uint32(g.stride)}
			}
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
		typ                 QPType
		swr, ssge, inl, rwr uint32
		rsge                uint32
		wantSendWR, wantInl uint32
	}{
		{"testdata/datapath_setup.jsonl", "datapath_setup/create_qp_dp_rc", "datapath_setup/query_qp_dp_rc_cap",
			"RDMA_WRITE|RDMA_WRITE_WITH_IMM|SEND|SEND_WITH_IMM|RDMA_READ|ATOMIC_CMP_AND_SWP|ATOMIC_FETCH_AND_ADD|LOCAL_INV|SEND_WITH_INV",
			QPTypeRC, 64, 4, 256, 16, 4, 64, 316},
		{"testdata/datapath_setup.jsonl", "datapath_setup/create_qp_dp_ud", "datapath_setup/query_qp_dp_ud_cap",
			"SEND|SEND_WITH_IMM", QPTypeUD, 64, 2, 64, 16, 2, 85, 124},
		{"testdata/create_cmds.jsonl", "create_qp_rc_sig_pipelining", "", "RDMA_WRITE|SEND|RDMA_READ", QPTypeRC, 64, 1, 512, 16, 1, 113, 0},
	} {
		c := oracle.Load(t, q.file, q.create)
		var drv mlx5abi.Mlx5IbCreateQp
		u := c.Find(t, "QP", "QP_CREATE")
		for _, a := range u.Attrs {
			if a.Name == "UHW_IN" {
				copy(unsafe.Slice((*byte)(unsafe.Pointer(&drv)), unsafe.Sizeof(drv)), a.Bytes(t))
			}
		}
		want := driverQPSizing(l, q.typ, opsOf(t, q.typ, q.ops), q.swr, q.ssge, q.inl, q.rwr, q.rsge)
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
