package mlx5

import (
	"fmt"
	"io"
	"sync"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"golang.org/x/sys/unix"
)

// CryptoEngines is a set of AES-XTS engines (mlx5dv_crypto_caps'
// crypto_engines).
type CryptoEngines uint8

const (
	// CryptoEngineAESXTS is MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS, which
	// libmlx5 44.0 defines but never reports.
	CryptoEngineAESXTS CryptoEngines = 1 << iota
	// CryptoEngineAESXTSSingleBlock: an mkey may hold at most one data
	// unit.
	CryptoEngineAESXTSSingleBlock
	// CryptoEngineAESXTSMultiBlock: an mkey may hold many data units; the
	// device takes the initial tweak big-endian.
	CryptoEngineAESXTSMultiBlock
)

// CryptoWrappedImport is a set of wrapped import methods
// (mlx5dv_crypto_caps' wrapped_import_method).
type CryptoWrappedImport uint8

// CryptoWrappedImportAESXTS: AES-XTS keys must be imported wrapped, by a
// crypto login.
const CryptoWrappedImportAESXTS CryptoWrappedImport = 1 << 0

// CryptoFlags are mlx5dv_crypto_caps' flags.
type CryptoFlags uint32

const (
	// CryptoFlagCrypto: the device has crypto offload.
	CryptoFlagCrypto CryptoFlags = 1 << iota
	// CryptoFlagWrappedOperational: wrapped crypto is operational.
	CryptoFlagWrappedOperational
	// CryptoFlagWrappedGoingToCommissioning: wrapped crypto goes to
	// commissioning at the next reset.
	CryptoFlagWrappedGoingToCommissioning
)

// CryptoCaps are the device's crypto capabilities (mlx5dv_query_device's
// crypto_caps), derived from the HCA caps as libmlx5 44.0 derives them
// (Context.CryptoCaps).
type CryptoCaps struct {
	// FailedSelfTests is nonzero when self tests failed.
	FailedSelfTests uint16
	Engines         CryptoEngines
	WrappedImport   CryptoWrappedImport
	// LogMaxDEKs is log2 of the most DEKs the device holds.
	LogMaxDEKs uint8
	Flags      CryptoFlags
}

// CryptoCaps returns the device's crypto capabilities, read once per
// context as libmlx5 44.0's mlx5_query_device_ctx reads them: Flags'
// CryptoFlagCrypto and the Engines from the general caps (cmd_hca_cap's
// crypto, aes_xts_single_block_le_tweak and aes_xts_multi_block_be_tweak,
// the multi-block engine implying the single-block one); then, only on a
// device with crypto, the crypto capability page (QUERY_HCA_CAP of
// MLX5_CAP_CRYPTO) for the wrapped flags, WrappedImport (the AES-XTS
// method bit of wrapped_import_method), LogMaxDEKs and FailedSelfTests.
//
// An error means the general caps could not be read (libmlx5 then
// reports no crypto caps; SigCaps fails the same way). A crypto page that
// cannot be read is ignored, as libmlx5 ignores it: the caps are then the
// general part alone (CryptoFlagCrypto and the Engines), so no login is
// accepted and keys are imported in plaintext.
func (c *Context) CryptoCaps() (CryptoCaps, error) {
	const op = "query crypto caps"
	if err := c.checkOpen(op); err != nil {
		return CryptoCaps{}, err
	}
	caps, _, err := c.cryptoCaps()
	if err != nil {
		return CryptoCaps{}, wrapAs(op, c.name, "", err)
	}
	return caps, nil
}

// cryptoState is a context's crypto: its caps, read once, and the
// context-wide login session.
type cryptoState struct {
	once sync.Once
	caps CryptoCaps
	// objTypes is the general caps' general_obj_types: bit n set when the
	// device has general objects of type n.
	objTypes uint64
	err      error

	// mu orders CryptoLogin, CryptoLoginState and CryptoLogout, as
	// libmlx5's crypto_login_mutex does.
	mu      sync.Mutex
	session *CryptoLoginObj
}

// cryptoCaps returns the crypto caps and the general object types, read
// once.
func (c *Context) cryptoCaps() (CryptoCaps, uint64, error) {
	cr := &c.cr
	cr.once.Do(func() {
		general, err := c.generalCaps()
		if err != nil {
			cr.err = err
			return
		}
		cr.caps = cryptoCapsOf(general, nil)
		cr.objTypes = prm.CmdHcaCap.GeneralObjTypes.Get(general)
		if cr.caps.Flags&CryptoFlagCrypto == 0 {
			return
		}
		if page, err := c.QueryHCACap(prm.MLX5_CAP_CRYPTO, true); err == nil {
			cr.caps = cryptoCapsOf(general, page)
		}
	})
	return cr.caps, cr.objTypes, cr.err
}

// cryptoCapsOf derives the crypto caps from the general caps (cmd_hca_cap)
// and the crypto page (crypto_cap; nil if it was not read), as libmlx5
// 44.0's get_hca_general_caps and get_crypto_caps (providers/mlx5
// verbs.c) do. The page is read only with the general caps' crypto bit.
func cryptoCapsOf(general, page []byte) CryptoCaps {
	var c CryptoCaps
	if prm.CmdHcaCap.Crypto.Get(general) != 0 {
		c.Flags |= CryptoFlagCrypto
	}
	if prm.CmdHcaCap.AesXtsSingleBlockLeTweak.Get(general) != 0 {
		c.Engines |= CryptoEngineAESXTSSingleBlock
	}
	if prm.CmdHcaCap.AesXtsMultiBlockBeTweak.Get(general) != 0 {
		c.Engines |= CryptoEngineAESXTSSingleBlock | CryptoEngineAESXTSMultiBlock
	}
	if page == nil || c.Flags&CryptoFlagCrypto == 0 {
		return c
	}
	if prm.CryptoCap.WrappedCryptoOperational.Get(page) != 0 {
		c.Flags |= CryptoFlagWrappedOperational
	}
	if prm.CryptoCap.WrappedCryptoGoingToCommissioning.Get(page) != 0 {
		c.Flags |= CryptoFlagWrappedGoingToCommissioning
	}
	if prm.CryptoCap.WrappedImportMethod.Get(page)&prm.MLX5_CRYPTO_CAPS_WRAPPED_IMPORT_METHOD_AES != 0 {
		c.WrappedImport |= CryptoWrappedImportAESXTS
	}
	c.LogMaxDEKs = uint8(prm.CryptoCap.LogMaxNumDeks.Get(page))
	c.FailedSelfTests = uint16(prm.CryptoCap.FailedSelftests.Get(page))
	return c
}

// LoginState is the state of a crypto login (enum
// mlx5dv_crypto_login_state).
type LoginState int

const (
	LoginNone    LoginState = iota // MLX5DV_CRYPTO_LOGIN_STATE_NO_LOGIN
	LoginValid                     // MLX5DV_CRYPTO_LOGIN_STATE_VALID
	LoginInvalid                   // MLX5DV_CRYPTO_LOGIN_STATE_INVALID
)

var loginStateNames = [...]string{LoginNone: "no login", LoginValid: "valid", LoginInvalid: "invalid"}

func (s LoginState) String() string {
	if s >= 0 && int(s) < len(loginStateNames) {
		return loginStateNames[s]
	}
	return fmt.Sprintf("LoginState(%d)", int(s))
}

// maxCredential is the size of crypto_login_obj's credential field, and
// of mlx5dv_crypto_login_attr's credential.
const maxCredential = 48

// LoginOptions are what a crypto login presents to the device
// (mlx5dv_crypto_login_attr, mlx5dv_crypto_login_attr_ex). Printed with
// fmt, they show the ids and the credential's length, never the
// credential (fmt cannot call their methods when they are an unexported
// field of another struct: it then prints the bytes).
type LoginOptions struct {
	// CredentialID names the credential stored on the device (24 bits).
	CredentialID uint32
	// ImportKEKID names the import KEK stored on the device (24 bits).
	ImportKEKID uint32
	// Credential is the credential, wrapped (AES key wrap) by the import
	// KEK: 1 to 48 bytes, sent zero-padded to 48. It is a secret: mlx5
	// reads it and zeroes every copy it makes once the command returns.
	Credential []byte
}

// String shows the ids and the credential's length.
func (o LoginOptions) String() string {
	return fmt.Sprintf("LoginOptions{CredentialID: %#x, ImportKEKID: %#x, Credential: %s}",
		o.CredentialID, o.ImportKEKID, redacted(o.Credential))
}

// GoString is String: the credential is never printed.
func (o LoginOptions) GoString() string { return o.String() }

// Format prints String for every verb, so that no verb (%x, %d, %#v)
// shows the credential.
func (o LoginOptions) Format(f fmt.State, _ rune) {
	if f != nil {
		io.WriteString(f, o.String())
	}
}

// redacted describes secret bytes by their length only.
func redacted(b []byte) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprintf("[%d bytes redacted]", len(b))
}

// checkLogin applies libmlx5 44.0's crypto_login_create rules to a login
// on c: a device with crypto whose wrapped crypto is operational
// (EOPNOTSUPP), crypto login general objects (EOPNOTSUPP), 24-bit ids
// (EINVAL); and one libmlx5 lacks: a credential of 1 to 48 bytes
// (libmlx5 copies credential_len bytes into the 48-byte field, whatever
// the length).
func (c *Context) checkLogin(op string, o LoginOptions) error {
	caps, objTypes, err := c.cryptoCaps()
	if err != nil {
		return wrapAs(op, c.name, "", err)
	}
	switch {
	case caps.Flags&CryptoFlagCrypto == 0:
		return unsupported(op, c.name, "the device has no crypto offload")
	case caps.Flags&CryptoFlagWrappedOperational == 0:
		return unsupported(op, c.name, "the device's wrapped crypto is not operational: a login needs it")
	case objTypes&(1<<prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN) == 0:
		return unsupported(op, c.name, "the device has no crypto login objects (general_obj_types)")
	case o.CredentialID > 0xffffff:
		return invalid(op, c.name, "credential id %#x is wider than 24 bits", o.CredentialID)
	case o.ImportKEKID > 0xffffff:
		return invalid(op, c.name, "import KEK id %#x is wider than 24 bits", o.ImportKEKID)
	case len(o.Credential) == 0 || len(o.Credential) > maxCredential:
		return invalid(op, c.name, "a credential of %d bytes: 1 to %d", len(o.Credential), maxCredential)
	}
	return nil
}

// createLogin creates a CRYPTO_LOGIN general object on c, a child of c
// that Context.Close destroys.
func (c *Context) createLogin(op string, o LoginOptions) (*CryptoLoginObj, error) {
	if err := c.checkLogin(op, o); err != nil {
		return nil, err
	}
	in := mailbox(prm.CreateCryptoLoginObjIn.Layout().Size, prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT)
	defer clear(in) // it holds the credential
	prm.GeneralObjInCmdHdr.ObjType.At(prm.CreateCryptoLoginObjIn.Hdr).Set(in, prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN)
	login := prm.CreateCryptoLoginObjIn.LoginObj
	prm.CryptoLoginObj.CredentialPointer.At(login).Set(in, uint64(o.CredentialID))
	prm.CryptoLoginObj.SessionImportKekPtr.At(login).Set(in, uint64(o.ImportKEKID))
	copy(prm.CryptoLoginObj.Credential.At(login).Bytes(in), o.Credential)
	out := make([]byte, prm.GeneralObjOutCmdHdr.Layout().Size)
	obj, err := c.createObj(op, in, out)
	if err != nil {
		return nil, withStatusErrno(err)
	}
	id := uint32(prm.GeneralObjOutCmdHdr.ObjId.Get(out))
	l := &CryptoLoginObj{c: c, obj: obj, id: id, name: fmt.Sprintf("crypto login %#x", id)}
	if err := c.adopt(l); err != nil {
		l.Close()
		return nil, opErr(op, c.name, err)
	}
	return l, nil
}

// CryptoLogin logs the context in to the device's crypto engine
// (mlx5dv_crypto_login): the context-wide session through which PD.CreateDEK
// imports wrapped keys when DEKOptions names neither a login object nor
// Plaintext. A context has at most one session: a second login fails
// with EEXIST before anything is sent. The login is refused as
// CreateCryptoLogin refuses one. Context.Close ends the session.
func (c *Context) CryptoLogin(o LoginOptions) error {
	const op = "crypto login"
	return c.withSession(op, func(cr *cryptoState) error {
		if cr.session != nil {
			return opErr(op, c.name, fmt.Errorf("the context is logged in already (%s): %w", cr.session.name, unix.EEXIST))
		}
		l, err := c.createLogin(op, o)
		if err == nil {
			cr.session = l
		}
		return err
	})
}

// CryptoLoginState reports the state of the context-wide session
// (mlx5dv_crypto_login_query_state): LoginNone, without a command, when
// the context is not logged in; else the state the device reports.
func (c *Context) CryptoLoginState() (LoginState, error) {
	const op = "query crypto login"
	st := LoginNone
	err := c.withSession(op, func(cr *cryptoState) error {
		if cr.session == nil {
			return nil
		}
		var err error
		st, err = cr.session.state(op)
		return err
	})
	return st, err
}

// CryptoLogout ends the context-wide session (mlx5dv_crypto_logout). It
// fails with ENOENT, without a command, when the context is not logged
// in. DEKs imported through the session stay usable.
func (c *Context) CryptoLogout() error {
	const op = "crypto logout"
	return c.withSession(op, func(cr *cryptoState) error {
		if cr.session == nil {
			return opErr(op, c.name, fmt.Errorf("the context is not logged in: %w", unix.ENOENT))
		}
		if err := cr.session.destroy(op); err != nil {
			return err
		}
		cr.session = nil
		return nil
	})
}

// withSession runs f on an open context with its session's lock held.
func (c *Context) withSession(op string, f func(*cryptoState) error) error {
	if err := c.checkOpen(op); err != nil {
		return err
	}
	c.cr.mu.Lock()
	defer c.cr.mu.Unlock()
	return f(&c.cr)
}

// loggedIn reports whether the context has a session.
func (c *Context) loggedIn() bool {
	c.cr.mu.Lock()
	defer c.cr.mu.Unlock()
	return c.cr.session != nil
}

// CryptoLoginObj is a crypto login object (mlx5dv_crypto_login_obj),
// through which PD.CreateDEK imports wrapped keys (DEKOptions.Login).
type CryptoLoginObj struct {
	c    *Context
	obj  *DevxObj
	id   uint32
	name string

	mu     sync.Mutex
	closed bool
}

// CreateCryptoLogin creates a crypto login object
// (mlx5dv_crypto_login_create). It needs a device with crypto whose
// wrapped crypto is operational and that has crypto login objects
// (ErrUnsupported, EOPNOTSUPP); ids of 24 bits and a credential of 1 to
// 48 bytes (ErrInvalid, EINVAL). A firmware refusal carries its status
// and syndrome, and the errno libmlx5 returns for it. Context.Close
// destroys the object.
func (c *Context) CreateCryptoLogin(o LoginOptions) (*CryptoLoginObj, error) {
	const op = "create crypto login"
	if err := c.checkOpen(op); err != nil {
		return nil, err
	}
	return c.createLogin(op, o)
}

// State queries the login object's state (mlx5dv_crypto_login_query):
// LoginValid or LoginInvalid; a state the device reports beyond those is
// EINVAL, as in libmlx5.
func (l *CryptoLoginObj) State() (LoginState, error) {
	const op = "query crypto login"
	if l == nil || l.c == nil {
		return LoginNone, unusable(op, "CryptoLoginObj", "Context.CreateCryptoLogin", l == nil)
	}
	return l.state(op)
}

func (l *CryptoLoginObj) state(op string) (LoginState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return LoginNone, opErr(op, l.name, ErrClosed)
	}
	in := mailbox(prm.GeneralObjInCmdHdr.Layout().Size, prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT)
	prm.GeneralObjInCmdHdr.ObjType.Set(in, prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN)
	prm.GeneralObjInCmdHdr.ObjId.Set(in, uint64(l.id))
	out := make([]byte, prm.QueryCryptoLoginObjOut.Layout().Size)
	defer clear(out) // the object's credential field
	if err := l.c.queryObj(op, l.name, l.obj.handle, in, out); err != nil {
		return LoginNone, withStatusErrno(err)
	}
	switch st := prm.CryptoLoginObj.State.At(prm.QueryCryptoLoginObjOut.Obj).Get(out); st {
	case prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_VALID:
		return LoginValid, nil
	case prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_INVALID:
		return LoginInvalid, nil
	default:
		return LoginNone, opErr(op, l.name, fmt.Errorf("the device reports login state %d: %w", st, unix.EINVAL))
	}
}

// Close destroys the login object (mlx5dv_crypto_login_destroy). DEKs
// imported through it stay usable. Closing twice is safe. The object of
// the context-wide session is closed by CryptoLogout.
func (l *CryptoLoginObj) Close() error {
	const op = "destroy crypto login"
	if l == nil || l.c == nil {
		return unusable(op, "CryptoLoginObj", "Context.CreateCryptoLogin", l == nil)
	}
	return l.destroy(op)
}

func (l *CryptoLoginObj) destroy(op string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	if err := l.obj.Close(); err != nil {
		return wrapAs(op, l.name, "", err)
	}
	l.closed = true
	l.c.forget(l)
	return nil
}

// usableBy reports why a login object cannot import a DEK on c: nil, not
// made by CreateCryptoLogin, another context's, or closed.
func (l *CryptoLoginObj) usableBy(op string, c *Context) error {
	if l == nil || l.c == nil {
		return unusable(op, "CryptoLoginObj", "Context.CreateCryptoLogin", l == nil)
	}
	if l.c != c {
		return invalid(op, l.name, "the login object is another context's")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return opErr(op, l.name, ErrClosed)
	}
	return nil
}

// SigCryptoOrder is the order of signature and crypto on TX (enum
// mlx5dv_signature_crypto_order); the reverse on RX.
type SigCryptoOrder int

const (
	// SigAfterCryptoOnTx: on TX, crypto on memory data, then the
	// signature.
	SigAfterCryptoOnTx SigCryptoOrder = iota
	// SigBeforeCryptoOnTx: on TX, the signature, then crypto.
	SigBeforeCryptoOnTx
)

// CryptoAttr is an mkey configure's crypto (mlx5dv_crypto_attr, AES-XTS:
// the only standard).
type CryptoAttr struct {
	// EncryptOnTx: memory data is encrypted on TX and wire data decrypted
	// on RX; without it, memory holds ciphertext: decrypted on TX,
	// encrypted on RX.
	EncryptOnTx bool
	// Order places the signature against crypto; it matters only with a
	// signature block.
	Order SigCryptoOrder
	// DataUnitSize is the AES-XTS data unit, after each of which the
	// tweak is incremented.
	DataUnitSize sig.BlockSize
	// InitialTweak is the first data unit's tweak, little-endian (for
	// storage, the LBA of the first block).
	InitialTweak [16]byte
	// DEK is the key; it must be ready, of the mkey's PD and context.
	DEK *DEK
	// Keytag is nil or 8 bytes, and must be given when the DEK has a
	// keytag: the device fails traffic when it differs from the DEK's.
	// For a DEK without one it is written as given and not compared.
	Keytag []byte
}
