package mlx5

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// Crypto logins and DEKs end to end on the software ConnectX: mlx5's
// commands against the model's firmware objects (docs/MODEL.md, "Crypto
// objects"), where crypto_test.go's fake firmware checks the mailboxes.

// The credential and import KEK of ID 0, which CRYPTO_OPERATIONAL stores
// on a wrapped engine (model.CryptoOptions), and another pair that the
// crypto officer provisions under other IDs.
var (
	modelCred   = bytes.Repeat([]byte("cred"), 10) // 40 bytes
	modelKEK    = bytes.Repeat([]byte{0x4b}, 16)
	officerCred = bytes.Repeat([]byte("offi"), 10)
	officerKEK  = bytes.Repeat([]byte{0x6f}, 32)
)

const officerCredID, officerKEKID = 5, 7

// wrappedCrypto commissions an engine in the wrapped import method,
// operational with modelCred and modelKEK.
var wrappedCrypto = model.CryptoOptions{Wrapped: true, Credential: modelCred, ImportKEK: modelKEK}

// openModel opens a context on a software ConnectX of profile made with
// crypto options o, and closes it when t ends, checking that its Close
// left no firmware object behind.
func openModel(t *testing.T, profile string, o model.CryptoOptions) (*model.Device, *Context) {
	t.Helper()
	dev, err := model.NewWithOptions(profile, model.Options{Crypto: o})
	if err != nil {
		t.Fatal(err)
	}
	c := NewContext(dev)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if n := dev.Objects(); n != 0 {
			t.Errorf("%d objects left after Close", n)
		}
	})
	return dev, c
}

// openOfficer is openModel on a wrapped engine where the crypto officer
// also stored officerCred and officerKEK, with a PD.
func openOfficer(t *testing.T, profile string) (*model.Device, *Context, *PD) {
	t.Helper()
	dev, c := openModel(t, profile, wrappedCrypto)
	if err := dev.SetCryptoCredential(officerCredID, officerCred); err != nil {
		t.Fatal(err)
	}
	if err := dev.SetImportKEK(officerKEKID, officerKEK); err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	return dev, c, pd
}

// mustDEK is pd.CreateDEK(o), failing t on an error.
func mustDEK(t *testing.T, pd *PD, o DEKOptions) *DEK {
	t.Helper()
	d, err := pd.CreateDEK(o)
	if err != nil {
		t.Fatalf("%v: %v", o, err)
	}
	return d
}

// mustWrap is model.KeyWrap, failing t on an error.
func mustWrap(t *testing.T, kek, plain []byte) []byte {
	t.Helper()
	w, err := model.KeyWrap(kek, plain)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// isStatus fails t unless err is an *Error of a firmware refusal with
// status st and the errno libmlx5 gives it, showing neither secret.
func isStatus(t *testing.T, what string, err error, st prm.Status, errno unix.Errno, secrets ...[]byte) {
	t.Helper()
	var ce *prm.CmdError
	isErrno(t, what, err, errno)
	if !errors.As(err, &ce) || ce.Status != st {
		t.Errorf("%s: %v, want firmware status %v", what, err, st)
	}
	for _, s := range secrets {
		secretsAbsent(t, what, err, s)
	}
}

// dekMaterial is key1 + key2 (+ keytag) of a DEK of bits, none of it zero.
func dekMaterial(bits int, keytag bool) []byte {
	n := 2 * bits / 8
	if keytag {
		n += 8
	}
	return dekKey(n)
}

// checkDEK fails t unless d's Query reports state and opaque.
func checkDEK(t *testing.T, what string, d *DEK, state DEKState, opaque [8]byte) {
	t.Helper()
	info, err := d.Query()
	if err != nil || info.State != state || info.Opaque != opaque {
		t.Errorf("%s: Query %+v, %v; want state %v, opaque %q", what, info, err, state, opaque)
	}
}

// closeTwice closes o twice: both nil.
func closeTwice(t *testing.T, what string, o interface{ Close() error }) {
	t.Helper()
	for i := range 2 {
		if err := o.Close(); err != nil {
			t.Errorf("%s: Close #%d: %v", what, i+1, err)
		}
	}
}

// TestModelCryptoSession: the context-wide login on a wrapped engine,
// the DEKs imported in it, and what the engine refuses.
func TestModelCryptoSession(t *testing.T) {
	for _, profile := range []string{"cx6dx", "cx7"} {
		t.Run(profile, func(t *testing.T) {
			_, c := openModel(t, profile, wrappedCrypto)
			caps, err := c.CryptoCaps()
			if err != nil || caps.WrappedImport != CryptoWrappedImportAESXTS || caps.Flags&CryptoFlagWrappedOperational == 0 {
				t.Fatalf("CryptoCaps %+v, %v; want wrapped AES-XTS import, operational", caps, err)
			}
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			if st, err := c.CryptoLoginState(); st != LoginNone || err != nil {
				t.Errorf("before login: %v, %v", st, err)
			}
			// A DEK before the login: libmlx5's rule, nothing sent.
			_, err = pd.CreateDEK(DEKOptions{KeyBits: 128, Key: mustWrap(t, modelKEK, dekMaterial(128, false))})
			isErrno(t, "DEK before login", err, unix.EINVAL)

			// The credential must be the stored one, wrapped with the KEK.
			other := mustWrap(t, modelKEK, bytes.Repeat([]byte("nope"), 10))
			isStatus(t, "login with another credential", c.CryptoLogin(LoginOptions{Credential: other}),
				prm.MLX5_CMD_STAT_BAD_PARAM_ERR, unix.EINVAL, other, modelCred)
			badKEK := mustWrap(t, officerKEK, modelCred)
			isStatus(t, "login with another KEK", c.CryptoLogin(LoginOptions{Credential: badKEK}),
				prm.MLX5_CMD_STAT_BAD_PARAM_ERR, unix.EINVAL, badKEK, modelCred)
			isStatus(t, "login with a credential id not stored", c.CryptoLogin(LoginOptions{CredentialID: 9, Credential: mustWrap(t, modelKEK, modelCred)}),
				prm.MLX5_CMD_STAT_BAD_PARAM_ERR, unix.EINVAL)
			if st, err := c.CryptoLoginState(); st != LoginNone || err != nil {
				t.Errorf("after refused logins: %v, %v", st, err)
			}

			cred := mustWrap(t, modelKEK, modelCred)
			if err := c.CryptoLogin(LoginOptions{Credential: cred}); err != nil {
				t.Fatalf("login: %v", err)
			}
			if st, err := c.CryptoLoginState(); st != LoginValid || err != nil {
				t.Errorf("after login: %v, %v", st, err)
			}
			isErrno(t, "second login", c.CryptoLogin(LoginOptions{Credential: cred}), unix.EEXIST)
			// One login per context: the session is the context's login
			// object, so the firmware refuses another (the model's rule).
			_, err = c.CreateCryptoLogin(LoginOptions{Credential: cred})
			isStatus(t, "login object beside the session", err, prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, unix.EINVAL, cred)

			for _, o := range []DEKOptions{
				{KeyBits: 128, Opaque: [8]byte{'s', '1', '2', '8'}},
				{KeyBits: 256, HasKeytag: true, Opaque: [8]byte{'s', '2', '5', '6', 't'}},
			} {
				plain := dekMaterial(o.KeyBits, o.HasKeytag)
				o.Key = mustWrap(t, modelKEK, plain)
				d := mustDEK(t, pd, o)
				checkDEK(t, o.String(), d, DEKReady, o.Opaque)
				closeTwice(t, o.String(), d)
				if _, err := d.Query(); !errors.Is(err, ErrClosed) {
					t.Errorf("%v: Query after Close: %v", o, err)
				}
				// The same material in plaintext: refused by mlx5, as the
				// engine requires wrapped keys.
				_, err = pd.CreateDEK(DEKOptions{KeyBits: o.KeyBits, HasKeytag: o.HasKeytag, Plaintext: true, Key: plain})
				isErrno(t, "plaintext DEK on a wrapped engine", err, unix.EINVAL)
				secretsAbsent(t, "plaintext DEK on a wrapped engine", err, plain)
			}
			// A key wrapped with another KEK fails the firmware's unwrap.
			plain := dekMaterial(128, false)
			_, err = pd.CreateDEK(DEKOptions{KeyBits: 128, Key: mustWrap(t, officerKEK, plain)})
			isStatus(t, "DEK wrapped with another KEK", err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR, unix.EINVAL, plain)

			// After the logout the DEK stays, but a wrapped engine answers
			// its query only in a valid login.
			d := mustDEK(t, pd, DEKOptions{KeyBits: 128, Key: mustWrap(t, modelKEK, plain)})
			if err := c.CryptoLogout(); err != nil {
				t.Fatalf("logout: %v", err)
			}
			if st, err := c.CryptoLoginState(); st != LoginNone || err != nil {
				t.Errorf("after logout: %v, %v", st, err)
			}
			_, err = d.Query()
			isStatus(t, "query after logout", err, prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, unix.EINVAL)
			// Logged in again, the query answers.
			if err := c.CryptoLogin(LoginOptions{Credential: cred}); err != nil {
				t.Fatalf("login again: %v", err)
			}
			checkDEK(t, "after a new login", d, DEKReady, [8]byte{})
			// d and the session are left to the context's Close.
		})
	}
}

// TestModelCryptoLoginObject: a login object made with a credential and
// import KEK the crypto officer provisioned, a DEK imported through it,
// and the context-wide session untouched.
func TestModelCryptoLoginObject(t *testing.T) {
	_, c, pd := openOfficer(t, "cx7")
	o := LoginOptions{CredentialID: officerCredID, ImportKEKID: officerKEKID, Credential: mustWrap(t, officerKEK, officerCred)}
	// The right credential under the wrong KEK id.
	_, err := c.CreateCryptoLogin(LoginOptions{CredentialID: officerCredID, Credential: o.Credential})
	isStatus(t, "login object, KEK 0", err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR, unix.EINVAL, o.Credential, officerCred)
	l, err := c.CreateCryptoLogin(o)
	if err != nil {
		t.Fatalf("login object: %v", err)
	}
	if st, err := l.State(); st != LoginValid || err != nil {
		t.Errorf("login object: %v, %v", st, err)
	}
	if st, err := c.CryptoLoginState(); st != LoginNone || err != nil {
		t.Errorf("session beside a login object: %v, %v", st, err)
	}
	plain := dekMaterial(256, true)
	d := mustDEK(t, pd, DEKOptions{KeyBits: 256, HasKeytag: true, Opaque: [8]byte{'o', 'b', 'j'}, Key: mustWrap(t, officerKEK, plain), Login: l})
	checkDEK(t, "DEK through the login object", d, DEKReady, [8]byte{'o', 'b', 'j'})
	// The session's KEK is not the object's: the firmware unwraps with
	// the uid's login, whichever call made it.
	_, err = pd.CreateDEK(DEKOptions{KeyBits: 128, Key: mustWrap(t, modelKEK, dekMaterial(128, false)), Login: l})
	isStatus(t, "DEK wrapped with the KEK of ID 0", err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR, unix.EINVAL)
	closeTwice(t, "DEK", d)
	closeTwice(t, "login object", l)
	if _, err := l.State(); !errors.Is(err, ErrClosed) {
		t.Errorf("State after Close: %v", err)
	}
	// Closed, it imports nothing, and nothing is sent.
	_, err = pd.CreateDEK(DEKOptions{KeyBits: 128, Key: mustWrap(t, officerKEK, dekMaterial(128, false)), Login: l})
	if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrClosed) {
		t.Errorf("DEK through a closed login object: %v", err)
	}
	// With the object gone, the session may log in.
	if err := c.CryptoLogin(LoginOptions{Credential: mustWrap(t, modelKEK, modelCred)}); err != nil {
		t.Errorf("session after the object's Close: %v", err)
	}
}

// TestModelCryptoLoginInvalid: a login, session or object, becomes
// INVALID once the crypto officer deletes its credential or its import
// KEK (mlx5dv_crypto_login(3)); a DEK made in it stays READY.
func TestModelCryptoLoginInvalid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		object  bool
		deleteF func(*model.Device) error
	}{
		{"session, credential deleted", false, func(d *model.Device) error { return d.DeleteCryptoCredential(officerCredID) }},
		{"session, KEK deleted", false, func(d *model.Device) error { return d.DeleteImportKEK(officerKEKID) }},
		{"object, credential deleted", true, func(d *model.Device) error { return d.DeleteCryptoCredential(officerCredID) }},
		{"object, KEK deleted", true, func(d *model.Device) error { return d.DeleteImportKEK(officerKEKID) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, c, pd := openOfficer(t, "cx6dx")
			o := LoginOptions{CredentialID: officerCredID, ImportKEKID: officerKEKID, Credential: mustWrap(t, officerKEK, officerCred)}
			state := c.CryptoLoginState
			dekOpts := DEKOptions{KeyBits: 128, Key: mustWrap(t, officerKEK, dekMaterial(128, false))}
			if tc.object {
				l, err := c.CreateCryptoLogin(o)
				if err != nil {
					t.Fatal(err)
				}
				state, dekOpts.Login = l.State, l
			} else if err := c.CryptoLogin(o); err != nil {
				t.Fatal(err)
			}
			d := mustDEK(t, pd, dekOpts)
			if st, err := state(); st != LoginValid || err != nil {
				t.Fatalf("before the delete: %v, %v", st, err)
			}
			if err := tc.deleteF(dev); err != nil {
				t.Fatal(err)
			}
			if st, err := state(); st != LoginInvalid || err != nil {
				t.Errorf("after the delete: %v, %v; want %v", st, err, LoginInvalid)
			}
			// A wrapped engine imports no DEK in an invalid login.
			_, err := pd.CreateDEK(dekOpts)
			isStatus(t, "DEK in an invalid login", err, prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, unix.EINVAL)
			// Storing the credential or KEK again does not make it valid.
			if err := dev.SetCryptoCredential(officerCredID, officerCred); err != nil {
				t.Fatal(err)
			}
			if err := dev.SetImportKEK(officerKEKID, officerKEK); err != nil {
				t.Fatal(err)
			}
			if st, err := state(); st != LoginInvalid || err != nil {
				t.Errorf("after storing them again: %v, %v; want %v", st, err, LoginInvalid)
			}
			closeTwice(t, "DEK made before the delete", d)
		})
	}
}

// TestModelCryptoPlaintext: DEKs in plaintext on the profiles' factory
// engines, which have no logins; cx5 has no engine.
func TestModelCryptoPlaintext(t *testing.T) {
	for _, profile := range []string{"cx6dx", "cx7"} {
		t.Run(profile, func(t *testing.T) {
			_, c := openModel(t, profile, model.CryptoOptions{})
			caps, err := c.CryptoCaps()
			if err != nil || caps.WrappedImport != 0 || caps.Flags&CryptoFlagCrypto == 0 || caps.Engines == 0 {
				t.Fatalf("CryptoCaps %+v, %v; want crypto, an engine, plaintext import", caps, err)
			}
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			for _, bits := range []int{128, 256} {
				for _, keytag := range []bool{false, true} {
					o := DEKOptions{KeyBits: bits, HasKeytag: keytag, Plaintext: true, Opaque: [8]byte{'p', byte(bits), b2b(keytag)}, Key: dekMaterial(bits, keytag)}
					d := mustDEK(t, pd, o)
					checkDEK(t, o.String(), d, DEKReady, o.Opaque)
					closeTwice(t, o.String(), d)
					// Wrapped: refused by mlx5 on a plaintext engine.
					o.Plaintext, o.Key = false, mustWrap(t, modelKEK, o.Key)
					_, err = pd.CreateDEK(o)
					isErrno(t, "wrapped DEK on a plaintext engine", err, unix.EINVAL)
				}
			}
			cred := mustWrap(t, modelKEK, modelCred)
			isErrno(t, "session on a plaintext engine", c.CryptoLogin(LoginOptions{Credential: cred}), unix.EOPNOTSUPP)
			_, err = c.CreateCryptoLogin(LoginOptions{Credential: cred})
			isErrno(t, "login object on a plaintext engine", err, unix.EOPNOTSUPP)
		})
	}
	t.Run("cx5", func(t *testing.T) {
		_, c := openModel(t, "cx5", model.CryptoOptions{})
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		_, err = pd.CreateDEK(DEKOptions{KeyBits: 128, Plaintext: true, Key: dekMaterial(128, false)})
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("DEK on cx5: %v, want ErrUnsupported", err)
		}
	})
}

// b2b is 1 for true, 0 for false.
func b2b(v bool) byte { return byte(b2i(v)) }

// TestModelDEKError: a DEK the device puts in ERROR (model's
// InjectDEKError, as a corruption of its memory would) queries as
// DEKError; the others stay READY.
func TestModelDEKError(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    model.CryptoOptions
	}{{"plaintext", model.CryptoOptions{}}, {"wrapped", wrappedCrypto}} {
		t.Run(tc.name, func(t *testing.T) {
			dev, c := openModel(t, "cx7", tc.o)
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			o := DEKOptions{KeyBits: 256, Plaintext: true, Key: dekMaterial(256, false), Opaque: [8]byte{'e', 'r', 'r'}}
			if tc.o.Wrapped {
				if err := c.CryptoLogin(LoginOptions{Credential: mustWrap(t, modelKEK, modelCred)}); err != nil {
					t.Fatal(err)
				}
				o.Plaintext, o.Key = false, mustWrap(t, modelKEK, o.Key)
			}
			bad, good := mustDEK(t, pd, o), mustDEK(t, pd, o)
			checkDEK(t, "before the error", bad, DEKReady, o.Opaque)
			if err := dev.InjectDEKError(bad.id); err != nil {
				t.Fatal(err)
			}
			checkDEK(t, "after the error", bad, DEKError, o.Opaque)
			checkDEK(t, "the other DEK", good, DEKReady, o.Opaque)
			closeTwice(t, "DEK in ERROR", bad)
		})
	}
}
