package model

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
)

// The AES key wrap of RFC 3394 (NIST SP 800-38F's KW, with its default
// initial value 0xA6A6A6A6A6A6A6A6): how a wrapped crypto engine imports
// credentials and DEKs. mlx5dv_crypto_login_create(3) and
// mlx5dv_dek_create(3) give the formats, ENC(iv_64b + plaintext); the key
// encryption key is an import KEK of 16 or 32 bytes (DPDK's
// doc/guides/cryptodevs/mlx5.rst, "Configuration").

// kwIV is the default initial value of RFC 3394 section 2.2.3.1.
var kwIV = [8]byte{0xa6, 0xa6, 0xa6, 0xa6, 0xa6, 0xa6, 0xa6, 0xa6}

// Errors of KeyWrap and KeyUnwrap.
var (
	errKWLength    = errors.New("model: key wrap: the data is not whole 8-byte blocks, or too short")
	errKWIntegrity = errors.New("model: key unwrap: the integrity check failed")
)

// kwCipher is the AES cipher of kek, for data of at least min 8-byte
// blocks.
func kwCipher(kek, data []byte, min int) (cipher.Block, error) {
	b, err := aes.NewCipher(kek)
	if err != nil {
		return nil, err
	}
	if len(data) < 8*min || len(data)%8 != 0 {
		return nil, errKWLength
	}
	return b, nil
}

// KeyWrap wraps plaintext, a multiple of 8 bytes and at least 16, with
// the AES key kek (16, 24 or 32 bytes), as RFC 3394 and NIST SP 800-38F
// (KW) define it: the result is 8 bytes longer. It is what a crypto
// officer's tools do to the credentials and DEKs that a wrapped engine
// imports, for tests that provision a software ConnectX in that mode
// (CryptoOptions) and must hand it what a device expects.
func KeyWrap(kek, plaintext []byte) ([]byte, error) {
	b, err := kwCipher(kek, plaintext, 2)
	if err != nil {
		return nil, err
	}
	n := len(plaintext) / 8
	out := make([]byte, 8+len(plaintext))
	copy(out[8:], plaintext)
	var blk [16]byte
	copy(blk[:8], kwIV[:])
	for j := range 6 {
		for i := 1; i <= n; i++ {
			r := out[8*i : 8*i+8]
			copy(blk[8:], r)
			b.Encrypt(blk[:], blk[:])
			t := uint64(n*j + i)
			binary.BigEndian.PutUint64(blk[:8], binary.BigEndian.Uint64(blk[:8])^t)
			copy(r, blk[8:])
		}
	}
	copy(out[:8], blk[:8])
	clear(blk[:])
	return out, nil
}

// KeyUnwrap undoes KeyWrap: it returns the plaintext of wrapped (8 bytes
// shorter), or an error if kek is no AES key, wrapped is not 3 or more
// 8-byte blocks, or the integrity check of RFC 3394 section 2.2.3 fails
// (another key wrapped it, or it was altered). Nothing of a failed unwrap
// is returned.
func KeyUnwrap(kek, wrapped []byte) ([]byte, error) {
	b, err := kwCipher(kek, wrapped, 3)
	if err != nil {
		return nil, err
	}
	n := len(wrapped)/8 - 1
	out := make([]byte, len(wrapped)-8)
	copy(out, wrapped[8:])
	var blk [16]byte
	copy(blk[:8], wrapped[:8])
	for j := 5; j >= 0; j-- {
		for i := n; i >= 1; i-- {
			r := out[8*(i-1) : 8*i]
			t := uint64(n*j + i)
			binary.BigEndian.PutUint64(blk[:8], binary.BigEndian.Uint64(blk[:8])^t)
			copy(blk[8:], r)
			b.Decrypt(blk[:], blk[:])
			copy(r, blk[8:])
		}
	}
	ok := subtle.ConstantTimeCompare(blk[:8], kwIV[:]) == 1
	clear(blk[:])
	if !ok {
		clear(out)
		return nil, errKWIntegrity
	}
	return out, nil
}
