// Package sig is the block signature (data integrity) model of mlx5
// signature mkeys: what mlx5dv_wr_set_mkey_sig_block configures and
// mlx5dv_mkey_check reports, as plain Go that needs no device.
//
// BlockAttr, Domain, T10DIF and CRC carry the semantics of rdma-core's
// struct mlx5dv_sig_block_attr, mlx5dv_sig_block_domain, mlx5dv_sig_t10dif
// and mlx5dv_sig_crc, with the C enum values; BlockAttr.Validate applies
// the man page's rules as libmlx5 enforces them and returns an *AttrError
// that errors.Is matches against the broken rule.
//
// An Engine, built once from a valid BlockAttr, does to caller-provided
// buffers what the device does between the memory and wire domains:
// Generate inserts signatures in place, Check validates them, Transfer
// moves a buffer from one domain's layout to the other's (TX: memory to
// wire, RX: wire to memory), checking per the check mask, stripping,
// generating, and copying per the copy mask. A bad block is reported as an
// MkeyErr, the shape mlx5dv_mkey_check returns. The engine allocates
// nothing per buffer.
//
// A domain with a signature lays its data out in blocks, each followed by
// its signature: the 8-byte T10-DIF tuple (guard, application tag,
// reference tag, big-endian), a 4-byte CRC32 or CRC32C, or an 8-byte
// CRC64_XP10. A domain without one (a nil *Domain) holds plain data.
// docs/SIG.md says which of these semantics are confirmed and how.
//
// CRC64_XP10's parameters are not public: the engine's CRC-64 is a
// parameter (WithCRC64), Candidates lists the unverified guesses and
// MatchCRC64 is what a hardware test uses to settle them.
//
// sig imports the standard library and sig/crc (whose assembly is chosen
// with golang.org/x/sys/cpu), and makes no system calls. Users use it to prepare and check protection information, the
// software device model uses it, and it is the reference hardware results
// are compared with.
package sig
