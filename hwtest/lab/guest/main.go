// Command guest is PID 1 of the kernel lab's virtual machine. The host
// runner (hwtest/lab) builds it statically and puts it in the initramfs as
// /init, with the kernel modules, the test binaries and a manifest.
//
// It mounts the pseudo file systems, loads the modules in the manifest's
// order with finit_module, creates a dummy netdev and an rdma_rxe link on it
// (rtnetlink and RDMA netlink, no iproute2), runs every test binary, frames
// all results on the second serial port (/dev/ttyS1; the console, ttyS0,
// keeps the kernel's messages) and powers the machine off.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mlx5go/mlx5go/internal/lab/proto"
	"github.com/mlx5go/mlx5go/internal/netlink"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

func main() {
	mountAll()
	out := resultPort()
	w := proto.Writer{W: out}
	defer powerOff(out)

	var m proto.Manifest
	b, err := os.ReadFile(proto.ManifestPath)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	w.Setup("manifest", proto.ManifestPath, err)
	if err != nil {
		return
	}
	w.Setup("kernel", release(), checkRelease(m.Release))
	n, err := loadModules(m.Modules)
	w.Setup("modules", fmt.Sprintf("%d loaded", n), err)
	if m.Netdev != "" {
		w.Setup("netdev", m.Netdev+" "+m.Address, setupNetdev(m.Netdev, m.Address))
	}
	if m.RXE != "" {
		err := uverbs.AddLink(m.RXE, "rxe", m.Netdev)
		w.Setup("rxe-link", m.RXE+" on "+m.Netdev, err)
		if err == nil {
			detail, err := waitActive(m.RXE, 30*time.Second)
			w.Setup("rxe-active", detail, err)
		}
	}
	for _, bin := range m.Binaries {
		runBinary(w, bin, m.Env)
	}
	w.Done()
}

// release is the running kernel's uname -r.
func release() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// checkRelease fails if the guest runs another kernel than the host meant
// to boot.
func checkRelease(want string) error {
	if got := release(); want != "" && got != want {
		return fmt.Errorf("running %s, the host booted %s", got, want)
	}
	return nil
}

func mountAll() {
	for _, mt := range []struct{ src, dst, fs string }{
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
		{"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/tmp", "tmpfs"},
		{"tmpfs", "/run", "tmpfs"},
	} {
		os.MkdirAll(mt.dst, 0o755)
		if err := unix.Mount(mt.src, mt.dst, mt.fs, 0, ""); err != nil && err != unix.EBUSY {
			fmt.Fprintf(os.Stderr, "lab guest: mount %s: %v\n", mt.dst, err)
		}
	}
	// Keep the kernel's console quiet: only emergencies interleave with
	// anything a person reads there.
	os.WriteFile("/proc/sys/kernel/printk", []byte("3 4 1 3"), 0)
}

// resultPort opens ttyS1 in raw mode (no newline translation, no echo).
// Without it the guest falls back to the console so a person still sees
// something, and the host, missing framed lines, fails the run.
func resultPort() io.Writer {
	f, err := os.OpenFile("/dev/ttyS1", os.O_WRONLY|unix.O_NOCTTY, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab guest: open ttyS1: %v\n", err)
		return os.Stdout
	}
	fd := int(f.Fd())
	if t, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		t.Oflag &^= unix.OPOST
		t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Cflag &^= unix.CSIZE | unix.PARENB
		t.Cflag |= unix.CS8
		unix.IoctlSetTermios(fd, unix.TCSETS, t)
	}
	return f
}

func powerOff(out io.Writer) {
	if f, ok := out.(*os.File); ok {
		// tcdrain: wait until the UART has sent everything.
		unix.IoctlSetInt(int(f.Fd()), unix.TCSBRK, 1)
	}
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {} // PID 1 must not exit
}

func loadModules(paths []string) (int, error) {
	n := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return n, err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && err != unix.EEXIST {
			return n, fmt.Errorf("finit_module %s: %w", filepath.Base(p), err)
		}
		n++
	}
	return n, nil
}

// setupNetdev creates a dummy device (the dummy module may already have made
// it), brings it and lo up, and puts addr on it.
func setupNetdev(name, addr string) error {
	c, err := netlink.Dial(unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer c.Close()
	var a netlink.Attrs
	a.String(unix.IFLA_IFNAME, name)
	a.Nested(unix.IFLA_LINKINFO, func(in *netlink.Attrs) { in.String(unix.IFLA_INFO_KIND, "dummy") })
	ifi := make([]byte, unix.SizeofIfInfomsg)
	if _, err := c.Request(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, append(ifi, a.Bytes()...)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create %s: %w", name, err)
	}
	for _, dev := range []string{"lo", name} {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		up := make([]byte, unix.SizeofIfInfomsg)
		binary.NativeEndian.PutUint32(up[4:], uint32(ifc.Index))
		binary.NativeEndian.PutUint32(up[8:], unix.IFF_UP)
		binary.NativeEndian.PutUint32(up[12:], unix.IFF_UP)
		if _, err := c.Request(unix.RTM_NEWLINK, 0, up); err != nil {
			return fmt.Errorf("set %s up: %w", dev, err)
		}
	}
	if addr == "" {
		return nil
	}
	pfx, err := netip.ParsePrefix(addr)
	if err != nil || !pfx.Addr().Is4() {
		return fmt.Errorf("address %q: want IPv4 CIDR", addr)
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return err
	}
	ifa := make([]byte, unix.SizeofIfAddrmsg)
	ifa[0] = unix.AF_INET
	ifa[1] = byte(pfx.Bits())
	binary.NativeEndian.PutUint32(ifa[4:], uint32(ifc.Index))
	ip := pfx.Addr().As4()
	var at netlink.Attrs
	at.Raw(unix.IFA_LOCAL, ip[:])
	at.Raw(unix.IFA_ADDRESS, ip[:])
	if _, err := c.Request(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, append(ifa, at.Bytes()...)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s to %s: %w", addr, name, err)
	}
	return nil
}

// waitActive waits for the device's uverbs node and for port 1 to be ACTIVE.
func waitActive(name string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		d, err := uverbs.DeviceByName(name)
		if err == nil {
			if _, serr := os.Stat(d.Path); serr == nil && len(d.Ports) > 0 && d.Ports[0].StateName == "ACTIVE" {
				return fmt.Sprintf("%s %s port 1 ACTIVE", name, d.Path), nil
			}
			last = fmt.Sprintf("%+v", d)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("%s not ACTIVE after %v (last: %s)", name, timeout, last)
}

func runBinary(w proto.Writer, bin proto.Binary, env []string) {
	w.Begin(bin.Name)
	start := time.Now()
	cmd := exec.Command(bin.Path, bin.Args...)
	cmd.Dir = bin.Dir
	cmd.Env = append([]string{"PATH=/lab/bin", "HOME=/tmp", "TMPDIR=/tmp"}, env...)
	pr, pw, err := os.Pipe()
	if err != nil {
		w.Data("lab guest: pipe: " + err.Error())
		w.End(bin.Name, 125, time.Since(start))
		return
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		w.Data("lab guest: start: " + err.Error())
		w.End(bin.Name, 126, time.Since(start))
		return
	}
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		w.Data(strings.TrimRight(sc.Text(), "\r"))
	}
	pr.Close()
	code := 0
	if err := cmd.Wait(); err != nil {
		code = 1
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			code = ee.ExitCode()
		}
		w.Data("lab guest: " + err.Error())
	}
	w.End(bin.Name, code, time.Since(start))
}
