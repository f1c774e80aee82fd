package uverbs

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// RegDmabufMR registers length bytes of the dma-buf fd, from offset in
// it, for the device with the given access rights (ibv_reg_dmabuf_mr,
// UVERBS_METHOD_REG_DMABUF_MR). iova is the address the device uses for
// the dma-buf's byte at offset. The kernel holds its own reference to
// the dma-buf: the caller may close fd once the MR is made. The MR's
// Addr is 0 (it maps no memory of the process) and its Length is
// length.
//
// A device without dma-buf support (its ib_device_ops has no
// reg_user_mr_dmabuf) does not offer the method, and a file that is no
// dma-buf is the kernel's to refuse; the error wraps the kernel's errno.
func (p *PD) RegDmabufMR(offset, length, iova uint64, fd int, access AccessFlags) (*MR, error) {
	const op = "reg dmabuf mr"
	switch {
	case length == 0:
		return nil, fmt.Errorf("uverbs: %s: empty region", op)
	case fd < 0 || fd > math.MaxInt32:
		return nil, fmt.Errorf("uverbs: %s: fd %d", op, fd)
	case offset+length < offset:
		return nil, fmt.Errorf("uverbs: %s: offset %#x + length %#x overflows", op, offset, length)
	case iova+length < iova:
		return nil, fmt.Errorf("uverbs: %s: iova %#x + length %#x overflows", op, iova, length)
	}
	if err := access.check(); err != nil {
		return nil, fmt.Errorf("uverbs: %s: %w", op, err)
	}
	// libibverbs' order: the new handle and the outputs, then the inputs.
	var lkey, rkey [4]byte
	var a Attrs
	h := a.NewIDR(uverbsabi.UVERBS_ATTR_REG_DMABUF_MR_HANDLE)
	a.Out(uverbsabi.UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, lkey[:])
	a.Out(uverbsabi.UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, rkey[:])
	a.IDR(uverbsabi.UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, p.handle)
	a.InUint64(uverbsabi.UVERBS_ATTR_REG_DMABUF_MR_OFFSET, offset)
	a.InUint64(uverbsabi.UVERBS_ATTR_REG_DMABUF_MR_LENGTH, length)
	a.InUint64(uverbsabi.UVERBS_ATTR_REG_DMABUF_MR_IOVA, iova)
	a.InUint32(uverbsabi.UVERBS_ATTR_REG_DMABUF_MR_FD, uint32(fd))
	a.InUint32(uverbsabi.UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, uint32(access))
	if err := p.ctx.Invoke(op, uverbsabi.UVERBS_OBJECT_MR, uverbsabi.UVERBS_METHOD_REG_DMABUF_MR, &a); err != nil {
		return nil, err
	}
	m := &MR{object: object{ctx: p.ctx, handle: uint32(a.Handle(h))}, LKey: binary.NativeEndian.Uint32(lkey[:]), RKey: binary.NativeEndian.Uint32(rkey[:]), Length: length}
	if err := p.ctx.adopt(m); err != nil {
		return nil, err
	}
	return m, nil
}
