package mlx5

import "sync"

// DEKState is a DEK's state (enum mlx5dv_dek_state).
type DEKState int

const (
	DEKReady DEKState = iota // MLX5DV_DEK_STATE_READY
	DEKError                 // MLX5DV_DEK_STATE_ERROR
)

// DEKOptions describe a data encryption key (mlx5dv_dek_init_attr, AES-XTS:
// the only purpose).
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
	// or wrapped by the import KEK (each 8 bytes longer).
	Key []byte
	// Plaintext imports Key in plaintext; the device must not require
	// wrapped import.
	Plaintext bool
	// Login imports a wrapped Key through a login object; without it and
	// without Plaintext, through the context-wide session (CryptoLogin).
	Login *CryptoLoginObj
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
// (mlx5dv_dek_create).
func (p *PD) CreateDEK(o DEKOptions) (*DEK, error) {
	if err := p.usable("create DEK"); err != nil {
		return nil, err
	}
	return nil, errTODO("create DEK")
}

// Query reads the DEK's state and opaque (mlx5dv_dek_query).
func (d *DEK) Query() (DEKInfo, error) {
	if d == nil || d.c == nil {
		return DEKInfo{}, unusable("query DEK", "DEK", "PD.CreateDEK", d == nil)
	}
	return DEKInfo{}, errTODO("query DEK")
}

// Close destroys the DEK (mlx5dv_dek_destroy). It is refused (EBUSY)
// while a crypto mkey's configure names it: close or reconfigure the mkey
// first.
func (d *DEK) Close() error {
	if d == nil || d.c == nil {
		return unusable("destroy DEK", "DEK", "PD.CreateDEK", d == nil)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inUse()
}

// errTODO marks the skeleton issue 25's branches fill in.
func errTODO(op string) error { return opErr(op, "", ErrUnsupported) }

func (c *Context) todo(op string) error {
	if err := c.checkOpen(op); err != nil {
		return err
	}
	return errTODO(op)
}
