package wqe

import (
	"testing"

	"github.com/mlx5go/mlx5go/prm"
)

// Every mkc field PutMkc writes through its word form has one, and the two
// 64-bit fields are word-aligned as PutMkc assumes.
func TestMkcWords(t *testing.T) {
	for _, f := range []prm.Field{prm.Mkc.Free, prm.Mkc.A, prm.Mkc.Rw, prm.Mkc.Rr, prm.Mkc.Lw, prm.Mkc.Qpn,
		prm.Mkc.Mkey70, prm.Mkc.BsfEn, prm.Mkc.ExpectedSigerrCount, prm.Mkc.Pd, prm.Mkc.BsfOctwordSize,
		prm.Mkc.TranslationsOctwordSize, prm.Mkc.LogPageSize} {
		if _, ok := f.Word32(); !ok {
			t.Errorf("mkc.%s has no 32-bit word form", f.Name)
		}
	}
	for _, f := range []prm.Field{prm.Mkc.StartAddr, prm.Mkc.Len} {
		if f.Off%64 != 0 || f.Width != 64 {
			t.Errorf("mkc.%s at bit %#x, width %d: not a word-aligned 64-bit field", f.Name, f.Off, f.Width)
		}
	}
}
