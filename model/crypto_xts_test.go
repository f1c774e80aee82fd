package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// pt512 is the plaintext of IEEE 1619-2007's 512-byte vectors: bytes 0 to
// 255, twice.
func pt512() string {
	var b strings.Builder
	for range 2 {
		for i := range 256 {
			b.WriteString(hex.EncodeToString([]byte{byte(i)}))
		}
	}
	return b.String()
}

// TestXTSKnownAnswers runs the model's AES-XTS on IEEE Std 1619-2007's
// test vectors (Annex B): 1 to 3 (two blocks, 128-bit keys), 4 (512
// bytes), 10 (512 bytes, 256-bit keys) and 15 to 18 (17 to 20 bytes,
// ciphertext stealing). Each must encrypt to its ciphertext and decrypt
// back, also in place.
func TestXTSKnownAnswers(t *testing.T) {
	const (
		k4   = "2718281828459045235360287471352631415926535897932384626433832795"
		kcts = "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0bfbebdbcbbbab9b8b7b6b5b4b3b2b1b0"
		k10  = "27182818284590452353602874713526624977572470936999595749669676273141592653589793238462643383279502884197169399375105820974944592"
	)
	vectors := []struct {
		n          int
		key, tweak string
		pt, ct     string
	}{
		{1, strings.Repeat("0", 64), "00", strings.Repeat("0", 64), "917cf69ebd68b2ec9b9fe9a3eadda692cd43d2f59598ed858c02c2652fbf922e"},
		{2, strings.Repeat("1", 32) + strings.Repeat("2", 32), "3333333333", strings.Repeat("4", 64), "c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0"},
		{3, "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0" + strings.Repeat("2", 32), "3333333333", strings.Repeat("4", 64), "af85336b597afc1a900b2eb21ec949d292df4c047e0b21532186a5971a227a89"},
		{4, k4, "00", pt512(), "27a7479befa1d476489f308cd4cfa6e2a96e4bbe3208ff25287dd3819616e89cc78cf7f5e543445f8333d8fa7f56000005279fa5d8b5e4ad40e736ddb4d35412328063fd2aab53e5ea1e0a9f332500a5df9487d07a5c92cc512c8866c7e860ce93fdf166a24912b422976146ae20ce846bb7dc9ba94a767aaef20c0d61ad02655ea92dc4c4e41a8952c651d33174be51a10c421110e6d81588ede82103a252d8a750e8768defffed9122810aaeb99f9172af82b604dc4b8e51bcb08235a6f4341332e4ca60482a4ba1a03b3e65008fc5da76b70bf1690db4eae29c5f1badd03c5ccf2a55d705ddcd86d449511ceb7ec30bf12b1fa35b913f9f747a8afd1b130e94bff94effd01a91735ca1726acd0b197c4e5b03393697e126826fb6bbde8ecc1e08298516e2c9ed03ff3c1b7860f6de76d4cecd94c8119855ef5297ca67e9f3e7ff72b1e99785ca0a7e7720c5b36dc6d72cac9574c8cbbc2f801e23e56fd344b07f22154beba0f08ce8891e643ed995c94d9a69c9f1b5f499027a78572aeebd74d20cc39881c213ee770b1010e4bea718846977ae119f7a023ab58cca0ad752afe656bb3c17256a9f6e9bf19fdd5a38fc82bbe872c5539edb609ef4f79c203ebb140f2e583cb2ad15b4aa5b655016a8449277dbd477ef2c8d6c017db738b18deb4a427d1923ce3ff262735779a418f20a282df920147beabe421ee5319d0568"},
		{10, k10, "ff", pt512(), "1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b5d31e276f8fe4a8d66b317f9ac683f44680a86ac35adfc3345befecb4bb188fd5776926c49a3095eb108fd1098baec70aaa66999a72a82f27d848b21d4a741b0c5cd4d5fff9dac89aeba122961d03a757123e9870f8acf1000020887891429ca2a3e7a7d7df7b10355165c8b9a6d0a7de8b062c4500dc4cd120c0f7418dae3d0b5781c34803fa75421c790dfe1de1834f280d7667b327f6c8cd7557e12ac3a0f93ec05c52e0493ef31a12d3d9260f79a289d6a379bc70c50841473d1a8cc81ec583e9645e07b8d9670655ba5bbcfecc6dc3966380ad8fecb17b6ba02469a020a84e18e8f84252070c13e9f1f289be54fbc481457778f616015e1327a02b140f1505eb309326d68378f8374595c849d84f4c333ec4423885143cb47bd71c5edae9be69a2ffeceb1bec9de244fbe15992b11b77c040f12bd8f6a975a44a0f90c29a9abc3d4d893927284c58754cce294529f8614dcd2aba991925fedc4ae74ffac6e333b93eb4aff0479da9a410e4450e0dd7ae4c6e2910900575da401fc07059f645e8b7e9bfdef33943054ff84011493c27b3429eaedb4ed5376441a77ed43851ad77f16f541dfd269d50d6a5f14fb0aab1cbb4c1550be97f7ab4066193c4caa773dad38014bd2092fa755c824bb5e54c4f36ffda9fcea70b9c6e693e148c151"},
		{15, kcts, "9a78563412", "000102030405060708090a0b0c0d0e0f10", "6c1625db4671522d3d7599601de7ca09ed"},
		{16, kcts, "9a78563412", "000102030405060708090a0b0c0d0e0f1011", "d069444b7a7e0cab09e24447d24deb1fedbf"},
		{17, kcts, "9a78563412", "000102030405060708090a0b0c0d0e0f101112", "e5df1351c0544ba1350b3363cd8ef4beedbf9d"},
		{18, kcts, "9a78563412", "000102030405060708090a0b0c0d0e0f10111213", "9d84c813f719aa2c7be3f66171c7c5c2edbf9dac"},
	}
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, v := range vectors {
		key, pt, ct := unhex(v.key), unhex(v.pt), unhex(v.ct)
		var tw xtsTweak
		copy(tw[:], unhex(v.tweak))
		x, err := newXTS(key[:len(key)/2], key[len(key)/2:])
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(pt))
		if err := x.crypt(got, pt, tw, false); err != nil || !bytes.Equal(got, ct) {
			t.Errorf("vector %d: encrypts to %x (%v), want %x", v.n, got, err, ct)
		}
		if err := x.crypt(got, got, tw, true); err != nil || !bytes.Equal(got, pt) {
			t.Errorf("vector %d: decrypts in place to %x (%v), want %x", v.n, got, err, pt)
		}
	}
}

// TestXTSUnits checks what the data path relies on beyond IEEE 1619's
// vectors, against digests OpenSSL's AES-XTS gave (Python's cryptography
// 48 on OpenSSL 3.0, 2026; the script is in the comments): rdma-core's
// tests/test_mlx5_crypto.py scenario, 512 and 1024 bytes of 'c' in 512-byte
// data units from tweak 0, the second unit's tweak one more; a 520-byte
// data unit (ciphertext stealing, the T10-DIF protected block) with
// 256-bit keys, and the tweak's carry into its upper 64 bits.
func TestXTSUnits(t *testing.T) {
	// key = bytes(range(1, 33)); k2 = bytes(range(64))
	// enc(k, tweak, pt) = Cipher(AES(k), XTS(tweak)).encryptor().update(pt)
	key := make([]byte, 64)
	for i := range key {
		key[i] = byte(i)
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	x, err := newXTS(key[1:17], key[17:33])
	if err != nil {
		t.Fatal(err)
	}
	c := bytes.Repeat([]byte{'c'}, 1024)
	out := make([]byte, len(c))
	var tw xtsTweak
	for u := range 2 {
		if err := x.crypt(out[512*u:512*u+512], c[512*u:512*u+512], tw.add(uint64(u)), false); err != nil {
			t.Fatal(err)
		}
	}
	if got := sum(out[:512]); got != "24076ded3d428d4a762de2af10adc3bacaed671eca30ab4de46747b58b804de9" {
		t.Errorf("512 bytes of 'c', tweak 0: digest %s", got)
	}
	if got := sum(out); got != "d54467638d70e25aa3f7f9308c6b334005f42c71850aacb6acf29e54fb5b988d" {
		t.Errorf("1024 bytes of 'c', tweaks 0 and 1: digest %s", got)
	}

	x, err = newXTS(key[:32], key[32:])
	if err != nil {
		t.Fatal(err)
	}
	pt := make([]byte, 520)
	for i := range pt {
		pt[i] = byte(i*7 + 3)
	}
	var top xtsTweak // 2^64 - 1
	for i := range 8 {
		top[i] = 0xff
	}
	for i, want := range []string{
		"811c38ae2ec567d61f45d2e4cfd3a824000035276a88d39fb5c94785bc84ebca", // tweak 2^64 - 1
		"bde5bdcdcbef9f859f7a26abf8e54cd56187756b4ed2e370174cdb6581f1db88", // tweak 2^64
	} {
		ct := make([]byte, len(pt))
		if err := x.crypt(ct, pt, top.add(uint64(i)), false); err != nil {
			t.Fatal(err)
		}
		if got := sum(ct); got != want {
			t.Errorf("520-byte unit, tweak 2^64-1 + %d: digest %s, want %s", i, got, want)
		}
		if err := x.crypt(ct, ct, top.add(uint64(i)), true); err != nil || !bytes.Equal(ct, pt) {
			t.Errorf("520-byte unit, tweak 2^64-1 + %d: does not decrypt back (%v)", i, err)
		}
	}
	if err := x.crypt(make([]byte, 15), make([]byte, 15), tw, false); err == nil {
		t.Error("a 15-byte data unit was accepted")
	}
	if _, err := newXTS(key[:16], key[:32]); err == nil {
		t.Error("keys of 16 and 32 bytes were accepted")
	}
}
