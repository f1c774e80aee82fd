package model

import (
	"fmt"

	"github.com/mlx5go/mlx5go/prm"
)

// The send queue drain after a signature error (qpc.drain_sigerr): the QP
// stops in SQ_DRAINING until the WQEs before the stop have completed, then
// enters SQD and raises SQ_DRAINED (the man page of
// mlx5dv_qp_cancel_posted_send_wrs). The model runs WQEs one at a time, so
// they have completed when the QP stops; the drain ends at the next pass
// of the owning context's doorbell goroutine, at once for a context with
// none, and only at FinishDrain with Options.ManualDrain.
//
// Where it stops. The man page guarantees only that "the QP has stopped
// somewhere between the WQE that generated the signature error, and the
// next WQE that has IBV_SEND_FENCE on it", and that "more than one WRs
// [may] cause signature errors by the time the QP finally stopped". The
// window after a WQE whose requester-side check failed is therefore the
// WQEs that follow it, in order, up to (not including) the first with a
// fence, and no further than the doorbell record's send counter when the
// failing WQE completes: the device cannot run what it was not told of,
// and it must stop without waiting for more. A fence is a fence mode
// (fm_ce_se bits 7:5, enum of MLX5_FENCE_MODE_* in the kernel's
// include/linux/mlx5/qp.h) of FENCE (2), STRONG_ORDERING (3) or
// SMALL_AND_FENCE (4): libmlx5 writes MLX5_WQE_CTRL_FENCE (4 << 5) for
// IBV_SEND_FENCE (providers/mlx5/qp.c), the kernel's wr.c FENCE or
// SMALL_AND_FENCE for IB_SEND_FENCE and STRONG_ORDERING for a fenced
// LOCAL_INV; the initiator small fence (1) after a UMR is not one. The
// device runs a prefix of the window, as long as Options.SigStop says
// (SigStopEarliest: none of it), then stops: the WQEs of the prefix run
// as in RTS (their CQEs, and their own SIG_ERR CQEs when their checks
// fail, all before SQ_DRAINED), a further signature error among them
// changes nothing (the window ends where it ended), and
// hw_sq_wqebb_counter is the first WQE that did not run. A WQE of the
// prefix that completes in error moves the QP to ERR as always; one that
// waits for the responder (RNR) delays the stop.

// SigStopPolicy is where, in the window, Options.SigStop stops.
type SigStopPolicy uint8

const (
	// SigStopEarliest stops right after the WQE whose check failed: no
	// WQE of the window runs. The default.
	SigStopEarliest SigStopPolicy = iota
	// SigStopLatest runs the whole window: the QP stops right before the
	// next fenced WQE, or after the last WQE the doorbell record covers.
	SigStopLatest
	// SigStopSeeded runs a prefix of the window whose length is drawn,
	// uniformly from 0 to the window's length, from a PCG seeded with
	// SigStop.Seed, one draw per stop: the same seed and the same work
	// give the same stops.
	SigStopSeeded
	// SigStopAfter runs SigStop.After WQEs of the window, or all of it
	// when it is shorter.
	SigStopAfter
)

var sigStopPolicyNames = [...]string{"earliest", "latest", "seeded", "after"}

// String names the policy: earliest, latest, seeded or after.
func (p SigStopPolicy) String() string {
	return policyName(sigStopPolicyNames[:], p, "SigStopPolicy")
}

// policyName names policy p of type typ: its name in names, or typ(p)
// for a value that has none.
func policyName[P ~uint8](names []string, p P, typ string) string {
	if int(p) < len(names) {
		return names[p]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(p))
}

// SigStop is Options.SigStop: where a QP with drain_sigerr stops after a
// requester-side signature error, within the window the man page allows
// (docs/MODEL.md, "Where it stops"). The zero value is SigStopEarliest.
type SigStop struct {
	Policy SigStopPolicy
	Seed   uint64 // SigStopSeeded's seed
	After  int    // SigStopAfter's count of WQEs; not negative
}

// sigStopStream is the PCG's second word for SigStopSeeded.
const sigStopStream = 0x5157_0b5e

// check refuses a policy the model does not know and a negative count.
func (s SigStop) check() error {
	switch {
	case s.Policy > SigStopAfter:
		return fmt.Errorf("model: Options.SigStop: unknown policy %v", s.Policy)
	case s.After < 0:
		return fmt.Errorf("model: Options.SigStop: After %d is negative", s.After)
	}
	return nil
}

// Fence modes that end the window (fm_ce_se bits 7:5; the kernel's
// MLX5_FENCE_MODE_FENCE, _STRONG_ORDERING and _SMALL_AND_FENCE).
const (
	fenceModeFence          = 2
	fenceModeStrongOrdering = 3
	fenceModeSmallAndFence  = 4
)

// fenced reports whether a WQE with control byte fmCeSe carries a fence.
func fenced(fmCeSe uint8) bool {
	switch fmCeSe >> 5 {
	case fenceModeFence, fenceModeStrongOrdering, fenceModeSmallAndFence:
		return true
	}
	return false
}

// sigWindow counts the WQEs from q's consumer counter (the WQE after the
// one whose check failed) that the device may still run before it stops:
// up to the first fenced one, and the WQEs the doorbell record covers
// whole.
func (h *hca) sigWindow(q *qpObj) int {
	pi := uint16(dbrWord(q.dbr, 1))
	if int(pi-q.sqCI) > q.sq.entries {
		return 0 // runSQ faults on it
	}
	n := 0
	for c := q.sqCI; c != pi; n++ {
		o := q.sq.off + int(c)&(q.sq.entries-1)*sendWQEBB
		ctrl := q.wq[o : o+ctrlSegSize]
		if fenced(ctrl[11]) {
			break
		}
		bbs := uint16(max(1, (int(ctrl[7]&0x3f)*16+sendWQEBB-1)/sendWQEBB))
		if bbs > pi-c {
			break // not posted whole: readWQE faults on it
		}
		c += bbs
	}
	return n
}

// sigStopAfter returns how many WQEs of the window after a signature
// error of q's the device runs before it stops (Options.SigStop of the
// context that owns q).
func (h *hca) sigStopAfter(q *qpObj) int {
	d := h.ctxs[q.ctx]
	if d == nil || d.opt.SigStop.Policy == SigStopEarliest {
		return 0
	}
	n := h.sigWindow(q)
	switch p := d.opt.SigStop; p.Policy {
	case SigStopLatest:
		return n
	case SigStopSeeded:
		return d.sigStops.IntN(n + 1)
	case SigStopAfter:
		return min(p.After, n)
	}
	return 0
}

// drainStop stops q's send queue after a signature error.
func (h *hca) drainStop(q *qpObj) {
	q.stopIn = 0
	prm.Qpc.State.Set(q.qpc, StateSQDraining)
	d := h.ctxs[q.ctx]
	switch {
	case d != nil && d.opt.ManualDrain:
	case d != nil && d.pl != nil:
		d.drains = append(d.drains, q)
		d.pendingDrains.Add(1)
	default:
		h.drained(q)
	}
}

// drained ends the drain of q: SQD and the SQ_DRAINED event.
func (h *hca) drained(q *qpObj) {
	prm.Qpc.State.Set(q.qpc, StateSQD)
	h.sqDrained(q)
}

// finishDrains ends the drains the context's doorbell goroutine owes, of
// QPs still draining. Called under the HCA's lock.
func (d *Device) finishDrains() {
	for _, q := range d.drains {
		if d.h.qps[q.qpn] == q && q.state() == StateSQDraining {
			d.h.drained(q)
		}
	}
	d.drains = nil
	d.pendingDrains.Store(0)
}

// FinishDrain ends the send queue drain of QP qpn now, as the doorbell
// goroutine does at its next pass: SQ_DRAINING becomes SQD and
// SQ_DRAINED is raised. With Options.ManualDrain it is the only way from
// SQ_DRAINING to SQD, so tests can observe the draining state.
func (d *Device) FinishDrain(qpn uint32) error {
	return d.onQP(qpn, StateSQDraining, "SQ_DRAINING", d.h.drained)
}
