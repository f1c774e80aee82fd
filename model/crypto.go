package model

// dekObj is a data encryption key: an ENCRYPTION_KEY general object of
// key purpose AES-XTS, as the firmware keeps it after CREATE_GENERAL_OBJECT
// (unwrapped, when it was imported wrapped).
type dekObj struct {
	uid uint16
	ctx ctxID
	pdn uint32
	// keyBits is 128 or 256: the size of each of key1 and key2.
	keyBits int
	// key1 encrypts the data, key2 the tweak (IEEE 1619).
	key1, key2 []byte
	hasKeytag  bool
	keytag     [8]byte
	opaque     [8]byte
	// state is MLX5_ENCRYPTION_KEY_OBJ_STATE_READY (0) or _ERROR (1).
	state uint8
}
