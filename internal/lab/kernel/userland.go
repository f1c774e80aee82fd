package kernel

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// UserlandPackages are the Debian packages the lab's guest gets, so that
// lab tests can run code nobody here wrote against mlx5go: librdmacm's
// example programs (rdmacm-utils: ucmatose, cmtime, udaddy, rdma_server,
// ...) with the libraries they load, the rxe provider of libibverbs among
// them. A name that a suite only has with Debian's 64-bit time_t suffix
// ("t64") is taken with it.
var UserlandPackages = []string{
	"rdmacm-utils", "librdmacm1", "libibverbs1", "ibverbs-providers",
	"libnl-3-200", "libnl-route-3-200", "libc6", "libgcc-s1",
}

// Userland is a set of Debian packages unpacked for the guest.
type Userland struct {
	Suite    string
	Packages []string // "name=version", as downloaded
	Root     string   // the packages' files, unpacked with dpkg-deb -x
}

const userlandMarker = "mlx5go-lab-userland"

// ResolveUserland returns pkgs of suite unpacked under cacheDir,
// downloading them (with the suite's private apt configuration, which
// checks their signatures and hashes) unless the same versions are
// cached. With no network it uses the newest cached set of the suite.
func ResolveUserland(ctx context.Context, cacheDir, suite string, pkgs []string, logf Logf) (*Userland, error) {
	u, err := resolveUserland(ctx, cacheDir, suite, pkgs, logf)
	if err == nil {
		return u, nil
	}
	cached := cachedUserlands(cacheDir, suite)
	if len(cached) == 0 {
		return nil, fmt.Errorf("lab: cannot get the %s userland (%s): %w", suite, strings.Join(pkgs, " "), err)
	}
	logf("lab: could not resolve the %s userland (%v); using the cached %s", suite, err, cached[len(cached)-1].Root)
	return cached[len(cached)-1], nil
}

func resolveUserland(ctx context.Context, cacheDir, suite string, pkgs []string, logf Logf) (*Userland, error) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return nil, errors.New("apt-get not found: the lab fetches Debian packages with apt")
	}
	m, err := mirror()
	if err != nil {
		return nil, err
	}
	a, err := newAptDir(cacheDir, suite, m)
	if err != nil {
		return nil, err
	}
	if !a.fresh(listsMaxAge) {
		logf("lab: apt-get update for %s (private lists in %s)", suite, a.dir)
		if err := a.update(ctx); err != nil && !a.hasLists() {
			return nil, err
		}
	}
	var specs []string
	for _, p := range pkgs {
		name, ver, err := candidateOf(ctx, a, p)
		if err != nil {
			return nil, err
		}
		specs = append(specs, name+"="+ver)
	}
	sum := sha256.Sum256([]byte(suite + "\n" + strings.Join(specs, "\n")))
	dir := filepath.Join(cacheDir, "userland-"+suite+"-"+hex.EncodeToString(sum[:6]))
	if u, err := loadUserland(dir); err == nil {
		return u, nil
	}
	logf("lab: downloading the %s userland: %s", suite, strings.Join(specs, " "))
	tmp, err := os.MkdirTemp(cacheDir, ".download-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "root")
	for _, s := range specs {
		name, ver, _ := strings.Cut(s, "=")
		deb, err := a.download(ctx, tmp, name, ver)
		if err != nil {
			return nil, err
		}
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("dpkg-deb -x %s: %w\n%s", filepath.Base(deb), err, tail(out, 1500))
		}
		os.Remove(deb)
	}
	info := fmt.Sprintf("suite=%s\n", suite)
	for _, s := range specs {
		info += "package=" + s + "\n"
	}
	if err := os.WriteFile(filepath.Join(root, userlandMarker), []byte(info), 0o644); err != nil {
		return nil, err
	}
	os.RemoveAll(dir)
	if err := os.Rename(root, dir); err != nil {
		return nil, err
	}
	return loadUserland(dir)
}

// candidateOf is the package's candidate version, or that of its t64
// name.
func candidateOf(ctx context.Context, a *aptDir, name string) (string, string, error) {
	var errs []error
	for _, n := range []string{name, name + "t64"} {
		f, err := a.show(ctx, n)
		if err == nil && f["Version"] != "" {
			return n, f["Version"], nil
		}
		if err == nil {
			err = fmt.Errorf("%s: no version in %s", n, a.suite)
		}
		errs = append(errs, err)
	}
	return "", "", errors.Join(errs...)
}

func loadUserland(dir string) (*Userland, error) {
	b, err := os.ReadFile(filepath.Join(dir, userlandMarker))
	if err != nil {
		return nil, err
	}
	u := &Userland{Root: dir}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, "=")
		switch k {
		case "suite":
			u.Suite = v
		case "package":
			u.Packages = append(u.Packages, v)
		}
	}
	return u, nil
}

func cachedUserlands(cacheDir, suite string) []*Userland {
	m, _ := filepath.Glob(filepath.Join(cacheDir, "userland-"+suite+"-*"))
	var us []*Userland
	for _, d := range m {
		if u, err := loadUserland(d); err == nil {
			us = append(us, u)
		}
	}
	sort.Slice(us, func(i, j int) bool {
		si, _ := os.Stat(us[i].Root)
		sj, _ := os.Stat(us[j].Root)
		return si != nil && sj != nil && si.ModTime().Before(sj.ModTime())
	})
	return us
}

// GuestFile is one file of the userland as the guest gets it.
type GuestFile struct {
	Path string // in the guest, relative to /
	Src  string // the file on the host (symbolic links followed)
	Mode fs.FileMode
}

// merged is where Debian's merged /usr puts a top-level directory.
var merged = map[string]string{"lib": "usr/lib", "lib64": "usr/lib64", "bin": "usr/bin", "sbin": "usr/sbin"}

// GuestFiles lists what the guest needs of the userland: the programs of
// /usr/bin, the shared libraries and libibverbs' providers, the
// provider configuration of /etc/libibverbs.d, with the top-level lib,
// lib64, bin and sbin of older packages moved under /usr (merged /usr)
// and the dynamic loader also at /lib64/ld-linux-x86-64.so.2, where the
// programs name it. Symbolic links become copies of their targets. It
// checks that every shared library a program or library needs
// (DT_NEEDED) is among the files, and names those missing.
func (u *Userland) GuestFiles() ([]GuestFile, error) {
	var files []GuestFile
	have := map[string]bool{} // library base names
	err := filepath.WalkDir(u.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(u.Root, p)
		rel = filepath.ToSlash(rel)
		top, rest, _ := strings.Cut(rel, "/")
		if m, ok := merged[top]; ok {
			rel = m + "/" + rest
		}
		keep := strings.HasPrefix(rel, "usr/bin/") || strings.HasPrefix(rel, "usr/lib64/") ||
			strings.HasPrefix(rel, "etc/libibverbs.d/") ||
			(strings.HasPrefix(rel, "usr/lib/") && strings.Contains(rel, ".so") && !strings.Contains(rel, "/gconv/"))
		if !keep {
			return nil
		}
		src, err := u.resolve(p)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		st, err := os.Stat(src)
		if err != nil {
			return err
		}
		if st.IsDir() {
			return nil // a link to a directory: its files come on their own
		}
		files = append(files, GuestFile{Path: rel, Src: src, Mode: st.Mode().Perm()})
		if strings.Contains(filepath.Base(rel), ".so") {
			have[filepath.Base(rel)] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var loader *GuestFile
	for i := range files {
		if filepath.Base(files[i].Path) == "ld-linux-x86-64.so.2" {
			loader = &files[i]
		}
	}
	if loader == nil {
		return nil, fmt.Errorf("lab: the userland has no ld-linux-x86-64.so.2 (libc6)")
	}
	files = append(files, GuestFile{Path: "lib64/ld-linux-x86-64.so.2", Src: loader.Src, Mode: 0o755})
	var missing []string
	for _, f := range files {
		needed, err := neededLibs(f.Src)
		if err != nil {
			continue // not an ELF file
		}
		for _, n := range needed {
			if !have[n] {
				missing = append(missing, f.Path+" needs "+n)
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("lab: the userland lacks shared libraries (add their packages to UserlandPackages): %s", strings.Join(missing, "; "))
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// resolve follows symbolic links inside the unpacked root: an absolute
// target is relative to the root, as it would be in the guest.
func (u *Userland) resolve(p string) (string, error) {
	for range 16 {
		st, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		t, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(t) {
			p = filepath.Join(u.Root, t)
			if _, err := os.Lstat(p); err != nil {
				// A merged-/usr target the packages ship elsewhere.
				top, rest, _ := strings.Cut(strings.TrimPrefix(t, "/"), "/")
				if m, ok := merged[top]; ok {
					p = filepath.Join(u.Root, m, rest)
				} else if strings.HasPrefix(t, "/usr/") {
					top, rest, _ = strings.Cut(strings.TrimPrefix(t, "/usr/"), "/")
					p = filepath.Join(u.Root, top, rest)
				}
			}
		} else {
			p = filepath.Join(filepath.Dir(p), t)
		}
	}
	return "", fmt.Errorf("too many symbolic links")
}

// neededLibs reads an ELF file's DT_NEEDED.
func neededLibs(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ImportedLibraries()
}
