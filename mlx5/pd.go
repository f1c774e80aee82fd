package mlx5

import (
	"fmt"
	"sync"

	"github.com/mlx5go/mlx5go/internal/seam"
)

// PD is a protection domain (ibv_alloc_pd). QPs, memory regions and
// mkeys in the same PD may use each other.
type PD struct {
	c      *Context
	handle seam.Handle
	pdn    uint32

	mu     sync.Mutex
	closed bool
}

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (*PD, error) {
	const op = "alloc pd"
	if err := c.checkOpen(op); err != nil {
		return nil, err
	}
	h, pdn, err := c.dev.AllocPD()
	if err != nil {
		return nil, opErr(op, c.name, err)
	}
	p := &PD{c: c, handle: h, pdn: pdn}
	if err := c.adopt(p); err != nil {
		p.Close()
		return nil, opErr(op, c.name, err)
	}
	return p, nil
}

// PDN is the protection domain number PRM commands and WQEs refer to.
func (p *PD) PDN() uint32 {
	if p == nil {
		return 0
	}
	return p.pdn
}

// usable fails for a nil PD and one not made by AllocPD.
func (p *PD) usable(op string) error {
	if p == nil || p.c == nil {
		return unusable(op, "PD", "Context.AllocPD", p == nil)
	}
	return nil
}

// isClosed reports whether Close succeeded.
func (p *PD) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// checkOpen fails for an unusable PD, and once the PD or its context is
// closed: what is made in the PD checks it first.
func (p *PD) checkOpen(op string) error {
	if err := p.usable(op); err != nil {
		return err
	}
	if p.isClosed() {
		return opErr(op, pdName(p.pdn), ErrClosed)
	}
	return p.c.checkOpen(op)
}

// Close deallocates the PD; everything in it must be closed first.
// Closing twice is safe.
func (p *PD) Close() error {
	if err := p.usable("dealloc pd"); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	if !p.c.closedNow() {
		if err := p.c.dev.DeallocPD(p.handle); err != nil {
			return opErr("dealloc pd", pdName(p.pdn), err)
		}
	}
	p.closed = true
	p.c.forget(p)
	return nil
}

// MR is a registered memory region (ibv_reg_mr) whose device address is
// its virtual address.
type MR struct {
	c      *Context
	handle seam.Handle
	// The keys, address and length (LKey, RKey, Addr, Len).
	lkey, rkey uint32
	addr       uint64
	length     uint64

	// hold keeps the memory for the device until the MR is closed.
	hold *memHold

	mu     sync.Mutex
	closed bool
}

// RegMR registers mem with the given access rights (ibv_reg_mr). mem may
// be all or part of a Buffer (or of adjacent Buffers), which the MR then
// keeps mapped until it is closed, even past Buffer.Close; memory the
// program mapped itself, which it must keep mapped while the MR lives; or
// Go memory (one allocation, such as a slice from make), which the MR
// pins (runtime.Pinner) so that the garbage collector neither frees nor
// moves it before Close. The memory of a closed Buffer is refused with
// ErrClosed.
func (p *PD) RegMR(mem []byte, access AccessFlags) (*MR, error) {
	const op = "reg mr"
	if err := p.checkOpen(op); err != nil {
		return nil, err
	}
	obj := pdName(p.pdn)
	if len(mem) == 0 {
		return nil, invalid(op, obj, "empty region")
	}
	if err := checkMRAccess(op, obj, access); err != nil {
		return nil, err
	}
	hold, err := holdMem(op, obj, mem)
	if err != nil {
		return nil, err
	}
	m, err := p.c.dev.RegMR(p.handle, mem, uint32(access))
	if err != nil {
		hold.release()
		return nil, opErr(op, obj, err)
	}
	mr := &MR{c: p.c, handle: m.Handle, lkey: m.LKey, rkey: m.RKey, addr: addrOf(mem), length: uint64(len(mem)), hold: hold}
	if err := p.c.adopt(mr); err != nil {
		mr.Close()
		return nil, opErr(op, obj, err)
	}
	return mr, nil
}

// checkMRAccess is the rule on an MR's access rights (RegMR,
// RegDmabufMR): local write, remote access and relaxed ordering, and
// remote write or atomic only with local write.
func checkMRAccess(op, obj string, access AccessFlags) error {
	if access&^(AccessLocalWrite|remoteAccess|AccessRelaxedOrdering) != 0 {
		return invalid(op, obj, "access %#x", uint32(access))
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return invalid(op, obj, "remote write or atomic access needs local write (IB spec 10.6.3.1)")
	}
	return nil
}

// LKey is the key that names the region in local accesses (SGE.LKey); 0
// for a nil MR.
func (m *MR) LKey() uint32 {
	if m == nil {
		return 0
	}
	return m.lkey
}

// RKey is the key that names the region in a peer's remote accesses
// (SendWR.RKey); 0 for a nil MR.
func (m *MR) RKey() uint32 {
	if m == nil {
		return 0
	}
	return m.rkey
}

// Addr is the address of the region's first byte, as SGEs and remote
// addresses name it; 0 for a nil MR.
func (m *MR) Addr() uint64 {
	if m == nil {
		return 0
	}
	return m.addr
}

// Len is the region's length in bytes; 0 for a nil MR.
func (m *MR) Len() uint64 {
	if m == nil {
		return 0
	}
	return m.length
}

// Close deregisters the region and lets go of its memory: a Buffer it
// kept is unmapped if it was closed, Go memory is unpinned. Closing twice
// is safe.
func (m *MR) Close() error {
	if m == nil || m.c == nil {
		return unusable("dereg mr", "MR", "PD.RegMR", m == nil)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	if !m.c.closedNow() {
		if err := m.c.dev.DeregMR(m.handle); err != nil {
			return opErr("dereg mr", fmt.Sprintf("lkey %#x", m.lkey), err)
		}
	}
	m.closed = true
	m.hold.release()
	m.c.forget(m)
	return nil
}
