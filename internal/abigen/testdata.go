package abigen

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// TestdataDir is where internal/cmd/abigen writes the BTF snapshot,
// relative to the repository root.
const TestdataDir = "internal/abigen/testdata"

// kernelsFile names the snapshot's kernels, a line each: suite, release,
// Debian package and version.
const kernelsFile = "kernels"

// WriteTestdata writes, per suite, the BTF types used (SUITE.btf) and the
// kernels' names (kernels).
func WriteTestdata(dir string, kernels map[string]*Kernel, used map[string][]btf.Type) error {
	var names bytes.Buffer
	for _, suite := range Kernels {
		k := kernels[suite]
		raw, err := Snapshot(used[suite])
		if err != nil {
			return fmt.Errorf("snapshot of %s: %w", k.Describe(), err)
		}
		if err := os.WriteFile(filepath.Join(dir, suite+".btf"), raw, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&names, "%s %s %s\n", suite, k.Release, k.Package)
	}
	return os.WriteFile(filepath.Join(dir, kernelsFile), names.Bytes(), 0o644)
}

// LoadTestdata reads what WriteTestdata wrote.
func LoadTestdata(dir string) (map[string]*Kernel, error) {
	f, err := os.Open(filepath.Join(dir, kernelsFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]*Kernel{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 3)
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s: bad line %q", kernelsFile, sc.Text())
		}
		raw, err := os.ReadFile(filepath.Join(dir, fields[0]+".btf"))
		if err != nil {
			return nil, err
		}
		if out[fields[0]], err = LoadSnapshot(fields[0], fields[1], fields[2], raw); err != nil {
			return nil, err
		}
	}
	return out, sc.Err()
}
