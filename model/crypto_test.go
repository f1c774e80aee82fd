package model

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
)

// The crypto objects on raw PRM mailboxes: caps, CRYPTO_LOGIN and
// ENCRYPTION_KEY general objects, the crypto officer's provisioning.

// TestKeyWrapRFC3394 checks KeyWrap and KeyUnwrap against the test vectors
// of RFC 3394 section 4, and the refusals of KeyUnwrap.
func TestKeyWrapRFC3394(t *testing.T) {
	kek := "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	data := "00112233445566778899aabbccddeeff000102030405060708090a0b0c0d0e0f"
	for _, v := range []struct {
		name            string
		kekLen, dataLen int
		ciphertext      string
	}{
		{"4.1 128-bit data, 128-bit KEK", 16, 16, "1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5"},
		{"4.2 128-bit data, 192-bit KEK", 24, 16, "96778b25ae6ca435f92b5b97c050aed2468ab8a17ad84e5d"},
		{"4.3 128-bit data, 256-bit KEK", 32, 16, "64e8c3f9ce0f5ba263e9777905818a2a93c8191e7d6e8ae7"},
		{"4.4 192-bit data, 192-bit KEK", 24, 24, "031d33264e15d33268f24ec260743edce1c6c7ddee725a936ba814915c6762d2"},
		{"4.5 192-bit data, 256-bit KEK", 32, 24, "a8f9bc1612c68b3ff6e6f4fbe30e71e4769c8b80a32cb8958cd5d17d6b254da1"},
		{"4.6 256-bit data, 256-bit KEK", 32, 32, "28c9f404c4b810f4cbccb35cfb87f8263f5786e2d80ed326cbc7f0e71a99f43bfb988b9b7a02dd21"},
	} {
		t.Run(v.name, func(t *testing.T) {
			k, p, c := unhex(t, kek)[:v.kekLen], unhex(t, data)[:v.dataLen], unhex(t, v.ciphertext)
			got, err := KeyWrap(k, p)
			if err != nil || !bytes.Equal(got, c) {
				t.Fatalf("KeyWrap = %x, %v, want %x", got, err, c)
			}
			got, err = KeyUnwrap(k, c)
			if err != nil || !bytes.Equal(got, p) {
				t.Fatalf("KeyUnwrap = %x, %v, want %x", got, err, p)
			}
			for i := range c {
				bad := bytes.Clone(c)
				bad[i] ^= 0x80
				if got, err := KeyUnwrap(k, bad); !errors.Is(err, errKWIntegrity) || got != nil {
					t.Fatalf("KeyUnwrap of the ciphertext with byte %d altered = %x, %v, want the integrity error", i, got, err)
				}
			}
		})
	}
	k := unhex(t, kek)[:16]
	for _, n := range []int{0, 8, 15, 17} {
		if _, err := KeyWrap(k, make([]byte, n)); !errors.Is(err, errKWLength) {
			t.Errorf("KeyWrap of %d bytes: %v, want the length error", n, err)
		}
	}
	for _, n := range []int{0, 16, 23, 25} {
		if _, err := KeyUnwrap(k, make([]byte, n)); !errors.Is(err, errKWLength) {
			t.Errorf("KeyUnwrap of %d bytes: %v, want the length error", n, err)
		}
	}
	if _, err := KeyWrap(make([]byte, 15), make([]byte, 16)); err == nil {
		t.Error("KeyWrap with a 15-byte KEK succeeded")
	}
}

// Crypto officer material of the wrapped tests.
var (
	testCred = []byte("a 40-byte credential for crypto logins..")
	testKEK  = []byte("import KEK, 128 bits ..")[:16]
)

func wrappedOpts() Options {
	return Options{Crypto: CryptoOptions{Wrapped: true, Credential: testCred, ImportKEK: testKEK}}
}

func newDevOpt(t testing.TB, profile string, opt Options) *Device {
	t.Helper()
	d, err := NewWithOptions(profile, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// genIn is a general object command's input of n bytes.
// genObj and genObjLen are where a crypto object lies in its create input
// or query output, and the size of either mailbox: the same for both
// types, as TestGenObjLayouts checks, so that a test can build either.
var (
	genObj    = prm.CreateEncryptionKeyIn.EncryptionKeyObject
	genObjLen = int(prm.CreateEncryptionKeyIn.Layout().Size)
)

func TestGenObjLayouts(t *testing.T) {
	for typ, g := range genObjTypes {
		for _, f := range []prm.Field{g.in, g.out} {
			if f.Off != genObj.Off || f.Width != genObj.Width || fieldEnd(f) != genObjLen {
				t.Errorf("type %#x: object %s at bit %#x, %d bits, want %#x, %d", typ, f.Name, f.Off, f.Width, genObj.Off, genObj.Width)
			}
		}
	}
	for _, l := range []*prm.Layout{prm.CreateCryptoLoginObjIn.Layout(), prm.QueryCryptoLoginObjOut.Layout(), prm.QueryEncryptionKeyObjOut.Layout()} {
		if int(l.Size) != genObjLen {
			t.Errorf("%s: %d bytes, want %d", l.Name, l.Size, genObjLen)
		}
	}
}

func genIn(op, typ uint16, id uint32, n int) []byte {
	in := make([]byte, n)
	prm.GeneralObjInCmdHdr.Opcode.Set(in, uint64(op))
	prm.GeneralObjInCmdHdr.ObjType.Set(in, uint64(typ))
	prm.GeneralObjInCmdHdr.ObjId.Set(in, uint64(id))
	return in
}

func loginIn(credID, kekID uint32, wrappedCred []byte) []byte {
	in := genIn(prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT, prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN, 0, genObjLen)
	obj := genObj.Bytes(in)
	prm.CryptoLoginObj.CredentialPointer.Set(obj, uint64(credID))
	prm.CryptoLoginObj.SessionImportKekPtr.Set(obj, uint64(kekID))
	copy(prm.CryptoLoginObj.Credential.Bytes(obj), wrappedCred)
	return in
}

// dekSpec is a DEK to create.
type dekSpec struct {
	pdn        uint32
	size       uint64 // prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_128 or _256
	keytag     bool
	key        []byte // the key field's bytes: plaintext or wrapped
	opaque     string
	purpose    uint64
	purposeSet bool
}

func (s dekSpec) in() []byte {
	in := genIn(prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT, prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY, 0, genObjLen)
	obj := genObj.Bytes(in)
	prm.EncryptionKeyObj.KeySize.Set(obj, s.size)
	if s.keytag {
		prm.EncryptionKeyObj.HasKeytag.Set(obj, 1)
	}
	purpose := uint64(prm.MLX5_ENCRYPTION_KEY_OBJ_KEY_PURPOSE_AES_XTS)
	if s.purposeSet {
		purpose = s.purpose
	}
	prm.EncryptionKeyObj.KeyType.Set(obj, purpose)
	prm.EncryptionKeyObj.Pd.Set(obj, uint64(s.pdn))
	copy(prm.EncryptionKeyObj.Opaque.Bytes(obj), s.opaque)
	copy(prm.EncryptionKeyObj.Key.Bytes(obj), s.key)
	return in
}

// material is key1 + key2 (+ keytag) of n-byte keys: distinct bytes.
func material(n int, keytag bool) []byte {
	m := make([]byte, 2*n)
	for i := range m {
		m[i] = byte(0x10 + i)
	}
	if keytag {
		m = append(m, []byte("KEYTAG!!")...)
	}
	return m
}

func wrap(t testing.TB, kek, p []byte) []byte {
	t.Helper()
	c, err := KeyWrap(kek, p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantFW checks that err is the firmware's failure with status st and
// syndrome syn.
func wantFW(t testing.TB, what string, err error, st prm.Status, syn uint32) {
	t.Helper()
	var fe *FirmwareError
	if !errors.As(err, &fe) || fe.Cmd.Status != st || fe.Cmd.Syndrome != syn {
		t.Errorf("%s: %v, want %v with syndrome %#x", what, err, st, syn)
	}
}

func createObj(d *Device, in []byte) (seam.Handle, uint32, error) {
	out := make([]byte, hdrLen)
	h, err := d.ObjCreate(in, out)
	return h, uint32(prm.GeneralObjOutCmdHdr.ObjId.Get(out)), err
}

func queryObj(d *Device, h seam.Handle, typ uint16, id uint32) ([]byte, error) {
	out := make([]byte, genObjLen)
	err := d.ObjQuery(h, genIn(prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT, typ, id, hdrLen), out)
	return genObj.Bytes(out), err
}

func TestCryptoCaps(t *testing.T) {
	for _, c := range []struct {
		profile                    string
		crypto, single, multi, log uint64
	}{
		{"cx5", 0, 0, 0, 0},
		{"cx6dx", 1, 1, 0, 12},
		{"cx7", 1, 1, 1, 14},
	} {
		t.Run(c.profile, func(t *testing.T) {
			d := newDev(t, c.profile)
			gen, err := queryCap(t, d, prm.MLX5_CAP_GENERAL, true)
			if err != nil {
				t.Fatal(err)
			}
			objs := uint64(0)
			if c.crypto == 1 {
				objs = 1<<prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY | 1<<prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN
			}
			wantFields(t, c.profile, gen, []fieldWant{
				{prm.CmdHcaCap.Crypto, c.crypto}, {prm.CmdHcaCap.AesXtsSingleBlockLeTweak, c.single},
				{prm.CmdHcaCap.AesXtsMultiBlockBeTweak, c.multi}, {prm.CmdHcaCap.GeneralObjTypes, objs},
			})
			for _, cur := range []bool{false, true} {
				pg, err := queryCap(t, d, prm.MLX5_CAP_CRYPTO, cur)
				if c.crypto == 0 {
					wantFW(t, "crypto caps", err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR, SyndromeBadOpMod)
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				wantFields(t, fmt.Sprintf("cur=%v", cur), pg, []fieldWant{
					{prm.CryptoCap.WrappedCryptoOperational, 0}, {prm.CryptoCap.WrappedCryptoGoingToCommissioning, 0},
					{prm.CryptoCap.WrappedImportMethod, 0}, {prm.CryptoCap.LogMaxNumDeks, c.log},
					{prm.CryptoCap.LogMaxNumImportKeks, 3}, {prm.CryptoCap.LogMaxNumCreds, 3}, {prm.CryptoCap.FailedSelftests, 0},
				})
			}
		})
	}

	// A profile without an engine ignores Options.Crypto.
	d5 := newDevOpt(t, "cx5", wrappedOpts())
	if _, err := queryCap(t, d5, prm.MLX5_CAP_CRYPTO, true); err == nil || d5.h.prof != profiles["cx5"] {
		t.Errorf("cx5 with Options.Crypto answers a crypto caps page (%v)", err)
	}

	// What Options.Crypto makes of the page, on the HCA it made only.
	for _, c := range []struct {
		name                             string
		o                                CryptoOptions
		operational, going, method, fail uint64
	}{
		{"commissioning", CryptoOptions{Wrapped: true}, 0, 0, prm.MLX5_CRYPTO_CAPS_WRAPPED_IMPORT_METHOD_AES, 0},
		{"operational", wrappedOpts().Crypto, 1, 0, prm.MLX5_CRYPTO_CAPS_WRAPPED_IMPORT_METHOD_AES, 0},
		{"going to commissioning", CryptoOptions{Wrapped: true, Credential: testCred, ImportKEK: make([]byte, 32), GoingToCommissioning: true}, 1, 1, prm.MLX5_CRYPTO_CAPS_WRAPPED_IMPORT_METHOD_AES, 0},
		{"failed self-tests", CryptoOptions{FailedSelftests: 0x8001}, 0, 0, 0, 0x8001},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDevOpt(t, "cx7", Options{Crypto: c.o})
			pg, err := queryCap(t, d, prm.MLX5_CAP_CRYPTO, true)
			if err != nil {
				t.Fatal(err)
			}
			wantFields(t, c.name, pg, []fieldWant{
				{prm.CryptoCap.WrappedCryptoOperational, c.operational}, {prm.CryptoCap.WrappedCryptoGoingToCommissioning, c.going},
				{prm.CryptoCap.WrappedImportMethod, c.method}, {prm.CryptoCap.FailedSelftests, c.fail}, {prm.CryptoCap.LogMaxNumDeks, 14},
			})
			other := newDev(t, "cx7")
			if pg, _ := queryCap(t, other, prm.MLX5_CAP_CRYPTO, true); prm.CryptoCap.WrappedImportMethod.Get(pg) != 0 {
				t.Error("another HCA of the profile reports the wrapped import method")
			}
			if o2, err := d.Open(); err != nil || o2.h.cryptoOpt.Wrapped != c.o.Wrapped {
				t.Errorf("Open: %v, options %+v", err, o2.h.cryptoOpt)
			}
		})
	}

	for _, c := range []struct {
		profile string
		o       CryptoOptions
	}{
		{"cx7", CryptoOptions{Credential: testCred, ImportKEK: testKEK}},
		{"cx7", CryptoOptions{GoingToCommissioning: true}},
		{"cx7", CryptoOptions{Wrapped: true, Credential: testCred}},
		{"cx7", CryptoOptions{Wrapped: true, ImportKEK: testKEK}},
		{"cx7", CryptoOptions{Wrapped: true, Credential: testCred[:39], ImportKEK: testKEK}},
		{"cx7", CryptoOptions{Wrapped: true, Credential: testCred, ImportKEK: make([]byte, 24)}},
	} {
		if _, err := NewWithOptions(c.profile, Options{Crypto: c.o}); err == nil {
			t.Errorf("NewWithOptions(%s, %+v) succeeded", c.profile, c.o)
		}
	}
}

// TestPlaintextDEK creates, queries and destroys DEKs of every size, with
// and without a keytag, on an engine in plaintext import mode.
func TestPlaintextDEK(t *testing.T) {
	d := newDev(t, "cx6dx")
	_, pdn := createPD(t, d)
	for _, size := range []uint64{prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_128, prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_256} {
		for _, keytag := range []bool{false, true} {
			t.Run(fmt.Sprintf("size%d/keytag=%v", size, keytag), func(t *testing.T) {
				n := 16 << size
				m := material(n, keytag)
				h, id, err := createObj(d, dekSpec{pdn: pdn, size: size, keytag: keytag, key: m, opaque: "opaque!"}.in())
				if err != nil {
					t.Fatal(err)
				}
				k := d.h.deks[id]
				if k == nil || k.keyBits != 8*n || !bytes.Equal(k.key1, m[:n]) || !bytes.Equal(k.key2, m[n:2*n]) ||
					k.hasKeytag != keytag || k.pdn != pdn || k.state != prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_READY || string(k.opaque[:7]) != "opaque!" {
					t.Fatalf("DEK %#x kept as %+v", id, k)
				}
				if keytag && string(k.keytag[:]) != "KEYTAG!!" {
					t.Errorf("keytag %q", k.keytag)
				}
				obj, err := queryObj(d, h, prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY, id)
				if err != nil {
					t.Fatal(err)
				}
				wantFields(t, "query", obj, []fieldWant{
					{prm.EncryptionKeyObj.State, prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_READY}, {prm.EncryptionKeyObj.KeySize, size}, {prm.EncryptionKeyObj.HasKeytag, map[bool]uint64{false: 0, true: 1}[keytag]},
					{prm.EncryptionKeyObj.KeyType, prm.MLX5_ENCRYPTION_KEY_OBJ_KEY_PURPOSE_AES_XTS}, {prm.EncryptionKeyObj.Pd, uint64(pdn)},
				})
				if got := prm.EncryptionKeyObj.Opaque.Bytes(obj); string(got) != "opaque!\x00" {
					t.Errorf("query: opaque %q", got)
				}
				if key := prm.EncryptionKeyObj.Key.Bytes(obj); !bytes.Equal(key, make([]byte, len(key))) {
					t.Errorf("query answered key material: %x", key)
				}
				if err := d.ObjDestroy(h); err != nil {
					t.Fatal(err)
				}
				if _, ok := d.h.deks[id]; ok || !bytes.Equal(k.key1, make([]byte, n)) || !bytes.Equal(k.key2, make([]byte, n)) {
					t.Errorf("after destroy: DEK kept %v, key1 %x, key2 %x", ok, k.key1, k.key2)
				}
				if err := d.ObjDestroy(h); err == nil {
					t.Error("the second destroy succeeded")
				}
			})
		}
	}
	// The DEK holds its PD.
	hd, _, err := createObj(d, dekSpec{pdn: pdn, key: material(16, false)}.in())
	if err != nil {
		t.Fatal(err)
	}
	dealloc := mbox(prm.DeallocPdIn.Layout(), prm.MLX5_CMD_OP_DEALLOC_PD)
	prm.DeallocPdIn.Pd.Set(dealloc, uint64(pdn))
	if st := d.Exec(dealloc, make([]byte, 16)); st != prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR {
		t.Errorf("DEALLOC_PD of the DEK's PD: %v, want BAD_RES_STATE_ERR", st)
	}
	destroy(t, d, hd)
}

// TestDEKRefusals are the CREATE refusals of every field, and the owner
// checks.
func TestDEKRefusals(t *testing.T) {
	d := newDev(t, "cx7")
	_, pdn := createPD(t, d)
	other, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, otherPD := createPD(t, other)
	good := dekSpec{pdn: pdn, key: material(16, false)}
	trailing := good
	trailing.key = append(material(16, false), 1)
	tagless := good
	tagless.key = material(16, true) // the keytag is there, has_keytag is not
	for _, c := range []struct {
		name string
		in   []byte
		st   prm.Status
		syn  uint32
	}{
		{"key purpose TLS", dekSpec{pdn: pdn, key: material(16, false), purpose: 1, purposeSet: true}.in(), prm.MLX5_CMD_STAT_BAD_PARAM_ERR, SyndromeBadValue},
		{"key size 2", dekSpec{pdn: pdn, size: 2, key: material(16, false)}.in(), prm.MLX5_CMD_STAT_BAD_PARAM_ERR, SyndromeBadValue},
		{"no such PD", dekSpec{pdn: pdn + 100, key: material(16, false)}.in(), prm.MLX5_CMD_STAT_BAD_RES_ERR, SyndromeNoObject},
		{"another uid's PD", dekSpec{pdn: otherPD, key: material(16, false)}.in(), prm.MLX5_CMD_STAT_BAD_RES_ERR, SyndromeWrongUID},
		{"short input", good.in()[:genObjLen-1], prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR, SyndromeInputLength},
		{"unknown object type", genIn(prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT, 0x13, 0, genObjLen), prm.MLX5_CMD_STAT_BAD_OP_ERR, SyndromeBadOpcode},
	} {
		_, _, err := createObj(d, c.in)
		wantFW(t, c.name, err, c.st, c.syn)
	}
	if d.h.objects() != 2 {
		t.Fatalf("%d objects after the refusals, want the 2 PDs", d.h.objects())
	}
	// What follows the key material in the field is not read (pyverbs
	// leaves garbage there, and rdma-core's test_mlx5_crypto passes on a
	// ConnectX): a byte past the key, or a keytag without has_keytag,
	// makes a DEK of the key alone.
	for name, spec := range map[string]dekSpec{"bytes past the key": trailing, "a keytag without has_keytag": tagless} {
		h, id, err := createObj(d, spec.in())
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		d.h.mu.Lock()
		dk := d.h.deks[id]
		d.h.mu.Unlock()
		if dk == nil || dk.hasKeytag || !bytes.Equal(dk.key1, material(16, false)[:16]) {
			t.Errorf("%s: the DEK is not the key alone: %+v", name, dk)
		}
		if err := d.ObjDestroy(h); err != nil {
			t.Fatal(err)
		}
	}

	h, id, err := createObj(d, good.in())
	if err != nil {
		t.Fatal(err)
	}
	// Another uid names the DEK: the firmware's owner check (Exec skips
	// the kernel's handle check).
	for _, op := range []uint16{prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT, prm.MLX5_CMD_OP_DESTROY_GENERAL_OBJECT} {
		out := make([]byte, genObjLen)
		if st := other.Exec(genIn(op, prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY, id, hdrLen), out); st != prm.MLX5_CMD_STAT_BAD_RES_ERR || prm.MboxOut.Syndrome.Get(out) != uint64(SyndromeWrongUID) {
			t.Errorf("%s by another uid: %v", prm.OpcodeName(op), st)
		}
		if st := d.Exec(genIn(op, prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY, id+1, hdrLen), out); st != prm.MLX5_CMD_STAT_BAD_RES_ERR || prm.MboxOut.Syndrome.Get(out) != uint64(SyndromeNoObject) {
			t.Errorf("%s of no DEK: %v", prm.OpcodeName(op), st)
		}
	}
	if err := d.ObjQuery(h, genIn(prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT, prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY, id, hdrLen), make([]byte, genObjLen-1)); err == nil {
		t.Error("a query with a short output succeeded")
	}
	// The kernel's handle check: the query names another object.
	if err := d.ObjQuery(h, genIn(prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT, prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN, id, hdrLen), make([]byte, genObjLen)); err == nil {
		t.Error("a CRYPTO_LOGIN query on a DEK's handle succeeded")
	}
	if err := other.InjectDEKError(id); err == nil {
		t.Error("InjectDEKError from another context succeeded")
	}
	destroy(t, d, h)

	// cx5 has no DEK object.
	d5 := newDev(t, "cx5")
	_, pdn5 := createPD(t, d5)
	_, _, err = createObj(d5, dekSpec{pdn: pdn5, key: material(16, false)}.in())
	wantFW(t, "DEK on cx5", err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR, SyndromeNoCap)
	_, _, err = createObj(d5, loginIn(0, 0, nil))
	wantFW(t, "login on cx5", err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR, SyndromeNoCap)
}

// TestDEKLimit fills log_max_num_deks.
func TestDEKLimit(t *testing.T) {
	d := newDev(t, "cx6dx")
	_, pdn := createPD(t, d)
	in := dekSpec{pdn: pdn, key: material(16, false)}.in()
	max := 1 << d.h.prof.cryptoCap(prm.CryptoCap.LogMaxNumDeks)
	for i := range max {
		if st := d.Exec(in, make([]byte, hdrLen)); st != prm.MLX5_CMD_STAT_OK {
			t.Fatalf("DEK %d: %v", i, st)
		}
	}
	out := make([]byte, hdrLen)
	if st := d.Exec(in, out); st != prm.MLX5_CMD_STAT_LIM_ERR || prm.MboxOut.Syndrome.Get(out) != uint64(SyndromeLimit) {
		t.Fatalf("DEK %d: %v, want LIM_ERR", max, st)
	}
	for id := range d.h.deks {
		if id >= 1<<24 {
			t.Fatalf("DEK number %#x does not fit the crypto BSF's 24 bits", id)
		}
	}
	// Close drops what Exec made.
	d.Close()
	if n := d.Objects(); n != 0 {
		t.Fatalf("%d objects after Close", n)
	}
}

// TestInjectDEKError: QUERY reports the ERROR state.
func TestInjectDEKError(t *testing.T) {
	d := newDev(t, "cx7")
	_, pdn := createPD(t, d)
	h, id, err := createObj(d, dekSpec{pdn: pdn, key: material(32, true), size: prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_256, keytag: true}.in())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.InjectDEKError(id); err != nil {
		t.Fatal(err)
	}
	if err := d.InjectDEKError(id + 1); err == nil {
		t.Error("InjectDEKError of no DEK succeeded")
	}
	obj, err := queryObj(d, h, prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY, id)
	if err != nil || prm.EncryptionKeyObj.State.Get(obj) != prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_ERROR {
		t.Fatalf("query: %v, state %d, want ERROR", err, prm.EncryptionKeyObj.State.Get(obj))
	}
	destroy(t, d, h)
}

// TestLoginPlaintextMode: an engine in plaintext import mode has no
// logins, and its officer API refuses.
func TestLoginPlaintextMode(t *testing.T) {
	d := newDev(t, "cx7")
	_, _, err := createObj(d, loginIn(0, 0, wrap(t, testKEK, testCred)))
	wantFW(t, "login in plaintext mode", err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR, SyndromeCryptoMode)
	if err := d.SetCryptoCredential(1, testCred); err == nil {
		t.Error("SetCryptoCredential on a plaintext engine succeeded")
	}
	if err := d.SetImportKEK(1, testKEK); err == nil {
		t.Error("SetImportKEK on a plaintext engine succeeded")
	}
	d5 := newDev(t, "cx5")
	if err := d5.SetCryptoCredential(1, testCred); err == nil {
		t.Error("SetCryptoCredential on cx5 succeeded")
	}
}

// TestEngineNotReady: commissioning mode and failed self-tests refuse
// logins and DEKs.
func TestEngineNotReady(t *testing.T) {
	for _, o := range []CryptoOptions{{Wrapped: true}, {FailedSelftests: 4}, {Wrapped: true, Credential: testCred, ImportKEK: testKEK, FailedSelftests: 1}} {
		d := newDevOpt(t, "cx6dx", Options{Crypto: o})
		_, pdn := createPD(t, d)
		_, _, err := createObj(d, dekSpec{pdn: pdn, key: material(16, false)}.in())
		wantFW(t, fmt.Sprintf("DEK with %+v", o), err, prm.MLX5_CMD_STAT_BAD_SYS_STATE_ERR, SyndromeCryptoState)
		if o.Wrapped {
			_, _, err := createObj(d, loginIn(0, 0, wrap(t, testKEK, testCred)))
			wantFW(t, fmt.Sprintf("login with %+v", o), err, prm.MLX5_CMD_STAT_BAD_SYS_STATE_ERR, SyndromeCryptoState)
		}
	}
}

func loginState(t testing.TB, d *Device, h seam.Handle, id uint32) uint64 {
	t.Helper()
	obj, err := queryObj(d, h, prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN, id)
	if err != nil {
		t.Fatal(err)
	}
	return prm.CryptoLoginObj.State.Get(obj)
}

// TestCryptoLogin: the credential unwrapped with the import KEK must be
// the stored one; one login per uid; deleting the credential or the KEK
// makes the login INVALID.
func TestCryptoLogin(t *testing.T) {
	d := newDevOpt(t, "cx7", wrappedOpts())
	kek2 := bytes.Repeat([]byte{0x5c}, 32)
	cred2 := bytes.Repeat([]byte{0x3a}, credentialLen)
	if err := d.SetImportKEK(7, kek2); err != nil {
		t.Fatal(err)
	}
	if err := d.SetCryptoCredential(9, cred2); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		cred, kek   uint32
		wrappedCred []byte
	}{
		{"no such credential", 1, 0, wrap(t, testKEK, testCred)},
		{"no such import KEK", 0, 1, wrap(t, testKEK, testCred)},
		{"another credential", 9, 0, wrap(t, testKEK, testCred)},
		{"wrapped with another KEK", 0, 0, wrap(t, kek2, testCred)},
		{"in plaintext", 0, 0, append(bytes.Clone(testCred), 0, 0, 0, 0, 0, 0, 0, 0)},
		{"altered", 0, 0, func() []byte { w := wrap(t, testKEK, testCred); w[47] ^= 1; return w }()},
	} {
		_, _, err := createObj(d, loginIn(c.cred, c.kek, c.wrappedCred))
		wantFW(t, c.name, err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR, SyndromeBadCredential)
	}
	_, _, err := createObj(d, loginIn(0, 0, wrap(t, testKEK, testCred))[:genObjLen-1])
	wantFW(t, "short input", err, prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR, SyndromeInputLength)
	if d.h.objects() != 0 {
		t.Fatalf("%d objects after the refusals", d.h.objects())
	}

	h, id, err := createObj(d, loginIn(0, 0, wrap(t, testKEK, testCred)))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := queryObj(d, h, prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN, id)
	if err != nil || prm.CryptoLoginObj.State.Get(obj) != prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_VALID || prm.CryptoLoginObj.CredentialPointer.Get(obj) != 0 ||
		prm.CryptoLoginObj.SessionImportKekPtr.Get(obj) != 0 || !bytes.Equal(prm.CryptoLoginObj.Credential.Bytes(obj), make([]byte, 48)) {
		t.Fatalf("query: %v, %x", err, obj)
	}
	// One per uid: the same context again, with the other credential too.
	_, _, err = createObj(d, loginIn(9, 7, wrap(t, kek2, cred2)))
	wantFW(t, "a second login of the uid", err, prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, SyndromeLoginExists)
	// Another context has its own.
	other, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	oh, oid, err := createObj(other, loginIn(9, 7, wrap(t, kek2, cred2)))
	if err != nil {
		t.Fatal(err)
	}
	if out := make([]byte, genObjLen); other.Exec(genIn(prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT, prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN, id, hdrLen), out) != prm.MLX5_CMD_STAT_BAD_RES_ERR {
		t.Error("another uid queried the login")
	}

	// The crypto officer deletes what the logins use.
	if err := d.DeleteCryptoCredential(0); err != nil {
		t.Fatal(err)
	}
	if s := loginState(t, d, h, id); s != prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_INVALID {
		t.Errorf("login state %d after its credential was deleted, want INVALID", s)
	}
	if s := loginState(t, other, oh, oid); s != prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_VALID {
		t.Errorf("the other login's state %d, want VALID", s)
	}
	if err := d.DeleteImportKEK(7); err != nil {
		t.Fatal(err)
	}
	if s := loginState(t, other, oh, oid); s != prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_INVALID {
		t.Errorf("login state %d after its import KEK was deleted, want INVALID", s)
	}
	// Stored again, the credential does not revive the login.
	if err := d.SetCryptoCredential(0, testCred); err != nil {
		t.Fatal(err)
	}
	if s := loginState(t, d, h, id); s != prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_INVALID {
		t.Errorf("login state %d after its credential came back, want INVALID", s)
	}
	// Logout, and log in again.
	destroy(t, d, h)
	h, id, err = createObj(d, loginIn(0, 0, wrap(t, testKEK, testCred)))
	if err != nil {
		t.Fatal(err)
	}
	// Replacing the KEK invalidates too.
	if err := d.SetImportKEK(0, kek2[:16]); err != nil {
		t.Fatal(err)
	}
	if s := loginState(t, d, h, id); s != prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_INVALID {
		t.Errorf("login state %d after its import KEK was replaced, want INVALID", s)
	}
	destroy(t, d, h)
	destroy(t, other, oh)
	if d.h.objects() != 0 {
		t.Fatalf("%d objects left", d.h.objects())
	}
}

// TestWrappedDEK: a wrapped engine imports DEKs wrapped with the import
// KEK of the uid's valid login, and answers their query only in one.
func TestWrappedDEK(t *testing.T) {
	d := newDevOpt(t, "cx6dx", wrappedOpts())
	_, pdn := createPD(t, d)
	wrapped := dekSpec{pdn: pdn, key: wrap(t, testKEK, material(16, false))}
	_, _, err := createObj(d, wrapped.in())
	wantFW(t, "a DEK without a login", err, prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, SyndromeNoLogin)

	lh, lid, err := createObj(d, loginIn(0, 0, wrap(t, testKEK, testCred)))
	if err != nil {
		t.Fatal(err)
	}
	var handles []seam.Handle
	var ids []uint32
	for _, size := range []uint64{prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_128, prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_256} {
		for _, keytag := range []bool{false, true} {
			n := 16 << size
			m := material(n, keytag)
			h, id, err := createObj(d, dekSpec{pdn: pdn, size: size, keytag: keytag, key: wrap(t, testKEK, m), opaque: "w"}.in())
			if err != nil {
				t.Fatalf("size %d keytag %v: %v", size, keytag, err)
			}
			k := d.h.deks[id]
			if !bytes.Equal(k.key1, m[:n]) || !bytes.Equal(k.key2, m[n:2*n]) || keytag && string(k.keytag[:]) != "KEYTAG!!" {
				t.Errorf("size %d keytag %v: unwrapped as %x %x %q", size, keytag, k.key1, k.key2, k.keytag)
			}
			if obj, err := queryObj(d, h, prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY, id); err != nil || prm.EncryptionKeyObj.Opaque.Bytes(obj)[0] != 'w' {
				t.Errorf("query in the login: %v", err)
			}
			handles, ids = append(handles, h), append(ids, id)
		}
	}
	plaintext := dekSpec{pdn: pdn, key: material(16, false)}
	_, _, err = createObj(d, plaintext.in())
	wantFW(t, "a plaintext DEK on a wrapped engine", err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR, SyndromeUnwrap)
	other := dekSpec{pdn: pdn, key: wrap(t, bytes.Repeat([]byte{1}, 16), material(16, false))}
	_, _, err = createObj(d, other.in())
	wantFW(t, "a DEK wrapped with another KEK", err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR, SyndromeUnwrap)
	tagless := dekSpec{pdn: pdn, key: wrap(t, testKEK, material(16, true))} // has_keytag 0: the wrap is 8 bytes too long
	_, _, err = createObj(d, tagless.in())
	wantFW(t, "a wrapped keytag without has_keytag", err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR, SyndromeUnwrap)

	// The login becomes INVALID: no more queries or creates; the DEKs
	// stay (the data path uses them without a login).
	if err := d.DeleteImportKEK(0); err != nil {
		t.Fatal(err)
	}
	_, err = queryObj(d, handles[0], prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY, ids[0])
	wantFW(t, "a query in an INVALID login", err, prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, SyndromeNoLogin)
	_, _, err = createObj(d, wrapped.in())
	wantFW(t, "a DEK in an INVALID login", err, prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, SyndromeNoLogin)
	if d.h.deks[ids[0]].state != prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_READY {
		t.Error("the DEK is not READY")
	}
	// Logged out: the DEKs are destroyed without a login.
	destroy(t, d, lh)
	_ = lid
	for _, h := range handles {
		destroy(t, d, h)
	}
	if len(d.h.deks) != 0 {
		t.Fatalf("%d DEKs left", len(d.h.deks))
	}
}

// TestCryptoOfficer: the provisioning API's refusals and limits.
func TestCryptoOfficer(t *testing.T) {
	d := newDevOpt(t, "cx7", Options{Crypto: CryptoOptions{Wrapped: true}})
	for _, err := range []error{
		d.SetCryptoCredential(1<<24, testCred),
		d.SetCryptoCredential(1, testCred[:39]),
		d.SetImportKEK(1, make([]byte, 24)),
		d.DeleteCryptoCredential(0),
		d.DeleteImportKEK(0),
	} {
		if err == nil {
			t.Error("a refusal succeeded")
		}
	}
	max := 1 << d.h.prof.cryptoCap(prm.CryptoCap.LogMaxNumCreds)
	for i := range max {
		if err := d.SetCryptoCredential(uint32(i), testCred); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.SetCryptoCredential(uint32(max), testCred); err == nil {
		t.Errorf("credential %d past log_max_num_creds stored", max)
	}
	if err := d.SetCryptoCredential(0, testCred); err != nil {
		t.Errorf("replacing a credential at the limit: %v", err)
	}
	// The store keeps its own copy.
	k := bytes.Clone(testKEK)
	if err := d.SetImportKEK(3, k); err != nil {
		t.Fatal(err)
	}
	k[0] ^= 0xff
	if !bytes.Equal(d.h.crypto.keks[3], testKEK) {
		t.Error("the stored KEK changed with the caller's slice")
	}
	// Still in commissioning mode: the caps say so, and logins fail.
	if pg, _ := queryCap(t, d, prm.MLX5_CAP_CRYPTO, true); prm.CryptoCap.WrappedCryptoOperational.Get(pg) != 0 {
		t.Error("provisioning made the engine operational")
	}
}

// TestCryptoClose: closing a context drops its logins and DEKs, those of
// Exec too, and leaves the other contexts' and the provisioned material.
func TestCryptoClose(t *testing.T) {
	d := newDevOpt(t, "cx7", wrappedOpts())
	c, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Device{d, c} {
		_, pdn := createPD(t, x)
		if _, _, err := createObj(x, loginIn(0, 0, wrap(t, testKEK, testCred))); err != nil {
			t.Fatal(err)
		}
		if _, _, err := createObj(x, dekSpec{pdn: pdn, key: wrap(t, testKEK, material(16, false))}.in()); err != nil {
			t.Fatal(err)
		}
		if st := x.Exec(dekSpec{pdn: pdn, key: wrap(t, testKEK, material(16, false))}.in(), make([]byte, hdrLen)); st != prm.MLX5_CMD_STAT_OK {
			t.Fatal(st)
		}
	}
	if n := d.h.objects(); n != 2*(1+1+2) {
		t.Fatalf("%d objects, want 8", n)
	}
	c.Close()
	if n := d.h.objects(); n != 4 || len(d.h.crypto.logins) != 1 || len(d.h.deks) != 2 {
		t.Fatalf("%d objects after one context closed, want 4", n)
	}
	d.Close()
	if n := d.h.objects(); n != 0 {
		t.Fatalf("%d objects after both closed", n)
	}
	if len(d.h.crypto.creds) != 1 || len(d.h.crypto.keks) != 1 {
		t.Error("closing the contexts dropped the provisioned material")
	}
}

// FuzzCryptoObjects feeds random crypto_login_obj and encryption_key_obj
// bodies, and random headers, to the general object commands of a
// plaintext and a wrapped engine: nothing panics, a failed create leaves
// nothing, and a closed context holds nothing.
func FuzzCryptoObjects(f *testing.F) {
	f.Add(genObj.Bytes(dekSpec{pdn: firstPDN, key: material(16, false)}.in()), uint16(prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY), uint32(1), false)
	f.Add(genObj.Bytes(dekSpec{pdn: firstPDN, size: 1, keytag: true, key: wrap(f, testKEK, material(32, true))}.in()), uint16(prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY), uint32(1), true)
	f.Add(genObj.Bytes(loginIn(0, 0, wrap(f, testKEK, testCred))), uint16(prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN), uint32(1), true)
	f.Fuzz(func(t *testing.T, body []byte, typ uint16, id uint32, wrapped bool) {
		opt := Options{}
		if wrapped {
			opt = wrappedOpts()
		}
		d, err := NewWithOptions("cx7", opt)
		if err != nil {
			t.Fatal(err)
		}
		d.ObjCreate(allocPDIn(), make([]byte, 16))
		if wrapped {
			d.ObjCreate(loginIn(0, 0, wrap(t, testKEK, testCred)), make([]byte, hdrLen))
		}
		before := d.h.objects()
		in := genIn(prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT, typ, 0, genObjLen)
		copy(genObj.Bytes(in), body)
		out := make([]byte, genObjLen)
		h, err := d.ObjCreate(in, out)
		if err != nil && d.h.objects() != before {
			t.Fatalf("a failed create left %d objects, had %d", d.h.objects(), before)
		}
		if err == nil {
			d.ObjQuery(h, genIn(prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT, typ, uint32(prm.GeneralObjOutCmdHdr.ObjId.Get(out)), hdrLen), out)
			d.InjectDEKError(uint32(prm.GeneralObjOutCmdHdr.ObjId.Get(out)))
		}
		for _, op := range []uint16{prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT, prm.MLX5_CMD_OP_DESTROY_GENERAL_OBJECT} {
			d.Exec(genIn(op, typ, id, hdrLen), out)
		}
		d.DeleteImportKEK(0)
		d.Exec(in, out)
		d.Close()
		if n := d.Objects(); n != 0 {
			t.Fatalf("%d objects after Close", n)
		}
	})
}

// fieldWant is a field and the value it must hold.
type fieldWant struct {
	f    prm.Field
	want uint64
}

// wantFields checks the fields of b (what names b in the errors).
func wantFields(t testing.TB, what string, b []byte, fs []fieldWant) {
	t.Helper()
	for _, f := range fs {
		if got := f.f.Get(b); got != f.want {
			t.Errorf("%s: %s = %#x, want %#x", what, f.f.Name, got, f.want)
		}
	}
}

// FuzzKeyWrap: KeyUnwrap undoes KeyWrap, refuses what another KEK wrapped,
// and takes any input without panicking.
func FuzzKeyWrap(f *testing.F) {
	f.Add(testKEK, material(16, true), []byte{0})
	f.Fuzz(func(t *testing.T, kek, plaintext, junk []byte) {
		KeyUnwrap(kek, junk)
		w, err := KeyWrap(kek, plaintext)
		if err != nil {
			return
		}
		p, err := KeyUnwrap(kek, w)
		if err != nil || !bytes.Equal(p, plaintext) {
			t.Fatalf("KeyUnwrap(KeyWrap(%x)) = %x, %v", plaintext, p, err)
		}
		other := bytes.Clone(kek)
		other[0] ^= 1
		if _, err := KeyUnwrap(other, w); err == nil {
			t.Fatal("another KEK unwrapped it")
		}
	})
}
