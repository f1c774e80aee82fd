package wqe

import (
	"testing"

	"github.com/mlx5go/mlx5go/prm"
)

// TestMkeyTemplateLenOffset: Put writes the mkey's length where PutMkc
// does.
func TestMkeyTemplateLenOffset(t *testing.T) {
	if want := prm.Mkc.Len.Off / 8; mkcLenOff != want {
		t.Fatalf("mkcLenOff is %#x, the mkey context's len is at byte %#x", mkcLenOff, want)
	}
}
