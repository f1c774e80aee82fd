package flows

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/sig"
	"golang.org/x/sys/unix"
)

// rdma-core's crypto scenarios (tests/test_mlx5_crypto.py, v44.0) and the
// rows of mlx5dv_wr_set_mkey_crypto(3)'s table, every byte compared with
// the flows' own AES-XTS (cryptoref.go) and sig's engine. Each flow skips
// with the reason on a device without AES-XTS crypto (CryptoCaps), and a
// device in wrapped import mode needs the credential and import KEK a
// crypto officer stored on it (CryptoSetup.Officer).

// CryptoSetup is what the crypto flows need to know that the device does
// not report. The zero value fits a device in plaintext import mode.
type CryptoSetup struct {
	// Officer is what a crypto officer provisioned on the device; without
	// it, flows that need a login skip, and so do all of them on a device
	// that imports keys wrapped only.
	Officer *Officer
	// CorruptDEK puts d in the ERROR state, as a corruption of the DEK's
	// memory does on a device: the software model's hook. Without it the
	// cases that need a DEK in ERROR skip.
	CorruptDEK func(t testing.TB, d *mlx5.DEK)
	// RevokeCredential deletes the officer's credential from the device,
	// so that logins with it become INVALID, until t's cleanup stores it
	// again: the software model's hook. Without it that case skips.
	RevokeCredential func(t testing.TB)
}

// Officer is a credential and an import KEK stored on a device, in
// plaintext, as the crypto officer who stored them knows them: the flows
// wrap the credential and their keys with the KEK themselves.
type Officer struct {
	CredentialID uint32
	// Credential is the credential's value as the device stores it: 40
	// bytes, which wrap to mlx5dv_crypto_login_attr's 48.
	Credential  []byte
	ImportKEKID uint32
	// ImportKEK is the AES key wrap key, 16 or 32 bytes.
	ImportKEK []byte
}

// The environment variables OfficerFromEnv reads: ids in decimal or with a
// 0x prefix, the credential and KEK in hex.
const (
	EnvCredentialID = "MLX5GO_CRYPTO_CREDENTIAL_ID"
	EnvCredential   = "MLX5GO_CRYPTO_CREDENTIAL"
	EnvImportKEKID  = "MLX5GO_CRYPTO_IMPORT_KEK_ID"
	EnvImportKEK    = "MLX5GO_CRYPTO_IMPORT_KEK"
)

// OfficerFromEnv reads an Officer from the environment (EnvCredentialID,
// EnvCredential, EnvImportKEKID, EnvImportKEK): nil, and no error, when
// none of them is set.
func OfficerFromEnv() (*Officer, error) {
	vars := []string{EnvCredentialID, EnvCredential, EnvImportKEKID, EnvImportKEK}
	vals := make([]string, len(vars))
	set := 0
	for i, v := range vars {
		if vals[i] = os.Getenv(v); vals[i] != "" {
			set++
		}
	}
	switch set {
	case 0:
		return nil, nil
	case len(vars):
	default:
		return nil, fmt.Errorf("set all of %v or none", vars)
	}
	var o Officer
	var err error
	id := func(s string) uint32 {
		n, e := strconv.ParseUint(s, 0, 24)
		err = errors.Join(err, e)
		return uint32(n)
	}
	key := func(s string) []byte {
		b, e := hex.DecodeString(s)
		err = errors.Join(err, e)
		return b
	}
	o.CredentialID, o.Credential = id(vals[0]), key(vals[1])
	o.ImportKEKID, o.ImportKEK = id(vals[2]), key(vals[3])
	if err != nil {
		return nil, fmt.Errorf("crypto officer variables: %w", err)
	}
	return &o, nil
}

// cryptoDev is a context's crypto as a flow sees it.
type cryptoDev struct {
	c    *mlx5.Context
	caps mlx5.CryptoCaps
	// wrapped: DEKs must be imported wrapped (libmlx5's
	// check_dek_import_method: the AES-XTS wrapped import method).
	wrapped bool
	// multi: an mkey may hold many data units (the multi-block engine).
	multi bool
	setup CryptoSetup
	login *mlx5.CryptoLoginObj // the flow's, made when a wrapped DEK needs it
}

// needCrypto reads the context's crypto caps, or skips the test with the
// reason as rdma-core's check_crypto_caps does: no crypto, failed self
// tests, no AES-XTS engine, wrapped import mode not operational or
// without an officer.
func needCrypto(t testing.TB, c *mlx5.Context, s CryptoSetup) *cryptoDev {
	t.Helper()
	caps, err := c.CryptoCaps()
	if errors.Is(err, mlx5.ErrUnsupported) {
		t.Skipf("no crypto caps: %v", err)
	}
	if err != nil {
		t.Fatalf("crypto caps: %v", err)
	}
	switch {
	case caps.Flags&mlx5.CryptoFlagCrypto == 0:
		t.Skipf("the device has no crypto offload (%+v)", caps)
	case caps.FailedSelfTests != 0:
		t.Skipf("the device's crypto self tests failed (%#x)", caps.FailedSelfTests)
	case caps.Engines&(mlx5.CryptoEngineAESXTSSingleBlock|mlx5.CryptoEngineAESXTSMultiBlock) == 0:
		t.Skipf("the device has no AES-XTS engine (%+v)", caps)
	}
	d := &cryptoDev{c: c, caps: caps, setup: s,
		wrapped: caps.WrappedImport&mlx5.CryptoWrappedImportAESXTS != 0,
		multi:   caps.Engines&mlx5.CryptoEngineAESXTSMultiBlock != 0}
	if d.wrapped && caps.Flags&mlx5.CryptoFlagWrappedOperational == 0 {
		t.Skipf("the device imports keys wrapped only, and its wrapped crypto is not operational (commissioning mode: no logins, no DEKs) (%+v)", caps)
	}
	if d.wrapped && s.Officer == nil {
		t.Skipf("the device imports keys wrapped only, and the test knows no credential and import KEK "+
			"(on a ConnectX, set %s, %s, %s and %s)", EnvCredentialID, EnvCredential, EnvImportKEKID, EnvImportKEK)
	}
	return d
}

// needMulti skips the test on a device whose mkeys hold one data unit.
func (d *cryptoDev) needMulti(t testing.TB) {
	t.Helper()
	if !d.multi {
		t.Skip("the device has only the single-block AES-XTS engine: an mkey holds one data unit")
	}
}

// units is how many data units the flows put in an mkey: 4, or 1 on a
// device with only the single-block engine.
func (d *cryptoDev) units() int {
	if d.multi {
		return 4
	}
	return 1
}

// loginOptions are the officer's login, its credential wrapped.
func (d *cryptoDev) loginOptions(t testing.TB) mlx5.LoginOptions {
	t.Helper()
	o := d.setup.Officer
	if o == nil {
		t.Skip("no credential and import KEK provisioned for the test")
	}
	cred, err := keyWrap(o.ImportKEK, o.Credential)
	if err != nil {
		t.Fatalf("wrap the credential: %v", err)
	}
	return mlx5.LoginOptions{CredentialID: o.CredentialID, ImportKEKID: o.ImportKEKID, Credential: cred}
}

// dekKey is a DEK's key material in plaintext, and the reference cipher of
// its key pair.
type dekKey struct {
	bits       int
	key1, key2 []byte
	keytag     []byte // nil, or 8 bytes
	x          xts
}

// newKey makes a key pair of bits bits (128 or 256) from seed, with
// keytag (nil for none).
func newKey(t testing.TB, bits int, seed byte, keytag []byte) dekKey {
	t.Helper()
	n := bits / 8
	k := dekKey{bits: bits, key1: make([]byte, n), key2: make([]byte, n), keytag: keytag}
	for i := range n {
		k.key1[i] = seed + byte(i*7)
		k.key2[i] = ^seed + byte(i*11+1)
	}
	var err error
	if k.x, err = newXTS(k.key1, k.key2); err != nil {
		t.Fatal(err)
	}
	return k
}

// plain is the key material as mlx5dv_dek_create(3)'s table lays it out
// in plaintext: key1, key2, then the keytag.
func (k dekKey) plain() []byte {
	return slices.Concat(k.key1, k.key2, k.keytag)
}

// options are the DEKOptions of k in the device's import mode: plaintext,
// or wrapped by the officer's import KEK through login (nil: through the
// context-wide session).
func (d *cryptoDev) options(t testing.TB, k dekKey, opaque string, login *mlx5.CryptoLoginObj) mlx5.DEKOptions {
	t.Helper()
	o := mlx5.DEKOptions{KeyBits: k.bits, HasKeytag: k.keytag != nil, Key: k.plain(), Plaintext: !d.wrapped, Login: login}
	copy(o.Opaque[:], opaque)
	if d.wrapped {
		if d.setup.Officer == nil {
			t.Skip("no credential and import KEK provisioned for the test")
		}
		w, err := keyWrap(d.setup.Officer.ImportKEK, o.Key)
		if err != nil {
			t.Fatalf("wrap the key: %v", err)
		}
		o.Key = w
	}
	return o
}

// dek loads k into the device for pd's mkeys, in the device's import
// mode (a wrapped key through the flow's login object); t's cleanup
// closes it.
func (d *cryptoDev) dek(t testing.TB, pd *mlx5.PD, k dekKey, opaque string) *mlx5.DEK {
	t.Helper()
	return createDEK(t, pd, d.options(t, k, opaque, d.loginObj(t)))
}

// loginObj is the flow's login object on a device in wrapped mode, made
// on first use and closed at t's cleanup; nil in plaintext mode.
func (d *cryptoDev) loginObj(t testing.TB) *mlx5.CryptoLoginObj {
	t.Helper()
	if !d.wrapped || d.login != nil {
		return d.login
	}
	l, err := d.c.CreateCryptoLogin(d.loginOptions(t))
	if err != nil {
		t.Fatalf("create crypto login: %v", err)
	}
	d.login = l
	t.Cleanup(func() {
		closeAll(t, l)
		d.login = nil
	})
	return l
}

// createDEK creates a DEK of o and closes it at t's cleanup.
func createDEK(t testing.TB, pd *mlx5.PD, o mlx5.DEKOptions) *mlx5.DEK {
	t.Helper()
	dek, err := pd.CreateDEK(o)
	if errors.Is(err, mlx5.ErrUnsupported) {
		t.Skipf("create DEK: %v", err)
	}
	if err != nil {
		t.Fatalf("create DEK: %v", err)
	}
	t.Cleanup(func() { closeAll(t, dek) })
	return dek
}

// cryptoMkey creates an mkey with crypto (and block signatures when sig),
// or skips the test on a device or context that makes none; t's cleanup
// closes it.
func cryptoMkey(t testing.TB, pd *mlx5.PD, sig bool) *mlx5.Mkey {
	t.Helper()
	return newMkey(t, pd, mlx5.MkeyOptions{MaxEntries: 4, Crypto: true, BlockSignature: sig})
}

// attr is the crypto of an mkey configure: AES-XTS with dek over data
// units of du, from tweak lba (a 64-bit LBA, little-endian, as the man
// page asks).
func attr(dek *mlx5.DEK, encryptOnTx bool, du sig.BlockSize, lba uint64, keytag []byte) *mlx5.CryptoAttr {
	a := &mlx5.CryptoAttr{EncryptOnTx: encryptOnTx, DataUnitSize: du, DEK: dek, Keytag: keytag}
	a.InitialTweak = tweak(lba)
	return a
}

// tweak is the initial tweak of a message starting at block lba.
func tweak(lba uint64) [16]byte {
	var t [16]byte
	for i := range 8 {
		t[i] = byte(lba >> (8 * i))
	}
	return t
}

// cryptoList is a configure of m over n bytes of mr from off, with
// access, crypto ca and signature sa (nil: none).
func cryptoList(wrID uint64, m *mlx5.Mkey, mr *mlx5.MR, off, n int, access mlx5.AccessFlags, ca *mlx5.CryptoAttr, sa *sig.BlockAttr) *mlx5.MkeyConfigureWR {
	return &mlx5.MkeyConfigureWR{WrID: wrID, Mkey: m, Flags: mlx5.SendSignaled, SetAccess: true, Access: access,
		List: []mlx5.KLM{{Addr: mr.Addr() + uint64(off), ByteCount: uint32(n), Mkey: mr.LKey()}}, Crypto: ca, Sig: sa}
}

// cryptoConfigure posts wr on qp and expects its completion; a crypto or
// signature the device cannot do (ErrUnsupported) skips the test.
func cryptoConfigure(t testing.TB, l *Loopback, qp *mlx5.QP, wr *mlx5.MkeyConfigureWR) {
	t.Helper()
	err := qp.PostMkeyConfigure(wr)
	if errors.Is(err, mlx5.ErrUnsupported) {
		t.Skipf("the device cannot do this configure: %v", err)
	}
	if err != nil {
		t.Fatalf("mkey configure %d: %v", wr.WrID, err)
	}
	l.expect(t, ok(qp, wr.WrID, mlx5.WCUMR))
}

// same fails the test unless got equals want, naming the first 16-byte
// block that differs.
func same(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	i := 0
	for got[i] == want[i] {
		i++
	}
	i &^= 15
	t.Fatalf("%s: differs from byte %d: % x, want % x", what, i, got[i:min(i+16, len(got))], want[i:min(i+16, len(want))])
}

// CryptoTraffic runs rdma-core's crypto traffic
// (test_mlx5_crypto_mkey_old_api, _wrapped_dek, _plaintext_dek and the
// multi-block ones) and the same mkeys under RDMA WRITE and READ, with
// 128- and 256-bit keys:
//
//  1. rdma-core's SENDs: A's memory holds plaintext under one mkey
//     (EncryptOnTx, the man page's row A) and its ciphertext under another
//     (row F); ten times, A SENDs each mkey's whole length into plain
//     receives of B: B gets the ciphertext of the first and the plaintext
//     of the second. Data units of 512 bytes from tweak 0, one unit, and
//     two on a multi-block device, signature before crypto on TX, as
//     rdma-core's.
//  2. Encrypt on write, decrypt on read, at the responder: B's mkey keeps
//     ciphertext (row F, from an LBA other than 0); A RDMA-WRITEs
//     plaintext into it and B's memory holds its AES-XTS encryption, one
//     tweak a 512-byte unit; A RDMA-READs it and gets the plaintext back;
//     a SEND into a receive through B's mkey lands encrypted too (the man
//     page's example 1.1).
//  3. The same at the requester: A RDMA-WRITEs from its row-A mkey (its
//     memory in plaintext) into a plain buffer of B, which gets the
//     ciphertext, and RDMA-READs that ciphertext back through the mkey,
//     which decrypts it into A's memory.
//  4. On a multi-block device: an interleaved layout, configured in a
//     batch; a last data unit shorter than the others (640 bytes, which
//     the man page's job size rule 2 allows); and transfers of one unit
//     at each unit's offset, which take that unit's tweak.
func CryptoTraffic(t *testing.T, c *mlx5.Context, objs Objects, s CryptoSetup) {
	d := needCrypto(t, c, s)
	for _, bits := range []int{128, 256} {
		t.Run(strconv.Itoa(bits), func(t *testing.T) {
			l := NewLoopback(t, c, objs)
			k := newKey(t, bits, byte(bits), nil)
			dek := d.dek(t, l.PD, k, "dek")
			t.Run("rdma-core", func(t *testing.T) { rdmaCoreTraffic(t, d, l, k, dek) })
			t.Run("write-read", func(t *testing.T) { writeRead(t, d, l, k, dek) })
			t.Run("interleaved", func(t *testing.T) { interleavedCrypto(t, d, l, k, dek) })
			t.Run("offset", func(t *testing.T) { offsetCrypto(t, d, l, k, dek) })
		})
	}
}

func rdmaCoreTraffic(t *testing.T, d *cryptoDev, l *Loopback, k dekKey, dek *mlx5.DEK) {
	n := 512 * min(d.units(), 2)
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	bufA, mrA := buffer(t, l.PD, 2*n, all)
	bufB, mrB := buffer(t, l.PD, 2*n, all)
	plain := make([]byte, n)
	fill(plain, 'c')
	enc := make([]byte, n)
	k.x.encrypt(enc, plain, 512, tweak(0))
	copy(bufA, plain)
	copy(bufA[n:], enc)
	wireEnc, memEnc := cryptoMkey(t, l.PD, false), cryptoMkey(t, l.PD, false)
	// rdma-core's order, which without a signature changes nothing but
	// the BSF's enc_order.
	for i, m := range []*mlx5.Mkey{wireEnc, memEnc} {
		a := attr(dek, m == wireEnc, sig.BlockSize512, 0, nil)
		a.Order = mlx5.SigBeforeCryptoOnTx
		cryptoConfigure(t, l, l.A, cryptoList(uint64(1+i), m, mrA, i*n, n, mlx5.AccessLocalWrite, a, nil))
	}
	for i := range 10 {
		fill(bufB, 's')
		r := uint64(100 + 10*i)
		recv(t, l.B, r, mlx5.SGE{Addr: mrB.Addr(), Length: uint32(n), LKey: mrB.LKey()})
		recv(t, l.B, r+1, mlx5.SGE{Addr: mrB.Addr() + uint64(n), Length: uint32(n), LKey: mrB.LKey()})
		post(t, l.A, mlx5.SendWR{WrID: r + 2, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: []mlx5.SGE{{Addr: 0, Length: uint32(n), LKey: wireEnc.LKey()}}})
		post(t, l.A, mlx5.SendWR{WrID: r + 3, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: []mlx5.SGE{{Addr: 0, Length: uint32(n), LKey: memEnc.LKey()}}})
		l.expect(t, okLen(l.B, r, mlx5.WCRecv, uint32(n)), okLen(l.B, r+1, mlx5.WCRecv, uint32(n)),
			ok(l.A, r+2, mlx5.WCSend), ok(l.A, r+3, mlx5.WCSend))
		same(t, fmt.Sprintf("SEND %d from the encrypting mkey", i), bufB[:n], enc)
		same(t, fmt.Sprintf("SEND %d from the decrypting mkey", i), bufB[n:], plain)
	}
}

func writeRead(t *testing.T, d *cryptoDev, l *Loopback, k dekKey, dek *mlx5.DEK) {
	n := 512 * d.units()
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	for _, side := range []struct {
		name      string
		requester bool // A's mkey, EncryptOnTx; else B's, memory at rest
		lba       uint64
	}{{"responder", false, 0x12345}, {"requester", true, 7}} {
		t.Run(side.name, func(t *testing.T) {
			mkeyMem, mkeyMR := buffer(t, l.PD, n, all)
			other, otherMR := buffer(t, l.PD, n, all)
			m := cryptoMkey(t, l.PD, false)
			owner, clearBuf, cipherBuf := l.B, other, mkeyMem
			local, raddr, rkey := mlx5.SGE{Addr: otherMR.Addr(), Length: uint32(n), LKey: otherMR.LKey()}, uint64(0), m.RKey()
			if side.requester {
				owner, clearBuf, cipherBuf = l.A, mkeyMem, other
				local, raddr, rkey = mlx5.SGE{Addr: 0, Length: uint32(n), LKey: m.LKey()}, otherMR.Addr(), otherMR.RKey()
			}
			cryptoConfigure(t, l, owner, cryptoList(1, m, mkeyMR, 0, n, all, attr(dek, side.requester, sig.BlockSize512, side.lba, nil), nil))
			pattern(clearBuf, 1)
			plain := slices.Clone(clearBuf)
			want := make([]byte, n)
			k.x.encrypt(want, plain, 512, tweak(side.lba))

			write(t, l, mlx5.SendWR{WrID: 2, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: raddr, RKey: rkey, SGL: []mlx5.SGE{local}})
			same(t, "the ciphertext after the RDMA WRITE", cipherBuf, want)
			clear(clearBuf)
			post(t, l.A, mlx5.SendWR{WrID: 3, Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled, RemoteAddr: raddr, RKey: rkey, SGL: []mlx5.SGE{local}})
			l.expect(t, okLen(l.A, 3, mlx5.WCRDMARead, uint32(n)))
			same(t, "the plaintext after the RDMA READ", clearBuf, plain)
			if side.requester {
				return
			}

			// The man page's example 1.1: a receive through the mkey.
			pattern(other, 2)
			clear(mkeyMem)
			recv(t, l.B, 4, mlx5.SGE{Addr: 0, Length: uint32(n), LKey: m.LKey()})
			post(t, l.A, mlx5.SendWR{WrID: 5, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: []mlx5.SGE{local}})
			l.expect(t, okLen(l.B, 4, mlx5.WCRecv, uint32(n)), ok(l.A, 5, mlx5.WCSend))
			k.x.encrypt(want, other, 512, tweak(side.lba))
			same(t, "B's memory after a SEND into a receive through the mkey", mkeyMem, want)
		})
	}
}

func interleavedCrypto(t *testing.T, d *cryptoDev, l *Loopback, k dekKey, dek *mlx5.DEK) {
	d.needMulti(t)
	const lba = 0x100
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	// Two entries of 256 bytes, 64 skipped after each, four times: 2048
	// bytes of mkey over two runs of 1280 bytes of memory.
	lay := layout{name: "interleaved", entries: []entry{{0, 256, 64}, {1280, 256, 64}}, repeat: 4}
	n := lay.len()
	src, srcMR := buffer(t, l.PD, n, all)
	tgt, tgtMR := buffer(t, l.PD, 2*n, all)
	pattern(src, 4)
	fill(tgt, 's')
	before := slices.Clone(tgt)
	m := cryptoMkey(t, l.PD, false)
	wr := lay.wr(1, m, tgtMR, all)
	wr.Crypto = attr(dek, false, sig.BlockSize512, lba, nil)
	if err := l.B.Begin().AddMkeyConfigure(wr).Commit(); err != nil {
		t.Fatalf("configure in a batch: %v", err)
	}
	l.expect(t, ok(l.B, 1, mlx5.WCUMR))
	write(t, l, mlx5.SendWR{WrID: 2, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: 0, RKey: m.RKey(),
		SGL: []mlx5.SGE{{Addr: srcMR.Addr(), Length: uint32(n), LKey: srcMR.LKey()}}})
	enc := make([]byte, n)
	k.x.encrypt(enc, src, 512, tweak(lba))
	same(t, "B's memory under an interleaved crypto mkey", tgt, lay.scatter(before, 0, enc))

	// 640 bytes: a unit of 512, then one of 128.
	short := src[:640]
	write(t, l, mlx5.SendWR{WrID: 3, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: 0, RKey: m.RKey(),
		SGL: []mlx5.SGE{{Addr: srcMR.Addr(), Length: 640, LKey: srcMR.LKey()}}})
	enc = enc[:640]
	k.x.encrypt(enc, short, 512, tweak(lba))
	if got := lay.gather(tgt)[:640]; !slices.Equal(got, enc) {
		same(t, "a 640-byte RDMA WRITE", got, enc)
	}
}

// offsetCrypto RDMA-WRITEs one data unit at each data unit of B's mkey,
// last first, and RDMA-READs them back one by one: the unit at offset
// k*512 is encrypted with the initial tweak plus k, whichever transfer
// carried it (the software model's reading, docs/CRYPTO.md, "The tweak").
func offsetCrypto(t *testing.T, d *cryptoDev, l *Loopback, k dekKey, dek *mlx5.DEK) {
	d.needMulti(t)
	const lba = 0x40
	n := 512 * d.units()
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	src, srcMR := buffer(t, l.PD, n, all)
	tgt, tgtMR := buffer(t, l.PD, n, all)
	pattern(src, 11)
	m := cryptoMkey(t, l.PD, false)
	cryptoConfigure(t, l, l.B, cryptoList(1, m, tgtMR, 0, n, all, attr(dek, false, sig.BlockSize512, lba, nil), nil))
	for u := d.units() - 1; u >= 0; u-- {
		write(t, l, mlx5.SendWR{WrID: uint64(10 + u), Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: uint64(512 * u), RKey: m.RKey(),
			SGL: []mlx5.SGE{{Addr: srcMR.Addr() + uint64(512*u), Length: 512, LKey: srcMR.LKey()}}})
	}
	want := make([]byte, n)
	k.x.encrypt(want, src, 512, tweak(lba))
	same(t, "B's memory after a write at each unit", tgt, want)
	back, backMR := buffer(t, l.PD, n, all)
	for u := range d.units() {
		id := uint64(20 + u)
		post(t, l.A, mlx5.SendWR{WrID: id, Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled, RemoteAddr: uint64(512 * u), RKey: m.RKey(),
			SGL: []mlx5.SGE{{Addr: backMR.Addr() + uint64(512*u), Length: 512, LKey: backMR.LKey()}}})
		l.expect(t, okLen(l.A, id, mlx5.WCRDMARead, 512))
	}
	same(t, "the reads of each unit", back, src)
}

// t10 is a T10-DIF domain of 512-byte blocks: CRC guard, an application
// tag, reference tags counting from ref.
func t10(ref uint32) *sig.Domain {
	return &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
		T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x5a5a, RefTag: ref, Flags: sig.T10DIFRefRemap}}
}

// t10Check checks every field of the T10-DIF tuples.
const t10Check = sig.MaskT10DIFGuard | sig.MaskT10DIFAppTag | sig.MaskT10DIFRefTag

// CryptoSignature runs crypto and T10-DIF in one mkey, in both orders
// (rdma-core's test_mlx5_crypto_signature_mkey, with the man page's rows
// of T10-DIF and data checked): for each row, B's crypto and signature
// mkey over 512-byte blocks (four, one on a single-block device), A's RDMA
// WRITE of the wire's form into it, which must leave memory's form in
// B's memory, and A's RDMA READ of it, which must return the wire's form;
// Mkey.Check finds no error.
//
//   - Row H, a storage target's write path with encryption at rest (the
//     NVMe-oF example's): memory holds enc(data+DIF) in 520-byte data
//     units, the wire plain data; the DIF is generated on the plaintext as
//     the data comes in and encrypted with it. Then a corrupted ciphertext
//     block, which decrypts to data its guard does not match: the READ
//     reports it (Mkey.Check).
//   - Row J: memory holds enc(data)+DIF, the DIF computed on the
//     ciphertext, the wire plain data.
//   - Row C (the man page's example 2 and 2.1): memory holds plain data,
//     the wire enc(data+DIF).
//   - Row B: the wire holds enc(data)+DIF, the DIF computed on the
//     ciphertext.
//   - The orders the device does not do: a signature in both domains with
//     signature after crypto on TX for an EncryptOnTx mkey, or before it
//     for the other: refused with ErrInvalid before anything is posted,
//     as libmlx5's get_crypto_order refuses them.
func CryptoSignature(t *testing.T, c *mlx5.Context, objs Objects, s CryptoSetup) {
	d := needCrypto(t, c, s)
	l := NewLoopback(t, c, objs)
	k := newKey(t, 256, 0x5c, nil)
	dek := d.dek(t, l.PD, k, "sig")
	blocks := d.units()
	const lba = 0x2000
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	plain := make([]byte, 512*blocks)
	pattern(plain, 5)
	mem, memMR := buffer(t, l.PD, 520*blocks, all)
	wire, wireMR := buffer(t, l.PD, 520*blocks, all)
	wrID := uint64(0)
	next := func() uint64 { wrID++; return wrID }

	// enc is AES-XTS in units of du from the LBA; protect is sig's engine
	// moving b in direction dir.
	enc := func(du int) func(*testing.T, *sig.Engine, []byte) []byte {
		return func(_ *testing.T, _ *sig.Engine, b []byte) []byte {
			out := make([]byte, len(b))
			k.x.encrypt(out, b, du, tweak(lba))
			return out
		}
	}
	protect := func(dir sig.Direction) func(*testing.T, *sig.Engine, []byte) []byte {
		return func(t *testing.T, eng *sig.Engine, b []byte) []byte {
			n, err := eng.OutputLen(dir, len(b))
			if err != nil {
				t.Fatal(err)
			}
			out := make([]byte, n)
			if me, err := eng.Transfer(dir, out, b); err != nil || !me.OK() {
				t.Fatalf("sig's engine: %v %v", me, err)
			}
			return out
		}
	}
	then := func(fs ...func(*testing.T, *sig.Engine, []byte) []byte) func(*testing.T, *sig.Engine, []byte) []byte {
		return func(t *testing.T, eng *sig.Engine, b []byte) []byte {
			for _, f := range fs {
				b = f(t, eng, b)
			}
			return b
		}
	}
	none := func(_ *testing.T, _ *sig.Engine, b []byte) []byte { return slices.Clone(b) }
	memDIF := &sig.BlockAttr{Mem: t10(lba), CheckMask: t10Check}
	wireDIF := &sig.BlockAttr{Wire: t10(lba), CheckMask: t10Check}
	rows := []struct {
		row       string
		crypto    mlx5.CryptoAttr
		sig       *sig.BlockAttr
		mem, wire func(*testing.T, *sig.Engine, []byte) []byte
	}{
		{"H", mlx5.CryptoAttr{Order: mlx5.SigAfterCryptoOnTx, DataUnitSize: sig.BlockSize520}, memDIF, then(protect(sig.RX), enc(520)), none},
		{"J", mlx5.CryptoAttr{Order: mlx5.SigBeforeCryptoOnTx, DataUnitSize: sig.BlockSize512}, memDIF, then(enc(512), protect(sig.RX)), none},
		{"C", mlx5.CryptoAttr{EncryptOnTx: true, Order: mlx5.SigBeforeCryptoOnTx, DataUnitSize: sig.BlockSize520}, wireDIF, none, then(protect(sig.TX), enc(520))},
		{"B", mlx5.CryptoAttr{EncryptOnTx: true, Order: mlx5.SigAfterCryptoOnTx, DataUnitSize: sig.BlockSize512}, wireDIF, none, then(enc(512), protect(sig.TX))},
	}
	for _, r := range rows {
		t.Run(r.row, func(t *testing.T) {
			eng, err := sig.NewEngine(r.sig)
			if err != nil {
				t.Fatal(err)
			}
			inMem, onWire := r.mem(t, eng, plain), r.wire(t, eng, plain)
			if du := r.crypto.DataUnitSize.Bytes(); !d.multi && len(inMem) > du {
				t.Skipf("the device has only the single-block engine, and the mkey's %d bytes of memory are more than one %d-byte data unit", len(inMem), du)
			}
			ca := r.crypto
			ca.DEK, ca.InitialTweak = dek, tweak(lba)
			m := cryptoMkey(t, l.PD, true)
			cryptoConfigure(t, l, l.B, cryptoList(next(), m, memMR, 0, len(inMem), all, &ca, r.sig))

			clear(mem)
			copy(wire, onWire)
			write(t, l, mlx5.SendWR{WrID: next(), Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: 0, RKey: m.RKey(),
				SGL: []mlx5.SGE{{Addr: wireMR.Addr(), Length: uint32(len(onWire)), LKey: wireMR.LKey()}}})
			same(t, "memory after the RDMA WRITE into the mkey", mem[:len(inMem)], inMem)
			checkMkey(t, l, m, sig.MkeyErr{})

			read := func() {
				clear(wire)
				id := next()
				post(t, l.A, mlx5.SendWR{WrID: id, Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled, RemoteAddr: 0, RKey: m.RKey(),
					SGL: []mlx5.SGE{{Addr: wireMR.Addr(), Length: uint32(len(onWire)), LKey: wireMR.LKey()}}})
				l.expect(t, okLen(l.A, id, mlx5.WCRDMARead, uint32(len(onWire))))
			}
			read()
			same(t, "the RDMA READ of the mkey", wire[:len(onWire)], onWire)
			checkMkey(t, l, m, sig.MkeyErr{})
			if r.row != "H" {
				return
			}

			// Block 0's ciphertext corrupted: it decrypts to data its
			// guard does not match.
			mem[100] ^= 0x40
			bad := make([]byte, len(inMem))
			k.x.decrypt(bad, mem[:len(inMem)], 520, tweak(lba))
			wantErr, err := eng.Check(sig.DomainMemory, bad)
			if err != nil || wantErr.Type != sig.MkeyErrBadGuard {
				t.Fatalf("engine check of the corrupted block: %v %v", wantErr, err)
			}
			read()
			checkMkey(t, l, m, wantErr)
		})
	}

	t.Run("refused", func(t *testing.T) {
		both := &sig.BlockAttr{Mem: t10(lba), Wire: t10(lba), CheckMask: t10Check}
		m := cryptoMkey(t, l.PD, true)
		for _, ca := range []*mlx5.CryptoAttr{
			{EncryptOnTx: true, Order: mlx5.SigAfterCryptoOnTx, DataUnitSize: sig.BlockSize512, DEK: dek},
			{EncryptOnTx: false, Order: mlx5.SigBeforeCryptoOnTx, DataUnitSize: sig.BlockSize512, DEK: dek},
		} {
			err := l.B.PostMkeyConfigure(cryptoList(next(), m, memMR, 0, len(mem), all, ca, both))
			var e *mlx5.Error
			if !errors.As(err, &e) || !errors.Is(err, mlx5.ErrInvalid) {
				t.Errorf("EncryptOnTx %v, order %v, signatures in both domains: %v, want an *mlx5.Error with ErrInvalid", ca.EncryptOnTx, ca.Order, err)
			}
		}
		l.quiet(t, time.Millisecond)
	})
}

// CryptoWrappedLogin runs rdma-core's test_mlx5_dek_management and the
// wrapped DEK of test_mlx5_crypto_wrapped_dek, on a device in wrapped
// import mode with the officer's credential (it skips on one in plaintext
// mode):
//
//  1. the context-wide session: without it a wrapped DEK is refused
//     (ErrInvalid, nothing sent) and the state is LoginNone; CryptoLogin
//     makes it LoginValid, and a second login fails with EEXIST; a DEK
//     imported through the session reports its opaque; CryptoLogout makes
//     the state LoginNone again, and a second logout fails with ENOENT;
//  2. a wrong credential (another value, wrapped by the right KEK) is
//     refused;
//  3. the login object: CreateCryptoLogin is LoginValid; a wrapped DEK
//     through it encrypts as its key says, and goes on doing so after
//     the login object is closed (the man page: a DEK in use needs no
//     login); Close twice is nil;
//  4. with the model's hook, the credential revoked: the login object
//     becomes LoginInvalid, and a new wrapped DEK is refused.
func CryptoWrappedLogin(t *testing.T, c *mlx5.Context, objs Objects, s CryptoSetup) {
	d := needCrypto(t, c, s)
	if !d.wrapped {
		t.Skip("the device imports keys in plaintext: no login is needed or allowed")
	}
	l := NewLoopback(t, c, objs)
	k := newKey(t, 128, 0x11, nil)
	state := func(t *testing.T, want mlx5.LoginState) {
		t.Helper()
		got, err := c.CryptoLoginState()
		if err != nil || got != want {
			t.Fatalf("session state %v %v, want %v", got, err, want)
		}
	}

	t.Run("session", func(t *testing.T) {
		opt := d.options(t, k, "dek", nil)
		if dek, err := l.PD.CreateDEK(opt); !errors.Is(err, mlx5.ErrInvalid) {
			closeAll(t, dek)
			t.Fatalf("a wrapped DEK without a login: %v, want ErrInvalid", err)
		}
		state(t, mlx5.LoginNone)
		if err := c.CryptoLogin(d.loginOptions(t)); err != nil {
			t.Fatalf("crypto login: %v", err)
		}
		loggedIn := true
		t.Cleanup(func() {
			if loggedIn {
				c.CryptoLogout()
			}
		})
		state(t, mlx5.LoginValid)
		if err := c.CryptoLogin(d.loginOptions(t)); !errors.Is(err, unix.EEXIST) {
			t.Errorf("a second login: %v, want EEXIST", err)
		}
		dek := createDEK(t, l.PD, opt)
		info, err := dek.Query()
		if err != nil || info.State != mlx5.DEKReady || string(info.Opaque[:3]) != "dek" {
			t.Errorf("query: %+v %v, want ready with opaque \"dek\"", info, err)
		}
		if err := dek.Close(); err != nil {
			t.Fatalf("destroy DEK: %v", err)
		}
		if err := c.CryptoLogout(); err != nil {
			t.Fatalf("logout: %v", err)
		}
		loggedIn = false
		state(t, mlx5.LoginNone)
		if err := c.CryptoLogout(); !errors.Is(err, unix.ENOENT) {
			t.Errorf("a second logout: %v, want ENOENT", err)
		}
	})

	t.Run("wrong credential", func(t *testing.T) {
		o := d.loginOptions(t)
		bad := slices.Clone(d.setup.Officer.Credential)
		bad[0] ^= 1
		o.Credential, _ = keyWrap(d.setup.Officer.ImportKEK, bad)
		if lo, err := c.CreateCryptoLogin(o); err == nil {
			closeAll(t, lo)
			t.Errorf("a login object with a wrong credential was created")
		}
		if err := c.CryptoLogin(o); err == nil {
			c.CryptoLogout()
			t.Errorf("a session with a wrong credential was opened")
		}
	})

	t.Run("object", func(t *testing.T) {
		lo, err := c.CreateCryptoLogin(d.loginOptions(t))
		if err != nil {
			t.Fatalf("create crypto login: %v", err)
		}
		t.Cleanup(func() { closeAll(t, lo) })
		if st, err := lo.State(); err != nil || st != mlx5.LoginValid {
			t.Fatalf("login object state %v %v, want valid", st, err)
		}
		dek := createDEK(t, l.PD, d.options(t, k, "obj", lo))
		if info, err := dek.Query(); err != nil || info.State != mlx5.DEKReady {
			t.Errorf("query: %+v %v", info, err)
		}
		closeTwice(t, "the login object", lo, func() error { _, err := lo.State(); return err })
		// The DEK works without its login.
		encryptCheck(t, l, k, dek)
	})

	t.Run("revoked", func(t *testing.T) {
		if s.RevokeCredential == nil {
			t.Skip("no way to revoke the credential on this device")
		}
		lo, err := c.CreateCryptoLogin(d.loginOptions(t))
		if err != nil {
			t.Fatalf("create crypto login: %v", err)
		}
		t.Cleanup(func() { closeAll(t, lo) })
		s.RevokeCredential(t)
		if st, err := lo.State(); err != nil || st != mlx5.LoginInvalid {
			t.Errorf("login object state after the credential was deleted: %v %v, want invalid", st, err)
		}
		if dek, err := l.PD.CreateDEK(d.options(t, k, "rev", lo)); err == nil {
			closeAll(t, dek)
			t.Errorf("a wrapped DEK through an invalid login was created")
		}
	})
}

// encryptCheck writes 512 bytes through a new crypto mkey of B made with
// dek, which must hold k, and checks that B's memory holds them
// encrypted; it closes the mkey before it returns.
func encryptCheck(t testing.TB, l *Loopback, k dekKey, dek *mlx5.DEK) {
	t.Helper()
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite
	src, srcMR := buffer(t, l.PD, 512, all)
	tgt, tgtMR := buffer(t, l.PD, 512, all)
	pattern(src, 9)
	m := cryptoMkey(t, l.PD, false)
	defer closeAll(t, m)
	cryptoConfigure(t, l, l.B, cryptoList(900, m, tgtMR, 0, 512, all, attr(dek, false, sig.BlockSize512, 3, k.keytag), nil))
	write(t, l, mlx5.SendWR{WrID: 901, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: 0, RKey: m.RKey(),
		SGL: []mlx5.SGE{{Addr: srcMR.Addr(), Length: 512, LKey: srcMR.LKey()}}})
	want := make([]byte, 512)
	k.x.encrypt(want, src, 512, tweak(3))
	same(t, "memory written through the DEK", tgt, want)
}

// CryptoDEKLifecycle runs rdma-core's DEK query and destroy, and what
// mlx5go adds to them:
//
//  1. a DEK of each size, with and without a keytag, is ready and reports
//     its opaque; Close destroys it, a second Close is nil, and Query
//     after it fails with ErrClosed;
//  2. a DEK an mkey's configure names cannot be closed while the mkey
//     uses it: Close fails with EBUSY and the DEK goes on working; once a
//     later configure names another DEK, or the mkey is closed, Close
//     succeeds;
//  3. refusals before anything is sent (*mlx5.Error with ErrInvalid):
//     a key size other than 128 and 256, key material of the wrong
//     length, a configure naming a closed DEK or one of another PD, a
//     keytag where the DEK has none and none where it has one, and a
//     crypto configure on an mkey made without crypto; no error shows
//     key material;
//  4. with the model's hook, a DEK put in ERROR: Query reports DEKError,
//     a configure naming it is refused, and traffic through an mkey
//     configured with it before fails.
func CryptoDEKLifecycle(t *testing.T, c *mlx5.Context, objs Objects, s CryptoSetup) {
	d := needCrypto(t, c, s)
	l := NewLoopback(t, c, objs)
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	_, mr := buffer(t, l.PD, 4096, all)

	t.Run("query and destroy", func(t *testing.T) {
		for i, kc := range []struct {
			bits   int
			keytag []byte
		}{{128, nil}, {256, nil}, {128, []byte("tag-0128")}, {256, []byte("tag-0256")}} {
			dek := d.dek(t, l.PD, newKey(t, kc.bits, byte(i), kc.keytag), fmt.Sprintf("op%d", i))
			info, err := dek.Query()
			if want := fmt.Sprintf("op%d", i); err != nil || info.State != mlx5.DEKReady || string(info.Opaque[:3]) != want {
				t.Errorf("%d-bit DEK, keytag %v: query %+v %v, want ready with opaque %q", kc.bits, kc.keytag != nil, info, err, want)
			}
			closeTwice(t, "the DEK", dek, func() error { _, err := dek.Query(); return err })
		}
	})

	t.Run("in use", func(t *testing.T) {
		k1, k2 := newKey(t, 128, 0x21, nil), newKey(t, 128, 0x22, nil)
		dek1, dek2 := d.dek(t, l.PD, k1, "one"), d.dek(t, l.PD, k2, "two")
		m := cryptoMkey(t, l.PD, false)
		cryptoConfigure(t, l, l.B, cryptoList(1, m, mr, 0, 512, all, attr(dek1, false, sig.BlockSize512, 0, nil), nil))
		if err := dek1.Close(); !errors.Is(err, unix.EBUSY) {
			t.Fatalf("destroy a DEK an mkey uses: %v, want EBUSY", err)
		}
		encryptCheck(t, l, k1, dek1)
		cryptoConfigure(t, l, l.B, cryptoList(2, m, mr, 0, 512, all, attr(dek2, false, sig.BlockSize512, 0, nil), nil))
		if err := dek1.Close(); err != nil {
			t.Errorf("destroy a DEK no configure names any more: %v", err)
		}
		if err := dek2.Close(); !errors.Is(err, unix.EBUSY) {
			t.Errorf("destroy the DEK of the mkey's last configure: %v, want EBUSY", err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("close the mkey: %v", err)
		}
		if err := dek2.Close(); err != nil {
			t.Errorf("destroy a DEK after its mkey was closed: %v", err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		k := newKey(t, 128, 0x31, nil)
		refused := func(t *testing.T, what string, err error) {
			t.Helper()
			var e *mlx5.Error
			if !errors.As(err, &e) || !errors.Is(err, mlx5.ErrInvalid) {
				t.Errorf("%s: %v, want an *mlx5.Error with ErrInvalid", what, err)
				return
			}
			for _, secret := range [][]byte{k.key1, k.key2} {
				if msg := fmt.Sprintf("%v %+v %#v", err, err, err); containsHex(msg, secret) {
					t.Errorf("%s: the error shows key material: %s", what, msg)
				}
			}
		}
		create := func(t *testing.T, what string, o mlx5.DEKOptions) {
			t.Helper()
			dek, err := l.PD.CreateDEK(o)
			if err == nil {
				closeAll(t, dek)
			}
			refused(t, what, err)
		}
		login := d.loginObj(t)
		o := d.options(t, k, "bad", login)
		o.KeyBits = 192
		create(t, "a 192-bit key", o)
		o = d.options(t, k, "bad", login)
		o.Key = o.Key[:len(o.Key)-1]
		create(t, "key material a byte short", o)
		o = d.options(t, k, "bad", login)
		o.HasKeytag = true
		create(t, "a keytag the key material lacks", o)

		dek := d.dek(t, l.PD, k, "ok")
		m := cryptoMkey(t, l.PD, false)
		conf := func(t *testing.T, what string, m *mlx5.Mkey, ca *mlx5.CryptoAttr) {
			t.Helper()
			refused(t, what, l.B.PostMkeyConfigure(cryptoList(10, m, mr, 0, 512, all, ca, nil)))
		}
		conf(t, "a nil DEK", m, &mlx5.CryptoAttr{DataUnitSize: sig.BlockSize512})
		conf(t, "a 5-byte keytag for a DEK without one", m, attr(dek, false, sig.BlockSize512, 0, []byte("12345")))
		tagged := d.dek(t, l.PD, newKey(t, 128, 0x32, []byte("tag-tag!")), "tag")
		conf(t, "no keytag for a DEK with one", m, attr(tagged, false, sig.BlockSize512, 0, nil))
		conf(t, "a 4-byte keytag", m, attr(tagged, false, sig.BlockSize512, 0, []byte("tag-")))
		plainMkey := indirectMkey(t, l.PD, 4)
		conf(t, "crypto on an mkey made without it", plainMkey, attr(dek, false, sig.BlockSize512, 0, nil))
		other, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeAll(t, other) })
		foreign := d.dek(t, other, newKey(t, 128, 0x33, nil), "pd2")
		conf(t, "a DEK of another PD", m, attr(foreign, false, sig.BlockSize512, 0, nil))
		gone := d.dek(t, l.PD, newKey(t, 128, 0x34, nil), "gone")
		if err := gone.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.B.PostMkeyConfigure(cryptoList(11, m, mr, 0, 512, all, attr(gone, false, sig.BlockSize512, 0, nil), nil)); !errors.Is(err, mlx5.ErrClosed) {
			t.Errorf("a closed DEK: %v, want ErrClosed", err)
		}
		l.quiet(t, time.Millisecond)
	})

	t.Run("error state", func(t *testing.T) {
		if s.CorruptDEK == nil {
			t.Skip("no way to put a DEK in ERROR on this device")
		}
		l := NewLoopback(t, c, objs) // the failed write takes the QPs to ERR
		dek := d.dek(t, l.PD, newKey(t, 128, 0x41, nil), "err")
		failWrite(t, l, dek, nil, false, func() {
			s.CorruptDEK(t, dek)
			if info, err := dek.Query(); err != nil || info.State != mlx5.DEKError {
				t.Errorf("query of a corrupted DEK: %+v %v, want DEKError", info, err)
			}
		})
		_, tgtMR := buffer(t, l.PD, 512, all)
		m2 := cryptoMkey(t, l.PD, false)
		err := l.B.PostMkeyConfigure(cryptoList(22, m2, tgtMR, 0, 512, all, attr(dek, false, sig.BlockSize512, 0, nil), nil))
		if !errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("configure naming a DEK in ERROR: %v, want ErrInvalid", err)
		}
	})
}

// closeTwice closes o twice, which must succeed both times, after which
// use must fail with ErrClosed.
func closeTwice(t testing.TB, what string, o interface{ Close() error }, use func() error) {
	t.Helper()
	if err := o.Close(); err != nil {
		t.Fatalf("close %s: %v", what, err)
	}
	if err := o.Close(); err != nil {
		t.Errorf("close %s again: %v", what, err)
	}
	if err := use(); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("%s after Close: %v, want ErrClosed", what, err)
	}
}

// failWrite moves 512 bytes from A to a buffer of 512 bytes of 's' of B
// through a crypto mkey configured with dek and keytag, after spoil (if
// not nil): an RDMA WRITE into B's mkey or, for the requester, a SEND
// from A's mkey into a receive of B's. The work request must fail and
// leave B's buffer as it was.
func failWrite(t testing.TB, l *Loopback, dek *mlx5.DEK, keytag []byte, requester bool, spoil func()) {
	t.Helper()
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite
	src, srcMR := buffer(t, l.PD, 512, all)
	tgt, tgtMR := buffer(t, l.PD, 512, all)
	pattern(src, 7)
	fill(tgt, 's')
	m := cryptoMkey(t, l.PD, false)
	wr := mlx5.SendWR{WrID: 2, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: 0, RKey: m.RKey(),
		SGL: []mlx5.SGE{{Addr: srcMR.Addr(), Length: 512, LKey: srcMR.LKey()}}}
	if requester {
		cryptoConfigure(t, l, l.A, cryptoList(1, m, srcMR, 0, 512, all, attr(dek, true, sig.BlockSize512, 0, keytag), nil))
		recv(t, l.B, 3, mlx5.SGE{Addr: tgtMR.Addr(), Length: 512, LKey: tgtMR.LKey()})
		wr = mlx5.SendWR{WrID: 2, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: []mlx5.SGE{{Addr: 0, Length: 512, LKey: m.LKey()}}}
	} else {
		cryptoConfigure(t, l, l.B, cryptoList(1, m, tgtMR, 0, 512, all, attr(dek, false, sig.BlockSize512, 0, keytag), nil))
	}
	if spoil != nil {
		spoil()
	}
	post(t, l.A, wr)
	want := mlx5.WCRemAccessErr
	if requester {
		want = mlx5.WCLocProtErr
	}
	failed(t, l, 2, want, tgt, 's')
}

// failed waits for the completion of A's work request wrID, which must
// fail with status want, and checks that the target's memory still holds
// only c. B's side may complete with errors too (its QP goes to the error
// state and flushes its receives), which are dropped.
//
// The statuses are the software model's, which fails a crypto mkey that
// cannot run as a key that does not resolve (docs/MODEL.md, "Crypto data
// path": a requester's SGE with a local protection error, an rkey with a
// remote access error); no public source says which a ConnectX gives,
// and TestHWCrypto* settle it.
func failed(t testing.TB, l *Loopback, wrID uint64, want mlx5.WCStatus, target []byte, c byte) {
	t.Helper()
	for {
		wc := l.Wait(t, 1)[0]
		if wc.QPN != l.A.QPN() {
			continue
		}
		if wc.WrID != wrID || wc.Status != want {
			t.Fatalf("completion %+v (vendor syndrome %#x), want work request %d failed with %v", wc, wc.VendorErr, wrID, want)
		}
		if !allBytes(target, c) {
			t.Errorf("the failed request changed the target's memory")
		}
		return
	}
}

// containsHex reports whether msg shows b: as hex, in fmt's byte forms,
// or as its bytes.
func containsHex(msg string, b []byte) bool {
	for _, form := range []string{hex.EncodeToString(b), fmt.Sprintf("% x", b), fmt.Sprint(b), fmt.Sprintf("%#v", b), string(b)} {
		if strings.Contains(msg, form) {
			return true
		}
	}
	return false
}

// CryptoBadKeytag runs a keytag mismatch: a DEK with a keytag, B's mkey
// configured with another tag (which only the device can tell). A's RDMA
// WRITE into the mkey fails as the device fails it, and B's memory is
// untouched; with the right tag, on a new pair, it lands encrypted. A's
// own mkey with the wrong tag fails A's SEND from it.
func CryptoBadKeytag(t *testing.T, c *mlx5.Context, objs Objects, s CryptoSetup) {
	d := needCrypto(t, c, s)
	k := newKey(t, 256, 0x51, []byte("keytag01"))
	wrong := []byte("keytag02")

	for _, side := range []string{"responder", "requester"} {
		t.Run(side, func(t *testing.T) {
			l := NewLoopback(t, c, objs)
			failWrite(t, l, d.dek(t, l.PD, k, "tag"), wrong, side == "requester", nil)
		})
	}
	t.Run("right tag", func(t *testing.T) {
		l := NewLoopback(t, c, objs)
		encryptCheck(t, l, k, d.dek(t, l.PD, k, "tag"))
	})
}

// CryptoJobSize runs the job sizes of mlx5dv_wr_set_mkey_crypto(3)'s
// notes: a transfer through a crypto mkey must be a whole number of data
// units, or a multiple of 16 bytes whose last unit falls at least 16
// bytes short. The man page's examples, each an RDMA WRITE into a crypto
// mkey of B of one data unit: with 512-byte units 512 and 128 bytes land
// encrypted (a shorter job is a shorter unit) and 47 fails; with 520-byte
// units 520 and 496 land and 512 fails. The failures are the model's
// (docs/MODEL.md: the man page does not say what a device does): a remote
// access error at A, nothing written.
func CryptoJobSize(t *testing.T, c *mlx5.Context, objs Objects, s CryptoSetup) {
	d := needCrypto(t, c, s)
	k := newKey(t, 128, 0x61, nil)
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite
	for _, j := range []struct {
		du   sig.BlockSize
		n    int
		fits bool
	}{
		{sig.BlockSize512, 512, true}, {sig.BlockSize512, 128, true}, {sig.BlockSize512, 47, false},
		{sig.BlockSize520, 520, true}, {sig.BlockSize520, 496, true}, {sig.BlockSize520, 512, false},
	} {
		t.Run(fmt.Sprintf("%d in %d", j.n, j.du.Bytes()), func(t *testing.T) {
			l := NewLoopback(t, c, objs)
			dek := d.dek(t, l.PD, k, "job")
			du := j.du.Bytes()
			src, srcMR := buffer(t, l.PD, du, all)
			tgt, tgtMR := buffer(t, l.PD, du, all)
			pattern(src, j.n)
			fill(tgt, 's')
			m := cryptoMkey(t, l.PD, false)
			cryptoConfigure(t, l, l.B, cryptoList(1, m, tgtMR, 0, du, all, attr(dek, false, j.du, 9, nil), nil))
			post(t, l.A, mlx5.SendWR{WrID: 2, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: 0, RKey: m.RKey(),
				SGL: []mlx5.SGE{{Addr: srcMR.Addr(), Length: uint32(j.n), LKey: srcMR.LKey()}}})
			if !j.fits {
				failed(t, l, 2, mlx5.WCRemAccessErr, tgt, 's')
				return
			}
			l.expect(t, ok(l.A, 2, mlx5.WCRDMAWrite))
			want := make([]byte, j.n)
			k.x.encrypt(want, src[:j.n], du, tweak(9))
			same(t, "memory after the write", tgt[:j.n], want)
			if !allBytes(tgt[j.n:], 's') {
				t.Errorf("the write went past its %d bytes", j.n)
			}
		})
	}
}
