package mlx5

import (
	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/wqe"
)

// eceVersion1 is the ECE options libmlx5 creates a QP with when the
// kernel negotiates ECE: version 1, as a trigger.
const eceVersion1 = 0x10000000

// createVerbs creates the QP through the kernel (UVERBS_METHOD_QP_CREATE
// with struct mlx5_ib_create_qp), as libmlx5's create_qp and create_dct
// do: the work queue (receive queue first) and the doorbell record at
// their addresses, a BlueFlame register of its own on a dynamic UAR page,
// a user index for its CQEs, ECE version 1. One difference: no
// MLX5_QP_FLAG_SCATTER_CQE, which libmlx5 sets unless told otherwise.
// With it the device may put a small received message in the CQE itself
// and leave the poller to copy it to the receive buffer's address; through
// an mkey that address is not one, so mlx5go keeps data in the buffers.
func (qp *QP) createVerbs(o *QPOptions, sq sqGeometry, rq rqGeometry) error {
	c := qp.c
	var drv mlx5abi.Mlx5IbCreateQp
	// The caps as asked, but the inline bytes granted (mlx5_calc_sq_size
	// raises them), and 1 SGE for a send queue asked 0 (0 means 1 here).
	sendSGE := o.MaxSendSGE
	if o.MaxSendWR > 0 {
		sendSGE = max(sendSGE, 1)
	}
	q := seam.QPCreate{PD: o.PD.handle, SendCQ: o.SendCQ.handle, RecvCQ: o.RecvCQ.handle, SRQ: seam.NoHandle,
		Cap: seam.QPCap{MaxSendWR: uint32(o.MaxSendWR), MaxRecvWR: uint32(o.MaxRecvWR), MaxSendSGE: uint32(sendSGE),
			MaxRecvSGE: uint32(o.MaxRecvSGE), MaxInlineData: uint32(sq.maxInline)}}
	if o.SRQ != nil {
		q.SRQ = o.SRQ.handle
	}
	switch o.Type {
	case QPTypeRC:
		q.Type = seam.QPTypeRC
	case QPTypeUC:
		q.Type = seam.QPTypeUC
	case QPTypeUD:
		q.Type = seam.QPTypeUD
	case QPTypeDCI:
		q.Type = seam.QPTypeDriver
		drv.Flags |= mlx5abi.MLX5_QP_FLAG_TYPE_DCI
		if s := o.DCIStreams; s != nil {
			drv.Flags |= mlx5abi.MLX5_QP_FLAG_DCI_STREAM
			drv.DciStreams.LogNumConcurent, drv.DciStreams.LogNumErrored = uint8(s.LogConcurrent), uint8(s.LogErrored)
		}
	case QPTypeDCT:
		q.Type = seam.QPTypeDriver
		q.Cap = seam.QPCap{}
		drv.Flags |= mlx5abi.MLX5_QP_FLAG_TYPE_DCT
		drv.SqBufAddr = o.DCAccessKey // the union's access_key
	}
	if o.Type != QPTypeDCT {
		// A QP on an SRQ without a send queue has no work queue memory:
		// the kernel maps none for a zero buf_size (mlx5_ib's
		// _create_user_qp), and libmlx5 sends a size of 0 for it.
		var wq []byte
		if n := rq.wqeCnt<<rq.wqeShift + sq.wqeCnt*wqe.WQEBB; n > 0 {
			buf, err := allocBuffer(n)
			if err != nil {
				return err
			}
			qp.res.add(buf)
			qp.wq = buf
			wq = buf.mem
		}
		dbr, err := allocBuffer(4096)
		if err != nil {
			return err
		}
		qp.res.add(dbr)
		qp.rings(wq, sq, rq)
		if qp.bf, err = c.getBFReg(); err != nil {
			return err
		}
		qp.hasBF = true
		drv.BufAddr, drv.DbAddr = addrOf(wq), addrOf(dbr.mem)
		drv.SqWqeCount, drv.RqWqeCount, drv.RqWqeShift = uint32(sq.wqeCnt), uint32(rq.wqeCnt), uint32(rq.wqeShift)
		drv.Flags |= mlx5abi.MLX5_QP_FLAG_UAR_PAGE_INDEX
		drv.BfregIndex = qp.bf.uar.pageID
		rec := dbr.mem[:doorbell.RecordSize]
		if qp.sq.bell, err = doorbell.NewSQ(rec, qp.bf.uar.page[qp.bf.off:], c.caps.BFRegSize/2); err != nil {
			return err
		}
		if qp.dbRQ, err = doorbell.NewRQ(rec); err != nil {
			return err
		}
	}
	drv.Uidx = 0xffffff // cqe_version 0
	if c.caps.CQEVersion > 0 {
		i, err := c.newUIdx()
		if err != nil {
			return err
		}
		qp.uidx, qp.hasIdx, drv.Uidx = i, true, i
	}
	if c.caps.ECE {
		drv.EceOptions = eceVersion1
	}
	qp.user = c.newHandle(qp)
	q.UserHandle = qp.user
	var resp mlx5abi.Mlx5IbCreateQpResp
	h, made, err := c.dev.CreateQP(q, bytesOf(&drv), bytesOf(&resp))
	if err != nil {
		return err
	}
	qp.handle, qp.made, qp.qpn = h, true, made.QPN
	return nil
}
