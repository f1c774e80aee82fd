// Package sig is the block signature (data integrity) model of mlx5
// signature mkeys: configuration types with rdma-core's validation rules,
// the checksums (CRC-16/T10-DIF, IP checksum, CRC32, CRC32C, CRC64), and a
// software engine that does to a buffer what the device does between the
// memory and wire domains.
//
// It needs no device and imports only the standard library. Users use it to
// prepare and check protection information, the software device model uses
// it, and it is the reference hardware results are compared with.
package sig
