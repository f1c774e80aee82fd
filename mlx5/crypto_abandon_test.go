package mlx5

import (
	"testing"

	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/sig"
)

// TestContextCloseAbandonedCryptoBatch: a batch that replaced an mkey's
// DEK and was never committed still lets Context.Close destroy both DEKs
// and the mkey (openModel's cleanup checks Close and the object count).
func TestContextCloseAbandonedCryptoBatch(t *testing.T) {
	_, c := openModel(t, "cx7", model.CryptoOptions{})
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	d1 := mustDEK(t, pd, DEKOptions{KeyBits: 128, Key: make([]byte, 32), Plaintext: true})
	d2 := mustDEK(t, pd, DEKOptions{KeyBits: 128, Key: make([]byte, 32), Plaintext: true})
	m, err := pd.CreateMkey(MkeyOptions{MaxEntries: 1, Crypto: true})
	if err != nil {
		t.Fatal(err)
	}
	qp, mr := loopbackMkeyQP(t, c, pd)
	wr := func(d *DEK) *MkeyConfigureWR {
		return &MkeyConfigureWR{WrID: 1, Mkey: m, SetAccess: true, Access: AccessLocalWrite,
			List:   []KLM{{Addr: mr.Addr(), ByteCount: 512, Mkey: mr.LKey()}},
			Crypto: &CryptoAttr{DataUnitSize: sig.BlockSize512, DEK: d}}
	}
	if err := qp.PostMkeyConfigure(wr(d1)); err != nil {
		t.Fatal(err)
	}
	b := qp.Begin().AddMkeyConfigure(wr(d2))
	_ = b // never committed
}
