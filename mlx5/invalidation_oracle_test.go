package mlx5

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/oracle/sigattr"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// invalidationRecord is a local_inv/* record of testdata/invalidation.jsonl:
// steps libmlx5 took on one mkey of the harness's main QP, in order.
type invalidationRecord struct {
	Case  string `json:"case"`
	Input struct {
		Mkey struct {
			CreateFlags string `json:"create_flags"`
			LKey        string `json:"lkey"`
		} `json:"mkey"`
		SGE struct {
			Addr   string `json:"addr"`
			Length uint32 `json:"length"`
			LKey   string `json:"lkey"`
		} `json:"sge"`
	} `json:"input"`
	QP struct {
		QPN    uint32 `json:"qpn"`
		WQECnt int    `json:"sq_wqe_cnt"`
	} `json:"qp"`
	Steps []invalidationStep `json:"steps"`
}

type invalidationStep struct {
	Step      string        `json:"step"`
	Op        string        `json:"op"`
	WrID      uint64        `json:"wr_id"`
	WrFlags   uint32        `json:"wr_flags"`
	ConfFlags uint32        `json:"conf_flags"`
	SetAccess bool          `json:"set_access"`
	Access    uint32        `json:"access_flags"`
	SetLayout bool          `json:"set_layout_list"`
	SetSig    bool          `json:"set_sig_block"`
	Attr      *sigattr.Attr `json:"sig_block_attr"`
	InvKey    string        `json:"invalidate_rkey"`
	CQEIndex  uint32        `json:"cqe_index"`
	CQE       string        `json:"cqe"`
	PollRet   int           `json:"poll_cq_ret"`
	ErrType   int           `json:"err_type_value"`
	Actual    string        `json:"actual_value"`
	Expected  string        `json:"expected_value"`
	Offset    string        `json:"offset"`
	Ret       int           `json:"ret"`
	PIBefore  int           `json:"sq_pi_before"`
	PIAfter   int           `json:"sq_pi_after"`
	SQ        struct {
		WQEBBs []struct {
			Index int    `json:"index"`
			Hex   string `json:"hex"`
		} `json:"wqebbs"`
	} `json:"sq"`
	DBRec struct {
		Send int `json:"send_counter"`
	} `json:"dbrec"`
	BF struct {
		Writes []struct {
			Hex string `json:"hex"`
		} `json:"writes"`
	} `json:"bf"`
}

// TestOracleLocalInvSequences replays the oracle's LOCAL_INV sequences
// through the driver: each configure through PostMkeyConfigure, each
// LOCAL_INV through PostSend (OpLocalInv), the SIG_ERR CQE through Poll,
// each mlx5dv_mkey_check through Check, on one QP whose producer counter
// and small fence carry from step to step as libmlx5's did. Every step
// leaves libmlx5's WQEBBs, doorbell record and UAR write, byte for byte:
// a signature mkey's LOCAL_INV is the same 2-WQEBB UMR as any key's and
// arms the small fence, and it changes nothing of what the driver keeps
// of the mkey: the next configure without a signature block posts no BSF
// (the device keeps the mkey's BSF across the invalidation), a signature
// error polled before the LOCAL_INV still makes the next configure update
// the counter and post the SET_PSVs again, and Check still reports it.
func TestOracleLocalInvSequences(t *testing.T) {
	n, steps := 0, 0
	oracle.Lines(t, "testdata/invalidation.jsonl", func(line []byte) {
		var r invalidationRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r.Case, "local_inv/") {
			return
		}
		n++
		steps += len(r.Steps)
		t.Run(r.Case, func(t *testing.T) { localInvSequence(t, &r) })
	})
	t.Logf("%d sequences, %d steps", n, steps)
	if n != 5 || steps != 22 {
		t.Errorf("%d sequences of %d steps, want the oracle's 5 of 22", n, steps)
	}
}

func localInvSequence(t *testing.T, r *invalidationRecord) {
	num := func(s string) uint64 {
		v, err := sigattr.Num(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	key := uint32(num(r.Input.Mkey.LKey))
	sge := KLM{Addr: num(r.Input.SGE.Addr), ByteCount: r.Input.SGE.Length, Mkey: uint32(num(r.Input.SGE.LKey))}
	sigMkey := strings.Contains(r.Input.Mkey.CreateFlags, "BLOCK_SIGNATURE")

	c := &Context{devx: true}
	m := &Mkey{c: c, sigMkey: sigMkey, lkey: key, rkey: key, maxEntries: 4, sentErrs: ^uint32(0), name: mkeyName(key)}
	if sigMkey {
		// The PSV indexes vary: the first configure's SET_PSVs name them,
		// the memory domain's first.
		var psv []uint32
		for _, w := range r.Steps[0].SQ.WQEBBs {
			b := unhex(t, w.Hex)
			if b[3] == wqe.OpcodeSetPSV {
				psv = append(psv, binary.BigEndian.Uint32(b[16:])&0xffffff)
			}
		}
		if len(psv) != 2 {
			t.Fatalf("the first configure has %d SET_PSVs, want 2", len(psv))
		}
		m.psvIndex = [2]uint32{psv[0], psv[1]}
	}
	c.addMkey(m)
	const cqEntries = 256 // the harness's main CQ
	qp, uar := testQP(t, c, r.QP.WQECnt)
	qp.qpn, qp.sq.maxWQE, qp.mkeyConf, qp.sq.maxInline = r.QP.QPN, r.QP.WQECnt, true, mainQPInline
	var cq *CQ

	for i := range r.Steps {
		s := &r.Steps[i]
		if int(qp.sq.pi) != s.PIBefore {
			t.Fatalf("step %d (%s): producer counter %d, libmlx5 %d", i, s.Step, qp.sq.pi, s.PIBefore)
		}
		clear(uar[doorbell.BlueFlameOffset : doorbell.BlueFlameOffset+2*benchBFSize])
		half := doorbell.BlueFlameOffset + qp.sq.bell.Half()
		var err error
		switch {
		case s.Op == "mlx5dv_wr_mkey_configure":
			wr := &MkeyConfigureWR{WrID: s.WrID, Mkey: m, Flags: SendFlags(s.WrFlags), SetAccess: s.SetAccess,
				Access: AccessFlags(s.Access), ResetSig: s.ConfFlags&1 != 0}
			if s.SetLayout {
				wr.List = []KLM{sge}
			}
			if s.SetSig {
				if wr.Sig, err = s.Attr.BlockAttr(); err != nil {
					t.Fatal(err)
				}
			}
			err = qp.PostMkeyConfigure(wr)
		case strings.Contains(s.Op, "LOCAL_INV") || s.Op == "ibv_wr_local_inv":
			err = qp.PostSend(&SendWR{WrID: s.WrID, Opcode: OpLocalInv, Flags: SendFlags(s.WrFlags), InvalidateKey: uint32(num(s.InvKey))})
		case strings.HasPrefix(s.Op, "SIG_ERR CQE"):
			b := unhex(t, s.CQE)
			// A consumer index at the CQE's slot whose lap gives the
			// owner bit the harness wrote.
			if cq == nil {
				cq = testCQ(t, c, cqEntries, s.CQEIndex+cqEntries*uint32(b[63]&1))
				cq.attachLocked(qp)
			}
			copy(cq.ring[s.CQEIndex*cqeSize:], b)
			wc := make([]Completion, 2)
			got, err := cq.Poll(wc)
			if err != nil || got != s.PollRet {
				t.Fatalf("step %d (%s): poll %d, %v; libmlx5 %d", i, s.Step, got, err, s.PollRet)
			}
			continue
		case s.Op == "mlx5dv_mkey_check":
			me, err := m.Check()
			want := sig.MkeyErr{Type: sig.MkeyErrType(s.ErrType), Actual: num(s.Actual), Expected: num(s.Expected), Offset: num(s.Offset)}
			if err != nil || me.Type != want.Type || me.Actual != want.Actual || me.Expected != want.Expected || me.Offset != want.Offset {
				t.Errorf("step %d (%s): %+v %v, libmlx5 %+v", i, s.Step, me, err, want)
			}
			continue
		default:
			t.Fatalf("step %d: unknown op %q", i, s.Op)
		}
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, s.Step, err)
		}
		if int(qp.sq.pi) != s.PIAfter || int(qp.sq.bell.Counter()) != s.DBRec.Send {
			t.Errorf("step %d (%s): producer counter %d, doorbell record %d; libmlx5 %d, %d", i, s.Step, qp.sq.pi, qp.sq.bell.Counter(), s.PIAfter, s.DBRec.Send)
		}
		for j, w := range s.SQ.WQEBBs {
			if g := qp.sq.ring.Slot(uint16(s.PIBefore + j)); !bytes.Equal(g, unhex(t, w.Hex)) {
				t.Errorf("step %d (%s): WQEBB %d\n got %x\nwant %s", i, s.Step, s.PIBefore+j, g, w.Hex)
			}
		}
		if len(s.BF.Writes) != 1 {
			t.Fatalf("step %d (%s): %d UAR writes recorded", i, s.Step, len(s.BF.Writes))
		}
		w := unhex(t, s.BF.Writes[0].Hex)
		reg := uar[half : half+benchBFSize]
		if !bytes.Equal(reg[:len(w)], w) || !bytes.Equal(reg[len(w):], make([]byte, len(reg)-len(w))) {
			t.Errorf("step %d (%s): UAR write\n got %x\nwant %x", i, s.Step, reg, w)
		}
	}
	// Nothing past the last WQE.
	for j := int(qp.sq.pi); j < r.QP.WQECnt; j++ {
		if g := qp.sq.ring.Slot(uint16(j)); !bytes.Equal(g, make([]byte, wqe.WQEBB)) {
			t.Errorf("WQEBB %d written past the producer counter: %x", j, g)
		}
	}
}

// unhex is internal/oracle's, by the name these tests use.
var unhex = oracle.Unhex

// LOCAL_INV is an RC and UC operation, as libmlx5's
// (MLX5_SUPPORTED_SEND_OPS_FLAGS_UD has SEND and SEND_WITH_IMM alone, and
// a UD QP gets no wr_local_inv): on a UD QP it is refused before anything
// is written. SEND with invalidate is RC's alone (the IB transport has no
// UC opcode for it).
func TestInvalidationQPTypes(t *testing.T) {
	for _, c := range []struct {
		typ QPType
		op  Opcode
		ok  bool
	}{
		{QPTypeRC, OpLocalInv, true}, {QPTypeUC, OpLocalInv, true}, {QPTypeUD, OpLocalInv, false},
		{QPTypeRC, OpSendInv, true}, {QPTypeUC, OpSendInv, false}, {QPTypeUD, OpSendInv, false},
	} {
		qp, _ := testQP(t, &Context{}, 8)
		qp.typ, qp.sq.maxWQE = c.typ, 8
		err := qp.PostSend(&SendWR{Opcode: c.op, InvalidateKey: 0x1234500, SGL: []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}})
		if c.ok {
			if err != nil {
				t.Errorf("%v on %v: %v", c.op, c.typ, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || qp.sq.pi != 0 || !bytes.Equal(qp.sq.ring, make([]byte, len(qp.sq.ring))) {
			t.Errorf("%v on %v: %v, producer counter %d: want ErrInvalid and nothing written", c.op, c.typ, err, qp.sq.pi)
		}
	}
}
