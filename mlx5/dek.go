package mlx5

import (
	"fmt"
	"io"
	"sync"

	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// DEKState is a DEK's state (enum mlx5dv_dek_state).
type DEKState int

const (
	DEKReady DEKState = iota // MLX5DV_DEK_STATE_READY
	DEKError                 // MLX5DV_DEK_STATE_ERROR
)

var dekStateNames = [...]string{DEKReady: "ready", DEKError: "error"}

func (s DEKState) String() string {
	if s >= 0 && int(s) < len(dekStateNames) {
		return dekStateNames[s]
	}
	return fmt.Sprintf("DEKState(%d)", int(s))
}

// DEKOptions describe a data encryption key (mlx5dv_dek_init_attr, AES-XTS:
// the only purpose). Printed with fmt, they show everything but the key,
// of which only the length (fmt cannot call their methods when they are
// an unexported field of another struct: it then prints the bytes).
type DEKOptions struct {
	// KeyBits is 128 or 256: the size of each of the two AES-XTS keys.
	KeyBits int
	// HasKeytag: Key ends with an 8-byte keytag that every configure using
	// the DEK must repeat.
	HasKeytag bool
	// Opaque is plaintext metadata the device keeps with the key.
	Opaque [8]byte
	// Key is the key material, a secret, laid out as mlx5dv_dek_create(3)
	// says: key1, key2 and the keytag, plaintext (32, 64, 40 or 72 bytes)
	// or wrapped by the import KEK (each 8 bytes longer). mlx5 reads it and
	// zeroes every copy it makes once the command returns.
	Key []byte
	// Plaintext imports Key in plaintext; the device must not require
	// wrapped import.
	Plaintext bool
	// Login imports a wrapped Key through a login object; without it and
	// without Plaintext, through the context-wide session (CryptoLogin).
	Login *CryptoLoginObj
}

// String shows the options with the key's length in place of the key.
func (o DEKOptions) String() string {
	login := "nil"
	if o.Login != nil {
		login = o.Login.name
		if login == "" {
			login = "a zero CryptoLoginObj"
		}
	}
	return fmt.Sprintf("DEKOptions{KeyBits: %d, HasKeytag: %t, Opaque: %#x, Key: %s, Plaintext: %t, Login: %s}",
		o.KeyBits, o.HasKeytag, o.Opaque, redacted(o.Key), o.Plaintext, login)
}

// GoString is String: the key is never printed.
func (o DEKOptions) GoString() string { return o.String() }

// Format prints String for every verb, so that no verb (%x, %d, %#v)
// shows the key.
func (o DEKOptions) Format(f fmt.State, _ rune) {
	if f != nil {
		io.WriteString(f, o.String())
	}
}

// keyLen is the length of Key that mlx5dv_dek_create(3)'s table gives:
// the two AES keys, the keytag if any, and 8 bytes more when wrapped (AES
// key wrap, NIST SP 800-38F).
func (o DEKOptions) keyLen() int {
	n := 2 * o.KeyBits / 8
	if o.HasKeytag {
		n += 8
	}
	if !o.Plaintext {
		n += 8
	}
	return n
}

// importName is how the options import the key, for errors.
func (o DEKOptions) importName() string {
	switch {
	case o.Plaintext:
		return "plaintext"
	case o.Login != nil:
		return "wrapped (login object)"
	}
	return "wrapped (context-wide login)"
}

// DEK is a data encryption key loaded into the device (mlx5dv_dek).
type DEK struct {
	c      *Context
	pd     *PD
	obj    *DevxObj
	id     uint32
	keytag bool
	state  DEKState // the last state a create or Query saw

	mu     sync.Mutex
	users  int // mkeys whose configure names it
	closed bool
}

// DEKInfo is what Query reports (mlx5dv_dek_attr).
type DEKInfo struct {
	State  DEKState
	Opaque [8]byte
}

// CreateDEK loads a DEK into the device for use by the PD's crypto mkeys
// (mlx5dv_dek_create). The checks are libmlx5 44.0's, made before
// anything is sent: a device with an AES-XTS engine and DEK general
// objects (ErrUnsupported, EOPNOTSUPP); KeyBits 128 or 256; and the
// import method against the device's wrapped import (CryptoCaps):
// Plaintext only where the device does not require wrapped keys, Login
// or the context-wide session only where it does, and the session only
// once the context is logged in (CryptoLogin) (ErrInvalid, EINVAL). mlx5
// adds: Login and Plaintext together, a login object not made by
// CreateCryptoLogin, closed or another context's, and a Key whose
// length is not the one mlx5dv_dek_create(3)'s table gives for the
// options (libmlx5 copies its fixed 128-byte key field whatever the
// caller put there) are refused with ErrInvalid. The command's key field
// is what libmlx5 sends: Key, then zeros.
//
// No error shows the key; the mailbox that held it is zeroed once the
// command returns. Context.Close destroys the DEK.
func (p *PD) CreateDEK(o DEKOptions) (*DEK, error) {
	const op = "create DEK"
	if err := p.checkOpen(op); err != nil {
		return nil, err
	}
	c := p.c
	if err := c.checkDEK(op, p, o); err != nil {
		return nil, err
	}
	in := mailbox(prm.CreateEncryptionKeyIn.Layout().Size, prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT)
	defer clear(in) // it holds the key
	prm.GeneralObjInCmdHdr.ObjType.At(prm.CreateEncryptionKeyIn.GeneralObjInCmdHdr).Set(in, prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY)
	key := prm.CreateEncryptionKeyIn.EncryptionKeyObject
	size := uint64(prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_128)
	if o.KeyBits == 256 {
		size = prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_256
	}
	prm.EncryptionKeyObj.KeySize.At(key).Set(in, size)
	if o.HasKeytag {
		prm.EncryptionKeyObj.HasKeytag.At(key).Set(in, 1)
	}
	prm.EncryptionKeyObj.KeyType.At(key).Set(in, prm.MLX5_ENCRYPTION_KEY_OBJ_KEY_PURPOSE_AES_XTS)
	prm.EncryptionKeyObj.Pd.At(key).Set(in, uint64(p.pdn))
	copy(prm.EncryptionKeyObj.Opaque.At(key).Bytes(in), o.Opaque[:])
	copy(prm.EncryptionKeyObj.Key.At(key).Bytes(in), o.Key)
	out := make([]byte, prm.GeneralObjOutCmdHdr.Layout().Size)
	obj, err := c.createObj(op, in, out)
	if err != nil {
		return nil, withStatusErrno(err)
	}
	d := &DEK{c: c, pd: p, obj: obj, id: uint32(prm.GeneralObjOutCmdHdr.ObjId.Get(out)), keytag: o.HasKeytag}
	obj.name = d.name()
	if err := c.adopt(d); err != nil {
		d.Close()
		return nil, opErr(op, c.name, err)
	}
	return d, nil
}

// checkDEK applies CreateDEK's rules (its doc comment) in libmlx5's order.
func (c *Context) checkDEK(op string, p *PD, o DEKOptions) error {
	caps, objTypes, err := c.cryptoCaps()
	if err != nil {
		return wrapAs(op, pdName(p.pdn), "", err)
	}
	obj := pdName(p.pdn)
	wrapped := caps.WrappedImport&CryptoWrappedImportAESXTS != 0
	switch {
	case caps.Engines&(CryptoEngineAESXTSSingleBlock|CryptoEngineAESXTSMultiBlock) == 0:
		return unsupported(op, obj, "the device has no AES-XTS engine")
	case objTypes&(1<<prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY) == 0:
		return unsupported(op, obj, "the device has no DEK objects (general_obj_types)")
	case o.KeyBits != 128 && o.KeyBits != 256:
		return invalid(op, obj, "AES-XTS keys of %d bits: 128 or 256", o.KeyBits)
	case o.Login != nil && o.Plaintext:
		return invalid(op, obj, "a plaintext key imported through a login object: a login imports wrapped keys")
	case o.Plaintext && wrapped:
		return invalid(op, obj, "a plaintext key on a device that imports AES-XTS keys wrapped only (CryptoCaps.WrappedImport)")
	case !o.Plaintext && !wrapped:
		return invalid(op, obj, "a wrapped key on a device that imports AES-XTS keys in plaintext (CryptoCaps.WrappedImport)")
	}
	if o.Login != nil {
		if err := o.Login.usableBy(op, c); err != nil {
			return err
		}
	} else if !o.Plaintext && !c.loggedIn() {
		return invalid(op, obj, "a wrapped key without a login object needs the context-wide login (CryptoLogin)")
	}
	if n := o.keyLen(); len(o.Key) != n {
		kt := ""
		if o.HasKeytag {
			kt = " with keytag"
		}
		return invalid(op, obj, "a key of %d bytes: a %d-bit %s key%s is %d", len(o.Key), o.KeyBits, o.importName(), kt, n)
	}
	return nil
}

func (d *DEK) name() string { return fmt.Sprintf("DEK %#x", d.id) }

// Query reads the DEK's state and opaque (mlx5dv_dek_query). A state the
// device reports beyond READY and ERROR is EINVAL, as in libmlx5. The
// state it reads is the one mkey configures check.
func (d *DEK) Query() (DEKInfo, error) {
	const op = "query DEK"
	if d == nil || d.c == nil {
		return DEKInfo{}, unusable(op, "DEK", "PD.CreateDEK", d == nil)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return DEKInfo{}, opErr(op, d.name(), ErrClosed)
	}
	in := mailbox(prm.GeneralObjInCmdHdr.Layout().Size, prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT)
	prm.GeneralObjInCmdHdr.ObjType.Set(in, prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY)
	prm.GeneralObjInCmdHdr.ObjId.Set(in, uint64(d.id))
	out := make([]byte, prm.QueryEncryptionKeyObjOut.Layout().Size)
	defer clear(out) // the object's key field
	if err := d.c.queryObj(op, d.name(), d.obj.handle, in, out); err != nil {
		return DEKInfo{}, withStatusErrno(err)
	}
	obj := prm.QueryEncryptionKeyObjOut.Obj
	var info DEKInfo
	switch st := prm.EncryptionKeyObj.State.At(obj).Get(out); st {
	case prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_READY:
		info.State = DEKReady
	case prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_ERROR:
		info.State = DEKError
	default:
		return DEKInfo{}, opErr(op, d.name(), fmt.Errorf("the device reports DEK state %d: %w", st, unix.EINVAL))
	}
	copy(info.Opaque[:], prm.EncryptionKeyObj.Opaque.At(obj).Bytes(out))
	d.state = info.State
	return info, nil
}

// Close destroys the DEK (mlx5dv_dek_destroy). A DEK that a crypto mkey's
// configure names is not destroyed: Close fails with EBUSY until those
// mkeys are closed or configured with another key (libmlx5 destroys it
// under them). Closing twice is safe.
func (d *DEK) Close() error {
	const op = "destroy DEK"
	if d == nil || d.c == nil {
		return unusable(op, "DEK", "PD.CreateDEK", d == nil)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	if err := d.inUse(); err != nil {
		return err
	}
	if err := d.obj.Close(); err != nil {
		return wrapAs(op, d.name(), "", err)
	}
	d.closed = true
	d.c.forget(d)
	return nil
}
