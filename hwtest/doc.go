// Package hwtest runs mlx5go's flows on a real ConnectX when one is
// present, and skips each test with the reason when none is (no RDMA
// device, no mlx5 device, or no DEVX because the process lacks
// CAP_NET_RAW). Run it as root on a machine with a ConnectX:
//
//	go test -v ./hwtest
//
// The flows themselves are in package flows, which also runs them on the
// software model of every ConnectX profile:
//
//   - TestHWDEVX: every DEVX call (flows.DEVX).
//   - TestHWBasic: SEND, RDMA WRITE and READ, an access error
//     (flows.Basic), on verbs QPs (which need no privilege) and on DEVX
//     QPs.
//   - TestHWT10DIF: T10-DIF insert, strip, check and a bad guard, compared
//     with sig's software engine (flows.T10DIF), on verbs and DEVX QPs.
//   - TestHWCRC64XP10: settles CRC64_XP10's parameters; its log line goes
//     into docs/SIG.md (flows.CRC64XP10).
//
// rdma-core's own mkey and signature scenarios (tests/test_mlx5_mkey.py
// of rdma-core 44.0) and the examples of mlx5dv_wr_set_mkey_sig_block(3),
// on verbs and DEVX QPs, every completion checked (status, opcode, byte
// length, wr_id, exactly once), data and PI compared with sig's engine:
//
//   - TestHWMkeyLayouts: rdma-core's list and interleaved layouts
//     (test_mkey_list_new_api, test_mkey_interleaved_new_api) with SEND,
//     RDMA WRITE and READ through them (flows.MkeyLayouts).
//   - TestHWMkeyPastLayout: an access past the layout
//     (test_mkey_list_bad_flow): a SEND or an RDMA READ into the mkey
//     fails with a local protection error, an RDMA WRITE or READ at it
//     with a remote access error (flows.MkeyPastLayout).
//   - TestHWT10DIFTraffic: test_mkey_sig_t10dif's T10-DIF over SEND (the
//     sender's mkey, the receiver's, both; rdma-core's 512-byte lengths),
//     RDMA WRITE and READ (the man page's examples 2 and 2.1), a bad
//     reference tag found by the receiver and a bad guard by the reader
//     (flows.T10DIFTraffic).
//   - TestHWCRCSend: test_mkey_sig_crc's CRC32 over SEND, and CRC32C and
//     CRC64_XP10 (sig's default parameters, unsettled) (flows.CRCSend).
//   - TestHWSigBadGuard: test_mkey_sig_err, a bad guard in a CRC32 memory
//     domain found by Mkey.Check (flows.SigBadGuard).
//   - TestHWManPageCRC32: the man page's examples 1 and 1.1, a SEND from a
//     CRC32 memory domain and a receive into one (flows.ManPageCRC32).
//   - TestHWRemoteInvalidate: test_mkey_remote_invalidate, a SEND with
//     invalidate frees a peer's mkey; MkeyLayouts ends each layout with
//     rdma-core's LOCAL_INVs (flows.RemoteInvalidate).
//   - TestHWPipeliningGood, TestHWPipeliningBad:
//     test_mkey_sig_pipelining_good and _bad: no stop for an unchecked
//     CRC; a checked bad one stops the send queue before the fenced
//     response (SQ_DRAINED, no completion), cancel returns 1, the response
//     is posted again and the QP goes back to RTS (flows.PipeliningGood,
//     flows.PipeliningBad).
//   - TestHWTargetPipeline: a target's read path, 1,000 reads with about 1 %
//     of the blocks corrupted, posted in batches whose fenced responses
//     follow all their data, a quarter of them unprotected and answered
//     at once, QP.RecoverSigStop after each stop wherever the device
//     stops (flows.TargetPipeline).
//
// rdma-core's RC atomics (tests/test_atomic.py): TestHWRCAtomics,
// compare-and-swap and fetch-and-add over a loopback pair, and each bad
// flow of the file (no remote atomic on the QP or the MR, a misaligned
// address, a bad lkey or rkey), a signature mkey, and a UC QP that mlx5
// refuses an atomic (flows.RCAtomics), on verbs QPs and DEVX ones.
//
// rdma-core's DC scenarios (tests/test_mlx5_dc.py, v44.0 and master): a
// client and a server, each with two DCIs, a DCT on an SRQ and one CQ,
// every work request naming the peer's DCT (its AH, number and rdma-core's
// key 0xbadc0de), every completion checked once on both sides, the data
// compared:
//
//   - TestHWDCTraffic: test_dc_send, test_dc_rdma_write, RDMA READs and
//     test_dc_atomic's fetch-and-adds, with compare-and-swaps
//     (flows.DCTraffic).
//   - TestHWDCStreams: test_dc_rdma_write_stream, stream ids rotated
//     within the DCIs' streams, and bursts over every stream with
//     unsignaled work (flows.DCStreams).
//   - TestHWDCStreamRecovery: test_dc_stream_ids_recovery, a remote access
//     error on a stream flushes that stream only, the DCI stays in RTS and
//     the stream is reset, 2^log_num_errored times (flows.DCStreamRecovery;
//     needs DEVX).
//   - TestHWDCQPRecovery: test_dc_stream_qp_recovery, 2^log_num_errored
//     errored streams take the DCI to ERR, RESET and RTS bring it back
//     (flows.DCQPRecovery).
//   - TestHWDCScale: an initiator of 4 DCIs of 8 streams reaches 256 DCTs
//     while one target after another has its MR revoked: only that
//     stream flushes, is reset and its work posted again; every wr_id
//     accounted for once (flows.DCScale; needs DEVX).
//
// The stream flows skip on a device without DCI streams, as rdma-core's.
//
// rdma-core's crypto scenarios (tests/test_mlx5_crypto.py, v44.0) on a
// ConnectX with AES-XTS crypto, every byte compared with the flows' own
// AES-XTS (IEEE 1619, proven by its vectors) and sig's engine; each skips
// with the reason on a device without crypto, and a device in wrapped
// import mode needs its crypto officer's credential and import KEK in
// MLX5GO_CRYPTO_CREDENTIAL_ID, MLX5GO_CRYPTO_CREDENTIAL,
// MLX5GO_CRYPTO_IMPORT_KEK_ID and MLX5GO_CRYPTO_IMPORT_KEK
// (flows.OfficerFromEnv); docs/CRYPTO.md is the guide:
//
//   - TestHWCryptoTraffic: test_mlx5_crypto_mkey_old_api, _wrapped_dek,
//     _plaintext_dek and the multi-block ones: SENDs through an
//     encrypting and a decrypting mkey, encrypt on RDMA WRITE and decrypt
//     on READ at either side, a receive through the mkey, an interleaved
//     layout (flows.CryptoTraffic).
//   - TestHWCryptoSignature: test_mlx5_crypto_signature_mkey with
//     T10-DIF, in both orders (the man page's rows B, C, H, J), a
//     corrupted ciphertext found by the guard, the refused orders
//     (flows.CryptoSignature).
//   - TestHWCryptoWrappedLogin: test_mlx5_dek_management: the session,
//     a wrong credential, the login object, wrapped DEKs
//     (flows.CryptoWrappedLogin).
//   - TestHWCryptoDEKLifecycle: DEK query and destroy, destroy refused
//     while an mkey uses it, the refusals (flows.CryptoDEKLifecycle).
//   - TestHWCryptoBadKeytag, TestHWCryptoJobSize: a keytag mismatch and
//     the man page's job sizes (flows.CryptoBadKeytag,
//     flows.CryptoJobSize).
//
// Through a signature mkey an SGE's length counts the wire's bytes
// (mlx5.SendWR), as those scenarios show.
//
// Its subdirectory lab is the kernel lab: Debian's kernel under QEMU with
// ib_uverbs, rdma_rxe and mlx5_ib, where the project's TestLab* tests run.
package hwtest
