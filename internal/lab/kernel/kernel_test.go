package kernel

import "testing"

func TestParseDepends(t *testing.T) {
	for _, tc := range []struct{ in, pkg, ver string }{
		{" linux-image-6.1.0-56-amd64 (= 6.1.192-2)", "linux-image-6.1.0-56-amd64", "6.1.192-2"},
		{"linux-image-6.12.9-amd64 (= 6.12.9-1)", "linux-image-6.12.9-amd64", "6.12.9-1"},
		{"linux-image-6.1.0-57-amd64", "linux-image-6.1.0-57-amd64", ""},
	} {
		pkg, ver, err := ParseDepends(tc.in)
		if err != nil || pkg != tc.pkg || ver != tc.ver {
			t.Errorf("ParseDepends(%q) = %q, %q, %v", tc.in, pkg, ver, err)
		}
	}
	if _, _, err := ParseDepends("kmod, linux-base"); err == nil {
		t.Error("ParseDepends accepted a line without a kernel image")
	}
}

func TestVersionLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		less bool
	}{
		{"6.1.192-2", "6.1.193-1", true},
		{"6.1.99-1", "6.1.100-1", true},
		{"6.1.100-1", "6.1.99-1", false},
		{"6.1.192-2", "6.1.192-2", false},
	} {
		if got := versionLess(tc.a, tc.b); got != tc.less {
			t.Errorf("versionLess(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}
