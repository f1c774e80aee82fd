package cm_test

import (
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/mlx5"
)

// TestUDResolveAndSend resolves a UD listener over IPv6 (the SIDR
// exchange), with private data both ways, and sends the listener's QP a
// datagram through an address handle made from the answer.
func TestUDResolveAndSend(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	l, err := srv.m.Listen(ctx, "udp6", "[2001:db8::1]:7174", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sqp, cqp := srv.qp(t, mlx5.QPTypeUD), cli.qp(t, mlx5.QPTypeUD)
	var req []byte
	done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) {
		req = r.PrivateData()
		return r.Accept(ctx, &cm.AcceptOptions{QP: sqp, PrivateData: []byte("ud ok")})
	})
	conn, err := cli.m.Dial(ctx, "udp", "[2001:db8::1]:7174", &cm.DialOptions{QP: cqp, PrivateData: []byte("ud?")})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.c.Close()
	if len(req) != cm.MaxUDRequestData || string(req[:3]) != "ud?" {
		t.Errorf("request private data % x", req)
	}
	if pd := conn.PrivateData(); len(pd) != cm.MaxUDReplyData || string(pd[:5]) != "ud ok" {
		t.Errorf("reply private data % x", pd)
	}
	peer := conn.UDPeer()
	if peer.QPN != sqp.QPN() || peer.QKey != 0x01234567 || !peer.Path.GRH {
		t.Fatalf("peer %+v, want QP %#x, Q_Key RDMA_UDP_QKEY, a GRH", peer, sqp.QPN())
	}
	for _, qp := range []*mlx5.QP{sqp, cqp} {
		if s := qpState(t, qp); s != mlx5.QPStateRTS {
			t.Errorf("UD QP %#x in %v, want RTS", qp.QPN(), s)
		}
	}
	if err := conn.Disconnect(); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("disconnect of a UD connection: %v, want ErrInvalid", err)
	}

	sendUD(t, srv, cli, sqp, cqp, peer, []byte("datagram"))
}

// TestUDRejectWithPrivateData: a SIDR reject reaches the dialer as a
// *RejectError with the SIDR status and the private data.
func TestUDRejectWithPrivateData(t *testing.T) {
	srv, cli := pair(t)
	ctx := testCtx(t)
	l, err := srv.m.Listen(ctx, "udp", ":9000", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) { return nil, r.Reject(0, []byte("go away")) })
	_, err = cli.m.Dial(ctx, "udp4", "192.0.2.1:9000", &cm.DialOptions{QP: cli.qp(t, mlx5.QPTypeUD)})
	var rej *cm.RejectError
	if !errors.As(err, &rej) || !rej.UD || rej.Reason != cm.SIDRReject || len(rej.PrivateData) != cm.MaxUDReplyData || string(rej.PrivateData[:7]) != "go away" {
		t.Fatalf("dial: %v (%+v)", err, rej)
	}
	if res := <-done; res.err != nil {
		t.Fatal(res.err)
	}
	// Nobody on the port: the CM answers for the listener.
	_, err = cli.m.Dial(ctx, "udp", "192.0.2.1:9001", &cm.DialOptions{QP: cli.qp(t, mlx5.QPTypeUD)})
	if !errors.As(err, &rej) || rej.Reason != cm.SIDRNoListener {
		t.Fatalf("dial of a port nobody listens on: %v", err)
	}
}
