// Command bridge runs a program that uses the unmodified libibverbs and
// libmlx5 (ibv_devinfo, a C program, pyverbs and rdma-core's tests) on the
// software ConnectX of package model:
//
//	bridge -profile cx6dx -shim /path/mlx5bshim.so -- ibv_devinfo -v
//
// It writes the sysfs tree libibverbs discovers the device in, listens on
// a unix socket, and runs the program with the C shim preloaded
// (LD_PRELOAD, hwtest/pyverbs/shim), which carries each command on
// /dev/infiniband/uverbs0 to this process: each open of it is a
// connection, and a device context of its own (Device.Open of one
// model.New(profile)). This half decodes each uverbs ioctl (struct
// ib_uverbs_ioctl_hdr and its attributes, with internal/uverbsabi and
// internal/mlx5abi) and answers it with the model's seam.Device calls, as
// ib_uverbs and mlx5_ib would; proto.go has the protocol. It is pure Go:
// the program and the model are two processes, and the memory the device
// works in is shared between them (mirror.go).
//
// The bridge exits with the program's status. -trace (or MLX5B_TRACE=1)
// prints each command and its result on stderr.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/model"
	"golang.org/x/sys/unix"
)

// The bridge's state: one HCA, and the event fds the pumps write to by
// the caller's number for them.
var (
	mu      sync.Mutex
	hca     *model.Device
	evfds   = map[int]*pump{}
	trace   = os.Getenv("MLX5B_TRACE") != ""
	profile = "cx6dx"
)

// profileName is the model profile the bridge's HCA has.
func profileName() string { return profile }

// context is one ibv_open_device: a model context and what the kernel
// keeps for it.
type context struct {
	link
	d *model.Device
	// uars are the UARs allocated, by mmap offset, for the mmap that follows.
	uars map[uint64]seam.UAR
	// comps are the completion channels by the fd the caller reads.
	comps map[int]seam.CompChannel
	// asyncFDs are the DEVX async command fds by the fd the caller reads.
	asyncFDs map[int]*asyncCmd
	// users are the user handles of the CQs, QPs and SRQs by handle; the
	// destroy responses report how many completion and async events the
	// bridge delivered for each (compEvents, asyncEvents, by user
	// handle), and libibverbs waits until it has acknowledged as many.
	users                   map[seam.Handle]uint64
	compEvents, asyncEvents map[uint64]uint32
	// maps are the pages the caller mapped (UAR, clock), by token.
	maps      map[uint64]*mapped
	nextToken uint64
	// pds and mrs are what the PD and MR queries answer (imports.go).
	pds map[seam.Handle]uint32
	mrs map[seam.Handle]mrFacts
}

// mapped is a mapping of a command fd (a UAR page or the clock page).
type mapped struct {
	page  []byte
	clock bool
}

func tracef(format string, args ...any) {
	if trace {
		fmt.Fprintf(os.Stderr, "mlx5b: "+format+"\n", args...)
	}
}

// errnoOf is the errno an error wraps (EINVAL if none).
func errnoOf(err error) unix.Errno {
	if err == nil {
		return 0
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EINVAL
}

func main() {
	os.Exit(run())
}

func run() int {
	flag.StringVar(&profile, "profile", profile, "the model profile: cx5, cx6dx or cx7")
	shim := flag.String("shim", "", "the shim library to preload (mlx5bshim.so)")
	flag.BoolVar(&trace, "trace", trace, "print each command and its result")
	cryptoMode := flag.String("crypto", "plaintext", "the AES-XTS engine's import method, plaintext or wrapped (crypto.go)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: bridge -shim mlx5bshim.so [-profile cx6dx] [-trace] -- program [args]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *shim == "" || flag.NArg() == 0 {
		flag.Usage()
		return 2
	}
	if err := setLayout(); err != nil { // re-executes the bridge once
		fmt.Fprintf(os.Stderr, "bridge: %v\n", err)
		return 1
	}
	lib, err := filepath.Abs(*shim)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bridge: %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "mlx5bridge")
	if err != nil {
		fmt.Fprintf(os.Stderr, "bridge: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	login := filepath.Join(dir, "mlx5_crypto_test.txt")
	co, err := commission(*cryptoMode, login)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bridge: %v\n", err)
		return 1
	}
	hca, err = model.NewWithOptions(profile, model.Options{Crypto: co, PageFault: pageFault})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bridge: %v\n", err)
		return 1
	}
	sysfs := filepath.Join(dir, "sysfs")
	if err := writeSysfs(sysfs, hca); err != nil {
		fmt.Fprintf(os.Stderr, "bridge: sysfs: %v\n", err)
		return 1
	}
	sock := filepath.Join(dir, "uverbs0.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bridge: %v\n", err)
		return 1
	}
	defer l.Close()
	go serve(l)
	pagerSock := filepath.Join(dir, "pager.sock")
	pl, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: pagerSock, Net: "unixpacket"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bridge: %v\n", err)
		return 1
	}
	defer pl.Close()
	go servePager(pl)

	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "SYSFS_PATH="+sysfs, "MLX5B_SOCKET="+sock, "MLX5B_PAGER="+pagerSock,
		"MLX5_CRYPTO_TEST_INFO="+login)
	if trace {
		cmd.Env = append(cmd.Env, "MLX5B_TRACE=1")
	}
	// The program dies with the bridge (a timeout's SIGKILL, a crash): it
	// has no device without it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The program has the default layout (layout.go).
	if err := startDefault(cmd); err != nil {
		fmt.Fprintf(os.Stderr, "bridge: %v\n", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, unix.SIGINT, unix.SIGTERM)
	go func() {
		for s := range sig {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			fmt.Fprintf(os.Stderr, "bridge: %s: %v\n", flag.Arg(0), st.Signal())
			return 128 + int(st.Signal())
		}
		return ee.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "bridge: %v\n", err)
		return 1
	}
}

// serve accepts a connection per open of the character device.
func serve(l *net.UnixListener) {
	for {
		conn, err := l.AcceptUnix()
		if err != nil {
			return
		}
		go func() {
			x, err := open(conn)
			if err != nil {
				tracef("open: %v", err)
				conn.Close()
				return
			}
			x.serve()
		}()
	}
}

func open(conn *net.UnixConn) (*context, error) {
	mu.Lock()
	defer mu.Unlock()
	d, err := hca.Open()
	if err != nil {
		return nil, err
	}
	tracef("open context")
	return &context{link: link{conn}, d: d, uars: map[uint64]seam.UAR{},
		comps: map[int]seam.CompChannel{}, asyncFDs: map[int]*asyncCmd{},
		users: map[seam.Handle]uint64{}, compEvents: map[uint64]uint32{}, asyncEvents: map[uint64]uint32{},
		maps: map[uint64]*mapped{}, pds: map[seam.Handle]uint32{}, mrs: map[seam.Handle]mrFacts{}}, nil
}

// close is the caller's close of the command fd (its end of the
// connection): the event sources stop and the context closes.
func (x *context) close() {
	mu.Lock()
	defer mu.Unlock()
	for f, p := range evfds {
		if p.c == x {
			p.stop()
			delete(evfds, f)
		}
	}
	if err := x.d.Close(); err != nil {
		tracef("close context: %v", err)
	}
	x.conn.Close()
	tracef("close context")
}

// mmap maps a UAR page or the clock page for the caller: the page the
// model watches or writes becomes a memfd's in place (sharePage), which
// the caller maps too.
func (x *context) mmapPage(off, length uint64) (uint64, int, error) {
	mu.Lock()
	defer mu.Unlock()
	page, clock, err := x.mmap(off, length)
	if err != nil {
		return 0, -1, err
	}
	fd, err := sharePage(page)
	if err != nil {
		x.unmapPage(&mapped{page: page, clock: clock})
		return 0, -1, err
	}
	x.nextToken++
	x.maps[x.nextToken] = &mapped{page: page, clock: clock}
	tracef("mmap off %#x len %d", off, length)
	return x.nextToken, fd, nil
}

func (x *context) munmapPage(token uint64) error {
	mu.Lock()
	defer mu.Unlock()
	m := x.maps[token]
	if m == nil {
		return unix.EINVAL
	}
	delete(x.maps, token)
	return x.unmapPage(m)
}

func (x *context) unmapPage(m *mapped) error {
	if m.clock {
		return x.d.UnmapClockInfo(m.page)
	}
	return x.d.UnmapUAR(m.page)
}

// readNotice counts what the caller read from an event fd.
func readNotice(fd int, b []byte) {
	mu.Lock()
	defer mu.Unlock()
	if p := evfds[fd]; p != nil {
		p.read(b)
	}
}

// closeNotice is the caller's close of an event fd.
func closeNotice(fd int) {
	mu.Lock()
	defer mu.Unlock()
	if p := evfds[fd]; p != nil {
		p.stop()
		delete(evfds, fd)
	}
}
