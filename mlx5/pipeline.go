package mlx5

import (
	"fmt"
	"slices"

	"github.com/mlx5go/mlx5go/sig"
	"golang.org/x/sys/unix"
)

// Signature pipelining lets a storage target post a transfer through a
// signature mkey and, right behind it, the good response to its client,
// fenced (SendFence), without waiting for the transfer's check. If the
// check fails, the device stops the QP's send queue before the fenced
// response runs (QPOptions.SigPipelining; the QP reaches SQD and the
// context delivers EventSQDrained), and RecoverSigStop does what
// mlx5dv_qp_cancel_posted_send_wrs(3) tells an application to do then.
//
// Where it stops is the device's choice, anywhere from right after the
// failing work request to right before the next fenced one: the unfenced
// work between may have run (other transfers, responses without a fence),
// and more than one transfer may have failed by then. RecoverSigStop
// finds them all, among the transfers it is given.

// SigTransfer is an open transfer of a signature-pipelining QP: the
// signature mkey its data went through and the wr_id of the fenced
// response posted behind it. A transfer is open from the post of its data
// until its response completes: list it even when its response is not
// posted yet, for a stop after another transfer's failure may have run
// it, and its failure is then reported with nothing to cancel.
type SigTransfer struct {
	Mkey     *Mkey
	Response uint64
}

// SigFailure is an open transfer whose mkey reported a signature error:
// its index in RecoverSigStop's list, the error, and how many work
// requests with its response's wr_id were canceled (they complete as
// successes of their original opcode, having sent nothing; 0 when the
// response was not posted yet, or was canceled before).
type SigFailure struct {
	Transfer int
	// Response is the transfer's response wr_id (its SigTransfer's, as
	// RecoverSigStop was given it).
	Response uint64
	Err      sig.MkeyErr
	Canceled int
}

// RecoverSigStop handles a signature-pipelining stop of the QP, in the
// order mlx5dv_qp_cancel_posted_send_wrs(3) gives, and returns the
// transfers that failed:
//
//  1. it checks that the send queue is drained (SQD), else the error wraps
//     ErrNotDrained and EINVAL and nothing was done;
//  2. it polls cq (the QP's send CQ) until a poll finds nothing, handing
//     every batch of completions to deliver: the completions of the work
//     the device ran before it stopped, past the failure too, and the
//     signature errors of the transfers arrive with them;
//  3. it checks the mkey of every open transfer (Mkey.Check) and cancels
//     the fenced response of each that failed (CancelPostedSends): the
//     response never reaches the client. Every transfer that failed
//     before the stop is found, one or several. A check that cannot be
//     decoded counts as a failure, with a zero Err;
//  4. it moves the QP back to RTS (SQD to RTS), and the send queue goes
//     on: canceled responses complete as successes, the work after them
//     runs.
//
// Then post the failed transfers' error responses. RecoverSigStop works
// on a copy of open made when it is called, so deliver may change the
// caller's list (take transfers off it as their responses complete): a
// failure's Transfer is its index in open as it was passed, and its
// Response says which it is either way. Call it after
// EventSQDrained from the goroutine that posts on the QP and polls cq (or
// with both stopped): it does both. wc is the poll buffer (not empty).
// A failure after step 2 leaves the QP in SQD; the returned failures are
// those found so far.
func (qp *QP) RecoverSigStop(cq *CQ, wc []Completion, deliver func([]Completion), open []SigTransfer) ([]SigFailure, error) {
	const op = "recover sig stop"
	if err := qp.usable(op); err != nil {
		return nil, err
	}
	switch {
	case qp.g.closed():
		return nil, opErr(op, qp.name, ErrClosed)
	case !qp.sigPipelining:
		return nil, invalid(op, qp.name, "the QP was created without SigPipelining")
	case cq == nil || cq != qp.sendCQ:
		return nil, invalid(op, qp.name, "cq must be the QP's send CQ")
	case len(wc) == 0 || deliver == nil:
		return nil, invalid(op, qp.name, "a poll buffer and a deliver function are needed")
	}
	for i, t := range open {
		if t.Mkey == nil || !t.Mkey.sigMkey {
			return nil, invalid(op, qp.name, "transfer %d: no signature mkey", i)
		}
	}
	// deliver may change the caller's open (its backing array too):
	// check the transfers as they were.
	open = slices.Clone(open)
	at, err := qp.Query(QPAttrState)
	if err != nil {
		return nil, wrapAs(op, qp.name, "", err)
	}
	if at.State != QPStateSQD || at.SQDraining {
		msg := fmt.Sprintf("the QP is in %v, not stopped in SQD", at.State)
		if at.SQDraining {
			msg = "the drain has not ended; wait for EventSQDrained"
		}
		return nil, &Error{Op: op, Obj: qp.name, Err: &reasonError{msg: msg, errs: []error{ErrNotDrained, unix.EINVAL}}}
	}
	for {
		n, err := cq.Poll(wc)
		if n > 0 {
			deliver(wc[:n])
		}
		if err != nil {
			return nil, wrapAs(op, qp.name, "", err)
		}
		if n == 0 {
			break
		}
	}
	var failed []SigFailure
	for i, t := range open {
		me, err := t.Mkey.Check()
		if err == nil && me.OK() {
			continue
		}
		f := SigFailure{Transfer: i, Response: t.Response, Err: me}
		if f.Canceled, err = qp.CancelPostedSends(t.Response); err != nil {
			return failed, wrapAs(op, qp.name, "", err)
		}
		failed = append(failed, f)
	}
	if err := qp.Modify(&QPAttr{State: QPStateRTS, CurState: QPStateSQD}, QPAttrState|QPAttrCurState); err != nil {
		return failed, wrapAs(op, qp.name, "to RTS", err)
	}
	return failed, nil
}
