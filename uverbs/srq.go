package uverbs

import (
	"fmt"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// SRQOptions describe a shared receive queue to create.
type SRQOptions struct {
	MaxWR, MaxSGE uint32
	// Limit is the low-water mark that raises SRQ_LIMIT_REACHED once
	// armed; 0 for none.
	Limit uint32
	// DriverIn and DriverOut are the provider's data (mlx5: struct
	// mlx5_ib_create_srq and mlx5_ib_create_srq_resp).
	DriverIn, DriverOut []byte
	// UserHandle, if set, is the user handle the kernel gets: async
	// events name the SRQ by it. Nil lets the context number its objects
	// itself.
	UserHandle *uint64
}

// SRQ is a shared receive queue (basic type).
type SRQ struct {
	object
	userHandle uint64
	// MaxWR, MaxSGE are what the kernel granted. SRQN is the SRQ number
	// where the kernel reports one: only the write() path does, and for
	// a basic SRQ not even there (0); the provider's driver data has it
	// (mlx5_ib_create_srq_resp.srqn).
	MaxWR, MaxSGE, SRQN uint32
}

// CreateSRQ creates a basic shared receive queue on the PD. The attributes
// go in libibverbs' order; like libibverbs, a basic SRQ asks for no SRQ
// number (the kernel writes it only for XRC SRQs).
func (p *PD) CreateSRQ(o SRQOptions) (*SRQ, error) {
	if o.MaxWR == 0 {
		return nil, fmt.Errorf("uverbs: create srq: MaxWR must be at least 1")
	}
	c := p.ctx
	s := &SRQ{object: object{ctx: c}, userHandle: c.userHandleOf(o.UserHandle)}
	err := c.ioctlOrWrite(func() error {
		var a Attrs
		var maxWR, maxSGE [4]byte
		h := a.NewIDR(uverbsabi.UVERBS_ATTR_CREATE_SRQ_HANDLE)
		a.InUint64(uverbsabi.UVERBS_ATTR_CREATE_SRQ_TYPE, uverbsabi.IB_UVERBS_SRQT_BASIC)
		a.InUint64(uverbsabi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, s.userHandle)
		a.IDR(uverbsabi.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, p.handle)
		a.InUint32(uverbsabi.UVERBS_ATTR_CREATE_SRQ_MAX_WR, o.MaxWR)
		a.InUint32(uverbsabi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, o.MaxSGE)
		a.InUint32(uverbsabi.UVERBS_ATTR_CREATE_SRQ_LIMIT, o.Limit)
		a.FD(uverbsabi.UVERBS_ATTR_CREATE_SRQ_EVENT_FD, c.async.Fd())
		a.Out(uverbsabi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, maxWR[:])
		a.Out(uverbsabi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, maxSGE[:])
		if len(o.DriverIn) > 0 {
			a.In(uverbsabi.UVERBS_ATTR_UHW_IN, o.DriverIn)
		}
		if len(o.DriverOut) > 0 {
			a.Out(uverbsabi.UVERBS_ATTR_UHW_OUT, o.DriverOut)
		}
		if err := c.Invoke("create srq", uverbsabi.UVERBS_OBJECT_SRQ, uverbsabi.UVERBS_METHOD_SRQ_CREATE, &a); err != nil {
			return err
		}
		s.handle = uint32(a.Handle(h))
		s.MaxWR, s.MaxSGE = le32(maxWR[:]), le32(maxSGE[:])
		return nil
	}, func() error {
		cmd := uverbsabi.IbUverbsCreateSrq{UserHandle: s.userHandle, PdHandle: p.handle, MaxWr: o.MaxWR, MaxSge: o.MaxSGE, SrqLimit: o.Limit}
		var resp uverbsabi.IbUverbsCreateSrqResp
		if err := c.write("create srq", uverbsabi.IB_USER_VERBS_CMD_CREATE_SRQ, asBytes(&cmd), asBytes(&resp), o.DriverIn, o.DriverOut); err != nil {
			return err
		}
		s.handle, s.MaxWR, s.MaxSGE, s.SRQN = resp.SrqHandle, resp.MaxWr, resp.MaxSge, resp.Srqn
		return nil
	})
	if err != nil {
		return nil, c.noteDriverOut(err, outSRQ, "SRQOptions.DriverOut", len(o.DriverOut))
	}
	if err := c.adopt(s); err != nil {
		return nil, err
	}
	c.register(s.userHandle, s)
	return s, nil
}

// UserHandle is the user handle the kernel got for the SRQ: the element
// of its async events.
func (s *SRQ) UserHandle() uint64 { return s.userHandle }

// SRQAttrMask selects what Modify changes (the kernel's enum
// ib_srq_attr_mask).
type SRQAttrMask uint32

// SRQ attribute mask bits.
const (
	SRQAttrMaxWR SRQAttrMask = 1 << 0 // IB_SRQ_MAX_WR: resize (few devices can)
	SRQAttrLimit SRQAttrMask = 1 << 1 // IB_SRQ_LIMIT: arm the limit event
)

// Modify changes the SRQ's size or arms its limit event
// (IB_USER_VERBS_CMD_MODIFY_SRQ, as libibverbs' ibv_cmd_modify_srq sends
// it). With SRQAttrLimit, the kernel raises SRQ_LIMIT_REACHED once fewer
// than limit receives are posted. drvIn is the provider's data (mlx5 has
// none; rxe wants struct rxe_modify_srq_cmd).
func (s *SRQ) Modify(mask SRQAttrMask, maxWR, limit uint32, drvIn []byte) error {
	if mask == 0 || mask&^(SRQAttrMaxWR|SRQAttrLimit) != 0 {
		return fmt.Errorf("uverbs: modify srq: attribute mask %#x", uint32(mask))
	}
	cmd := uverbsabi.IbUverbsModifySrq{SrqHandle: s.handle, AttrMask: uint32(mask), MaxWr: maxWR, SrqLimit: limit}
	return s.ctx.InvokeWrite("modify srq", uverbsabi.IB_USER_VERBS_CMD_MODIFY_SRQ, asBytes(&cmd), nil, drvIn, nil)
}

// Close destroys the SRQ. Closing twice is safe.
func (s *SRQ) Close() error {
	var resp uverbsabi.IbUverbsDestroySrqResp
	cmd := uverbsabi.IbUverbsDestroySrq{SrqHandle: s.handle}
	return s.destroy(s, destroyCall{op: "destroy srq", object: uverbsabi.UVERBS_OBJECT_SRQ, method: uverbsabi.UVERBS_METHOD_SRQ_DESTROY,
		handleAttr: uverbsabi.UVERBS_ATTR_DESTROY_SRQ_HANDLE, respAttr: uverbsabi.UVERBS_ATTR_DESTROY_SRQ_RESP, resp: asBytes(&resp),
		writeCmd: uverbsabi.IB_USER_VERBS_CMD_DESTROY_SRQ, cmd: asBytes(&cmd), userHandle: &s.userHandle})
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
