package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// The connection manager at the seam, against what the lab's kernels
// answer to the same calls (ucma's TestLabUCMACommands and
// TestLabUCMAMisuse run them on Linux 6.1, 6.12 and 7.x with rxe), on
// testHCA. model's TestCMOnHCA runs it on the model's HCA.

// testHCA answers as the model's HCA does: its netdev holds 192.0.2.1,
// 2001:db8::1 and the link-local address of MAC 02:00:00:00:00:01, each
// a RoCE v1 and a v2 GID, in that order; path MTU 1024; ACK delay 16.
type testHCA struct{}

const testGUID = 0x0002c903000000aa

func (testHCA) NodeGUID() uint64 { return testGUID }
func (testHCA) GIDTable() []seam.GIDEntry {
	var t []seam.GIDEntry
	for _, a := range []string{"fe80::ff:fe00:1", "::ffff:192.0.2.1", "2001:db8::1"} {
		for _, typ := range []uint32{1, gidTypeRoCEv2} {
			t = append(t, seam.GIDEntry{GID: netip.MustParseAddr(a).As16(), Index: uint32(len(t)), Port: 1, Type: typ})
		}
	}
	return t
}
func (testHCA) PathMTU() uint8    { return 3 }
func (testHCA) CAAckDelay() uint8 { return 16 }

// mustCome is how long a test waits for an event that must come.
const mustCome = 60 * time.Second

func openCM(t *testing.T, n *Net) *File {
	t.Helper()
	f := n.Open()
	t.Cleanup(func() { f.Close() })
	return f
}

func nextEv(t *testing.T, f *File) seam.CMEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mustCome)
	defer cancel()
	ev, err := f.NextEvent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func expectEv(t *testing.T, ev seam.CMEvent, typ uint32, status int32) {
	t.Helper()
	if ev.Type != typ || ev.Status != status {
		t.Fatalf("event %d (status %d), want %d (status %d)", ev.Type, ev.Status, typ, status)
	}
}

var labAddr = netip.MustParseAddr("192.0.2.1")

// TestCMCommands: a listener, a connect request with private data and a
// QP number but no QP, the QP attributes of both sides, a reject with
// private data, as rdma_ucm answers them.
func TestCMCommands(t *testing.T) {
	n := New(testHCA{})
	srv, cli := openCM(t, n), openCM(t, n)
	lid, err := srv.CreateID(1, psTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetOption(lid, cmOptLevelID, cmOptReuseAddr, []byte{1, 0, 0, 0}); err != nil {
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
	if la.Src.Addr() != labAddr || la.Src.Port() < portLow || la.NodeGUID != testGUID || la.Port != 1 {
		t.Errorf("listener's address %+v", la)
	}
	cid, err := cli.CreateID(2, psTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.SetOption(cid, cmOptLevelID, cmOptTOS, []byte{0x20}); err != nil {
		t.Fatal(err)
	}
	if err := cli.ResolveAddr(cid, netip.AddrPort{}, la.Src, 2000); err != nil {
		t.Fatal(err)
	}
	ev := nextEv(t, cli)
	expectEv(t, ev, cmEvAddrResolved, 0)
	if ev.UID != 2 || ev.ID != cid {
		t.Errorf("event of uid %d id %d", ev.UID, ev.ID)
	}
	if err := cli.ResolveRoute(cid, 2000); err != nil {
		t.Fatal(err)
	}
	expectEv(t, nextEv(t, cli), cmEvRouteResolved, 0)
	a, mask, err := cli.InitQPAttr(cid, seam.QPStateInit)
	if err != nil || mask != 0x39 || a.Port != 1 || a.AccessFlags != 0 {
		t.Errorf("INIT before connect: mask %#x %+v, %v (the kernel: mask 0x39, no access, port 1)", mask, a, err)
	}
	pd := []byte("hello from mlx5go")
	if err := cli.Connect(cid, &seam.CMConnParam{QPN: 0x1234, PrivateData: pd, ResponderResources: 3, InitiatorDepth: 4, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	req := nextEv(t, srv)
	expectEv(t, req, cmEvConnectRequest, 0)
	if p := req.Conn; req.UID != 1 || p.QPN != 0x1234 || len(p.PrivateData) != 56 || string(p.PrivateData[:len(pd)]) != string(pd) ||
		p.ResponderResources != 4 || p.InitiatorDepth != 3 || p.RetryCount != 7 || p.RNRRetryCount != 7 {
		t.Errorf("request %+v", req)
	}
	rtr, mask, err := srv.InitQPAttr(req.ID, seam.QPStateRTR)
	if err != nil {
		t.Fatal(err)
	}
	mapped := netip.AddrFrom16(labAddr.As16()).As16()
	mapped[10], mapped[11] = 0xff, 0xff
	// The kernel: mask 0x129181, the RoCE v2 GID of the address (rxe's
	// index 1, the model's 3), hop limit 64, the TOS as traffic class.
	if mask != 0x129181 || rtr.DestQPN != 0x1234 || rtr.AH.GRH.DGID != mapped || rtr.AH.GRH.SGIDIndex != 3 || rtr.AH.GRH.HopLimit != 64 ||
		rtr.AH.GRH.TrafficClass != 0x20 || !rtr.AH.IsGlobal || rtr.MaxDestRdAtomic != 4 || rtr.PathMTU != 3 {
		t.Errorf("passive RTR: mask %#x %+v", mask, rtr)
	}
	rts, mask, err := srv.InitQPAttr(req.ID, seam.QPStateRTS)
	if err != nil || mask != 0x12e01 || rts.Timeout != 19 || rts.RetryCnt != 7 || rts.RNRRetry != 7 || rts.MaxRdAtomic != 3 {
		t.Errorf("passive RTS: mask %#x %+v, %v (the kernel: mask 0x12e01, timeout 19)", mask, rts, err)
	}
	if err := srv.Reject(req.ID, rejConsumerDefined, []byte("no room")); err != nil {
		t.Fatal(err)
	}
	rej := nextEv(t, cli)
	expectEv(t, rej, cmEvRejected, rejConsumerDefined)
	if len(rej.Conn.PrivateData) != 148 || string(rej.Conn.PrivateData[:7]) != "no room" {
		t.Errorf("reject's private data %q", rej.Conn.PrivateData)
	}
	for _, c := range []struct {
		f  *File
		id uint32
	}{{srv, req.ID}, {cli, cid}, {srv, lid}} {
		if err := c.f.DestroyID(c.id); err != nil {
			t.Error(err)
		}
	}
	if err := srv.DestroyID(lid); !errors.Is(err, unix.ENOENT) {
		t.Errorf("destroy twice: %v, want ENOENT", err)
	}
	if ids := n.IDs(); ids != 0 {
		t.Errorf("%d ids left", ids)
	}
}

// TestCMMisuse: the kernel's answers to misuse.
func TestCMMisuse(t *testing.T) {
	n := New(testHCA{})
	f := openCM(t, n)
	id := func() uint32 {
		t.Helper()
		i, err := f.CreateID(9, psTCP, 0)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	if _, err := f.CreateID(1, 0x99, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("port space 0x99: %v", err)
	}
	for _, c := range []struct {
		addr  string
		errno unix.Errno
	}{{"198.51.100.7:0", unix.EADDRNOTAVAIL}, {"[fe80::1]:0", unix.EINVAL}} {
		if err := f.Bind(id(), netip.MustParseAddrPort(c.addr)); !errors.Is(err, c.errno) {
			t.Errorf("bind %s: %v, want %v", c.addr, err, c.errno)
		}
	}
	lb := id()
	if err := f.Bind(lb, netip.MustParseAddrPort("127.0.0.1:0")); err != nil {
		t.Errorf("bind 127.0.0.1: %v", err)
	}
	if a, _ := f.QueryAddr(lb); a.NodeGUID != 0 {
		t.Errorf("bound to 127.0.0.1: %+v, want no device", a)
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
		t.Errorf("bind to the listener's port: %v", err)
	}
	if err := f.Connect(lis, &seam.CMConnParam{QPN: 1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("connect on a listening id: %v", err)
	}
	if err := f.ResolveAddr(lis, netip.AddrPort{}, la.Src, 1000); !errors.Is(err, unix.EINVAL) {
		t.Errorf("resolve on a listening id: %v", err)
	}
	if err := f.Accept(lis, 5, &seam.CMConnParam{QPN: 1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("accept on a listening id: %v", err)
	}
	if err := f.Reject(lis, 5, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("reject with reason 5: %v", err)
	}
	lo := id()
	if err := f.ResolveAddr(lo, netip.AddrPort{}, netip.MustParseAddrPort("127.0.0.1:1"), 1000); err != nil {
		t.Fatal(err)
	}
	expectEv(t, nextEv(t, f), cmEvAddrResolved, 0)
	if a, _ := f.QueryAddr(lo); a.NodeGUID != testGUID || a.Src.Addr() != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("resolved 127.0.0.1: %+v", a)
	}
	if err := f.ResolveRoute(lo, 1000); !errors.Is(err, unix.ENODEV) {
		t.Errorf("resolve the route to 127.0.0.1: %v, want ENODEV", err)
	}
	if err := f.ResolveAddr(id(), netip.AddrPort{}, netip.MustParseAddrPort("198.51.100.7:1"), 1000); !errors.Is(err, unix.ENETUNREACH) {
		t.Errorf("resolve 198.51.100.7: %v, want ENETUNREACH", err)
	}
	c := id()
	if err := f.ResolveAddr(c, netip.AddrPort{}, la.Src, 1000); err != nil {
		t.Fatal(err)
	}
	expectEv(t, nextEv(t, f), cmEvAddrResolved, 0)
	if err := f.Connect(c, &seam.CMConnParam{QPN: 1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("connect before the route: %v", err)
	}
	if err := f.ResolveRoute(c, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("route timeout 0: %v", err)
	}
	if err := f.ResolveRoute(c, 1000); err != nil {
		t.Fatal(err)
	}
	expectEv(t, nextEv(t, f), cmEvRouteResolved, 0)
	if err := f.Connect(c, &seam.CMConnParam{QPN: 1, PrivateData: make([]byte, 57)}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("57 bytes of private data: %v", err)
	}
	if err := f.Connect(c, &seam.CMConnParam{QPN: 1, PrivateData: make([]byte, 56)}); err != nil {
		t.Errorf("56 bytes of private data: %v", err)
	}
	req := nextEv(t, f)
	expectEv(t, req, cmEvConnectRequest, 0)
	if err := f.Accept(req.ID, 77, &seam.CMConnParam{QPN: 2, PrivateData: make([]byte, 197)}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("accept with 197 bytes: %v", err)
	}
	expectEv(t, nextEv(t, f), cmEvRejected, rejConsumerDefined)
	if err := f.DestroyID(0x7ffffff0); !errors.Is(err, unix.ENOENT) {
		t.Errorf("destroy an unknown id: %v", err)
	}
}

// TestCMLoopbackListener: a listener on a loopback address takes
// connections to the netdev's addresses too (cma_any_addr,
// cma_match_private_data), as in the kernel.
func TestCMLoopbackListener(t *testing.T) {
	n := New(testHCA{})
	f := openCM(t, n)
	lis, _ := f.CreateID(1, psTCP, 0)
	if err := f.Bind(lis, netip.MustParseAddrPort("127.0.0.1:4420")); err != nil {
		t.Fatal(err)
	}
	if err := f.Listen(lis, 0); err != nil {
		t.Fatal(err)
	}
	c := routed(t, f, 2, 4420)
	if err := f.Connect(c, &seam.CMConnParam{QPN: 1}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEv(t, f); ev.Type != cmEvConnectRequest || ev.UID != 1 {
		t.Errorf("the loopback listener got %+v", ev)
	}
}

// routed is a new RC id of f, with uid, whose address and route to
// labAddr:port are resolved.
func routed(t *testing.T, f *File, uid uint64, port uint16) uint32 {
	t.Helper()
	c, err := f.CreateID(uid, psTCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ResolveAddr(c, netip.AddrPort{}, netip.AddrPortFrom(labAddr, port), 1000); err != nil {
		t.Fatal(err)
	}
	expectEv(t, nextEv(t, f), cmEvAddrResolved, 0)
	if err := f.ResolveRoute(c, 1000); err != nil {
		t.Fatal(err)
	}
	expectEv(t, nextEv(t, f), cmEvRouteResolved, 0)
	return c
}

// connectedPair makes an established connection between a listener's
// side (srv) and a requester (cli) of one HCA, as the cm package drives
// them: CONNECT_REQUEST, accept, CONNECT_RESPONSE, RTU, ESTABLISHED.
func connectedPair(t *testing.T, n *Net) (srv, cli *File, sid, cid uint32) {
	t.Helper()
	srv, cli = openCM(t, n), openCM(t, n)
	lid, _ := srv.CreateID(1, psTCP, 0)
	if err := srv.Listen(lid, 0); err != nil {
		t.Fatal(err)
	}
	la, _ := srv.QueryAddr(lid)
	cid = routed(t, cli, 2, la.Src.Port())
	if err := cli.Connect(cid, &seam.CMConnParam{QPN: 0x10, ResponderResources: 1, InitiatorDepth: 1}); err != nil {
		t.Fatal(err)
	}
	req := nextEv(t, srv)
	expectEv(t, req, cmEvConnectRequest, 0)
	sid = req.ID
	if err := srv.Accept(sid, 3, &seam.CMConnParam{QPN: 0x20}); err != nil {
		t.Fatal(err)
	}
	expectEv(t, nextEv(t, cli), cmEvConnectResponse, 0)
	if err := cli.Accept(cid, 0, nil); err != nil {
		t.Fatal(err)
	}
	est := nextEv(t, srv)
	expectEv(t, est, cmEvEstablished, 0)
	if est.UID != 3 {
		t.Errorf("ESTABLISHED carries uid %d, want the accept's 3", est.UID)
	}
	return srv, cli, sid, cid
}

// TestCMDisconnect: the requester's DREQ gives the listener's side
// DISCONNECTED at once. Unanswered, the DREQ times out: DISCONNECTED
// with -ETIMEDOUT after dreqTimeout, then TIMEWAIT_EXIT, and a second
// disconnect sends nothing and succeeds. Answered with rdma_disconnect
// (a DREP), the requester's wait ends at once: DISCONNECTED with status
// 0 (cma_ib_handler's DREP_RECEIVED), long before the DREQ's timeout,
// then TIMEWAIT_EXIT on both sides (cm_enter_timewait on each).
func TestCMDisconnect(t *testing.T) {
	for _, answered := range []bool{false, true} {
		t.Run(map[bool]string{false: "unanswered", true: "answered"}[answered], func(t *testing.T) {
			n := New(testHCA{})
			srv, cli, sid, cid := connectedPair(t, n)
			start := time.Now()
			if err := cli.Disconnect(cid); err != nil {
				t.Fatal(err)
			}
			expectEv(t, nextEv(t, srv), cmEvDisconnected, 0)
			if !answered {
				expectEv(t, nextEv(t, cli), cmEvDisconnected, -int32(unix.ETIMEDOUT))
				if el := time.Since(start); el < dreqTimeout {
					t.Errorf("the DREQ timed out after %v, want %v", el, dreqTimeout)
				}
				expectEv(t, nextEv(t, cli), cmEvTimewaitExit, 0)
				if err := cli.Disconnect(cid); err != nil {
					t.Errorf("disconnect after the end: %v (the kernel sends nothing and succeeds)", err)
				}
				return
			}
			if err := srv.Disconnect(sid); err != nil {
				t.Fatal(err)
			}
			ev := nextEv(t, cli)
			el := time.Since(start)
			if ev.Type != cmEvDisconnected || ev.Status != 0 {
				t.Fatalf("the requester got event %d (status %d) after %v, want DISCONNECTED (status 0): the DREP was not delivered", ev.Type, ev.Status, el)
			}
			if el >= dreqTimeout {
				t.Errorf("the DREP came after %v, the DREQ's timeout (%v)", el, dreqTimeout)
			}
			expectEv(t, nextEv(t, cli), cmEvTimewaitExit, 0)
			expectEv(t, nextEv(t, srv), cmEvTimewaitExit, 0)
		})
	}
}

// TestCMDestroyEnds: destroying one side of an established connection
// disconnects the other (cm_destroy_id's DREQ); destroying a requester
// that got the accept (REP_RCVD) rejects with reason 28; one that did not
// yet (REQ_SENT) with reason 4 (IB_CM_REJ_TIMEOUT), which the listener's
// side, not accepted yet, does not hear of (no uid), and its accept then
// fails.
func TestCMDestroyEnds(t *testing.T) {
	n := New(testHCA{})
	srv, cli, _, cid := connectedPair(t, n)
	if err := cli.DestroyID(cid); err != nil {
		t.Fatal(err)
	}
	expectEv(t, nextEv(t, srv), cmEvDisconnected, 0)

	srv2, cli2 := openCM(t, n), openCM(t, n)
	lid, _ := srv2.CreateID(1, psTCP, 0)
	srv2.Listen(lid, 0)
	la, _ := srv2.QueryAddr(lid)
	c := routed(t, cli2, 2, la.Src.Port())
	cli2.Connect(c, &seam.CMConnParam{QPN: 1})
	req := nextEv(t, srv2)
	if err := srv2.Accept(req.ID, 7, &seam.CMConnParam{QPN: 2}); err != nil {
		t.Fatal(err)
	}
	if err := cli2.DestroyID(c); err != nil {
		t.Fatal(err)
	}
	expectEv(t, nextEv(t, srv2), cmEvRejected, rejConsumerDefined)

	c = routed(t, cli2, 3, la.Src.Port())
	cli2.Connect(c, &seam.CMConnParam{QPN: 1})
	req = nextEv(t, srv2)
	if err := cli2.DestroyID(c); err != nil {
		t.Fatal(err)
	}
	if err := srv2.Accept(req.ID, 8, &seam.CMConnParam{QPN: 2}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("accept of a request whose requester left: %v, want EINVAL", err)
	}
}

// TestCMNeighbourTimeout: another host of the subnet never answers the
// neighbour lookup: ADDR_ERROR -ETIMEDOUT after the resolve's timeout.
func TestCMNeighbourTimeout(t *testing.T) {
	n := New(testHCA{})
	f := openCM(t, n)
	id, _ := f.CreateID(1, psTCP, 0)
	if err := f.ResolveAddr(id, netip.AddrPort{}, netip.MustParseAddrPort("192.0.2.7:1"), 30); err != nil {
		t.Fatal(err)
	}
	expectEv(t, nextEv(t, f), cmEvAddrError, -int32(unix.ETIMEDOUT))
}

// TestCMBacklogRetransmits: a request a full backlog dropped is delivered
// again when the CM retransmits it, once the listener has taken its
// events.
func TestCMBacklogRetransmits(t *testing.T) {
	defer func(d time.Duration) { reqRetryInterval = d }(reqRetryInterval)
	reqRetryInterval = 20 * time.Millisecond
	n := New(testHCA{})
	srv, cli := openCM(t, n), openCM(t, n)
	lid, _ := srv.CreateID(1, psTCP, 0)
	srv.Listen(lid, 1)
	la, _ := srv.QueryAddr(lid)
	for i := range 2 {
		c := routed(t, cli, uint64(10+i), la.Src.Port())
		if err := cli.Connect(c, &seam.CMConnParam{QPN: uint32(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	// The first request filled the backlog; taking it frees room for the
	// second's retransmission.
	for range 2 {
		expectEv(t, nextEv(t, srv), cmEvConnectRequest, 0)
	}
}
