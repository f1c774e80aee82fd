package main

import (
	"net"
	"sync"
)

// The pager resolves the model's ODP page faults (model.Options.PageFault)
// for pages of the program the bridge has not mirrored yet: an implicit
// ODP MR covers the whole address space, and the device touches its
// pages long after the command that made it. The shim opens one more
// connection for it (to MLX5B_PAGER) and serves it from a thread of its
// own; the bridge asks it for the pages as a command asks (mirror.go), at
// any time.

// thePager is the program's pager connection (nil until it connects).
var thePager struct {
	mu   sync.Mutex
	link *link
}

// servePager takes each connection to the pager socket as the program's
// pager (one per program: its newest).
func servePager(l *net.UnixListener) {
	for {
		conn, err := l.AcceptUnix()
		if err != nil {
			return
		}
		thePager.mu.Lock()
		if thePager.link != nil {
			thePager.link.conn.Close()
		}
		thePager.link = &link{conn}
		thePager.mu.Unlock()
		tracef("pager connected")
	}
}

// pageFault is the model's page-fault handler: it mirrors the range
// through the pager and returns; the model then looks at the range again,
// and fails the access if it is still not mapped (a hole of the
// program's, or no pager).
func pageFault(addr, length uint64, write bool) {
	thePager.mu.Lock()
	defer thePager.mu.Unlock()
	if thePager.link == nil {
		tracef("page fault [%#x, +%#x): no pager", addr, length)
		return
	}
	err := thePager.link.mirror(addr, length)
	tracef("page fault [%#x, +%#x) write %v: %v", addr, length, write, err)
}
