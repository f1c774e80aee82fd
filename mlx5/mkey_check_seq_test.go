package mlx5

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle/sigattr"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// mkeyCheckSeqRecord is one record of testdata/mkey_check_seq.jsonl (an
// added oracle case; provenance in testdata/README.md): a signature mkey
// configured on the harness's main QP, then SIG_ERR CQEs written into the
// CQ, polls and mlx5dv_mkey_check calls in order, each with libmlx5's
// result, then a layout-only configure of the mkey.
type mkeyCheckSeqRecord struct {
	Case  string `json:"case"`
	Input struct {
		Attr sigattr.Attr `json:"sig_block_attr"`
		LKey string       `json:"mkey_lkey"`
		CQ   struct {
			Count int    `json:"cqe_cnt"`
			CI    uint32 `json:"consumer_index_before"`
		} `json:"cq"`
	} `json:"input"`
	Steps []seqStep `json:"steps"`
	Next  struct {
		SQ struct {
			WQEBBs []struct {
				Hex string `json:"hex"`
			} `json:"wqebbs"`
		} `json:"sq"`
	} `json:"next_configure"`
}

// seqStep is a step of a sequence: "sigerr_cqe" (Index, Hex), "poll"
// (Ret, WCs) or "check" (Ret and, for 0, the error).
type seqStep struct {
	Step     string            `json:"step"`
	Index    int               `json:"index"`
	Hex      string            `json:"hex"`
	Ret      int               `json:"ret"`
	WCs      []json.RawMessage `json:"wcs"`
	Type     int               `json:"err_type_value"`
	Actual   string            `json:"actual_value"`
	Expected string            `json:"expected_value"`
	Offset   string            `json:"offset"`
}

// checkAnswer is what a Check gives: an errno, or a decoded error (the
// fields mlx5dv_mkey_check reports).
type checkAnswer struct {
	errno                    unix.Errno
	typ                      sig.MkeyErrType
	actual, expected, offset uint64
}

func (a checkAnswer) String() string {
	if a.errno != 0 {
		return fmt.Sprintf("errno %d (%v)", int(a.errno), a.errno)
	}
	if a.typ == sig.MkeyNoErr {
		return a.typ.String()
	}
	return fmt.Sprintf("%v actual %#x expected %#x offset %#x", a.typ, a.actual, a.expected, a.offset)
}

func answerOf(me sig.MkeyErr) checkAnswer {
	return checkAnswer{typ: me.Type, actual: me.Actual, expected: me.Expected, offset: me.Offset}
}

func (s *seqStep) answer(t *testing.T) checkAnswer {
	t.Helper()
	if s.Ret != 0 {
		return checkAnswer{errno: unix.Errno(s.Ret)}
	}
	num := func(v string) uint64 {
		n, err := sigattr.Num(v)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := checkAnswer{typ: sig.MkeyErrType(s.Type)}
	if a.typ != sig.MkeyNoErr {
		a.actual, a.expected, a.offset = num(s.Actual), num(s.Expected), num(s.Offset)
	}
	return a
}

// cqeKey is a SIG_ERR CQE without what varies between records (the
// mkey's key and the owner bit).
func cqeKey(t *testing.T, h string) string {
	t.Helper()
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != cqeSize {
		t.Fatalf("CQE %q: %v", h, err)
	}
	clear(b[36:40])
	b[63] &^= 1
	return string(b)
}

// seqDifferences are the sequences where Mkey.Check answers differently
// from libmlx5 44.0, as docs/MLX5.md's differences table says: libmlx5
// keeps the last SIG_ERR report polled, mlx5 the first one until a Check
// reads it (mlx5dv_mkey_check(3)).
var seqDifferences = []string{
	"seq/einval_unchecked_then_error",
	"seq/error_then_einval",
	"seq/three_errors_one_poll",
	"seq/two_errors_one_poll",
	"seq/two_errors_two_polls",
}

// TestOracleMkeyCheckSequences replays the oracle's sequences of several
// SIG_ERR CQEs of one mkey, polls and checks. libmlx5 keeps the last
// report polled; the man page says the first error is reported to the
// mkey and kept there until the application queries it, and mlx5 follows
// the man page: a report stays until a Check reads it, whatever arrives
// after it; a report Check cannot decode (EINVAL) stays too, as
// libmlx5 keeps it, but once read it gives way to the next. Each of
// mlx5's answers is libmlx5's decoding of the CQE the rule picks (taken
// from the record where libmlx5 reported that CQE). The polls are
// libmlx5's, and so is the configure after the errors, byte for byte: one
// counter step per SIG_ERR CQE, whether kept or not.
func TestOracleMkeyCheckSequences(t *testing.T) {
	data, err := os.ReadFile("testdata/mkey_check_seq.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var recs []mkeyCheckSeqRecord
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r mkeyCheckSeqRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 7 {
		t.Fatalf("%d records, want the oracle's 7", len(recs))
	}
	libmlx5 := libmlx5Answers(t, recs)
	var differ []string
	for i := range recs {
		r := &recs[i]
		t.Run(r.Case, func(t *testing.T) {
			if mkeyCheckSeqCase(t, r, libmlx5) {
				differ = append(differ, r.Case)
			}
		})
	}
	slices.Sort(differ)
	if !slices.Equal(differ, seqDifferences) {
		t.Errorf("mlx5 answers differently from libmlx5 in %q, want exactly in %q", differ, seqDifferences)
	}
}

// libmlx5Answers replays each record with libmlx5's rule (cq.c keeps the
// last SIG_ERR CQE polled; mlx5dv_mkey_check clears the report when it
// decodes it, keeps it when it returns EINVAL) and returns libmlx5's
// answer for each CQE it reported. It checks that the rule gives every
// answer the records have: the CQE each check reported is the one the
// rule says.
func libmlx5Answers(t *testing.T, recs []mkeyCheckSeqRecord) map[string]checkAnswer {
	t.Helper()
	answers := map[string]checkAnswer{}
	for _, r := range recs {
		var unpolled []string
		last := ""
		for i := range r.Steps {
			s := &r.Steps[i]
			switch s.Step {
			case "sigerr_cqe":
				unpolled = append(unpolled, cqeKey(t, s.Hex))
			case "poll":
				if len(unpolled) > 0 {
					last = unpolled[len(unpolled)-1]
				}
				unpolled = nil
			case "check":
				a := s.answer(t)
				if last == "" {
					if a != (checkAnswer{}) {
						t.Fatalf("%s step %d: libmlx5 reported %v with no report pending", r.Case, i, a)
					}
					continue
				}
				if a == (checkAnswer{}) {
					t.Fatalf("%s step %d: libmlx5 reported nothing with a report pending", r.Case, i)
				}
				if prev, ok := answers[last]; ok && prev != a {
					t.Fatalf("%s step %d: libmlx5 answered %v for a CQE it answered %v for before", r.Case, i, a, prev)
				}
				answers[last] = a
				if a.errno == 0 {
					last = ""
				}
			}
		}
	}
	return answers
}

// mkeyCheckSeqCase replays one sequence through the driver and reports
// whether any Check answered differently from libmlx5.
func mkeyCheckSeqCase(t *testing.T, r *mkeyCheckSeqRecord, libmlx5 map[string]checkAnswer) (differs bool) {
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
	if len(next) != 5 || next[3][3] != wqe.OpcodeSetPSV || attr.Mem == nil || attr.Wire == nil {
		t.Fatalf("the sequences configure both domains: want a UMR and two SET_PSVs after the errors, have %d WQEBBs", len(next))
	}
	memPSV := binary.BigEndian.Uint32(next[3][16:]) & 0xffffff

	c := &Context{devx: true}
	m := &Mkey{c: c, sigMkey: true, lkey: uint32(key), rkey: uint32(key), maxEntries: 4, psvIndex: [2]uint32{memPSV, memPSV + 1},
		sentErrs: ^uint32(0), name: mkeyName(uint32(key))}
	c.addMkey(m)
	cq := testCQ(t, c, r.Input.CQ.Count, r.Input.CQ.CI)
	qp, _ := testQP(t, c, 1024)
	qp.sq.maxWQE, qp.mkeyConf, qp.sq.maxInline = 1024, true, mainQPInline
	cq.attachLocked(qp)
	if err := qp.PostMkeyConfigure(&MkeyConfigureWR{WrID: 0x55, Mkey: m, Flags: SendSignaled, SetAccess: true,
		Access: AccessLocalWrite, List: []KLM{checkSGE}, Sig: attr}); err != nil {
		t.Fatal(err)
	}

	// The rule: a report stays until a Check reads it.
	kept, read := "", false
	var unpolled []string
	written := 0
	for i := range r.Steps {
		s := &r.Steps[i]
		switch s.Step {
		case "sigerr_cqe":
			b, err := hex.DecodeString(s.Hex)
			if err != nil {
				t.Fatal(err)
			}
			copy(cq.ring[s.Index*cqeSize:], b)
			unpolled = append(unpolled, cqeKey(t, s.Hex))
			written++
		case "poll":
			wc := make([]Completion, 4)
			n, err := cq.Poll(wc)
			if err != nil || n != s.Ret || len(s.WCs) != 0 {
				t.Fatalf("step %d: poll: %d %v, libmlx5 %d completions", i, n, err, s.Ret)
			}
			for _, k := range unpolled {
				if kept == "" || read {
					kept, read = k, false
				}
			}
			unpolled = nil
		case "check":
			want := checkAnswer{}
			if kept != "" {
				var ok bool
				if want, ok = libmlx5[kept]; !ok {
					t.Fatalf("step %d: no libmlx5 answer for the kept CQE %x", i, kept)
				}
				if want.errno != 0 {
					read = true
				} else {
					kept = ""
				}
			}
			me, err := m.Check()
			got := answerOf(me)
			if err != nil {
				var en unix.Errno
				if !errors.As(err, &en) {
					t.Fatalf("step %d: check: %v, which wraps no errno", i, err)
				}
				got = checkAnswer{errno: en}
			}
			if got != want {
				t.Errorf("step %d: Check gave %v, want %v", i, got, want)
			}
			if want != s.answer(t) {
				differs = true
			}
		default:
			t.Fatalf("step %d: unknown step %q", i, s.Step)
		}
	}
	if want := r.Input.CQ.CI + uint32(written); cq.ci != want {
		t.Errorf("consumer index %d after the polls, want %d", cq.ci, want)
	}

	clear(qp.sq.ring)
	clear(qp.sq.slots)
	qp.sq.pi, qp.sq.reported, qp.sq.fm = 0, 0, false
	qp.sq.tail.Store(0)
	if err := qp.PostMkeyConfigure(&MkeyConfigureWR{WrID: 0x56, Mkey: m, List: []KLM{checkSGE}}); err != nil {
		t.Fatalf("the configure after the errors: %v", err)
	}
	for i, w := range next {
		if g := qp.sq.ring.Slot(uint16(i)); !bytes.Equal(g, w) {
			t.Errorf("the configure after the errors, WQEBB %d\n got %x\nwant %x", i, g, w)
		}
	}
	return differs
}
