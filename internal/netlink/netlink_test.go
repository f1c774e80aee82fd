package netlink

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestAttrsRoundTrip(t *testing.T) {
	var a Attrs
	a.String(2, "rxe0")
	a.Uint32(1, 7)
	a.Nested(9, func(in *Attrs) { in.String(3, "x") })
	got, err := ParseAttrs(a.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d attributes, want 3", len(got))
	}
	if got[0].Type != 2 || got[0].String() != "rxe0" {
		t.Errorf("attr 0 = %d %q", got[0].Type, got[0].String())
	}
	if got[1].Type != 1 || got[1].Uint32() != 7 {
		t.Errorf("attr 1 = %d %d", got[1].Type, got[1].Uint32())
	}
	if got[2].Type != 9 {
		t.Errorf("nested type %d, want flag cleared to 9", got[2].Type)
	}
	in, err := ParseAttrs(got[2].Data)
	if err != nil || len(in) != 1 || in[0].String() != "x" {
		t.Errorf("nested = %v, %v", in, err)
	}
	// "rxe0\0" is 5 bytes: header 4 + 5 = 9, padded to 12.
	if l := binary.NativeEndian.Uint16(a.Bytes()[0:]); l != 9 {
		t.Errorf("string attr length %d, want 9 (unpadded)", l)
	}
	if len(a.Bytes()) != 12+8+12 {
		t.Errorf("encoded length %d, want 32", len(a.Bytes()))
	}
}

func TestParseAttrsRejectsBadLength(t *testing.T) {
	for _, b := range [][]byte{{1, 0}, {3, 0, 1, 0}, {200, 0, 1, 0, 0, 0, 0, 0}} {
		if _, err := ParseAttrs(b); err == nil {
			t.Errorf("ParseAttrs(%x) succeeded", b)
		}
	}
}

func FuzzParseAttrs(f *testing.F) {
	var a Attrs
	a.String(1, "dummy0")
	a.Uint32(2, 3)
	f.Add(a.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		attrs, err := ParseAttrs(b)
		if err != nil {
			return
		}
		// Re-encoding what was parsed gives back the input up to padding.
		var re Attrs
		for _, at := range attrs {
			re.Raw(at.Type, at.Data)
		}
		if len(re.Bytes()) < len(b)-3 {
			t.Fatalf("re-encoded %d bytes from %d", len(re.Bytes()), len(b))
		}
	})
}

// TestRouteDumpFindsLoopback runs a real dump against the running kernel's
// rtnetlink: every Linux network namespace has "lo".
func TestRouteDumpFindsLoopback(t *testing.T) {
	c, err := Dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Skipf("no rtnetlink here: %v", err)
	}
	defer c.Close()
	ifi := make([]byte, unix.SizeofIfInfomsg)
	msgs, err := c.Request(unix.RTM_GETLINK, unix.NLM_F_DUMP, ifi)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range msgs {
		attrs, err := ParseAttrs(m[unix.SizeofIfInfomsg:])
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range attrs {
			if at.Type == unix.IFLA_IFNAME && at.String() == "lo" {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("dump of %d links has no lo", len(msgs))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestRequestErrorWrapsErrno(t *testing.T) {
	c, err := Dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Skipf("no rtnetlink here: %v", err)
	}
	defer c.Close()
	// RTM_GETLINK for an interface index that cannot exist.
	ifi := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(ifi[4:], 0x7ffffff0)
	_, err = c.Request(unix.RTM_GETLINK, 0, ifi)
	if !errors.Is(err, unix.ENODEV) {
		t.Fatalf("err = %v, want ENODEV", err)
	}
	var ne *Error
	if !errors.As(err, &ne) || ne.Type != unix.RTM_GETLINK {
		t.Fatalf("err = %#v, want *Error for RTM_GETLINK", err)
	}
}
