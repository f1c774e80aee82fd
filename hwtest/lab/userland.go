package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlx5go/mlx5go/internal/lab/cpio"
	"github.com/mlx5go/mlx5go/internal/lab/kernel"
)

// userlandArchive returns a cpio of the Debian userland the guest gets
// (kernel.UserlandPackages of the kernel's suite: librdmacm's example
// programs and their libraries), cached beside the unpacked packages, and
// the packages it holds.
func userlandArchive(ctx context.Context, c config, k *kernel.Kernel) (string, []string, error) {
	suite := k.Suite
	if suite == "" {
		suite = kernel.Suites[0]
	}
	u, err := kernel.ResolveUserland(ctx, c.cache, suite, kernel.UserlandPackages, logf)
	if err != nil {
		return "", nil, err
	}
	files, err := u.GuestFiles()
	if err != nil {
		return "", nil, err
	}
	var key strings.Builder
	key.WriteString("userland-cpio-v1\n")
	for _, f := range files {
		fmt.Fprintf(&key, "%s %o %s\n", f.Path, f.Mode, f.Src)
	}
	sum := sha256.Sum256([]byte(key.String()))
	path := filepath.Join(u.Root, "lab-userland-"+hex.EncodeToString(sum[:8])+".cpio")
	if _, err := os.Stat(path); err == nil {
		return path, u.Packages, nil
	}
	tmp := path + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return "", nil, err
	}
	w := cpio.NewWriter(out)
	for _, f := range files {
		if err := w.File(f.Path, uint32(f.Mode), f.Src); err != nil {
			out.Close()
			return "", nil, err
		}
	}
	if err := w.Close(); err != nil {
		out.Close()
		return "", nil, err
	}
	if err := out.Close(); err != nil {
		return "", nil, err
	}
	return path, u.Packages, os.Rename(tmp, path)
}
