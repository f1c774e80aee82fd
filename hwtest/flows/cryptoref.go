package flows

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
)

// The crypto flows' reference: AES-XTS (IEEE 1619) with ciphertext
// stealing, and AES key wrap (RFC 3394), written here from the standards
// so that the flows judge the device (or the model) against code that
// shares nothing with it. Neither is in the standard library, and
// golang.org/x/crypto/xts has no ciphertext stealing, which a 520- or
// 4160-byte data unit needs. cryptoref_test.go proves both with the
// standards' test vectors.

// xts is an AES-XTS key pair: data encrypts the data, tweak the tweak.
type xts struct{ data, tweak cipher.Block }

// newXTS makes the pair of a DEK's key1 and key2, each 16 or 32 bytes.
func newXTS(key1, key2 []byte) (xts, error) {
	if len(key1) != len(key2) || len(key1) != 16 && len(key1) != 32 {
		return xts{}, fmt.Errorf("xts: keys of %d and %d bytes, want two of 16 or two of 32", len(key1), len(key2))
	}
	d, err := aes.NewCipher(key1)
	if err != nil {
		return xts{}, err
	}
	tw, err := aes.NewCipher(key2)
	if err != nil {
		return xts{}, err
	}
	return xts{data: d, tweak: tw}, nil
}

// encrypt and decrypt transform src into dst (the same length, which may
// be src itself) as a device does data units of du bytes: the first unit
// with tweak initial (a 128-bit little-endian number, as
// mlx5dv_wr_set_mkey_crypto(3) takes it), each next one with the number
// one higher. The last unit may be shorter than du; every unit must hold
// at least one AES block.
func (x xts) encrypt(dst, src []byte, du int, initial [16]byte) {
	x.units(dst, src, du, initial, true)
}

func (x xts) decrypt(dst, src []byte, du int, initial [16]byte) {
	x.units(dst, src, du, initial, false)
}

func (x xts) units(dst, src []byte, du int, initial [16]byte, enc bool) {
	if len(dst) != len(src) {
		panic("xts: dst and src differ in length")
	}
	tweak := initial
	for off := 0; off < len(src); off += du {
		end := min(off+du, len(src))
		x.unit(dst[off:end], src[off:end], tweak, enc)
		tweak = nextTweak(tweak)
	}
}

// nextTweak is t plus one, both 128-bit little-endian numbers.
func nextTweak(t [16]byte) [16]byte {
	lo := binary.LittleEndian.Uint64(t[:8]) + 1
	hi := binary.LittleEndian.Uint64(t[8:])
	if lo == 0 {
		hi++
	}
	binary.LittleEndian.PutUint64(t[:8], lo)
	binary.LittleEndian.PutUint64(t[8:], hi)
	return t
}

// unit transforms one data unit with tweak value tw (IEEE 1619 §5.3 and
// §5.4: the encrypted tweak is multiplied by the primitive element α for
// each next block; a partial last block steals the ciphertext of the
// block before it).
func (x xts) unit(dst, src []byte, tw [16]byte, enc bool) {
	n := len(src)
	if n < aes.BlockSize {
		panic(fmt.Sprintf("xts: a data unit of %d bytes, shorter than one block", n))
	}
	var t [16]byte
	x.tweak.Encrypt(t[:], tw[:])
	full := n / aes.BlockSize
	partial := n % aes.BlockSize
	if partial != 0 {
		full-- // the last full block takes part in the stealing
	}
	for i := range full {
		x.block(dst[i*16:i*16+16], src[i*16:i*16+16], &t, enc)
		mulAlpha(&t)
	}
	if partial == 0 {
		return
	}
	// Blocks m-1 (whole) and m (partial): the ciphertext of the whole
	// block is cut in two, its head becoming the partial block and its
	// tail padding the partial plaintext into a whole block again.
	// Encryption uses tweaks m-1 then m; decryption m then m-1.
	last := full * 16
	first, second := t, t
	mulAlpha(&second)
	if !enc {
		first, second = second, first
	}
	var cc, pp [16]byte
	x.block(cc[:], src[last:last+16], &first, enc)
	copy(pp[:], src[last+16:])
	copy(pp[partial:], cc[partial:])
	copy(dst[last+16:], cc[:partial])
	x.block(dst[last:last+16], pp[:], &second, enc)
}

// block is one AES block under tweak value t: E(p ⊕ t) ⊕ t, or D.
func (x xts) block(dst, src []byte, t *[16]byte, enc bool) {
	var b [16]byte
	for i := range b {
		b[i] = src[i] ^ t[i]
	}
	if enc {
		x.data.Encrypt(b[:], b[:])
	} else {
		x.data.Decrypt(b[:], b[:])
	}
	for i := range b {
		dst[i] = b[i] ^ t[i]
	}
}

// mulAlpha multiplies t by α in GF(2^128) modulo x^128 + x^7 + x^2 + x + 1,
// t's bytes least significant first (IEEE 1619 §5.2).
func mulAlpha(t *[16]byte) {
	carry := t[15] >> 7
	for i := 15; i > 0; i-- {
		t[i] = t[i]<<1 | t[i-1]>>7
	}
	t[0] = t[0]<<1 ^ 0x87*carry
}

// keyWrap wraps plain, a multiple of 8 bytes and at least 16, under kek
// with AES key wrap and its default initial value 0xA6A6A6A6A6A6A6A6
// (RFC 3394 §2.2.1, NIST SP 800-38F's KW): the result is 8 bytes longer.
// It is how a crypto officer wraps a credential or a DEK for a device in
// wrapped import mode.
func keyWrap(kek, plain []byte) ([]byte, error) {
	if len(plain) < 16 || len(plain)%8 != 0 {
		return nil, fmt.Errorf("key wrap: %d bytes, want a multiple of 8 of at least 16", len(plain))
	}
	b, err := aes.NewCipher(kek)
	if err != nil {
		return nil, err
	}
	n := len(plain) / 8
	out := make([]byte, 8+len(plain))
	copy(out[8:], plain)
	a := uint64(0xA6A6A6A6A6A6A6A6)
	var buf [16]byte
	for j := range 6 {
		for i := 1; i <= n; i++ {
			r := out[8*i : 8*i+8]
			binary.BigEndian.PutUint64(buf[:8], a)
			copy(buf[8:], r)
			b.Encrypt(buf[:], buf[:])
			a = binary.BigEndian.Uint64(buf[:8]) ^ uint64(n*j+i)
			copy(r, buf[8:])
		}
	}
	binary.BigEndian.PutUint64(out[:8], a)
	return out, nil
}
