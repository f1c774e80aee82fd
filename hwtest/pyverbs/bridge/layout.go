package main

import (
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// The caller's memory the bridge mirrors lands at the caller's addresses
// (mirror.go), so the bridge keeps its own mappings out of the way: it
// runs with the legacy address-space layout (personality
// ADDR_COMPAT_LAYOUT, as setarch -L gives), whose mmap area grows up from
// a third of the address space, while the program keeps the default
// layout (mmap area below the stack, heap above its binary). Its binary
// is linked high too (textAddr), away from the heap of a program that is
// not position-independent (Debian's python3), which follows the binary
// at 4 MiB. The two never meet; a mirror that would land on a mapping of
// the bridge's own fails (EEXIST) rather than replacing it.

// textAddr is the address the bridge is linked at: go build
// -ldflags=-T=0x300000001000 (bridge_test.go's build).
const textAddr = 0x300000001000

const addrCompatLayout = 0x0200000 // ADDR_COMPAT_LAYOUT, <linux/personality.h>

const layoutEnv = "MLX5B_LAYOUT"

// setLayout re-executes the bridge with ADDR_COMPAT_LAYOUT once.
func setLayout() error {
	if pc := reflect.ValueOf(setLayout).Pointer(); pc < textAddr {
		return fmt.Errorf("the bridge is linked at %#x: build it with -ldflags=-T=%#x, out of the way of the program's heap", pc, textAddr)
	}
	p, _, e := unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
	if e != 0 {
		return fmt.Errorf("personality: %w", e)
	}
	if p&addrCompatLayout != 0 || os.Getenv(layoutEnv) != "" {
		return nil
	}
	if _, _, e := unix.Syscall(unix.SYS_PERSONALITY, p|addrCompatLayout, 0, 0); e != 0 {
		return fmt.Errorf("personality: %w", e)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return syscall.Exec(exe, os.Args, append(os.Environ(), layoutEnv+"=1"))
}

// startDefault starts cmd with the default layout: the bridge's own is
// fixed at its exec, and a child inherits the personality of the thread
// that forks it, so the flag is cleared on this thread alone, locked to
// the goroutine that starts cmd.
func startDefault(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, _, e := unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
	if e == 0 && p&addrCompatLayout != 0 {
		if _, _, e := unix.Syscall(unix.SYS_PERSONALITY, p&^addrCompatLayout, 0, 0); e != 0 {
			return fmt.Errorf("personality: %w", e)
		}
		// The thread goes back to the pool without the flag: nothing
		// the bridge maps after its exec depends on it. It stays (the
		// goroutine unlocks it), so the child's Pdeathsig, which is the
		// forking thread's, holds until the bridge exits.
	}
	return cmd.Start()
}
