package flows

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/sig"
)

// t10Blocks 512-byte blocks, 8 bytes of T10-DIF after each on the wire.
const (
	t10Blocks = 4
	t10Data   = t10Blocks * 512
	t10Wire   = t10Blocks * 520
)

// t10Attr is a wire-only T10-DIF signature: CRC guard, an application
// tag, reference tags counting up from 0x100.
func t10Attr() *sig.BlockAttr {
	return &sig.BlockAttr{
		Wire: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
			T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x1234, RefTag: 0x100, Flags: sig.T10DIFRefRemap}},
		CheckMask: sig.MaskT10DIFGuard | sig.MaskT10DIFAppTag | sig.MaskT10DIFRefTag,
	}
}

// T10DIF moves data through signature mkeys both ways and compares the
// device with sig's software engine:
//
//  1. Insert: A RDMA-writes from a signature mkey (no memory signature,
//     T10-DIF on the wire) to a plain buffer of B; the buffer must hold
//     what the engine's TX transfer makes of the data, PI included.
//  2. Strip and check: A RDMA-writes those bytes (data and PI) into a
//     signature mkey of B with the same signature; B's memory must hold the
//     bare data, and Mkey.Check must find no error.
//  3. The same with block 2's guard corrupted: the data still arrives, and
//     Mkey.Check must report what the engine's check reports (bad guard,
//     actual and expected values, the block's wire offset).
func T10DIF(t *testing.T, c *mlx5.Context, objs Objects) {
	l := NewLoopback(t, c, objs)
	attr := t10Attr()
	eng, err := sig.NewEngine(attr)
	if err != nil {
		t.Fatal(err)
	}

	src, srcMR := buffer(t, l.PD, t10Data, mlx5.AccessLocalWrite)
	for i := range src {
		src[i] = byte(i*13 + i>>9)
	}
	want := make([]byte, t10Wire)
	if me, err := eng.Transfer(sig.TX, want, src); err != nil || !me.OK() {
		t.Fatalf("engine TX: %v %v", me, err)
	}

	// 1. Insert.
	mA := sigMkey(t, l.PD)
	configure(t, l, l.A, mA, srcMR, t10Data, attr, mlx5.AccessLocalWrite)
	wire, wireMR := buffer(t, l.PD, t10Wire, mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite)
	write(t, l, mlx5.SendWR{WrID: 10, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: wireMR.Addr(), RKey: wireMR.RKey(),
		SGL: []mlx5.SGE{{Addr: 0, Length: t10Wire, LKey: mA.LKey()}}})
	sameBlocks(t, "insert", wire, want, 520, 512)
	checkMkey(t, l, mA, sig.MkeyErr{})

	// 2. Strip and check.
	in, inMR := buffer(t, l.PD, t10Wire, mlx5.AccessLocalWrite)
	copy(in, want)
	dst, dstMR := buffer(t, l.PD, t10Data, mlx5.AccessLocalWrite)
	mB := sigMkey(t, l.PD)
	configure(t, l, l.B, mB, dstMR, t10Data, attr, mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite)
	strip := mlx5.SendWR{WrID: 20, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: 0, RKey: mB.RKey(),
		SGL: []mlx5.SGE{{Addr: inMR.Addr(), Length: t10Wire, LKey: inMR.LKey()}}}
	write(t, l, strip)
	if !slices.Equal(dst, src) {
		t.Fatalf("strip: the memory domain does not hold the data")
	}
	checkMkey(t, l, mB, sig.MkeyErr{})

	// 3. A bad guard in block 2.
	in[2*520+512] ^= 0x01
	wantErr, err := eng.Check(sig.DomainWire, in)
	if err != nil || wantErr.Type != sig.MkeyErrBadGuard {
		t.Fatalf("engine check of the corrupted buffer: %v %v", wantErr, err)
	}
	clear(dst)
	strip.WrID = 21
	write(t, l, strip)
	if !slices.Equal(dst, src) {
		t.Errorf("strip with a bad guard: the data did not arrive whole")
	}
	checkMkey(t, l, mB, wantErr)
}

// sigMkey creates a signature mkey, or skips the test, as rdma-core's
// own tests do, on a device without block signature offload.
func sigMkey(t testing.TB, pd *mlx5.PD) *mlx5.Mkey {
	t.Helper()
	m, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
	if errors.Is(err, mlx5.ErrUnsupported) {
		t.Skipf("the device has no block signature offload: %v", err)
	}
	if err != nil {
		t.Fatalf("create signature mkey: %v", err)
	}
	t.Cleanup(func() { closeAll(t, m) })
	return m
}

// configure lays m over n bytes of mr with the signature attr, by a UMR on
// qp, and expects its completion. A signature the device cannot do
// (ErrUnsupported) skips the test.
func configure(t testing.TB, l *Loopback, qp *mlx5.QP, m *mlx5.Mkey, mr *mlx5.MR, n uint32, attr *sig.BlockAttr, access mlx5.AccessFlags) {
	t.Helper()
	err := qp.PostMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: 1, Mkey: m, Flags: mlx5.SendSignaled, SetAccess: true, Access: access,
		List: []mlx5.KLM{{Addr: mr.Addr(), ByteCount: n, Mkey: mr.LKey()}}, Sig: attr})
	if errors.Is(err, mlx5.ErrUnsupported) {
		t.Skipf("the device cannot do this signature: %v", err)
	}
	if err != nil {
		t.Fatalf("mkey configure: %v", err)
	}
	l.expect(t, ok(qp, 1, mlx5.WCUMR))
}

// sameBlocks fails the test unless got equals want, both laid out in
// blocks of blk bytes whose first data bytes are data; it reports the
// blocks that differ, with their signatures.
func sameBlocks(t testing.TB, what string, got, want []byte, blk, data int) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for b := 0; b*blk < len(want); b++ {
		g, w := got[b*blk:min((b+1)*blk, len(got))], want[b*blk:min((b+1)*blk, len(want))]
		if !slices.Equal(g, w) {
			d := min(data, len(w))
			t.Errorf("%s: block %d: signature % x, sig's engine's % x (data equal: %v)", what, b, g[d:], w[d:], slices.Equal(g[:d], w[:d]))
		}
	}
	t.FailNow()
}

// write posts wr on A and waits for its successful completion.
func write(t testing.TB, l *Loopback, wr mlx5.SendWR) {
	t.Helper()
	if err := l.A.PostSend(&wr); err != nil {
		t.Fatalf("post %d: %v", wr.WrID, err)
	}
	if wc := l.Wait(t, 1)[0]; wc.Status != mlx5.WCSuccess || wc.WrID != wr.WrID {
		t.Fatalf("post %d: completion %+v", wr.WrID, wc)
	}
}

// checkMkey polls the CQ for a signature error report, which may trail
// the completion, and compares Mkey.Check with want, the zero MkeyErr for
// none: an error must come within a second, and none within 10 ms.
func checkMkey(t testing.TB, l *Loopback, m *mlx5.Mkey, want sig.MkeyErr) {
	t.Helper()
	start := time.Now()
	var wc [1]mlx5.Completion
	for {
		n, err := l.CQ.Poll(wc[:])
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if n != 0 {
			t.Fatalf("unexpected completion %+v", wc[0])
		}
		got, err := m.Check()
		if err != nil {
			t.Fatalf("mkey check: %v", err)
		}
		waited := time.Since(start)
		if !got.OK() || want.OK() && waited > 10*time.Millisecond || waited > time.Second {
			if got.Type != want.Type || got.Actual != want.Actual || got.Expected != want.Expected || got.Offset != want.Offset || got.Domain != want.Domain {
				t.Fatalf("mkey check: %v, want %v", got, want)
			}
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}
