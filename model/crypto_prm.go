package model

import "github.com/mlx5go/mlx5go/prm"

// The PRM layouts of the crypto objects, which the kernel's mlx5_ifc.h of
// Linux 6.1 (prm's source) does not define or defines for another key
// purpose: its encryption_key_obj (TLS, IPsec, MACsec) has no state,
// has_keytag or opaque and a 256-bit key. Every offset here is from
// rdma-core v44.0 providers/mlx5/mlx5_ifc.h; the names are the ones prmgen
// would give the same members, so that they can move to prm as they are.

// cmd_hca_cap's AES-XTS engine bits.
var (
	hcaAesXtsSingleBlockLeTweak = prm.Field{Name: "aes_xts_single_block_le_tweak", Off: 0x3f1, Width: 1}
	hcaAesXtsMultiBlockBeTweak  = prm.Field{Name: "aes_xts_multi_block_be_tweak", Off: 0x3f2, Width: 1}
)

// capCrypto is the capability type of the crypto caps page: QUERY_HCA_CAP
// reads it with op_mod MLX5_SET_HCA_CAP_OP_MOD_CRYPTO (0x1a << 1) plus
// HCA_CAP_OPMOD_GET_MAX or _CUR.
const capCrypto = 0x1a

// cryptoCaps is mlx5_ifc_crypto_caps_bits (256 bytes).
var cryptoCaps = struct {
	WrappedCryptoOperational          prm.Field
	WrappedCryptoGoingToCommissioning prm.Field
	WrappedImportMethod               prm.Field
	LogMaxNumDeks                     prm.Field
	LogMaxNumImportKeks               prm.Field
	LogMaxNumCreds                    prm.Field
	FailedSelftests                   prm.Field
	NumNvImportKeks                   prm.Field
	NumNvCredentials                  prm.Field
}{
	prm.Field{Name: "wrapped_crypto_operational", Off: 0x0, Width: 1},
	prm.Field{Name: "wrapped_crypto_going_to_commissioning", Off: 0x1, Width: 1},
	prm.Field{Name: "wrapped_import_method", Off: 0x18, Width: 8},
	prm.Field{Name: "log_max_num_deks", Off: 0x2b, Width: 5},
	prm.Field{Name: "log_max_num_import_keks", Off: 0x33, Width: 5},
	prm.Field{Name: "log_max_num_creds", Off: 0x3b, Width: 5},
	prm.Field{Name: "failed_selftests", Off: 0x40, Width: 16},
	prm.Field{Name: "num_nv_import_keks", Off: 0x50, Width: 8},
	prm.Field{Name: "num_nv_credentials", Off: 0x58, Width: 8},
}

// MLX5_CRYPTO_CAPS_WRAPPED_IMPORT_METHOD_AES: the wrapped_import_method
// bit of the AES key wrap.
const wrappedImportAES = 0x4

// General object types (MLX5_OBJ_TYPE_*) and their bits in cmd_hca_cap's
// general_obj_types (bit n for type n).
const (
	objTypeDEK         = 0x000c
	objTypeCryptoLogin = 0x001f
)

// genObjLen is the size of the objects below and of the input and output
// mailboxes of their commands: the 16-byte general object header, then
// the object.
const (
	genObjSize = 256
	genObjLen  = hdrLen + genObjSize
)

// genObj is where the object lies in create_*_obj_in and query_*_obj_out:
// right after the 16-byte header.
var genObj = prm.Field{Name: "obj", Off: 0x80, Width: genObjSize * 8}

// cryptoLoginObj is mlx5_ifc_crypto_login_obj_bits.
var cryptoLoginObj = struct {
	ModifyFieldSelect   prm.Field
	State               prm.Field
	CredentialPointer   prm.Field
	SessionImportKekPtr prm.Field
	Credential          prm.Field
}{
	prm.Field{Name: "modify_field_select", Off: 0x0, Width: 64},
	prm.Field{Name: "state", Off: 0x84, Width: 4},
	prm.Field{Name: "credential_pointer", Off: 0x88, Width: 24},
	prm.Field{Name: "session_import_kek_ptr", Off: 0xa8, Width: 24},
	prm.Field{Name: "credential", Off: 0x200, Width: 12 * 32},
}

// MLX5_CRYPTO_LOGIN_OBJ_STATE_*.
const (
	loginValid   = 0x0
	loginInvalid = 0x1
)

// encryptionKeyObj is mlx5_ifc_encryption_key_obj_bits.
var encryptionKeyObj = struct {
	ModifyFieldSelect prm.Field
	State             prm.Field
	KeySize           prm.Field
	HasKeytag         prm.Field
	KeyPurpose        prm.Field
	Pd                prm.Field
	Opaque            prm.Field
	Key               prm.Field
}{
	prm.Field{Name: "modify_field_select", Off: 0x0, Width: 64},
	prm.Field{Name: "state", Off: 0x40, Width: 8},
	prm.Field{Name: "key_size", Off: 0x54, Width: 4},
	prm.Field{Name: "has_keytag", Off: 0x58, Width: 1},
	prm.Field{Name: "key_purpose", Off: 0x5c, Width: 4},
	prm.Field{Name: "pd", Off: 0x68, Width: 24},
	prm.Field{Name: "opaque", Off: 0x180, Width: 64},
	prm.Field{Name: "key", Off: 0x200, Width: 32 * 32},
}

// MLX5_ENCRYPTION_KEY_OBJ_STATE_*, _KEY_SIZE_SIZE_* and
// _KEY_PURPOSE_AES_XTS.
const (
	dekReady          = 0x0
	dekError          = 0x1
	dekKeySize128     = 0x0
	dekKeySize256     = 0x1
	dekPurposeAESXTS  = 0x3
	dekKeyFieldLength = 32 * 4 // bytes of encryption_key_obj.key
)
