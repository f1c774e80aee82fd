package flows

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// unhex decodes s, which may be split by spaces.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The flows' AES-XTS against IEEE 1619-2007's test vectors: whole blocks
// with 128- and 256-bit keys (vectors 4 and 10, 512-byte data units) and
// ciphertext stealing (vectors 15 to 18, units of 17 to 20 bytes), both
// ways.
func TestReferenceXTS(t *testing.T) {
	pattern := make([]byte, 512) // 00 01 .. ff 00 01 .. ff
	for i := range pattern {
		pattern[i] = byte(i)
	}
	const cts = "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0 bfbebdbcbbbab9b8b7b6b5b4b3b2b1b0"
	vectors := []struct {
		name       string
		keys       string
		dataUnit   uint64
		plain, enc string
	}{
		{"vector 4", "27182818284590452353602874713526 31415926535897932384626433832795", 0, hex.EncodeToString(pattern),
			"27a7479befa1d476489f308cd4cfa6e2a96e4bbe3208ff25287dd3819616e89cc78cf7f5e543445f8333d8fa7f56000005279fa5d8b5e4ad40e736ddb4d35412328063fd2aab53e5ea1e0a9f332500a5df9487d07a5c92cc512c8866c7e860ce93fdf166a24912b422976146ae20ce846bb7dc9ba94a767aaef20c0d61ad02655ea92dc4c4e41a8952c651d33174be51a10c421110e6d81588ede82103a252d8a750e8768defffed9122810aaeb99f9172af82b604dc4b8e51bcb08235a6f4341332e4ca60482a4ba1a03b3e65008fc5da76b70bf1690db4eae29c5f1badd03c5ccf2a55d705ddcd86d449511ceb7ec30bf12b1fa35b913f9f747a8afd1b130e94bff94effd01a91735ca1726acd0b197c4e5b03393697e126826fb6bbde8ecc1e08298516e2c9ed03ff3c1b7860f6de76d4cecd94c8119855ef5297ca67e9f3e7ff72b1e99785ca0a7e7720c5b36dc6d72cac9574c8cbbc2f801e23e56fd344b07f22154beba0f08ce8891e643ed995c94d9a69c9f1b5f499027a78572aeebd74d20cc39881c213ee770b1010e4bea718846977ae119f7a023ab58cca0ad752afe656bb3c17256a9f6e9bf19fdd5a38fc82bbe872c5539edb609ef4f79c203ebb140f2e583cb2ad15b4aa5b655016a8449277dbd477ef2c8d6c017db738b18deb4a427d1923ce3ff262735779a418f20a282df920147beabe421ee5319d0568"},
		{"vector 10", "2718281828459045235360287471352662497757247093699959574966967627 3141592653589793238462643383279502884197169399375105820974944592", 0xff, hex.EncodeToString(pattern),
			"1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b5d31e276f8fe4a8d66b317f9ac683f44680a86ac35adfc3345befecb4bb188fd5776926c49a3095eb108fd1098baec70aaa66999a72a82f27d848b21d4a741b0c5cd4d5fff9dac89aeba122961d03a757123e9870f8acf1000020887891429ca2a3e7a7d7df7b10355165c8b9a6d0a7de8b062c4500dc4cd120c0f7418dae3d0b5781c34803fa75421c790dfe1de1834f280d7667b327f6c8cd7557e12ac3a0f93ec05c52e0493ef31a12d3d9260f79a289d6a379bc70c50841473d1a8cc81ec583e9645e07b8d9670655ba5bbcfecc6dc3966380ad8fecb17b6ba02469a020a84e18e8f84252070c13e9f1f289be54fbc481457778f616015e1327a02b140f1505eb309326d68378f8374595c849d84f4c333ec4423885143cb47bd71c5edae9be69a2ffeceb1bec9de244fbe15992b11b77c040f12bd8f6a975a44a0f90c29a9abc3d4d893927284c58754cce294529f8614dcd2aba991925fedc4ae74ffac6e333b93eb4aff0479da9a410e4450e0dd7ae4c6e2910900575da401fc07059f645e8b7e9bfdef33943054ff84011493c27b3429eaedb4ed5376441a77ed43851ad77f16f541dfd269d50d6a5f14fb0aab1cbb4c1550be97f7ab4066193c4caa773dad38014bd2092fa755c824bb5e54c4f36ffda9fcea70b9c6e693e148c151"},
		{"vector 15", cts, 0x123456789a, "000102030405060708090a0b0c0d0e0f10", "6c1625db4671522d3d7599601de7ca09ed"},
		{"vector 16", cts, 0x123456789a, "000102030405060708090a0b0c0d0e0f1011", "d069444b7a7e0cab09e24447d24deb1fedbf"},
		{"vector 17", cts, 0x123456789a, "000102030405060708090a0b0c0d0e0f101112", "e5df1351c0544ba1350b3363cd8ef4beedbf9d"},
		{"vector 18", cts, 0x123456789a, "000102030405060708090a0b0c0d0e0f10111213", "9d84c813f719aa2c7be3f66171c7c5c2edbf9dac"},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			keys := unhex(t, v.keys)
			x, err := newXTS(keys[:len(keys)/2], keys[len(keys)/2:])
			if err != nil {
				t.Fatal(err)
			}
			var tweak [16]byte
			for i := range 8 {
				tweak[i] = byte(v.dataUnit >> (8 * i))
			}
			plain, want := unhex(t, v.plain), unhex(t, v.enc)
			got := make([]byte, len(plain))
			x.encrypt(got, plain, len(plain), tweak)
			if !bytes.Equal(got, want) {
				t.Errorf("encrypt:\n%x\nwant\n%x", got, want)
			}
			x.decrypt(got, want, len(want), tweak)
			if !bytes.Equal(got, plain) {
				t.Errorf("decrypt:\n%x\nwant\n%x", got, plain)
			}
		})
	}
}

// Data units after the first take the next tweak values: two units of
// vector 10's data with tweak 0xfe are the 0xfe unit and vector 10's 0xff
// unit; a carry crosses the low 64 bits; a short last unit is a unit of
// its own length.
func TestReferenceXTSUnits(t *testing.T) {
	keys := unhex(t, "2718281828459045235360287471352662497757247093699959574966967627 3141592653589793238462643383279502884197169399375105820974944592")
	x, err := newXTS(keys[:32], keys[32:])
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1024+32)
	for i := range data {
		data[i] = byte(i)
	}
	whole := make([]byte, len(data))
	x.encrypt(whole, data, 512, [16]byte{0xfe})
	for i, tw := range [][16]byte{{0xfe}, {0xff}, {0x00, 0x01}} {
		end := min(512*(i+1), len(data))
		unit := make([]byte, end-512*i)
		x.encrypt(unit, data[512*i:end], 512, tw)
		if !bytes.Equal(unit, whole[512*i:end]) {
			t.Errorf("unit %d differs from an encryption of it alone with tweak %x", i, tw)
		}
	}
	if got := nextTweak([16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x07}); got != ([16]byte{8: 0x08}) {
		t.Errorf("carry: %x", got)
	}
}

// The flows' AES key wrap against RFC 3394's test vectors 4.1 (a 128-bit
// key under a 128-bit KEK) and 4.6 (256 under 256).
func TestReferenceKeyWrap(t *testing.T) {
	for _, v := range []struct{ kek, plain, wrapped string }{
		{"000102030405060708090A0B0C0D0E0F", "00112233445566778899AABBCCDDEEFF", "1FA68B0A8112B447AEF34BD8FB5A7B829D3E862371D2CFE5"},
		{"000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F", "00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F",
			"28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21"},
	} {
		got, err := keyWrap(unhex(t, v.kek), unhex(t, v.plain))
		if err != nil {
			t.Fatal(err)
		}
		if want := unhex(t, v.wrapped); !bytes.Equal(got, want) {
			t.Errorf("wrap under %s: %X, want %X", v.kek, got, want)
		}
	}
	if _, err := keyWrap(make([]byte, 16), make([]byte, 12)); err == nil {
		t.Error("12 bytes wrapped")
	}
}
