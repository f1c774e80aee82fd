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
// Its subdirectory lab is the kernel lab: Debian's kernel under QEMU with
// ib_uverbs, rdma_rxe and mlx5_ib, where the project's TestLab* tests run.
package hwtest
