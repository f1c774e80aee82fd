package model

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

// The crypto data path: a crypto mkey (mkc.crypto_en) encrypts or
// decrypts its data units with AES-XTS as data moves through it, by the
// crypto BSF a UMR gave it (struct mlx5_crypto_bsf, providers/mlx5/wqe.h
// of rdma-core v44.0), beside or instead of a signature BSF. The rules
// and their sources are docs/MODEL.md's "Crypto data path".

// The first byte of a BSF (bsf_size_sbs, or a crypto BSF's bsf_size_type):
// its size in bits 7:6 and, for a crypto BSF, its type in bit 0
// (MLX5_BSF_SIZE_*, MLX5_BSF_TYPE_CRYPTO in wqe.h).
const (
	bsfSizeShift        = 6
	bsfSizeWithInline   = 2 // a BSF alone
	bsfSizeSigAndCrypto = 3 // a signature BSF followed by a crypto BSF
	bsfTypeCrypto       = 1
)

// Crypto BSF fields (MLX5_ENCRYPTION_ORDER_*, MLX5_ENCRYPTION_STANDARD_*,
// mlx5_ifc.h): what enc_order says is encrypted, and the one standard.
const (
	orderEncryptedWireSig = 0 // the wire holds ciphertext, its signature encrypted with the data
	orderEncryptedMemSig  = 1 // memory holds ciphertext, its signature encrypted with the data
	orderRawWire          = 2 // the wire holds ciphertext and a signature over it in the clear
	orderRawMem           = 3 // memory holds ciphertext and a signature over it in the clear
	encStandardAESXTS     = 0
)

// cryptoConf is a crypto mkey's configuration from its crypto BSF.
type cryptoConf struct {
	order uint8
	unit  uint64 // the data unit, in bytes of the side crypto covers
	// tweak is the tweak of the data unit at offset 0 of that side, in
	// IEEE 1619's byte order (the user's, little-endian), whichever order
	// the engine read it in.
	tweak  xtsTweak
	dek    uint32 // the DEK's object id (rsvd_dek_ptr)
	keytag [8]byte
	// single is the single-block engine: the mkey is one data unit.
	single bool
}

// encryptOnTX is mlx5dv_crypto_attr's encrypt_on_tx, which libmlx5's
// get_crypto_order folds into enc_order: memory data is encrypted on TX
// and wire data decrypted on RX.
func (c *cryptoConf) encryptOnTX() bool {
	return c.order == orderEncryptedWireSig || c.order == orderRawWire
}

// wireSide reports whether crypto works on the wire side of the signature
// engine (after it on TX, before it on RX), over the wire layout, rather
// than on the memory side over the memory layout. The encrypted-signature
// orders cover their own domain, signature included, so the signature is
// over plaintext; the raw orders cover the data only and leave the
// signature of the encrypted domain over the ciphertext, so crypto sits
// on the side with no signature (libmlx5 refuses a raw order with both).
func (c *cryptoConf) wireSide(sc *sigConf) bool {
	switch c.order {
	case orderEncryptedWireSig:
		return true
	case orderEncryptedMemSig:
		return false
	}
	return sc == nil || sc.attr.Wire == nil
}

// cryptoMkey reports whether mk was created as a crypto mkey.
func (mk *mkeyObj) cryptoMkey() bool { return prm.Mkc.CryptoEn.Get(mk.mkc) != 0 }

// xtsEngines returns the HCA's AES-XTS engines (cmd_hca_cap's
// aes_xts_single_block_le_tweak and aes_xts_multi_block_be_tweak): single
// is true when it has either (the multi-block engine does single blocks
// too, as libmlx5 reports it), multi when it has the multi-block one. The
// single-block engine takes the tweak little-endian and an mkey of one
// data unit; the multi-block one takes it big-endian (libmlx5 reverses the
// user's bytes for it, qp.c mlx5_umr_fill_crypto_bsf) and any number of
// data units.
func (h *hca) xtsEngines() (single, multi bool) {
	multi = h.prof.cap(prm.CmdHcaCap.AesXtsMultiBlockBeTweak) != 0
	return multi || h.prof.cap(prm.CmdHcaCap.AesXtsSingleBlockLeTweak) != 0, multi
}

// checkCryptoMkey is CREATE_MKEY's rule for mkc.crypto_en: the HCA has
// crypto and an AES-XTS engine, crypto_en is 1 (the value libmlx5 sets),
// and the mkey has its BSF enabled with room for a crypto BSF.
func (h *hca) checkCryptoMkey(mkc []byte) *fwErr {
	en := prm.Mkc.CryptoEn.Get(mkc)
	if en == 0 {
		return nil
	}
	single, _ := h.xtsEngines()
	switch {
	case h.prof.cap(prm.CmdHcaCap.Crypto) == 0 || !single:
		return badParam(SyndromeBadValue)
	case en != 1, prm.Mkc.BsfEn.Get(mkc) == 0, prm.Mkc.BsfOctwordSize.Get(mkc) < bsfSize/16:
		return badParam(SyndromeBadValue)
	}
	return nil
}

// parseBSFs reads a UMR's BSF octwords for mkey mk: a signature BSF, a
// crypto BSF, or a signature BSF followed by a crypto BSF, told apart by
// their first bytes as libmlx5 writes them (a signature BSF with no
// domain configured, which libmlx5 writes beside a crypto BSF after a
// signature reset, leaves no signature). Every check comes before any
// change.
func (h *hca) parseBSFs(mk *mkeyObj, b []byte) (*sigConf, *cryptoConf, *wqeFail) {
	first := b[:bsfSize]
	size, isCrypto := first[0]>>bsfSizeShift, first[0]&bsfTypeCrypto != 0
	var sc *sigConf
	var cb []byte
	var f *wqeFail
	switch {
	case len(b) == bsfSize && !isCrypto:
		if size == bsfSizeSigAndCrypto {
			return nil, nil, qpOpErr("UMR: a signature BSF of size SIG_AND_CRYPTO with no crypto BSF after it")
		}
		sc, f = h.parseBSF(first, mk.pdn)
		return sc, nil, f
	case len(b) == bsfSize:
		if size != bsfSizeWithInline {
			return nil, nil, qpOpErr("UMR: a crypto BSF alone of size %d, not %d", size, bsfSizeWithInline)
		}
		cb = first
	default:
		cb = b[bsfSize : 2*bsfSize]
		if isCrypto || size != bsfSizeSigAndCrypto || cb[0] != bsfSizeSigAndCrypto<<bsfSizeShift|bsfTypeCrypto {
			return nil, nil, qpOpErr("UMR: two BSFs must be a signature BSF then a crypto BSF, both of size SIG_AND_CRYPTO (first bytes %#x, %#x)", first[0], cb[0])
		}
		if first[0]&bsfSBS != 0 || first[2] != 0 || first[3] != 0 {
			if sc, f = h.parseBSF(first, mk.pdn); f != nil {
				return nil, nil, f
			}
		}
	}
	if !mk.cryptoMkey() {
		return nil, nil, qpOpErr("UMR: a crypto BSF for an mkey created without crypto_en")
	}
	cc, why := h.decodeCryptoBSF(cb, sc)
	if why != "" {
		return nil, nil, qpOpErr("UMR: crypto BSF: %s", why)
	}
	return sc, cc, nil
}

// decodeCryptoBSF reads a crypto BSF, beside signature configuration sc
// (nil for none); why is non-empty for one the model refuses. The DEK it
// names is looked up when data moves, not here.
func (h *hca) decodeCryptoBSF(b []byte, sc *sigConf) (*cryptoConf, string) {
	order, std, sel := b[1], b[3], b[8]
	if std != encStandardAESXTS {
		return nil, fmt.Sprintf("encryption standard %#x, not AES-XTS (0)", std)
	}
	if order > orderRawMem {
		return nil, fmt.Sprintf("enc_order %#x", order)
	}
	if (order == orderRawWire || order == orderRawMem) && sc != nil && sc.attr.Mem != nil && sc.attr.Wire != nil {
		return nil, "a raw crypto order with signatures in both domains, which the device does not support (libmlx5's get_crypto_order)"
	}
	bs, ok := bsfBlockSizes[sel]
	if !ok {
		return nil, fmt.Sprintf("data unit size selector %#x", sel)
	}
	single, multi := h.xtsEngines()
	if !single {
		return nil, "the HCA has no AES-XTS engine"
	}
	c := &cryptoConf{order: order, unit: uint64(bs.Bytes()), dek: binary.BigEndian.Uint32(b[32:]) & 0xffffff, single: !multi}
	copy(c.tweak[:], b[16:32])
	if multi {
		for i, j := 0, len(c.tweak)-1; i < j; i, j = i+1, j-1 {
			c.tweak[i], c.tweak[j] = c.tweak[j], c.tweak[i]
		}
	}
	copy(c.keytag[:], b[40:48])
	return c, ""
}

// cryptoJob is a transfer's crypto: n bytes at offset off of the side of
// the signature engine crypto covers (wire: the mkey's wire-domain
// offset; else its memory-domain offset), with the DEK's cipher.
type cryptoJob struct {
	c      *cryptoConf
	x      *xtsCipher
	wire   bool
	off, n uint64
}

// cryptoPlan resolves the crypto of a transfer of n bytes at addr through
// mk (named by key): nil for an mkey that is not a crypto mkey; a key
// error, before anything moves, for one that cannot run it. sx is the
// signature plan of a signature mkey, nil for none. The device
// dereferences the DEK as data moves, so the DEK is checked here, not at
// the UMR: it exists, is in the mkey's PD, is READY, and a DEK with a
// keytag has the BSF's.
func (h *hca) cryptoPlan(mk *mkeyObj, key uint32, addr, n uint64, sx *sigXfer) (*cryptoJob, *keyErr) {
	if !mk.cryptoMkey() {
		return nil, nil
	}
	c := mk.crypto
	if c == nil || prm.Mkc.BsfEn.Get(mk.mkc) == 0 {
		return nil, keyFail("key %#x: a crypto mkey with no crypto configuration (no UMR gave it a crypto BSF)", key)
	}
	var sc *sigConf
	if mk.sigOn() {
		sc = mk.sig
	}
	j := &cryptoJob{c: c, wire: c.wireSide(sc), n: n}
	start := prm.Mkc.StartAddr.Get(mk.mkc)
	switch {
	case sx != nil && !j.wire:
		j.off, j.n = sx.memAddr-start, sx.memLen
	case addr < start:
		return nil, keyFail("key %#x: address %#x is below the mkey's start %#x", key, addr, start)
	default:
		j.off = addr - start
	}
	d, ok := h.deks[c.dek]
	switch {
	case !ok:
		return nil, keyFail("key %#x: the crypto BSF names DEK %#x, which does not exist", key, c.dek)
	case d.pdn != mk.pdn:
		return nil, keyFail("key %#x: DEK %#x is in PD %#x, the mkey in PD %#x", key, c.dek, d.pdn, mk.pdn)
	case d.state != prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_READY:
		return nil, keyFail("key %#x: DEK %#x is in state %d, not READY", key, c.dek, d.state)
	case d.hasKeytag && !bytes.Equal(d.keytag[:], c.keytag[:]):
		return nil, keyFail("key %#x: the crypto BSF's keytag is not DEK %#x's", key, c.dek)
	}
	u := c.unit
	last := j.n % u
	switch {
	case j.n == 0:
	case j.off%u != 0:
		return nil, keyFail("key %#x: offset %#x is not on a %d-byte data unit boundary", key, j.off, u)
	case last != 0 && (j.n%xtsBlock != 0 || last > u-xtsBlock):
		return nil, keyFail("key %#x: %d bytes in %d-byte data units: the job size is neither a multiple of the data unit nor a multiple of 16 ending at most data unit - 16 into one (mlx5dv_wr_set_mkey_crypto(3))", key, j.n, u)
	case last != 0 && last < xtsBlock:
		return nil, keyFail("key %#x: %d bytes in %d-byte data units end with %d bytes, less than the AES block XTS needs", key, j.n, u, last)
	case c.single && j.off+j.n > u:
		return nil, keyFail("key %#x: [%#x, +%#x) leaves the one %d-byte data unit of the single-block AES-XTS engine", key, j.off, j.n, u)
	}
	x, err := newXTS(d.key1, d.key2)
	if err != nil {
		return nil, keyFail("key %#x: DEK %#x: %v", key, c.dek, err)
	}
	j.x = x
	return j, nil
}

// run en/decrypts b, the job's n bytes, for a transfer in direction dir
// (encrypting on TX if encrypt_on_tx, else decrypting; RX the other way)
// and returns the result. Each data unit is one XTS data unit, its tweak
// the initial tweak plus its number from offset 0; a last, shorter unit
// is one too.
func (j *cryptoJob) run(dir sig.Direction, b []byte) []byte {
	out := make([]byte, len(b))
	dec := (dir == sig.TX) != j.c.encryptOnTX()
	u := j.c.unit
	for at := uint64(0); at < uint64(len(b)); at += u {
		end := min(at+u, uint64(len(b)))
		// cryptoPlan checked the lengths crypt refuses.
		_ = j.x.crypt(out[at:end], b[at:end], j.c.tweak.add((j.off+at)/u), dec)
	}
	return out
}
