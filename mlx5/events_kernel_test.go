package mlx5

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

const eventsVectors = "testdata/devx_events.jsonl"

// recordedHandles returns, per attribute name, the handle or descriptor
// the first ioctl of a case carried ("value") or got back ("returned").
// internal/oracle compares bytes only; these are the varying values the
// test maps onto its own.
func recordedHandles(t *testing.T, kase string) map[string]int64 {
	t.Helper()
	f, err := os.Open(eventsVectors)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c struct {
			Case       string `json:"case"`
			KernelCmds []struct {
				Attrs []struct {
					Name     string `json:"name"`
					Value    *int64 `json:"value"`
					Returned *int64 `json:"returned"`
				} `json:"attrs"`
			} `json:"kernel_cmds"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		if c.Case != kase {
			continue
		}
		if len(c.KernelCmds) == 0 {
			t.Fatalf("%s: no kernel command", kase)
		}
		m := map[string]int64{}
		for _, a := range c.KernelCmds[0].Attrs {
			switch {
			case a.Value != nil:
				m[a.Name] = *a.Value
			case a.Returned != nil:
				m[a.Name] = *a.Returned
			}
		}
		return m
	}
	t.Fatalf("%s: no case %q", eventsVectors, kase)
	return nil
}

// seqpacket returns a connected pair of SOCK_SEQPACKET sockets: like the
// kernel's event file, one write is read back whole by one read.
func seqpacket(t *testing.T) (int, int) {
	t.Helper()
	sv, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(sv[1]) })
	return sv[0], sv[1]
}

// newTestChannel runs NewEventChannel on a recorder that hands back fd as
// the kernel's new descriptor.
func newTestChannel(t *testing.T, r *recorded, fd int) seam.EventChannel {
	t.Helper()
	r.fill = func(c *uverbs.Call) {
		if c.Hdr.ObjectID == mlx5abi.MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD {
			c.Attrs[0].Data = uint64(fd)
		}
	}
	defer func() { r.fill = nil }()
	ch, err := r.dev.NewEventChannel(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// newPublicChannel runs Context.NewEventChannel on a recorder that hands
// back fd as the kernel's new descriptor.
func newPublicChannel(t *testing.T, r *recorded, fd int, opt EventChannelOptions) *EventChannel {
	t.Helper()
	r.fill = func(c *uverbs.Call) {
		if c.Hdr.ObjectID == mlx5abi.MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD {
			c.Attrs[0].Data = uint64(fd)
		}
	}
	defer func() { r.fill = nil }()
	ch, err := r.NewEventChannel(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// Context.NewEventChannel, EventChannel.Subscribe and SubscribeFD send
// what libmlx5's mlx5dv_devx_create_event_channel (flags 0 and
// OMIT_EV_DATA), mlx5dv_devx_subscribe_devx_event and
// mlx5dv_devx_subscribe_devx_event_fd sent. The fds and handles differ by
// run; they are mapped: libmlx5 subscribed with the fd FD_ALLOC returned,
// the handle OBJ_CREATE returned and the eventfd it made, and so must we.
func TestOracleDevxEventChannel(t *testing.T) {
	r := newRecorded(t)

	create := oracle.Load(t, eventsVectors, "events/obj_create")
	in, outLen := inputOf(t, create)
	obj, err := r.CreateObj(in, make([]byte, outLen))
	if err != nil {
		t.Fatal(err)
	}
	oracle.Compare(t, create.Find(t, "MLX5_DEVX_OBJ", "DEVX_OBJ_CREATE"), got(r.last))
	objMap := map[int64]seam.Handle{recordedHandles(t, "events/obj_create")["HANDLE"]: obj.handle}

	// checkHandles checks the channel's fd and the object's handle in the
	// subscribe call g against the ones libmlx5's case subscribed with.
	checkHandles := func(kase string, want oracle.Call, g oracle.Got, ch *EventChannel) {
		t.Helper()
		h := recordedHandles(t, kase)
		wantObj, ok := objMap[h["OBJ_HANDLE"]]
		if !ok {
			t.Fatalf("%s: libmlx5 subscribed object handle %d, not the one it created", kase, h["OBJ_HANDLE"])
		}
		for i, a := range want.Attrs {
			switch a.Name {
			case "FD_HANDLE":
				if int(g.Attrs[i].Data) != ch.ch.Fd() {
					t.Errorf("%s: FD_HANDLE %d, want the channel's fd %d", kase, g.Attrs[i].Data, ch.ch.Fd())
				}
			case "OBJ_HANDLE":
				if seam.Handle(g.Attrs[i].Data) != wantObj {
					t.Errorf("%s: OBJ_HANDLE %d, want the object's handle %d", kase, g.Attrs[i].Data, wantObj)
				}
			}
		}
	}
	subscribe := func(ch *EventChannel, kase string) {
		t.Helper()
		c := oracle.Load(t, eventsVectors, kase)
		var input struct {
			Types  []uint16 `json:"types"`
			Cookie string   `json:"cookie"`
		}
		if err := json.Unmarshal(c.Input, &input); err != nil {
			t.Fatal(err)
		}
		cookie, err := strconv.ParseUint(input.Cookie, 0, 64)
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Subscribe(obj, input.Types, cookie); err != nil {
			t.Fatal(err)
		}
		want := c.Find(t, "MLX5_DEVX", "DEVX_SUBSCRIBE_EVENT")
		g := got(r.last)
		oracle.Compare(t, want, g)
		checkHandles(kase, want, g, ch)
	}
	alloc := func(fd int, kase string, opt EventChannelOptions) *EventChannel {
		t.Helper()
		c := oracle.Load(t, eventsVectors, kase)
		ch := newPublicChannel(t, r, fd, opt)
		oracle.Compare(t, c.Find(t, "MLX5_DEVX_ASYNC_EVENT_FD", "DEVX_ASYNC_EVENT_FD_ALLOC"), got(r.last))
		if ch.ch.Fd() != fd {
			t.Errorf("%s: channel fd %d, the kernel returned %d", kase, ch.ch.Fd(), fd)
		}
		return ch
	}

	fd, _ := seqpacket(t)
	ch := alloc(fd, "events/create_event_channel", EventChannelOptions{})
	subscribe(ch, "events/subscribe_cq_error")
	subscribe(ch, "events/subscribe_five_types")

	// mlx5dv_devx_destroy_event_channel only closes the descriptor.
	if len(oracle.Load(t, eventsVectors, "events/destroy_event_channel").KernelCmds) != 0 {
		t.Error("libmlx5 destroyed the channel with a kernel command")
	}
	r.last = nil
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if r.last != nil {
		t.Errorf("Close sent %v", got(r.last))
	}

	fd2, _ := seqpacket(t)
	omit := alloc(fd2, "events/create_event_channel_omit", EventChannelOptions{OmitData: true})
	subscribe(omit, "events/subscribe_comp_omit")

	const kase = "events/subscribe_fd"
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := omit.SubscribeFD(obj, mlx5abi.MLX5_EVENT_TYPE_CQ_ERROR, efd); err != nil {
		t.Fatal(err)
	}
	want := oracle.Load(t, eventsVectors, kase).Find(t, "MLX5_DEVX", "DEVX_SUBSCRIBE_EVENT")
	g := got(r.last)
	oracle.Compare(t, want, g, "FD_NUM")
	checkHandles(kase, want, g, omit)
	if g.Attrs[3].ID != mlx5abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM || int32(g.Attrs[3].Data) != int32(efd) {
		t.Errorf("%s: attr %#x = %d, want FD_NUM = the eventfd %d", kase, g.Attrs[3].ID, int32(g.Attrs[3].Data), efd)
	}
	omit.Close()

	destroy := oracle.Load(t, eventsVectors, "events/obj_destroy")
	if err := obj.Close(); err != nil {
		t.Fatal(err)
	}
	oracle.Compare(t, destroy.Find(t, "MLX5_DEVX_OBJ", "DEVX_OBJ_DESTROY"), got(r.last))
}

func TestSubscribeRejectsBadInput(t *testing.T) {
	r := newRecorded(t)
	fd, _ := seqpacket(t)
	ch := newTestChannel(t, r, fd)
	closed := newTestChannel(t, r, func() int { fd, _ := seqpacket(t); return fd }())
	closed.Close()
	for name, f := range map[string]func() error{
		"no types":       func() error { return r.dev.Subscribe(ch, 779, nil, 1) },
		"no channel":     func() error { return r.dev.Subscribe(nil, 779, []uint16{mlx5abi.MLX5_EVENT_TYPE_CQ_ERROR}, 1) },
		"closed channel": func() error { return r.dev.Subscribe(closed, 779, []uint16{mlx5abi.MLX5_EVENT_TYPE_CQ_ERROR}, 1) },
		"too many types": func() error { return r.dev.Subscribe(ch, 779, make([]uint16, 1<<15), 1) },
	} {
		r.last = nil
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
		if r.last != nil {
			t.Errorf("%s: a call reached the kernel", name)
		}
	}
	// The kernel's refusal comes back with its errno.
	r.errno = unix.EINVAL
	if err := r.dev.Subscribe(ch, 779, []uint16{0xff}, 1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("kernel EINVAL: %v", err)
	}
	r.errno = unix.EOPNOTSUPP
	if _, err := r.dev.NewEventChannel(false); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("kernel EOPNOTSUPP: %v", err)
	}
}

// cqErrorEvent is what the kernel writes for a CQ_ERROR on a subscribed
// CQ: the cookie, then the EQE.
func cqErrorEvent(cookie uint64, cqn uint32, syndrome uint8) []byte {
	b := make([]byte, eventSize)
	binary.NativeEndian.PutUint64(b, cookie)
	eqe := b[unsafe.Sizeof(mlx5abi.Mlx5IbUapiDevxAsyncEventHdr{}):]
	eqe[unsafe.Offsetof(mlx5abi.Mlx5Eqe{}.Type)] = mlx5abi.MLX5_EVENT_TYPE_CQ_ERROR
	data := eqe[unsafe.Offsetof(mlx5abi.Mlx5Eqe{}.Data):]
	binary.BigEndian.PutUint32(data[unsafe.Offsetof(mlx5abi.Mlx5EqeCqErr{}.Cqn):], cqn)
	data[unsafe.Offsetof(mlx5abi.Mlx5EqeCqErr{}.Syndrome)] = syndrome
	eqe[unsafe.Offsetof(mlx5abi.Mlx5Eqe{}.Owner)] = 1
	return b
}

func TestEventChannelNext(t *testing.T) {
	r := newRecorded(t)
	fd, peer := seqpacket(t)
	ch := newTestChannel(t, r, fd)

	ev := cqErrorEvent(0x0123456789abcdef, 0x000412, mlx5abi.MLX5_CQ_ERROR_SYNDROME_CQ_OVERRUN)
	if _, err := unix.Write(peer, ev); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2*eventSize)
	n, err := ch.Next(context.Background(), buf)
	if err != nil || n != eventSize {
		t.Fatalf("Next: %d bytes, %v", n, err)
	}
	if c := binary.NativeEndian.Uint64(buf); c != 0x0123456789abcdef {
		t.Errorf("cookie %#x", c)
	}
	eqe := buf[seam.EventHeaderSize:n]
	data := eqe[unsafe.Offsetof(mlx5abi.Mlx5Eqe{}.Data):]
	if eqe[unsafe.Offsetof(mlx5abi.Mlx5Eqe{}.Type)] != mlx5abi.MLX5_EVENT_TYPE_CQ_ERROR ||
		binary.BigEndian.Uint32(data)&0xffffff != 0x412 ||
		data[unsafe.Offsetof(mlx5abi.Mlx5EqeCqErr{}.Syndrome)] != mlx5abi.MLX5_CQ_ERROR_SYNDROME_CQ_OVERRUN {
		t.Errorf("EQE %x", eqe)
	}
	if string(buf[:n]) != string(ev) {
		t.Errorf("event\n %x\nwritten\n %x", buf[:n], ev)
	}

	// A buffer too small for one event is refused before the read, so the
	// event stays for the next call.
	if _, err := unix.Write(peer, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Next(context.Background(), buf[:eventSize-1]); !errors.Is(err, unix.EINVAL) {
		t.Errorf("short buffer: %v", err)
	}
	if n, err := ch.Next(context.Background(), buf); err != nil || n != eventSize {
		t.Errorf("event after a short buffer: %d, %v", n, err)
	}

	// A read the kernel would never return whole is an error.
	if _, err := unix.Write(peer, ev[:10]); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Next(context.Background(), buf); err == nil {
		t.Error("a 10-byte event: no error")
	}
}

func TestEventChannelCancel(t *testing.T) {
	r := newRecorded(t)
	fd, _ := seqpacket(t)
	ch := newTestChannel(t, r, fd)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := ch.Next(ctx, make([]byte, eventSize))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Next returned before any event: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after cancel")
	}
	// A context already done returns at once.
	if _, err := ch.Next(ctx, make([]byte, eventSize)); !errors.Is(err, context.Canceled) {
		t.Errorf("done context: %v", err)
	}
	dl, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if _, err := ch.Next(dl, make([]byte, eventSize)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: %v", err)
	}
}

func TestEventChannelClose(t *testing.T) {
	r := newRecorded(t)
	fd, peer := seqpacket(t)
	ch := newTestChannel(t, r, fd)

	done := make(chan error, 1)
	go func() {
		_, err := ch.Next(context.Background(), make([]byte, eventSize))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("waiting Next after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake Next")
	}
	if err := ch.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := ch.Next(context.Background(), make([]byte, eventSize)); err == nil {
		t.Error("Next after Close: no error")
	}
	// The descriptor itself is closed (the kernel would release its file):
	// the other end of the socket pair sees it.
	if _, err := unix.SendmsgN(peer, []byte{1}, nil, nil, unix.MSG_NOSIGNAL); !errors.Is(err, unix.EPIPE) {
		t.Errorf("write to the closed channel's peer: %v", err)
	}
}

// EventChannel.Next on the kernel's file: an event of 8+64 bytes, or of 8
// with OmitData, read whole through the netpoller and decoded; Close of
// the channel or of the context while a reader waits ends it with
// ErrClosed.
func TestEventChannelNextKernel(t *testing.T) {
	r := newRecorded(t)
	for _, omit := range []bool{false, true} {
		fd, peer := seqpacket(t)
		ch := newPublicChannel(t, r, fd, EventChannelOptions{OmitData: omit})
		ev := make([]byte, eventSize)
		binary.NativeEndian.PutUint64(ev, 0xabcdef)
		ev[seam.EventHeaderSize+1] = mlx5abi.MLX5_EVENT_TYPE_CQ_ERROR
		if omit {
			ev = ev[:seam.EventHeaderSize]
		}
		if _, err := unix.Write(peer, ev); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := ch.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("omit %v: %v", omit, err)
		}
		wantType := uint8(mlx5abi.MLX5_EVENT_TYPE_CQ_ERROR)
		if omit {
			wantType = 0
		}
		if got.Cookie != 0xabcdef || got.Type() != wantType {
			t.Errorf("omit %v: cookie %#x type %#x, want 0xabcdef and %#x", omit, got.Cookie, got.Type(), wantType)
		}
		errc := make(chan error, 1)
		go func() { _, err := ch.Next(context.Background()); errc <- err }()
		time.Sleep(5 * time.Millisecond)
		ch.Close()
		select {
		case err := <-errc:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("omit %v: Next at Close: %v, want ErrClosed", omit, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("omit %v: Next still blocked after Close", omit)
		}
	}
	fd, _ := seqpacket(t)
	ch := newPublicChannel(t, r, fd, EventChannelOptions{})
	errc := make(chan error, 1)
	go func() { _, err := ch.Next(context.Background()); errc <- err }()
	time.Sleep(5 * time.Millisecond)
	r.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Next at Context.Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next still blocked after Context.Close")
	}
}
