// Package labenv tells tests whether they run inside the kernel lab (the
// QEMU guest that hwtest/lab boots) and skips them with the reason when they
// do not. It imports only the standard library.
package labenv

import (
	"os"
	"testing"
)

// EnvVar is set to "1" by the lab's guest init for every test binary.
const EnvVar = "MLX5GO_LAB"

// RXEDevice and Netdev are the rdma_rxe device and the dummy netdev the lab
// sets up before it runs tests.
const (
	RXEDevice = "rxe0"
	Netdev    = "dummy0"
)

// InLab reports whether the test binary runs inside the kernel lab.
func InLab() bool { return os.Getenv(EnvVar) == "1" }

// Require skips t unless it runs inside the kernel lab. Inside the lab a
// lab test must not skip for a missing resource: the lab promised it, so the
// test fails instead.
func Require(t testing.TB) {
	t.Helper()
	if !InLab() {
		t.Skip("needs the kernel lab (Debian's kernel under QEMU with ib_uverbs, rdma_rxe, mlx5_ib): run `go run ./hwtest/lab`")
	}
}

// QEMUUserVar is set to "1" by scripts/test when it runs the linux/arm64
// tests under qemu-user (go test -exec qemu-aarch64-static).
const QEMUUserVar = "MLX5GO_QEMU_USER"

// SkipUnderQEMUUser skips t, with the reason, when the tests run under
// qemu-user: for the few tests that exercise something qemu emulates
// differently from a kernel (its own /proc/self/maps, for one).
func SkipUnderQEMUUser(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(QEMUUserVar) == "1" {
		t.Skip("under qemu-user: " + reason)
	}
}
