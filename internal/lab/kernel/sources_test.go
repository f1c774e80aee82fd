package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHostMirror(t *testing.T) {
	etc := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(etc, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("os-release", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_CODENAME=bookworm\n")
	// Debian 12's deb822 file, with a comment inside a stanza, and an
	// unrelated one-line source whose suite only contains the codename.
	write("apt/sources.list.d/debian.sources", `Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security/
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`)
	write("apt/sources.list.d/vendor.list", "deb [arch=amd64 signed-by=/usr/share/keyrings/vendor.gpg] https://vendor.example/apt cloud-sdk-bookworm main\n")
	m, err := HostMirror(etc)
	want := Mirror{Archive: "http://mirror.example/debian", Security: "http://mirror.example/debian-security", Keyring: "/usr/share/keyrings/debian-archive-keyring.gpg"}
	if err != nil || m != want {
		t.Fatalf("HostMirror = %+v, %v; want %+v", m, err, want)
	}

	// The one-line format, without a security entry.
	etc2 := t.TempDir()
	etc = etc2
	write("os-release", "ID=debian\nVERSION_CODENAME=trixie\n")
	write("apt/sources.list", "# a comment\ndeb [ signed-by=/k.gpg ] http://m.example/debian trixie main # tail\ndeb-src http://m.example/debian trixie main\n")
	m, err = HostMirror(etc)
	want = Mirror{Archive: "http://m.example/debian", Security: "http://m.example/debian-security", Keyring: "/k.gpg"}
	if err != nil || m != want {
		t.Fatalf("one-line HostMirror = %+v, %v; want %+v", m, err, want)
	}

	// Not Debian, or no entry for the codename: say how to set the mirror.
	etc = t.TempDir()
	write("os-release", "ID=ubuntu\nVERSION_CODENAME=noble\n")
	if _, err := HostMirror(etc); err == nil || !strings.Contains(err.Error(), MirrorEnv) {
		t.Errorf("Ubuntu host: %v", err)
	}
	write("os-release", "ID=debian\nVERSION_CODENAME=forky\n")
	write("apt/sources.list", "deb http://m.example/debian trixie main\n")
	if _, err := HostMirror(etc); err == nil || !strings.Contains(err.Error(), "suite forky") {
		t.Errorf("no forky source: %v", err)
	}
}

func TestParseChoice(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Choice
	}{
		{"bookworm", Choice{Suite: "bookworm"}},
		{"sid", Choice{Suite: "sid"}},
		{"linux-image-6.12.57+deb13-amd64", Choice{Package: "linux-image-6.12.57+deb13-amd64"}},
		{"linux-image-6.1.0-56-amd64=6.1.192-2", Choice{Package: "linux-image-6.1.0-56-amd64", Version: "6.1.192-2"}},
		{"trixie/linux-image-6.12.57+deb13-amd64=6.12.57-1", Choice{Suite: "trixie", Package: "linux-image-6.12.57+deb13-amd64", Version: "6.12.57-1"}},
	} {
		got, err := ParseChoice(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseChoice(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if err == nil && got.String() != tc.in {
			t.Errorf("ParseChoice(%q).String() = %q", tc.in, got.String())
		}
	}
	for _, bad := range []string{"", "Bookworm", "linux-headers-6.1.0-56-amd64", "trixie/vim", "a/b/c", "../etc"} {
		if c, err := ParseChoice(bad); err == nil {
			t.Errorf("ParseChoice(%q) = %+v, want an error", bad, c)
		}
	}
}

func TestSuites(t *testing.T) {
	a, s := suites("trixie")
	if strings.Join(a, " ") != "trixie trixie-updates" || strings.Join(s, " ") != "trixie-security" {
		t.Errorf("trixie: %v %v", a, s)
	}
	if a, s := suites("sid"); len(a) != 1 || a[0] != "sid" || s != nil {
		t.Errorf("sid: %v %v", a, s)
	}
}

func TestControlFields(t *testing.T) {
	f := controlFields([]byte("Package: linux-image-amd64\nVersion: 7.2.13-1\nDepends: linux-base-amd64 (= 7.2.13-1),\n linux-image-7.2.13+deb14-amd64 (= 7.2.13-1)\n\nPackage: other\n"))
	if f["Version"] != "7.2.13-1" || !strings.Contains(f["Depends"], "linux-image-7.2.13+deb14-amd64") || f["Package"] != "linux-image-amd64" {
		t.Fatalf("%q", f)
	}
	pkg, ver, err := ParseDepends(f["Depends"])
	if err != nil || pkg != "linux-image-7.2.13+deb14-amd64" || ver != "7.2.13-1" {
		t.Errorf("ParseDepends: %q %q %v", pkg, ver, err)
	}
	// A split image's parts (Debian 14): what fetch downloads besides it.
	deps := "dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, linux-base-7.2.13+deb14-amd64 (= 7.2.13-1), linux-binary-7.2.13+deb14-amd64 (= 7.2.13-1), linux-modules-7.2.13+deb14-amd64 (= 7.2.13-1)"
	var parts []string
	for _, m := range kernelPartRE.FindAllStringSubmatch(deps, -1) {
		parts = append(parts, m[1]+"="+m[2])
	}
	if strings.Join(parts, " ") != "linux-base-7.2.13+deb14-amd64=7.2.13-1 linux-binary-7.2.13+deb14-amd64=7.2.13-1 linux-modules-7.2.13+deb14-amd64=7.2.13-1" {
		t.Errorf("parts %v", parts)
	}
}
