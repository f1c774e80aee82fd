package seam

// DmabufRegistrar is the part of a Device that registers memory the
// process reaches through a dma-buf file descriptor (a GPU driver's
// exported buffer, a udmabuf), and DEVX memory with a page-size bitmap.
// It is optional: package mlx5 reports ErrUnsupported for a Device
// without it.
type DmabufRegistrar interface {
	// RegDmabufMR registers length bytes of the dma-buf fd from offset
	// in the protection domain pd, which the device addresses from iova
	// (ibv_reg_dmabuf_mr, UVERBS_METHOD_REG_DMABUF_MR); access is enum
	// ib_uverbs_access_flags. The device side holds its own reference to
	// the dma-buf. DeregMR ends it.
	RegDmabufMR(pd Handle, fd int, offset, length, iova uint64, access uint32) (MR, error)
	// UMemRegEx registers memory for DEVX objects as
	// mlx5dv_devx_umem_reg_ex does (MLX5_IB_METHOD_DEVX_UMEM_REG with
	// PGSZ_BITMAP and, for a dma-buf, DMABUF_FD) and returns its handle
	// and umem id. UMemDereg ends it.
	UMemRegEx(r UMemRegEx) (Handle, uint32, error)
}

// UMemRegEx is one DEVX memory registration.
type UMemRegEx struct {
	// Mem is the process's memory to register (the caller keeps it as
	// for Device.UMemReg); nil for a dma-buf.
	Mem []byte
	// Dmabuf is the dma-buf's fd, or -1. Offset and Length are the part
	// of it to register (the ADDR attribute carries Offset).
	Dmabuf         int
	Offset, Length uint64
	// Access is enum ib_uverbs_access_flags.
	Access uint32
	// PageSizes is the bitmap of page sizes the device may map the
	// memory with (bit n: 2^n bytes); the kernel picks the largest that
	// fits. 0 sends libmlx5's mlx5dv_devx_umem_reg default (every size
	// from 4 KiB) as an optional attribute, which a kernel without it
	// ignores.
	PageSizes uint64
}

// DefaultUMemPageSizes is libmlx5's page-size bitmap for a UMEM: every
// power of two from 4 KiB (MLX5_ADAPTER_PAGE_SIZE) up.
const DefaultUMemPageSizes = ^uint64(0) &^ (4096 - 1)
