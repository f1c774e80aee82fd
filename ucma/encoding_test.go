package ucma

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/ucmaabi"
	"golang.org/x/sys/unix"
)

// recorded is one command as it would be written.
type recorded struct {
	hdr ucmaabi.RdmaUcmCmdHdr
	in  []byte
}

// record replaces the system call for the test; answer, if set, fills
// each command's response.
func record(t *testing.T, answer func(cmd uint32, out []byte) unix.Errno) *[]recorded {
	t.Helper()
	var got []recorded
	writeHook = func(buf, out []byte) unix.Errno {
		var r recorded
		r.hdr = *(*ucmaabi.RdmaUcmCmdHdr)(unsafe.Pointer(&buf[0]))
		r.in = append([]byte(nil), buf[unsafe.Sizeof(r.hdr):]...)
		got = append(got, r)
		if answer != nil {
			return answer(r.hdr.Cmd, out)
		}
		return 0
	}
	t.Cleanup(func() { writeHook = nil })
	return &got
}

func as[T any](t *testing.T, r recorded) *T {
	t.Helper()
	var v T
	if uintptr(len(r.in)) != unsafe.Sizeof(v) || uintptr(r.hdr.In) != unsafe.Sizeof(v) {
		t.Fatalf("command %d: %d bytes (header in %d), want sizeof %T = %d", r.hdr.Cmd, len(r.in), r.hdr.In, v, unsafe.Sizeof(v))
	}
	copy(bytesOf(&v), r.in)
	return &v
}

// TestSockaddrBytes checks the socket addresses against their C layout
// (<linux/in.h>, <linux/in6.h>): family in host order, port and address
// in network order, the IPv6 scope id after the address.
func TestSockaddrBytes(t *testing.T) {
	var ss ucmaabi.SockaddrStorage
	n, err := putSockaddr(&ss, netip.MustParseAddrPort("192.0.2.1:4420"))
	if err != nil || n != 16 {
		t.Fatalf("IPv4: %d, %v", n, err)
	}
	want := []byte{0, 0, 0x11, 0x44, 192, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.NativeEndian.PutUint16(want, unix.AF_INET)
	if b := storageBytes(&ss)[:16]; !bytes.Equal(b, want) {
		t.Errorf("IPv4: % x, want % x", b, want)
	}
	n, err = putSockaddr(&ss, netip.MustParseAddrPort("[fe80::1%7]:7471"))
	if err != nil || n != 28 {
		t.Fatalf("IPv6: %d, %v", n, err)
	}
	b := storageBytes(&ss)
	if binary.NativeEndian.Uint16(b) != unix.AF_INET6 || binary.BigEndian.Uint16(b[2:]) != 7471 ||
		b[8] != 0xfe || b[9] != 0x80 || b[23] != 1 || binary.NativeEndian.Uint32(b[24:]) != 7 {
		t.Errorf("IPv6: % x", b[:28])
	}
	if got := sockaddr(b[:28]); got.String() != "[fe80::1%7]:7471" {
		t.Errorf("decoded %v", got)
	}
	if _, err := putSockaddr(&ss, netip.MustParseAddrPort("[fe80::1%no-such-interface]:1")); err == nil {
		t.Error("an unknown zone was taken")
	}
	if _, err := putSockaddr(&ss, netip.AddrPort{}); err == nil {
		t.Error("no address was taken")
	}
}

// TestCommandEncodings checks the header and the command struct each
// method writes: the command number, in as the struct's size, out as its
// response's, and the fields librdmacm 44's cma.c fills.
func TestCommandEncodings(t *testing.T) {
	got := record(t, func(cmd uint32, out []byte) unix.Errno {
		switch cmd {
		case ucmaabi.RDMA_USER_CM_CMD_CREATE_ID:
			binary.NativeEndian.PutUint32(out, 42)
		case ucmaabi.RDMA_USER_CM_CMD_DESTROY_ID:
			binary.NativeEndian.PutUint32(out, 3)
		}
		return 0
	})
	f := &File{}
	id, err := f.CreateID(0xabcd, PortSpaceTCP, QPTypeRC)
	if err != nil || id != 42 {
		t.Fatalf("create id: %d, %v", id, err)
	}
	if n, err := f.DestroyID(42); err != nil || n != 3 {
		t.Fatalf("destroy id: %d, %v", n, err)
	}
	if err := f.Bind(7, netip.MustParseAddrPort("192.0.2.1:4420")); err != nil {
		t.Fatal(err)
	}
	if err := f.ResolveAddr(7, netip.AddrPort{}, netip.MustParseAddrPort("[2001:db8::1]:4420"), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := f.ResolveRoute(7, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := f.Listen(7, 0); err != nil {
		t.Fatal(err)
	}
	pd := []byte("hello")
	if err := f.Connect(7, &ConnParam{QPN: 0x1234, PrivateData: pd, ResponderResources: 1, InitiatorDepth: 2, RetryCount: 7, RNRRetryCount: 6, SRQ: true}, ECE{VendorID: 0x15b3, AttrMod: 9}); err != nil {
		t.Fatal(err)
	}
	if err := f.Accept(7, 0x99, &ConnParam{QPN: 0x55, PrivateData: pd}, ECE{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Accept(7, 0, nil, ECE{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Reject(7, RejectConsumerDefined, []byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := f.Disconnect(7); err != nil {
		t.Fatal(err)
	}
	if _, err := f.InitQPAttr(7, QPStateRTR); err != nil {
		t.Fatal(err)
	}
	if err := f.SetOption(7, OptionLevelID, OptionTOS, []byte{0x20}); err != nil {
		t.Fatal(err)
	}
	r := *got
	if len(r) != 13 {
		t.Fatalf("%d commands recorded", len(r))
	}
	wantCmds := []uint32{ucmaabi.RDMA_USER_CM_CMD_CREATE_ID, ucmaabi.RDMA_USER_CM_CMD_DESTROY_ID, ucmaabi.RDMA_USER_CM_CMD_BIND,
		ucmaabi.RDMA_USER_CM_CMD_RESOLVE_ADDR, ucmaabi.RDMA_USER_CM_CMD_RESOLVE_ROUTE, ucmaabi.RDMA_USER_CM_CMD_LISTEN,
		ucmaabi.RDMA_USER_CM_CMD_CONNECT, ucmaabi.RDMA_USER_CM_CMD_ACCEPT, ucmaabi.RDMA_USER_CM_CMD_ACCEPT,
		ucmaabi.RDMA_USER_CM_CMD_REJECT, ucmaabi.RDMA_USER_CM_CMD_DISCONNECT, ucmaabi.RDMA_USER_CM_CMD_INIT_QP_ATTR}
	for i, c := range wantCmds {
		if r[i].hdr.Cmd != c {
			t.Errorf("command %d: %d, want %d", i, r[i].hdr.Cmd, c)
		}
	}
	if c := as[ucmaabi.RdmaUcmCreateId](t, r[0]); c.Uid != 0xabcd || c.Ps != 0x0106 || c.QpType != 2 || c.Response == 0 || r[0].hdr.Out != 4 {
		t.Errorf("create id: %+v, out %d", c, r[0].hdr.Out)
	}
	if c := as[ucmaabi.RdmaUcmDestroyId](t, r[1]); c.Id != 42 || c.Response == 0 || r[1].hdr.Out != 4 {
		t.Errorf("destroy id: %+v", c)
	}
	if c := as[ucmaabi.RdmaUcmBind](t, r[2]); c.Id != 7 || c.AddrSize != 16 || c.Addr.Family != unix.AF_INET || r[2].hdr.Out != 0 {
		t.Errorf("bind: %+v", c)
	}
	if c := as[ucmaabi.RdmaUcmResolveAddr](t, r[3]); c.Id != 7 || c.TimeoutMs != 2000 || c.SrcSize != 0 || c.DstSize != 28 || c.DstAddr.Family != unix.AF_INET6 {
		t.Errorf("resolve addr: %+v", c)
	}
	if c := as[ucmaabi.RdmaUcmResolveRoute](t, r[4]); c.Id != 7 || c.TimeoutMs != 1500 {
		t.Errorf("resolve route: %+v", c)
	}
	if c := as[ucmaabi.RdmaUcmListen](t, r[5]); c.Id != 7 || c.Backlog != 0 {
		t.Errorf("listen: %+v", c)
	}
	c := as[ucmaabi.RdmaUcmConnect](t, r[6])
	if p := c.ConnParam; c.Id != 7 || p.QpNum != 0x1234 || p.PrivateDataLen != 5 || string(p.PrivateData[:5]) != "hello" || p.Valid != 1 ||
		p.ResponderResources != 1 || p.InitiatorDepth != 2 || p.RetryCount != 7 || p.RnrRetryCount != 6 || p.Srq != 1 || c.Ece.VendorId != 0x15b3 || c.Ece.AttrMod != 9 {
		t.Errorf("connect: %+v", c)
	}
	if a := as[ucmaabi.RdmaUcmAccept](t, r[7]); a.Uid != 0x99 || a.Id != 7 || a.ConnParam.Valid != 1 || a.ConnParam.QpNum != 0x55 || a.ConnParam.PrivateDataLen != 5 {
		t.Errorf("accept: %+v", a)
	}
	if a := as[ucmaabi.RdmaUcmAccept](t, r[8]); a.Uid != 0 || a.Id != 7 || a.ConnParam.Valid != 0 {
		t.Errorf("accept of a response (RTU): %+v", a)
	}
	if j := as[ucmaabi.RdmaUcmReject](t, r[9]); j.Id != 7 || j.Reason != 28 || j.PrivateDataLen != 2 || j.PrivateData[1] != 2 {
		t.Errorf("reject: %+v", j)
	}
	if d := as[ucmaabi.RdmaUcmDisconnect](t, r[10]); d.Id != 7 {
		t.Errorf("disconnect: %+v", d)
	}
	if q := as[ucmaabi.RdmaUcmInitQpAttr](t, r[11]); q.Id != 7 || q.QpState != 2 || q.Response == 0 || r[11].hdr.Out != 144 {
		t.Errorf("init qp attr: %+v, out %d", q, r[11].hdr.Out)
	}
	if o := as[ucmaabi.RdmaUcmSetOption](t, r[12]); r[12].hdr.Cmd != ucmaabi.RDMA_USER_CM_CMD_SET_OPTION || o.Id != 7 || o.Level != 0 || o.Optname != 0 || o.Optlen != 1 || o.Optval == 0 {
		t.Errorf("set option: %+v", o)
	}
}

// TestEventDecoding decodes a CONNECT_REQUEST of each union member as
// ucma_create_uevent fills it.
func TestEventDecoding(t *testing.T) {
	record(t, func(cmd uint32, out []byte) unix.Errno {
		if cmd != ucmaabi.RDMA_USER_CM_CMD_GET_EVENT {
			return unix.EINVAL
		}
		r := (*ucmaabi.RdmaUcmEventResp)(unsafe.Pointer(&out[0]))
		*r = ucmaabi.RdmaUcmEventResp{Uid: 5, Id: 9, Event: ucmaabi.RDMA_CM_EVENT_CONNECT_REQUEST, Status: uint32(0xffffff92)}
		c := (*ucmaabi.RdmaUcmConnParam)(unsafe.Pointer(&r.Param[0]))
		c.QpNum, c.PrivateDataLen, c.ResponderResources, c.InitiatorDepth = 0x77, 56, 3, 4
		c.PrivateData[0] = 0xaa
		return 0
	})
	ev, err := (&File{}).GetEvent(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ev.UID != 5 || ev.ID != 9 || ev.Type != EventConnectRequest || ev.Status != -110 || ev.Errno() != unix.ETIMEDOUT {
		t.Errorf("event %+v", ev)
	}
	if p := ev.Conn; p.QPN != 0x77 || len(p.PrivateData) != 56 || p.PrivateData[0] != 0xaa || p.ResponderResources != 3 || p.InitiatorDepth != 4 {
		t.Errorf("conn param %+v", p)
	}
	if ev.Type.String() != "CONNECT_REQUEST" || EventType(99).String() != "EventType(99)" {
		t.Errorf("names: %v, %v", ev.Type, EventType(99))
	}
}

func TestErrorsNameCommandAndID(t *testing.T) {
	record(t, func(uint32, []byte) unix.Errno { return unix.EINVAL })
	err := (&File{}).Disconnect(12)
	if !errors.Is(err, unix.EINVAL) || err.Error() != "ucma: disconnect id 12: invalid argument" {
		t.Errorf("error %q", err)
	}
	if err := (&File{}).Reject(1, 0, make([]byte, 256)); err == nil || errors.Is(err, unix.EINVAL) {
		t.Errorf("256 bytes of reject data: %v (refused before the write, no errno)", err)
	}
}
