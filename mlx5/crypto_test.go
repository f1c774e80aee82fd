package mlx5

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// cryptoDevice is the cx7 model (for PDs and everything else) with a
// crypto firmware in front of it: QUERY_HCA_CAP's general page has the
// model's crypto bits cleared and then the test's set (so that a device
// has no crypto unless the test gives it some), the crypto page is the
// test's, and DEK and
// crypto login general objects are made, queried and destroyed here. It
// keeps the very mailbox slices mlx5 hands the seam, so that a test can
// see what is left in them once a call returns.
type cryptoDevice struct {
	*model.Device

	mu      sync.Mutex
	general func(caps []byte) // edits the general caps, nil: no crypto
	page    []byte            // the crypto cap page; nil fails its query
	status  prm.Status        // a create's firmware status (0: OK)
	state   uint64            // what a query reports as the object's state
	opaque  []byte            // what a DEK query reports as its opaque
	echoKey bool              // a DEK query answers the key it was given, as no device should

	cmds     []uint16 // opcodes of the commands that reached the device
	pageQs   int      // crypto page queries
	objs     map[seam.Handle]cryptoObj
	next     seam.Handle
	creates  [][]byte // the create mailboxes as mlx5 handed them (not copies)
	sent     [][]byte // copies of them, as the firmware read them
	queries  [][]byte // the query outputs as mlx5 handed them
	destroys int
}

type cryptoObj struct {
	typ uint64
	id  uint32
	in  []byte // the create command
}

// cryptoCapsFull is a general page editor for a device with crypto, both
// engines and both object types.
func cryptoCapsFull(caps []byte) {
	prm.CmdHcaCap.Crypto.Set(caps, 1)
	prm.CmdHcaCap.AesXtsMultiBlockBeTweak.Set(caps, 1)
	prm.CmdHcaCap.AesXtsSingleBlockLeTweak.Set(caps, 1)
	prm.CmdHcaCap.GeneralObjTypes.Set(caps, prm.CmdHcaCap.GeneralObjTypes.Get(caps)|1<<prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN|1<<prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY)
}

// noCrypto clears what a general page says of crypto: the crypto bit, the
// engines and the two object types.
func noCrypto(caps []byte) {
	prm.CmdHcaCap.Crypto.Set(caps, 0)
	prm.CmdHcaCap.AesXtsMultiBlockBeTweak.Set(caps, 0)
	prm.CmdHcaCap.AesXtsSingleBlockLeTweak.Set(caps, 0)
	prm.CmdHcaCap.GeneralObjTypes.Set(caps, prm.CmdHcaCap.GeneralObjTypes.Get(caps)&^(1<<prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN|1<<prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY))
}

// cryptoPage is a crypto cap page.
func cryptoPage(operational, wrappedImport bool, logDEKs uint64) []byte {
	p := prm.CryptoCap.Layout().New()
	if operational {
		prm.CryptoCap.WrappedCryptoOperational.Set(p, 1)
	}
	if wrappedImport {
		prm.CryptoCap.WrappedImportMethod.Set(p, prm.MLX5_CRYPTO_CAPS_WRAPPED_IMPORT_METHOD_AES)
	}
	prm.CryptoCap.LogMaxNumDeks.Set(p, logDEKs)
	return p
}

func newCryptoDevice(t *testing.T, general func([]byte), page []byte) (*cryptoDevice, *Context) {
	t.Helper()
	m, err := model.New("cx7")
	if err != nil {
		t.Fatal(err)
	}
	d := &cryptoDevice{Device: m, general: general, page: page, objs: map[seam.Handle]cryptoObj{}, next: 0x7f000000}
	c := NewContext(d)
	t.Cleanup(func() { c.Close() })
	return d, c
}

func (d *cryptoDevice) GeneralCmd(in, out []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cmds = append(d.cmds, uint16(prm.MboxIn.Opcode.Get(in)))
	if prm.MboxIn.Opcode.Get(in) == prm.MLX5_CMD_OP_QUERY_HCA_CAP {
		switch prm.MboxIn.OpMod.Get(in) {
		case uint64(prm.QueryHCACapOpMod(prm.MLX5_CAP_CRYPTO, true)):
			d.pageQs++
			if d.page == nil {
				return unix.EIO
			}
			clear(out)
			copy(prm.QueryHcaCapOut.Capability.Bytes(out), d.page)
			return nil
		case uint64(prm.QueryHCACapOpMod(prm.MLX5_CAP_GENERAL, true)):
			if err := d.Device.GeneralCmd(in, out); err != nil {
				return err
			}
			caps := prm.QueryHcaCapOut.Capability.Bytes(out)
			noCrypto(caps)
			if d.general != nil {
				d.general(caps)
			}
			return nil
		}
	}
	return d.Device.GeneralCmd(in, out)
}

func (d *cryptoDevice) ObjCreate(in, out []byte) (seam.Handle, error) {
	typ := prm.GeneralObjInCmdHdr.ObjType.Get(in)
	if prm.MboxIn.Opcode.Get(in) != prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT ||
		typ != prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN && typ != prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY {
		return d.Device.ObjCreate(in, out)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cmds = append(d.cmds, prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT)
	d.creates = append(d.creates, in)
	d.sent = append(d.sent, bytes.Clone(in))
	clear(out)
	if d.status != 0 {
		prm.MboxOut.Status.Set(out, uint64(d.status))
		prm.MboxOut.Syndrome.Set(out, 0x5ec2e7)
		return 0, unix.EREMOTEIO
	}
	d.next++
	id := uint32(d.next) & 0xffffff
	d.objs[d.next] = cryptoObj{typ: typ, id: id, in: bytes.Clone(in)}
	prm.GeneralObjOutCmdHdr.ObjId.Set(out, uint64(id))
	return d.next, nil
}

func (d *cryptoDevice) ObjQuery(h seam.Handle, in, out []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.objs[h]
	if !ok {
		return d.Device.ObjQuery(h, in, out)
	}
	d.cmds = append(d.cmds, uint16(prm.MboxIn.Opcode.Get(in)))
	d.queries = append(d.queries, out)
	if prm.GeneralObjInCmdHdr.ObjId.Get(in) != uint64(o.id) || prm.GeneralObjInCmdHdr.ObjType.Get(in) != o.typ {
		return unix.EINVAL
	}
	clear(out)
	obj := prm.QueryEncryptionKeyObjOut.Obj
	if o.typ == prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN {
		prm.CryptoLoginObj.State.At(prm.QueryCryptoLoginObjOut.Obj).Set(out, d.state)
		return nil
	}
	prm.EncryptionKeyObj.State.At(obj).Set(out, d.state)
	copy(prm.EncryptionKeyObj.Opaque.At(obj).Bytes(out), d.opaque)
	if d.echoKey {
		key := prm.EncryptionKeyObj.Key.At(prm.CreateEncryptionKeyIn.EncryptionKeyObject)
		copy(prm.EncryptionKeyObj.Key.At(obj).Bytes(out), key.Bytes(o.in))
	}
	return nil
}

func (d *cryptoDevice) ObjDestroy(h seam.Handle) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.objs[h]; !ok {
		return d.Device.ObjDestroy(h)
	}
	d.cmds = append(d.cmds, prm.MLX5_CMD_OP_DESTROY_GENERAL_OBJECT)
	delete(d.objs, h)
	d.destroys++
	return nil
}

// took returns the opcodes that reached the device since the last call.
func (d *cryptoDevice) took() []uint16 {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.cmds
	d.cmds = nil
	return c
}

func (d *cryptoDevice) live() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.objs)
}

// isErrno fails t unless err is an *Error wrapping errno.
func isErrno(t *testing.T, what string, err error, errno unix.Errno) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, errno) {
		t.Errorf("%s: %v (%T), want an *Error with %v", what, err, err, errno)
	}
}

// The caps are libmlx5 44.0's derivation: the general caps' crypto bit
// and engines, then the crypto page only on a device with crypto.
func TestCryptoCapsDerivation(t *testing.T) {
	for _, tc := range []struct {
		crypto, single, multi bool
		page                  []byte
		want                  CryptoCaps
		pageQuery             bool
	}{
		{want: CryptoCaps{}},
		{single: true, multi: true, page: cryptoPage(true, true, 20), want: CryptoCaps{Engines: CryptoEngineAESXTSSingleBlock | CryptoEngineAESXTSMultiBlock}},
		{crypto: true, page: cryptoPage(false, false, 0), want: CryptoCaps{Flags: CryptoFlagCrypto}, pageQuery: true},
		{crypto: true, single: true, page: cryptoPage(true, false, 7),
			want: CryptoCaps{Flags: CryptoFlagCrypto | CryptoFlagWrappedOperational, Engines: CryptoEngineAESXTSSingleBlock, LogMaxDEKs: 7}, pageQuery: true},
		{crypto: true, multi: true, page: cryptoPage(true, true, 31),
			want: CryptoCaps{Flags: CryptoFlagCrypto | CryptoFlagWrappedOperational, Engines: CryptoEngineAESXTSSingleBlock | CryptoEngineAESXTSMultiBlock,
				WrappedImport: CryptoWrappedImportAESXTS, LogMaxDEKs: 31}, pageQuery: true},
	} {
		general := func(caps []byte) {
			prm.CmdHcaCap.Crypto.Set(caps, uint64(b2i(tc.crypto)))
			prm.CmdHcaCap.AesXtsSingleBlockLeTweak.Set(caps, uint64(b2i(tc.single)))
			prm.CmdHcaCap.AesXtsMultiBlockBeTweak.Set(caps, uint64(b2i(tc.multi)))
		}
		d, c := newCryptoDevice(t, general, tc.page)
		for range 2 {
			got, err := c.CryptoCaps()
			if err != nil || got != tc.want {
				t.Errorf("%+v: CryptoCaps %+v, %v; want %+v", tc, got, err, tc.want)
			}
		}
		if q := d.pageQs; q != b2i(tc.pageQuery) {
			t.Errorf("%+v: %d crypto page queries, want %d (once, and only with crypto)", tc, q, b2i(tc.pageQuery))
		}
	}

	// The other page fields: failed self tests and going to
	// commissioning; a wrapped import method without the AES-XTS bit.
	page := cryptoPage(false, false, 0)
	prm.CryptoCap.FailedSelftests.Set(page, 0xbeef)
	prm.CryptoCap.WrappedCryptoGoingToCommissioning.Set(page, 1)
	prm.CryptoCap.WrappedImportMethod.Set(page, 0xfb)
	_, c := newCryptoDevice(t, func(b []byte) { prm.CmdHcaCap.Crypto.Set(b, 1) }, page)
	want := CryptoCaps{Flags: CryptoFlagCrypto | CryptoFlagWrappedGoingToCommissioning, FailedSelfTests: 0xbeef}
	if got, err := c.CryptoCaps(); err != nil || got != want {
		t.Errorf("CryptoCaps %+v, %v; want %+v", got, err, want)
	}

	// A crypto page that cannot be read leaves the general part alone, as
	// libmlx5 reports it: no login, plaintext keys.
	_, c = newCryptoDevice(t, cryptoCapsFull, nil)
	want = CryptoCaps{Flags: CryptoFlagCrypto, Engines: CryptoEngineAESXTSSingleBlock | CryptoEngineAESXTSMultiBlock}
	if got, err := c.CryptoCaps(); err != nil || got != want {
		t.Errorf("unreadable crypto page: %+v, %v; want %+v", got, err, want)
	}
	isErrno(t, "login with an unreadable crypto page", c.CryptoLogin(LoginOptions{Credential: make([]byte, 48)}), unix.EOPNOTSUPP)

	// General caps that cannot be read are an error, for the caps and
	// for what needs them.
	_, c = newCryptoDevice(t, cryptoCapsFull, nil)
	c.capsOnce.Do(func() { c.capsErr = unix.EIO })
	if _, err := c.CryptoCaps(); !errors.Is(err, unix.EIO) {
		t.Errorf("unreadable general caps: %v, want EIO", err)
	}
	if _, err := c.CreateCryptoLogin(LoginOptions{Credential: make([]byte, 48)}); !errors.Is(err, unix.EIO) {
		t.Errorf("login with unreadable general caps: %v, want EIO", err)
	}
}

// loginRig is a device with crypto, operational wrapped crypto and
// wrapped import.
func loginRig(t *testing.T) (*cryptoDevice, *Context) {
	return newCryptoDevice(t, cryptoCapsFull, cryptoPage(true, true, 20))
}

var credential = dekKey(48)

func TestCryptoLoginSession(t *testing.T) {
	d, c := loginRig(t)
	c.CryptoCaps()
	d.took()
	if st, err := c.CryptoLoginState(); err != nil || st != LoginNone {
		t.Errorf("state before login: %v, %v; want LoginNone", st, err)
	}
	isErrno(t, "logout before login", c.CryptoLogout(), unix.ENOENT)
	if cmds := d.took(); len(cmds) != 0 {
		t.Errorf("state and logout without a session sent %#x", cmds)
	}

	if err := c.CryptoLogin(LoginOptions{CredentialID: 0xabcdef, ImportKEKID: 0x123456, Credential: credential}); err != nil {
		t.Fatal(err)
	}
	in := d.sent[0]
	login := prm.CreateCryptoLoginObjIn.LoginObj
	if prm.GeneralObjInCmdHdr.ObjType.Get(in) != prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN ||
		prm.CryptoLoginObj.CredentialPointer.At(login).Get(in) != 0xabcdef ||
		prm.CryptoLoginObj.SessionImportKekPtr.At(login).Get(in) != 0x123456 ||
		!bytes.Equal(prm.CryptoLoginObj.Credential.At(login).Bytes(in), credential) {
		t.Errorf("CREATE_GENERAL_OBJECT(CRYPTO_LOGIN) %s", hex.EncodeToString(in))
	}
	d.took()
	isErrno(t, "second login", c.CryptoLogin(LoginOptions{Credential: credential}), unix.EEXIST)
	if cmds := d.took(); len(cmds) != 0 {
		t.Errorf("a second login sent %#x", cmds)
	}
	for _, tc := range []struct {
		state uint64
		want  LoginState
	}{{prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_VALID, LoginValid}, {prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_INVALID, LoginInvalid}} {
		d.state = tc.state
		if st, err := c.CryptoLoginState(); err != nil || st != tc.want {
			t.Errorf("state %d: %v, %v; want %v", tc.state, st, err, tc.want)
		}
	}
	d.state = 7
	isErrno(t, "unknown login state", func() error { _, err := c.CryptoLoginState(); return err }(), unix.EINVAL)
	if err := c.CryptoLogout(); err != nil {
		t.Fatal(err)
	}
	if d.live() != 0 {
		t.Errorf("logout left %d objects", d.live())
	}
	if st, err := c.CryptoLoginState(); err != nil || st != LoginNone {
		t.Errorf("state after logout: %v, %v", st, err)
	}
	isErrno(t, "second logout", c.CryptoLogout(), unix.ENOENT)

	// Context.Close ends the session, and the login objects.
	if err := c.CryptoLogin(LoginOptions{Credential: credential}); err != nil {
		t.Fatal(err)
	}
	l, err := c.CreateCryptoLogin(LoginOptions{Credential: credential[:40]})
	if err != nil {
		t.Fatal(err)
	}
	closeContext(t, d, c, l)
	for name, err := range map[string]error{
		"login":  c.CryptoLogin(LoginOptions{Credential: credential}),
		"logout": c.CryptoLogout(),
		"state":  func() error { _, err := c.CryptoLoginState(); return err }(),
		"create": func() error { _, err := c.CreateCryptoLogin(LoginOptions{Credential: credential}); return err }(),
		"query":  func() error { _, err := l.State(); return err }(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed context: %v, want ErrClosed", name, err)
		}
	}
}

func TestCryptoLoginObject(t *testing.T) {
	d, c := loginRig(t)
	l, err := c.CreateCryptoLogin(LoginOptions{CredentialID: 1, ImportKEKID: 2, Credential: []byte{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	// A short credential goes zero-padded into the 48-byte field.
	cred := prm.CryptoLoginObj.Credential.At(prm.CreateCryptoLoginObjIn.LoginObj).Bytes(d.sent[0])
	if want := append([]byte{1, 2, 3}, make([]byte, 45)...); !bytes.Equal(cred, want) {
		t.Errorf("credential field %x", cred)
	}
	d.state = prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_INVALID
	if st, err := l.State(); err != nil || st != LoginInvalid {
		t.Errorf("State %v, %v", st, err)
	}
	if st, _ := c.CryptoLoginState(); st != LoginNone {
		t.Errorf("a login object is not the session: %v", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if d.destroys != 1 {
		t.Errorf("%d destroys", d.destroys)
	}
	if _, err := l.State(); !errors.Is(err, ErrClosed) {
		t.Errorf("State after Close: %v", err)
	}
}

// Every rule libmlx5's crypto_login_create applies, and the credential
// length it does not check, refuse before anything is sent.
func TestCryptoLoginRefusals(t *testing.T) {
	ok := LoginOptions{Credential: credential}
	for _, tc := range []struct {
		name    string
		general func([]byte)
		page    []byte
		o       LoginOptions
		errno   unix.Errno
	}{
		{"no crypto", nil, cryptoPage(true, true, 0), ok, unix.EOPNOTSUPP},
		{"wrapped crypto not operational", cryptoCapsFull, cryptoPage(false, true, 0), ok, unix.EOPNOTSUPP},
		{"no login objects", func(b []byte) {
			cryptoCapsFull(b)
			prm.CmdHcaCap.GeneralObjTypes.Set(b, prm.CmdHcaCap.GeneralObjTypes.Get(b)&^(1<<prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN))
		}, cryptoPage(true, true, 0), ok, unix.EOPNOTSUPP},
		{"credential id of 25 bits", cryptoCapsFull, cryptoPage(true, true, 0), LoginOptions{CredentialID: 1 << 24, Credential: credential}, unix.EINVAL},
		{"import KEK id of 25 bits", cryptoCapsFull, cryptoPage(true, true, 0), LoginOptions{ImportKEKID: 1 << 24, Credential: credential}, unix.EINVAL},
		{"no credential", cryptoCapsFull, cryptoPage(true, true, 0), LoginOptions{}, unix.EINVAL},
		{"credential of 49 bytes", cryptoCapsFull, cryptoPage(true, true, 0), LoginOptions{Credential: make([]byte, 49)}, unix.EINVAL},
	} {
		d, c := newCryptoDevice(t, tc.general, tc.page)
		c.CryptoCaps()
		d.took()
		err := c.CryptoLogin(tc.o)
		isErrno(t, tc.name+": CryptoLogin", err, tc.errno)
		secretsAbsent(t, tc.name, err, tc.o.Credential)
		_, err = c.CreateCryptoLogin(tc.o)
		isErrno(t, tc.name+": CreateCryptoLogin", err, tc.errno)
		secretsAbsent(t, tc.name, err, tc.o.Credential)
		if cmds := d.took(); len(cmds) != 0 {
			t.Errorf("%s: sent %#x", tc.name, cmds)
		}
		if st, err := c.CryptoLoginState(); st != LoginNone || err != nil {
			t.Errorf("%s: a refused login left state %v, %v", tc.name, st, err)
		}
	}
}

// dekKey is key material of n bytes, none zero.
func dekKey(n int) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = byte(0xa0 + i%0x50)
	}
	return k
}

func TestCreateDEK(t *testing.T) {
	for _, tc := range []struct {
		name          string
		wrappedImport bool
		session       bool
		login         bool
		o             DEKOptions
		keyLen        int
	}{
		{"plaintext 128", false, false, false, DEKOptions{KeyBits: 128, Plaintext: true}, 32},
		{"plaintext 256", false, false, false, DEKOptions{KeyBits: 256, Plaintext: true}, 64},
		{"plaintext 128 keytag", false, false, false, DEKOptions{KeyBits: 128, Plaintext: true, HasKeytag: true}, 40},
		{"plaintext 256 keytag", false, false, false, DEKOptions{KeyBits: 256, Plaintext: true, HasKeytag: true}, 72},
		{"login object 128", true, false, true, DEKOptions{KeyBits: 128}, 40},
		{"login object 256 keytag", true, false, true, DEKOptions{KeyBits: 256, HasKeytag: true}, 80},
		{"session 256", true, true, false, DEKOptions{KeyBits: 256}, 72},
		{"session 128 keytag", true, true, false, DEKOptions{KeyBits: 128, HasKeytag: true}, 48},
	} {
		d, c := newCryptoDevice(t, cryptoCapsFull, cryptoPage(true, tc.wrappedImport, 20))
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		o := tc.o
		if tc.session {
			if err := c.CryptoLogin(LoginOptions{Credential: credential}); err != nil {
				t.Fatal(err)
			}
		}
		if tc.login {
			if o.Login, err = c.CreateCryptoLogin(LoginOptions{Credential: credential}); err != nil {
				t.Fatal(err)
			}
		}
		o.Opaque = [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
		o.Key = dekKey(tc.keyLen)
		dek, err := pd.CreateDEK(o)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		in := d.sent[len(d.sent)-1]
		key := prm.CreateEncryptionKeyIn.EncryptionKeyObject
		size := uint64(b2i(o.KeyBits == 256))
		if prm.GeneralObjInCmdHdr.ObjType.Get(in) != prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY ||
			prm.EncryptionKeyObj.KeySize.At(key).Get(in) != size ||
			prm.EncryptionKeyObj.HasKeytag.At(key).Get(in) != uint64(b2i(o.HasKeytag)) ||
			prm.EncryptionKeyObj.KeyType.At(key).Get(in) != prm.MLX5_ENCRYPTION_KEY_OBJ_KEY_PURPOSE_AES_XTS ||
			prm.EncryptionKeyObj.Pd.At(key).Get(in) != uint64(pd.PDN()) ||
			!bytes.Equal(prm.EncryptionKeyObj.Opaque.At(key).Bytes(in), o.Opaque[:]) ||
			!bytes.Equal(prm.EncryptionKeyObj.Key.At(key).Bytes(in), append(dekKey(tc.keyLen), make([]byte, 128-tc.keyLen)...)) {
			t.Errorf("%s: CREATE_GENERAL_OBJECT(DEK) %s", tc.name, hex.EncodeToString(in))
		}
		if len(in) != 272 {
			t.Errorf("%s: %d-byte mailbox, libmlx5's is 272", tc.name, len(in))
		}

		d.state, d.opaque = prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_ERROR, []byte("metadata")
		info, err := dek.Query()
		if err != nil || info.State != DEKError || string(info.Opaque[:]) != "metadata" {
			t.Errorf("%s: Query %+v, %v", tc.name, info, err)
		}
		if dek.state != DEKError {
			t.Errorf("%s: Query left the DEK's state %v", tc.name, dek.state)
		}
		d.state = 9
		if _, err := dek.Query(); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: unknown DEK state: %v, want EINVAL", tc.name, err)
		}
		d.state = prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_READY
		if info, err := dek.Query(); err != nil || info.State != DEKReady || dek.state != DEKReady {
			t.Errorf("%s: Query %+v, %v", tc.name, info, err)
		}
		before := d.destroys
		if err := dek.Close(); err != nil {
			t.Fatal(err)
		}
		if err := dek.Close(); err != nil {
			t.Errorf("%s: second Close: %v", tc.name, err)
		}
		if d.destroys != before+1 {
			t.Errorf("%s: %d destroys", tc.name, d.destroys-before)
		}
		if _, err := dek.Query(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: Query after Close: %v", tc.name, err)
		}
	}
}

func TestCreateDEKClosedWithContext(t *testing.T) {
	d, c := newCryptoDevice(t, cryptoCapsFull, cryptoPage(true, false, 20))
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	dek, err := pd.CreateDEK(DEKOptions{KeyBits: 128, Plaintext: true, Key: dekKey(32)})
	if err != nil {
		t.Fatal(err)
	}
	closeContext(t, d, c, dek)
}

// closeContext closes c, which must destroy every crypto object of d;
// closing objs after must then succeed.
func closeContext(t *testing.T, d *cryptoDevice, c *Context, objs ...child) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d.live() != 0 {
		t.Errorf("Context.Close left %d crypto objects", d.live())
	}
	for _, o := range objs {
		if err := o.Close(); err != nil {
			t.Errorf("%T.Close after Context.Close: %v", o, err)
		}
	}
}

// Every refusal of CreateDEK comes before anything is sent.
func TestCreateDEKRefusals(t *testing.T) {
	_, other := loginRig(t)
	foreign, err := other.CreateCryptoLogin(LoginOptions{Credential: credential})
	if err != nil {
		t.Fatal(err)
	}
	type rig struct {
		general func([]byte)
		page    []byte
		session bool
	}
	plain := rig{cryptoCapsFull, cryptoPage(true, false, 20), false}
	wrapped := rig{cryptoCapsFull, cryptoPage(true, true, 20), false}
	for _, tc := range []struct {
		name  string
		rig   rig
		o     func(c *Context) DEKOptions
		errno unix.Errno
	}{
		{"no engine", rig{func(b []byte) {
			cryptoCapsFull(b)
			prm.CmdHcaCap.AesXtsSingleBlockLeTweak.Set(b, 0)
			prm.CmdHcaCap.AesXtsMultiBlockBeTweak.Set(b, 0)
		}, plain.page, false}, func(*Context) DEKOptions { return DEKOptions{KeyBits: 128, Plaintext: true, Key: dekKey(32)} }, unix.EOPNOTSUPP},
		{"no DEK objects", rig{func(b []byte) {
			cryptoCapsFull(b)
			prm.CmdHcaCap.GeneralObjTypes.Set(b, prm.CmdHcaCap.GeneralObjTypes.Get(b)&^(1<<prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY))
		}, plain.page, false}, func(*Context) DEKOptions { return DEKOptions{KeyBits: 128, Plaintext: true, Key: dekKey(32)} }, unix.EOPNOTSUPP},
		{"192-bit keys", plain, func(*Context) DEKOptions { return DEKOptions{KeyBits: 192, Plaintext: true, Key: dekKey(48)} }, unix.EINVAL},
		{"zero key bits", plain, func(*Context) DEKOptions { return DEKOptions{Plaintext: true} }, unix.EINVAL},
		{"plaintext on a wrapped-only device", wrapped, func(*Context) DEKOptions { return DEKOptions{KeyBits: 128, Plaintext: true, Key: dekKey(32)} }, unix.EINVAL},
		{"wrapped on a plaintext device", rig{plain.general, plain.page, false}, func(c *Context) DEKOptions {
			return DEKOptions{KeyBits: 128, Key: dekKey(40)}
		}, unix.EINVAL},
		{"session without a login", wrapped, func(*Context) DEKOptions { return DEKOptions{KeyBits: 128, Key: dekKey(40)} }, unix.EINVAL},
		{"login with plaintext", wrapped, func(c *Context) DEKOptions {
			l, _ := c.CreateCryptoLogin(LoginOptions{Credential: credential})
			return DEKOptions{KeyBits: 128, Plaintext: true, Login: l, Key: dekKey(32)}
		}, unix.EINVAL},
		{"closed login", wrapped, func(c *Context) DEKOptions {
			l, _ := c.CreateCryptoLogin(LoginOptions{Credential: credential})
			l.Close()
			return DEKOptions{KeyBits: 128, Login: l, Key: dekKey(40)}
		}, 0},
		{"zero login", wrapped, func(*Context) DEKOptions { return DEKOptions{KeyBits: 128, Login: &CryptoLoginObj{}, Key: dekKey(40)} }, unix.EINVAL},
		{"foreign login", wrapped, func(*Context) DEKOptions { return DEKOptions{KeyBits: 128, Login: foreign, Key: dekKey(40)} }, unix.EINVAL},
		{"plaintext key 8 bytes short", plain, func(*Context) DEKOptions { return DEKOptions{KeyBits: 256, Plaintext: true, Key: dekKey(56)} }, unix.EINVAL},
		{"plaintext key with the wrap's 8 bytes", plain, func(*Context) DEKOptions { return DEKOptions{KeyBits: 128, Plaintext: true, Key: dekKey(40)} }, unix.EINVAL},
		{"keytag missing", plain, func(*Context) DEKOptions {
			return DEKOptions{KeyBits: 128, HasKeytag: true, Plaintext: true, Key: dekKey(32)}
		}, unix.EINVAL},
		{"wrapped key unwrapped", rig{wrapped.general, wrapped.page, true}, func(*Context) DEKOptions { return DEKOptions{KeyBits: 256, Key: dekKey(64)} }, unix.EINVAL},
		{"key of 129 bytes", rig{wrapped.general, wrapped.page, true}, func(*Context) DEKOptions { return DEKOptions{KeyBits: 256, Key: dekKey(129)} }, unix.EINVAL},
		{"no key", plain, func(*Context) DEKOptions { return DEKOptions{KeyBits: 256, Plaintext: true} }, unix.EINVAL},
	} {
		d, c := newCryptoDevice(t, tc.rig.general, tc.rig.page)
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		if tc.rig.session {
			if err := c.CryptoLogin(LoginOptions{Credential: credential}); err != nil {
				t.Fatal(err)
			}
		}
		o := tc.o(c)
		c.CryptoCaps() // libmlx5 reads them at open
		d.took()
		dek, err := pd.CreateDEK(o)
		if dek != nil {
			t.Errorf("%s: a DEK", tc.name)
		}
		if tc.errno == 0 {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s: %v, want ErrClosed", tc.name, err)
			}
		} else {
			isErrno(t, tc.name, err, tc.errno)
		}
		if cmds := d.took(); len(cmds) != 0 {
			t.Errorf("%s: sent %#x", tc.name, cmds)
		}
		secretsAbsent(t, tc.name, err, o.Key)
	}

	// A closed PD, a nil one, and a zero one.
	_, c := newCryptoDevice(t, plain.general, plain.page)
	pd, _ := c.AllocPD()
	pd.Close()
	if _, err := pd.CreateDEK(DEKOptions{KeyBits: 128, Plaintext: true, Key: dekKey(32)}); !errors.Is(err, ErrClosed) {
		t.Errorf("closed PD: %v", err)
	}
	for _, p := range []*PD{nil, {}} {
		if _, err := p.CreateDEK(DEKOptions{KeyBits: 128, Plaintext: true, Key: dekKey(32)}); !errors.Is(err, ErrInvalid) {
			t.Errorf("PD %p: %v", p, err)
		}
	}
}

// secretsAbsent fails t if err, printed every way, shows the key (or its
// hex), or if the key was changed.
func secretsAbsent(t *testing.T, what string, err error, key []byte) {
	t.Helper()
	if len(key) < 8 {
		return
	}
	for _, s := range []string{fmt.Sprint(err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), fmt.Sprintf("%x", err), fmt.Sprintf("%q", err)} {
		for _, k := range []string{string(key[:8]), hex.EncodeToString(key[:8]), fmt.Sprintf("%x", key[:8]), fmt.Sprint(key[:8])[1:12]} {
			if strings.Contains(s, k) {
				t.Errorf("%s: the error shows the key: %s", what, s)
			}
		}
	}
}

// allZero reports whether b holds only zeros.
func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// Key material is a secret: the mailboxes mlx5 builds and hands the seam
// (the very slices, which the kernel device passes to the ioctl by
// pointer) are zero once the call returns, on success and on a firmware
// refusal; query outputs that could hold the key are zeroed too; the
// caller's bytes are left as they were; no error shows them.
func TestKeyMaterialZeroed(t *testing.T) {
	for _, fail := range []bool{false, true} {
		d, c := loginRig(t)
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		if fail {
			d.status = prm.MLX5_CMD_STAT_BAD_PARAM_ERR
		}
		cred := bytes.Repeat([]byte{0x5a, 0xc3}, 24)
		key := dekKey(80)
		check := func(what string, err error, secret []byte, keep []byte) {
			t.Helper()
			if fail {
				var ferr *prm.CmdError
				if !errors.As(err, &ferr) || !errors.Is(err, unix.EINVAL) || ferr.Syndrome != 0x5ec2e7 {
					t.Errorf("%s refused by the firmware: %v, want its status, syndrome and libmlx5's EINVAL", what, err)
				}
			} else if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			n := len(d.creates) - 1
			if !bytes.Contains(d.sent[n], secret) {
				t.Fatalf("%s: the device never saw the secret", what)
			}
			if !allZero(d.creates[n]) {
				t.Errorf("%s (firmware failure %v): the mailbox still holds %x", what, fail, d.creates[n])
			}
			if !bytes.Equal(secret, keep) {
				t.Errorf("%s: the caller's secret changed", what)
			}
			secretsAbsent(t, what, err, secret)
		}
		err = c.CryptoLogin(LoginOptions{Credential: cred})
		check("CryptoLogin", err, cred, bytes.Clone(cred))
		_, err = c.CreateCryptoLogin(LoginOptions{Credential: cred})
		check("CreateCryptoLogin", err, cred, bytes.Clone(cred))
		d.status = 0
		l, err := c.CreateCryptoLogin(LoginOptions{Credential: cred})
		if err != nil {
			t.Fatal(err)
		}
		if fail {
			d.status = prm.MLX5_CMD_STAT_BAD_PARAM_ERR
		}
		_, err = pd.CreateDEK(DEKOptions{KeyBits: 256, HasKeytag: true, Login: l, Key: key})
		check("CreateDEK", err, key, dekKey(80))
		if fail {
			continue
		}

		// A device that answered the key to a query (none should) leaves
		// no copy either.
		d.echoKey = true
		dek, err := pd.CreateDEK(DEKOptions{KeyBits: 256, HasKeytag: true, Login: l, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dek.Query(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.State(); err != nil {
			t.Fatal(err)
		}
		for i, out := range d.queries {
			if !allZero(out) {
				t.Errorf("query output %d still holds %x", i, out)
			}
		}
	}
}

// Options print without their secrets, whatever the verb.
func TestSecretOptionsRedacted(t *testing.T) {
	key, cred := dekKey(72), bytes.Repeat([]byte{0x5a, 0xc3}, 24)
	for _, v := range []any{
		DEKOptions{KeyBits: 256, HasKeytag: true, Plaintext: true, Key: key, Opaque: [8]byte{'o'}},
		&DEKOptions{KeyBits: 256, Key: key, Login: &CryptoLoginObj{}},
		LoginOptions{CredentialID: 7, Credential: cred},
		&LoginOptions{Credential: cred},
		struct{ O DEKOptions }{DEKOptions{Key: key}},
		[]LoginOptions{{Credential: cred}},
	} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%q", "%d"} {
			s := fmt.Sprintf(verb, v)
			for _, secret := range [][]byte{key, cred} {
				for _, form := range []string{string(secret[:8]), hex.EncodeToString(secret[:8]), strings.ToUpper(hex.EncodeToString(secret[:8])),
					fmt.Sprint(secret[:4])[1:12], fmt.Sprintf("%#x", secret[0])} {
					if strings.Contains(s, form) {
						t.Errorf("%s of %T shows a secret (%q): %s", verb, v, form, s)
					}
				}
			}
			if !strings.Contains(s, "redacted") {
				t.Errorf("%s of %T: %s", verb, v, s)
			}
		}
	}
	if s := fmt.Sprint(DEKOptions{KeyBits: 128, Opaque: [8]byte{1}}); !strings.Contains(s, "KeyBits: 128") || !strings.Contains(s, "Key: nil") {
		t.Errorf("DEKOptions prints %s", s)
	}
}
