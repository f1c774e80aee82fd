package kernel

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Normalize maps a module name to the form the kernel uses (dashes become
// underscores).
func Normalize(name string) string { return strings.ReplaceAll(name, "-", "_") }

// Module is a loadable module the lab puts in its initramfs.
type Module struct {
	Name string // normalized, e.g. mlx5_ib
	Rel  string // uncompressed path relative to ModuleDir, e.g. kernel/drivers/.../mlx5_ib.ko
	Path string // that file on the host (decompressed into the cache if the package compresses it)
}

// compressions are the module file suffixes Debian kernels use (6.1: none;
// 6.12 and later: .ko.xz) and the ones the kernel's build can produce.
var compressions = []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"}

func moduleName(file string) (string, bool) {
	for _, suf := range compressions {
		if strings.HasSuffix(file, suf) {
			return Normalize(strings.TrimSuffix(file, suf)), true
		}
	}
	return "", false
}

// Builtin returns the modules built into the kernel image, from
// modules.builtin.
func (k *Kernel) Builtin() (map[string]bool, error) {
	f, err := os.Open(filepath.Join(k.ModuleDir(), "modules.builtin"))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n, ok := moduleName(filepath.Base(strings.TrimSpace(sc.Text()))); ok {
			out[n] = true
		}
	}
	return out, sc.Err()
}

// ModuleOrder returns the modules to load for names and everything they
// depend on, in an order that loads every dependency before its users,
// keeping the requested order otherwise, and the modules it skipped because
// the kernel has them built in (a built-in module is not an error). A name
// may list alternatives, "a|b": the first one this kernel has, as a file or
// built in, is used (crc32_generic became crc32_cryptoapi in 6.15). The
// dependencies are read from each module's .modinfo, so no depmod is
// needed; compressed modules (.ko.xz, .ko.zst, .ko.gz) are decompressed
// once into the kernel's cache entry.
func (k *Kernel) ModuleOrder(names []string) (mods []Module, builtin []string, err error) {
	index, err := k.moduleIndex()
	if err != nil {
		return nil, nil, err
	}
	inKernel, err := k.Builtin()
	if err != nil {
		return nil, nil, err
	}
	depends := k.depends
	if depends == nil {
		depends = ModinfoDepends
	}
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name, from string) error
	visit = func(name, from string) error {
		name = Normalize(name)
		switch state[name] {
		case 1:
			return fmt.Errorf("module dependency cycle at %s", name)
		case 2:
			return nil
		}
		rel, ok := index[name]
		if !ok {
			if inKernel[name] {
				state[name] = 2
				builtin = append(builtin, name)
				return nil
			}
			if from != "" {
				return fmt.Errorf("module %s (needed by %s) is neither in %s nor built in", name, from, k.Package)
			}
			return fmt.Errorf("module %s is neither in %s nor built in", name, k.Package)
		}
		state[name] = 1
		plain, err := k.plainModule(rel)
		if err != nil {
			return err
		}
		deps, err := depends(plain)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		prel, _ := filepath.Rel(k.plainRoot(rel), plain)
		mods = append(mods, Module{Name: name, Rel: prel, Path: plain})
		return nil
	}
	for _, n := range names {
		alts := strings.Split(n, "|")
		chosen := alts[0]
		for _, a := range alts {
			if _, ok := index[Normalize(a)]; ok || inKernel[Normalize(a)] {
				chosen = a
				break
			}
		}
		if err := visit(chosen, ""); err != nil {
			return nil, nil, err
		}
	}
	return mods, builtin, nil
}

// moduleIndex maps every module's name to its path relative to
// ModuleDir, as packaged.
func (k *Kernel) moduleIndex() (map[string]string, error) {
	index := map[string]string{}
	base := k.ModuleDir()
	err := filepath.WalkDir(filepath.Join(base, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n, ok := moduleName(d.Name()); ok && !d.IsDir() {
			rel, _ := filepath.Rel(base, p)
			index[n] = rel
		}
		return nil
	})
	return index, err
}

// plainRoot is the directory the uncompressed module rel lives under: the
// module directory itself, or the decompression cache beside it.
func (k *Kernel) plainRoot(rel string) string {
	if strings.HasSuffix(rel, ".ko") {
		return k.ModuleDir()
	}
	return filepath.Join(k.Root, "lab-ko")
}

// plainModule returns the host path of module rel, uncompressed: the file
// itself, or its copy decompressed (once) under Root/lab-ko. xz and zstd
// are run as the host's xz and zstd (Debian's xz-utils and zstd, which
// scripts/test installs); Go's standard library has neither.
func (k *Kernel) plainModule(rel string) (string, error) {
	src := filepath.Join(k.ModuleDir(), rel)
	if strings.HasSuffix(rel, ".ko") {
		return src, nil
	}
	ext := filepath.Ext(rel)
	dst := filepath.Join(k.plainRoot(rel), strings.TrimSuffix(rel, ext))
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	f, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	out, err := decompress(rel, ext, f)
	if err != nil {
		return "", err
	}
	return dst, writeAtomic(dst, out)
}

// writeAtomic writes b to path through a temporary file, so that a
// reader never sees half of it.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// decompress returns what r holds uncompressed, by the compression its
// name's extension ext names (.gz, .xz or .zst); what names r in errors.
// xz and zstd are run as the host's xz and zstd (Debian's xz-utils and
// zstd, which scripts/test installs); Go's standard library has neither.
func decompress(what, ext string, r io.Reader) ([]byte, error) {
	var out bytes.Buffer
	switch ext {
	case ".gz":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if _, err := io.Copy(&out, zr); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	case ".xz", ".zst":
		tool, pkg := "xz", "xz-utils"
		if ext == ".zst" {
			tool, pkg = "zstd", "zstd"
		}
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is compressed with %s, and %s is not installed: apt-get install -y %s (the README's test command does this)", what, tool, tool, pkg)
		}
		cmd := exec.Command(tool, "-dc")
		cmd.Stdin = r
		cmd.Stdout = &out
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s -dc %s: %w: %s", tool, what, err, stderr.Bytes())
		}
	default:
		return nil, fmt.Errorf("%s: unknown compression %q", what, ext)
	}
	return out.Bytes(), nil
}

// ModinfoDepends reads the depends= entry of a module's .modinfo section.
func ModinfoDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("%s: no .modinfo section", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("%s: .modinfo: %w", path, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}
