package wqe

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

// cryptoSample is a crypto's inputs with every field set.
func cryptoSample() *Crypto {
	return &Crypto{EncryptOnTx: true, SigBeforeCrypto: true, DataUnitSize: sig.BlockSize520,
		InitialTweak: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, DEK: 0x123456,
		Keytag: [8]byte{0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8}}
}

// cryptoConf is a configure of a crypto (and signature, with sigMkey)
// mkey that sets crypto, with a list of one 4 KiB entry.
func cryptoConf(sigMkey bool) *MkeyConfigure {
	return &MkeyConfigure{QPN: 0x1a2, Mkey: 0x00207300, Flags: SendInline | SendSignaled,
		List: []KLM{{Addr: 0x7e5a00000000, ByteCount: 4096, Mkey: 0x200100}}, MaxEntries: 4,
		SigMkey: sigMkey, MemPSV: 0x3e1, WirePSV: 0x3e2,
		CryptoMkey: true, Crypto: cryptoSample(), NewCrypto: true, CryptoMultiBlock: true, CryptoSingleBlock: true}
}

// TestCryptoBSFBytes: the crypto BSF's fields where mlx5_crypto_bsf has
// them, as mlx5_umr_fill_crypto_bsf fills them: the size and type, the
// order (get_crypto_order's table), AES-XTS, raw_data_size all ones, the
// data unit's selector, the tweak (reversed for the multi-block engine),
// the DEK's id in 24 bits, the keytag.
func TestCryptoBSFBytes(t *testing.T) {
	cr := cryptoSample()
	var b [CryptoBSFSize]byte
	if err := PutCryptoBSF(b[:], cr, true, true); err != nil {
		t.Fatal(err)
	}
	want := [CryptoBSFSize]byte{0: 0xc1, 1: encOrderWireSignature, 3: 0, 4: 0xff, 5: 0xff, 6: 0xff, 7: 0xff, 8: 2,
		32: 0, 33: 0x12, 34: 0x34, 35: 0x56, 40: 0xa1, 41: 0xa2, 42: 0xa3, 43: 0xa4, 44: 0xa5, 45: 0xa6, 46: 0xa7, 47: 0xa8}
	for i := range 16 {
		want[16+i] = byte(16 - i)
	}
	if b != want {
		t.Errorf("multi-block, with a signature BSF:\n got %x\nwant %x", b, want)
	}
	if err := PutCryptoBSF(b[:], cr, false, false); err != nil {
		t.Fatal(err)
	}
	want[0] = 0x81
	copy(want[16:32], cr.InitialTweak[:])
	if b != want {
		t.Errorf("single-block, alone:\n got %x\nwant %x", b, want)
	}
	for _, c := range []struct {
		encrypt, before bool
		order           uint8
	}{{true, false, encOrderRawWire}, {true, true, encOrderWireSignature}, {false, false, encOrderMemorySignature}, {false, true, encOrderRawMemory}} {
		cr.EncryptOnTx, cr.SigBeforeCrypto = c.encrypt, c.before
		_ = PutCryptoBSF(b[:], cr, false, false)
		if b[1] != c.order {
			t.Errorf("encrypt on TX %v, signature before %v: order %d, want %d", c.encrypt, c.before, b[1], c.order)
		}
	}
	for _, bad := range []*Crypto{{DataUnitSize: 5}, {DEK: 1 << 24}} {
		if err := PutCryptoBSF(b[:], bad, false, false); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
	if PutCryptoBSF(b[:63], cr, false, false) != ErrShort || PutCryptoBSF(b[:], nil, false, false) != ErrNil {
		t.Error("a short buffer or a nil crypto accepted")
	}
}

// TestBuildCryptoConfigure: the UMR of crypto configures, alone and after
// a signature BSF: the UMR ctrl's bsf_octowords and mkey mask, the mkey
// context's bsf_en, the BSFs in order after the translations, and the
// SET_PSVs of a new block.
func TestBuildCryptoConfigure(t *testing.T) {
	block := &sig.BlockAttr{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, T10DIF: &sig.T10DIF{AppTag: 7}, BlockSize: sig.BlockSize512}, CheckMask: 0xff}
	for _, tc := range []struct {
		name   string
		conf   func() *MkeyConfigure
		bsfs   int // BSF WQEBBs
		psvs   int
		bsfEn  bool
		sizeB0 byte // the first BSF's byte 0
	}{
		{"crypto alone", func() *MkeyConfigure { return cryptoConf(false) }, 1, 0, true, 0x81},
		{"crypto and a signature block", func() *MkeyConfigure { c := cryptoConf(true); c.Sig = block; return c }, 2, 1, true, 0xc0},
		{"crypto on a signature mkey without a block", func() *MkeyConfigure { return cryptoConf(true) }, 2, 0, true, 0xc0},
		{"a block, crypto set before", func() *MkeyConfigure { c := cryptoConf(true); c.NewCrypto, c.Sig = false, block; return c }, 2, 1, true, 0xc0},
		{"a block, no crypto yet", func() *MkeyConfigure {
			c := cryptoConf(true)
			c.NewCrypto, c.Crypto, c.Sig = false, nil, block
			return c
		}, 1, 1, true, 0x80},
		{"a reset, crypto set before", func() *MkeyConfigure { c := cryptoConf(true); c.NewCrypto, c.ResetSig = false, true; return c }, 2, 0, true, 0xc0},
		{"nothing new, crypto set before", func() *MkeyConfigure { c := cryptoConf(true); c.NewCrypto, c.BSF = false, BSFSet; return c }, 0, 0, false, 0},
		{"nothing new, no crypto", func() *MkeyConfigure { c := cryptoConf(false); c.NewCrypto, c.Crypto = false, nil; return c }, 0, 0, false, 0},
	} {
		c := tc.conf()
		r := make(Ring, 16*WQEBB)
		res, err := BuildMkeyConfigure(r, 0, 16, c)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if res.WQEBBs != 3+tc.bsfs+tc.psvs || res.PSVs != tc.psvs || int(res.UMRDS) != 1+3+4+4+4*tc.bsfs {
			t.Errorf("%s: %+v", tc.name, res)
		}
		umr := r.Slot(0)[CtrlSegSize:]
		mask := MkeyMask(be.Uint64(umr[umrOffMkeyMask:]))
		if got := int(be.Uint16(umr[umrOffBSFOctowords:])); got != 4*tc.bsfs || (mask&MkeyMaskBSFEnable != 0) != tc.bsfEn {
			t.Errorf("%s: bsf_octowords %d, mkey mask %#x", tc.name, got, mask)
		}
		if bsfEn := prm.Mkc.BsfEn.Get(r.Slot(1)) != 0; bsfEn != tc.bsfEn {
			t.Errorf("%s: mkc bsf_en %v", tc.name, bsfEn)
		}
		if tc.bsfs == 0 {
			continue
		}
		first := r.Slot(3)
		if first[0] != tc.sizeB0 {
			t.Errorf("%s: first BSF byte 0 %#x, want %#x", tc.name, first[0], tc.sizeB0)
		}
		var want [CryptoBSFSize]byte
		if c.Crypto != nil {
			putCryptoBSF(want[:], c.Crypto, c.SigMkey, c.CryptoMultiBlock)
			if got := r.Slot(uint16(2 + tc.bsfs)); !bytes.Equal(got, want[:]) {
				t.Errorf("%s: crypto BSF\n got %x\nwant %x", tc.name, got, want)
			}
		}
	}
}

// TestBuildCryptoKeepsBlock: a UMR that sets crypto alone on a signature
// mkey whose block stays writes that block's BSF again (BlockBSF), sized
// for the crypto BSF after it; without BlockBSF it fails.
func TestBuildCryptoKeepsBlock(t *testing.T) {
	block := &sig.BlockAttr{Wire: &sig.Domain{Type: sig.SigTypeCRC, CRC: &sig.CRC{Type: sig.CRCTypeCRC32C, Seed: 0xffffffff}, BlockSize: sig.BlockSize4096}}
	var img [BSFSegSize]byte
	if err := PutBSF(img[:], block, 0x3e1, 0x3e2); err != nil {
		t.Fatal(err)
	}
	c := cryptoConf(true)
	c.BSF, c.Block, c.BlockBSF = BSFSet, PSVsOf(block), &img
	r := make(Ring, 16*WQEBB)
	if _, err := BuildMkeyConfigure(r, 0, 16, c); err != nil {
		t.Fatal(err)
	}
	want := img
	want[0] = want[0]&^bsfSizeMask | bsfSizeSigCrypto<<bsfSizeShift
	if got := r.Slot(3); !bytes.Equal(got, want[:]) {
		t.Errorf("signature BSF\n got %x\nwant %x", got, want)
	}
	c.BlockBSF = nil
	if _, err := BuildMkeyConfigure(make(Ring, 16*WQEBB), 0, 16, c); err != ErrNoSigBlock {
		t.Errorf("without the block's BSF: %v", err)
	}
}

// TestBuildCryptoRefusals: what libmlx5 refuses of a crypto configure
// (and what mlx5go refuses beyond it), each before anything is written.
func TestBuildCryptoRefusals(t *testing.T) {
	both := &sig.BlockAttr{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, T10DIF: &sig.T10DIF{}, BlockSize: sig.BlockSize512},
		Wire: &sig.Domain{Type: sig.SigTypeT10DIF, T10DIF: &sig.T10DIF{}, BlockSize: sig.BlockSize512}}
	for _, tc := range []struct {
		name   string
		change func(c *MkeyConfigure)
		err    error
	}{
		{"crypto on an mkey without crypto", func(c *MkeyConfigure) { c.CryptoMkey = false }, ErrNotCryptoMkey},
		{"no crypto", func(c *MkeyConfigure) { c.Crypto = nil }, ErrNil},
		{"a data unit size out of the enum", func(c *MkeyConfigure) { c.Crypto.DataUnitSize = 5 }, ErrCryptoAttr},
		{"a DEK of 25 bits", func(c *MkeyConfigure) { c.Crypto.DEK = 1 << 24 }, ErrCryptoDEK},
		{"longer than the data unit, single-block", func(c *MkeyConfigure) { c.CryptoMultiBlock = false }, ErrCryptoLength},
		{"longer than the data unit, single-block, no layout", func(c *MkeyConfigure) {
			c.CryptoMultiBlock, c.List, c.Length = false, nil, 521
		}, ErrCryptoLength},
		{"an earlier crypto, longer than its data unit", func(c *MkeyConfigure) { c.CryptoMultiBlock, c.NewCrypto = false, false }, ErrCryptoLength},
		{"4 GiB", func(c *MkeyConfigure) { c.List = []KLM{{ByteCount: MaxKLMLength}, {ByteCount: MaxKLMLength}} }, ErrBSFLength},
		{"4 GiB from an earlier layout", func(c *MkeyConfigure) { c.List, c.Length = nil, 1<<32 }, ErrBSFLength},
		{"raw wire data, signature in both domains", func(c *MkeyConfigure) {
			c.SigMkey, c.Sig, c.Crypto.SigBeforeCrypto = true, both, false
		}, ErrCryptoOrder},
		{"raw memory data, the current block in both domains", func(c *MkeyConfigure) {
			c.SigMkey, c.BSF, c.Block, c.BlockBSF = true, BSFSet, PSVsOf(both), new([BSFSegSize]byte)
			c.Crypto.EncryptOnTx = false
		}, ErrCryptoOrder},
		{"crypto set before, a block in both domains, raw order", func(c *MkeyConfigure) {
			c.SigMkey, c.Sig, c.NewCrypto, c.Crypto.SigBeforeCrypto = true, both, false, false
		}, ErrCryptoOrder},
	} {
		c := cryptoConf(false)
		c.Crypto.DataUnitSize = sig.BlockSize520
		c.List[0].ByteCount = 512
		if tc.err == ErrCryptoLength {
			c.List[0].ByteCount = 521
		}
		tc.change(c)
		r := make(Ring, 16*WQEBB)
		if _, err := BuildMkeyConfigure(r, 0, 16, c); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
		if !bytes.Equal(r, make(Ring, len(r))) {
			t.Errorf("%s: the refused configure wrote to the ring", tc.name)
		}
	}
	// The orders libmlx5 takes with both domains, and a raw order with
	// one domain.
	for _, tc := range []struct {
		encrypt, before bool
		block           *sig.BlockAttr
	}{{true, true, both}, {false, false, both}, {true, false, &sig.BlockAttr{Wire: both.Wire}}} {
		c := cryptoConf(true)
		c.Sig, c.Crypto.EncryptOnTx, c.Crypto.SigBeforeCrypto = tc.block, tc.encrypt, tc.before
		if _, err := BuildMkeyConfigure(make(Ring, 16*WQEBB), 0, 16, c); err != nil {
			t.Errorf("encrypt %v, before %v: %v", tc.encrypt, tc.before, err)
		}
	}
}

// TestCryptoTemplate: a template of a crypto configure on a single-block
// engine is not copied for a list longer than the data unit.
func TestCryptoTemplate(t *testing.T) {
	c := cryptoConf(false)
	c.CryptoMultiBlock, c.Crypto.DataUnitSize, c.List[0].ByteCount = false, sig.BlockSize4096, 4096
	r := make(Ring, 16*WQEBB)
	res, err := BuildMkeyConfigure(r, 0, 16, c)
	if err != nil {
		t.Fatal(err)
	}
	var tm MkeyTemplate
	if !tm.Record(r, 0, c, res) {
		t.Fatal("not recorded")
	}
	if _, ok := tm.Put(r, 4, 16, []KLM{{ByteCount: 4096}}); !ok {
		t.Error("a list of one data unit not copied")
	}
	if _, ok := tm.Put(r, 8, 16, []KLM{{ByteCount: 4097}}); ok {
		t.Error("a list longer than the data unit copied")
	}
}
