package cm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// The kernel lab's tests of package cm: mlx5go's connection manager on
// the kernel's (rdma_ucm, rdma_cm, ib_cm) over rxe0, against itself and
// against Debian's librdmacm programs (rdmacm-utils), which the lab puts
// in the guest. mlx5go's data path is mlx5's, so on rxe the QPs are
// generic verbs QPs, cm.OpenVerbs' (over package uverbs), driven by cm
// through its QP interface.

const labAddr = "192.0.2.1"

// rxe is rxe0 for one side, opened through cm's adapter for devices
// that are not mlx5 (cm.OpenVerbs).
type rxe struct{ d *cm.VerbsDevice }

func openRXE(t *testing.T) *rxe {
	t.Helper()
	d, err := cm.OpenVerbs(labenv.RXEDevice)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &rxe{d: d}
}

// qp makes a QP in RESET on rxe0, closed when the test ends.
func (r *rxe) qp(t *testing.T, typ mlx5.QPType) *cm.VerbsQP {
	t.Helper()
	qp, err := r.d.CreateQP(typ)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Close() })
	return qp
}

func labCM(t *testing.T) *cm.Manager {
	t.Helper()
	m, err := cm.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func labCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rxeCounts are rxe0's cm_id and qp counts (RDMA netlink's resource
// summary).
func rxeCounts(t *testing.T) (cmIDs, qps uint64) {
	t.Helper()
	devs, err := uverbs.NetlinkDevices()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Name == labenv.RXEDevice {
			c, err := uverbs.ResourceCounts(d.Index)
			if err != nil {
				t.Fatal(err)
			}
			return c["cm_id"], c["qp"]
		}
	}
	t.Fatalf("no %s", labenv.RXEDevice)
	return 0, 0
}

// noKernelLeak checks, when the test ends, that rxe0's cm_ids and QPs
// came back to what they were when it began.
func noKernelLeak(t *testing.T) {
	t.Helper()
	ids, qps := rxeCounts(t)
	t.Cleanup(func() {
		var i, q uint64
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if i, q = rxeCounts(t); i == ids && q == qps {
				return
			}
		}
		t.Errorf("rxe0 has %d cm_ids and %d QPs, %d and %d before the test", i, q, ids, qps)
	})
}

// TestLabCMPrivateDataBothWays connects two of mlx5go's connection
// managers through the kernel's: private data both ways at the IB CM's
// sizes, both QPs in RTS, a reject with private data, a disconnect from
// each side with DISCONNECTED and TIMEWAIT_EXIT, and the same for UD.
func TestLabCMPrivateDataBothWays(t *testing.T) {
	labenv.Require(t)
	noKernelLeak(t)
	ctx := labCtx(t)
	srvM, cliM := labCM(t), labCM(t)
	srv, cli := openRXE(t), openRXE(t)
	l, err := srvM.Listen(ctx, "tcp", labAddr+":0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, fromDialer := range []bool{true, false} {
		sqp, cqp := srv.qp(t, mlx5.QPTypeRC), cli.qp(t, mlx5.QPTypeRC)
		var req []byte
		done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) {
			req = r.PrivateData()
			return r.Accept(ctx, &cm.AcceptOptions{QP: sqp, PrivateData: []byte("reply from the listener")})
		})
		dc, err := cliM.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: cqp, PrivateData: []byte("request")})
		if err != nil {
			t.Fatal(err)
		}
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		lc := res.c
		if len(req) != cm.MaxRequestData || string(req[:7]) != "request" || !bytes.Equal(req[7:], make([]byte, cm.MaxRequestData-7)) {
			t.Errorf("the kernel delivered request private data % x", req)
		}
		if pd := dc.PrivateData(); len(pd) != cm.MaxReplyData || string(pd[:23]) != "reply from the listener" {
			t.Errorf("the kernel delivered reply private data % x", pd)
		}
		for _, q := range []*cm.VerbsQP{sqp, cqp} {
			if a, err := q.Query(mlx5.QPAttrState); err != nil || a.State != mlx5.QPStateRTS {
				t.Errorf("QP %#x: %v, %v; want RTS", q.QPN(), a.State, err)
			}
		}
		if a, _ := cqp.Query(mlx5.QPAttrDestQPN); a.DestQPN != sqp.QPN() {
			t.Errorf("the dialer's QP is connected to %#x, want %#x", a.DestQPN, sqp.QPN())
		}
		first, other := dc, lc
		if !fromDialer {
			first, other = lc, dc
		}
		if err := first.Disconnect(); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*cm.Conn{other, first} {
			var types []cm.EventType
			for len(types) < 3 {
				ev, err := c.NextEvent(ctx)
				if err != nil {
					t.Fatalf("%v: %v after %v", c, err, types)
				}
				types = append(types, ev.Type)
			}
			if types[0] != cm.EventEstablished || types[1] != cm.EventDisconnected || types[2] != cm.EventTimewaitExit {
				t.Errorf("%v: events %v", c, types)
			}
			if !errors.Is(c.Err(), cm.ErrDisconnected) {
				t.Errorf("%v: %v", c, c.Err())
			}
		}
		dc.Close()
		lc.Close()
	}

	// A reject with private data.
	done := serveOne(ctx, l, func(r *cm.Request) (*cm.Conn, error) { return nil, r.Reject(0, []byte("not now")) })
	_, err = cliM.Dial(ctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: cli.qp(t, mlx5.QPTypeRC)})
	var rej *cm.RejectError
	if !errors.As(err, &rej) || rej.Reason != cm.RejectConsumerDefined || len(rej.PrivateData) != cm.MaxRejectData || string(rej.PrivateData[:7]) != "not now" {
		t.Errorf("dial: %v (%+v)", err, rej)
	}
	<-done
	// Nobody listening on a port.
	if _, err := cliM.Dial(ctx, "tcp", labAddr+":1", &cm.DialOptions{QP: cli.qp(t, mlx5.QPTypeRC)}); !errors.As(err, &rej) || rej.Reason != cm.RejectNoListener {
		t.Errorf("dial of a port nobody listens on: %v", err)
	}

	// UD.
	ul, err := srvM.Listen(ctx, "udp", labAddr+":0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	sud, cud := srv.qp(t, mlx5.QPTypeUD), cli.qp(t, mlx5.QPTypeUD)
	var ureq []byte
	udone := serveOne(ctx, ul, func(r *cm.Request) (*cm.Conn, error) {
		ureq = r.PrivateData()
		return r.Accept(ctx, &cm.AcceptOptions{QP: sud, PrivateData: []byte("ud reply")})
	})
	uc, err := cliM.Dial(ctx, "udp", ul.Addr().String(), &cm.DialOptions{QP: cud, PrivateData: []byte("ud request")})
	if err != nil {
		t.Fatal(err)
	}
	if res := <-udone; res.err != nil {
		t.Fatal(res.err)
	} else {
		res.c.Close()
	}
	if len(ureq) != cm.MaxUDRequestData || string(ureq[:10]) != "ud request" {
		t.Errorf("UD request private data % x", ureq)
	}
	if p := uc.UDPeer(); p.QPN != sud.QPN() || p.QKey != 0x01234567 || !p.Path.GRH {
		t.Errorf("UD peer %+v, want QP %#x, RDMA_UDP_QKEY", p, sud.QPN())
	}
	if pd := uc.PrivateData(); len(pd) != cm.MaxUDReplyData || string(pd[:8]) != "ud reply" {
		t.Errorf("UD reply private data % x", pd)
	}
	uc.Close()
	udone = serveOne(ctx, ul, func(r *cm.Request) (*cm.Conn, error) { return nil, r.Reject(0, []byte("ud no")) })
	_, err = cliM.Dial(ctx, "udp", ul.Addr().String(), &cm.DialOptions{QP: cli.qp(t, mlx5.QPTypeUD)})
	if !errors.As(err, &rej) || !rej.UD || rej.Reason != cm.SIDRReject || string(rej.PrivateData[:5]) != "ud no" {
		t.Errorf("UD dial: %v (%+v)", err, rej)
	}
	<-udone
}

// TestLabCMNoRDMADevice: the kernel's answers for addresses with no RDMA
// device behind them, the ones the model gives (TestNoRDMADevice), each
// ErrResolve whether the kernel refuses the command at once or reports
// it in an event.
func TestLabCMNoRDMADevice(t *testing.T) {
	labenv.Require(t)
	noKernelLeak(t)
	ctx := labCtx(t)
	m := labCM(t)
	r := openRXE(t)
	for _, c := range []struct {
		addr  string
		errno unix.Errno
	}{{"127.0.0.1:4420", unix.ENODEV}, {"198.51.100.7:4420", unix.EADDRNOTAVAIL}} {
		if l, err := m.Listen(ctx, "tcp", c.addr, nil); !errors.Is(err, c.errno) || !errors.Is(err, cm.ErrResolve) {
			l.Close()
			t.Errorf("listen on %s: %v, want ErrResolve with %v", c.addr, err, c.errno)
		}
	}
	for _, c := range []struct {
		addr  string
		errno unix.Errno
	}{{"127.0.0.1:4420", unix.ENODEV}, {"198.51.100.7:4420", unix.ENETUNREACH}} {
		qp := r.qp(t, mlx5.QPTypeRC)
		if _, err := m.Dial(ctx, "tcp", c.addr, &cm.DialOptions{QP: qp}); !errors.Is(err, c.errno) || !errors.Is(err, cm.ErrResolve) {
			t.Errorf("dial %s: %v, want ErrResolve with %v", c.addr, err, c.errno)
		}
		if a, _ := qp.Query(mlx5.QPAttrState); a.State != mlx5.QPStateReset {
			t.Errorf("the QP moved to %v", a.State)
		}
	}
}

// tool is one of Debian's librdmacm programs running in the guest. Its
// output is a pipe, so it comes when the program exits (stdio buffers
// it): readiness is probed through the CM, not read.
type tool struct {
	name string
	args []string
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func startTool(t *testing.T, name string, args ...string) *tool {
	t.Helper()
	path := "/usr/bin/" + name
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v (the lab puts Debian's rdmacm-utils in the guest)", path, err)
	}
	tl := &tool{name: name, args: args, cmd: exec.Command(path, args...), done: make(chan struct{})}
	tl.cmd.Stdout, tl.cmd.Stderr = &tl.out, &tl.out
	if err := tl.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		tl.err = tl.cmd.Wait()
		close(tl.done)
	}()
	t.Cleanup(func() {
		select {
		case <-tl.done:
		default:
			tl.cmd.Process.Kill()
			<-tl.done
		}
		t.Logf("%s %s: %v\n%s", name, strings.Join(args, " "), tl.err, tl.out.String())
	})
	return tl
}

// exit waits for the tool to end and returns its exit status and output.
func (tl *tool) exit(t *testing.T, d time.Duration) (int, string) {
	t.Helper()
	select {
	case <-tl.done:
	case <-time.After(d):
		t.Fatalf("%s %s did not exit within %v", tl.name, strings.Join(tl.args, " "), d)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(tl.err, &ee):
		return ee.ExitCode(), tl.out.String()
	case tl.err != nil:
		t.Fatalf("%s: %v", tl.name, tl.err)
	}
	return 0, tl.out.String()
}

// dialTool dials a tool's listener, again while nobody listens yet (the
// kernel's CM rejects with RejectNoListener) or the SIDR request finds
// no listener.
func dialTool(ctx context.Context, t *testing.T, m *cm.Manager, network, addr string, newQP func() cm.QP) *cm.Conn {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := m.Dial(ctx, network, addr, &cm.DialOptions{QP: newQP(), PrivateData: bytes.Repeat([]byte{0xa5}, 32)})
		var rej *cm.RejectError
		if err == nil {
			return c
		}
		if !errors.As(err, &rej) || (rej.Reason != cm.RejectNoListener && !(rej.UD && rej.Reason == cm.SIDRNoListener)) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// serveAll accepts every request of l with a new QP until ctx ends,
// handing out the connections.
func serveAll(ctx context.Context, t *testing.T, l *cm.Listener, newQP func() cm.QP, pd []byte) <-chan *cm.Conn {
	conns := make(chan *cm.Conn, 1024)
	go func() {
		for {
			r, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				c, err := r.Accept(ctx, &cm.AcceptOptions{QP: newQP(), PrivateData: pd})
				if err != nil {
					t.Errorf("accept %v: %v", r, err)
					return
				}
				conns <- c
			}()
		}
	}()
	return conns
}

// waitEnded waits for connections to end and closes them.
func waitEnded(ctx context.Context, t *testing.T, conns []*cm.Conn) {
	t.Helper()
	for _, c := range conns {
		select {
		case <-c.Done():
			if !errors.Is(c.Err(), cm.ErrDisconnected) {
				t.Errorf("%v ended with %v", c, c.Err())
			}
		case <-ctx.Done():
			t.Fatalf("%v: not disconnected", c)
		}
		c.Close()
	}
}

// TestLabInteropUcmatose runs mlx5go's connection manager against
// Debian's ucmatose (librdmacm's cmatose example), one connection and
// many (-c): mlx5go dials ucmatose's rdma_listen and rdma_accept, which
// disconnects first; ucmatose's rdma_connect reaches mlx5go's listener,
// and mlx5go disconnects; mlx5go rejects with private data, and ucmatose
// reports the reason. No messages (-C 0): mlx5go's data path is mlx5's.
// The kernel's cm_ids and QPs come back to where they were.
func TestLabInteropUcmatose(t *testing.T) {
	labenv.Require(t)
	noKernelLeak(t)
	m := labCM(t)
	r := openRXE(t)
	newQP := func() cm.QP { return r.qp(t, mlx5.QPTypeRC) }
	for _, n := range []int{1, 32} {
		t.Run(fmt.Sprintf("dial %d", n), func(t *testing.T) {
			ctx := labCtx(t)
			port := fmt.Sprint(7470 + n)
			srv := startTool(t, "ucmatose", "-b", labAddr, "-p", port, "-c", fmt.Sprint(n), "-C", "0")
			conns := []*cm.Conn{dialTool(ctx, t, m, "tcp", labAddr+":"+port, newQP)}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range n - 1 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := m.Dial(ctx, "tcp", labAddr+":"+port, &cm.DialOptions{QP: newQP()})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}()
			}
			wg.Wait()
			// ucmatose disconnects every connection once all are up.
			waitEnded(ctx, t, conns)
			if code, out := srv.exit(t, 60*time.Second); code != 0 || !strings.Contains(out, "return status 0") {
				t.Errorf("ucmatose exited %d", code)
			}
		})
		t.Run(fmt.Sprintf("accept %d", n), func(t *testing.T) {
			ctx := labCtx(t)
			l, err := m.Listen(ctx, "tcp", labAddr+":0", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			accepted := serveAll(ctx, t, l, newQP, []byte("mlx5go accepts"))
			port := fmt.Sprint(l.Addr().(cm.Addr).AddrPort.Port())
			cli := startTool(t, "ucmatose", "-s", labAddr, "-p", port, "-c", fmt.Sprint(n), "-C", "0")
			var conns []*cm.Conn
			for len(conns) < n {
				select {
				case c := <-accepted:
					conns = append(conns, c)
				case <-ctx.Done():
					t.Fatalf("%d of %d connections", len(conns), n)
				}
			}
			// ucmatose's client waits for the server to disconnect.
			for _, c := range conns {
				if err := c.Disconnect(); err != nil {
					t.Error(err)
				}
			}
			waitEnded(ctx, t, conns)
			if code, out := cli.exit(t, 60*time.Second); code != 0 || !strings.Contains(out, "return status 0") {
				t.Errorf("ucmatose exited %d", code)
			}
		})
	}
	t.Run("reject", func(t *testing.T) {
		ctx := labCtx(t)
		l, err := m.Listen(ctx, "tcp", labAddr+":0", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		done := serveOne(ctx, l, func(req *cm.Request) (*cm.Conn, error) {
			return nil, req.Reject(0, []byte("mlx5go says no"))
		})
		port := fmt.Sprint(l.Addr().(cm.Addr).AddrPort.Port())
		cli := startTool(t, "ucmatose", "-s", labAddr, "-p", port, "-C", "0")
		if res := <-done; res.err != nil {
			t.Fatal(res.err)
		}
		code, out := cli.exit(t, 60*time.Second)
		if code != cm.RejectConsumerDefined || !strings.Contains(out, "RDMA_CM_EVENT_REJECTED, error: 28") {
			t.Errorf("ucmatose exited %d, want it to report the reject (reason 28)", code)
		}
	})
}

// TestLabInteropUdaddy resolves Debian's udaddy UD server (SIDR) and
// answers its client, and rejects it; udaddy makes its address handle
// from what mlx5go's accept sent. udaddy's port is 7174 (its -p is the
// port space).
func TestLabInteropUdaddy(t *testing.T) {
	labenv.Require(t)
	noKernelLeak(t)
	m := labCM(t)
	r := openRXE(t)
	newQP := func() cm.QP { return r.qp(t, mlx5.QPTypeUD) }
	t.Run("dial", func(t *testing.T) {
		ctx := labCtx(t)
		srv := startTool(t, "udaddy", "-b", labAddr, "-C", "0")
		c := dialTool(ctx, t, m, "udp", labAddr+":7174", newQP)
		defer c.Close()
		if p := c.UDPeer(); p.QPN == 0 || p.QKey != 0x01234567 || !p.Path.GRH {
			t.Errorf("udaddy's QP %+v", p)
		}
		if code, _ := srv.exit(t, 60*time.Second); code != 0 {
			t.Errorf("udaddy exited %d", code)
		}
	})
	t.Run("accept", func(t *testing.T) {
		ctx := labCtx(t)
		l, err := m.Listen(ctx, "udp", labAddr+":7174", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		accepted := serveAll(ctx, t, l, newQP, []byte("mlx5go's UD QP"))
		cli := startTool(t, "udaddy", "-s", labAddr, "-C", "0")
		select {
		case c := <-accepted:
			c.Close()
		case <-ctx.Done():
			t.Fatal("no request from udaddy")
		}
		if code, _ := cli.exit(t, 60*time.Second); code != 0 {
			t.Errorf("udaddy exited %d", code)
		}
	})
	t.Run("reject", func(t *testing.T) {
		ctx := labCtx(t)
		l, err := m.Listen(ctx, "udp", labAddr+":7174", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		done := serveOne(ctx, l, func(req *cm.Request) (*cm.Conn, error) { return nil, req.Reject(0, []byte("no")) })
		cli := startTool(t, "udaddy", "-s", labAddr, "-C", "0")
		if res := <-done; res.err != nil {
			t.Fatal(res.err)
		}
		if code, out := cli.exit(t, 60*time.Second); code != cm.SIDRReject || !strings.Contains(out, "RDMA_CM_EVENT_UNREACHABLE, error: 2") {
			t.Errorf("udaddy exited %d, want it to report the SIDR reject (status 2)", code)
		}
	})
}

// cmtimeSpeaksCM reports whether the guest's cmtime is librdmacm 44's,
// which synchronizes with its peer through the CM alone; later ones
// (rdma-core 50 on) run their own TCP protocol between the peers, which
// is not mlx5go's to speak. Their usage tells them apart.
func cmtimeSpeaksCM(t *testing.T) bool {
	t.Helper()
	out, _ := exec.Command("/usr/bin/cmtime", "-?").CombinedOutput()
	return !bytes.Contains(out, []byte("[-q")) && !bytes.Contains(out, []byte("[-m")) && bytes.Contains(out, []byte("[-r retries]"))
}

// TestLabInteropCmtime connects 100 connections each way with Debian's
// cmtime (librdmacm 44's: bookworm's): mlx5go accepts its client's, which
// disconnects them; mlx5go dials its server and disconnects.
func TestLabInteropCmtime(t *testing.T) {
	labenv.Require(t)
	if !cmtimeSpeaksCM(t) {
		t.Skip("this suite's cmtime synchronizes with its peer over its own TCP protocol (rdma-core 50 on); TestLabInteropUcmatose makes the many connections here")
	}
	noKernelLeak(t)
	m := labCM(t)
	r := openRXE(t)
	newQP := func() cm.QP { return r.qp(t, mlx5.QPTypeRC) }
	const n = 100
	t.Run("accept", func(t *testing.T) {
		ctx := labCtx(t)
		l, err := m.Listen(ctx, "tcp", labAddr+":0", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		accepted := serveAll(ctx, t, l, newQP, nil)
		port := fmt.Sprint(l.Addr().(cm.Addr).AddrPort.Port())
		cli := startTool(t, "cmtime", "-s", labAddr, "-p", port, "-c", fmt.Sprint(n))
		var conns []*cm.Conn
		for len(conns) < n {
			select {
			case c := <-accepted:
				conns = append(conns, c)
			case <-ctx.Done():
				t.Fatalf("%d of %d connections", len(conns), n)
			}
		}
		waitEnded(ctx, t, conns) // cmtime disconnects them
		if code, out := cli.exit(t, 60*time.Second); code != 0 || !strings.Contains(out, "disconnect") {
			t.Errorf("cmtime exited %d", code)
		}
	})
	t.Run("dial", func(t *testing.T) {
		ctx := labCtx(t)
		startTool(t, "cmtime", "-b", labAddr, "-p", "7600")
		conns := []*cm.Conn{dialTool(ctx, t, m, "tcp", labAddr+":7600", newQP)}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range n - 1 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := m.Dial(ctx, "tcp", labAddr+":7600", &cm.DialOptions{QP: newQP()})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}()
		}
		wg.Wait()
		for _, c := range conns {
			if err := c.Disconnect(); err != nil {
				t.Error(err)
			}
		}
		waitEnded(ctx, t, conns) // cmtime's server answers each disconnect
		// cmtime's server runs until killed (the test's cleanup).
	})
}
