package uverbs

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/internal/netlink"
	"golang.org/x/sys/unix"
)

// setLinkUp sets a netdev up or down with rtnetlink.
func setLinkUp(t *testing.T, name string, up bool) {
	t.Helper()
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := netlink.Dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ifi := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(ifi[4:], uint32(ifc.Index))
	if up {
		binary.NativeEndian.PutUint32(ifi[8:], unix.IFF_UP)
	}
	binary.NativeEndian.PutUint32(ifi[12:], unix.IFF_UP) // change mask
	if _, err := c.Request(unix.RTM_NEWLINK, 0, ifi); err != nil {
		t.Fatalf("set %s up=%v: %v", name, up, err)
	}
}

func awaitPortEvent(t *testing.T, c *Context, want EventType) {
	t.Helper()
	if ev := awaitEvent(t, c, want, func(AsyncEvent) bool { return true }); ev.Port != 1 {
		t.Errorf("%v for port %d, want 1", ev.Type, ev.Port)
	}
}

// Taking rxe0's netdev down and up brings the kernel's PORT_ERR and
// PORT_ACTIVE events for port 1.
func TestLabPortEvents(t *testing.T) {
	c := openLab(t)
	setLinkUp(t, labenv.Netdev, false)
	awaitPortEvent(t, c, EventPortErr)
	setLinkUp(t, labenv.Netdev, true)
	awaitPortEvent(t, c, EventPortActive)
	// Leave the port as the other tests expect it: ACTIVE, with its RoCE v2
	// GID back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		pa, err := c.QueryPort(1)
		if err != nil {
			t.Fatal(err)
		}
		if pa.State == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("port state %d 10 s after the link came up", pa.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	labRoCEv2GIDWait(t, 10*time.Second)
}
