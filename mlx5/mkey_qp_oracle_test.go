package mlx5

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle/umrsig"
	"golang.org/x/sys/unix"
)

// allRCOps is the oracle's name for every RC operation: the set libmlx5
// sizes a QP for when it is given none (sq_overhead), which a program that
// posts mkey configures must name (ibv_qp_to_qp_ex needs
// IBV_QP_INIT_ATTR_SEND_OPS_FLAGS). SendOps 0 is that set here.
const allRCOps = "SEND|SEND_WITH_INV|SEND_WITH_IMM|RDMA_WRITE|RDMA_WRITE_WITH_IMM|RDMA_READ|" +
	"ATOMIC_CMP_AND_SWP|ATOMIC_FETCH_AND_ADD|LOCAL_INV|BIND_MW"

// mkeyQPDivergences are the mkey_qp records where mlx5go refuses what
// libmlx5 does, with the reason (docs/MLX5.md, "Where mlx5go differs").
var mkeyQPDivergences = map[string]string{
	"send/swr1_ssge1_inl0/post/list1": "libmlx5 writes a 3-WQEBB UMR into a 1-WQEBB ring, over its own control segment; " +
		"mlx5go refuses a work request larger than the ring",
}

// TestOracleMkeyQP: mkey_qp.jsonl, QPs made for mkey configures
// (MLX5DV_QP_EX_WITH_MKEY_CONFIGURE) with small inline sizes and few
// SGEs, and the configures libmlx5 44.0 took or refused on them (issue
// 15, item 4). Each QP is made through CreateQP with MkeyConfigure and
// the record's caps on a recording kernel that answers as the fake kernel
// answered libmlx5: the create command (mlx5_ib_create_qp's sq_wqe_count
// among its bytes), the granted caps and ibv_query_qp's must be
// libmlx5's; the QPs of other types, which libmlx5 refuses with
// EOPNOTSUPP before any command, are refused so. Then each configure
// libmlx5 posted on the QP (reset to counter 0, as the harness reset it)
// is posted through PostMkeyConfigure: the WQEBBs and the doorbell record
// must be libmlx5's, and a configure libmlx5 refused (ENOMEM: its
// translations and BSF do not fit max_inline_data + 4 bytes, or more
// entries than the mkey has) is ErrInvalid with nothing written.
func TestOracleMkeyQP(t *testing.T) {
	const file = "testdata/mkey_qp.jsonl"
	recs, order := recordsOf(t, file)
	posts := map[string][]*umrsig.Record{}
	umrsig.Read(t, file, func(r *umrsig.Record) {
		if i := strings.Index(r.Case, "/post/"); i >= 0 {
			posts[r.Case[:i]] = append(posts[r.Case[:i]], r)
		}
	})
	o := newVerbsOracle(t, file)
	c, rest := o.open("mkey_qp/base")
	var pd *PD
	o.must("mkey_qp/base: alloc_pd", callsOf(rest, "DEVICE/INVOKE_WRITE/0x3"), func() (err error) { pd, err = c.AllocPD(); return })
	var cq *CQ
	o.must("mkey_qp/base: create_cq", callsOf(rest, "CQ/CQ_CREATE"), func() (err error) { cq, err = c.CreateCQ(CQOptions{Entries: 256}); return })
	if pd == nil || cq == nil {
		t.FailNow()
	}
	n := map[string]int{}
	for _, k := range order {
		if !strings.HasSuffix(k, "/create") {
			continue
		}
		name := strings.TrimSuffix(k, "/create")
		var in struct {
			Type   string `json:"qp_type"`
			WR     int    `json:"max_send_wr"`
			SGE    int    `json:"max_send_sge"`
			Inline int    `json:"max_inline_data"`
			RWR    int    `json:"max_recv_wr"`
			RSGE   int    `json:"max_recv_sge"`
			Ops    string `json:"send_ops_flags"`
		}
		field(t, recs[k], "input", &in)
		var ret int
		field(t, recs[k], "result.ret", &ret)
		typ := map[string]QPType{"IBV_QPT_RC": QPTypeRC, "IBV_QPT_UC": QPTypeUC, "IBV_QPT_UD": QPTypeUD, "IBV_QPT_DRIVER": QPTypeDCI}[in.Type]
		opt := QPOptions{Type: typ, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: in.WR, MaxSendSGE: in.SGE, MaxInlineData: in.Inline,
			MaxRecvWR: in.RWR, MaxRecvSGE: in.RSGE, MkeyConfigure: true}
		if in.Ops != allRCOps {
			opt.SendOps = opsOf(t, typ, in.Ops)
		}
		all := o.of(k)
		var qp *QP
		err := o.do(k, callsOf(all, "MLX5_UAR/UAR_OBJ_ALLOC", "mmap", "QP/QP_CREATE"), func() (err error) { qp, err = c.CreateQP(opt); return })
		if ret != 0 {
			if !errors.Is(err, unix.Errno(ret)) || ret == int(unix.EOPNOTSUPP) && !errors.Is(err, ErrUnsupported) || len(all) != 0 {
				t.Errorf("%s: %v; libmlx5 failed with errno %d before any command", k, err, ret)
			} else {
				n["QP refused"]++
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", k, err)
			continue
		}
		var lib struct {
			SQ struct {
				WQECnt int `json:"wqe_cnt"`
			} `json:"sq"`
			After struct {
				MaxSendWR int `json:"max_send_wr"`
			} `json:"cap_after_create"`
			Query sendCaps `json:"query_init_attr_cap"`
		}
		field(t, recs[k], "result", &lib)
		caps := qp.Caps()
		if got, want := [4]int{len(qp.sq.slots), caps.MaxSendWR, caps.MaxSendSGE, caps.MaxInlineData},
			[4]int{lib.SQ.WQECnt, lib.Query.MaxSendWR, lib.Query.MaxSendSGE, lib.Query.MaxInlineData}; got != want {
			t.Errorf("%s: send queue of %d WQEBBs, caps MaxSendWR %d, MaxSendSGE %d, MaxInlineData %d; libmlx5 %v", k, got[0], got[1], got[2], got[3], want)
		} else {
			n["QP geometry and caps"]++
		}
		// ibv_create_qp hands back libmlx5's max_send_wr; its
		// max_inline_data is the fake kernel's (zero).
		if lib.After.MaxSendWR != caps.MaxSendWR {
			t.Errorf("%s: MaxSendWR %d; ibv_create_qp handed back %d", k, caps.MaxSendWR, lib.After.MaxSendWR)
		}
		o.query(k+": query", callsOf(all, "DEVICE/INVOKE_WRITE/0x19"), qp, lib.Query)
		for _, r := range posts[name] {
			if postAsRecorded(t, qp, r) {
				n["configure"]++
			}
		}
		o.must(name+"/destroy", o.of(name+"/destroy"), qp.Close)
	}
	o.must("teardown", o.of("teardown"), func() error {
		if err := cq.Close(); err != nil {
			return err
		}
		if err := pd.Close(); err != nil {
			return err
		}
		return c.Close()
	})
	o.expect(map[string]int{"UAR_OBJ_ALLOC": 2, "mmap": 2, "GET_CONTEXT": 1, "QUERY_DEVICE_EX": 1, "QUERY_PORT": 1,
		"ALLOC_PD": 1, "CQ_CREATE": 1, "QP_CREATE": 9, "QUERY_QP": 9, "QP_DESTROY": 9, "CQ_DESTROY": 1, "PD_DESTROY": 1,
		"UAR_OBJ_DESTROY": 2})
	if want := map[string]int{"QP refused": 3, "QP geometry and caps": 9, "configure": 32}; !mapsEqual(n, want) {
		t.Errorf("%v, want %v", n, want)
	}
	t.Logf("%v", n)
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// postAsRecorded posts the configure of r on qp, moved back to counter 0
// as the harness moved libmlx5's QP (RESET, its small fence consumed, the
// queue zeroed), and compares what it leaves with what libmlx5 left.
func postAsRecorded(t *testing.T, qp *QP, r *umrsig.Record) bool {
	t.Helper()
	in, ok, err := r.Configure()
	if err != nil || !ok {
		t.Fatalf("%s: %v (expressible %v)", r.Case, err, ok)
	}
	qp.restart()
	qp.sq.fm = false
	clear(qp.sq.ring)
	m := &Mkey{c: qp.c, lkey: in.Mkey, rkey: in.Mkey, maxEntries: r.Input.Mkey.MaxEntries,
		sigMkey: r.Input.Mkey.BlockSignature, sentErrs: ^uint32(0), name: mkeyName(in.Mkey)}
	psv, err := r.PSVIndexes()
	if err != nil {
		t.Fatal(err)
	}
	if len(psv) == 2 {
		m.psvIndex = [2]uint32{psv[0], psv[1]}
	}
	err = qp.PostMkeyConfigure(configureWR(r, &in, m))
	if why, ok := mkeyQPDivergences[r.Case]; ok {
		r.Result.WRComplete = int(unix.EINVAL)
		t.Logf("%s: %s: %v", r.Case, why, err)
	}
	if r.Result.WRComplete != 0 {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: libmlx5 failed (errno %d), post: %v", r.Case, r.Result.WRComplete, err)
			return false
		}
		if qp.sq.pi != 0 || !bytes.Equal(qp.sq.ring, make([]byte, len(qp.sq.ring))) || qp.sq.bell.Counter() != 0 {
			t.Errorf("%s: the refused post wrote to the queue", r.Case)
			return false
		}
		return true
	}
	if err != nil {
		t.Errorf("%s: %v", r.Case, err)
		return false
	}
	want, err := r.WQEBBs()
	if err != nil {
		t.Fatal(err)
	}
	ok = int(qp.sq.pi) == len(want) && int(qp.sq.bell.Counter()) == r.DBRec.Send
	if !ok {
		t.Errorf("%s: %d WQEBBs, doorbell record %d; libmlx5 %d, %d", r.Case, qp.sq.pi, qp.sq.bell.Counter(), len(want), r.DBRec.Send)
	}
	for i, w := range want {
		if g := qp.sq.ring.Slot(uint16(i)); !bytes.Equal(g, w) {
			t.Errorf("%s: WQEBB %d\n got %x\nwant %x", r.Case, i, g, w)
			ok = false
		}
	}
	return ok
}
