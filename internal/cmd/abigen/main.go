// Command abigen generates mlx5go's mirrors of the kernel's uverbs and
// mlx5 ABI (internal/uverbsabi, internal/mlx5abi: the enums and structs
// internal/abigen's spec lists) from the BTF of Debian's kernels, read on
// the host: vmlinux's from the compressed kernel image, each module's from
// its .BTF section. The kernels are the kernel lab's (internal/lab/kernel:
// each suite's current kernel, downloaded once into the lab's cache), the
// oldest first; a struct's layout is the oldest kernel's unless the spec
// names a newer one.
//
// It also writes the BTF it read, reduced to the types used, to
// internal/abigen/testdata/SUITE.btf (with the kernels' names in
// testdata/kernels), from which internal/abigen's test regenerates the
// files and fails if a committed one differs.
//
//	go run ./internal/cmd/abigen                # from the lab's kernels (network on first use)
//	go run ./internal/cmd/abigen -snapshot      # again from the committed snapshot, offline
//
// Run it from the repository root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/mlx5go/mlx5go/internal/abigen"
	"github.com/mlx5go/mlx5go/internal/lab/kernel"
)

func main() {
	cache := flag.String("cache", kernel.DefaultCache(), "the kernel lab's cache (env MLX5GO_LAB_CACHE)")
	snapshot := flag.Bool("snapshot", false, "regenerate from internal/abigen/testdata instead of the kernels")
	flag.Parse()
	if err := run(*cache, *snapshot); err != nil {
		fmt.Fprintln(os.Stderr, "abigen:", err)
		os.Exit(1)
	}
}

func run(cache string, fromSnapshot bool) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run it from the repository root: %w", err)
	}
	var kernels map[string]*abigen.Kernel
	var err error
	if fromSnapshot {
		kernels, err = abigen.LoadTestdata(abigen.TestdataDir)
	} else {
		kernels, err = fromLab(cache)
	}
	if err != nil {
		return err
	}
	out, err := abigen.Generate(abigen.Packages, kernels)
	if err != nil {
		return err
	}
	for p, src := range out.Files {
		if err := os.WriteFile(p, src, 0o644); err != nil {
			return err
		}
	}
	if fromSnapshot {
		return nil
	}
	return abigen.WriteTestdata(abigen.TestdataDir, kernels, out.Used)
}

// fromLab reads the BTF of each suite's kernel from the lab's cache,
// downloading the kernel first if it is not there.
func fromLab(cache string) (map[string]*abigen.Kernel, error) {
	modules := map[string]bool{}
	for _, p := range abigen.Packages {
		for _, m := range p.Modules {
			if m != "vmlinux" {
				modules[m] = true
			}
		}
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "abigen: "+format+"\n", args...) }
	out := map[string]*abigen.Kernel{}
	for _, suite := range abigen.Kernels {
		k, err := kernel.Resolve(context.Background(), cache, kernel.Choice{Suite: suite}, logf)
		if err != nil {
			return nil, err
		}
		logf("reading the BTF of %s", k)
		vmlinux, err := k.VmlinuxBTF()
		if err != nil {
			return nil, err
		}
		raw := map[string][]byte{}
		for m := range modules {
			if raw[m], err = k.ModuleBTF(m); err != nil {
				return nil, err
			}
		}
		ak, err := abigen.NewKernel(suite, k.Release, strings.TrimSpace(k.Package+" "+k.Version), vmlinux, raw)
		if err != nil {
			return nil, err
		}
		out[suite] = ak
	}
	return out, nil
}
