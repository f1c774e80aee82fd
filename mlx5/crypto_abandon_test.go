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
	cq, err := c.CreateCQ(CQOptions{Entries: 8})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := c.CreateQP(QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxSendSGE: 1, MkeyConfigure: true, MaxMkeyEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	path, err := c.LoopbackPath(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Connect(qp.QPN(), path); err != nil {
		t.Fatal(err)
	}
	buf, err := AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	mr, err := pd.RegMR(buf.Bytes(), AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
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
