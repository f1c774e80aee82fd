package hwtest

import (
	"testing"

	"github.com/mlx5go/mlx5go/hwtest/flows"
	"github.com/mlx5go/mlx5go/mlx5"
)

// rdma-core's crypto scenarios (tests/test_mlx5_crypto.py) on a ConnectX
// with crypto enabled, on verbs QPs and DEVX ones (crypto mkeys and DEKs
// are DEVX objects: both need DEVX). Each skips with the reason on a
// device without AES-XTS crypto. A device in wrapped import mode needs the
// credential and import KEK its crypto officer stored, in plaintext, from
// the environment (flows.OfficerFromEnv):
//
//	MLX5GO_CRYPTO_CREDENTIAL_ID=0x1 MLX5GO_CRYPTO_CREDENTIAL=<40 bytes, hex> \
//	MLX5GO_CRYPTO_IMPORT_KEK_ID=0x1 MLX5GO_CRYPTO_IMPORT_KEK=<16 or 32 bytes, hex> \
//	go test -v -run Crypto ./hwtest
//
// without which every flow skips on such a device, and the login flow
// on any.

// TestHWCryptoTraffic: rdma-core's SENDs through an encrypting and a
// decrypting mkey, encrypt on RDMA WRITE and decrypt on READ on either
// side, an interleaved layout (flows.CryptoTraffic).
func TestHWCryptoTraffic(t *testing.T) { cryptoKinds(t, flows.CryptoTraffic) }

// TestHWCryptoSignature: crypto and T10-DIF in one mkey, in both orders
// (the man page's rows B, C, H and J), and the combinations the device
// does not do (flows.CryptoSignature).
func TestHWCryptoSignature(t *testing.T) { cryptoKinds(t, flows.CryptoSignature) }

// TestHWCryptoWrappedLogin: the context-wide session and the login object,
// wrapped DEKs through each (flows.CryptoWrappedLogin; wrapped mode only).
func TestHWCryptoWrappedLogin(t *testing.T) { cryptoKinds(t, flows.CryptoWrappedLogin) }

// TestHWCryptoDEKLifecycle: DEK query and destroy, destroy refused while
// an mkey uses the DEK, and the refusals (flows.CryptoDEKLifecycle). A
// ConnectX offers no way to put a DEK in ERROR: that case skips.
func TestHWCryptoDEKLifecycle(t *testing.T) { cryptoKinds(t, flows.CryptoDEKLifecycle) }

// TestHWCryptoBadKeytag: traffic through an mkey whose keytag is not its
// DEK's fails, at either side (flows.CryptoBadKeytag). The statuses
// expected are the software model's reading; no public source gives a
// ConnectX's.
func TestHWCryptoBadKeytag(t *testing.T) { cryptoKinds(t, flows.CryptoBadKeytag) }

// TestHWCryptoJobSize: the job sizes of mlx5dv_wr_set_mkey_crypto(3)'s
// examples, those it allows landing encrypted and those it does not
// failing (flows.CryptoJobSize; how they fail is the model's reading).
func TestHWCryptoJobSize(t *testing.T) { cryptoKinds(t, flows.CryptoJobSize) }

// cryptoKinds runs a crypto flow as devxKinds runs flows, with the
// officer from the environment.
func cryptoKinds(t *testing.T, flow func(*testing.T, *mlx5.Context, flows.Objects, flows.CryptoSetup)) {
	officer, err := flows.OfficerFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	devxKinds(t, func(t *testing.T, c *mlx5.Context, objs flows.Objects) {
		flow(t, c, objs, flows.CryptoSetup{Officer: officer})
	})
}
