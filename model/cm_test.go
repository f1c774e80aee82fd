package model

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// TestCMOnHCA: the connection manager reads the HCA through cmHCA. The
// netdev's three addresses (the GID table's) bind and route, with the
// RoCE v2 GID index of each, the netdev's path MTU and the ACK timeout
// of the profile's local_ca_ack_delay; QueryAddr gives the node GUID;
// ids of two contexts of one HCA meet; CMIDs and InjectCMDeviceRemoval
// reach the same manager; a closed context opens none.
func TestCMOnHCA(t *testing.T) {
	const (
		psTCP          = 0x0106 // RDMA_PS_TCP
		evConnectReq   = 4      // RDMA_CM_EVENT_CONNECT_REQUEST
		ackTimeoutCX7  = 19     // cm_ack_timeout(16, 18)
		resolveTimeout = 1000
	)
	d := newDev(t, "cx7")
	d2, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.Close() })
	var cms []seam.CM
	for _, dev := range []*Device{d, d2} {
		f, err := dev.OpenCM()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		cms = append(cms, f)
	}
	srv, cli := cms[0], cms[1]
	next := func(f seam.CM, want uint32) seam.CMEvent {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), mustCome)
		defer cancel()
		ev, err := f.NextEvent(ctx)
		if err != nil || ev.Type != want || ev.Status != 0 {
			t.Fatalf("event %+v, %v; want type %d", ev, err, want)
		}
		return ev
	}
	for i, c := range []struct {
		addr string
		sgid uint8
	}{{"[fe80::ff:fe00:1%2]:0", 1}, {"192.0.2.1:0", 3}, {"[2001:db8::1]:0", 5}} {
		lid, _ := srv.CreateID(uint64(1+i), psTCP, 0)
		if err := srv.Bind(lid, netip.MustParseAddrPort(c.addr)); err != nil {
			t.Fatalf("bind %s: %v", c.addr, err)
		}
		if err := srv.Listen(lid, 0); err != nil {
			t.Fatal(err)
		}
		la, _ := srv.QueryAddr(lid)
		if la.NodeGUID != d.h.guid {
			t.Errorf("%s: node GUID %#x, want the HCA's %#x", c.addr, la.NodeGUID, d.h.guid)
		}
		id, _ := cli.CreateID(uint64(10+i), psTCP, 0)
		if err := cli.ResolveAddr(id, netip.AddrPortFrom(la.Src.Addr(), 0), la.Src, resolveTimeout); err != nil {
			t.Fatal(err)
		}
		next(cli, 0) // ADDR_RESOLVED
		if err := cli.ResolveRoute(id, resolveTimeout); err != nil {
			t.Fatal(err)
		}
		next(cli, 2) // ROUTE_RESOLVED
		if err := cli.Connect(id, &seam.CMConnParam{QPN: 0x100}); err != nil {
			t.Fatal(err)
		}
		req := next(srv, evConnectReq)
		rtr, _, err := srv.InitQPAttr(req.ID, seam.QPStateRTR)
		if err != nil || rtr.AH.GRH.SGIDIndex != c.sgid || rtr.PathMTU != iboeMTU(portNetdevMTU) {
			t.Errorf("%s: RTR %+v, %v; want GID index %d, path MTU %d", c.addr, rtr, err, c.sgid, iboeMTU(portNetdevMTU))
		}
		if rts, _, err := srv.InitQPAttr(req.ID, seam.QPStateRTS); err != nil || rts.Timeout != ackTimeoutCX7 {
			t.Errorf("%s: RTS timeout %d, %v; want %d", c.addr, rts.Timeout, err, ackTimeoutCX7)
		}
	}
	if n := d2.CMIDs(); n != 9 {
		t.Errorf("CMIDs %d, want 9 (3 listeners, requesters, passive ids)", n)
	}
	d2.InjectCMDeviceRemoval()
	id, _ := srv.CreateID(99, psTCP, 0)
	if err := srv.Bind(id, netip.MustParseAddrPort("192.0.2.1:0")); !errors.Is(err, unix.ENODEV) {
		t.Errorf("bind after the device's removal: %v, want ENODEV", err)
	}
	d2.Close()
	if _, err := d2.OpenCM(); !errors.Is(err, unix.EBADF) {
		t.Errorf("OpenCM on a closed context: %v, want EBADF", err)
	}
}
