package mlx5

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"weak"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// The DEVX calls, with the semantics of rdma-core's mlx5dv_devx_*: PRM
// input and output mailboxes as the firmware sees them. A kernel failure
// is an error wrapping the errno; a firmware failure (non-zero status in
// the output mailbox) is an error naming the opcode, status and syndrome.

// GeneralCmd runs a firmware command that creates no object
// (mlx5dv_devx_general_cmd), e.g. QUERY_HCA_CAP. Without DEVX only the
// commands the kernel runs for any context are sent (see
// withoutDEVXGeneral); the others fail with ErrNoDEVX.
func (c *Context) GeneralCmd(in, out []byte) error {
	const op = "devx general cmd"
	if err := c.checkOpen(op); err != nil {
		return err
	}
	if !c.devx && (len(in) < 16 || !withoutDEVXGeneral[uint16(prm.MboxIn.Opcode.Get(in))]) {
		return opErr(op, c.name, ErrNoDEVX)
	}
	if err := checkMailboxes(op, c.name, in, out); err != nil {
		return err
	}
	return checkOutput(op, c.name, in, out, c.dev.GeneralCmd(in, out))
}

// withoutDEVXGeneral are the general commands mlx5_ib runs for a context
// without a DEVX uid, as the device's own whitelist uid (devx_get_uid and
// devx_is_whitelist_cmd in drivers/infiniband/hw/mlx5/devx.c, Linux 6.1;
// EOPNOTSUPP if the device has none). libmlx5 reads the device's caps so
// on every context (mlx5_query_device_ctx's QUERY_HCA_CAP).
var withoutDEVXGeneral = map[uint16]bool{
	prm.MLX5_CMD_OP_QUERY_HCA_CAP:           true,
	prm.MLX5_CMD_OP_QUERY_HCA_VPORT_CONTEXT: true,
	prm.MLX5_CMD_OP_QUERY_ESW_VPORT_CONTEXT: true,
	prm.MLX5_CMD_OP_QUERY_ESW_FUNCTIONS:     true,
}

// checkMailboxes applies what every PRM command needs: an input with the
// 16-byte command header (opcode, uid, op_mod) and an output with the
// 16-byte status header (ErrInvalid).
func checkMailboxes(op, obj string, in, out []byte) error {
	if len(in) < 16 {
		return invalid(op, obj, "input mailbox of %d bytes, the command header alone is 16", len(in))
	}
	if len(out) < 16 {
		return invalid(op, obj, "output mailbox of %d bytes, the status header alone is 16", len(out))
	}
	if len(in)%4 != 0 || len(out)%4 != 0 {
		return invalid(op, obj, "mailbox lengths %d and %d are not multiples of 4", len(in), len(out))
	}
	return nil
}

// DevxObj is a firmware object created through DEVX (mlx5dv_devx_obj).
type DevxObj struct {
	c      *Context
	handle seam.Handle
	name   string
	child  bool // the context's (CreateObj), not another object's
	mu     sync.Mutex
	closed bool
}

// usable fails for a nil DevxObj and one not made by CreateObj.
func (o *DevxObj) usable(op string) error {
	if o == nil || o.c == nil {
		return unusable(op, "DevxObj", "Context.CreateObj", o == nil)
	}
	return nil
}

// CreateObj runs a create command (mlx5dv_devx_obj_create). The kernel
// records the matching destroy command and runs it on Close or when the
// context closes.
func (c *Context) CreateObj(in, out []byte) (*DevxObj, error) {
	const op = "devx obj create"
	o, err := c.createObj(op, in, out)
	if err != nil {
		return nil, err
	}
	if err := c.adopt(o); err != nil {
		o.Close()
		return nil, opErr(op, c.name, err)
	}
	o.child = true
	return o, nil
}

// createObj is CreateObj for an object another one owns (a QP's, a CQ's,
// an mkey's): the owner closes it, not the context.
func (c *Context) createObj(op string, in, out []byte) (*DevxObj, error) {
	if err := c.check(op, ""); err != nil {
		return nil, err
	}
	if err := checkMailboxes(op, c.name, in, out); err != nil {
		return nil, err
	}
	h, err := c.dev.ObjCreate(in, out)
	if err := checkOutput(op, c.name, in, out, err); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("DEVX object %d (%s)", h, prm.OpcodeName(uint16(prm.MboxIn.Opcode.Get(in))))
	return &DevxObj{c: c, handle: h, name: name}, nil
}

// isClosed reports whether Close succeeded.
func (o *DevxObj) isClosed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closed
}

// Query runs a query command on the object (mlx5dv_devx_obj_query).
func (o *DevxObj) Query(in, out []byte) error {
	const op = "devx obj query"
	if err := o.usable(op); err != nil {
		return err
	}
	if o.isClosed() {
		return opErr(op, o.name, ErrClosed)
	}
	return o.c.queryObj(op, o.name, o.handle, in, out)
}

// Modify runs a modify command on the object (mlx5dv_devx_obj_modify).
func (o *DevxObj) Modify(in, out []byte) error {
	const op = "devx obj modify"
	if err := o.usable(op); err != nil {
		return err
	}
	if o.isClosed() {
		return opErr(op, o.name, ErrClosed)
	}
	return o.c.modifyObj(op, o.name, o.handle, in, out)
}

// queryObj runs a query command on the object obj with handle h: a
// DevxObj's, or a verbs QP's, CQ's or SRQ's. The kernel checks that the
// command names that object.
func (c *Context) queryObj(op, obj string, h seam.Handle, in, out []byte) error {
	if err := c.check(op, obj); err != nil {
		return err
	}
	if err := checkMailboxes(op, obj, in, out); err != nil {
		return err
	}
	return checkOutput(op, obj, in, out, c.dev.ObjQuery(h, in, out))
}

// modifyObj runs a modify command on the object with handle h, as
// queryObj.
func (c *Context) modifyObj(op, obj string, h seam.Handle, in, out []byte) error {
	if err := c.check(op, obj); err != nil {
		return err
	}
	if err := checkMailboxes(op, obj, in, out); err != nil {
		return err
	}
	return checkOutput(op, obj, in, out, c.dev.ObjModify(h, in, out))
}

// Close destroys the object (mlx5dv_devx_obj_destroy). Closing twice is
// safe.
func (o *DevxObj) Close() error {
	if err := o.usable("devx obj destroy"); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	if !o.c.closedNow() {
		if err := o.c.dev.ObjDestroy(o.handle); err != nil {
			return opErr("devx obj destroy", o.name, err)
		}
	} // else the context's close released it
	o.closed = true
	if o.child {
		o.c.forget(o)
	}
	return nil
}

// AsyncCmdQueue receives the completions of asynchronous DEVX queries
// (mlx5dv_devx_cmd_comp).
type AsyncCmdQueue struct {
	c      *Context
	fd     seam.AsyncCmdFD
	name   string
	mu     sync.Mutex
	closed bool
}

// usable fails for a nil AsyncCmdQueue and one not made by
// NewAsyncCmdQueue.
func (q *AsyncCmdQueue) usable(op string) error {
	if q == nil || q.c == nil {
		return unusable(op, "AsyncCmdQueue", "Context.NewAsyncCmdQueue", q == nil)
	}
	return nil
}

// NewAsyncCmdQueue creates a completion queue for asynchronous queries
// (mlx5dv_devx_create_cmd_comp).
func (c *Context) NewAsyncCmdQueue() (*AsyncCmdQueue, error) {
	const op = "devx async cmd fd"
	if err := c.check(op, ""); err != nil {
		return nil, err
	}
	fd, err := c.dev.NewAsyncCmdFD()
	if err != nil {
		return nil, opErr(op, c.name, err)
	}
	q := &AsyncCmdQueue{c: c, fd: fd, name: fmt.Sprintf("async cmd queue %d", fd.Fd())}
	if err := c.adopt(q); err != nil {
		fd.Close()
		return nil, opErr(op, c.name, err)
	}
	return q, nil
}

// Close closes the queue. Closing twice is safe.
func (q *AsyncCmdQueue) Close() error {
	if err := q.usable("devx async cmd fd close"); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	q.c.forget(q)
	if err := q.fd.Close(); err != nil {
		return opErr("devx async cmd fd close", q.name, err)
	}
	return nil
}

func (q *AsyncCmdQueue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// maxAsyncBytes is the kernel's limit on the output bytes of asynchronous
// commands not yet read (MAX_ASYNC_BYTES_IN_USE in devx.c).
const maxAsyncBytes = 1 << 20

// ErrAsyncBacklog is wrapped by QueryAsync when the kernel holds 1 MiB of
// unread asynchronous output for the queue.
var ErrAsyncBacklog = errors.New("1 MiB of asynchronous DEVX output is waiting to be read on this queue; read completions before issuing more")

// QueryAsync starts a query of the object whose output, tagged with wrID,
// arrives on q (mlx5dv_devx_obj_query_async). outLen is the size of the
// output mailbox.
func (o *DevxObj) QueryAsync(in []byte, outLen int, wrID uint64, q *AsyncCmdQueue) error {
	const op = "devx obj query async"
	if err := o.usable(op); err != nil {
		return err
	}
	if o.isClosed() {
		return opErr(op, o.name, ErrClosed)
	}
	if err := o.c.check(op, o.name); err != nil {
		return err
	}
	if q == nil || q.c != o.c {
		return invalid(op, o.name, "the completion queue must belong to the object's context")
	}
	if q.isClosed() {
		return opErr(op, o.name, fmt.Errorf("its completion queue: %w", ErrClosed))
	}
	if outLen < 16 || outLen%4 != 0 || outLen > maxAsyncBytes {
		return invalid(op, o.name, "output length %d (16 bytes to 1 MiB, a multiple of 4)", outLen)
	}
	if err := checkMailboxes(op, o.name, in, make([]byte, 16)); err != nil {
		return err
	}
	err := o.c.dev.ObjQueryAsync(o.handle, in, outLen, wrID, q.fd)
	switch {
	case errors.Is(err, unix.EAGAIN):
		return opErr(op, o.name, fmt.Errorf("%w: %w", ErrAsyncBacklog, err))
	case err != nil:
		return opErr(op, o.name, err)
	}
	return nil
}

// AsyncCompletion is one asynchronous command's result.
type AsyncCompletion struct {
	WrID uint64
	// Out is the output mailbox, within the buffer given to Next.
	Out []byte
	// Err is the firmware's failure, if its status is not OK.
	Err error
}

// Next waits for a completion (mlx5dv_devx_get_async_cmd_comp) until ctx is
// done. buf must hold the 8-byte header and the largest output mailbox
// outstanding.
// When ctx is done, the error wraps ctx's.
func (q *AsyncCmdQueue) Next(ctx context.Context, buf []byte) (AsyncCompletion, error) {
	const op = "devx async cmd completion"
	if err := q.usable(op); err != nil {
		return AsyncCompletion{}, err
	}
	if q.isClosed() {
		return AsyncCompletion{}, opErr(op, q.name, ErrClosed)
	}
	if ctx == nil {
		return AsyncCompletion{}, invalid(op, q.name, "nil context.Context")
	}
	n, err := q.fd.Next(ctx, buf)
	if err != nil {
		return AsyncCompletion{}, opErr(op, q.name, err)
	}
	if n < 8+16 {
		return AsyncCompletion{}, opErr(op, q.name, fmt.Errorf("a completion of %d bytes, less than its 8-byte header and 16-byte status", n))
	}
	out := buf[8:n]
	return AsyncCompletion{WrID: binary.NativeEndian.Uint64(buf), Out: out,
		Err: checkOutput("devx obj query async", q.name, nil, out, nil)}, nil
}

// UMem is user memory registered for DEVX objects (mlx5dv_devx_umem).
type UMem struct {
	c      *Context
	handle seam.Handle
	id     uint32 // ID
	child  bool
	// hold keeps the memory for the device until the UMEM is closed.
	hold   *memHold
	mu     sync.Mutex
	closed bool
}

// usable fails for a nil UMem and one not made by RegUMem.
func (u *UMem) usable(op string) error {
	if u == nil || u.c == nil {
		return unusable(op, "UMem", "Context.RegUMem", u == nil)
	}
	return nil
}

// RegUMem registers mem with the access rights (local write, remote
// write, remote read) for DEVX objects (mlx5dv_devx_umem_reg). As with
// PD.RegMR, mem may be all or part of a Buffer (or of adjacent Buffers),
// which the UMEM keeps mapped until it is closed; memory the program
// mapped itself; or Go memory, which the UMEM pins until it is closed.
// Queues and doorbell records belong in a Buffer. It is RegUMemWith with
// only the access rights.
func (c *Context) RegUMem(mem []byte, access AccessFlags) (*UMem, error) {
	return c.RegUMemWith(mem, UMemOptions{Access: access})
}

// regUMem is RegUMem for memory another object owns.
func (c *Context) regUMem(mem []byte, access uint32) (*UMem, error) {
	return c.regUMemEx(seam.UMemRegEx{Mem: mem, Dmabuf: -1, Access: access})
}

// ID is the umem id PRM commands refer to (umem_id); 0 for a nil UMem.
func (u *UMem) ID() uint32 {
	if u == nil {
		return 0
	}
	return u.id
}

// Close deregisters the memory (mlx5dv_devx_umem_dereg) and lets go of
// it, as MR.Close does. While a DEVX object uses the UMEM the firmware
// refuses (DESTROY_UMEM: EINVAL from BAD_RES_STATE, see docs/MLX5.md),
// and the UMEM stays registered and usable. Closing twice is safe.
func (u *UMem) Close() error {
	if err := u.usable("devx umem dereg"); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil
	}
	if !u.c.closedNow() {
		if err := u.c.dev.UMemDereg(u.handle); err != nil {
			return opErr("devx umem dereg", fmt.Sprintf("UMEM %#x", u.id), err)
		}
	}
	u.closed = true
	u.hold.release()
	if u.child {
		u.c.forget(u)
	}
	return nil
}

// UAR is a mapped UAR page (mlx5dv_devx_uar).
type UAR struct {
	c *Context
	u seam.UAR
	// The page's index and its mapping (PageID, Page); page is nil once
	// closed.
	pageID  uint32
	page    []byte
	child   bool
	cleanup runtime.Cleanup
	mu      sync.Mutex
	closed  bool
}

// usable fails for a nil UAR and one not made by AllocUAR.
func (u *UAR) usable(op string) error {
	if u == nil || u.c == nil {
		return unusable(op, "UAR", "Context.AllocUAR", u == nil)
	}
	return nil
}

// UARType is the kind of UAR page AllocUAR maps.
type UARType uint32

// UAR types (enum mlx5_ib_uapi_uar_alloc_type).
const (
	// UARBlueFlame is a write-combining page with BlueFlame registers,
	// for send queue doorbells.
	UARBlueFlame UARType = 0 // MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF
	// UARNonCached is a non-cached page, for CQ doorbells.
	UARNonCached UARType = 1 // MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC
)

// AllocUAR allocates and maps a UAR page (mlx5dv_devx_alloc_uar). Close
// releases it; so does a cleanup once the UAR is unreachable, as a safety
// net.
func (c *Context) AllocUAR(typ UARType) (*UAR, error) {
	u, err := c.allocUAR(typ)
	if err != nil {
		return nil, err
	}
	// The context holds it weakly, so that the cleanup can run.
	if err := c.adopt(weakUAR{weak.Make(u)}); err != nil {
		u.Close()
		return nil, opErr("uar alloc", c.name, err)
	}
	u.child = true
	u.cleanup = runtime.AddCleanup(u, func(r uarRelease) { r.release() }, uarRelease{c.dev, u.u.Handle, u.page, c, weakUAR{weak.Make(u)}})
	return u, nil
}

// weakUAR is a UAR as a child of its context: closed by the context's
// Close if it is still reachable.
type weakUAR struct{ p weak.Pointer[UAR] }

func (w weakUAR) Close() error {
	if u := w.p.Value(); u != nil {
		return u.Close()
	}
	return nil
}

// allocUAR is AllocUAR for a page another object owns (a DEVX CQ's or
// QP's).
func (c *Context) allocUAR(typ UARType) (*UAR, error) {
	if err := c.check("uar alloc", ""); err != nil {
		return nil, err
	}
	return c.newUAR(typ)
}

// newUAR allocates and maps a UAR page. It needs no DEVX: UAR_OBJ_ALLOC
// is mlx5_ib's own method, with which libmlx5 takes the pages of its verbs
// QPs and CQs on any context (mlx5_alloc_dyn_uar, from
// mlx5_set_singleton_nc_uar and mlx5_get_qp_uar), so the verbs objects'
// pages (verbs.go) come from here.
func (c *Context) newUAR(typ UARType) (*UAR, error) {
	const op = "uar alloc"
	if err := c.checkOpen(op); err != nil {
		return nil, err
	}
	if typ != UARBlueFlame && typ != UARNonCached {
		return nil, invalid(op, c.name, "type %d is neither BlueFlame (0) nor non-cached (1)", typ)
	}
	u, err := c.dev.UARAlloc(uint32(typ))
	if err != nil {
		return nil, opErr(op, c.name, err)
	}
	page, err := c.dev.MapUAR(u)
	if err != nil {
		c.dev.UARFree(u.Handle)
		return nil, opErr(op, c.name, err)
	}
	return &UAR{c: c, u: u, pageID: u.PageID, page: page}, nil
}

// uarRelease is what the cleanup of an unreachable UAR needs.
type uarRelease struct {
	dev  seam.Device
	h    seam.Handle
	page []byte
	c    *Context
	w    weakUAR
}

func (r uarRelease) release() {
	r.dev.UnmapUAR(r.page)
	if !r.c.closedNow() {
		r.dev.UARFree(r.h)
	}
	r.c.forget(r.w)
}

// PageID is the UAR page's index, as PRM commands name it (uar_page); 0
// for a nil UAR.
func (u *UAR) PageID() uint32 {
	if u == nil {
		return 0
	}
	return u.pageID
}

// Page is the mapped page: doorbells and BlueFlame writes go here. Keep
// the UAR reachable while the page is in use: an unreachable UAR is
// unmapped and freed by a cleanup. Nil for a nil or closed UAR: a page
// taken before Close must not be used after it.
func (u *UAR) Page() []byte {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.page
}

// Close unmaps and frees the page. Closing twice is safe.
func (u *UAR) Close() error {
	if err := u.usable("uar free"); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil
	}
	u.closed = true
	u.cleanup.Stop()
	if u.child {
		u.c.forget(weakUAR{weak.Make(u)})
	}
	err := u.c.dev.UnmapUAR(u.page)
	u.page = nil
	if !u.c.closedNow() {
		if ferr := u.c.dev.UARFree(u.u.Handle); ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		return opErr("uar free", fmt.Sprintf("UAR page %d", u.pageID), err)
	}
	return nil
}

// QueryEQN returns the EQ number of a completion vector
// (mlx5dv_devx_query_eqn).
func (c *Context) QueryEQN(vector uint32) (uint32, error) {
	const op = "devx query eqn"
	if err := c.check(op, ""); err != nil {
		return 0, err
	}
	eqn, err := c.dev.QueryEQN(vector)
	if err != nil {
		return 0, opErr(op, c.name, err)
	}
	return eqn, nil
}

// DEVX commands on verbs objects (mlx5dv_devx_qp_query and its kin): the
// kernel runs a QUERY or MODIFY command that names the object's number on
// it, for what the verbs do not reach. A DEVX QP or CQ takes them too.

// devxHandle is the kernel handle DEVX commands on the object go to.
func devxHandle(obj *DevxObj, h seam.Handle) seam.Handle {
	if obj != nil {
		return obj.handle
	}
	return h
}

// DevxQuery runs a query command on the QP (mlx5dv_devx_qp_query), e.g.
// QUERY_QP.
func (qp *QP) DevxQuery(in, out []byte) error {
	const op = "devx qp query"
	if err := qp.usable(op); err != nil {
		return err
	}
	if qp.g.closed() {
		return opErr(op, qp.name, ErrClosed)
	}
	return qp.c.queryObj(op, qp.name, devxHandle(qp.obj, qp.handle), in, out)
}

// DevxModify runs a modify command on the QP (mlx5dv_devx_qp_modify).
// The QP's state as mlx5go knows it does not follow: use Modify for
// transitions.
func (qp *QP) DevxModify(in, out []byte) error {
	const op = "devx qp modify"
	if err := qp.usable(op); err != nil {
		return err
	}
	if qp.g.closed() {
		return opErr(op, qp.name, ErrClosed)
	}
	return qp.c.modifyObj(op, qp.name, devxHandle(qp.obj, qp.handle), in, out)
}

// DevxQuery runs a query command on the CQ (mlx5dv_devx_cq_query), e.g.
// QUERY_CQ.
func (cq *CQ) DevxQuery(in, out []byte) error {
	const op = "devx cq query"
	if err := cq.usable(op); err != nil {
		return err
	}
	if cq.g.closed() {
		return opErr(op, cq.name, ErrClosed)
	}
	return cq.c.queryObj(op, cq.name, devxHandle(cq.obj, cq.handle), in, out)
}

// DevxModify runs a modify command on the CQ (mlx5dv_devx_cq_modify), e.g.
// MODIFY_CQ for moderation.
func (cq *CQ) DevxModify(in, out []byte) error {
	const op = "devx cq modify"
	if err := cq.usable(op); err != nil {
		return err
	}
	if cq.g.closed() {
		return opErr(op, cq.name, ErrClosed)
	}
	return cq.c.modifyObj(op, cq.name, devxHandle(cq.obj, cq.handle), in, out)
}

// DevxQuery runs a query command on the SRQ (mlx5dv_devx_srq_query), e.g.
// QUERY_SRQ.
func (s *SRQ) DevxQuery(in, out []byte) error {
	const op = "devx srq query"
	if err := s.usable(op); err != nil {
		return err
	}
	if s.g.closed() {
		return opErr(op, s.name, ErrClosed)
	}
	return s.c.queryObj(op, s.name, s.handle, in, out)
}

// DevxModify runs a modify command on the SRQ (mlx5dv_devx_srq_modify).
func (s *SRQ) DevxModify(in, out []byte) error {
	const op = "devx srq modify"
	if err := s.usable(op); err != nil {
		return err
	}
	if s.g.closed() {
		return opErr(op, s.name, ErrClosed)
	}
	return s.c.modifyObj(op, s.name, s.handle, in, out)
}
