package kernel

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// listsMaxAge is how old a suite's package lists may get before the lab
// refreshes them, so that it follows Debian's kernel updates.
const listsMaxAge = 12 * time.Hour

// aptDir is a private apt configuration for one suite, under the lab's
// cache: its own sources, lists and archive cache. The host's apt
// configuration is never read for sources nor changed.
type aptDir struct {
	dir   string
	suite string
}

// suites is what a Debian user of suite gets kernels from: the suite, its
// -updates and its -security suites (sid has neither).
func suites(suite string) (archive, security []string) {
	if suite == "sid" || suite == "unstable" || suite == "experimental" {
		return []string{suite}, nil
	}
	return []string{suite, suite + "-updates"}, []string{suite + "-security"}
}

func newAptDir(cacheDir, suite string, m Mirror) (*aptDir, error) {
	a := &aptDir{dir: filepath.Join(cacheDir, "apt", suite), suite: suite}
	for _, d := range []string{"lists/partial", "cache/archives/partial", "empty"} {
		if err := os.MkdirAll(filepath.Join(a.dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	opt := ""
	if m.Keyring != "" {
		opt = "[signed-by=" + m.Keyring + "] "
	}
	var src strings.Builder
	archive, security := suites(suite)
	for _, s := range archive {
		fmt.Fprintf(&src, "deb %s%s %s main\n", opt, m.Archive, s)
	}
	for _, s := range security {
		fmt.Fprintf(&src, "deb %s%s %s main\n", opt, m.Security, s)
	}
	conf := fmt.Sprintf(`// mlx5go kernel lab: a private apt configuration for %[2]s kernels.
// It reads no apt.conf.d of the host and writes only below %[1]s.
Dir::Etc::sourcelist "%[1]s/sources.list";
Dir::Etc::sourceparts "%[1]s/empty";
Dir::Etc::parts "%[1]s/empty";
Dir::Etc::preferences "/dev/null";
Dir::Etc::preferencesparts "%[1]s/empty";
Dir::State "%[1]s";
Dir::State::Lists "%[1]s/lists";
Dir::State::status "/dev/null";
Dir::Cache "%[1]s/cache";
// No binary caches, and lists kept compressed: a few MB per suite.
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::GzipIndexes "true";
Acquire::Languages "none";
// Snapshot mirrors and caching proxies serve Release files past their
// Valid-Until; the signature and every hash are still checked.
Acquire::Check-Valid-Until "false";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
`, a.dir, suite)
	if os.Getuid() == 0 {
		// As root apt would download as _apt, which cannot write to root's
		// cache directory.
		conf += "APT::Sandbox::User \"root\";\n"
	}
	if err := writeIfChanged(filepath.Join(a.dir, "sources.list"), src.String()); err != nil {
		return nil, err
	}
	if err := writeIfChanged(filepath.Join(a.dir, "apt.conf"), conf); err != nil {
		return nil, err
	}
	return a, nil
}

func writeIfChanged(path, content string) error {
	if b, err := os.ReadFile(path); err == nil && string(b) == content {
		return nil
	}
	// A changed configuration makes the lists stale.
	os.Remove(filepath.Join(filepath.Dir(path), "updated"))
	return os.WriteFile(path, []byte(content), 0o644)
}

func (a *aptDir) cmd(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "APT_CONFIG="+filepath.Join(a.dir, "apt.conf"), "LC_ALL=C")
	return c
}

func (a *aptDir) run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	c := a.cmd(ctx, dir, name, args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(stderr.Bytes(), 1500))
	}
	return out, nil
}

// fresh reports whether the lists were updated less than maxAge ago.
func (a *aptDir) fresh(maxAge time.Duration) bool {
	st, err := os.Stat(filepath.Join(a.dir, "updated"))
	return err == nil && time.Since(st.ModTime()) < maxAge
}

func (a *aptDir) hasLists() bool {
	m, _ := filepath.Glob(filepath.Join(a.dir, "lists", "*Packages*"))
	return len(m) > 0
}

// update runs apt-get update on the private configuration. apt verifies
// the Release files' signatures and the lists' hashes.
func (a *aptDir) update(ctx context.Context) error {
	out, err := a.run(ctx, a.dir, "apt-get", "-q", "update")
	if err != nil {
		return err
	}
	// apt-get update exits 0 when a source failed; the lists tell.
	if bytes.Contains(out, []byte("\nErr:")) || bytes.HasPrefix(out, []byte("Err:")) || !a.hasLists() {
		return fmt.Errorf("apt-get update (%s): %s", a.suite, tail(out, 1500))
	}
	now := time.Now()
	f := filepath.Join(a.dir, "updated")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		return err
	}
	return os.Chtimes(f, now, now)
}

// show returns the fields of the candidate version of pkg (apt-cache show
// --no-all-versions: the highest version of the suite and its updates).
func (a *aptDir) show(ctx context.Context, spec string) (map[string]string, error) {
	out, err := a.run(ctx, a.dir, "apt-cache", "show", "--no-all-versions", spec)
	if err != nil {
		return nil, err
	}
	return controlFields(out), nil
}

// controlFields parses the first stanza of Debian control data.
func controlFields(b []byte) map[string]string {
	f := map[string]string{}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if len(f) > 0 {
				break
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last != "" {
				f[last] += "\n" + strings.TrimSpace(line)
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if ok {
			last = strings.TrimSpace(k)
			f[last] = strings.TrimSpace(v)
		}
	}
	return f
}

// download fetches pkg=ver into dir with apt-get download, which checks
// the .deb's SHA256 against the signed index, and returns its path.
func (a *aptDir) download(ctx context.Context, dir, pkg, ver string) (string, error) {
	spec := pkg
	if ver != "" {
		spec += "=" + ver
	}
	before, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
	if _, err := a.run(ctx, dir, "apt-get", "-q", "download", spec); err != nil {
		return "", err
	}
	after, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
	for _, p := range after {
		if !contains(before, p) && strings.HasPrefix(filepath.Base(p), pkg+"_") {
			return p, nil
		}
	}
	return "", fmt.Errorf("apt-get download %s: no .deb written", spec)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
