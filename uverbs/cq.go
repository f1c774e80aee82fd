package uverbs

import (
	"fmt"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// CQOptions describe a completion queue to create.
type CQOptions struct {
	// CQE is the number of entries the provider asked for (libmlx5 sends
	// its rounded size minus one).
	CQE uint32
	// CompVector selects the completion vector, below
	// Context.NumCompVectors.
	CompVector uint32
	// Channel, if set, receives the CQ's completion events.
	Channel *CompChannel
	// Flags are enum ib_uverbs_ex_create_cq_flags.
	Flags uint32
	// DriverIn and DriverOut are the provider's data (mlx5: struct
	// mlx5_ib_create_cq and mlx5_ib_create_cq_resp).
	DriverIn, DriverOut []byte
	// UserHandle, if set, is the user handle the kernel gets: completion
	// and async events name the CQ by it. Nil lets the context number
	// its objects itself.
	UserHandle *uint64
}

// CQ is a completion queue.
type CQ struct {
	object
	userHandle uint64
	// CQE is the size the kernel granted.
	CQE uint32
	// Channel is the completion channel, if any.
	Channel *CompChannel
}

// CreateCQ creates a completion queue.
func (c *Context) CreateCQ(o CQOptions) (*CQ, error) {
	if o.CQE == 0 {
		return nil, fmt.Errorf("uverbs: create cq: CQE must be at least 1")
	}
	if o.CompVector >= c.NumCompVectors && c.NumCompVectors > 0 {
		return nil, fmt.Errorf("uverbs: create cq: completion vector %d, the device has %d", o.CompVector, c.NumCompVectors)
	}
	if o.Channel != nil && o.Channel.ctx != c {
		return nil, fmt.Errorf("uverbs: create cq: completion channel of another context")
	}
	cq := &CQ{object: object{ctx: c}, userHandle: c.userHandleOf(o.UserHandle), Channel: o.Channel}
	err := c.ioctlOrWrite(func() error {
		var a Attrs
		h := a.NewIDR(uverbsabi.UVERBS_ATTR_CREATE_CQ_HANDLE)
		var cqe [4]byte
		a.Out(uverbsabi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, cqe[:])
		a.InUint32(uverbsabi.UVERBS_ATTR_CREATE_CQ_CQE, o.CQE)
		a.InUint64(uverbsabi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, cq.userHandle)
		if o.Channel != nil {
			a.FD(uverbsabi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, o.Channel.Fd())
		}
		a.InUint32(uverbsabi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, o.CompVector)
		a.FD(uverbsabi.UVERBS_ATTR_CREATE_CQ_EVENT_FD, c.async.Fd())
		a.Optional()
		if o.Flags != 0 {
			// A mandatory u32 after the event fd, as libibverbs'
			// ibv_cmd_create_cq_ex sends it (the kernel takes a u32 or a
			// u64 flags attribute).
			a.InUint32(uverbsabi.UVERBS_ATTR_CREATE_CQ_FLAGS, o.Flags)
		}
		if len(o.DriverIn) > 0 {
			a.In(uverbsabi.UVERBS_ATTR_UHW_IN, o.DriverIn)
		}
		if len(o.DriverOut) > 0 {
			a.Out(uverbsabi.UVERBS_ATTR_UHW_OUT, o.DriverOut)
		}
		if err := c.Invoke("create cq", uverbsabi.UVERBS_OBJECT_CQ, uverbsabi.UVERBS_METHOD_CQ_CREATE, &a); err != nil {
			return err
		}
		cq.handle = uint32(a.Handle(h))
		cq.CQE = le32(cqe[:])
		return nil
	}, func() error {
		if o.Flags != 0 {
			return fmt.Errorf("uverbs: create cq: flags need the ioctl path")
		}
		cmd := uverbsabi.IbUverbsCreateCq{UserHandle: cq.userHandle, Cqe: o.CQE, CompVector: o.CompVector, CompChannel: -1}
		if o.Channel != nil {
			cmd.CompChannel = int32(o.Channel.Fd())
		}
		var resp uverbsabi.IbUverbsCreateCqResp
		if err := c.write("create cq", uverbsabi.IB_USER_VERBS_CMD_CREATE_CQ, asBytes(&cmd), asBytes(&resp), o.DriverIn, o.DriverOut); err != nil {
			return err
		}
		cq.handle, cq.CQE = resp.CqHandle, resp.Cqe
		return nil
	})
	if err != nil {
		return nil, c.noteDriverOut(err, outCQ, "CQOptions.DriverOut", len(o.DriverOut))
	}
	if err := c.adopt(cq); err != nil {
		return nil, err
	}
	c.register(cq.userHandle, cq)
	return cq, nil
}

// UserHandle is the user handle the kernel got for the CQ: the element of
// its completion and async events.
func (cq *CQ) UserHandle() uint64 { return cq.userHandle }

// ReqNotify arms the CQ through the kernel: its next completion (the next
// solicited one if solicitedOnly) raises an event on its channel. Providers
// with doorbell arming (mlx5) do not use it.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	cmd := uverbsabi.IbUverbsReqNotifyCq{CqHandle: cq.handle}
	if solicitedOnly {
		cmd.SolicitedOnly = 1
	}
	return cq.ctx.InvokeWrite("req notify cq", uverbsabi.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, asBytes(&cmd), nil, nil, nil)
}

// Close destroys the CQ. The kernel refuses (EBUSY) while QPs or SRQs use
// it. Closing twice is safe.
func (cq *CQ) Close() error {
	var resp uverbsabi.IbUverbsDestroyCqResp
	cmd := uverbsabi.IbUverbsDestroyCq{CqHandle: cq.handle}
	return cq.destroy(cq, destroyCall{op: "destroy cq", object: uverbsabi.UVERBS_OBJECT_CQ, method: uverbsabi.UVERBS_METHOD_CQ_DESTROY,
		handleAttr: uverbsabi.UVERBS_ATTR_DESTROY_CQ_HANDLE, respAttr: uverbsabi.UVERBS_ATTR_DESTROY_CQ_RESP, resp: asBytes(&resp),
		writeCmd: uverbsabi.IB_USER_VERBS_CMD_DESTROY_CQ, cmd: asBytes(&cmd), userHandle: &cq.userHandle})
}

// Resize asks the kernel for a CQ of cqe entries (IB_USER_VERBS_CMD_RESIZE_CQ,
// as libibverbs' ibv_cmd_resize_cq sends it) and returns the entries it
// granted, which also become cq.CQE. driverIn and driverOut are the
// provider's data (mlx5: struct mlx5_ib_resize_cq, the new ring, and no
// response; rxe: none in, and struct rxe_resize_cq_resp, where to map the
// new queue); the provider copies the CQEs still unread from the old ring
// to the new one itself.
func (cq *CQ) Resize(cqe uint32, driverIn, driverOut []byte) (uint32, error) {
	if cqe == 0 {
		return 0, fmt.Errorf("uverbs: resize cq: CQE must be at least 1")
	}
	cmd := uverbsabi.IbUverbsResizeCq{CqHandle: cq.handle, Cqe: cqe}
	var resp uverbsabi.IbUverbsResizeCqResp
	if err := cq.ctx.InvokeWrite("resize cq", uverbsabi.IB_USER_VERBS_CMD_RESIZE_CQ, asBytes(&cmd), asBytes(&resp), driverIn, driverOut); err != nil {
		return 0, err
	}
	cq.CQE = resp.Cqe
	return resp.Cqe, nil
}

// Moderate sets the CQ's completion moderation
// (IB_USER_VERBS_EX_CMD_MODIFY_CQ with IB_CQ_MODERATE, as libibverbs'
// ibv_cmd_modify_cq sends it): an event waits for count completions or
// period microseconds, whichever comes first. The device's limits are
// DeviceAttr.CQModerationCaps; the kernel refuses more (EINVAL), and a
// device without moderation refuses the command (EOPNOTSUPP).
func (cq *CQ) Moderate(count, period uint16) error {
	cmd := uverbsabi.IbUverbsExModifyCq{CqHandle: cq.handle, AttrMask: uverbsabi.IB_CQ_MODERATE,
		Attr: uverbsabi.IbUverbsCqModeration{CqCount: count, CqPeriod: period}}
	return cq.ctx.InvokeWrite("modify cq", uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbsabi.IB_USER_VERBS_EX_CMD_MODIFY_CQ,
		asBytes(&cmd), nil, nil, nil)
}
