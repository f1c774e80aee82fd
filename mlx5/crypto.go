package mlx5

import (
	"sync"

	"github.com/mlx5go/mlx5go/sig"
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
// crypto_caps), derived from the HCA caps as libmlx5 44.0 derives them.
type CryptoCaps struct {
	// FailedSelfTests is nonzero when self tests failed.
	FailedSelfTests uint16
	Engines         CryptoEngines
	WrappedImport   CryptoWrappedImport
	// LogMaxDEKs is log2 of the most DEKs the device holds.
	LogMaxDEKs uint8
	Flags      CryptoFlags
}

// CryptoCaps queries the device's crypto capabilities.
func (c *Context) CryptoCaps() (CryptoCaps, error) {
	return CryptoCaps{}, c.todo("query crypto caps")
}

// LoginState is the state of a crypto login (enum
// mlx5dv_crypto_login_state).
type LoginState int

const (
	LoginNone    LoginState = iota // MLX5DV_CRYPTO_LOGIN_STATE_NO_LOGIN
	LoginValid                     // MLX5DV_CRYPTO_LOGIN_STATE_VALID
	LoginInvalid                   // MLX5DV_CRYPTO_LOGIN_STATE_INVALID
)

// LoginOptions are what a crypto login presents to the device
// (mlx5dv_crypto_login_attr, mlx5dv_crypto_login_attr_ex).
type LoginOptions struct {
	// CredentialID names the credential stored on the device (24 bits).
	CredentialID uint32
	// ImportKEKID names the import KEK stored on the device (24 bits).
	ImportKEKID uint32
	// Credential is the credential, wrapped (AES key wrap) by the import
	// KEK: 1 to 48 bytes. It is a secret.
	Credential []byte
}

// CryptoLogin logs the context in to the device's crypto engine
// (mlx5dv_crypto_login): the context-wide session that wrapped DEKs
// without a CryptoLoginObj use.
func (c *Context) CryptoLogin(o LoginOptions) error { return c.todo("crypto login") }

// CryptoLoginState reports the state of the context-wide session
// (mlx5dv_crypto_login_query_state).
func (c *Context) CryptoLoginState() (LoginState, error) {
	return LoginNone, c.todo("query crypto login")
}

// CryptoLogout ends the context-wide session (mlx5dv_crypto_logout).
func (c *Context) CryptoLogout() error { return c.todo("crypto logout") }

// CryptoLoginObj is a crypto login object (mlx5dv_crypto_login_obj).
type CryptoLoginObj struct {
	c      *Context
	obj    *DevxObj
	mu     sync.Mutex
	closed bool
}

// CreateCryptoLogin creates a crypto login object
// (mlx5dv_crypto_login_create).
func (c *Context) CreateCryptoLogin(o LoginOptions) (*CryptoLoginObj, error) {
	return nil, c.todo("create crypto login")
}

// State queries the login object's state (mlx5dv_crypto_login_query).
func (l *CryptoLoginObj) State() (LoginState, error) {
	if l == nil || l.c == nil {
		return LoginNone, unusable("query crypto login", "CryptoLoginObj", "Context.CreateCryptoLogin", l == nil)
	}
	return LoginNone, errTODO("query crypto login")
}

// Close destroys the login object (mlx5dv_crypto_login_destroy).
func (l *CryptoLoginObj) Close() error {
	if l == nil || l.c == nil {
		return unusable("destroy crypto login", "CryptoLoginObj", "Context.CreateCryptoLogin", l == nil)
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
	// Keytag, 8 bytes, must be given exactly when the DEK has a keytag;
	// the device fails traffic on a mismatch.
	Keytag []byte
}
