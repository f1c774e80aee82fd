package wqe

import (
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/sig"
)

// sample is the oracle README's sample case: both domains T10-DIF, one SGE.
func sample() *MkeyConfigure {
	return &MkeyConfigure{
		QPN: 0x1a2, Mkey: 0x00207300, Flags: SendInline | SendSignaled,
		SetAccess: true, Access: AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite,
		List:       []KLM{{Addr: 0x7e5a00000000, ByteCount: 4096, Mkey: 0x200100}},
		MaxEntries: 4,
		Sig: &sig.BlockAttr{
			Mem:       &sig.Domain{Type: sig.SigTypeT10DIF, T10DIF: &sig.T10DIF{AppTag: 0x1234, RefTag: 0x5678}, BlockSize: sig.BlockSize512},
			Wire:      &sig.Domain{Type: sig.SigTypeT10DIF, T10DIF: &sig.T10DIF{Seed: 0xffff, AppTag: 0xabcd, RefTag: 0x11223344, Flags: sig.T10DIFAppEscape}, BlockSize: sig.BlockSize520},
			CheckMask: 0xff,
		},
		MemPSV: 0x3e1, WirePSV: 0x3e2, SigMkey: true, UpdateSigErr: true,
	}
}

func TestBuildSample(t *testing.T) {
	r := make(Ring, 8*WQEBB)
	res, err := BuildMkeyConfigure(r, 0, 8, sample())
	if err != nil {
		t.Fatal(err)
	}
	want := MkeyConfigureResult{Result: Result{WQEBBs: 6, DS: 2, Doorbell: 0x000005200001a202, SmallFence: true}, UMRDS: 16, PSVDS: 2, PSVs: 2}
	if res != want {
		t.Errorf("got %+v, want %+v", res, want)
	}
}

// TestBuildErrors checks that bad inputs fail with the documented error
// and leave the ring untouched.
func TestBuildErrors(t *testing.T) {
	cases := []struct {
		name string
		mod  func(c *MkeyConfigure, r *Ring)
		want error
	}{
		{"no inline", func(c *MkeyConfigure, _ *Ring) { c.Flags = SendSignaled }, ErrNotInline},
		{"too many sges", func(c *MkeyConfigure, _ *Ring) { c.List = make([]KLM, 5) }, ErrTooManyEntries},
		{"both layouts", func(c *MkeyConfigure, _ *Ring) { c.Interleaved = []RepeatEntry{{ByteCount: 1}}; c.RepeatCount = 1 }, ErrLayout},
		{"repeat 0", func(c *MkeyConfigure, _ *Ring) { c.List = nil; c.Interleaved = []RepeatEntry{{ByteCount: 1}} }, ErrLayout},
		{"stride", func(c *MkeyConfigure, _ *Ring) {
			c.List = nil
			c.Interleaved = []RepeatEntry{{ByteCount: 0xffff, Skip: 1}}
			c.RepeatCount = 1
		}, ErrLayout},
		{"plain mkey", func(c *MkeyConfigure, _ *Ring) { c.SigMkey = false }, ErrNotSigMkey},
		{"reset with sig", func(c *MkeyConfigure, _ *Ring) { c.ResetSig = true }, ErrResetWithSig},
		{"bad attr", func(c *MkeyConfigure, _ *Ring) { c.Sig.Mem.T10DIF.Seed = 0x1234 }, sig.ErrT10DIFSeed},
		{"no domain", func(c *MkeyConfigure, _ *Ring) { c.Sig.Mem, c.Sig.Wire = nil, nil }, sig.ErrNoDomain},
		{"psv", func(c *MkeyConfigure, _ *Ring) { c.WirePSV = 1 << 24 }, ErrPSV},
		{"qpn", func(c *MkeyConfigure, _ *Ring) { c.QPN = 1 << 24 }, ErrQPN},
		{"ring small", func(_ *MkeyConfigure, r *Ring) { *r = (*r)[:4*WQEBB] }, ErrRing},
		{"ring not pow2", func(_ *MkeyConfigure, r *Ring) { *r = (*r)[:12*WQEBB] }, ErrRing},
		{"ring ragged", func(_ *MkeyConfigure, r *Ring) { *r = (*r)[:8*WQEBB+1] }, ErrRing},
		{"too many for ds", func(c *MkeyConfigure, _ *Ring) { c.MaxEntries = 0; c.List = make([]KLM, 60) }, ErrTooManyEntries},
		{"klm 2^31+1", func(c *MkeyConfigure, _ *Ring) { c.List = []KLM{{ByteCount: 1}, {ByteCount: 1<<31 + 1}} }, ErrKLMLength},
		{"klm 2^32-1", func(c *MkeyConfigure, _ *Ring) { c.List = []KLM{{ByteCount: 0xffffffff}} }, ErrKLMLength},
		{"caps", func(c *MkeyConfigure, _ *Ring) { c.Caps = &sig.Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 2} }, sig.ErrUnsupported},
		{"invalid before caps", func(c *MkeyConfigure, _ *Ring) {
			c.Caps = &sig.Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 2}
			c.Sig.Mem.T10DIF.Seed = 0x1234
		}, sig.ErrT10DIFSeed},
	}
	for _, tc := range cases {
		c := sample()
		r := make(Ring, 16*WQEBB+1)[:8*WQEBB]
		tc.mod(c, &r)
		_, err := BuildMkeyConfigure(r, 3, len(r)/WQEBB, c)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		for _, b := range r[:cap(r)] {
			if b != 0 {
				t.Errorf("%s: ring written", tc.name)
				break
			}
		}
	}
}

func TestSegmentsShort(t *testing.T) {
	b := make([]byte, 15)
	a := sample().Sig
	for name, err := range map[string]error{
		"ctrl":    PutCtrl(b, &Ctrl{}),
		"umrctrl": PutUMRCtrl(b, &UMRCtrl{}),
		"mkc":     PutMkc(b, &Mkc{}),
		"klm":     PutKLM(b, KLM{}),
		"repeat":  PutRepeatBlockHeader(b, 0, 0, 0),
		"entry":   PutRepeatEntry(b, RepeatEntry{}),
		"bsf":     PutBSF(b, a, 1, 2),
		"psv":     PutSetPSV(b, SetPSV{}),
	} {
		if !errors.Is(err, ErrShort) {
			t.Errorf("%s: %v, want ErrShort", name, err)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	r := make(Ring, 1024*WQEBB)
	c := sample()
	pi := uint16(1020)
	if n := testing.AllocsPerRun(100, func() {
		res, err := BuildMkeyConfigure(r, pi, 1024, c)
		if err != nil {
			t.Fatal(err)
		}
		pi += uint16(res.WQEBBs)
	}); n != 0 {
		t.Errorf("%v allocs per build", n)
	}
}

// BenchmarkBuildMkeyConfigure is the oracle's umr_sig_t10dif_both_list1
// bench: UMR (4 WQEBBs) + 2 SET_PSV, T10-DIF in both domains, one SGE.
func BenchmarkBuildMkeyConfigure(b *testing.B) {
	r := make(Ring, 1024*WQEBB)
	c := sample()
	var pi uint16
	b.ReportAllocs()
	for b.Loop() {
		res, err := BuildMkeyConfigure(r, pi, 1024, c)
		if err != nil {
			b.Fatal(err)
		}
		pi += uint16(res.WQEBBs)
	}
}

// TestSigErrCounterUpdate checks when a UMR without a signature block is
// followed by the SET_PSVs of the mkey's current block: only when it
// updates the signature error counter of a signature mkey whose block
// stays set.
func TestSigErrCounterUpdate(t *testing.T) {
	s := sample()
	block := PSVsOf(s.Sig)
	reconf := func() *MkeyConfigure {
		c := sample()
		c.Sig, c.SetAccess, c.Access = nil, false, 0
		c.BSF, c.Block, c.UpdateSigErr, c.SigErrs = BSFSet, block, true, 1
		return c
	}
	cases := []struct {
		name string
		mod  func(c *MkeyConfigure)
		psvs int
		err  error
	}{
		{"after an error", func(*MkeyConfigure) {}, 2, nil},
		{"wire only", func(c *MkeyConfigure) { c.Block = PSVsOf(&sig.BlockAttr{Wire: s.Sig.Wire}) }, 1, nil},
		{"no update", func(c *MkeyConfigure) { c.UpdateSigErr = false }, 0, nil},
		{"bsf init", func(c *MkeyConfigure) { c.BSF = BSFInit }, 0, nil},
		{"bsf reset", func(c *MkeyConfigure) { c.BSF = BSFReset }, 0, nil},
		{"reset now", func(c *MkeyConfigure) { c.ResetSig = true }, 0, nil},
		{"plain mkey", func(c *MkeyConfigure) { c.SigMkey = false }, 0, nil},
		{"new block", func(c *MkeyConfigure) { c.Sig = &sig.BlockAttr{Mem: s.Sig.Mem} }, 1, nil},
		{"no block", func(c *MkeyConfigure) { c.Block = BlockPSVs{} }, 0, ErrNoSigBlock},
		{"no block, no update", func(c *MkeyConfigure) { c.Block, c.UpdateSigErr = BlockPSVs{}, false }, 0, nil},
		{"psv", func(c *MkeyConfigure) { c.WirePSV = 1 << 24 }, 0, ErrPSV},
		{"psv of an absent domain", func(c *MkeyConfigure) { c.Block.Wire, c.WirePSV = false, 1<<24 }, 1, nil},
	}
	for _, tc := range cases {
		c := reconf()
		tc.mod(c)
		r := make(Ring, 8*WQEBB)
		res, err := BuildMkeyConfigure(r, 0, 8, c)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
			continue
		}
		if err != nil {
			continue
		}
		if res.PSVs != tc.psvs {
			t.Errorf("%s: %d SET_PSVs, want %d", tc.name, res.PSVs, tc.psvs)
		}
	}

	// The SET_PSVs after the counter update are those of the block, with
	// the completion moved to the last one.
	c := reconf()
	c.Flags |= SendSignaled
	r := make(Ring, 8*WQEBB)
	res, err := BuildMkeyConfigure(r, 0, 8, c)
	if err != nil {
		t.Fatal(err)
	}
	want := MkeyConfigureResult{Result: Result{WQEBBs: 5, DS: 2, Doorbell: 0x000004200001a202, SmallFence: true}, UMRDS: 12, PSVDS: 2, PSVs: 2}
	if res != want {
		t.Errorf("got %+v, want %+v", res, want)
	}
	umr, mem, wire := r.Slot(0), r.Slot(3), r.Slot(4)
	if mask := MkeyMask(be.Uint64(umr[CtrlSegSize+umrOffMkeyMask:])); mask != MkeyMaskFree|MkeyMaskMkey|MkeyMaskLen|MkeyMaskSigErr || umr[11] != 0 {
		t.Errorf("UMR mkey mask %#x, fm_ce_se %#x", mask, umr[11])
	}
	if be.Uint32(mem[16:]) != s.MemPSV || be.Uint64(mem[24:]) != block.MemSig || mem[11] != CtrlSmallFence {
		t.Errorf("memory SET_PSV %x", mem[:32])
	}
	if be.Uint32(wire[16:]) != s.WirePSV || be.Uint64(wire[24:]) != block.WireSig || wire[11] != CtrlSmallFence|CtrlCQUpdate {
		t.Errorf("wire SET_PSV %x", wire[:32])
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = BuildMkeyConfigure(r, 0, 8, c) }); n != 0 {
		t.Errorf("%v allocs", n)
	}
}

// A KLM maps up to 2 GiB, that included (mlx5dv.h: "up to 2GB"). Two of
// them make an mkey of 4 GiB, which a BSF does not describe: with a
// signature block libmlx5 refuses it (EINVAL, "The length must fit the
// raw_data_size of the BSF"), without one it takes it.
func TestBuildKLMOf2GiB(t *testing.T) {
	c := sample()
	c.List = []KLM{{ByteCount: MaxKLMLength}, {ByteCount: MaxKLMLength}}
	r := make(Ring, 8*WQEBB)
	if _, err := BuildMkeyConfigure(r, 0, 8, c); err != ErrBSFLength {
		t.Fatalf("with a signature block: %v, want ErrBSFLength", err)
	}
	c.Sig = nil
	if _, err := BuildMkeyConfigure(r, 0, 8, c); err != nil {
		t.Fatal(err)
	}
	if got := be.Uint32(r[CtrlSegSize+UMRCtrlSegSize+MkcSegSize+KLMSegSize:]); got != MaxKLMLength {
		t.Errorf("the second KLM's byte_count %#x", got)
	}
}
