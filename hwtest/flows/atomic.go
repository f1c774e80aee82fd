package flows

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
)

// RCAtomics is rdma-core's tests/test_atomic.py on RC QPs through mlx5:
// compare-and-swap that matches and one that does not, fetch-and-add
// (test_atomic_cmp_and_swap, test_atomic_fetch_and_add), each returning
// the original 8 bytes into the requester's SGE, the memory in host byte
// order (the device's atomic_req_8B_endianness_mode 1, which mlx5_core
// sets when the device has it); then each bad flow of the file on a pair
// of its own, since an error moves the QPs to ERR: the responder's QP
// without remote atomic access (test_atomic_invalid_qp_access, and a
// max_dest_rd_atomic of 0, with which mlx5_ib's set_qpc_atomic_flags
// clears the atomic enable too) and a misaligned address (IBV_WC_REM_INV_REQ_ERR),
// an MR without remote atomic access (test_atomic_invalid_mr_access) and
// a signature mkey (IBV_WC_REM_ACCESS_ERR), an lkey that is no key
// (test_atomic_invalid_lkey: IBV_WC_LOC_PROT_ERR). An atomic on a UC QP
// is refused by mlx5 before anything is written (ErrInvalid): UC has no
// atomics (libmlx5's MLX5_SUPPORTED_SEND_OPS_FLAGS_UC). A device without
// atomics (Context.Caps().Atomics false) skips, as test_atomic.py does.
// The max_dest_rd_atomic case runs on verbs QPs only: mlx5's modify of a
// DEVX QP sets rae from the access flags alone.
func RCAtomics(t *testing.T, c *mlx5.Context, objs Objects) {
	if !c.Caps().Atomics {
		t.Skip("the device has no atomics (atomic_cap IBV_ATOMIC_NONE)")
	}
	ne := binary.NativeEndian
	const access = mlx5.AccessLocalWrite | mlx5.AccessRemoteAtomic
	t.Run("good", func(t *testing.T) {
		l := NewLoopback(t, c, objs)
		remote, rmr := buffer(t, l.PD, 64, access)
		old, omr := buffer(t, l.PD, 64, mlx5.AccessLocalWrite)
		ne.PutUint64(remote[8:], 0x1111)
		atomic := func(id uint64, op mlx5.Opcode, compare, swapAdd uint64, into int) {
			t.Helper()
			post(t, l.A, mlx5.SendWR{WrID: id, Opcode: op, Flags: mlx5.SendSignaled, RemoteAddr: rmr.Addr() + 8, RKey: rmr.RKey(),
				Compare: compare, SwapAdd: swapAdd, SGL: []mlx5.SGE{{Addr: omr.Addr() + uint64(into), Length: 8, LKey: omr.LKey()}}})
			wc := l.Wait(t, 1)[0]
			wantOp := map[mlx5.Opcode]mlx5.WCOpcode{mlx5.OpAtomicCAS: mlx5.WCCompSwap, mlx5.OpAtomicFAA: mlx5.WCFetchAdd}[op]
			if wc.Status != mlx5.WCSuccess || wc.WrID != id || wc.Opcode != wantOp || wc.ByteLen != 8 || wc.QPN != l.A.QPN() {
				t.Errorf("%v %d: completion %+v, want a success of 8 bytes", op, id, wc)
			}
		}
		atomic(1, mlx5.OpAtomicCAS, 0x1111, 0x2222, 0)
		atomic(2, mlx5.OpAtomicCAS, 0x1111, 0x3333, 8)
		atomic(3, mlx5.OpAtomicFAA, 0, 5, 16)
		if a, b, f, m := ne.Uint64(old), ne.Uint64(old[8:]), ne.Uint64(old[16:]), ne.Uint64(remote[8:]); a != 0x1111 || b != 0x2222 || f != 0x2222 || m != 0x2227 {
			t.Errorf("old values %#x, %#x, %#x, memory %#x; want 0x1111, 0x2222, 0x2222, 0x2227", a, b, f, m)
		}
		l.quiet(t, 0)
	})

	// bad runs one atomic that must fail with status on a new pair, after
	// set changes the pair; the remote 8 bytes must stay.
	bad := func(name string, status mlx5.WCStatus, set func(t *testing.T, l *Loopback, wr *mlx5.SendWR, rmr, omr *mlx5.MR)) {
		t.Run(name, func(t *testing.T) {
			l := NewLoopback(t, c, objs)
			remote, rmr := buffer(t, l.PD, 64, access)
			_, omr := buffer(t, l.PD, 64, mlx5.AccessLocalWrite)
			ne.PutUint64(remote[8:], 0x77)
			wr := mlx5.SendWR{WrID: 9, Opcode: mlx5.OpAtomicFAA, Flags: mlx5.SendSignaled, RemoteAddr: rmr.Addr() + 8, RKey: rmr.RKey(),
				SwapAdd: 1, SGL: []mlx5.SGE{{Addr: omr.Addr(), Length: 8, LKey: omr.LKey()}}}
			set(t, l, &wr, rmr, omr)
			post(t, l.A, wr)
			l.expect(t, want{wrID: 9, qp: l.A, status: status})
			if m := ne.Uint64(remote[8:]); m != 0x77 {
				t.Errorf("the remote 8 bytes are %#x after a failed atomic, want 0x77", m)
			}
		})
	}
	// reconnect takes B back to RESET and connects it again with the
	// responder's access and depth given.
	reconnect := func(t *testing.T, l *Loopback, qpAccess mlx5.AccessFlags, maxDest uint8) {
		path, err := c.LoopbackPath(1)
		if err != nil {
			t.Fatal(err)
		}
		modifyQP(t, l.B, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
		modifyQP(t, l.B, mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1, Access: qpAccess},
			mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort|mlx5.QPAttrAccessFlags)
		modifyQP(t, l.B, mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path, DestQPN: l.A.QPN(), MaxDestRdAtomic: maxDest, MinRNRTimer: 12},
			mlx5.QPAttrState|mlx5.QPAttrAV|mlx5.QPAttrPathMTU|mlx5.QPAttrDestQPN|mlx5.QPAttrRQPSN|mlx5.QPAttrMaxDestRdAtomic|mlx5.QPAttrMinRNRTimer)
		modifyQP(t, l.B, mlx5.QPAttr{State: mlx5.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			mlx5.QPAttrState|mlx5.QPAttrTimeout|mlx5.QPAttrRetryCnt|mlx5.QPAttrRNRRetry|mlx5.QPAttrSQPSN|mlx5.QPAttrMaxQPRdAtomic)
	}
	bad("responder_without_remote_atomic", mlx5.WCRemInvReqErr, func(t *testing.T, l *Loopback, _ *mlx5.SendWR, _, _ *mlx5.MR) {
		reconnect(t, l, mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead, 16)
	})
	if objs == VerbsObjects {
		// mlx5_ib's rule; a DEVX QP's context takes rae from the access
		// flags alone (mlx5's modify of a DEVX QP).
		bad("responder_max_dest_rd_atomic_0", mlx5.WCRemInvReqErr, func(t *testing.T, l *Loopback, _ *mlx5.SendWR, _, _ *mlx5.MR) {
			reconnect(t, l, mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead|mlx5.AccessRemoteAtomic, 0)
		})
	}
	bad("misaligned", mlx5.WCRemInvReqErr, func(_ *testing.T, _ *Loopback, wr *mlx5.SendWR, _, _ *mlx5.MR) {
		wr.RemoteAddr += 1
	})
	bad("mr_without_remote_atomic", mlx5.WCRemAccessErr, func(t *testing.T, l *Loopback, wr *mlx5.SendWR, _, _ *mlx5.MR) {
		_, m := buffer(t, l.PD, 64, mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite)
		wr.RemoteAddr, wr.RKey = m.Addr(), m.RKey()
	})
	bad("invalid_lkey", mlx5.WCLocProtErr, func(_ *testing.T, _ *Loopback, wr *mlx5.SendWR, _, omr *mlx5.MR) {
		wr.SGL[0].LKey = omr.LKey() + 1
	})
	bad("invalid_rkey", mlx5.WCRemAccessErr, func(_ *testing.T, _ *Loopback, wr *mlx5.SendWR, rmr, _ *mlx5.MR) {
		wr.RKey = rmr.RKey() + 1
	})
	bad("signature_mkey", mlx5.WCRemAccessErr, func(t *testing.T, l *Loopback, wr *mlx5.SendWR, rmr, _ *mlx5.MR) {
		m := sigMkey(t, l.PD)
		configure(t, l, l.B, m, rmr, 64, t10Attr(), mlx5.AccessLocalWrite|mlx5.AccessRemoteAtomic)
		wr.RemoteAddr, wr.RKey = 8, m.RKey()
	})

	t.Run("uc", func(t *testing.T) {
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeAll(t, pd) })
		cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeAll(t, cq) })
		// A verbs QP: mlx5's DEVX QPs are RC.
		qp, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeUC, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxSendSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeAll(t, qp) })
		_, omr := buffer(t, pd, 64, mlx5.AccessLocalWrite)
		for _, op := range []mlx5.Opcode{mlx5.OpAtomicCAS, mlx5.OpAtomicFAA} {
			err := qp.PostSend(&mlx5.SendWR{WrID: 1, Opcode: op, Flags: mlx5.SendSignaled, RemoteAddr: omr.Addr(), RKey: omr.RKey(),
				SGL: []mlx5.SGE{{Addr: omr.Addr(), Length: 8, LKey: omr.LKey()}}})
			if !errors.Is(err, mlx5.ErrInvalid) {
				t.Errorf("%v on a UC QP: %v, want ErrInvalid", op, err)
			}
		}
	})
}
