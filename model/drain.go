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

// drainStop stops q's send queue after a signature error.
func (h *hca) drainStop(q *qpObj) {
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
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	q, ok := d.h.qps[qpn]
	if !ok || q.ctx != d.id {
		return fmt.Errorf("model: no QP %#x on this context", qpn)
	}
	if q.state() != StateSQDraining {
		return fmt.Errorf("model: QP %#x is in state %#x, not SQ_DRAINING", qpn, q.state())
	}
	d.h.drained(q)
	return nil
}
