// Package hwtest runs mlx5go's flows on a real ConnectX when one is
// present, and skips each test with the reason when none is. Its
// subdirectory lab is the kernel lab: Debian's kernel under QEMU with
// ib_uverbs, rdma_rxe and mlx5_ib, where the project's TestLab* tests run.
package hwtest
