package mlx5

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/internal/oracle/sigattr"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// mkeyCheckRecord is one record of the oracle's mkey_check.jsonl: CQEs the
// harness wrote into a CQ after configuring a signature mkey, what
// ibv_poll_cq returned and what mlx5dv_mkey_check said.
type mkeyCheckRecord struct {
	Case  string `json:"case"`
	Input struct {
		Attr sigattr.Attr `json:"sig_block_attr"`
		LKey string       `json:"mkey_lkey"`
		CQ   struct {
			Count int    `json:"cqe_cnt"`
			CI    uint32 `json:"consumer_index_before"`
		} `json:"cq"`
		CQEs []struct {
			Index int    `json:"index"`
			Hex   string `json:"hex"`
		} `json:"cqes_written"`
	} `json:"input"`
	Result struct {
		PollRet int `json:"poll_cq_ret"`
		WCs     []struct {
			WrID    uint64 `json:"wr_id"`
			Status  int    `json:"status"`
			Opcode  int    `json:"opcode"`
			QPN     uint32 `json:"qp_num"`
			ByteLen uint32 `json:"byte_len"`
		} `json:"wcs"`
		Check struct {
			Ret      int    `json:"ret"`
			Type     int    `json:"err_type_value"`
			Actual   string `json:"actual_value"`
			Expected string `json:"expected_value"`
			Offset   string `json:"offset"`
		} `json:"mkey_check"`
		Second *struct {
			Ret  int    `json:"ret"`
			Type string `json:"err_type"`
		} `json:"second_mkey_check"`
	} `json:"result"`
	// Next is the configure the harness posted after the poll.
	Next struct {
		SQ struct {
			WQEBBs []struct {
				Index int    `json:"index"`
				Hex   string `json:"hex"`
			} `json:"wqebbs"`
		} `json:"sq"`
	} `json:"next_umr_after_error"`
}

// Poll and Mkey.Check, on the CQEs the oracle wrote, give what libmlx5's
// ibv_poll_cq and mlx5dv_mkey_check gave: the SIG_ERR CQE is no
// completion, its report decodes against the mkey's signature block, a
// second check finds nothing (or the same EINVAL). Then the mkey's next
// configure is libmlx5's, byte for byte: after a signature error it
// updates the counter and posts the SET_PSVs again.
func TestOracleMkeyCheck(t *testing.T) {
	data, err := os.ReadFile("testdata/mkey_check.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r mkeyCheckRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		n++
		t.Run(r.Case, func(t *testing.T) { mkeyCheckCase(t, &r) })
	}
	if n != 18 {
		t.Errorf("%d records, want the oracle's 18", n)
	}
}

// checkSGE is the layout of every mkey of the oracle's mkey_check cases
// (its sig.c, run_check_case): 4096 bytes of the harness's only MR, at its
// fixed address, with the first MR key the fake kernel gives out.
var checkSGE = KLM{Addr: 0x7e5a00000000, ByteCount: 4096, Mkey: 0x2001 << 8}

func mkeyCheckCase(t *testing.T, r *mkeyCheckRecord) {
	attr, err := r.Input.Attr.BlockAttr()
	if err != nil {
		t.Fatal(err)
	}
	key, err := sigattr.Num(r.Input.LKey)
	if err != nil {
		t.Fatal(err)
	}
	next := make([][]byte, len(r.Next.SQ.WQEBBs))
	for i, w := range r.Next.SQ.WQEBBs {
		if next[i], err = hex.DecodeString(w.Hex); err != nil {
			t.Fatal(err)
		}
	}
	// The PSV indexes vary: the first SET_PSV of the next UMR names one;
	// libmlx5 made the memory domain's, then the wire domain's.
	var memPSV, wirePSV uint32
	if len(next) > 3 && next[3][3] == wqe.OpcodeSetPSV {
		p := binary.BigEndian.Uint32(next[3][16:]) & 0xffffff
		memPSV, wirePSV = p, p+1
		if attr.Mem == nil {
			memPSV, wirePSV = p-1, p
		}
	}

	c := &Context{devx: true}
	m := &Mkey{c: c, sigMkey: true, lkey: uint32(key), rkey: uint32(key), maxEntries: 4, psvIndex: [2]uint32{memPSV, wirePSV},
		sentErrs: ^uint32(0), name: mkeyName(uint32(key))}
	c.addMkey(m)
	cq := testCQ(t, c, r.Input.CQ.Count, r.Input.CQ.CI)
	qp, _ := testQP(t, c, 1024) // the harness's main_rc: 1024 WQEBBs, QPN 0x1a2
	qp.sq.maxWQE, qp.mkeyConf, qp.sq.maxInline = 1024, true, mainQPInline
	cq.attachLocked(qp)

	// The harness's configure: access, the layout, the case's signature
	// block, signaled, wr_id 85.
	if err := qp.PostMkeyConfigure(&MkeyConfigureWR{WrID: 85, Mkey: m, Flags: SendSignaled, SetAccess: true,
		Access: AccessLocalWrite, List: []KLM{checkSGE}, Sig: attr}); err != nil {
		t.Fatal(err)
	}
	for _, w := range r.Input.CQEs {
		b, err := hex.DecodeString(w.Hex)
		if err != nil {
			t.Fatal(err)
		}
		copy(cq.ring[w.Index*cqeSize:], b)
	}

	if me, err := m.Check(); err != nil || !me.OK() {
		t.Errorf("check before polling: %v %v", me, err)
	}
	wc := make([]Completion, 4)
	got, err := cq.Poll(wc)
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	if got != r.Result.PollRet {
		t.Fatalf("poll: %d completions, libmlx5 %d", got, r.Result.PollRet)
	}
	for i, w := range r.Result.WCs {
		g := wc[i]
		if g.WrID != w.WrID || int(g.Status) != w.Status || int(g.Opcode) != w.Opcode || g.QPN != w.QPN || g.ByteLen != w.ByteLen {
			t.Errorf("completion %d: %+v, libmlx5 %+v", i, g, w)
		}
	}
	if want := r.Input.CQ.CI + uint32(len(r.Input.CQEs)); cq.ci != want {
		t.Errorf("consumer index %d after poll, want %d", cq.ci, want)
	}

	checkAgainst(t, m, r)

	// The next configure, as the harness posted it: the QP reset (which
	// zeroes its producer counter, and a SEND that consumed the small
	// fence), the ring zeroed, then a layout-only configure. After a
	// signature error it updates the counter and posts the block's
	// SET_PSVs again; libmlx5's bytes, every one.
	clear(qp.sq.ring)
	clear(qp.sq.slots)
	qp.sq.pi, qp.sq.reported, qp.sq.fm = 0, 0, false
	qp.sq.tail.Store(0)
	if err := qp.PostMkeyConfigure(&MkeyConfigureWR{WrID: 86, Mkey: m, List: []KLM{checkSGE}}); err != nil {
		t.Fatalf("the next configure: %v", err)
	}
	if int(qp.sq.pi) != len(next) {
		t.Errorf("the next configure took %d WQEBBs, libmlx5 %d", qp.sq.pi, len(next))
	}
	for i, w := range next {
		if g := qp.sq.ring.Slot(uint16(i)); !bytes.Equal(g, w) {
			t.Errorf("next configure, WQEBB %d\n got %x\nwant %x", i, g, w)
		}
	}
}

// checkAgainst compares Mkey.Check with mlx5dv_mkey_check's answers.
func checkAgainst(t *testing.T, m *Mkey, r *mkeyCheckRecord) {
	t.Helper()
	me, err := m.Check()
	if r.Result.Check.Ret != 0 {
		if !errors.Is(err, unix.Errno(r.Result.Check.Ret)) {
			t.Errorf("check: %v %v, libmlx5 errno %d", me, err, r.Result.Check.Ret)
		}
		// libmlx5 returns before it clears the report: it stays.
		if _, err := m.Check(); !errors.Is(err, unix.Errno(r.Result.Check.Ret)) {
			t.Errorf("second check: %v, want the same errno %d: the report is kept", err, r.Result.Check.Ret)
		}
		return
	}
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	num := func(s string) uint64 {
		v, err := sigattr.Num(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := sig.MkeyErr{Type: sig.MkeyErrType(r.Result.Check.Type)}
	if want.Type != sig.MkeyNoErr {
		want.Actual, want.Expected, want.Offset = num(r.Result.Check.Actual), num(r.Result.Check.Expected), num(r.Result.Check.Offset)
	}
	if me.Type != want.Type || me.Actual != want.Actual || me.Expected != want.Expected || me.Offset != want.Offset {
		t.Errorf("check: %v, libmlx5 %v", me, want)
	}
	if r.Result.Second != nil {
		if me, err := m.Check(); err != nil || !me.OK() {
			t.Errorf("second check: %v %v, want no error", me, err)
		}
	}
}

// testCQ is a CQ of n CQEs in Go memory (no device), consumer index ci,
// initialised as CreateCQ does.
func testCQ(t testing.TB, c *Context, n int, ci uint32) *CQ {
	t.Helper()
	b, err := AllocBuffer(n*cqeSize + 4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cq := &CQ{c: c, ring: b.Bytes()[:n*cqeSize], ci: ci}
	for cq.logSize = 0; 1<<cq.logSize < n; cq.logSize++ {
	}
	for i := 0; i < n*cqeSize; i += cqeSize {
		wqe.InitCQE(cq.ring[i : i+cqeSize])
	}
	rec := b.Bytes()[n*cqeSize:]
	if cq.db, err = doorbell.NewCQ(rec[:8], rec[64:], 0x401); err != nil {
		t.Fatal(err)
	}
	m := map[uint32]*QP{}
	cq.qps.Store(&m)
	cq.g.open()
	return cq
}
