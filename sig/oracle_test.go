package sig_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/oracle/sigattr"
	. "github.com/mlx5go/mlx5go/sig"
)

// Records of testdata/umr_sig_attrs.jsonl and testdata/mkey_check.jsonl
// (see testdata/README.md), as far as these tests read them.

// The oracle readers of internal/oracle, by the names these tests use.
var (
	hexU64    = oracle.Num
	readJSONL = oracle.Lines
	mustHex   = oracle.Unhex
)

// attrOf converts a recorded attribute.
func attrOf(t *testing.T, v *sigattr.Attr) *BlockAttr {
	t.Helper()
	a, err := v.BlockAttr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// bsSelector is libmlx5's block size selector in the BSF (test data only).
var bsSelector = map[BlockSize]byte{BlockSize512: 1, BlockSize520: 2, BlockSize4048: 6, BlockSize4096: 3, BlockSize4160: 4}

// TestOracleUMRSig checks Validate, the copy mask and the PSV signature
// against what libmlx5 44.0 accepted and wrote for every UMR + signature
// case of the oracle.
func TestOracleUMRSig(t *testing.T) {
	// Cases libmlx5 fails with EINVAL because of the signature attributes;
	// the other error cases fail for reasons outside them.
	attrErrors := map[string]error{
		"error/t10dif_bg_0x1234": ErrT10DIFSeed,
		"error/crc32_seed_0x1":   ErrCRCSeed,
		"error/no_domains":       ErrNoDomain,
	}
	var checked, bsfs int
	readJSONL(t, "testdata/umr_sig_attrs.jsonl", func(line []byte) {
		var rec struct {
			Case       string       `json:"case"`
			Attr       sigattr.Attr `json:"sig_block_attr"`
			WRComplete int          `json:"wr_complete"`
			BSF        string       `json:"bsf_basic"`
			PSV        []string     `json:"psv_transient_signatures"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		a := attrOf(t, &rec.Attr)
		err := a.Validate()
		if want, ok := attrErrors[rec.Case]; ok {
			if rec.WRComplete != 22 {
				t.Errorf("%s: oracle wr_complete %d, want EINVAL", rec.Case, rec.WRComplete)
			}
			if !errors.Is(err, want) {
				t.Errorf("%s: Validate = %v, want %v", rec.Case, err, want)
			}
			checked++
			return
		}
		if err != nil {
			t.Errorf("%s: libmlx5 accepted it, Validate = %v", rec.Case, err)
			return
		}
		checked++
		if rec.WRComplete != 0 {
			return // failed for a reason outside the attributes: no WQE to compare
		}
		if rec.BSF != "" {
			bsfs++
			b := mustHex(t, rec.BSF)
			if Mask(b[1]) != a.CheckMask {
				t.Errorf("%s: BSF check_byte_mask %#x, attr %#x", rec.Case, b[1], a.CheckMask)
			}
			same := a.SameBlockStructure()
			if gotSBS := b[0]&(1<<4) != 0; gotSBS != same {
				t.Errorf("%s: BSF same-block-structure bit %v, SameBlockStructure %v", rec.Case, gotSBS, same)
			}
			switch {
			case same:
				if Mask(b[2]) != a.EffectiveCopyMask() {
					t.Errorf("%s: BSF copy_byte_mask %#x, EffectiveCopyMask %#x", rec.Case, b[2], a.EffectiveCopyMask())
				}
			case a.Wire != nil:
				if b[2] != bsSelector[a.Wire.BlockSize] {
					t.Errorf("%s: BSF wire bs_selector %d for %v", rec.Case, b[2], a.Wire.BlockSize)
				}
			}
			if a.Mem != nil && b[3] != bsSelector[a.Mem.BlockSize] {
				t.Errorf("%s: BSF mem bs_selector %d for %v", rec.Case, b[3], a.Mem.BlockSize)
			}
		}
		var want []uint64
		for _, d := range []*Domain{a.Mem, a.Wire} {
			if d != nil {
				want = append(want, d.TransientSignature())
			}
		}
		if len(rec.PSV) != len(want) {
			t.Errorf("%s: %d SET_PSV, want %d", rec.Case, len(rec.PSV), len(want))
			return
		}
		for i, h := range rec.PSV {
			if got := hexU64(t, "0x"+h); got != want[i] {
				t.Errorf("%s: PSV %d transient signature %#016x, TransientSignature %#016x", rec.Case, i, got, want[i])
			}
		}
	})
	if checked < 200 || bsfs < 200 {
		t.Errorf("only %d records checked, %d with a BSF", checked, bsfs)
	}
}

// TestOracleMkeyCheck decodes every SIG_ERR CQE of the oracle as libmlx5's
// mlx5dv_mkey_check did.
func TestOracleMkeyCheck(t *testing.T) {
	n := 0
	readJSONL(t, "testdata/mkey_check.jsonl", func(line []byte) {
		var rec struct {
			Case  string `json:"case"`
			Input struct {
				Attr sigattr.Attr `json:"sig_block_attr"`
				CQE  *struct {
					ExpTS    string `json:"expected_trans_sig"`
					ActTS    string `json:"actual_trans_sig"`
					ExpRef   string `json:"expected_ref_tag"`
					ActRef   string `json:"actual_ref_tag"`
					Syndrome string `json:"syndrome"`
					SigType  uint8  `json:"sig_type"`
					Domain   uint8  `json:"domain"`
					Offset   string `json:"sig_err_offset"`
				} `json:"sigerr_cqe_fields"`
			} `json:"input"`
			Result struct {
				Check struct {
					Ret      int    `json:"ret"`
					ErrType  uint32 `json:"err_type_value"`
					Actual   string `json:"actual_value"`
					Expected string `json:"expected_value"`
					Offset   string `json:"offset"`
				} `json:"mkey_check"`
			} `json:"result"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		c := rec.Input.CQE
		if c == nil {
			return // no SIG_ERR CQE: nothing to decode
		}
		n++
		cqe := SigErrCQE{
			ExpectedTransSig: uint32(hexU64(t, c.ExpTS)),
			ActualTransSig:   uint32(hexU64(t, c.ActTS)),
			ExpectedRefTag:   uint32(hexU64(t, c.ExpRef)),
			ActualRefTag:     uint32(hexU64(t, c.ActRef)),
			Syndrome:         uint16(hexU64(t, c.Syndrome)),
			SigType:          c.SigType,
			Domain:           c.Domain,
			Offset:           hexU64(t, c.Offset),
		}
		a := attrOf(t, &rec.Input.Attr)
		got, err := DecodeSigErrCQE(cqe, a)
		want := rec.Result.Check
		if want.Ret != 0 {
			if !errors.Is(err, ErrSigErrCQE) {
				t.Errorf("%s: libmlx5 returned %d, DecodeSigErrCQE = %v, %v", rec.Case, want.Ret, got, err)
			}
			return
		}
		if err != nil {
			t.Errorf("%s: %v", rec.Case, err)
			return
		}
		if uint32(got.Type) != want.ErrType || got.Actual != hexU64(t, want.Actual) ||
			got.Expected != hexU64(t, want.Expected) || got.Offset != hexU64(t, want.Offset) {
			t.Errorf("%s: got %+v, libmlx5 type %d actual %s expected %s offset %s",
				rec.Case, got, want.ErrType, want.Actual, want.Expected, want.Offset)
		}
	})
	if n < 15 {
		t.Errorf("only %d SIG_ERR records", n)
	}
}
