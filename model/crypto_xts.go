package model

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"fmt"
)

// AES-XTS, IEEE Std 1619-2007, as the device applies it to a crypto mkey's
// data units. golang.org/x/crypto/xts does not fit: its tweak is a 64-bit
// sector number (mlx5's is a 16-byte value the device increments, and
// libmlx5 passes all 16 bytes), and it refuses a data unit that is not a
// multiple of 16 bytes, while a 520-byte data unit needs ciphertext
// stealing. So the model has its own, on crypto/aes (docs/MODEL.md,
// "Crypto data path").

// xtsBlock is the AES block size, the unit XTS works in.
const xtsBlock = aes.BlockSize

// xtsCipher is an AES-XTS key pair: key1 encrypts the data, key2 the
// tweak.
type xtsCipher struct {
	data, tweak cipher.Block
}

// newXTS builds the cipher of key1 and key2, each 16 or 32 bytes (AES-128
// or AES-256), of the same size.
func newXTS(key1, key2 []byte) (*xtsCipher, error) {
	if len(key1) != len(key2) || len(key1) != 16 && len(key1) != 32 {
		return nil, fmt.Errorf("AES-XTS keys of %d and %d bytes, not two of 16 or two of 32", len(key1), len(key2))
	}
	d, err := aes.NewCipher(key1)
	if err != nil {
		return nil, err
	}
	t, err := aes.NewCipher(key2)
	if err != nil {
		return nil, err
	}
	return &xtsCipher{data: d, tweak: t}, nil
}

// xtsTweak is a tweak value as IEEE 1619 writes it: the data unit's
// 128-bit sequence number, least significant byte first.
type xtsTweak [16]byte

// add returns the tweak n data units on (modulo 2^128).
func (t xtsTweak) add(n uint64) xtsTweak {
	for i := 0; i < len(t) && n != 0; i++ {
		s := uint64(t[i]) + n&0xff
		t[i] = byte(s)
		n = n>>8 + s>>8
	}
	return t
}

// double multiplies a tweak block by the primitive element α of
// GF(2^128), in the little-endian convention of IEEE 1619 §5.2.
func double(t *[xtsBlock]byte) {
	carry := t[15] >> 7
	for i := 15; i > 0; i-- {
		t[i] = t[i]<<1 | t[i-1]>>7
	}
	t[0] = t[0]<<1 ^ 0x87*carry
}

// crypt encrypts (or, with decrypt, decrypts) one data unit of src into
// dst (the same length; they may be the same slice) with tweak value tw.
// A data unit is at least one AES block; one whose length is not a
// multiple of 16 bytes ends with ciphertext stealing (IEEE 1619 §5.3.2,
// §5.4.2).
func (x *xtsCipher) crypt(dst, src []byte, tw xtsTweak, decrypt bool) error {
	n := len(src)
	if n < xtsBlock || len(dst) != n {
		return fmt.Errorf("AES-XTS data unit of %d bytes (into %d): a data unit is at least %d bytes", n, len(dst), xtsBlock)
	}
	var t [xtsBlock]byte
	x.tweak.Encrypt(t[:], tw[:])
	block := func(d, s []byte, t *[xtsBlock]byte, dec bool) {
		var b [xtsBlock]byte
		subtle.XORBytes(b[:], s[:xtsBlock], t[:])
		if dec {
			x.data.Decrypt(b[:], b[:])
		} else {
			x.data.Encrypt(b[:], b[:])
		}
		subtle.XORBytes(d[:xtsBlock], b[:], t[:])
	}
	full, tail := n/xtsBlock, n%xtsBlock
	if tail != 0 {
		full-- // the last whole block takes part in the stealing
	}
	for i := range full {
		block(dst[i*xtsBlock:], src[i*xtsBlock:], &t, decrypt)
		double(&t)
	}
	if tail == 0 {
		return nil
	}
	// The last whole block m-1 and the partial block m. Encrypting: block
	// m-1 under tweak m-1 gives CC; the partial output is CC's head, and
	// the partial input padded with CC's tail, under tweak m, is output
	// block m-1. Decrypting takes the tweaks the other way round.
	at := full * xtsBlock
	last := t
	double(&last)
	first, second := &t, &last
	if decrypt {
		first, second = &last, &t
	}
	var cc, pp [xtsBlock]byte
	block(cc[:], src[at:], first, decrypt)
	copy(pp[:], src[at+xtsBlock:])
	copy(pp[tail:], cc[tail:])
	copy(dst[at+xtsBlock:], cc[:tail])
	block(dst[at:], pp[:], second, decrypt)
	return nil
}
