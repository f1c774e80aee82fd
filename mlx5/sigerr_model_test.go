package mlx5_test

import (
	"encoding/binary"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/sig"
)

// Offsets in the rig's registered buffer for TestSigErrKeptUntilCheckOnModel.
const (
	keepMem    = 0     // 4 blocks of 512 bytes with their T10-DIF: the memory domain
	keepWire   = 8192  // where the wire form lands (TX)
	keepSrc    = 16384 // wire bytes to write into the mkey (RX)
	keepBlocks = 4
)

// TestSigErrKeptUntilCheckOnModel: two corrupted transfers through one
// signature mkey with no Check between them. The first is a gather (an
// RDMA WRITE from the mkey: the memory domain is checked, a bad guard),
// the second a scatter (a peer's RDMA WRITE into its rkey: the wire
// domain is checked, a bad reference tag). By default the model reports
// both, as the PSVs of the two domains each report their first error
// (docs/MODEL.md, "Signature errors"); Check must return the first, as
// mlx5dv_mkey_check(3) says, and then nothing. With the model's
// SigErrOncePerMkey the mkey reports only the first; the answer is the
// same.
// A configure then re-arms the mkey: the same corrupted gather is
// reported again.
func TestSigErrKeptUntilCheckOnModel(t *testing.T) {
	for _, o := range []struct {
		name string
		opt  model.Options
	}{
		{"per PSV", model.Options{}},
		{"per mkey", model.Options{SigErrOncePerMkey: true}},
	} {
		t.Run(o.name, func(t *testing.T) { sigErrKeptUntilCheck(t, o.opt) })
	}
}

func sigErrKeptUntilCheck(t *testing.T, opt model.Options) {
	r := newRig(t, "cx6dx", opt, 64)
	mem := r.buf.Bytes()
	t10 := func() *sig.Domain {
		return &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
			T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x77, RefTag: 0x10, Flags: sig.T10DIFRefRemap}}
	}
	attr := &sig.BlockAttr{Mem: t10(), Wire: t10(), CheckMask: sig.MaskT10DIFGuard | sig.MaskT10DIFAppTag | sig.MaskT10DIFRefTag}
	eng, err := sig.NewEngine(attr)
	if err != nil {
		t.Fatal(err)
	}
	memDom := mem[keepMem : keepMem+keepBlocks*520]
	for i := range keepBlocks {
		for j := range 512 {
			memDom[i*520+j] = byte(i*31 + j)
		}
	}
	if err := eng.Generate(sig.DomainMemory, memDom); err != nil {
		t.Fatal(err)
	}
	wire := make([]byte, keepBlocks*520)
	if me, err := eng.Transfer(sig.TX, wire, memDom); err != nil || !me.OK() {
		t.Fatal(me, err)
	}
	// The memory domain with block 1's guard corrupted; the wire bytes
	// with block 2's reference tag corrupted.
	memDom[1*520+512] ^= 0x01
	memErr, err := eng.Check(sig.DomainMemory, memDom)
	if err != nil || memErr.Type != sig.MkeyErrBadGuard {
		t.Fatalf("engine check of the memory domain: %v %v", memErr, err)
	}
	badMem := append([]byte(nil), memDom...)
	badWire := append([]byte(nil), wire...)
	binary.BigEndian.PutUint32(badWire[2*520+516:], 0xbad)
	wireErr, err := eng.Check(sig.DomainWire, badWire)
	if err != nil || wireErr.Type != sig.MkeyErrBadRefTag {
		t.Fatalf("engine check of the wire bytes: %v %v", wireErr, err)
	}

	m, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
	if err != nil {
		t.Fatal(err)
	}
	a, b := r.pair(t, r.pd)
	configure := func(wrID uint64, s *sig.BlockAttr) {
		t.Helper()
		if err := a.PostMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: wrID, Mkey: m, Flags: mlx5.SendSignaled, SetAccess: true,
			Access: mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead,
			List:   []mlx5.KLM{{Addr: r.at(keepMem), ByteCount: keepBlocks * 520, Mkey: r.mr.LKey()}}, Sig: s}); err != nil {
			t.Fatal(err)
		}
		r.expect(t, "configure", mlx5.Completion{WrID: wrID, QPN: a.QPN(), Opcode: mlx5.WCUMR})
	}
	gather := func(wrID uint64) {
		t.Helper()
		if err := a.PostSend(&mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
			RemoteAddr: r.at(keepWire), RKey: r.mr.RKey(), SGL: []mlx5.SGE{{Addr: 0, Length: keepBlocks * 520, LKey: m.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		r.expect(t, "gather", mlx5.Completion{WrID: wrID, QPN: a.QPN(), Opcode: mlx5.WCRDMAWrite})
	}
	scatter := func(wrID uint64) {
		t.Helper()
		copy(mem[keepSrc:], badWire)
		if err := b.PostSend(&mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
			RemoteAddr: 0, RKey: m.RKey(), SGL: []mlx5.SGE{{Addr: r.at(keepSrc), Length: keepBlocks * 520, LKey: r.mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		r.expect(t, "scatter", mlx5.Completion{WrID: wrID, QPN: b.QPN(), Opcode: mlx5.WCRDMAWrite})
	}
	check := func(what string, want sig.MkeyErr) {
		t.Helper()
		got, err := m.Check()
		if err != nil || got.Type != want.Type || got.Actual != want.Actual || got.Expected != want.Expected || got.Offset != want.Offset {
			t.Errorf("%s: Check gave %v %v, want %v", what, got, err, want)
		}
	}

	configure(1, attr)
	gather(2)
	scatter(3)
	check("after a bad gather and a bad scatter", memErr)
	check("the second Check", sig.MkeyErr{})

	// A configure without a signature block re-arms the mkey (the error
	// counter and the block's SET_PSVs): the bad gather is reported again.
	// (The scatter stored the wire's blocks, its bad reference tag
	// included: the memory domain is put back first.)
	copy(memDom, badMem)
	configure(4, nil)
	gather(5)
	check("after the configure, a bad gather", memErr)
	if f := r.dev.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}
