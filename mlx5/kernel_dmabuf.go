package mlx5

import (
	"encoding/binary"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/uverbs"
)

var _ seam.DmabufRegistrar = (*kernelDevice)(nil)

// RegDmabufMR is ibv_reg_dmabuf_mr through uverbs.
func (k *kernelDevice) RegDmabufMR(pdh seam.Handle, fd int, offset, length, iova uint64, access uint32) (seam.MR, error) {
	pd, err := k.pd("reg dmabuf mr", pdh)
	if err != nil {
		return seam.MR{}, err
	}
	return k.keepMR(pd.RegDmabufMR(offset, length, iova, fd, uverbs.AccessFlags(access)))
}

// UMemRegEx sends MLX5_IB_METHOD_DEVX_UMEM_REG as libmlx5 44.0's
// __mlx5dv_devx_umem_reg_ex does, attribute for attribute: ADDR (the
// offset, for a dma-buf), LEN, ACCESS (4 bytes), DMABUF_FD for a dma-buf,
// PGSZ_BITMAP (optional when r.PageSizes is 0: mlx5dv_devx_umem_reg's
// default), OUT_ID, then the new handle.
func (k *kernelDevice) UMemRegEx(r seam.UMemRegEx) (seam.Handle, uint32, error) {
	addr, length := r.Offset, r.Length
	if r.Dmabuf < 0 {
		addr, length = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(r.Mem)))), uint64(len(r.Mem))
	}
	var a uverbs.Attrs
	var id [4]byte
	a.InUint64(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR, addr)
	a.InUint64(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_LEN, length)
	a.InUint32(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS, r.Access)
	if r.Dmabuf >= 0 {
		a.FD(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD, r.Dmabuf)
	}
	if r.PageSizes == 0 {
		a.InUint64(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP, seam.DefaultUMemPageSizes)
		a.Optional()
	} else {
		a.InUint64(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP, r.PageSizes)
	}
	a.Out(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID, id[:])
	h := a.NewIDR(mlx5abi.MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE)
	if err := k.ctx.Invoke("devx umem reg", mlx5abi.MLX5_IB_OBJECT_DEVX_UMEM, mlx5abi.MLX5_IB_METHOD_DEVX_UMEM_REG, &a); err != nil {
		return 0, 0, err
	}
	return seam.Handle(a.Handle(h)), binary.NativeEndian.Uint32(id[:]), nil
}
