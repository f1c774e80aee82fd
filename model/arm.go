package model

import (
	"encoding/binary"
	"time"

	"github.com/mlx5go/mlx5go/prm"
)

// Completion events. A driver asks for one by arming the CQ: it writes
// the arm word (sn << 28 | cmd | consumer index) into word 1 of the CQ's
// doorbell record, then that word and the CQN, big-endian, with one 8-byte
// store to offset 0x20 of the CQ's UAR page (mlx5_arm_cq in rdma-core's
// providers/mlx5/cq.c, mlx5_cq_arm in include/linux/mlx5/cq.h; cmd is
// MLX5_CQ_DB_REQ_NOT for the next completion, MLX5_CQ_DB_REQ_NOT_SOL for
// the next solicited or error completion). The CQ fires once: a
// completion event (the EQE goes to mlx5_ib_cq_comp for a verbs CQ,
// devx_cq_comp for a DEVX CQ), and it is disarmed until the next arm.
// The sequence number sn counts events: libmlx5 increments its arm_sn for
// every event it takes (mlx5_cq_event), so an arm rung before the driver
// saw the last event carries the old number; the model ignores such an
// arm (the PRM is not public; this is how the sequence number is used by
// libmlx5, see docs/MODEL.md "Assumptions").

// The CQ doorbell in a UAR page (MLX5_CQ_DOORBELL) and the arm commands
// (MLX5_CQ_DB_REQ_NOT_SOL, MLX5_CQ_DB_REQ_NOT, cq.h).
const (
	cqDoorbell    = 0x20
	cqDBReqNotSol = 1 << 24
	cqArmCIMask   = 0xffffff
	armNone       = 0
	armNext       = 1
	armSolicited  = 2
	cqcStSolArmed = 0x6 // MLX5_CQC_ST_SOLICITED_NOTIFICATION_REQUEST_ARMED
	cqcStArmed    = 0x9 // MLX5_CQC_ST_NOTIFICATION_REQUEST_ARMED
	cqcStFired    = 0xa // MLX5_CQC_ST_FIRED
	cqArmSNMask   = 3
	cqArmSNShift  = 28
)

// cqDoorbell handles an 8-byte write to a UAR page's CQ doorbell by
// context ctx: the CQ it names must be the context's and use that page
// (cqc.uar_page), else it is a fault and nothing happens. Every CQ of the
// context shares one such doorbell per page, and the model's page is
// memory: a second arm before the poller's next scan overwrites the
// first, where hardware would have seen both. So a ring also applies the
// arm word each other CQ of the context on the page has in its doorbell
// record (the driver writes it there before ringing) when it differs from
// the last one applied to that CQ. What that cannot recover is an
// overwritten arm whose word is what the record already held: the first
// arm of a CQ with word 0 (sequence number 0, next completion, consumer
// index 0). See docs/MODEL.md "Assumptions".
func (h *hca) cqDoorbell(ctx ctxID, page uint32, val [8]byte) {
	word := binary.BigEndian.Uint32(val[0:])
	cqn := binary.BigEndian.Uint32(val[4:]) & 0xffffff
	cq, ok := h.cqs[cqn]
	if !ok || cq.ctx != ctx {
		h.fault(ctx, "CQ doorbell %x on UAR page %#x names CQ %#x, which is not this context's", val, page, cqn)
		return
	}
	if p := uint32(prm.Cqc.UarPage.Get(cq.cqc)); p != page {
		h.fault(ctx, "CQ doorbell %x for CQ %#x on UAR page %#x, but the CQ's uar_page is %#x", val, cqn, page, p)
		return
	}
	h.applyArm(cq, cqn, word)
	for n, o := range h.cqs {
		if o == cq || o.ctx != ctx || o.dbr == nil || uint32(prm.Cqc.UarPage.Get(o.cqc)) != page {
			continue
		}
		if w := dbrWord(o.dbr, 1); w != o.lastArm && (o.armSeen || w != 0) {
			h.applyArm(o, n, w)
		}
	}
}

// applyArm applies an arm word the driver rang, unless it is the one last
// applied to the CQ (the same arm seen twice: in the doorbell and in the
// record).
func (h *hca) applyArm(cq *cqObj, cqn, word uint32) {
	if cq.armSeen && word == cq.lastArm {
		return
	}
	cq.armSeen, cq.lastArm = true, word
	h.armCQ(cq, cqn, word)
}

// armCQ applies an arm word. A stale sequence number is ignored. An arm
// for the next completion is not weakened by a later solicited one until
// it fires. CQEs already written past the arm's consumer index fire the
// event at once.
func (h *hca) armCQ(cq *cqObj, cqn uint32, word uint32) {
	if cq.overrun {
		return // the CQ is in error: it raises no more events
	}
	if uint8(word>>cqArmSNShift)&cqArmSNMask != cq.armSN {
		return
	}
	cmd := uint8(armNext)
	if word&cqDBReqNotSol != 0 {
		cmd = armSolicited
	}
	if cq.armed != armNext {
		cq.armed = cmd
	}
	cq.armCI = word & cqArmCIMask
	st := uint64(cqcStArmed)
	if cq.armed == armSolicited {
		st = cqcStSolArmed
	}
	prm.Cqc.St.Set(cq.cqc, st)
	pending := (cq.pi - cq.armCI) & cqArmCIMask
	if pending == 0 || pending > 1<<23 {
		return
	}
	if cq.armed == armNext {
		h.moderate(cq, cqn)
		return
	}
	if sol := (cq.solPI - cq.armCI) & cqArmCIMask; cq.hasSol && sol != 0 && sol <= pending {
		h.fire(cq, cqn)
	}
}

// cqWritten is the arm check after a CQE is written.
func (h *hca) cqWritten(cq *cqObj, cqn uint32, solicited bool) {
	switch {
	case cq.armed == armNext:
		h.moderate(cq, cqn)
	case cq.armed == armSolicited && solicited:
		h.fire(cq, cqn)
	}
}

// moderate is the event of a CQ armed for its next completion, with CQEs
// past the arm's consumer index, under the CQ context's moderation
// (MODIFY_CQ's cq_max_count and cq_period, as ibv_modify_cq sets them):
// none (both 0) fires at once; else the event comes once cq_max_count
// CQEs are pending, or cq_period microseconds after the first pending
// one, whichever first (a 0 leaves that trigger out). The period runs
// from the first CQE the armed CQ holds (the PRM's CQE-based period
// mode; see docs/MODEL.md "Assumptions"). A solicited arm is not
// moderated.
func (h *hca) moderate(cq *cqObj, cqn uint32) {
	pending := uint64((cq.pi - cq.armCI) & cqArmCIMask)
	count, period := prm.Cqc.CqMaxCount.Get(cq.cqc), prm.Cqc.CqPeriod.Get(cq.cqc)
	switch {
	case count == 0 && period == 0, count != 0 && pending >= count:
		h.fire(cq, cqn)
	case period != 0 && cq.modTimer == nil:
		var t *time.Timer
		t = time.AfterFunc(time.Duration(period)*time.Microsecond, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.cqs[cqn] == cq && cq.modTimer == t && cq.armed == armNext && !cq.overrun {
				h.fire(cq, cqn)
			}
		})
		cq.modTimer = t
	}
}

// fire raises the completion event of an armed CQ and disarms it; the
// next arm must carry the next sequence number.
func (h *hca) fire(cq *cqObj, cqn uint32) {
	if cq.modTimer != nil {
		cq.modTimer.Stop()
		cq.modTimer = nil
	}
	cq.armed = armNone
	cq.armSN = (cq.armSN + 1) & cqArmSNMask
	prm.Cqc.St.Set(cq.cqc, cqcStFired)
	prm.Cqc.LastNotifiedIndex.Set(cq.cqc, uint64(cq.pi&cqArmCIMask))
	h.compEvent(cq, cqn)
}
