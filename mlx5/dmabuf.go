package mlx5

import (
	"math"
	"math/bits"

	"github.com/mlx5go/mlx5go/internal/seam"
)

// Memory the device reaches through a dma-buf file descriptor: a GPU
// driver's exported buffer (NCCL's and UCX's GPU-direct), or a udmabuf.
// docs/MLX5.md, "Dmabuf and external memory".

// RegDmabufMR registers length bytes of the dma-buf fd, from offset in
// it, with the given access rights (ibv_reg_dmabuf_mr). iova is the
// address SGEs and remote addresses name the dma-buf's byte at offset
// by: Addr returns it, Len returns length. The MR holds no memory of the
// process (the kernel holds its own reference to the dma-buf, so the
// caller may close fd once the MR is made). Access rights are as for
// RegMR.
//
// fd must be a dma-buf: the kernel refuses another file with EINVAL and
// a closed fd with EBADF, and a device without dma-buf support with its
// own errno (see docs/MLX5.md); the error wraps it. A device beneath the
// Context that cannot register dma-bufs at all gives ErrUnsupported.
func (p *PD) RegDmabufMR(fd int, offset, length, iova uint64, access AccessFlags) (*MR, error) {
	const op = "reg dmabuf mr"
	if err := p.checkOpen(op); err != nil {
		return nil, err
	}
	obj := pdName(p.pdn)
	if err := checkDmabuf(op, obj, fd, offset, length); err != nil {
		return nil, err
	}
	if _, carry := bits.Add64(iova, length, 0); carry != 0 {
		return nil, invalid(op, obj, "iova %#x + length %#x overflows", iova, length)
	}
	if err := checkMRAccess(op, obj, access); err != nil {
		return nil, err
	}
	if access&AccessOnDemand != 0 {
		// ib_uverbs' reg_dmabuf_mr handler takes only local write,
		// remote access and relaxed ordering: the exporter moves the
		// pages, not the device's faults.
		return nil, invalid(op, obj, "access %#x: a dma-buf MR takes no AccessOnDemand", uint32(access))
	}
	r, err := p.c.dmabufRegistrar(op, obj)
	if err != nil {
		return nil, err
	}
	m, err := r.RegDmabufMR(p.handle, fd, offset, length, iova, uint32(access))
	if err != nil {
		return nil, opErr(op, obj, err)
	}
	mr := &MR{c: p.c, handle: m.Handle, lkey: m.LKey, rkey: m.RKey, addr: iova, length: length}
	if err := p.c.adopt(mr); err != nil {
		mr.Close()
		return nil, opErr(op, obj, err)
	}
	return mr, nil
}

// checkDmabuf is the rule on a dma-buf range: an fd, a length, and an end
// that does not overflow.
func checkDmabuf(op, obj string, fd int, offset, length uint64) error {
	switch {
	case fd < 0 || fd > math.MaxInt32:
		return invalid(op, obj, "fd %d is not a file descriptor", fd)
	case length == 0:
		return invalid(op, obj, "empty region")
	}
	if _, carry := bits.Add64(offset, length, 0); carry != 0 {
		return invalid(op, obj, "offset %#x + length %#x overflows", offset, length)
	}
	return nil
}

// dmabufRegistrar is the device's DmabufRegistrar, or ErrUnsupported.
func (c *Context) dmabufRegistrar(op, obj string) (seam.DmabufRegistrar, error) {
	r, ok := c.dev.(seam.DmabufRegistrar)
	if !ok {
		return nil, unsupported(op, obj, "the device cannot register dma-bufs or page-size bitmaps")
	}
	return r, nil
}

// UMemOptions are the options of a UMEM registration
// (mlx5dv_devx_umem_in, mlx5dv_devx_umem_reg_ex).
type UMemOptions struct {
	// Access: local write, remote write and remote read.
	Access AccessFlags
	// PageSizes is the bitmap of page sizes (bit n: 2^n bytes) the
	// device may map the memory with (pgsz_bitmap): the kernel picks the
	// largest one the memory's alignment allows, and an object on the
	// UMEM may then start at a umem_offset aligned to it. 0 is libmlx5's
	// default, DefaultUMemPageSizes, which mlx5dv_devx_umem_reg sends as
	// an optional attribute. Sizes below 4 KiB (bits 0 to 11) are refused:
	// the device's smallest page is 4 KiB (MLX5_ADAPTER_PAGE_SIZE).
	PageSizes uint64
}

// DefaultUMemPageSizes is libmlx5's page-size bitmap: every power of two
// from 4 KiB (MLX5_ADAPTER_PAGE_SIZE) up. (The seam's
// DefaultUMemPageSizes is the same; a test checks it.)
const DefaultUMemPageSizes uint64 = ^uint64(0) &^ (4096 - 1)

// RegUMemWith registers mem for DEVX objects with the options
// (mlx5dv_devx_umem_reg_ex); mem is kept as by RegUMem. A non-zero
// PageSizes needs a kernel with the PGSZ_BITMAP attribute (Linux 5.11 and
// later; an older one refuses it with EPROTONOSUPPORT).
func (c *Context) RegUMemWith(mem []byte, opt UMemOptions) (*UMem, error) {
	const op = "devx umem reg"
	if err := c.checkUMemOptions(op, opt); err != nil {
		return nil, err
	}
	return c.adoptUMem(c.regUMemEx(seam.UMemRegEx{Mem: mem, Dmabuf: -1, Access: uint32(opt.Access), PageSizes: opt.PageSizes}))
}

// RegDmabufUMem registers length bytes of the dma-buf fd, from offset in
// it, for DEVX objects (mlx5dv_devx_umem_reg_ex with
// MLX5DV_UMEM_MASK_DMABUF). A PageSizes of 0 sends DefaultUMemPageSizes,
// as a mandatory attribute, as libmlx5 does. The kernel needs the
// DMABUF_FD attribute (Linux 6.1 and later; an older one refuses it with
// EPROTONOSUPPORT) and refuses an fd that is no dma-buf as for
// RegDmabufMR.
func (c *Context) RegDmabufUMem(fd int, offset, length uint64, opt UMemOptions) (*UMem, error) {
	const op = "devx umem reg"
	if err := c.checkUMemOptions(op, opt); err != nil {
		return nil, err
	}
	if err := checkDmabuf(op, c.name, fd, offset, length); err != nil {
		return nil, err
	}
	if opt.PageSizes == 0 {
		opt.PageSizes = DefaultUMemPageSizes
	}
	return c.adoptUMem(c.regUMemEx(seam.UMemRegEx{Dmabuf: fd, Offset: offset, Length: length, Access: uint32(opt.Access), PageSizes: opt.PageSizes}))
}

// checkUMemOptions checks the context and the options.
func (c *Context) checkUMemOptions(op string, opt UMemOptions) error {
	if err := c.check(op, ""); err != nil {
		return err
	}
	if opt.Access&^(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead) != 0 {
		return invalid(op, c.name, "access %#x: a UMEM takes local write, remote write and remote read", uint32(opt.Access))
	}
	if opt.PageSizes&^DefaultUMemPageSizes != 0 {
		return invalid(op, c.name, "page sizes %#x: the smallest page is 4 KiB (bits below 12 are not sizes the device maps)", opt.PageSizes)
	}
	return nil
}

// adoptUMem makes a UMEM the context's child, which Context.Close closes.
func (c *Context) adoptUMem(u *UMem, err error) (*UMem, error) {
	if err != nil {
		return nil, err
	}
	if err := c.adopt(u); err != nil {
		u.Close()
		return nil, opErr("devx umem reg", c.name, err)
	}
	u.child = true
	return u, nil
}

// regUMemEx is the one UMEM registration: the process's memory, which it
// holds, or a dma-buf. The plain case (memory, default page sizes) goes
// through Device.UMemReg, which every device has.
func (c *Context) regUMemEx(r seam.UMemRegEx) (*UMem, error) {
	const op = "devx umem reg"
	if err := c.check(op, ""); err != nil {
		return nil, err
	}
	var hold *memHold
	if r.Dmabuf < 0 {
		if len(r.Mem) == 0 {
			return nil, invalid(op, c.name, "empty region")
		}
		var err error
		if hold, err = holdMem(op, c.name, r.Mem); err != nil {
			return nil, err
		}
	}
	var h seam.Handle
	var id uint32
	var err error
	if r.Dmabuf < 0 && r.PageSizes == 0 {
		h, id, err = c.dev.UMemReg(r.Mem, r.Access)
	} else {
		var reg seam.DmabufRegistrar
		if reg, err = c.dmabufRegistrar(op, c.name); err != nil {
			hold.release()
			return nil, err
		}
		h, id, err = reg.UMemRegEx(r)
	}
	if err != nil {
		hold.release()
		return nil, opErr(op, c.name, err)
	}
	return &UMem{c: c, handle: h, id: id, hold: hold}, nil
}
