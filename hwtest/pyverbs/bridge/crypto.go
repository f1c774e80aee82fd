package main

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"

	"github.com/mlx5go/mlx5go/model"
)

// rdma-core's test_mlx5_crypto needs what a crypto officer provisions: a
// file (MLX5_CRYPTO_TEST_INFO) with the wrapped credential the device was
// commissioned with, and DEKs wrapped under its import KEK and in
// plaintext. The bridge commissions the model's engine itself (-crypto
// wrapped: CryptoOptions with a random credential and import KEK; -crypto
// plaintext, the default: the factory's plaintext import mode) and writes
// the file to match, with model.KeyWrap (RFC 3394). It gives no
// encrypted_data_for_512_c: the test then skips its data check, which
// would only compare the model's AES-XTS with itself.

// cryptoLogin is the file's one entry, in the integers the test packs
// (struct.pack '!6Q' for the credential, '!5Q' and '!9Q' for the wrapped
// keys, '8I' and '16I', native order, for the plaintext ones).
type cryptoLogin struct {
	Credential          []uint64 `json:"credential"`
	WrappedKey          []uint64 `json:"wrapped_key"`
	Wrapped256BitsKey   []uint64 `json:"wrapped_256_bits_key"`
	PlaintextKey        []uint32 `json:"plaintext_key"`
	Plaintext256BitsKey []uint32 `json:"plaintext_256_bits_key"`
}

// commission returns the model's crypto options for mode and writes the
// login file for them at path.
func commission(mode, path string) (model.CryptoOptions, error) {
	var o model.CryptoOptions
	rnd := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	cred, kek := rnd(40), rnd(32)
	switch mode {
	case "plaintext":
	case "wrapped":
		o = model.CryptoOptions{Wrapped: true, Credential: cred, ImportKEK: kek}
	default:
		return o, fmt.Errorf("-crypto %q: plaintext or wrapped", mode)
	}
	wrap := func(b []byte) ([]uint64, error) {
		w, err := model.KeyWrap(kek, b)
		if err != nil {
			return nil, err
		}
		return be64s(w), nil
	}
	var l cryptoLogin
	var err error
	if l.Credential, err = wrap(cred); err != nil {
		return o, err
	}
	// AES-XTS keys: two AES keys each, of 128 and 256 bits.
	if l.WrappedKey, err = wrap(rnd(32)); err != nil {
		return o, err
	}
	if l.Wrapped256BitsKey, err = wrap(rnd(64)); err != nil {
		return o, err
	}
	l.PlaintextKey, l.Plaintext256BitsKey = ne32s(rnd(32)), ne32s(rnd(64))
	b, err := json.Marshal([]cryptoLogin{l})
	if err != nil {
		return o, err
	}
	return o, os.WriteFile(path, b, 0o600)
}

func be64s(b []byte) []uint64 {
	v := make([]uint64, len(b)/8)
	for i := range v {
		v[i] = binary.BigEndian.Uint64(b[8*i:])
	}
	return v
}

func ne32s(b []byte) []uint32 {
	v := make([]uint32, len(b)/4)
	for i := range v {
		v[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return v
}
