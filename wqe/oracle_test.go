package wqe

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/oracle/umrsig"
	"github.com/mlx5go/mlx5go/sig"
)

// The records of testdata/umr_sig.jsonl and the umr_sig records of
// testdata/wrap.jsonl (see testdata/README.md) are read by
// internal/oracle/umrsig.

// num is internal/oracle's, by the name these tests use.
var num = oracle.Num

// mkeyState is what the oracle's libmlx5 remembered about an mkey between
// records (the sequence/* cases reuse one).
type mkeyState struct {
	bsf             BSFState
	block           BlockPSVs
	used            bool
	memPSV, wirePSV uint32
}

// config turns a record's inputs into a MkeyConfigure; ok is false when
// the API cannot express them.
func config(t *testing.T, r *umrsig.Record, st *mkeyState) (c MkeyConfigure, ok bool) {
	in, ok, err := r.Configure()
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return c, false
	}
	c = MkeyConfigure{
		QPN:          r.QP.QPN,
		Mkey:         in.Mkey,
		Flags:        SendFlags(in.Flags),
		MaxEntries:   r.Input.Mkey.MaxEntries,
		SigMkey:      r.Input.Mkey.BlockSignature,
		BSF:          st.bsf,
		Block:        st.block,
		ResetSig:     in.ResetSig,
		UpdateSigErr: !st.used,
		MemPSV:       st.memPSV,
		WirePSV:      st.wirePSV,
		SetAccess:    in.SetAccess,
		Access:       Access(in.Access),
		RepeatCount:  in.RepeatCount,
		Sig:          in.Sig,
	}
	if in.List != nil {
		c.List = make([]KLM, 0, len(in.List))
		for _, k := range in.List {
			c.List = append(c.List, KLM{Addr: k.Addr, ByteCount: k.ByteCount, Mkey: k.Key})
		}
	}
	if in.Interleaved != nil {
		c.Interleaved = make([]RepeatEntry, 0, len(in.Interleaved))
		for _, e := range in.Interleaved {
			c.Interleaved = append(c.Interleaved, RepeatEntry{Addr: e.Addr, ByteCount: e.ByteCount, Skip: e.Skip, Mkey: e.Key})
		}
	}
	return c, true
}

// oracleErrors maps libmlx5's errno at ibv_wr_complete to the error the
// builder must return.
var oracleErrors = map[int][]error{
	12: {ErrTooManyEntries},                 // ENOMEM
	22: {ErrNotSigMkey, sig.ErrInvalidAttr}, // EINVAL
	95: {ErrNotInline},                      // EOPNOTSUPP
}

type oracleCounts struct{ records, exact, errs, skipped int }

// checkOracle builds every umr_sig record of path and compares each WQEBB,
// the doorbell record and the doorbell write with what libmlx5 wrote.
func checkOracle(t *testing.T, path string) oracleCounts {
	var n oracleCounts
	mkeys := map[uint32]*mkeyState{}
	umrsig.Read(t, path, func(r *umrsig.Record) {
		n.records++
		lkey := uint32(num(t, r.Input.Mkey.Lkey))
		st := mkeys[lkey]
		if st == nil || r.Input.Mkey.Fresh {
			st = &mkeyState{}
			mkeys[lkey] = st
		}
		psv, err := r.PSVIndexes()
		if err != nil {
			t.Fatal(err)
		}
		if len(psv) == 2 {
			st.memPSV, st.wirePSV = psv[0], psv[1]
		}
		c, ok := config(t, r, st)
		if !ok {
			n.skipped++
			t.Logf("%s: not expressible (conf_flags %#x)", r.Case, r.Input.ConfAttr.ConfFlags)
			return
		}
		if r.QP.SQStride != WQEBB {
			t.Fatalf("%s: stride %d", r.Case, r.QP.SQStride)
		}
		ring := make(Ring, r.QP.WQECnt*WQEBB)
		pi := uint16(r.PIBefore)
		res, err := BuildMkeyConfigure(ring, pi, r.QP.WQECnt, &c) // the harness empties the SQ before each case
		if r.Result.WRComplete != 0 {
			want := oracleErrors[r.Result.WRComplete]
			match := false
			for _, w := range want {
				match = match || errors.Is(err, w)
			}
			if !match {
				t.Errorf("%s: libmlx5 failed with errno %d, builder: %v", r.Case, r.Result.WRComplete, err)
			}
			for _, b := range ring {
				if b != 0 {
					t.Errorf("%s: failed build wrote to the ring", r.Case)
					break
				}
			}
			n.errs++
			return
		}
		if err != nil {
			t.Errorf("%s: %v", r.Case, err)
			return
		}
		exact := true
		if got, want := (int(pi)+res.WQEBBs)&0xffff, r.PIAfter; got != want || len(r.SQ.WQEBBs) != res.WQEBBs || want&0xffff != r.DBRec.Send {
			t.Errorf("%s: %d WQEBBs (pi %d), libmlx5 %d (pi %d, dbrec %d)", r.Case, res.WQEBBs, got, len(r.SQ.WQEBBs), want, r.DBRec.Send)
			exact = false
		}
		for i, w := range r.SQ.WQEBBs {
			want, err := hex.DecodeString(w.Hex)
			if err != nil {
				t.Fatal(err)
			}
			got := ring.Slot(pi + uint16(i))
			if slotIndex(ring, pi+uint16(i)) != w.Index {
				t.Errorf("%s: WQEBB %d at ring index %d, libmlx5 %d", r.Case, i, slotIndex(ring, pi+uint16(i)), w.Index)
				exact = false
			}
			if string(got) != string(want) {
				t.Errorf("%s: WQEBB %d (ring %d)\n got %x\nwant %x", r.Case, i, w.Index, got, want)
				exact = false
			}
		}
		// libmlx5's rule, which the caller applies to the Result: a post
		// of one WQE (no SET_PSVs) of 2 to bf_size/16 ds is copied to the
		// BlueFlame register whole; any other post (the UMR and its
		// SET_PSVs are 1+PSVs WQEs) rings the doorbell with the last
		// WQE's first 8 bytes.
		var wantDB string
		if 1+res.PSVs == 1 && res.DS > 1 && int(res.DS)*16 <= r.BF.Size {
			for i := range res.WQEBBs {
				wantDB += hex.EncodeToString(ring.Slot(pi + uint16(i)))
			}
		} else {
			wantDB = hexU64(res.Doorbell)
		}
		if wr := r.BF.Writes; len(wr) != 1 || wr[0].Hex != wantDB {
			t.Errorf("%s: doorbell write %s, libmlx5 wrote %+v", r.Case, wantDB, wr)
			exact = false
		}
		if exact {
			n.exact++
		}
		st.used = true
		switch {
		case c.Sig != nil:
			st.bsf, st.block = BSFSet, PSVsOf(c.Sig)
		case c.ResetSig:
			st.bsf = BSFReset
		}
	})
	return n
}

func hexU64(v uint64) string {
	var b [8]byte
	be.PutUint64(b[:], v)
	return hex.EncodeToString(b[:])
}

func slotIndex(r Ring, pi uint16) int { return int(pi) & (r.wqebbs() - 1) }

// TestOracleUMRSig compares the builder with every mkey configure case of
// the oracle's umr_sig family.
func TestOracleUMRSig(t *testing.T) {
	n := checkOracle(t, "testdata/umr_sig.jsonl")
	t.Logf("umr_sig: %d records, %d byte-exact, %d errors as libmlx5, %d not expressible", n.records, n.exact, n.errs, n.skipped)
	if n.records != 243 || n.exact != 236 || n.errs != 6 || n.skipped != 1 {
		t.Errorf("umr_sig: %+v", n)
	}
}

// TestOracleWrap does the same for the UMR cases of the wrap family, which
// cross the end of the ring and the 16-bit counter wrap.
func TestOracleWrap(t *testing.T) {
	n := checkOracle(t, "testdata/wrap.jsonl")
	t.Logf("wrap: %d umr_sig records, %d byte-exact", n.records, n.exact)
	if n.records < 12 || n.exact != n.records {
		t.Errorf("wrap: %+v", n)
	}
}
