// Package kernel finds, downloads and caches Debian's current kernel for the
// kernel lab, and resolves the load order of the modules the lab needs.
//
// Nothing is pinned: the kernel package is whatever linux-image-amd64
// depends on in the machine's apt lists, so the lab follows Debian's
// security updates and new kernel ABIs. Extracted kernels are cached by
// package name and version; a cached kernel is used without network.
package kernel

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// MetaPackage is the Debian package that always depends on the current
// kernel image.
const MetaPackage = "linux-image-amd64"

// Kernel is an extracted Debian kernel.
type Kernel struct {
	Package string // e.g. linux-image-6.1.0-56-amd64
	Version string // Debian package version, e.g. 6.1.192-2
	Release string // uname -r, e.g. 6.1.0-56-amd64
	Root    string // extraction root: boot/ and lib/modules/ are below it
}

// Vmlinuz is the path of the kernel image.
func (k *Kernel) Vmlinuz() string { return filepath.Join(k.Root, "boot", "vmlinuz-"+k.Release) }

// ModuleDir is lib/modules/RELEASE under the extraction root.
func (k *Kernel) ModuleDir() string { return filepath.Join(k.Root, "lib", "modules", k.Release) }

// Logf reports progress.
type Logf func(format string, args ...any)

var dependsRE = regexp.MustCompile(`(linux-image-[0-9][^ ,()]*-amd64)(?: \(= ([^)]+)\))?`)

// ParseDepends extracts the kernel image package and version from the
// Depends line of linux-image-amd64 (apt-cache show or dpkg-deb -f).
func ParseDepends(depends string) (pkg, version string, err error) {
	m := dependsRE.FindStringSubmatch(depends)
	if m == nil {
		return "", "", fmt.Errorf("no linux-image-*-amd64 in Depends %q", depends)
	}
	return m[1], m[2], nil
}

// candidate asks the local apt lists (no network) which kernel image
// linux-image-amd64 depends on.
func candidate(ctx context.Context) (pkg, version string, err error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "show", "--no-all-versions", MetaPackage).Output()
	if err != nil {
		return "", "", fmt.Errorf("apt-cache show %s: %w", MetaPackage, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "Depends:"); ok {
			return ParseDepends(d)
		}
	}
	return "", "", fmt.Errorf("apt-cache show %s: no Depends line", MetaPackage)
}

func run(ctx context.Context, dir string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out, 1500))
	}
	return nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Resolve returns Debian's current kernel, extracted under cacheDir,
// downloading it if it is not cached yet. If the apt lists are missing or
// name a version the mirror no longer has, it runs apt-get update once. With
// no network and an empty cache it fails saying so; with no network and a
// cached kernel it uses the newest cached one.
func Resolve(ctx context.Context, cacheDir string, logf Logf) (*Kernel, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	updated := false
	update := func() error {
		updated = true
		logf("lab: apt-get update (to find Debian's current kernel)")
		return run(ctx, "", "apt-get", "update")
	}
	pkg, ver, err := candidate(ctx)
	if err != nil {
		if uerr := update(); uerr != nil {
			return fallback(cacheDir, logf, fmt.Errorf("%v; %v", err, uerr))
		}
		if pkg, ver, err = candidate(ctx); err != nil {
			return fallback(cacheDir, logf, err)
		}
	}
	for {
		k, err := fetch(ctx, cacheDir, pkg, ver, logf)
		if err == nil {
			return k, nil
		}
		if updated {
			return fallback(cacheDir, logf, err)
		}
		if uerr := update(); uerr != nil {
			return fallback(cacheDir, logf, fmt.Errorf("%v; %v", err, uerr))
		}
		if pkg, ver, err = candidate(ctx); err != nil {
			return fallback(cacheDir, logf, err)
		}
	}
}

func fallback(cacheDir string, logf Logf, cause error) (*Kernel, error) {
	ks, _ := Cached(cacheDir)
	if len(ks) == 0 {
		return nil, fmt.Errorf("lab: cannot get Debian's kernel (is the network or the Debian mirror reachable?): %w", cause)
	}
	k := ks[len(ks)-1]
	logf("lab: could not resolve the current kernel (%v); using cached %s %s", cause, k.Package, k.Version)
	return k, nil
}

// marker is written last into a cache entry: an entry without it is
// incomplete and is rebuilt.
const marker = "mlx5go-lab-ready"

func entryDir(cacheDir, pkg, ver string) string {
	return filepath.Join(cacheDir, pkg+"_"+strings.ReplaceAll(ver, ":", "%3a"))
}

func fetch(ctx context.Context, cacheDir, pkg, ver string, logf Logf) (*Kernel, error) {
	dir := entryDir(cacheDir, pkg, ver)
	if k, err := load(dir); err == nil {
		return k, nil
	}
	logf("lab: downloading %s %s", pkg, ver)
	tmp, err := os.MkdirTemp(cacheDir, ".download-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	spec := pkg
	if ver != "" {
		spec = pkg + "=" + ver
	}
	if err := run(ctx, tmp, "apt-get", "download", spec); err != nil {
		return nil, err
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return nil, fmt.Errorf("apt-get download %s: expected one .deb, found %d", spec, len(debs))
	}
	root := filepath.Join(tmp, "root")
	if err := run(ctx, tmp, "dpkg-deb", "-x", debs[0], root); err != nil {
		return nil, err
	}
	vmlinuz, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(vmlinuz) != 1 {
		return nil, fmt.Errorf("%s has %d kernel images, want 1", pkg, len(vmlinuz))
	}
	release := strings.TrimPrefix(filepath.Base(vmlinuz[0]), "vmlinuz-")
	info := fmt.Sprintf("package=%s\nversion=%s\nrelease=%s\n", pkg, ver, release)
	if err := os.WriteFile(filepath.Join(root, marker), []byte(info), 0o644); err != nil {
		return nil, err
	}
	os.RemoveAll(dir)
	if err := os.Rename(root, dir); err != nil {
		return nil, err
	}
	return load(dir)
}

func load(dir string) (*Kernel, error) {
	b, err := os.ReadFile(filepath.Join(dir, marker))
	if err != nil {
		return nil, err
	}
	k := &Kernel{Root: dir}
	for _, l := range strings.Split(string(b), "\n") {
		key, val, _ := strings.Cut(l, "=")
		switch key {
		case "package":
			k.Package = val
		case "version":
			k.Version = val
		case "release":
			k.Release = val
		}
	}
	if k.Release == "" {
		return nil, fmt.Errorf("%s: incomplete cache entry", dir)
	}
	if _, err := os.Stat(k.Vmlinuz()); err != nil {
		return nil, err
	}
	return k, nil
}

// Cached lists the complete cache entries, oldest release first.
func Cached(cacheDir string) ([]*Kernel, error) {
	ents, err := os.ReadDir(cacheDir)
	if err != nil {
		return nil, err
	}
	var ks []*Kernel
	for _, e := range ents {
		if k, err := load(filepath.Join(cacheDir, e.Name())); err == nil {
			ks = append(ks, k)
		}
	}
	sort.Slice(ks, func(i, j int) bool { return versionLess(ks[i].Version, ks[j].Version) })
	return ks, nil
}

var versionPartRE = regexp.MustCompile(`\d+|\D+`)

// versionLess orders Debian versions well enough for kernels: numeric runs
// compare as numbers.
func versionLess(a, b string) bool {
	pa, pb := versionPartRE.FindAllString(a, -1), versionPartRE.FindAllString(b, -1)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		var na, nb int
		if _, err := fmt.Sscan(pa[i], &na); err == nil {
			if _, err := fmt.Sscan(pb[i], &nb); err == nil {
				return na < nb
			}
		}
		return pa[i] < pb[i]
	}
	return len(pa) < len(pb)
}

// Normalize maps a module name to the form the kernel uses (dashes become
// underscores).
func Normalize(name string) string { return strings.ReplaceAll(name, "-", "_") }

// ModuleOrder returns the .ko paths (relative to ModuleDir) for the named
// modules and everything they depend on, in an order that loads every
// dependency before its users, keeping the requested order otherwise. The
// dependencies are read from each module's .modinfo, so no depmod is needed.
func (k *Kernel) ModuleOrder(names []string) ([]string, error) {
	index := map[string]string{}
	base := k.ModuleDir()
	err := filepath.WalkDir(filepath.Join(base, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			rel, _ := filepath.Rel(base, p)
			index[Normalize(strings.TrimSuffix(d.Name(), ".ko"))] = rel
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var order []string
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
			if from != "" {
				return fmt.Errorf("module %s (needed by %s) is not in %s", name, from, k.Package)
			}
			return fmt.Errorf("module %s is not in %s", name, k.Package)
		}
		state[name] = 1
		deps, err := ModinfoDepends(filepath.Join(base, rel))
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, rel)
		return nil
	}
	for _, n := range names {
		if err := visit(n, ""); err != nil {
			return nil, err
		}
	}
	return order, nil
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
