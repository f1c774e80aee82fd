package model

import (
	"fmt"
	"maps"
	"slices"

	"github.com/mlx5go/mlx5go/prm"
)

// What the profiles report of their AES-XTS crypto engine (docs/MODEL.md,
// "Crypto objects"): cmd_hca_cap's crypto bit, engine bits and general
// object types, and the crypto caps page. The ConnectX-5 profile has no
// engine: DPDK's doc/guides/cryptodevs/mlx5.rst lists the adapters of its
// crypto driver from the ConnectX-6 on (ConnectX-6, ConnectX-6 Dx,
// ConnectX-7). Only "new HCAs such as BF-3" do multi-block AES-XTS, with a
// big-endian tweak (rdma-core commit dd8a5576c, "mlx5: Add support for
// multi-block AES-XTS encryption"): the ConnectX-7 profile, of BlueField-3's
// generation, has it; the ConnectX-6 Dx profile has the single-block,
// little-endian tweak engine only.

// cryptoGeneral is the cmd_hca_cap values of a profile with a
// single-block AES-XTS engine and, with multi 1, a multi-block one.
func cryptoGeneral(multi uint64) []capValue {
	return []capValue{
		{prm.CmdHcaCap.Crypto, 1},
		{prm.CmdHcaCap.AesXtsSingleBlockLeTweak, 1},
		{prm.CmdHcaCap.AesXtsMultiBlockBeTweak, multi},
		{prm.CmdHcaCap.GeneralObjTypes, 1<<prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY | 1<<prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN},
	}
}

// cryptoPage is the crypto caps page of an engine in plaintext mode, which
// CryptoOptions turns into wrapped mode. The limits are the model's
// choices: no public source gives a device's.
func cryptoPage(logDEKs uint64) []capValue {
	return []capValue{
		{prm.CryptoCap.LogMaxNumDeks, logDEKs},
		{prm.CryptoCap.LogMaxNumImportKeks, 3},
		{prm.CryptoCap.LogMaxNumCreds, 3},
	}
}

// CryptoOptions are how a crypto officer commissioned the AES-XTS engine
// of the software ConnectX: the profiles with one (cx6dx and cx7) apply
// them, the others (cx5) have nothing to commission and ignore them, so
// that one set of options serves a test on every profile. The zero value
// is an engine in plaintext import mode, as a device comes out of the
// factory with either import method (DPDK's
// doc/guides/cryptodevs/mlx5.rst, "Configuration"): DEKs come in plaintext
// and there are no crypto logins.
type CryptoOptions struct {
	// Wrapped puts the engine in the wrapped import method
	// (wrapped_import_method AES): DEKs and credentials come wrapped with
	// AES key wrap (KeyWrap) under an import KEK, and creating or querying
	// a DEK needs a valid crypto login.
	Wrapped bool
	// Credential (40 bytes) and ImportKEK (an AES key of 16 or 32 bytes)
	// are what the CRYPTO_OPERATIONAL register sets to take a wrapped
	// engine from commissioning to operational mode: the credential and
	// import KEK of ID 0. With both, wrapped_crypto_operational is 1; with
	// neither, the engine stays in commissioning mode and refuses logins
	// and DEKs. Device.SetCryptoCredential and Device.SetImportKEK store
	// more, and delete them.
	Credential, ImportKEK []byte
	// GoingToCommissioning reports wrapped_crypto_going_to_commissioning
	// (the engine returns to commissioning mode at the next reset); the
	// model does nothing else with it.
	GoingToCommissioning bool
	// FailedSelftests is the crypto caps' failed_selftests, a mask of the
	// self-tests that failed at power-up. An engine with any is in the
	// error state of FIPS 140: it refuses crypto logins and DEKs.
	FailedSelftests uint16
}

// Lengths of what CRYPTO_OPERATIONAL and the crypto officer's tools
// provision: 40-byte credentials and 16- or 32-byte import KEKs (DPDK's
// doc/guides/cryptodevs/mlx5.rst); a wrapped credential is 48 bytes, the
// size of crypto_login_obj.credential.
const credentialLen = 40

func checkKEK(k []byte) error {
	if len(k) != 16 && len(k) != 32 {
		return fmt.Errorf("model: an import KEK is an AES key of 16 or 32 bytes, not %d", len(k))
	}
	return nil
}

func checkCredential(c []byte) error {
	if len(c) != credentialLen {
		return fmt.Errorf("model: a credential is %d bytes, not %d", credentialLen, len(c))
	}
	return nil
}

// withCrypto returns p commissioned as o says: p itself for the zero
// CryptoOptions or a profile without an engine, else a copy of p with a
// crypto caps page of its own.
func (p *profile) withCrypto(o CryptoOptions) (*profile, error) {
	if p.crypto == nil || !o.Wrapped && o.Credential == nil && o.ImportKEK == nil && !o.GoingToCommissioning && o.FailedSelftests == 0 {
		return p, nil
	}
	if !o.Wrapped && (o.Credential != nil || o.ImportKEK != nil || o.GoingToCommissioning) {
		return nil, fmt.Errorf("model: Options.Crypto: a credential, an import KEK and commissioning are for the wrapped import method")
	}
	if (o.Credential == nil) != (o.ImportKEK == nil) {
		return nil, fmt.Errorf("model: Options.Crypto: CRYPTO_OPERATIONAL sets the first credential and import KEK together")
	}
	if o.Credential != nil {
		if err := checkCredential(o.Credential); err != nil {
			return nil, err
		}
		if err := checkKEK(o.ImportKEK); err != nil {
			return nil, err
		}
	}
	pg := slices.Clone(p.pages[prm.MLX5_CAP_CRYPTO])
	if o.Wrapped {
		prm.CryptoCap.WrappedImportMethod.Set(pg, prm.MLX5_CRYPTO_CAPS_WRAPPED_IMPORT_METHOD_AES)
	}
	if o.Credential != nil {
		prm.CryptoCap.WrappedCryptoOperational.Set(pg, 1)
	}
	if o.GoingToCommissioning {
		prm.CryptoCap.WrappedCryptoGoingToCommissioning.Set(pg, 1)
	}
	prm.CryptoCap.FailedSelftests.Set(pg, uint64(o.FailedSelftests))
	q := *p
	q.pages = maps.Clone(p.pages)
	q.pages[prm.MLX5_CAP_CRYPTO] = pg
	return &q, nil
}

// cryptoCap returns the profile's value of a crypto caps field (0 for a
// profile without the page).
func (p *profile) cryptoCap(f prm.Field) uint64 { return f.Get(p.pages[prm.MLX5_CAP_CRYPTO]) }
