package wqe

import (
	"encoding/json"
	"errors"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle/sigattr"
	"github.com/mlx5go/mlx5go/sig"
)

// mkeyCheckRecord is a record of testdata/mkey_check.jsonl as far as the
// CQE tests read it.
type mkeyCheckRecord struct {
	Case  string `json:"case"`
	Input struct {
		Attr   sigattr.Attr `json:"sig_block_attr"`
		Fields *struct {
			ExpTS    string `json:"expected_trans_sig"`
			ActTS    string `json:"actual_trans_sig"`
			ExpRef   string `json:"expected_ref_tag"`
			ActRef   string `json:"actual_ref_tag"`
			Syndrome string `json:"syndrome"`
			SigType  uint8  `json:"sig_type"`
			Domain   uint8  `json:"domain"`
			Mkey     string `json:"mkey"`
			Offset   string `json:"sig_err_offset"`
		} `json:"sigerr_cqe_fields"`
		CQ struct {
			Cnt  int    `json:"cqe_cnt"`
			Size int    `json:"cqe_size"`
			CI   uint32 `json:"consumer_index_before"`
		} `json:"cq"`
		CQEs []struct {
			Index int    `json:"index"`
			Hex   string `json:"hex"`
		} `json:"cqes_written"`
	} `json:"input"`
	Result struct {
		PollRet int `json:"poll_cq_ret"`
		WCs     []struct {
			Status  int    `json:"status"`
			QPNum   uint32 `json:"qp_num"`
			ByteLen uint32 `json:"byte_len"`
		} `json:"wcs"`
		Check struct {
			Ret      int    `json:"ret"`
			ErrType  uint32 `json:"err_type_value"`
			Actual   string `json:"actual_value"`
			Expected string `json:"expected_value"`
			Offset   string `json:"offset"`
		} `json:"mkey_check"`
	} `json:"result"`
}

// TestOracleCQE decodes every CQE the oracle's mkey_check harness wrote
// into libmlx5's CQ: the owner bit at the consumer index libmlx5 polled it
// at, the signature error fields the harness encoded, the requester CQEs
// libmlx5 turned into work completions, and, through sig.DecodeSigErrCQE,
// what mlx5dv_mkey_check made of the signature error.
func TestOracleCQE(t *testing.T) {
	var sigErrs, reqs int
	readLines(t, "testdata/mkey_check.jsonl", func(line []byte) {
		var r mkeyCheckRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		cq := r.Input.CQ
		if cq.Size != CQESize || cq.Cnt <= 0 || cq.Cnt&(cq.Cnt-1) != 0 {
			t.Fatalf("%s: CQ %+v", r.Case, cq)
		}
		logSize := uint8(bits.TrailingZeros(uint(cq.Cnt)))
		var wcs int
		for k, w := range r.Input.CQEs {
			b := unhex(t, w.Hex)
			ci := cq.CI + uint32(k)
			if int(ci)%cq.Cnt != w.Index {
				t.Errorf("%s: CQE %d at index %d, consumer index %d", r.Case, k, w.Index, ci)
			}
			if !CQEOwned(b, ci, logSize) || CQEOwned(b, ci+uint32(cq.Cnt), logSize) {
				t.Errorf("%s: CQE %d: owned at ci %d: %v, one pass later: %v", r.Case, k,
					ci, CQEOwned(b, ci, logSize), CQEOwned(b, ci+uint32(cq.Cnt), logSize))
			}
			var c CQE
			if err := c.Decode(b); err != nil {
				t.Fatal(err)
			}
			if c.Owner != ((ci>>logSize)&1 == 1) {
				t.Errorf("%s: CQE %d: owner %v", r.Case, k, c.Owner)
			}
			switch c.Opcode {
			case CQESigErr:
				sigErrs++
				checkSigErr(t, &r, b)
			case CQEReq:
				// libmlx5 completes the work request: one wc with the
				// CQE's QP and byte count.
				reqs++
				if wcs >= len(r.Result.WCs) {
					t.Errorf("%s: REQ CQE %d without a work completion", r.Case, k)
					break
				}
				wc := r.Result.WCs[wcs]
				wcs++
				if c.IsError() || wc.Status != 0 || c.QPN != wc.QPNum || c.ByteCount != wc.ByteLen || c.SrqnUIdx != 0 {
					t.Errorf("%s: REQ CQE %+v, libmlx5's wc %+v", r.Case, c, wc)
				}
			default:
				t.Errorf("%s: CQE %d: opcode %d", r.Case, k, c.Opcode)
			}
		}
		if wcs != len(r.Result.WCs) || wcs != r.Result.PollRet {
			t.Errorf("%s: %d requester CQEs, libmlx5 polled %d (%d wcs)", r.Case, wcs, r.Result.PollRet, len(r.Result.WCs))
		}
	})
	t.Logf("mkey_check: %d SIG_ERR CQEs, %d REQ CQEs", sigErrs, reqs)
	if sigErrs != 17 || reqs != 2 {
		t.Errorf("%d SIG_ERR and %d REQ CQEs, want 17 and 2", sigErrs, reqs)
	}
}

// checkSigErr decodes the SIG_ERR CQE b of r and compares it with the
// fields the harness encoded and with libmlx5's mlx5dv_mkey_check.
func checkSigErr(t *testing.T, r *mkeyCheckRecord, b []byte) {
	t.Helper()
	f := r.Input.Fields
	if f == nil {
		t.Errorf("%s: SIG_ERR CQE without fields", r.Case)
		return
	}
	var c SigErrCQE
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	want := SigErrCQE{
		Owner:            c.Owner,
		ExpectedTransSig: uint32(num(t, f.ExpTS)),
		ActualTransSig:   uint32(num(t, f.ActTS)),
		ExpectedRefTag:   uint32(num(t, f.ExpRef)),
		ActualRefTag:     uint32(num(t, f.ActRef)),
		Syndrome:         uint16(num(t, f.Syndrome)),
		SigType:          f.SigType,
		Domain:           f.Domain,
		Mkey:             uint32(num(t, f.Mkey)),
		ErrOffset:        num(t, f.Offset),
	}
	if c != want {
		t.Errorf("%s: SIG_ERR CQE\n got %+v\nwant %+v", r.Case, c, want)
	}
	attr, err := r.Input.Attr.BlockAttr()
	if err != nil {
		t.Fatal(err)
	}
	me, err := sig.DecodeSigErrCQE(c.Sig(), attr)
	chk := r.Result.Check
	switch {
	case chk.Ret != 0:
		if !errors.Is(err, sig.ErrSigErrCQE) {
			t.Errorf("%s: libmlx5's mkey check failed (%d), decoded %+v, %v", r.Case, chk.Ret, me, err)
		}
	case err != nil:
		t.Errorf("%s: %v", r.Case, err)
	case uint32(me.Type) != chk.ErrType || me.Actual != num(t, chk.Actual) ||
		me.Expected != num(t, chk.Expected) || me.Offset != num(t, chk.Offset):
		t.Errorf("%s: mkey check %+v, libmlx5 %+v", r.Case, me, chk)
	}
}

func TestCQEDecode(t *testing.T) {
	b := make([]byte, CQESize)
	for i := range b {
		b[i] = byte(i + 1)
	}
	b[cqeOffOpOwn] = CQERespSendImm<<4 | CQEFormatInline32<<2 | 1
	var c CQE
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	want := CQE{
		Opcode: CQERespSendImm, Format: CQEFormatInline32, Owner: true,
		Signature:  63,
		WQECounter: 0x3d3e,
		QPN:        0x3a3b3c, WQEOpcode: 0x39,
		SrqnUIdx:  0x222324,
		ByteCount: 0x2d2e2f30,
		Imm:       0x25262728,
		Timestamp: 0x3132333435363738,
		SLID:      0x1718,
		FlagsRQPN: 0x191a1b1c,
		MLPath:    0x12,
	}
	if c != want {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if c.SrcQP() != 0x1a1b1c || c.SL() != 9 || !c.GRH() || c.IsError() {
		t.Errorf("srcqp %#x sl %d grh %v", c.SrcQP(), c.SL(), c.GRH())
	}

	// The same bytes as a requester error CQE (struct mlx5_err_cqe).
	b[cqeOffOpOwn] = CQEReqErr << 4
	b[errOffSyndrome] = byte(SyndromeRemoteAccess)
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	want = CQE{
		Opcode: CQEReqErr, Signature: 63, WQECounter: 0x3d3e, QPN: 0x3a3b3c, WQEOpcode: 0x39,
		SrqnUIdx: 0x222324, Syndrome: SyndromeRemoteAccess, VendorSyndrome: 55,
	}
	if c != want || !c.IsError() {
		t.Errorf("error CQE\n got %+v\nwant %+v", c, want)
	}

	var s SigErrCQE
	if err := s.Decode(b); !errors.Is(err, ErrNotSigErr) {
		t.Errorf("SigErrCQE.Decode of an error CQE: %v", err)
	}
	if err := c.Decode(b[:63]); !errors.Is(err, ErrShort) {
		t.Errorf("short: %v", err)
	}
	if err := s.Decode(b[:63]); !errors.Is(err, ErrShort) {
		t.Errorf("short: %v", err)
	}
	if CQEOwned(b[:63], 0, 0) {
		t.Error("short CQE owned")
	}
}

func TestCQEOwned(t *testing.T) {
	b := make([]byte, CQESize)
	for _, c := range []struct {
		opOwn uint8
		ci    uint32
		log   uint8
		want  bool
	}{
		{CQEReq << 4, 0, 4, true},
		{CQEReq << 4, 15, 4, true},
		{CQEReq << 4, 16, 4, false},
		{CQEReq<<4 | 1, 16, 4, true},
		{CQEReq<<4 | 1, 31, 4, true},
		{CQEReq<<4 | 1, 32, 4, false},
		{CQEReq << 4, 47, 4, true},
		{CQERespErr<<4 | 1, 1 << 31, 31, true},
		{CQEInvalid << 4, 0, 4, false},
		{CQEInvalid<<4 | 1, 16, 4, false},
	} {
		b[cqeOffOpOwn] = c.opOwn
		if got := CQEOwned(b, c.ci, c.log); got != c.want {
			t.Errorf("op_own %#x ci %d log %d: %v", c.opOwn, c.ci, c.log, got)
		}
	}
}

func TestInitCQE(t *testing.T) {
	const n = 8
	buf := make([]byte, n*CQESize+10)
	for i := range buf {
		buf[i] = 0xff
	}
	InitCQE(buf)
	for i, v := range buf {
		want := byte(0)
		if i%CQESize == cqeOffOpOwn {
			want = 0xf0
		}
		if v != want {
			t.Fatalf("byte %d = %#x, want %#x", i, v, want)
		}
	}
	for ci := range uint32(4 * n) {
		if CQEOwned(buf[int(ci%n)*CQESize:], ci, 3) {
			t.Errorf("fresh CQE owned at ci %d", ci)
		}
	}
}

func TestSyndromeString(t *testing.T) {
	for s, want := range map[Syndrome]string{
		0: "none", SyndromeLocalLength: "local length error", SyndromeWRFlush: "work request flushed",
		SyndromeRemoteAborted: "remote aborted", 0x42: "Syndrome(0x42)",
	} {
		if got := s.String(); got != want {
			t.Errorf("%#x: %q, want %q", uint8(s), got, want)
		}
	}
}

func TestCQEZeroAllocs(t *testing.T) {
	b := make([]byte, CQESize)
	b[cqeOffOpOwn] = CQESigErr << 4
	var c CQE
	var s SigErrCQE
	if n := testing.AllocsPerRun(100, func() {
		_ = c.Decode(b)
		_ = s.Decode(b)
		_ = CQEOwned(b, 1, 9)
		InitCQE(b)
		b[cqeOffOpOwn] = CQESigErr << 4
	}); n != 0 {
		t.Errorf("%v allocs per decode", n)
	}
}

// BenchmarkDecodeCQE polls a requester CQE as a poll loop does: the
// ownership test, then the decode.
func BenchmarkDecodeCQE(b *testing.B) {
	cqe := make([]byte, CQESize)
	be.PutUint32(cqe[cqeOffSopDropQPN:], uint32(OpcodeRDMAWrite)<<24|0x1a3)
	be.PutUint16(cqe[cqeOffWQECounter:], 0x1234)
	cqe[cqeOffOpOwn] = CQEReq<<4 | 1
	var c CQE
	b.ReportAllocs()
	for b.Loop() {
		if !CQEOwned(cqe, 1024, 10) {
			b.Fatal("not owned")
		}
		if err := c.Decode(cqe); err != nil {
			b.Fatal(err)
		}
	}
	if c.WQECounter != 0x1234 {
		b.Fatal(c)
	}
}

// TestCQEFieldsAreDecodes: each one-field reader reads what Decode
// decodes into that field, for random CQEs of every opcode.
func TestCQEFieldsAreDecodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 2))
	for i := 0; i < 4096; i++ {
		var b [CQESize]byte
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		var c CQE
		if err := c.Decode(b[:]); err != nil {
			t.Fatal(err)
		}
		if got := CQEQPN(b[:]); got != c.QPN {
			t.Fatalf("%x: CQEQPN %#x, Decode %#x", b, got, c.QPN)
		}
		if c.Opcode == CQESigErr {
			continue
		}
		if got := CQEWQECounter(b[:]); got != c.WQECounter {
			t.Fatalf("%x: CQEWQECounter %#x, Decode %#x", b, got, c.WQECounter)
		}
		if c.IsError() {
			if s, v := CQEErr(b[:]); s != c.Syndrome || v != c.VendorSyndrome {
				t.Fatalf("%x: CQEErr %v %#x, Decode %v %#x", b, s, v, c.Syndrome, c.VendorSyndrome)
			}
			continue
		}
		if CQEByteCount(b[:]) != c.ByteCount || CQEImm(b[:]) != c.Imm || CQEFlagsRQPN(b[:]) != c.FlagsRQPN ||
			CQESLID(b[:]) != c.SLID || CQEMLPath(b[:]) != c.MLPath {
			t.Fatalf("%x: the field readers disagree with Decode: %+v", b, c)
		}
	}
}
