package model

import (
	"fmt"
	"math/bits"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
)

// Dma-buf memory (docs/MODEL.md, "Dma-bufs"). The model takes a dma-buf
// fd as the kernel does (dma_buf_get): a real dma-buf, which it maps to
// reach its bytes as a device's DMA would, or a memfd that ExportDmabuf
// made, standing in for a GPU driver's exporter. Any other file is no
// dma-buf (EINVAL), a closed fd none at all (EBADF).

var _ seam.DmabufRegistrar = (*Device)(nil)

// accessRelaxedOrdering is IB_UVERBS_ACCESS_RELAXED_ORDERING, the one
// optional-range bit reg_dmabuf_mr takes.
const accessRelaxedOrdering = 1 << 20

// exported are ExportDmabuf's memfds by inode, with the mapping the
// model made of each when it exported it; they live as long as the
// process, as an exporter's buffers would while a device may use them.
var exported = struct {
	mu sync.Mutex
	m  map[dmabufKey][]byte
}{m: map[dmabufKey][]byte{}}

type dmabufKey struct{ dev, ino uint64 }

// ExportDmabuf makes a buffer of size bytes (rounded up to whole pages),
// zeroed, and returns an fd for it that the model takes as a dma-buf: a
// memfd named "mlx5go-model-dmabuf", standing in for a GPU driver's
// exported memory. The caller owns the fd (close it when done; a
// registration made from it keeps the memory). The real kernel refuses
// it, as it refuses every memfd: use a udmabuf there. Its memory stays
// mapped in the model for the life of the process.
func (d *Device) ExportDmabuf(size int) (int, error) {
	if size <= 0 {
		return -1, fmt.Errorf("model: export dmabuf: size %d: %w", size, unix.EINVAL)
	}
	size = (size + pageSize - 1) &^ (pageSize - 1)
	fd, err := unix.MemfdCreate("mlx5go-model-dmabuf", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("model: export dmabuf: memfd_create: %w", err)
	}
	mem, err := func() ([]byte, error) {
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			return nil, err
		}
		return unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}()
	var st unix.Stat_t
	if err == nil {
		err = unix.Fstat(fd, &st)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("model: export dmabuf: %w", err)
	}
	exported.mu.Lock()
	exported.m[dmabufKey{st.Dev, st.Ino}] = mem
	exported.mu.Unlock()
	return fd, nil
}

// dmabufRange is ib_umem_dmabuf_get's part in the model: the bytes
// [offset, offset+length) of the dma-buf fd, and the mapping the model
// made for them (nil for an exported one), which the registration
// unmaps when it goes.
func dmabufRange(call string, fd int, offset, length uint64) (mem, unmap []byte, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, kerr(call, unix.EBADF, "dma_buf_get: fget finds no file")
	}
	exported.mu.Lock()
	buf, ok := exported.m[dmabufKey{st.Dev, st.Ino}]
	exported.mu.Unlock()
	if !ok {
		link, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if link != "anon_inode:dmabuf" && !strings.HasPrefix(link, "/dmabuf:") {
			return nil, nil, kerr(call, unix.EINVAL, "dma_buf_get: the file is not a dma-buf (is_dma_buf_file)")
		}
		size, err := unix.Seek(fd, 0, unix.SEEK_END)
		if err != nil || size <= 0 {
			return nil, nil, kerr(call, unix.EINVAL, "dma_buf_get: the dma-buf's size is unknown")
		}
		if buf, err = unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
			return nil, nil, kerr(call, unix.EINVAL, "the model cannot map the dma-buf: "+err.Error())
		}
		unmap = buf
	}
	end, carry := bits.Add64(offset, length, 0)
	if carry != 0 || end > uint64(len(buf)) {
		unmapDmabuf(unmap)
		return nil, nil, kerr(call, unix.EINVAL, "ib_umem_dmabuf_get: offset + length is past the dma-buf's size")
	}
	return buf[offset:end:end], unmap, nil
}

// unmapDmabuf unmaps a mapping dmabufRange made; nil does nothing.
func unmapDmabuf(m []byte) {
	if m != nil {
		unix.Munmap(m)
	}
}

// RegDmabufMR is UVERBS_METHOD_REG_DMABUF_MR (ib_uverbs'
// reg_dmabuf_mr handler, then mlx5_ib_reg_user_mr_dmabuf): an MTT mkey
// over the dma-buf's bytes, which the device addresses from iova.
func (d *Device) RegDmabufMR(pd seam.Handle, fd int, offset, length, iova uint64, access uint32) (seam.MR, error) {
	const call = "reg dmabuf mr"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return seam.MR{}, err
	}
	o, err := d.lookupKind(call, pd, kindPD)
	if err != nil {
		return seam.MR{}, err
	}
	switch {
	case access&^uint32(accessLocalWrite|accessRemoteWrite|accessRemoteRead|accessRemoteAtomic|accessRelaxedOrdering) != 0:
		return seam.MR{}, kerr(call, unix.EINVAL, "uverbs_get_flags32: access has flags other than LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC, RELAXED_ORDERING")
	case access&(accessRemoteWrite|accessRemoteAtomic) != 0 && access&accessLocalWrite == 0:
		return seam.MR{}, kerr(call, unix.EINVAL, "ib_check_mr_access: remote write or atomic needs local write")
	}
	if _, carry := bits.Add64(iova, length, 0); carry != 0 {
		return seam.MR{}, kerr(call, unix.EINVAL, "iova + length overflows")
	}
	if length == 0 {
		// An mkey of length 0 would span 2^64 bytes (Length64).
		return seam.MR{}, kerr(call, unix.EINVAL, "ib_umem_dmabuf_get: empty region")
	}
	mem, unmap, err := dmabufRange(call, fd, offset, length)
	if err != nil {
		return seam.MR{}, err
	}
	mr, err := d.verbsMkey(call, &mkeyObj{pdn: o.pdn, mem: mem, unmap: unmap}, iova, uint64(len(mem)), access)
	if err != nil {
		unmapDmabuf(unmap)
	}
	return mr, err
}

// UMemRegEx is MLX5_IB_METHOD_DEVX_UMEM_REG with its PGSZ_BITMAP and
// DMABUF_FD attributes (devx_umem_get, devx_umem_reg_cmd_alloc). The
// kernel picks the largest page size of the bitmap that the memory's
// layout allows (ib_umem_find_best_pgsz), ignoring sizes below the
// CPU's page; the model takes every memory as scattered 4 KiB pages, so
// a bitmap without 4 KiB leaves no size: EINVAL.
func (d *Device) UMemRegEx(r seam.UMemRegEx) (seam.Handle, uint32, error) {
	const call = "devx umem reg"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return 0, 0, err
	}
	if d.uid == 0 {
		return 0, 0, kerr(call, unix.EINVAL, "MLX5_IB_METHOD_DEVX_UMEM_REG: the context has no DEVX uid (c->devx_uid is 0)")
	}
	access := r.Access
	if access&^(accessLocalWrite|accessRemoteWrite|accessRemoteRead) != 0 {
		return 0, 0, kerr(call, unix.EINVAL, "uverbs_get_flags32: access has flags other than LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ")
	}
	if access&accessRemoteWrite != 0 && access&accessLocalWrite == 0 {
		return 0, 0, kerr(call, unix.EINVAL, "ib_check_mr_access: REMOTE_WRITE needs LOCAL_WRITE")
	}
	mem, unmap := r.Mem, []byte(nil)
	if r.Dmabuf >= 0 {
		if r.Length == 0 {
			return 0, 0, kerr(call, unix.EINVAL, "ib_umem_dmabuf_get: empty region")
		}
		var err error
		if mem, unmap, err = dmabufRange(call, r.Dmabuf, r.Offset, r.Length); err != nil {
			return 0, 0, err
		}
	} else if len(mem) == 0 {
		return 0, 0, kerr(call, unix.EINVAL, "ib_umem_get: empty region")
	}
	pgsz := r.PageSizes
	if pgsz == 0 {
		pgsz = seam.DefaultUMemPageSizes
	}
	if pgsz&pageSize == 0 {
		unmapDmabuf(unmap)
		return 0, 0, kerr(call, unix.EINVAL, "devx_umem_find_best_pgsize: no page size of the bitmap fits the memory (the model's pages are 4 KiB, not contiguous)")
	}
	id, ok := alloc(d.h, "umem", d.h.umems, firstUMem, limit(firstUMem, d.h.prof.cap(prm.CmdHcaCap.LogMaxUmem)))
	if !ok {
		unmapDmabuf(unmap)
		return 0, 0, &KernelError{Call: call, Errno: statusErrno(prm.MLX5_CMD_STAT_LIM_ERR), Rule: "CREATE_UMEM: log_max_umem UMEMs are registered"}
	}
	d.h.umems[id] = &umemObj{uid: d.uid, ctx: d.id, mem: mem, unmap: unmap}
	return d.newHandle(&uobj{kind: kindUMem, umemID: id}), id, nil
}
