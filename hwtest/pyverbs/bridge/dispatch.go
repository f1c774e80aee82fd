package main

import (
	"encoding/binary"
	"fmt"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	u "github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

// coreSupportOptionalMRAccess is IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS
// (<rdma/ib_user_ioctl_verbs.h>): what ib_uverbs answers GET_CONTEXT's
// CORE_SUPPORT with.
const coreSupportOptionalMRAccess = 1 << 0

// UVERBS_METHOD_QUERY_CONTEXT's attributes (enum
// uverbs_attrs_query_context_cmd_attr_ids, and mlx5's
// MLX5_IB_ATTR_QUERY_CONTEXT_RESP_UCTX in the driver namespace), which
// internal/uverbsabi does not mirror yet.
const (
	attrQueryContextNumCompVectors = 0
	attrQueryContextCoreSupport    = 1
	attrQueryContextRespUctx       = 1 << u.UVERBS_ID_NS_SHIFT
)

// dispatch runs one method as ib_uverbs and mlx5_ib would.
func (x *context) dispatch(c *call) error {
	h := c.hdr
	d := x.d
	switch h.ObjectID {
	case u.UVERBS_OBJECT_DEVICE:
		switch h.MethodID {
		case u.UVERBS_METHOD_INVOKE_WRITE:
			return x.invokeWrite(c)
		case u.UVERBS_METHOD_GET_CONTEXT:
			c.outU32(u.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, compVectors(d))
			c.outU64(u.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, coreSupportOptionalMRAccess)
			c.out(u.UVERBS_ATTR_UHW_OUT, d.DriverContext())
			return nil
		case u.UVERBS_METHOD_QUERY_CONTEXT:
			c.outU32(attrQueryContextNumCompVectors, compVectors(d))
			c.outU64(attrQueryContextCoreSupport, coreSupportOptionalMRAccess)
			c.out(attrQueryContextRespUctx, d.DriverContext())
			return nil
		case u.UVERBS_METHOD_QUERY_PORT:
			r, err := x.queryPort(uint8(c.inU64(u.UVERBS_ATTR_QUERY_PORT_PORT_NUM, 0)))
			if err != nil {
				return err
			}
			c.outStruct(u.UVERBS_ATTR_QUERY_PORT_RESP, &r)
			return nil
		case u.UVERBS_METHOD_QUERY_GID_TABLE:
			return x.queryGIDTable(c)
		case u.UVERBS_METHOD_QUERY_GID_ENTRY:
			return x.queryGIDEntry(c)
		}
	case u.UVERBS_OBJECT_ASYNC_EVENT:
		if h.MethodID == u.UVERBS_METHOD_ASYNC_EVENT_ALLOC {
			return x.asyncEventFD(c, u.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
		}
	case u.UVERBS_OBJECT_PD:
		switch h.MethodID {
		case u.UVERBS_METHOD_PD_DESTROY:
			return withHandle(c, u.UVERBS_ATTR_DESTROY_PD_HANDLE, x.forgetObj(d.DeallocPD))
		case methodPDQuery:
			return x.queryPD(c)
		}
	case u.UVERBS_OBJECT_MR:
		switch h.MethodID {
		case u.UVERBS_METHOD_MR_DESTROY:
			return withHandle(c, u.UVERBS_ATTR_DESTROY_MR_HANDLE, x.forgetObj(d.DeregMR))
		case u.UVERBS_METHOD_QUERY_MR:
			return x.queryMR(c)
		case u.UVERBS_METHOD_ADVISE_MR:
			return x.adviseMR(c)
		}
	case u.UVERBS_OBJECT_AH:
		if h.MethodID == u.UVERBS_METHOD_AH_DESTROY {
			return withHandle(c, u.UVERBS_ATTR_DESTROY_AH_HANDLE, d.DestroyAH)
		}
	case u.UVERBS_OBJECT_CQ:
		switch h.MethodID {
		case u.UVERBS_METHOD_CQ_CREATE:
			return x.createCQ(c)
		case u.UVERBS_METHOD_CQ_DESTROY:
			if err := withHandle(c, u.UVERBS_ATTR_DESTROY_CQ_HANDLE, d.DestroyCQ); err != nil {
				return err
			}
			comp, async := x.forget(c, u.UVERBS_ATTR_DESTROY_CQ_HANDLE)
			c.outStruct(u.UVERBS_ATTR_DESTROY_CQ_RESP, &u.IbUverbsDestroyCqResp{CompEventsReported: comp, AsyncEventsReported: async})
			return nil
		}
	case u.UVERBS_OBJECT_QP:
		switch h.MethodID {
		case u.UVERBS_METHOD_QP_CREATE:
			return x.createQP(c)
		case u.UVERBS_METHOD_QP_DESTROY:
			if err := withHandle(c, u.UVERBS_ATTR_DESTROY_QP_HANDLE, d.DestroyQP); err != nil {
				return err
			}
			_, async := x.forget(c, u.UVERBS_ATTR_DESTROY_QP_HANDLE)
			c.outStruct(u.UVERBS_ATTR_DESTROY_QP_RESP, &u.IbUverbsDestroyQpResp{EventsReported: async})
			return nil
		}
	case u.UVERBS_OBJECT_SRQ:
		switch h.MethodID {
		case u.UVERBS_METHOD_SRQ_CREATE:
			return x.createSRQ(c)
		case u.UVERBS_METHOD_SRQ_DESTROY:
			if err := withHandle(c, u.UVERBS_ATTR_DESTROY_SRQ_HANDLE, d.DestroySRQ); err != nil {
				return err
			}
			_, async := x.forget(c, u.UVERBS_ATTR_DESTROY_SRQ_HANDLE)
			c.outStruct(u.UVERBS_ATTR_DESTROY_SRQ_RESP, &u.IbUverbsDestroySrqResp{EventsReported: async})
			return nil
		}
	case mlx5abi.MLX5_IB_OBJECT_UAR:
		switch h.MethodID {
		case mlx5abi.MLX5_IB_METHOD_UAR_OBJ_ALLOC:
			ua, err := d.UARAlloc(uint32(c.inU64(mlx5abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, 0)))
			if err != nil {
				return err
			}
			mu.Lock()
			x.uars[ua.MMapOffset] = ua
			mu.Unlock()
			c.setNew(mlx5abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, uint64(ua.Handle))
			c.outU64(mlx5abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, ua.MMapOffset)
			c.outU32(mlx5abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, ua.MMapLength)
			c.outU32(mlx5abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, ua.PageID)
			return nil
		case mlx5abi.MLX5_IB_METHOD_UAR_OBJ_DESTROY:
			return withHandle(c, mlx5abi.MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, d.UARFree)
		}
	case mlx5abi.MLX5_IB_OBJECT_DEVX:
		switch h.MethodID {
		case mlx5abi.MLX5_IB_METHOD_DEVX_OTHER:
			return d.GeneralCmd(c.in(mlx5abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_IN), c.outMailbox(mlx5abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT))
		case mlx5abi.MLX5_IB_METHOD_DEVX_QUERY_EQN:
			eqn, err := d.QueryEQN(uint32(c.inU64(mlx5abi.MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC, 0)))
			if err != nil {
				return err
			}
			c.outU32(mlx5abi.MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN, eqn)
			return nil
		case mlx5abi.MLX5_IB_METHOD_DEVX_QUERY_UAR:
			// dynamic UARs: the user index is the page id (mlx5_ib's
			// bfregn_to_uar_index for a context without static bfregs
			// refuses; libmlx5 asks only with static ones).
			return unix.EINVAL
		}
	case mlx5abi.MLX5_IB_OBJECT_DEVX_OBJ:
		switch h.MethodID {
		case mlx5abi.MLX5_IB_METHOD_DEVX_OBJ_CREATE:
			hd, err := d.ObjCreate(c.in(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN), c.outMailbox(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT))
			if err != nil {
				return err
			}
			c.setNew(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE, uint64(hd))
			return nil
		case mlx5abi.MLX5_IB_METHOD_DEVX_OBJ_DESTROY:
			return withHandle(c, mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE, d.ObjDestroy)
		case mlx5abi.MLX5_IB_METHOD_DEVX_OBJ_MODIFY:
			hd, ok := c.idr(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE)
			if !ok {
				return errMissing
			}
			return d.ObjModify(seam.Handle(hd), c.in(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN), c.outMailbox(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT))
		case mlx5abi.MLX5_IB_METHOD_DEVX_OBJ_QUERY:
			hd, ok := c.idr(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE)
			if !ok {
				return errMissing
			}
			return d.ObjQuery(seam.Handle(hd), c.in(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN), c.outMailbox(mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT))
		case mlx5abi.MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY:
			return x.asyncQuery(c)
		}
	case mlx5abi.MLX5_IB_OBJECT_DEVX_UMEM:
		switch h.MethodID {
		case mlx5abi.MLX5_IB_METHOD_DEVX_UMEM_REG:
			addr := c.inU64(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR, 0)
			n := c.inU64(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_LEN, 0)
			if n == 0 || n > 1<<40 {
				return unix.EINVAL
			}
			if err := x.mirror(addr, n); err != nil {
				return err
			}
			hd, id, err := d.UMemReg(userBytes(addr, int(n)), uint32(c.inU64(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS, 0)))
			if err != nil {
				return err
			}
			c.setNew(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE, uint64(hd))
			c.outU32(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID, id)
			return nil
		case mlx5abi.MLX5_IB_METHOD_DEVX_UMEM_DEREG:
			return withHandle(c, mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE, d.UMemDereg)
		}
	case mlx5abi.MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD:
		if h.MethodID == mlx5abi.MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC {
			return x.asyncCmdFD(c, mlx5abi.MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE)
		}
	}
	// An unknown method: ib_uverbs answers EPROTONOSUPPORT, and
	// libibverbs falls back where it has a fallback.
	return fmt.Errorf("not bridged: %w", unix.EPROTONOSUPPORT)
}

// outMailbox is a DEVX command's output mailbox; the model writes the
// firmware's answer (status, syndrome) into it and the attribute is valid
// whatever the status, as mlx5_ib copies it back.
func (c *call) outMailbox(id uint16) []byte {
	b := c.outBuf(id)
	if a := c.attr(id); a != nil {
		clear(b)
		a.Flags |= u.UVERBS_ATTR_F_VALID_OUTPUT
	}
	return b
}

// withHandle runs a destroy on the handle an IDR attribute names.
func withHandle(c *call, id uint16, f func(seam.Handle) error) error {
	h, ok := c.idr(id)
	if !ok {
		return errMissing
	}
	return f(seam.Handle(h))
}

// compVectors counts the completion vectors the model has EQs for.
func compVectors(d seam.Device) uint32 {
	n := uint32(0)
	for n < 256 {
		if _, err := d.QueryEQN(n); err != nil {
			break
		}
		n++
	}
	return n
}

func (x *context) queryPort(port uint8) (u.IbUverbsQueryPortRespEx, error) {
	p, err := x.d.QueryPort(port)
	if err != nil {
		return u.IbUverbsQueryPortRespEx{}, err
	}
	var r u.IbUverbsQueryPortRespEx
	l := &r.LegacyResp
	l.State = p.State
	l.MaxMtu = p.MaxMTU
	l.ActiveMtu = p.ActiveMTU
	l.GidTblLen = p.GIDTableLen
	l.PortCapFlags = p.PortCapFlags
	l.MaxMsgSz = p.MaxMsgSz
	l.Lid = p.LID
	l.SmLid = p.SMLID
	l.Lmc = p.LMC
	l.LinkLayer = p.LinkLayer
	l.Flags = p.Flags
	l.PkeyTblLen = 1
	if p.State == 4 {
		l.PhysState = 5 // LinkUp
	} else {
		l.PhysState = 3 // Disabled
	}
	l.ActiveWidth = 2  // 4X
	l.ActiveSpeed = 32 // EDR (25 Gb/s per lane)
	l.MaxVlNum = 4
	return r, nil
}

func gidEntry(g seam.GIDEntry) u.IbUverbsGidEntry {
	var e u.IbUverbsGidEntry
	var raw [16]byte
	copy(raw[:], g.GID[:])
	e.Gid[0] = leU64(raw[:8])
	e.Gid[1] = leU64(raw[8:])
	e.GidIndex = g.Index
	e.PortNum = g.Port
	e.GidType = g.Type
	return e
}

// leU64 reads 8 bytes as the host's u64 that holds them in memory order.
func leU64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func (x *context) queryGIDTable(c *call) error {
	gids, err := x.d.QueryGIDTable()
	if err != nil {
		return err
	}
	size := int(c.inU64(u.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, 0))
	buf := c.outBuf(u.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES)
	if size <= 0 {
		return unix.EINVAL
	}
	// rdma_query_gid_table refuses a buffer too small for every entry.
	if len(gids)*size > len(buf) {
		return unix.EINVAL
	}
	var out []byte
	n := 0
	for _, g := range gids {
		e := make([]byte, size)
		copy(e, encode(gidEntry(g)))
		out = append(out, e...)
		n++
	}
	c.out(u.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, out)
	c.outU64(u.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, uint64(n))
	return nil
}

func (x *context) queryGIDEntry(c *call) error {
	gids, err := x.d.QueryGIDTable()
	if err != nil {
		return err
	}
	port := uint32(c.inU64(u.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, 0))
	idx := uint32(c.inU64(u.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, 0))
	for _, g := range gids {
		if g.Port == port && g.Index == idx {
			c.outStruct(u.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, gidEntry(g))
			return nil
		}
	}
	// rdma_get_gid_attr of an empty entry.
	return unix.ENODATA
}

func (x *context) createCQ(c *call) error {
	cc := seam.CQCreate{
		CQE:        uint32(c.inU64(u.UVERBS_ATTR_CREATE_CQ_CQE, 0)),
		CompVector: uint32(c.inU64(u.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 0)),
		UserHandle: c.inU64(u.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, 0),
		Flags:      uint32(c.inU64(u.UVERBS_ATTR_CREATE_CQ_FLAGS, 0)),
	}
	if fd, ok := c.idr(u.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL); ok && int64(fd) >= 0 {
		mu.Lock()
		ch := x.comps[int(fd)]
		mu.Unlock()
		if ch == nil {
			return unix.EINVAL
		}
		cc.Channel = ch
	}
	var drv mlx5abi.Mlx5IbCreateCq
	decode(c.in(u.UVERBS_ATTR_UHW_IN), &drv)
	if err := x.mirrorCQ(uint64(cc.CQE), drv.BufAddr, drv.DbAddr, drv.CqeSize); err != nil {
		return err
	}
	h, cqe, err := x.d.CreateCQ(cc, c.in(u.UVERBS_ATTR_UHW_IN), c.outMailbox(u.UVERBS_ATTR_UHW_OUT))
	if err != nil {
		return err
	}
	x.remember(h, cc.UserHandle)
	c.setNew(u.UVERBS_ATTR_CREATE_CQ_HANDLE, uint64(h))
	c.outU32(u.UVERBS_ATTR_CREATE_CQ_RESP_CQE, cqe)
	return nil
}

func optHandle(c *call, id uint16) seam.Handle {
	if h, ok := c.idr(id); ok {
		return seam.Handle(h)
	}
	return seam.NoHandle
}

func (x *context) createQP(c *call) error {
	var cp u.IbUverbsQpCap
	decode(c.in(u.UVERBS_ATTR_CREATE_QP_CAP), &cp)
	q := seam.QPCreate{
		Type:       uint8(c.inU64(u.UVERBS_ATTR_CREATE_QP_TYPE, 0)),
		PD:         optHandle(c, u.UVERBS_ATTR_CREATE_QP_PD_HANDLE),
		SendCQ:     optHandle(c, u.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE),
		RecvCQ:     optHandle(c, u.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE),
		SRQ:        optHandle(c, u.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE),
		Cap:        seam.QPCap{MaxSendWR: cp.MaxSendWr, MaxRecvWR: cp.MaxRecvWr, MaxSendSGE: cp.MaxSendSge, MaxRecvSGE: cp.MaxRecvSge, MaxInlineData: cp.MaxInlineData},
		UserHandle: c.inU64(u.UVERBS_ATTR_CREATE_QP_USER_HANDLE, 0),
	}
	flags := uint32(c.inU64(u.UVERBS_ATTR_CREATE_QP_FLAGS, 0))
	// IB_UVERBS_QP_CREATE_SQ_SIG_ALL is the generic flag ib_uverbs turns
	// into sq_sig_type.
	const sqSigAll = 1 << 12
	q.SigAll = flags&sqSigAll != 0
	q.Flags = flags &^ sqSigAll
	if c.has(u.UVERBS_ATTR_CREATE_QP_XRCD_HANDLE) || c.has(u.UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE) {
		return fmt.Errorf("XRC and RSS QPs: %w", unix.EOPNOTSUPP)
	}
	if err := x.mirrorQP(c.in(u.UVERBS_ATTR_UHW_IN)); err != nil {
		return err
	}
	h, r, err := x.d.CreateQP(q, c.in(u.UVERBS_ATTR_UHW_IN), c.outMailbox(u.UVERBS_ATTR_UHW_OUT))
	if err != nil {
		return err
	}
	x.remember(h, q.UserHandle)
	c.setNew(u.UVERBS_ATTR_CREATE_QP_HANDLE, uint64(h))
	c.outStruct(u.UVERBS_ATTR_CREATE_QP_RESP_CAP, &u.IbUverbsQpCap{MaxSendWr: r.Cap.MaxSendWR, MaxRecvWr: r.Cap.MaxRecvWR,
		MaxSendSge: r.Cap.MaxSendSGE, MaxRecvSge: r.Cap.MaxRecvSGE, MaxInlineData: r.Cap.MaxInlineData})
	c.outU32(u.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, r.QPN)
	return nil
}

func (x *context) createSRQ(c *call) error {
	// IB_SRQT_BASIC only.
	if t := c.inU64(u.UVERBS_ATTR_CREATE_SRQ_TYPE, 0); t != 0 {
		return fmt.Errorf("SRQ type %d: %w", t, unix.EOPNOTSUPP)
	}
	s := seam.SRQCreate{
		PD:         optHandle(c, u.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE),
		MaxWR:      uint32(c.inU64(u.UVERBS_ATTR_CREATE_SRQ_MAX_WR, 0)),
		MaxSGE:     uint32(c.inU64(u.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, 0)),
		Limit:      uint32(c.inU64(u.UVERBS_ATTR_CREATE_SRQ_LIMIT, 0)),
		UserHandle: c.inU64(u.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, 0),
	}
	if err := x.mirrorSRQ(s.MaxWR, s.MaxSGE, c.in(u.UVERBS_ATTR_UHW_IN)); err != nil {
		return err
	}
	h, r, err := x.d.CreateSRQ(s, c.in(u.UVERBS_ATTR_UHW_IN), c.outMailbox(u.UVERBS_ATTR_UHW_OUT))
	if err != nil {
		return err
	}
	x.remember(h, s.UserHandle)
	c.setNew(u.UVERBS_ATTR_CREATE_SRQ_HANDLE, uint64(h))
	c.outU32(u.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, r.MaxWR)
	c.outU32(u.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, r.MaxSGE)
	c.outU32(u.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, r.SRQN)
	return nil
}

// mmap maps a UAR page (at the offset UAR_OBJ_ALLOC gave) or the clock
// info page (MLX5_IB_MMAP_CLOCK_INFO, version 1).
func (x *context) mmap(off, length uint64) ([]byte, bool, error) {
	const pageSize = 4096
	// MLX5_IB_MMAP_CLOCK_INFO (7) at bit 8; MLX5_IB_CLOCK_INFO_V1 is 0.
	const clockInfoOff = (7 << 8) * pageSize
	if off == clockInfoOff {
		cm, ok := any(x.d).(seam.ClockMapper)
		if !ok {
			return nil, false, unix.EOPNOTSUPP
		}
		p, err := cm.MapClockInfo()
		return p, true, err
	}
	ua, ok := x.uars[off]
	if !ok || length != uint64(ua.MMapLength) {
		return nil, false, unix.EINVAL
	}
	p, err := x.d.MapUAR(ua)
	return p, false, err
}

func (x *context) asyncQuery(c *call) error {
	const (
		attrHandle = mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE
		attrIn     = mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN
		attrFD     = mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD
		attrWRID   = mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID
		attrOutLen = mlx5abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN
	)
	h, ok := c.idr(attrHandle)
	fd, ok2 := c.idr(attrFD)
	if !ok || !ok2 {
		return errMissing
	}
	mu.Lock()
	af := x.asyncFDs[int(fd)]
	mu.Unlock()
	if af == nil {
		return unix.EINVAL
	}
	n := int(c.inU64(attrOutLen, 0))
	if n <= 0 || n > maxAsyncOut {
		return unix.EINVAL
	}
	return x.d.ObjQueryAsync(seam.Handle(h), c.in(attrIn), n, c.inU64(attrWRID, 0), af.fd)
}

func (x *context) remember(h seam.Handle, user uint64) {
	mu.Lock()
	x.users[h] = user
	mu.Unlock()
}

// forget drops a destroyed object's user handle and returns the
// completion and async events delivered for it (struct
// ib_uverbs_destroy_cq_resp's counts). Events still unread in the pipe
// stay there: unlike ib_uverbs, which drops them from its queue, the
// bridge cannot take them back.
func (x *context) forget(c *call, id uint16) (comp, async uint32) {
	h, _ := c.idr(id)
	mu.Lock()
	defer mu.Unlock()
	user, ok := x.users[seam.Handle(h)]
	if !ok {
		return 0, 0
	}
	delete(x.users, seam.Handle(h))
	comp, async = x.compEvents[user], x.asyncEvents[user]
	delete(x.compEvents, user)
	delete(x.asyncEvents, user)
	return comp, async
}

// UVERBS_METHOD_ADVISE_MR's attributes (enum uverbs_attrs_advise_mr_cmd_attr_ids).
const (
	attrAdviseMRPD     = 0
	attrAdviseMRAdvice = 1
	attrAdviseMRFlags  = 2
	attrAdviseMRSGEs   = 3
)

// adviseMR is ibv_advise_mr: the SGE list is struct ib_uverbs_sge
// {addr, length, lkey} entries of 16 bytes.
func (x *context) adviseMR(c *call) error {
	od, ok := any(x.d).(seam.ODPDevice)
	if !ok {
		return unix.EOPNOTSUPP
	}
	pd, ok := c.idr(attrAdviseMRPD)
	if !ok {
		return errMissing
	}
	b := c.in(attrAdviseMRSGEs)
	if len(b) == 0 || len(b)%16 != 0 {
		return unix.EINVAL
	}
	sges := make([]seam.AdviceSGE, 0, len(b)/16)
	for ; len(b) >= 16; b = b[16:] {
		sges = append(sges, seam.AdviceSGE{Addr: binary.NativeEndian.Uint64(b), Length: binary.NativeEndian.Uint32(b[8:]), LKey: binary.NativeEndian.Uint32(b[12:])})
	}
	return od.AdviseMR(seam.Handle(pd), uint32(c.inU64(attrAdviseMRAdvice, 0)), uint32(c.inU64(attrAdviseMRFlags, 0)), sges)
}
