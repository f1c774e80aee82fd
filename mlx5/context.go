package mlx5

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"

	"github.com/mlx5go/mlx5go/internal/mlx5hook"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// Options tune Open.
type Options struct {
	// NoDEVX opens without asking for DEVX.
	NoDEVX bool
	// RequireDEVX fails Open if the kernel will not give the context DEVX
	// (mlx5dv_open_device with MLX5DV_CONTEXT_FLAGS_DEVX). By default a
	// context the kernel refuses with DEVX is opened without it, as
	// ibv_open_device does.
	RequireDEVX bool
	// TotalBFRegs and LowLatencyBFRegs size the BlueFlame registers the
	// kernel gives the context; 0 takes libmlx5's defaults (16 and 4).
	TotalBFRegs, LowLatencyBFRegs uint32
}

// Caps are what the kernel said about the context when it opened it
// (struct mlx5_ib_alloc_ucontext_resp) and about the device when the
// context queried it (ibv_query_device_ex with struct
// mlx5_ib_query_device_resp), in Go terms.
type Caps struct {
	// SQD2RTS: the kernel moves a QP from SQD back to RTS
	// (MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS); signature pipelining
	// needs it.
	SQD2RTS bool
	// ECE: the kernel negotiates enhanced connection establishment; QPs
	// are created asking for version 1, as libmlx5 does.
	ECE        bool
	CQEVersion int
	// BFRegSize is the bytes of one BlueFlame register (its two halves).
	BFRegSize int
	// StaticBFRegs and DynamicBFRegs count the BlueFlame registers of the
	// context's own UAR pages and those it may allocate (UAR_OBJ_ALLOC).
	StaticBFRegs, DynamicBFRegs int
	UARsPerPage                 int
	// The queue limits: WQEBBs of a send queue, receive work requests of
	// a QP and an SRQ, bytes of a send and of a receive WQE.
	MaxSendWQEBB, MaxRecvWR, MaxSRQRecvWR int
	MaxSQDescSize, MaxRQDescSize          int
	NumPorts                              int

	// From the device query. MaxDCIStreams is the most a DCI may ask for
	// (QPOptions.DCIStreams): log2 of its concurrent and of its errored
	// stream channels (dci_streams_caps). Zero when the device has no DCI
	// streams, or did not answer the query: a DCI may then ask for 2^0
	// of each only, and the kernel decides.
	MaxDCIStreams DCIStreams
	// Atomics: the device performs 8-byte atomic operations on its QPs
	// (atomic_cap is not IBV_ATOMIC_NONE; libmlx5 enables atomics on its
	// QPs only then).
	Atomics bool
	// CoreClockKHz is the device's core clock (hca_core_clock), 0 if
	// unknown.
	CoreClockKHz uint64
	// MaxCQModerationCount and MaxCQModerationPeriod (µs) are the
	// device's moderation caps (cq_moderation_caps; mlx5_ib reports
	// MaxCQModerationCount and MaxCQModerationPeriod with the
	// cq_moderation cap, 0 and 0 without): CQ.Moderate of a verbs CQ stays
	// within them. Both 0: the device has no moderation.
	MaxCQModerationCount, MaxCQModerationPeriod int
	// RealTimeTimestamps: the device stamps CQEs with its real-time
	// clock if a CQ asks (GET_CONTEXT's
	// MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS, which mlx5_ib sets
	// when the sq_ts_format, rq_ts_format and RoCE qp_ts_format caps all
	// have real-time timestamps; libmlx5's
	// MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS). CQOptions.RealTimeTimestamps
	// needs it.
	RealTimeTimestamps bool
}

// capsOf decodes the driver-data response of GET_CONTEXT.
func capsOf(r *mlx5abi.Mlx5IbAllocUcontextResp) Caps {
	return Caps{
		SQD2RTS:            r.CompMask&mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS != 0,
		ECE:                r.CompMask&mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE != 0,
		RealTimeTimestamps: r.CompMask&mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS != 0,
		CQEVersion:         int(r.CqeVersion),
		BFRegSize:          int(r.BfRegSize),
		StaticBFRegs:       int(r.TotBfregs), DynamicBFRegs: int(r.NumDynBfregs),
		UARsPerPage:  int(r.NumUarsPerPage),
		MaxSendWQEBB: int(r.MaxSendWqebb), MaxRecvWR: int(r.MaxRecvWr), MaxSRQRecvWR: int(r.MaxSrqRecvWr),
		MaxSQDescSize: int(r.MaxSqDescSz), MaxRQDescSize: int(r.MaxRqDescSz),
		NumPorts: int(r.NumPorts),
	}
}

// limits are the queue limits sizing checks; a context that did not say
// (an old model) gets a ConnectX's.
func (c *Caps) limits() deviceLimits {
	l := deviceLimits{maxSQDesc: c.MaxSQDescSize, maxRQDesc: c.MaxRQDescSize, maxSendWQEBB: c.MaxSendWQEBB, maxRecvWR: c.MaxRecvWR}
	if l.maxSQDesc == 0 {
		l.maxSQDesc = 1024
	}
	if l.maxRQDesc == 0 {
		l.maxRQDesc = 512
	}
	if l.maxSendWQEBB == 0 {
		l.maxSendWQEBB = 1 << 15
	}
	if l.maxRecvWR == 0 {
		l.maxRecvWR = 1 << 15
	}
	return l
}

// Context is an open mlx5 device context.
type Context struct {
	dev  seam.Device
	name string // the device's, or "context": the object its errors name
	devx bool
	// verbs: the device answered GET_CONTEXT with mlx5's driver data, so
	// CQs, QPs and SRQs are made through its verbs by default.
	verbs bool
	// uhw is the kernel's cmds_supp_uhw: MLX5_USER_CMDS_SUPP_UHW_*.
	uhw uint8
	// caps are given out as copies (Caps): what the driver checks
	// against cannot be changed from outside.
	caps Caps
	// ports are the ports' link layers and flags, learned at open.
	ports [maxCachedPorts]portInfo
	// maxMsgSz is the smallest max_msg_sz the ports answered at open (0:
	// none did).
	maxMsgSz uint32

	mu sync.Mutex
	// closing: Close has begun; no new object is made. closed: the
	// device is closed too.
	closing, closed bool
	// children are the objects made on the context that Close closes,
	// newest first, by creation sequence.
	children map[child]uint64
	seq      uint64

	// mkeys are the context's mkeys by index, for SIG_ERR CQEs.
	mkeys  atomic.Pointer[mkeyTable]
	mkeyMu sync.Mutex

	ev events     // the DEVX event channel and its reader
	vr verbsState // what verbs objects share

	clock clock // the clock-info page (ClockInfo)

	capsOnce sync.Once
	general  []byte // QUERY_HCA_CAP general (current) output, once read
	capsErr  error

	cr cryptoState // crypto caps and the login session (crypto.go)
}

// child is an object of the context that Context.Close closes.
type child interface{ Close() error }

// adopt records x as a child of the context; it fails once Close has
// begun, and the caller then releases x.
func (c *Context) adopt(x child) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return ErrClosed
	}
	if c.children == nil {
		c.children = map[child]uint64{}
	}
	c.seq++
	c.children[x] = c.seq
	return nil
}

// forget removes a closed child.
func (c *Context) forget(x child) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.children, x)
}

// Devices lists the machine's mlx5 RDMA devices by name (e.g. "mlx5_0"),
// sorted: the devices that have a uverbs character device and whose
// kernel driver is mlx5_ib. A machine without any gives an empty list and
// no error.
func Devices() ([]string, error) {
	const op = "list devices"
	devs, err := uverbs.Devices()
	if err != nil {
		return nil, opErr(op, "RDMA devices", err)
	}
	var names []string
	for _, d := range devs {
		id, err := uverbs.DriverIDOf(d.Name)
		if err != nil {
			return nil, opErr(op, d.Name, fmt.Errorf("its driver: %w", err))
		}
		if id == uverbs.DriverMLX5 {
			names = append(names, d.Name)
		}
	}
	return names, nil
}

// Open opens the named mlx5 device (e.g. "mlx5_0"), asking the kernel
// for DEVX as libmlx5's ibv_open_device does: if GET_CONTEXT fails with
// DEVX (a device without it, a kernel that refuses it), the context is
// asked for again without, unless opt.RequireDEVX; DEVX calls on it then
// return ErrNoDEVX and everything else works. opt may be nil.
func Open(name string, opt *Options) (*Context, error) {
	const op = "open"
	if opt == nil {
		opt = &Options{}
	}
	if opt.NoDEVX && opt.RequireDEVX {
		return nil, invalid(op, name, "NoDEVX and RequireDEVX")
	}
	req, err := ucontextRequest(opt)
	if err != nil {
		return nil, invalid(op, name, "%v", err)
	}
	devx := !opt.NoDEVX
	uctx, _, err := openUcontext(name, &req)
	if err != nil && devx && !opt.RequireDEVX {
		req.Flags &^= mlx5abi.MLX5_IB_ALLOC_UCTX_DEVX
		devx = false
		uctx, _, err = openUcontext(name, &req)
	}
	if errors.Is(err, uverbs.ErrNoDevice) {
		return nil, opErr(op, name, uverbs.ErrNoDevice) // whose message names the device again
	}
	if err != nil {
		return nil, opErr(op, name, err)
	}
	c := newContext(&kernelDevice{ctx: uctx, devx: devx})
	c.name = name
	return c, nil
}

// ucontextRequest is the GET_CONTEXT driver data Open sends, as libmlx5
// fills it for mlx5dv_open_device.
func ucontextRequest(opt *Options) (mlx5abi.Mlx5IbAllocUcontextReqV2, error) {
	req := mlx5abi.Mlx5IbAllocUcontextReqV2{TotalNumBfregs: opt.TotalBFRegs, NumLowLatencyBfregs: opt.LowLatencyBFRegs,
		MaxCqeVersion: 1, LibCaps: mlx5abi.MLX5_LIB_CAP_4K_UAR | mlx5abi.MLX5_LIB_CAP_DYN_UAR}
	if req.TotalNumBfregs == 0 {
		req.TotalNumBfregs = 16
	}
	if req.NumLowLatencyBfregs == 0 {
		req.NumLowLatencyBfregs = 4
	}
	if req.NumLowLatencyBfregs >= req.TotalNumBfregs {
		return req, fmt.Errorf("%d low-latency BlueFlame registers of %d total", req.NumLowLatencyBfregs, req.TotalNumBfregs)
	}
	if !opt.NoDEVX {
		req.Flags = mlx5abi.MLX5_IB_ALLOC_UCTX_DEVX
	}
	return req, nil
}

// openUcontext runs GET_CONTEXT with the request, shortening it as
// libmlx5 does for kernels that reject fields they do not know: the whole
// struct, then without lib_caps, then without max_cqe_version onwards.
func openUcontext(name string, req *mlx5abi.Mlx5IbAllocUcontextReqV2) (*uverbs.Context, mlx5abi.Mlx5IbAllocUcontextResp, error) {
	var resp mlx5abi.Mlx5IbAllocUcontextResp
	full := unsafe.Slice((*byte)(unsafe.Pointer(req)), unsafe.Sizeof(*req))
	out := unsafe.Slice((*byte)(unsafe.Pointer(&resp)), unsafe.Sizeof(resp))
	var err error
	for _, n := range []uintptr{unsafe.Sizeof(*req), unsafe.Offsetof(req.LibCaps), unsafe.Offsetof(req.MaxCqeVersion)} {
		var c *uverbs.Context
		c, err = uverbs.Open(name, &uverbs.Options{DriverID: uverbs.DriverMLX5, DriverIn: full[:n], DriverOut: out})
		if err == nil {
			return c, resp, nil
		}
		if !errors.Is(err, unix.EINVAL) {
			break
		}
	}
	return nil, resp, err
}

func init() {
	mlx5hook.NewContext = func(dev seam.Device) any { return newContext(dev) }
}

// newContext makes a Context on a seam.Device: Open's kernel context, or
// the software device model (package mlx5test opens one for tests,
// through internal/mlx5hook, so that no exported function takes the
// internal seam.Device). Its capabilities are the device's GET_CONTEXT
// answer (seam.Verbs.DriverContext); a device without one makes no verbs
// objects, only DEVX ones. A nil dev makes a context every method of
// which fails with ErrInvalid.
func newContext(dev seam.Device) *Context {
	if dev == nil {
		return &Context{}
	}
	c := &Context{dev: dev, name: "context", devx: dev.DEVX()}
	var r mlx5abi.Mlx5IbAllocUcontextResp
	if b := dev.DriverContext(); len(b) > 0 {
		copy(bytesOf(&r), b)
		c.openVerbs(&r)
	}
	return c
}

// openVerbs sets up a context whose device answered GET_CONTEXT with
// mlx5's driver data, as libmlx5's mlx5_init_context does: the caps and
// the commands that take driver data, then the device query
// (mlx5_query_device_ctx), then each port's link layer and flags
// (mlx5_query_port into cached_link_layer and cached_port_flags; a port
// whose query fails is asked again when an AH needs it; mlx5go keeps the
// active MTU and max_msg_sz too, for the lengths a post may send), then
// the non-cached UAR page CQs ring (mlx5_set_singleton_nc_uar; if that
// fails, the first CQ tries again).
func (c *Context) openVerbs(r *mlx5abi.Mlx5IbAllocUcontextResp) {
	c.caps, c.verbs, c.uhw = capsOf(r), true, r.CmdsSuppUhw
	c.clock.offered = r.ClockInfoVersions&clockInfoV1 != 0
	c.queryDevice()
	for p := 1; p <= min(c.caps.NumPorts, len(c.ports)); p++ {
		if pa, err := c.dev.QueryPort(uint8(p)); err == nil {
			c.ports[p-1] = portInfo{linkLayer: pa.LinkLayer, flags: pa.Flags, activeMTU: pa.ActiveMTU}
			if pa.MaxMsgSz != 0 && (c.maxMsgSz == 0 || pa.MaxMsgSz < c.maxMsgSz) {
				c.maxMsgSz = pa.MaxMsgSz
			}
		}
	}
	c.ncPage()
}

// queryDevice asks the extended query device as mlx5_query_device_ctx
// does, with struct mlx5_ib_query_device_resp if the kernel takes driver
// data for it (cmds_supp_uhw), and keeps what the caps need. Like
// libmlx5 it opens the context even if the query fails, with those caps
// zero.
func (c *Context) queryDevice() {
	var r mlx5abi.Mlx5IbQueryDeviceResp
	var out []byte
	if c.uhw&mlx5abi.MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE != 0 {
		out = bytesOf(&r)
	}
	a, err := c.dev.QueryDevice(out)
	if err != nil {
		return
	}
	// The kernel writes response_length bytes of r; the rest stays zero.
	c.caps.MaxDCIStreams = DCIStreams{LogConcurrent: int(r.DciStreamsCaps.MaxLogNumConcurent),
		LogErrored: int(r.DciStreamsCaps.MaxLogNumErrored)}
	c.caps.Atomics = a.AtomicCap != 0
	c.caps.CoreClockKHz = a.HCACoreClock
	c.caps.MaxCQModerationCount, c.caps.MaxCQModerationPeriod = int(a.CQModerationCount), int(a.CQModerationPeriod)
}

// portInfo is what a context learned of a port when it opened; a zero
// link layer is unknown.
type portInfo struct{ linkLayer, flags, activeMTU uint8 }

// maxCachedPorts is MLX5_MAX_PORTS_NUM: the ports libmlx5 learns at open.
const maxCachedPorts = 2

// port returns a port's link layer and flags: those learned at open, or
// the kernel's answer now (mlx5_create_ah).
func (c *Context) port(p uint8) (linkLayer, flags uint8, err error) {
	if p >= 1 && int(p) <= len(c.ports) && c.ports[p-1].linkLayer != 0 {
		return c.ports[p-1].linkLayer, c.ports[p-1].flags, nil
	}
	pa, err := c.dev.QueryPort(p)
	if err != nil {
		return 0, 0, err
	}
	return pa.LinkLayer, pa.Flags, nil
}

// Caps returns what the kernel said of the context and of the device when
// the context opened (a zero Caps for a nil context). It is a copy:
// changing it changes nothing the context checks, such as the queue
// limits CreateQP and CreateSRQ size against or the ports CreateAH takes.
func (c *Context) Caps() Caps {
	if c == nil {
		return Caps{}
	}
	return c.caps
}

// DEVX reports whether the context has DEVX.
func (c *Context) DEVX() bool { return c != nil && c.devx }

// Close closes everything created on the context, newest first (mkeys,
// QPs, CQs, DEVX objects, MRs, PDs, UARs, UMEMs, asynchronous queues:
// each after what was made with it), then the context itself. Calls on
// those objects then fail with ErrClosed. The work outstanding on them
// ends as each one's Close says (QP.Close: work the device had not run
// never completes, and the completions not yet polled are removed; a
// batch left open ends with the QP, Batch). A child the device refuses to
// destroy is tried again after the others, and left to the kernel, which
// releases everything of a closed context. Other goroutines may close
// the children meanwhile: each is closed once, by whichever Close comes
// first. Closing twice is safe.
func (c *Context) Close() error {
	if err := c.usable("close context"); err != nil {
		return err
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil
	}
	c.closing = true
	// A copy, sorted under the lock, newest first: the children close
	// themselves meanwhile, and forget deletes them from the map under
	// the lock. A child found here that closes itself first makes its
	// Close below return nil; none is made after (adopt refuses).
	kids := make([]child, 0, len(c.children))
	for x := range c.children {
		kids = append(kids, x)
	}
	sort.Slice(kids, func(i, j int) bool { return c.children[kids[i]] > c.children[kids[j]] })
	c.mu.Unlock()
	for pass := 0; pass < 3 && len(kids) > 0; pass++ {
		left := kids[:0]
		for _, x := range kids {
			if x.Close() != nil {
				left = append(left, x)
			}
		}
		kids = left
	}
	c.ev.stop()
	c.stopEvents()
	c.closeVerbs()
	c.clock.unmap()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	err := c.dev.Close()
	// What the device refused to destroy, the closed context released:
	// their Close now only unmaps their memory.
	for _, x := range kids {
		x.Close()
	}
	if err != nil {
		return opErr("close context", c.name, err)
	}
	return nil
}

// usable fails for a nil context and for one not made by Open or
// mlx5test (ErrInvalid).
func (c *Context) usable(op string) error {
	if c == nil || c.dev == nil {
		return unusable(op, "Context", "Open or mlx5test", c == nil)
	}
	return nil
}

// checkOpen fails for an unusable context and once the context is
// closing; verbs calls need no DEVX.
func (c *Context) checkOpen(op string) error {
	if err := c.usable(op); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return opErr(op, c.name, ErrClosed)
	}
	return nil
}

// bytesOf is the memory of *v, for driver data and responses.
func bytesOf[T any](v *T) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v)) }

// addrOf is the address of mem's first byte, as the device names it.
func addrOf(mem []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))) }

// check is checkOpen for a DEVX call: it also fails without DEVX
// (ErrNoDEVX). obj is the object the call is on ("": the context).
func (c *Context) check(op, obj string) error {
	if err := c.usable(op); err != nil {
		return err
	}
	if obj == "" {
		obj = c.name
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return opErr(op, obj, ErrClosed)
	}
	if !c.devx {
		return opErr(op, obj, ErrNoDEVX)
	}
	return nil
}

// closingNow reports whether Close has begun.
func (c *Context) closingNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

// closedNow reports whether the device is closed: the kernel has
// released every object of the context.
func (c *Context) closedNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
