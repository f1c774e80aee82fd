package mlx5_test

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"golang.org/x/sys/unix"
)

// The event types the tests subscribe to (enum mlx5_event).
const (
	evComp    = 0x00
	evCQError = 0x04
)

// devxCQ creates a DEVX CQ on the rig's context.
func (r *evRig) devxCQ(t testing.TB, entries int, events bool) *mlx5.CQ {
	t.Helper()
	cq, err := r.c.CreateCQ(mlx5.CQOptions{Entries: entries, DEVX: true, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	return cq
}

// devxPair is pair with DEVX QPs, which DEVX CQs need.
func (r *evRig) devxPair(t testing.TB, scq, rcq *mlx5.CQ) (a, b *mlx5.QP) {
	t.Helper()
	a = r.qp(t, mlx5.QPOptions{SendCQ: scq, RecvCQ: scq, DEVX: true})
	b = r.qp(t, mlx5.QPOptions{SendCQ: rcq, RecvCQ: rcq, DEVX: true})
	if err := a.Connect(b.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(a.QPN(), r.path); err != nil {
		t.Fatal(err)
	}
	return a, b
}

func nextDevxEvent(t testing.TB, ch *mlx5.EventChannel) mlx5.DevxEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mustCome)
	defer cancel()
	ev, err := ch.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func noDevxEvent(t testing.TB, ch *mlx5.EventChannel) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if ev, err := ch.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an event nobody raised: %+v, %v", ev, err)
	}
}

// A DEVX CQ's completion events reach a channel subscribed to COMP on it,
// with the cookie and the EQE (type COMP, the CQ's number), once per arm;
// a channel without event data gets the cookie alone.
func TestEventChannelDevxCQCompletions(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	scq, rcq := r.devxCQ(t, 64, false), r.devxCQ(t, 64, false)
	a, b := r.devxPair(t, scq, rcq)
	full, err := r.c.NewEventChannel(mlx5.EventChannelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	omit, err := r.c.NewEventChannel(mlx5.EventChannelOptions{OmitData: true})
	if err != nil {
		t.Fatal(err)
	}
	defer omit.Close()
	if err := full.Subscribe(rcq, []uint16{evComp, evCQError}, 0xc0ffee); err != nil {
		t.Fatal(err)
	}
	if err := omit.Subscribe(rcq, []uint16{evComp}, 42); err != nil {
		t.Fatal(err)
	}
	// A CQ nobody armed raises no completion event.
	noDevxEvent(t, full)
	r.sendRecv(t, a, b, 1, mlx5.SendSignaled)
	noDevxEvent(t, full) // not armed: no event
	pollN(t, rcq, 1, 5*time.Second)
	pollN(t, scq, 1, 5*time.Second)

	ecq := r.devxCQ(t, 64, true)
	if err := full.Subscribe(ecq, []uint16{evComp}, 7); err != nil {
		t.Fatal(err)
	}
	if err := omit.Subscribe(ecq, []uint16{evComp}, 8); err != nil {
		t.Fatal(err)
	}
	c, d := r.devxPair(t, scq, ecq)
	arm(t, ecq, false)
	r.sendRecv(t, c, d, 2, mlx5.SendSignaled)
	mustWait(t, ecq)
	ev := nextDevxEvent(t, full)
	if ev.Cookie != 7 || ev.Type() != evComp || binary.BigEndian.Uint32(ev.EQE[0x38:])&0xffffff != ecq.CQN() {
		t.Errorf("completion event %#x type %#x cqn %#x, want cookie 7, COMP, CQ %#x", ev.Cookie, ev.Type(),
			binary.BigEndian.Uint32(ev.EQE[0x38:])&0xffffff, ecq.CQN())
	}
	ev = nextDevxEvent(t, omit)
	if ev.Cookie != 8 || ev.EQE != [64]byte{} {
		t.Errorf("event without data: cookie %d, EQE %x; want 8 and no EQE", ev.Cookie, ev.EQE)
	}
	noDevxEvent(t, full)
	noDevxEvent(t, omit)
	pollN(t, ecq, 1, 5*time.Second)
	pollN(t, scq, 1, 5*time.Second)

	// Arm and Wait go on working on the DEVX CQ, once per arm.
	for i := range 5 {
		arm(t, ecq, i%2 == 1)
		noWait(t, ecq)
		r.sendRecv(t, c, d, uint64(10+i), mlx5.SendSignaled|mlx5.SendSolicited)
		mustWait(t, ecq)
		noWait(t, ecq)
		pollN(t, ecq, 1, 5*time.Second)
		pollN(t, scq, 1, 5*time.Second)
		nextDevxEvent(t, full)
	}
}

// Subscribe, SubscribeFD, Next and Close refuse what is not theirs
// before the kernel, and the kernel's limits come back as its errno.
func TestEventChannelHostile(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.devxCQ(t, 16, false)
	verbsCQ := r.cq(t, 16, false)
	ch, err := r.c.NewEventChannel(mlx5.EventChannelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := newEvRig(t, "cx7", model.Options{})
	otherCQ := other.devxCQ(t, 16, false)
	var nilCh *mlx5.EventChannel
	var nilCQ *mlx5.CQ
	var nilObj *mlx5.DevxObj
	var nilCtx context.Context
	sixteen := make([]uint16, 16)
	for i := range sixteen {
		sixteen[i] = evCQError
	}
	if err := ch.Subscribe(cq, sixteen, 1); err != nil {
		t.Errorf("16 event types, mlx5_ib's limit: %v", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	pipe := make([]int, 2)
	if err := unix.Pipe2(pipe, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	for name, c := range map[string]struct {
		err  error
		want []error
	}{
		"nil channel":       {nilCh.Subscribe(cq, []uint16{evComp}, 1), []error{mlx5.ErrInvalid}},
		"nil source":        {ch.Subscribe(nil, []uint16{evComp}, 1), []error{mlx5.ErrInvalid}},
		"nil CQ":            {ch.Subscribe(nilCQ, []uint16{evComp}, 1), []error{mlx5.ErrInvalid}},
		"nil DevxObj":       {ch.Subscribe(nilObj, []uint16{evComp}, 1), []error{mlx5.ErrInvalid}},
		"verbs CQ":          {ch.Subscribe(verbsCQ, []uint16{evComp}, 1), []error{mlx5.ErrInvalid}},
		"other context":     {ch.Subscribe(otherCQ, []uint16{evComp}, 1), []error{mlx5.ErrInvalid}},
		"no types":          {ch.Subscribe(cq, nil, 1), []error{mlx5.ErrInvalid}},
		"17 types":          {ch.Subscribe(cq, append(sixteen, evCQError), 1), []error{unix.EINVAL}},
		"not an obj event":  {ch.Subscribe(cq, []uint16{0x0a}, 1), []error{unix.EINVAL}},
		"fd -1":             {ch.SubscribeFD(cq, evComp, -1), []error{mlx5.ErrInvalid}},
		"fd not open":       {ch.SubscribeFD(cq, evComp, 1<<20), []error{unix.EBADF}},
		"fd not an eventfd": {ch.SubscribeFD(cq, evComp, pipe[0]), []error{unix.EINVAL}},
		"fd nil source":     {ch.SubscribeFD(nil, evComp, efd), []error{mlx5.ErrInvalid}},
		"nil Next":          {func() error { _, err := nilCh.Next(context.Background()); return err }(), []error{mlx5.ErrInvalid}},
		"nil ctx":           {func() error { _, err := ch.Next(nilCtx); return err }(), []error{mlx5.ErrInvalid}},
		"nil Close":         {nilCh.Close(), []error{mlx5.ErrInvalid}},
	} {
		if c.err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		mlx5.Checked(t, c.err)
		for _, w := range c.want {
			if !errors.Is(c.err, w) {
				t.Errorf("%s: %v, want %v", name, c.err, w)
			}
		}
	}

	// Closed objects and channels: ErrClosed.
	closedCQ := r.devxCQ(t, 16, false)
	closedCQ.Close()
	if err := ch.Subscribe(closedCQ, []uint16{evComp}, 1); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("closed CQ: %v, want ErrClosed", err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := ch.Subscribe(cq, []uint16{evComp}, 1); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("closed channel: %v, want ErrClosed", err)
	}
	if _, err := ch.Next(context.Background()); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("Next on a closed channel: %v, want ErrClosed", err)
	}
	r.c.Close()
	if _, err := r.c.NewEventChannel(mlx5.EventChannelOptions{}); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("NewEventChannel on a closed context: %v, want ErrClosed", err)
	}
}

// An event subscribed to an eventfd adds 1 to its counter instead of
// arriving on the channel.
func TestEventChannelSubscribeFD(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	scq, ecq := r.devxCQ(t, 64, false), r.devxCQ(t, 64, true)
	a, b := r.devxPair(t, scq, ecq)
	ch, err := r.c.NewEventChannel(mlx5.EventChannelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := ch.SubscribeFD(ecq, evComp, efd); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		arm(t, ecq, false)
		r.sendRecv(t, a, b, uint64(i), mlx5.SendSignaled)
		mustWait(t, ecq)
		pollN(t, ecq, 1, 5*time.Second)
		pollN(t, scq, 1, 5*time.Second)
	}
	var v [8]byte
	if _, err := unix.Read(efd, v[:]); err != nil {
		t.Fatal(err)
	}
	if n := binary.NativeEndian.Uint64(v[:]); n != 3 {
		t.Errorf("eventfd counter %d after 3 completion events, want 3", n)
	}
	noDevxEvent(t, ch)
}

// Closing the channel, the context, or the CQ whose Wait is blocked ends
// the wait with ErrClosed, whatever the order of the racing calls.
func TestEventChannelCloseRaces(t *testing.T) {
	for i := range 20 {
		r := newEvRig(t, "cx7", model.Options{})
		cq := r.devxCQ(t, 16, true)
		ch, err := r.c.NewEventChannel(mlx5.EventChannelOptions{OmitData: i%2 == 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Subscribe(cq, []uint16{evComp}, 1); err != nil {
			t.Fatal(err)
		}
		arm(t, cq, false)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 2 {
			wg.Add(2)
			go func() { defer wg.Done(); _, err := ch.Next(context.Background()); errs <- err }()
			go func() { defer wg.Done(); errs <- cq.Wait(context.Background()) }()
		}
		if i%3 == 0 {
			time.Sleep(time.Millisecond)
		}
		switch i % 3 {
		case 0:
			ch.Close()
			cq.Close()
		case 1:
			go cq.Close()
			go ch.Close()
		case 2:
			r.c.Close()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(mustCome):
			t.Fatalf("round %d: a wait still blocked %v after Close", i, mustCome)
		}
		close(errs)
		for err := range errs {
			if !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
				t.Errorf("round %d: %v, want ErrClosed", i, err)
			}
		}
		r.c.Close()
	}
}

// TestEventChannelObjectClosed: closing a DEVX CQ while goroutines wait
// ends its CQ.Wait with ErrClosed (the CQ's completion channel goes with
// it), while a channel subscribed to the CQ's events outlives it, as the
// kernel's channel file does (destroying an object ends its
// subscriptions, not a read of the channel): Next waits on until the
// channel is closed, then ends with ErrClosed.
func TestEventChannelObjectClosed(t *testing.T) {
	r := newEvRig(t, "cx7", model.Options{})
	cq := r.devxCQ(t, 16, true)
	ch, err := r.c.NewEventChannel(mlx5.EventChannelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Subscribe(cq, []uint16{evComp}, 1); err != nil {
		t.Fatal(err)
	}
	arm(t, cq, false)
	waitErr, nextErr := make(chan error, 1), make(chan error, 1)
	go func() { waitErr <- cq.Wait(context.Background()) }()
	go func() { _, err := ch.Next(context.Background()); nextErr <- err }()
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	endsClosed(t, waitErr, "Wait across the CQ's Close")
	select {
	case err := <-nextErr:
		t.Fatalf("the channel's Next ended when the CQ closed: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	endsClosed(t, nextErr, "Next across the channel's Close")
}

// endsClosed waits, up to mustCome, for a wait's end on errc, which
// must be ErrClosed.
func endsClosed(t *testing.T, errc <-chan error, what string) {
	t.Helper()
	select {
	case err := <-errc:
		if !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
			t.Errorf("%s: %v, want ErrClosed", what, err)
		}
	case <-time.After(mustCome):
		t.Fatalf("%s: still blocked after %v", what, mustCome)
	}
}
