package ucma

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/internal/ucmaabi"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// The lab's rxe device is on dummy0 with this address.
var labAddr = netip.MustParseAddr("192.0.2.1")

func labFile(t *testing.T) *File {
	t.Helper()
	f, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// next takes the next event within a bound.
func next(t *testing.T, f *File) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := f.GetEvent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func expect(t *testing.T, ev Event, typ EventType, status int32) {
	t.Helper()
	if ev.Type != typ || ev.Status != status {
		t.Fatalf("event %v (status %d), want %v (status %d)", ev.Type, ev.Status, typ, status)
	}
}

// rxeGUID is rxe0's node GUID as RDMA netlink reports it.
func rxeGUID(t *testing.T) uint64 {
	t.Helper()
	devs, err := uverbs.NetlinkDevices()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Name == labenv.RXEDevice {
			return d.NodeGUID
		}
	}
	t.Fatalf("no %s", labenv.RXEDevice)
	return 0
}

func TestLabUCMAABIVersion(t *testing.T) {
	labenv.Require(t)
	b, err := os.ReadFile(ABIVersionPath)
	if err != nil {
		t.Fatal(err)
	}
	if v := strings.TrimSpace(string(b)); v != "4" {
		t.Fatalf("%s: %s, mlx5go speaks ABI %d", ABIVersionPath, v, ucmaabi.RDMA_USER_CM_ABI_VERSION)
	}
}

// TestLabUCMACommands runs every command against the kernel: a listener,
// a connect request with private data to it (a QP number but no QP: the
// CM does not look at QPs), the queries on both sides, the QP
// attributes, a reject with private data, migration, options, and what
// destroying reports.
func TestLabUCMACommands(t *testing.T) {
	labenv.Require(t)
	srv, cli := labFile(t), labFile(t)
	lid, err := srv.CreateID(1, PortSpaceTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	one := []byte{1, 0, 0, 0}
	if err := srv.SetOption(lid, OptionLevelID, OptionReuseAddr, one); err != nil {
		t.Fatal(err)
	}
	if err := srv.Bind(lid, netip.AddrPortFrom(labAddr, 0)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(lid, 4); err != nil {
		t.Fatal(err)
	}
	la, err := srv.QueryAddr(lid)
	if err != nil {
		t.Fatal(err)
	}
	guid := rxeGUID(t)
	// P_Key 0: ucma_query_device_addr reads it from bytes 8 and 9 of the
	// netdev's broadcast address (ib_addr_get_pkey), which Ethernet's 6
	// bytes leave zero.
	if la.Src.Addr() != labAddr || la.Src.Port() == 0 || la.NodeGUID != guid || la.Port != 1 || la.PKey != 0 {
		t.Errorf("listener's address %+v (rxe0's GUID %#x)", la, guid)
	}

	cid, err := cli.CreateID(2, PortSpaceTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.SetOption(cid, OptionLevelID, OptionTOS, []byte{0x20}); err != nil {
		t.Fatal(err)
	}
	if err := cli.ResolveAddr(cid, netip.AddrPort{}, la.Src, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	ev := next(t, cli)
	expect(t, ev, EventAddrResolved, 0)
	if ev.UID != 2 || ev.ID != cid {
		t.Errorf("event of uid %d id %d, want 2, %d", ev.UID, ev.ID, cid)
	}
	if err := cli.ResolveRoute(cid, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, next(t, cli), EventRouteResolved, 0)
	r, err := cli.QueryRoute(cid)
	if err != nil {
		t.Fatal(err)
	}
	mapped := netip.AddrFrom16(labAddr.As16()).As16()
	mapped[10], mapped[11] = 0xff, 0xff
	if len(r.Paths) != 1 || r.Paths[0].SGID != mapped || r.Paths[0].DGID != mapped || r.NodeGUID != guid || r.Dst != la.Src {
		t.Errorf("route %+v", r)
	}
	t.Logf("route: %+v", r.Paths[0])
	paths, err := cli.QueryPath(cid)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || paths[0].Flags != ucmaabi.IB_PATH_GMP|ucmaabi.IB_PATH_PRIMARY|ucmaabi.IB_PATH_BIDIRECTIONAL {
		t.Errorf("paths %+v", paths)
	}
	a, err := cli.InitQPAttr(cid, QPStateInit)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("INIT before connect: mask %#x %+v", a.Mask, a)
	const maskState, maskAccess, maskPKey, maskPort = 1, 1 << 3, 1 << 4, 1 << 5
	if a.Mask != maskState|maskAccess|maskPKey|maskPort || a.Port != 1 || a.AccessFlags != 0 {
		t.Errorf("INIT attributes before connect: mask %#x, %+v", a.Mask, a)
	}

	pd := []byte("hello from mlx5go")
	if err := cli.Connect(cid, &ConnParam{QPN: 0x1234, PrivateData: pd, ResponderResources: 3, InitiatorDepth: 4, RetryCount: 7, RNRRetryCount: 7}, ECE{}); err != nil {
		t.Fatal(err)
	}
	req := next(t, srv)
	expect(t, req, EventConnectRequest, 0)
	if req.UID != 1 || req.ID == lid {
		t.Errorf("connect request of uid %d id %d", req.UID, req.ID)
	}
	if p := req.Conn; p.QPN != 0x1234 || len(p.PrivateData) != 56 || string(p.PrivateData[:len(pd)]) != string(pd) ||
		p.ResponderResources != 4 || p.InitiatorDepth != 3 || p.RetryCount != 7 || p.RNRRetryCount != 7 {
		t.Errorf("request %+v (private data %d bytes)", p, len(p.PrivateData))
	}
	ra, err := srv.QueryAddr(req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ra.Src != la.Src || ra.Dst.Addr() != labAddr || ra.NodeGUID != guid {
		t.Errorf("connection's address %+v", ra)
	}
	rtr, err := srv.InitQPAttr(req.ID, QPStateRTR)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("passive RTR: mask %#x %+v", rtr.Mask, rtr)
	if rtr.DestQPN != 0x1234 || rtr.AH.GRH.DGID != mapped || !rtr.AH.IsGlobal || rtr.MaxDestRdAtomic != 4 || rtr.AH.GRH.TrafficClass != 0x20 {
		t.Errorf("passive RTR attributes %+v", rtr)
	}
	rts, err := srv.InitQPAttr(req.ID, QPStateRTS)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("passive RTS: mask %#x %+v", rts.Mask, rts)

	// Migrate the request's id to a third file, then reject it there.
	third := labFile(t)
	if n, err := third.MigrateID(req.ID, srv); err != nil || n != 0 {
		t.Fatalf("migrate: %d, %v", n, err)
	}
	if err := srv.Reject(req.ID, 0, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("reject on the old file: %v, want EINVAL", err)
	}
	if err := third.Reject(req.ID, RejectConsumerDefined, []byte("no room")); err != nil {
		t.Fatal(err)
	}
	rej := next(t, cli)
	expect(t, rej, EventRejected, RejectConsumerDefined)
	if len(rej.Conn.PrivateData) != 148 || string(rej.Conn.PrivateData[:7]) != "no room" {
		t.Errorf("reject's private data %d bytes %q", len(rej.Conn.PrivateData), rej.Conn.PrivateData)
	}
	if n, err := third.DestroyID(req.ID); err != nil || n != 0 {
		t.Errorf("destroy the rejected id: %d, %v", n, err)
	}
	if n, err := cli.DestroyID(cid); err != nil || n != 3 {
		t.Errorf("destroy the active id: %d events reported, %v; want 3", n, err)
	}
	if n, err := srv.DestroyID(lid); err != nil || n != 1 {
		t.Errorf("destroy the listener: %d events reported, %v; want 1", n, err)
	}
	if _, err := srv.DestroyID(lid); !errors.Is(err, unix.ENOENT) {
		t.Errorf("destroy twice: %v, want ENOENT", err)
	}
}

// TestLabUCMAMisuse records the kernel's answers to misuse, which the
// model gives too (model/internal/rdmacm's TestCMMisuse).
func TestLabUCMAMisuse(t *testing.T) {
	labenv.Require(t)
	f := labFile(t)
	id := func() ID {
		t.Helper()
		i, err := f.CreateID(9, PortSpaceTCP, 0)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	if _, err := f.CreateID(1, PortSpace(0x99), 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("port space 0x99: %v, want EINVAL", err)
	}
	for _, c := range []struct {
		addr  string
		errno unix.Errno
	}{{"198.51.100.7:0", unix.EADDRNOTAVAIL}, {"[fe80::1]:0", unix.EINVAL}} {
		if err := f.Bind(id(), netip.MustParseAddrPort(c.addr)); !errors.Is(err, c.errno) {
			t.Errorf("bind %s: %v, want %v", c.addr, err, c.errno)
		}
	}
	// cma takes a loopback address for the unspecified one (cma_any_addr):
	// the bind succeeds and binds no device.
	lb := id()
	if err := f.Bind(lb, netip.MustParseAddrPort("127.0.0.1:0")); err != nil {
		t.Errorf("bind 127.0.0.1: %v", err)
	}
	if a, err := f.QueryAddr(lb); err != nil || a.NodeGUID != 0 || a.Src.Addr() != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("bound to 127.0.0.1: %+v, %v", a, err)
	}
	lis := id()
	if err := f.Bind(lis, netip.AddrPortFrom(labAddr, 0)); err != nil {
		t.Fatal(err)
	}
	if err := f.Listen(lis, 0); err != nil {
		t.Fatal(err)
	}
	la, _ := f.QueryAddr(lis)
	if err := f.Bind(id(), la.Src); !errors.Is(err, unix.EADDRINUSE) {
		t.Errorf("bind to the listener's port: %v, want EADDRINUSE", err)
	}
	if err := f.Connect(lis, &ConnParam{QPN: 1}, ECE{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("connect on a listening id: %v, want EINVAL", err)
	}
	if err := f.ResolveAddr(lis, netip.AddrPort{}, la.Src, time.Second); !errors.Is(err, unix.EINVAL) {
		t.Errorf("resolve on a listening id: %v, want EINVAL", err)
	}
	if err := f.Accept(lis, 5, &ConnParam{QPN: 1}, ECE{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("accept on a listening id: %v, want EINVAL", err)
	}
	if err := f.Reject(lis, 5, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("reject with reason 5: %v, want EINVAL", err)
	}
	// Loopback resolves to the first active port (cma_resolve_loopback),
	// and then has no netdev to route through.
	lo := id()
	if err := f.ResolveAddr(lo, netip.AddrPort{}, netip.MustParseAddrPort("127.0.0.1:1"), time.Second); err != nil {
		t.Fatalf("resolve 127.0.0.1: %v", err)
	}
	expect(t, next(t, f), EventAddrResolved, 0)
	if a, err := f.QueryAddr(lo); err != nil || a.NodeGUID != rxeGUID(t) || a.Src.Addr() != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("resolved 127.0.0.1: %+v, %v", a, err)
	}
	if err := f.ResolveRoute(lo, time.Second); !errors.Is(err, unix.ENODEV) {
		t.Errorf("resolve the route to 127.0.0.1: %v, want ENODEV", err)
	}
	if err := f.ResolveAddr(id(), netip.AddrPort{}, netip.MustParseAddrPort("198.51.100.7:1"), time.Second); !errors.Is(err, unix.ENETUNREACH) {
		t.Errorf("resolve 198.51.100.7 (no route): %v, want ENETUNREACH", err)
	}
	// Too much private data for a REQ with the CM's header.
	c := id()
	if err := f.ResolveAddr(c, netip.AddrPort{}, la.Src, time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, next(t, f), EventAddrResolved, 0)
	if err := f.Connect(c, &ConnParam{QPN: 1}, ECE{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("connect before the route: %v, want EINVAL", err)
	}
	if err := f.ResolveRoute(c, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("resolve route with timeout 0: %v, want EINVAL", err)
	}
	if err := f.ResolveRoute(c, time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, next(t, f), EventRouteResolved, 0)
	if err := f.Connect(c, &ConnParam{QPN: 1, PrivateData: make([]byte, 57)}, ECE{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("connect with 57 bytes of private data: %v, want EINVAL", err)
	}
	if err := f.Connect(c, &ConnParam{QPN: 1, PrivateData: make([]byte, 56)}, ECE{}); err != nil {
		t.Errorf("connect with 56 bytes of private data: %v", err)
	}
	req := next(t, f)
	expect(t, req, EventConnectRequest, 0)
	if err := f.Accept(req.ID, 77, &ConnParam{QPN: 2, PrivateData: make([]byte, 197)}, ECE{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("accept with 197 bytes of private data: %v, want EINVAL", err)
	}
	// rdma_accept's error path rejected the request.
	expect(t, next(t, f), EventRejected, RejectConsumerDefined)
	if _, err := f.DestroyID(ID(0x7ffffff0)); !errors.Is(err, unix.ENOENT) {
		t.Errorf("destroy an unknown id: %v, want ENOENT", err)
	}
}

// TestLabUCMAGetEventWaits: GetEvent waits in the netpoller until an
// event is queued, returns ctx's error when ctx ends first (and leaves
// the file usable), and os.ErrClosed when the file closes under it.
func TestLabUCMAGetEventWaits(t *testing.T) {
	labenv.Require(t)
	f := labFile(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	start := time.Now()
	_, err := f.GetEvent(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("GetEvent with nothing queued: %v after %v", err, time.Since(start))
	}
	id, err := f.CreateID(3, PortSpaceTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		f.ResolveAddr(id, netip.AddrPort{}, netip.AddrPortFrom(labAddr, 1), time.Second)
	}()
	expect(t, next(t, f), EventAddrResolved, 0)
	g := labFile(t)
	done := make(chan error, 1)
	go func() {
		_, err := g.GetEvent(context.Background())
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	g.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("GetEvent when the file closed: %v, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("GetEvent did not return when the file closed")
	}
	if err := g.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}
