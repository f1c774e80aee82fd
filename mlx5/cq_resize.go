package mlx5

import (
	"fmt"
	"math/bits"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/wqe"
)

// The widths of the CQ context's cq_max_count and cq_period
// (MLX5_MAX_CQ_COUNT, MLX5_MAX_CQ_PERIOD): what mlx5_ib reports as
// max_cq_moderation_count and max_cq_moderation_period for a device with
// the cq_moderation cap, and the most CQ.Moderate can ask of any mlx5
// device.
const (
	MaxCQModerationCount  = 1<<16 - 1
	MaxCQModerationPeriod = 1<<12 - 1 // microseconds
)

// Moderate sets the CQ's completion event moderation (ibv_modify_cq with
// IBV_CQ_ATTR_MODERATE): an armed CQ raises its event once count
// completions have arrived or period microseconds have passed since the
// first, whichever comes first (0 leaves that trigger out; 0 and 0 is no
// moderation). count and period stay within the device's caps, else
// Moderate is ErrInvalid, naming the cap, before anything is sent: for a
// verbs CQ those the device query reported (Caps.MaxCQModerationCount
// and MaxCQModerationPeriod, query_device_ex's cq_moderation_caps), for
// a DEVX CQ those mlx5_ib derives from the HCA caps the same way
// (MaxCQModerationCount and MaxCQModerationPeriod with the cq_moderation
// cap). A device whose caps are 0 and 0 has no moderation (mlx5_ib
// without cq_moderation, whose modify_cq is then EOPNOTSUPP; rxe, which
// has no modify_cq): Moderate is ErrUnsupported, with nothing sent. A
// verbs CQ sends the kernel's modify CQ command, a DEVX CQ MODIFY_CQ.
func (cq *CQ) Moderate(count, period int) error {
	const op = "modify cq"
	if err := cq.lockOpen(op); err != nil {
		return err
	}
	defer cq.mu.Unlock()
	maxCount, maxPeriod, err := cq.moderationCaps()
	if err != nil {
		return wrapAs(op, cq.name, "the moderation caps", err)
	}
	if err := checkModeration(op, cq.name, maxCount, maxPeriod, count, period); err != nil {
		return err
	}
	if cq.verbs {
		if err := cq.c.dev.ModifyCQ(cq.handle, uint16(count), uint16(period)); err != nil {
			return wrapAs(op, cq.name, "", err)
		}
		return nil
	}
	in := mailbox(prm.ModifyCqIn.Layout().Size, prm.MLX5_CMD_OP_MODIFY_CQ)
	prm.ModifyCqIn.Cqn.Set(in, uint64(cq.cqn))
	prm.ModifyCqIn.ModifyFieldSelectResizeFieldSelect.Set(in, cqModifyPeriod|cqModifyCount)
	cqc := prm.ModifyCqIn.CqContext
	prm.Cqc.CqPeriod.At(cqc).Set(in, uint64(period))
	prm.Cqc.CqMaxCount.At(cqc).Set(in, uint64(count))
	out := make([]byte, prm.ModifyCqOut.Layout().Size)
	return cq.c.modifyObj(op, cq.name, cq.obj.handle, in, out)
}

// moderationCaps are the moderation caps a Moderate of the CQ stays
// within: the device query's for a verbs CQ, the HCA caps' for a DEVX CQ
// (mlx5_ib_query_device's derivation).
func (cq *CQ) moderationCaps() (count, period int, err error) {
	c := cq.c
	if cq.verbs {
		return c.caps.MaxCQModerationCount, c.caps.MaxCQModerationPeriod, nil
	}
	general, err := c.generalCaps()
	if err != nil {
		return 0, 0, err
	}
	if prm.CmdHcaCap.CqModeration.Get(general) == 0 {
		return 0, 0, nil
	}
	return MaxCQModerationCount, MaxCQModerationPeriod, nil
}

// checkModeration is Moderate's rule for count and period against caps
// of maxCount and maxPeriod.
func checkModeration(op, obj string, maxCount, maxPeriod, count, period int) error {
	switch {
	case maxCount == 0 && maxPeriod == 0:
		return unsupported(op, obj, "the device reports no CQ moderation (max_cq_moderation_count and max_cq_moderation_period 0)")
	case count < 0 || count > maxCount:
		return invalid(op, obj, "count %d (0 to max_cq_moderation_count %d)", count, maxCount)
	case period < 0 || period > maxPeriod:
		return invalid(op, obj, "period %d µs (0 to max_cq_moderation_period %d)", period, maxPeriod)
	}
	return nil
}

// MODIFY_CQ's modify_field_select bits for moderation (enum
// mlx5_cq_modify_field_select of the PRM).
const (
	cqModifyPeriod = 1 << 0
	cqModifyCount  = 1 << 1
)

// Resize makes the CQ hold at least entries CQEs (ibv_resize_cq), as
// libmlx5's mlx5_resize_cq does: a new ring of the next power of two
// above entries, the kernel's resize command naming it, then the CQEs
// not yet polled copied from the old ring to the new one in order, up to
// the resize CQE the device ends the old ring with, and the old ring
// freed. The poller waits meanwhile (Poll, Arm and Wait may run on other
// goroutines): it never sees the CQ half resized. A size the ring has
// already is no command. Resize refuses (EBUSY) entries below the CQEs
// waiting to be polled, and a full ring, which has no room for the resize
// CQE: poll first. Only a verbs CQ resizes; a DEVX CQ's Resize is
// ErrInvalid. If the kernel refuses, the CQ stays as it was.
func (cq *CQ) Resize(entries int) error {
	const op = "resize cq"
	if err := cq.lockOpen(op); err != nil {
		return err
	}
	defer cq.mu.Unlock()
	if entries <= 0 || entries >= 1<<22 {
		return invalid(op, cq.name, "%d entries (1 to 4194303)", entries)
	}
	if !cq.verbs {
		return invalid(op, cq.name, "a DEVX CQ does not resize (CQOptions.DEVX)")
	}
	logSize := uint8(bits.Len(uint(entries))) // align_queue_size(entries + 1)
	if logSize == cq.logSize {
		return nil
	}
	buf, err := allocBuffer(cqeSize << logSize)
	if err != nil {
		return wrapAs(op, cq.name, "", err)
	}
	ring := buf.mem
	for i := 0; i < len(ring); i += cqeSize {
		wqe.InitCQE(ring[i : i+cqeSize])
	}
	cq.g.pause()
	defer cq.g.resume()
	old, oldLog, ci := cq.ring, cq.logSize, cq.ci
	size := uint32(1) << oldLog
	waiting := uint32(0)
	for waiting < size && owned(cqeAt(old, oldLog, ci+waiting), ci+waiting, oldLog) {
		waiting++
	}
	switch {
	case waiting == size:
		buf.Close()
		return opErr(op, cq.name, fmt.Errorf("the ring is full (%d CQEs to poll), with no room for the resize CQE: %w", waiting, unix.EBUSY))
	case uint32(entries) < waiting:
		buf.Close()
		return opErr(op, cq.name, fmt.Errorf("%d entries, below the %d CQEs waiting to be polled: %w", entries, waiting, unix.EBUSY))
	}
	drv := mlx5abi.Mlx5IbResizeCq{BufAddr: addrOf(ring), CqeSize: cqeSize}
	if _, err := cq.c.dev.ResizeCQ(cq.handle, uint32(1)<<logSize-1, bytesOf(&drv)); err != nil {
		buf.Close()
		return wrapAs(op, cq.name, "", err)
	}
	// mlx5_cq_resize_copy_cqes: the CQE at old index i goes to new index
	// i + 1, the slot the resize CQE takes in the count.
	i := ci
	for n := uint32(0); n < size; n++ {
		b := cqeAt(old, oldLog, i)
		if !owned(b, i, oldLog) || b[cqeSize-1]>>4 == wqe.CQEResizeCQ {
			break
		}
		d := cqeAt(ring, logSize, i+1)
		copy(d, b)
		d[cqeSize-1] = b[cqeSize-1]&^1 | uint8((i+1)>>logSize)&1
		i++
	}
	cq.ring, cq.logSize, cq.ci = ring, logSize, ci+1
	cq.db.SetCI(cq.ci)
	for k, r := range cq.res {
		if b, ok := r.(*Buffer); ok && len(b.mem) > 0 && len(old) > 0 && &b.mem[0] == &old[0] {
			cq.res[k] = buf
			b.Close()
			return nil
		}
	}
	cq.res.add(buf)
	return nil
}

// cqeAt is the CQE of index i in a ring of 1 << logSize CQEs.
func cqeAt(ring []byte, logSize uint8, i uint32) []byte {
	off := (i & (1<<logSize - 1)) * cqeSize
	return ring[off : off+cqeSize : off+cqeSize]
}

// lockOpen locks cq.mu for op, on a CQ CreateCQ made and Close has not
// closed; the caller unlocks it. On an error it is not locked.
func (cq *CQ) lockOpen(op string) error {
	if err := cq.usable(op); err != nil {
		return err
	}
	cq.mu.Lock()
	if cq.closed {
		cq.mu.Unlock()
		return opErr(op, cq.name, ErrClosed)
	}
	return nil
}
