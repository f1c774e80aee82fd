// Package kernel finds, downloads and caches Debian kernels for the kernel
// lab, and resolves the load order of the modules the lab needs.
//
// A kernel is chosen by Debian suite (bookworm, trixie, sid, ...): the
// kernel that suite's linux-image-amd64 depends on today, with the suite's
// -updates and -security suites, as a Debian user of that release gets it.
// Nothing is pinned, so the lab follows Debian's kernel updates. The
// suite's package lists are fetched with a private apt configuration under
// the lab's cache (the host's apt configuration is only read, to find the
// mirror it uses, and never changed); apt checks the signatures and the
// .deb's SHA256. Extracted kernels are cached by package name and
// version, and a cached kernel is used without network.
package kernel

import (
	"context"
	"errors"
	"fmt"
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

// Suites are the kernels the lab's matrix runs (scripts/test): Debian 12,
// Debian 13 and Debian unstable.
var Suites = []string{"bookworm", "trixie", "sid"}

// DefaultCache is the lab's cache directory: $MLX5GO_LAB_CACHE, else
// mlx5go-lab under the user cache directory (~/.cache/mlx5go-lab).
func DefaultCache() string {
	if d := os.Getenv("MLX5GO_LAB_CACHE"); d != "" {
		return d
	}
	userCache, _ := os.UserCacheDir()
	return filepath.Join(userCache, "mlx5go-lab")
}

// Kernel is an extracted Debian kernel.
type Kernel struct {
	Suite   string // Debian suite it was chosen from, e.g. trixie ("" if unknown)
	Package string // e.g. linux-image-6.1.0-56-amd64
	Version string // Debian package version, e.g. 6.1.192-2
	Release string // uname -r, e.g. 6.1.0-56-amd64
	Root    string // extraction root: boot/, lib/modules/ or usr/lib/modules/ are below it

	vmlinuz string // relative to Root
	modDir  string // relative to Root

	depends func(path string) ([]string, error) // ModinfoDepends; tests replace it
}

// String names the kernel for results: suite, package, version, release.
func (k *Kernel) String() string {
	s := fmt.Sprintf("%s %s (%s)", k.Package, k.Version, k.Release)
	if k.Suite != "" {
		s = k.Suite + " " + s
	}
	return s
}

// Vmlinuz is the path of the kernel image.
func (k *Kernel) Vmlinuz() string { return filepath.Join(k.Root, k.vmlinuz) }

// ModuleDir is the kernel's module directory, lib/modules/RELEASE or
// usr/lib/modules/RELEASE under the extraction root.
func (k *Kernel) ModuleDir() string { return filepath.Join(k.Root, k.modDir) }

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

// Choice is what -kernel names: a suite, or a kernel image package (with
// an optional version) looked up in a suite's lists.
type Choice struct {
	Suite   string // "" means: look in Suites, in order
	Package string // "" means: what the suite's linux-image-amd64 depends on
	Version string
}

var (
	suiteRE   = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	packageRE = regexp.MustCompile(`^linux-image-[0-9][A-Za-z0-9.+~-]*$`)
)

// ParseChoice parses SUITE, linux-image-ABI[=VERSION] or
// SUITE/linux-image-ABI[=VERSION].
func ParseChoice(s string) (Choice, error) {
	var c Choice
	suite, pkg, hasPkg := strings.Cut(s, "/")
	if !hasPkg && strings.HasPrefix(s, "linux-image-") {
		suite, pkg, hasPkg = "", s, true
	}
	if suite != "" || !hasPkg {
		if !suiteRE.MatchString(suite) || strings.HasPrefix(suite, "linux-") {
			return Choice{}, fmt.Errorf("kernel %q: want a Debian suite (%s), linux-image-ABI[=VERSION] or SUITE/linux-image-ABI[=VERSION]", s, strings.Join(Suites, ", "))
		}
		c.Suite = suite
	}
	if hasPkg {
		c.Package, c.Version, _ = strings.Cut(pkg, "=")
		if !packageRE.MatchString(c.Package) {
			return Choice{}, fmt.Errorf("kernel %q: %q is not a linux-image package name", s, c.Package)
		}
	}
	return c, nil
}

func (c Choice) String() string {
	s := c.Suite
	if c.Package != "" {
		if s != "" {
			s += "/"
		}
		s += c.Package
		if c.Version != "" {
			s += "=" + c.Version
		}
	}
	return s
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// mirror is the Debian mirror: MirrorEnv, or the one the host's apt uses.
func mirror() (Mirror, error) {
	if m := strings.TrimSuffix(os.Getenv(MirrorEnv), "/"); m != "" {
		return Mirror{Archive: m, Security: m + "-security"}, nil
	}
	return HostMirror("/etc")
}

// Resolve returns the chosen kernel, extracted under cacheDir, downloading
// it if it is not cached yet. A suite's lists are refreshed when older than
// listsMaxAge, and once more if they name a version the mirror dropped.
// With no network it uses the lists it has, then the newest cached kernel
// of the suite; with neither it fails saying so.
func Resolve(ctx context.Context, cacheDir string, c Choice, logf Logf) (*Kernel, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	if c.Suite == "" {
		var errs []error
		for _, s := range Suites {
			c.Suite = s
			k, err := Resolve(ctx, cacheDir, c, logf)
			if err == nil {
				return k, nil
			}
			errs = append(errs, err)
		}
		return nil, fmt.Errorf("lab: %s is in none of %v: %w", c.Package, Suites, errors.Join(errs...))
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fallback(cacheDir, c, logf, errors.New("apt-get not found: the lab fetches Debian kernels with apt"))
	}
	m, err := mirror()
	if err != nil {
		return fallback(cacheDir, c, logf, err)
	}
	a, err := newAptDir(cacheDir, c.Suite, m)
	if err != nil {
		return nil, err
	}
	updated := false
	update := func() error {
		updated = true
		logf("lab: apt-get update for %s (private lists in %s)", c.Suite, a.dir)
		return a.update(ctx)
	}
	if !a.fresh(listsMaxAge) {
		if err := update(); err != nil {
			if !a.hasLists() {
				return fallback(cacheDir, c, logf, err)
			}
			logf("lab: %v; using the %s lists from the last update", err, c.Suite)
		}
	}
	for {
		pkg, ver, err := candidate(ctx, a, c)
		if err == nil {
			var k *Kernel
			k, err = fetch(ctx, a, cacheDir, pkg, ver, logf)
			if err == nil {
				return k, nil
			}
		}
		if updated {
			return fallback(cacheDir, c, logf, err)
		}
		if uerr := update(); uerr != nil {
			return fallback(cacheDir, c, logf, fmt.Errorf("%v; %v", err, uerr))
		}
	}
}

// candidate names the kernel image package and version of the choice in
// the suite's lists.
func candidate(ctx context.Context, a *aptDir, c Choice) (pkg, ver string, err error) {
	if c.Package != "" {
		spec := c.Package
		if c.Version != "" {
			spec += "=" + c.Version
		}
		f, err := a.show(ctx, spec)
		if err != nil {
			return "", "", err
		}
		if f["Version"] == "" {
			return "", "", fmt.Errorf("%s: %s not found", c.Suite, spec)
		}
		return c.Package, f["Version"], nil
	}
	f, err := a.show(ctx, MetaPackage)
	if err != nil {
		return "", "", err
	}
	return ParseDepends(f["Depends"])
}

func fallback(cacheDir string, c Choice, logf Logf, cause error) (*Kernel, error) {
	ks, _ := Cached(cacheDir)
	var k *Kernel
	for _, x := range ks {
		if x.Suite == c.Suite && (c.Package == "" || c.Package == x.Package) && (c.Version == "" || c.Version == x.Version) {
			k = x
		}
	}
	if k == nil {
		return nil, fmt.Errorf("lab: cannot get the %s kernel (is the network or the Debian mirror reachable?): %w", c, cause)
	}
	logf("lab: could not resolve the %s kernel (%v); using cached %s", c, cause, k)
	return k, nil
}

// marker is written last into a cache entry: an entry without it is
// incomplete and is rebuilt.
const marker = "mlx5go-lab-ready"

func entryDir(cacheDir, pkg, ver string) string {
	return filepath.Join(cacheDir, pkg+"_"+strings.ReplaceAll(ver, ":", "%3a"))
}

// kernelPartRE matches the packages a split kernel image depends on for
// its parts (Debian 14 on: linux-binary-ABI holds vmlinuz, linux-modules-ABI
// the modules, linux-base-ABI modules.builtin and config).
var kernelPartRE = regexp.MustCompile(`(linux-[a-z]+-[0-9][^ ,()|]*-amd64)(?: \(= ([^)]+)\))?`)

func fetch(ctx context.Context, a *aptDir, cacheDir, pkg, ver string, logf Logf) (*Kernel, error) {
	dir := entryDir(cacheDir, pkg, ver)
	if k, err := load(dir); err == nil {
		if k.Suite == "" {
			// An entry from before the matrix: record its suite, so that
			// an offline run finds it as that suite's cached kernel.
			k.Suite = a.suite
			if f, err := os.OpenFile(filepath.Join(dir, marker), os.O_APPEND|os.O_WRONLY, 0); err == nil {
				fmt.Fprintf(f, "suite=%s\n", a.suite)
				f.Close()
			}
		}
		return k, nil
	}
	logf("lab: downloading %s %s (%s)", pkg, ver, a.suite)
	tmp, err := os.MkdirTemp(cacheDir, ".download-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "root")
	abi := strings.TrimPrefix(pkg, "linux-image-")
	queue := []string{pkg + "=" + ver}
	seen := map[string]bool{pkg: true}
	for len(queue) > 0 {
		name, v, _ := strings.Cut(queue[0], "=")
		queue = queue[1:]
		deb, err := a.download(ctx, tmp, name, v)
		if err != nil {
			return nil, err
		}
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("dpkg-deb -x %s: %w\n%s", filepath.Base(deb), err, tail(out, 1500))
		}
		deps, err := exec.CommandContext(ctx, "dpkg-deb", "-f", deb, "Depends").Output()
		if err != nil {
			return nil, fmt.Errorf("dpkg-deb -f %s Depends: %w", filepath.Base(deb), err)
		}
		os.Remove(deb)
		// The image's own parts, of the same ABI and version.
		for _, m := range kernelPartRE.FindAllStringSubmatch(string(deps), -1) {
			if !strings.HasSuffix(m[1], "-"+abi) || seen[m[1]] {
				continue
			}
			seen[m[1]] = true
			queue = append(queue, m[1]+"="+m[2])
		}
	}
	vmlinuz, modDir, release, err := layout(root)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", pkg, ver, err)
	}
	info := fmt.Sprintf("suite=%s\npackage=%s\nversion=%s\nrelease=%s\nvmlinuz=%s\nmoddir=%s\n", a.suite, pkg, ver, release, vmlinuz, modDir)
	if err := os.WriteFile(filepath.Join(root, marker), []byte(info), 0o644); err != nil {
		return nil, err
	}
	os.RemoveAll(dir)
	if err := os.Rename(root, dir); err != nil {
		return nil, err
	}
	return load(dir)
}

// layout finds the kernel image and the module directory of an extracted
// kernel: boot/vmlinuz-RELEASE (Debian 12, 13) or
// usr/lib/modules/RELEASE/vmlinuz (Debian 14), and lib/modules/RELEASE or
// usr/lib/modules/RELEASE.
func layout(root string) (vmlinuz, modDir, release string, err error) {
	var images []string
	b, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	images = append(images, b...)
	for _, pat := range []string{"lib/modules/*/vmlinuz", "usr/lib/modules/*/vmlinuz"} {
		m, _ := filepath.Glob(filepath.Join(root, pat))
		images = append(images, m...)
	}
	if len(images) != 1 {
		return "", "", "", fmt.Errorf("%d kernel images (boot/vmlinuz-*, lib/modules/*/vmlinuz), want 1", len(images))
	}
	if filepath.Base(images[0]) == "vmlinuz" {
		release = filepath.Base(filepath.Dir(images[0]))
	} else {
		release = strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")
	}
	vmlinuz, _ = filepath.Rel(root, images[0])
	for _, d := range []string{"lib/modules/" + release, "usr/lib/modules/" + release} {
		if st, err := os.Stat(filepath.Join(root, d, "kernel")); err == nil && st.IsDir() {
			return vmlinuz, d, release, nil
		}
	}
	return "", "", "", fmt.Errorf("no module directory for %s (lib/modules or usr/lib/modules)", release)
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
		case "suite":
			k.Suite = val
		case "package":
			k.Package = val
		case "version":
			k.Version = val
		case "release":
			k.Release = val
		case "vmlinuz":
			k.vmlinuz = val
		case "moddir":
			k.modDir = val
		}
	}
	if k.Release == "" {
		return nil, fmt.Errorf("%s: incomplete cache entry", dir)
	}
	// Entries written before the matrix: Debian 12's layout.
	if k.vmlinuz == "" {
		k.vmlinuz = filepath.Join("boot", "vmlinuz-"+k.Release)
	}
	if k.modDir == "" {
		k.modDir = filepath.Join("lib", "modules", k.Release)
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
