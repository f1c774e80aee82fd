package uverbs

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// ErrClosed is returned by calls on a closed context or object.
var ErrClosed = errors.New("uverbs: use of closed object")

// Options are a provider's additions to Open.
type Options struct {
	// DriverID goes into every call's header (enum rdma_driver_id). The
	// kernel rejects calls that name another driver; 0 looks it up with
	// DriverIDOf, as libibverbs does.
	DriverID DriverID
	// DriverIn and DriverOut are the provider's GET_CONTEXT data
	// (UVERBS_ATTR_UHW_IN/OUT), e.g. struct mlx5_ib_alloc_ucontext_req_v2
	// and its response. Either may be empty.
	DriverIn, DriverOut []byte
	// ForceWrite sends every command that has a legacy write() form by
	// write(), as on a kernel without RDMA_VERBS_IOCTL. It exists to test
	// that path; normal use leaves it false and write() is used only when
	// the kernel has nothing else.
	ForceWrite bool
}

// Context is an open uverbs device context: the character device and the
// kernel's ucontext on it. Closing it releases every object created on it,
// in the kernel and here.
type Context struct {
	Device   Device
	driverID DriverID

	// NumCompVectors and CoreSupport are GET_CONTEXT's outputs.
	NumCompVectors uint32
	CoreSupport    uint64

	// fdMu guards fd: calls hold it for reading for their whole duration,
	// so Close (which takes it for writing) cannot close the descriptor, and
	// let its number be reused, under a call in flight.
	fdMu sync.RWMutex
	fd   int
	// chMu guards children and events; children is nil once the context
	// is closed.
	chMu     sync.Mutex
	children map[closer]struct{}
	// events maps the user handles given to the kernel at creation to
	// their objects, so that async events name them.
	events     map[uint64]any
	nextHandle uint64
	// drvResp is the provider's GET_CONTEXT response as the kernel
	// wrote it.
	drvResp []byte

	forceWrite bool
	noIoctl    atomic.Bool // the kernel answered ENOTTY: no ioctl path
	recorder   Recorder    // set on a recording context: no kernel
	recAsync   int         // a recording context's async event pipe (write end), or -1
	async      *EventFile
}

type closer interface{ markClosed() }

// Open opens the named RDMA device (e.g. "rxe0", "mlx5_0") and creates its
// ucontext. opt may be nil.
func Open(name string, opt *Options) (*Context, error) {
	if opt == nil {
		opt = &Options{}
	}
	dev, err := DeviceByName(name)
	if err != nil {
		return nil, err
	}
	if opt.DriverID == 0 {
		id, err := DriverIDOf(name)
		if err != nil {
			return nil, err
		}
		o := *opt
		o.DriverID = id
		opt = &o
	}
	fd, err := unix.Open(dev.Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("uverbs: open %s: %w", dev.Path, err)
	}
	c := &Context{Device: dev, driverID: opt.DriverID, fd: fd, children: map[closer]struct{}{},
		events: map[uint64]any{}, forceWrite: opt.ForceWrite}
	asyncFD := -1
	err = c.ioctlOrWrite(func() error { return c.getContext(opt.DriverIn, opt.DriverOut) },
		func() error { var e error; asyncFD, e = c.getContextWrite(opt.DriverIn, opt.DriverOut); return e })
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	if asyncFD < 0 {
		// The ioctl path: the async event file is a separate object.
		var a Attrs
		i := a.NewFD(uverbsabi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
		err := c.Invoke("alloc async event file", uverbsabi.UVERBS_OBJECT_ASYNC_EVENT, uverbsabi.UVERBS_METHOD_ASYNC_EVENT_ALLOC, &a)
		if err != nil {
			unix.Close(fd)
			return nil, err
		}
		asyncFD = int(a.Handle(i))
	}
	if c.async, err = newEventFile(asyncFD, "async events of "+name); err != nil {
		unix.Close(asyncFD)
		unix.Close(fd)
		return nil, err
	}
	return c, nil
}

// getContextWrite is GET_CONTEXT by write(): the kernel creates the async
// event file with the context and returns its descriptor.
func (c *Context) getContextWrite(drvIn, drvOut []byte) (int, error) {
	var cmd uverbsabi.IbUverbsGetContext
	var resp uverbsabi.IbUverbsGetContextResp
	if err := c.write("get context", uverbsabi.IB_USER_VERBS_CMD_GET_CONTEXT, asBytes(&cmd), asBytes(&resp), drvIn, drvOut); err != nil {
		return -1, err
	}
	c.NumCompVectors = resp.NumCompVectors
	c.drvResp = append([]byte(nil), drvOut...)
	return int(resp.AsyncFd), nil
}

// DriverResponse returns a copy of the provider's GET_CONTEXT response
// (Options.DriverOut as the kernel filled it when the context opened; mlx5:
// struct mlx5_ib_alloc_ucontext_resp), nil if there was none.
func (c *Context) DriverResponse() []byte {
	if c.drvResp == nil {
		return nil
	}
	return append([]byte(nil), c.drvResp...)
}

// AsyncEvents returns the context's async event file: QP, CQ, SRQ, port
// and device events. It is owned by the context and closed with it.
func (c *Context) AsyncEvents() *EventFile { return c.async }

func (c *Context) getContext(drvIn, drvOut []byte) error {
	var a Attrs
	var ncv [4]byte
	var core [8]byte
	a.Out(uverbsabi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, ncv[:])
	a.Out(uverbsabi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, core[:])
	if len(drvIn) > 0 {
		a.In(uverbsabi.UVERBS_ATTR_UHW_IN, drvIn)
	}
	if len(drvOut) > 0 {
		a.Out(uverbsabi.UVERBS_ATTR_UHW_OUT, drvOut)
	}
	if err := c.Invoke("get context", uverbsabi.UVERBS_OBJECT_DEVICE, uverbsabi.UVERBS_METHOD_GET_CONTEXT, &a); err != nil {
		return err
	}
	c.NumCompVectors = *(*uint32)(unsafe.Pointer(&ncv))
	c.CoreSupport = *(*uint64)(unsafe.Pointer(&core))
	if len(drvOut) > 0 {
		c.drvResp = append([]byte(nil), drvOut...)
	}
	return nil
}

// FD returns the context's file descriptor (for mmap of provider pages). It
// stays owned by the Context.
func (c *Context) FD() int {
	c.fdMu.RLock()
	defer c.fdMu.RUnlock()
	return c.fd
}

// Close destroys the ucontext and everything created on it. Closing twice
// is safe and returns nil.
func (c *Context) Close() error {
	c.fdMu.Lock()
	if c.fd < 0 {
		c.fdMu.Unlock()
		return nil
	}
	var err error
	if c.recorder == nil {
		err = unix.Close(c.fd)
	}
	c.fd = -1
	c.fdMu.Unlock()
	if c.async != nil {
		c.async.Close()
	}
	if c.recorder != nil && c.recAsync >= 0 {
		unix.Close(c.recAsync)
		c.recAsync = -1
	}
	c.chMu.Lock()
	children := c.children
	c.children = nil
	c.events = nil
	c.chMu.Unlock()
	// Outside the context's locks: an object's Close takes its own lock
	// first, then the context's.
	for ch := range children {
		ch.markClosed()
	}
	if err != nil {
		return fmt.Errorf("uverbs: close %s: %w", c.Device.Path, err)
	}
	return nil
}

// Invoke issues a method call on the context's device: object and method
// ids, the attributes, and op naming the call in errors. Providers use it
// for their driver-specific methods.
func (c *Context) Invoke(op string, object, method uint16, a *Attrs) error {
	c.fdMu.RLock()
	defer c.fdMu.RUnlock()
	if c.fd < 0 {
		return fmt.Errorf("uverbs: %s: %w", op, ErrClosed)
	}
	if c.recorder != nil {
		return c.record(op, object, method, a)
	}
	return invoke(c.fd, op, object, method, c.driverID, a)
}

// InvokeWrite sends legacy write command cmd through
// UVERBS_METHOD_INVOKE_WRITE: coreIn is the command struct without its
// legacy header, coreOut its response; drvIn and drvOut the provider's data.
//
// If the kernel has no ioctl path the command goes by write() instead (see
// write.go); coreIn must then be the whole command struct, its response
// field first for commands that have one, as the kernel's write() ABI has
// it.
func (c *Context) InvokeWrite(op string, cmd uint32, coreIn, coreOut, drvIn, drvOut []byte) error {
	return c.ioctlOrWrite(func() error { return c.invokeWrite(op, cmd, coreIn, coreOut, drvIn, drvOut) },
		func() error { return c.write(op, cmd, coreIn, coreOut, drvIn, drvOut) })
}

func (c *Context) invokeWrite(op string, cmd uint32, coreIn, coreOut, drvIn, drvOut []byte) error {
	var a Attrs
	a.InUint64(uverbsabi.UVERBS_ATTR_WRITE_CMD, uint64(cmd))
	a.In(uverbsabi.UVERBS_ATTR_CORE_IN, coreIn)
	if len(coreOut) > 0 {
		a.Out(uverbsabi.UVERBS_ATTR_CORE_OUT, coreOut)
	}
	if len(drvIn) > 0 {
		a.In(uverbsabi.UVERBS_ATTR_UHW_IN, drvIn)
	}
	if len(drvOut) > 0 {
		a.Out(uverbsabi.UVERBS_ATTR_UHW_OUT, drvOut)
	}
	return c.Invoke(op, uverbsabi.UVERBS_OBJECT_DEVICE, uverbsabi.UVERBS_METHOD_INVOKE_WRITE, &a)
}

func (c *Context) adopt(ch closer) error {
	c.chMu.Lock()
	defer c.chMu.Unlock()
	if c.children == nil {
		return ErrClosed
	}
	c.children[ch] = struct{}{}
	return nil
}

func (c *Context) release(ch closer) {
	c.chMu.Lock()
	defer c.chMu.Unlock()
	if c.children != nil {
		delete(c.children, ch)
	}
}

// newUserHandle returns a fresh user handle for an object that may have
// async events; register binds it to the object once created.
func (c *Context) newUserHandle() uint64 {
	c.chMu.Lock()
	defer c.chMu.Unlock()
	c.nextHandle++
	return c.nextHandle
}

// userHandleOf is the caller's user handle if it gave one, else a fresh
// one.
func (c *Context) userHandleOf(h *uint64) uint64 {
	if h != nil {
		return *h
	}
	return c.newUserHandle()
}

func (c *Context) register(h uint64, obj any) {
	c.chMu.Lock()
	defer c.chMu.Unlock()
	if c.events != nil {
		c.events[h] = obj
	}
}

func (c *Context) unregister(h uint64) {
	c.chMu.Lock()
	defer c.chMu.Unlock()
	if c.events != nil {
		delete(c.events, h)
	}
}

func (c *Context) lookup(h uint64) any {
	c.chMu.Lock()
	defer c.chMu.Unlock()
	return c.events[h]
}

func asBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// PortAttr is a port's attributes (struct ibv_port_attr's fields).
type PortAttr struct {
	State         uint8 // 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER
	MaxMTU        uint8 // enum ibv_mtu: 1 = 256 ... 5 = 4096
	ActiveMTU     uint8
	GIDTableLen   uint32
	PortCapFlags  uint32
	PortCapFlags2 uint16
	MaxMsgSize    uint32
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	PKeyTableLen  uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8 // 0 unspecified, 1 InfiniBand, 2 Ethernet
	Flags         uint8
	// ActiveSpeedEx is the kernel's active_speed_ex (enum ib_port_speed:
	// XDR is 256, which ActiveSpeed cannot hold); 0 where the kernel does
	// not give it (6.1, or the write() fallback). Speed reads either.
	ActiveSpeedEx uint32
}

// Speed is the port's enum ib_port_speed: ActiveSpeedEx where the kernel
// gives it, else ActiveSpeed, as users of ibv_port_attr read
// active_speed_ex ?: active_speed.
func (a *PortAttr) Speed() uint32 {
	if a.ActiveSpeedEx != 0 {
		return a.ActiveSpeedEx
	}
	return uint32(a.ActiveSpeed)
}

// QueryPort returns the attributes of port (1-based).
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	if port == 0 {
		return PortAttr{}, fmt.Errorf("uverbs: query port 0: ports are numbered from 1")
	}
	var resp uverbsabi.IbUverbsQueryPortRespEx
	err := c.ioctlOrWrite(func() error {
		var a Attrs
		a.InUint64(uverbsabi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, uint64(port))
		a.Out(uverbsabi.UVERBS_ATTR_QUERY_PORT_RESP, asBytes(&resp))
		return c.Invoke("query port", uverbsabi.UVERBS_OBJECT_DEVICE, uverbsabi.UVERBS_METHOD_QUERY_PORT, &a)
	}, func() error {
		cmd := uverbsabi.IbUverbsQueryPort{PortNum: port}
		return c.write("query port", uverbsabi.IB_USER_VERBS_CMD_QUERY_PORT, asBytes(&cmd), asBytes(&resp.LegacyResp), nil, nil)
	})
	if err != nil {
		return PortAttr{}, err
	}
	return portAttrOf(&resp), nil
}

// portAttrOf decodes the kernel's answer to QUERY_PORT.
func portAttrOf(resp *uverbsabi.IbUverbsQueryPortRespEx) PortAttr {
	r := &resp.LegacyResp
	return PortAttr{
		State: r.State, MaxMTU: r.MaxMtu, ActiveMTU: r.ActiveMtu, GIDTableLen: r.GidTblLen,
		PortCapFlags: r.PortCapFlags, PortCapFlags2: resp.PortCapFlags2, MaxMsgSize: r.MaxMsgSz,
		BadPKeyCntr: r.BadPkeyCntr, QKeyViolCntr: r.QkeyViolCntr, PKeyTableLen: r.PkeyTblLen,
		LID: r.Lid, SMLID: r.SmLid, LMC: r.Lmc, MaxVLNum: r.MaxVlNum, SMSL: r.SmSl,
		SubnetTimeout: r.SubnetTimeout, InitTypeReply: r.InitTypeReply, ActiveWidth: r.ActiveWidth,
		ActiveSpeed: r.ActiveSpeed, PhysState: r.PhysState, LinkLayer: r.LinkLayer, Flags: r.Flags,
		ActiveSpeedEx: resp.ActiveSpeedEx,
	}
}

// object is what every kernel object shares: its context, its handle and
// whether it is closed.
type object struct {
	ctx    *Context
	mu     sync.Mutex
	handle uint32
	closed bool
}

// Handle is the kernel's handle of the object.
func (o *object) Handle() uint32 { return o.handle }

func (o *object) markClosed() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

// close destroys the object once: destroy runs under the object's lock
// unless it is already closed. If the context was closed meanwhile the
// kernel has released the object and close returns nil.
func (o *object) close(self closer, destroy func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	if err := destroy(); err != nil {
		if errors.Is(err, ErrClosed) {
			o.closed = true
			return nil
		}
		return err
	}
	o.closed = true
	o.ctx.release(self)
	return nil
}

// destroyCall is how a verbs object is destroyed: its DESTROY method
// (object and method ids, the attribute of its handle, and that of the
// response if the method has one) and its legacy write() command.
type destroyCall struct {
	op                   string
	object, method       uint16
	handleAttr, respAttr uint16
	writeCmd             uint32
	cmd, resp            []byte  // the write() command; the response both paths fill, if any
	userHandle           *uint64 // the user handle async events name the object by, if any
}

// destroy is every verbs object's Close: once (close), its DESTROY method,
// or its write() command where the kernel has no ioctl for it; then the
// user handle is forgotten.
func (o *object) destroy(self closer, d destroyCall) error {
	return o.close(self, func() error {
		err := o.ctx.ioctlOrWrite(func() error {
			var a Attrs
			if d.resp != nil {
				a.Out(d.respAttr, d.resp)
			}
			a.IDR(d.handleAttr, o.handle)
			return o.ctx.Invoke(d.op, d.object, d.method, &a)
		}, func() error {
			return o.ctx.write(d.op, d.writeCmd, d.cmd, d.resp, nil, nil)
		})
		if err == nil && d.userHandle != nil {
			o.ctx.unregister(*d.userHandle)
		}
		return err
	})
}

// PD is a protection domain.
type PD struct{ object }

// AllocPD allocates a protection domain. drvOut receives the provider's
// response (mlx5: struct mlx5_ib_alloc_pd_resp with the pdn); it may be nil.
func (c *Context) AllocPD(drvOut []byte) (*PD, error) {
	var cmd uverbsabi.IbUverbsAllocPd
	var resp uverbsabi.IbUverbsAllocPdResp
	if err := c.InvokeWrite("alloc pd", uverbsabi.IB_USER_VERBS_CMD_ALLOC_PD, asBytes(&cmd), asBytes(&resp), nil, drvOut); err != nil {
		return nil, err
	}
	p := &PD{object{ctx: c, handle: resp.PdHandle}}
	if err := c.adopt(p); err != nil {
		return nil, err
	}
	return p, nil
}

// Close deallocates the PD. Closing twice, or after the context is closed,
// is safe and returns nil.
func (p *PD) Close() error {
	cmd := uverbsabi.IbUverbsDeallocPd{PdHandle: p.handle}
	return p.destroy(p, destroyCall{op: "dealloc pd", object: uverbsabi.UVERBS_OBJECT_PD, method: uverbsabi.UVERBS_METHOD_PD_DESTROY,
		handleAttr: uverbsabi.UVERBS_ATTR_DESTROY_PD_HANDLE, writeCmd: uverbsabi.IB_USER_VERBS_CMD_DEALLOC_PD, cmd: asBytes(&cmd)})
}
