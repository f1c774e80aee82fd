package wqe

import (
	"errors"

	"github.com/mlx5go/mlx5go/sig"
)

// Crypto is the AES-XTS crypto of an mkey configure (struct
// mlx5dv_crypto_attr of mlx5dv_wr_set_mkey_crypto; AES-XTS is the only
// standard), as plain values: the DEK by its object id. It has no
// pointers, so the mkey's owner keeps the one in effect by value.
type Crypto struct {
	// EncryptOnTx: memory holds plaintext, the wire ciphertext.
	EncryptOnTx bool
	// SigBeforeCrypto is MLX5DV_SIGNATURE_CRYPTO_ORDER_SIGNATURE_BEFORE_CRYPTO_ON_TX;
	// without it, the signature comes after crypto on TX.
	SigBeforeCrypto bool
	// DataUnitSize is the AES-XTS data unit: the tweak advances by one
	// after each.
	DataUnitSize sig.BlockSize
	// InitialTweak is the first data unit's tweak as the caller gives it:
	// little-endian. The crypto BSF holds it reversed on a device with the
	// multi-block engine (MkeyConfigure.CryptoMultiBlock).
	InitialTweak [16]byte
	// DEK is the object id of the DEK (24 bits).
	DEK uint32
	// Keytag is copied to the BSF as given.
	Keytag [8]byte
}

// The crypto BSF's fields (struct mlx5_crypto_bsf of libmlx5's wqe.h,
// enum mlx5_encryption_order and the encryption standard of mlx5_ifc.h).
const (
	bsfSizeShift      = 6
	bsfSizeMask       = 3 << bsfSizeShift
	bsfSizeWithInline = 2 // MLX5_BSF_SIZE_WITH_INLINE
	bsfSizeSigCrypto  = 3 // MLX5_BSF_SIZE_SIG_AND_CRYPTO: a crypto BSF comes with the signature BSF
	bsfTypeCrypto     = 1 // MLX5_BSF_TYPE_CRYPTO

	encOrderWireSignature   = 0 // MLX5_ENCRYPTION_ORDER_ENCRYPTED_WIRE_SIGNATURE
	encOrderMemorySignature = 1 // MLX5_ENCRYPTION_ORDER_ENCRYPTED_MEMORY_SIGNATURE
	encOrderRawWire         = 2 // MLX5_ENCRYPTION_ORDER_ENCRYPTED_RAW_WIRE
	encOrderRawMemory       = 3 // MLX5_ENCRYPTION_ORDER_ENCRYPTED_RAW_MEMORY
	encStandardAESXTS       = 0 // MLX5_ENCRYPTION_STANDARD_AES_XTS

	// Byte offsets in the crypto BSF.
	cbsfOffOrder    = 1
	cbsfOffStandard = 3
	cbsfOffRawSize  = 4
	cbsfOffBS       = 8  // bs_pointer: the data unit's block size selector
	cbsfOffTweak    = 16 // xts_init_tweak
	cbsfOffDEK      = 32 // rsvd_dek_ptr: the DEK's object id, 24 bits
	cbsfOffKeytag   = 40
)

// CryptoBSFSize is the size of the crypto BSF (struct mlx5_crypto_bsf).
const CryptoBSFSize = 64

// Errors of a crypto configure. libmlx5 44.0 fails each of these with
// EINVAL at ibv_wr_complete but ErrNotCryptoMkey, which it fails at the
// setter, and ErrCryptoDEK, which it does not check (it masks the id to
// 24 bits).
var (
	ErrNotCryptoMkey = errors.New("wqe: crypto on an mkey without crypto support")
	ErrCryptoAttr    = errors.New("wqe: bad crypto attribute (data unit size)")
	ErrCryptoDEK     = errors.New("wqe: DEK object id wider than 24 bits")
	// ErrCryptoOrder: the signature block has both domains and the order
	// puts crypto on the raw data of one of them (encrypt on TX with the
	// signature after crypto, or decrypt on TX with it before), which the
	// device does not support.
	ErrCryptoOrder = errors.New("wqe: crypto order with raw data and a signature in both domains")
	// ErrCryptoLength: on a device with only the single-block AES-XTS
	// engine, the mkey maps more than one data unit.
	ErrCryptoLength = errors.New("wqe: mkey longer than its crypto data unit on a single-block engine")
	// ErrBSFLength: a UMR that writes a BSF for an mkey of more than
	// 2^32-1 bytes (the BSF's raw_data_size).
	ErrBSFLength = errors.New("wqe: mkey longer than a BSF describes (2^32-1 bytes)")
)

// order is the crypto BSF's enc_order (libmlx5's get_crypto_order).
func (cr *Crypto) order() uint8 {
	switch {
	case cr.EncryptOnTx && cr.SigBeforeCrypto:
		return encOrderWireSignature
	case cr.EncryptOnTx:
		return encOrderRawWire
	case cr.SigBeforeCrypto:
		return encOrderRawMemory
	}
	return encOrderMemorySignature
}

// bsfs reports which BSFs c's UMR writes. A UMR of an mkey without crypto
// writes the signature BSF of a new block. One of a crypto mkey rewrites
// its BSF when the work request sets or resets a signature block, or sets
// crypto: the signature BSF of a signature mkey, and the crypto BSF of an
// mkey whose crypto is set, new or from an earlier configure (libmlx5's
// crypto_umr_wqe_finalize).
func (c *MkeyConfigure) bsfs() (sigBSF, cryptoBSF bool) {
	if !c.CryptoMkey {
		return c.Sig != nil, false
	}
	if !c.NewCrypto && !(c.SigMkey && (c.Sig != nil || c.ResetSig)) {
		return false, false
	}
	return c.SigMkey, c.Crypto != nil
}

// BSFBytes is the size of the BSFs c's UMR carries after its translations
// (0, 64 or 128 bytes): part of its inline data.
func (c *MkeyConfigure) BSFBytes() int {
	switch {
	case c.CryptoMkey:
		return c.cryptoBSFBytes()
	case c.Sig != nil:
		return BSFSegSize
	}
	return 0
}

// cryptoBSFBytes is BSFBytes of a crypto mkey's UMR.
func (c *MkeyConfigure) cryptoBSFBytes() int {
	n := 0
	if s, cr := c.bsfs(); s && cr {
		n = BSFSegSize + CryptoBSFSize
	} else if s || cr {
		n = BSFSegSize
	}
	return n
}

// blockBothDomains reports whether the signature block in effect for c's
// UMR has a signature in both domains: the new block, or the mkey's
// current one (Block, when BSF is BSFSet); none after a reset.
func (c *MkeyConfigure) blockBothDomains() bool {
	switch {
	case !c.SigMkey || c.ResetSig:
		return false
	case c.Sig != nil:
		return c.Sig.Mem != nil && c.Sig.Wire != nil
	case c.BSF == BSFSet:
		return c.Block.Mem && c.Block.Wire
	}
	return false
}

// checkCrypto checks what a crypto mkey's UMR requires (or refuses
// crypto on another mkey), given its layout's length (layout: c has one;
// without one the mkey keeps its length, c.Length), in libmlx5's order: the crypto attribute, the length on a
// single-block engine, then, when the UMR writes a BSF, the length it
// describes and the crypto order against the signature block.
func (c *MkeyConfigure) checkCrypto(layout bool, length uint64) error {
	if !layout {
		length = c.Length
	}
	cr := c.Crypto
	switch {
	case c.NewCrypto && !c.CryptoMkey:
		return ErrNotCryptoMkey
	case c.NewCrypto && cr == nil:
		return ErrNil
	case cr == nil:
	case cr.DataUnitSize.Bytes() == 0:
		return ErrCryptoAttr
	case cr.DEK > 0xffffff:
		return ErrCryptoDEK
	case c.CryptoSingleBlock && !c.CryptoMultiBlock && length > uint64(cr.DataUnitSize.Bytes()):
		return ErrCryptoLength
	}
	sigBSF, cryptoBSF := c.bsfs()
	switch {
	case !sigBSF && !cryptoBSF:
		return nil
	case length > 0xffffffff:
		return ErrBSFLength
	case sigBSF && c.Sig == nil && !c.ResetSig && c.BSF == BSFSet && c.BlockBSF == nil:
		return ErrNoSigBlock
	case cryptoBSF && c.blockBothDomains() && (cr.order() == encOrderRawWire || cr.order() == encOrderRawMemory):
		return ErrCryptoOrder
	}
	return nil
}

// cryptoBSFs checks a crypto mkey's UMR (checkCrypto; or refuses crypto
// on another mkey) and returns the octowords of the BSFs it writes.
//
//go:noinline
func (c *MkeyConfigure) cryptoBSFs(length uint64) (int, error) {
	if err := c.checkCrypto(c.List != nil || c.Interleaved != nil, length); err != nil {
		return 0, err
	}
	return c.cryptoBSFBytes() / 16, nil
}

// putCryptoBSFs writes a crypto mkey's BSFs from WQEBB next on and
// returns the counter after them.
//
//go:noinline
func (c *MkeyConfigure) putCryptoBSFs(r Ring, next uint16) uint16 {
	sigBSF, cryptoBSF := c.bsfs()
	if sigBSF {
		c.putSigBSF(r.slot(next), cryptoBSF)
		next++
	}
	if cryptoBSF {
		putCryptoBSF(r.slot(next), c.Crypto, c.SigMkey, c.CryptoMultiBlock)
		next++
	}
	return next
}

// putSigBSF writes the signature BSF of a crypto mkey's UMR into b[:64]:
// the new block's, the current block's (BlockBSF) when the UMR rewrites
// the BSF for crypto alone, or one without a domain when the mkey has no
// block; its size says whether the crypto BSF follows.
func (c *MkeyConfigure) putSigBSF(b []byte, crypto bool) {
	b = b[:BSFSegSize]
	switch {
	case c.Sig != nil:
		putBSF(b, c.Sig, c.MemPSV, c.WirePSV)
	case !c.ResetSig && c.BSF == BSFSet:
		copy(b, c.BlockBSF[:])
	default:
		clear(b)
		be.PutUint32(b[4:], bsfRawDataSize)
	}
	size := uint8(bsfSizeWithInline)
	if crypto {
		size = bsfSizeSigCrypto
	}
	b[0] = b[0]&^bsfSizeMask | size<<bsfSizeShift
}

// putCryptoBSF writes the crypto BSF of cr into b[:64] (libmlx5's
// mlx5_umr_fill_crypto_bsf): withSig for a signature mkey, whose
// signature BSF comes first; bigEndian reverses the tweak.
func putCryptoBSF(b []byte, cr *Crypto, withSig, bigEndian bool) {
	b = b[:CryptoBSFSize]
	clear(b)
	size := uint8(bsfSizeWithInline)
	if withSig {
		size = bsfSizeSigCrypto
	}
	b[0] = size<<bsfSizeShift | bsfTypeCrypto
	b[cbsfOffOrder] = cr.order()
	b[cbsfOffStandard] = encStandardAESXTS
	be.PutUint32(b[cbsfOffRawSize:], bsfRawDataSize)
	b[cbsfOffBS] = bsSelector[cr.DataUnitSize]
	t := b[cbsfOffTweak : cbsfOffTweak+16]
	if bigEndian {
		for i, v := range cr.InitialTweak {
			t[15-i] = v
		}
	} else {
		copy(t, cr.InitialTweak[:])
	}
	be.PutUint32(b[cbsfOffDEK:], cr.DEK&0xffffff)
	copy(b[cbsfOffKeytag:], cr.Keytag[:])
}

// PutCryptoBSF writes the crypto BSF of cr into b[:64], as
// BuildMkeyConfigure writes it for an mkey with (withSig) or without block
// signature support on a device whose AES-XTS engine is multi-block
// (bigEndian tweak) or not.
func PutCryptoBSF(b []byte, cr *Crypto, withSig, bigEndian bool) error {
	switch {
	case cr == nil:
		return ErrNil
	case len(b) < CryptoBSFSize:
		return ErrShort
	case cr.DataUnitSize.Bytes() == 0:
		return ErrCryptoAttr
	case cr.DEK > 0xffffff:
		return ErrCryptoDEK
	}
	putCryptoBSF(b, cr, withSig, bigEndian)
	return nil
}
