package mlx5

import (
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/sig"
	"golang.org/x/sys/unix"
)

// TestContextCloseWithDEKInUse: a DEK that a crypto mkey's configure
// names refuses its own Close (EBUSY), yet Context.Close, which closes
// its children newest first, ends with both destroyed even when the mkey
// is older than the DEK (so the DEK's first Close comes while the mkey
// still holds it): openModel's cleanup checks that Close returns nil and
// leaves no firmware object.
func TestContextCloseWithDEKInUse(t *testing.T) {
	for _, mkeyFirst := range []bool{true, false} {
		_, c := openModel(t, "cx7", model.CryptoOptions{})
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		var m *Mkey
		newMkey := func() {
			if m, err = pd.CreateMkey(MkeyOptions{MaxEntries: 1, Crypto: true}); err != nil {
				t.Fatal(err)
			}
		}
		if mkeyFirst {
			newMkey()
		}
		d := mustDEK(t, pd, DEKOptions{KeyBits: 128, Key: make([]byte, 32), Plaintext: true})
		if !mkeyFirst {
			newMkey()
		}
		qp, mr := loopbackMkeyQP(t, c, pd)
		if err := qp.PostMkeyConfigure(&MkeyConfigureWR{WrID: 1, Mkey: m, SetAccess: true, Access: AccessLocalWrite,
			List:   []KLM{{Addr: mr.Addr(), ByteCount: 512, Mkey: mr.LKey()}},
			Crypto: &CryptoAttr{DataUnitSize: sig.BlockSize512, DEK: d}}); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); !errors.Is(err, unix.EBUSY) {
			t.Fatalf("DEK.Close while the mkey uses it: %v, want EBUSY", err)
		}
		// openModel's cleanup closes the context and counts the objects.
	}
}

// loopbackMkeyQP is an RC QP of c connected to itself that takes mkey
// configures of one entry, and an MR in pd over a 4 KiB Buffer, which
// the test's cleanup closes.
func loopbackMkeyQP(t *testing.T, c *Context, pd *PD) (*QP, *MR) {
	t.Helper()
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
	return qp, mr
}
