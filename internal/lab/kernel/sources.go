package kernel

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Mirror is where the lab fetches Debian kernels from: the Debian archive
// and its security archive, and the keyring apt verifies their Release
// files with ("" lets apt use its trusted keys).
type Mirror struct {
	Archive  string // e.g. the URI of the host's "bookworm" entry
	Security string // the URI of its "bookworm-security" entry
	Keyring  string // Signed-By of the archive entry, if a file
}

// sourceEntry is one deb entry of an apt sources file, either format.
type sourceEntry struct {
	uri      string
	suites   []string
	signedBy string
}

// HostMirror finds the Debian mirror this machine's apt already uses: the
// entry of /etc/apt/sources.list and sources.list.d/*.{list,sources} whose
// suite is the host's codename (/etc/os-release VERSION_CODENAME) is the
// archive, the one with CODENAME-security the security archive. The lab
// only reads these files; its own apt configuration lives in its cache.
func HostMirror(etc string) (Mirror, error) {
	codename, err := osCodename(filepath.Join(etc, "os-release"))
	if err != nil {
		return Mirror{}, err
	}
	var entries []sourceEntry
	lists, _ := filepath.Glob(filepath.Join(etc, "apt", "sources.list.d", "*.list"))
	lists = append([]string{filepath.Join(etc, "apt", "sources.list")}, lists...)
	for _, p := range lists {
		b, err := os.ReadFile(p)
		if err == nil {
			entries = append(entries, parseOneLine(string(b))...)
		}
	}
	deb822, _ := filepath.Glob(filepath.Join(etc, "apt", "sources.list.d", "*.sources"))
	for _, p := range deb822 {
		b, err := os.ReadFile(p)
		if err == nil {
			entries = append(entries, parseDeb822(string(b))...)
		}
	}
	return pickMirror(entries, codename)
}

func pickMirror(entries []sourceEntry, codename string) (Mirror, error) {
	var m Mirror
	for _, e := range entries {
		for _, s := range e.suites {
			switch {
			case s == codename && m.Archive == "":
				m.Archive = strings.TrimSuffix(e.uri, "/")
				if strings.HasPrefix(e.signedBy, "/") {
					m.Keyring = e.signedBy
				}
			case s == codename+"-security" && m.Security == "":
				m.Security = strings.TrimSuffix(e.uri, "/")
			}
		}
	}
	if m.Archive == "" {
		return Mirror{}, fmt.Errorf("no apt source of this machine has suite %s: set %s to a Debian mirror's URI", codename, MirrorEnv)
	}
	if m.Security == "" {
		m.Security = m.Archive + "-security"
	}
	return m, nil
}

// MirrorEnv overrides the mirror found in the host's apt sources: the URI
// of a Debian archive; its security archive is the same URI with
// "-security" appended, as on Debian's own mirrors.
const MirrorEnv = "MLX5GO_LAB_MIRROR"

func osCodename(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w (the lab fetches kernels from the Debian mirror this machine uses; elsewhere set %s)", path, err, MirrorEnv)
	}
	var id, codename string
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"'`)
		switch k {
		case "ID":
			id = v
		case "VERSION_CODENAME":
			codename = v
		}
	}
	if id != "debian" || codename == "" {
		return "", fmt.Errorf("%s: not a Debian release with a codename (ID=%q VERSION_CODENAME=%q): set %s to a Debian mirror's URI", path, id, codename, MirrorEnv)
	}
	return codename, nil
}

// parseOneLine reads the one-line format: "deb [opts] URI SUITE COMP...".
func parseOneLine(text string) []sourceEntry {
	var out []sourceEntry
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		e := sourceEntry{}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			var opts []string
			for len(f) > 0 {
				opts = append(opts, f[0])
				done := strings.HasSuffix(f[0], "]")
				f = f[1:]
				if done {
					break
				}
			}
			for _, o := range strings.Fields(strings.Trim(strings.Join(opts, " "), "[]")) {
				if v, ok := strings.CutPrefix(o, "signed-by="); ok {
					e.signedBy = v
				}
			}
		}
		if len(f) < 2 {
			continue
		}
		e.uri, e.suites = f[0], []string{f[1]}
		out = append(out, e)
	}
	return out
}

// parseDeb822 reads the deb822 format (*.sources): stanzas of Types, URIs,
// Suites, Signed-By, ... separated by blank lines.
func parseDeb822(text string) []sourceEntry {
	var out []sourceEntry
	flush := func(fields map[string]string) {
		if fields == nil || !strings.Contains(" "+fields["types"]+" ", " deb ") || strings.EqualFold(fields["enabled"], "no") {
			return
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			out = append(out, sourceEntry{uri: uri, suites: strings.Fields(fields["suites"]), signedBy: strings.TrimSpace(fields["signed-by"])})
		}
	}
	var fields map[string]string
	var last string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "#"):
		case strings.TrimSpace(line) == "":
			flush(fields)
			fields, last = nil, ""
		case line[0] == ' ' || line[0] == '\t':
			if fields != nil && last != "" {
				fields[last] += "\n" + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			if fields == nil {
				fields = map[string]string{}
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
	}
	flush(fields)
	return out
}
