package model

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// Atomic WQEs by hand (struct mlx5_wqe_ctrl_seg, mlx5_wqe_raddr_seg,
// mlx5_wqe_atomic_seg, mlx5_wqe_data_seg; MLX5_OPCODE_ATOMIC_* and
// _MASKED_*, mlx5dv.h).
const (
	tOpAtomicMaskedCS = 0x14
	tOpAtomicMaskedFA = 0x15
	tOpTSO            = 0x0e
	tReqErr           = 13 // MLX5_CQE_REQ_ERR
	tAtomicAll        = accessLocalWrite | accessRemoteRead | accessRemoteWrite | accessRemoteAtomic
)

// TestRCAtomics: ATOMIC_CS and ATOMIC_FA on RC, on every profile, through
// the transports' one atomic path (the DCI's): 8 bytes at an aligned
// remote address in host byte order (atomic_req_8B_endianness_mode 1),
// the original value scattered into the requester's data segment, a REQ
// CQE with byte_cnt 8, and no receive WQE consumed at the responder.
func TestRCAtomics(t *testing.T) {
	for _, prof := range []string{"cx5", "cx6dx", "cx7"} {
		t.Run(prof, func(t *testing.T) {
			r := newRig(t, prof)
			local, lmr := r.mr(4096, tAtomicAll)
			remote, rmr := r.mr(4096, tAtomicAll)
			a, b := pair(t, r, qpOpts{rae: true})
			b.recv(tsge{64, rmr.LKey, addr(remote[1024:])}) // an atomic takes none
			at := func(off int) uint64 { return binary.NativeEndian.Uint64(remote[off:]) }
			old := func(off int) uint64 { return binary.NativeEndian.Uint64(local[off:]) }
			binary.NativeEndian.PutUint64(remote[64:], 0x1111)
			atomic := func(op uint8, swapAdd, compare uint64, into int) uint16 {
				return a.post(twqe{opcode: op, fm: tSignaled, atomic: true, raddr: addr(remote[64:]), rkey: rmr.RKey,
					swapAdd: swapAdd, compare: compare, sges: []tsge{{8, lmr.LKey, addr(local[into:])}}})
			}

			idx := atomic(tOpAtomicCS, 0x2222, 0x1111, 0)
			checkCQE(t, "CMP_AND_SWP", a.scq.next(), a.wantReq(tOpAtomicCS, idx, 8, 0))
			if old(0) != 0x1111 || at(64) != 0x2222 {
				t.Errorf("CMP_AND_SWP that matches: old %#x, memory %#x; want 0x1111, 0x2222", old(0), at(64))
			}
			idx = atomic(tOpAtomicCS, 0x3333, 0x1111, 8)
			checkCQE(t, "CMP_AND_SWP (no match)", a.scq.next(), a.wantReq(tOpAtomicCS, idx, 8, 0))
			if old(8) != 0x2222 || at(64) != 0x2222 {
				t.Errorf("CMP_AND_SWP that does not match: old %#x, memory %#x; want 0x2222 twice", old(8), at(64))
			}
			idx = atomic(tOpAtomicFA, 5, 0, 16)
			checkCQE(t, "FETCH_AND_ADD", a.scq.next(), a.wantReq(tOpAtomicFA, idx, 8, 0))
			if old(16) != 0x2222 || at(64) != 0x2227 {
				t.Errorf("FETCH_AND_ADD: old %#x, memory %#x; want 0x2222, 0x2227", old(16), at(64))
			}
			// The add wraps at 64 bits; the compare operand of a
			// FETCH_AND_ADD is not read.
			idx = atomic(tOpAtomicFA, ^uint64(0x2226), 0x5555, 24)
			checkCQE(t, "FETCH_AND_ADD (wrapping)", a.scq.next(), a.wantReq(tOpAtomicFA, idx, 8, 0))
			if old(24) != 0x2227 || at(64) != 0 {
				t.Errorf("FETCH_AND_ADD wrapping: old %#x, memory %#x; want 0x2227, 0", old(24), at(64))
			}
			b.rcq.none(time.Millisecond)
			if a.state() != StateRTS || b.state() != StateRTS {
				t.Errorf("states %#x, %#x after the atomics, want RTS", a.state(), b.state())
			}
			if f := r.d.Faults(); len(f) != 0 {
				t.Errorf("faults: %q", f)
			}
		})
	}
}

// TestRCAtomicErrors: each way an RC atomic fails, as the DCI's do, with
// the RC responder going to ERR for what it refuses; the remote 8 bytes
// stay as they were.
func TestRCAtomicErrors(t *testing.T) {
	r := newRig(t, "cx6dx")
	local, lmr := r.mr(4096, tAtomicAll)
	remote, rmr := r.mr(4096, tAtomicAll)
	_, noAtomic := r.mr(4096, accessLocalWrite|accessRemoteRead|accessRemoteWrite)
	_, remoteOnly := r.mr(4096, accessRemoteRead) // no local write: no landing
	aligned, misaligned := addr(remote[64:]), addr(remote[68:])

	// A configured signature mkey with remote atomic access over remote.
	sa, _ := pair(t, r, qpOpts{})
	sigKey := r.freeMkey(1, true)
	umr := sa.configure(sigKey, wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(remote), ByteCount: 4096, Mkey: rmr.LKey}},
		Sig: &sig.BlockAttr{Wire: t10dif(sig.BlockSize512, 7), CheckMask: 0xff}, SetAccess: true, Access: wqe.AccessLocalWrite | wqe.AccessRemoteAtomic})
	checkCQE(t, "configure", sa.scq.next(), sa.wantReq(opSetPSV, umr, 0, 0))

	for _, c := range []struct {
		what     string
		o        qpOpts
		w        twqe
		syndrome uint8
		respErr  bool // the responder goes to ERR
	}{
		{"an atomic at an address not 8-byte aligned", qpOpts{rae: true},
			twqe{opcode: tOpAtomicFA, raddr: misaligned, rkey: rmr.RKey, swapAdd: 1, sges: []tsge{{8, lmr.LKey, addr(local)}}}, SyndromeRemoteInvalReq, true},
		{"an atomic through an rkey without remote atomic access", qpOpts{rae: true},
			twqe{opcode: tOpAtomicCS, raddr: addr(remote) /* another MR's address */, rkey: noAtomic.RKey, sges: []tsge{{8, lmr.LKey, addr(local)}}}, SyndromeRemoteAccess, true},
		{"an atomic through a signature mkey", qpOpts{rae: true},
			twqe{opcode: tOpAtomicFA, raddr: 64, rkey: sigKey.key, swapAdd: 1, sges: []tsge{{8, lmr.LKey, addr(local)}}}, SyndromeRemoteAccess, true},
		{"an atomic past the remote MR", qpOpts{rae: true},
			twqe{opcode: tOpAtomicFA, raddr: addr(remote) + 4096, rkey: rmr.RKey, swapAdd: 1, sges: []tsge{{8, lmr.LKey, addr(local)}}}, SyndromeRemoteAccess, true},
		{"an atomic to a responder without rae", qpOpts{},
			twqe{opcode: tOpAtomicFA, raddr: aligned, rkey: rmr.RKey, swapAdd: 1, sges: []tsge{{8, lmr.LKey, addr(local)}}}, SyndromeRemoteInvalReq, true},
		{"a result lkey that does not exist", qpOpts{rae: true},
			twqe{opcode: tOpAtomicFA, raddr: aligned, rkey: rmr.RKey, swapAdd: 1, sges: []tsge{{8, lmr.LKey ^ 0xff, addr(local)}}}, SyndromeLocalProt, false},
		{"a result lkey without local write", qpOpts{rae: true},
			twqe{opcode: tOpAtomicFA, raddr: aligned, rkey: rmr.RKey, swapAdd: 1, sges: []tsge{{8, remoteOnly.LKey, 0}}}, SyndromeLocalProt, false},
		{"a result segment of 4 bytes", qpOpts{rae: true},
			twqe{opcode: tOpAtomicFA, raddr: aligned, rkey: rmr.RKey, swapAdd: 1, sges: []tsge{{4, lmr.LKey, addr(local)}}}, SyndromeLocalLength, false},
		{"a masked compare-and-swap (no extended atomics)", qpOpts{rae: true},
			twqe{opcode: tOpAtomicMaskedCS, raddr: aligned, rkey: rmr.RKey, swapAdd: 1, sges: []tsge{{8, lmr.LKey, addr(local)}}}, SyndromeLocalQPOp, false},
		{"a masked fetch-and-add (no extended atomics)", qpOpts{rae: true},
			twqe{opcode: tOpAtomicMaskedFA, raddr: aligned, rkey: rmr.RKey, swapAdd: 1, sges: []tsge{{8, lmr.LKey, addr(local)}}}, SyndromeLocalQPOp, false},
		{"an atomic on UC", qpOpts{rae: true, uc: true},
			twqe{opcode: tOpAtomicFA, raddr: aligned, rkey: rmr.RKey, swapAdd: 1, sges: []tsge{{8, lmr.LKey, addr(local)}}}, SyndromeLocalQPOp, false},
		{"a compare-and-swap on UC", qpOpts{rae: true, uc: true},
			twqe{opcode: tOpAtomicCS, raddr: aligned, rkey: rmr.RKey, swapAdd: 1, sges: []tsge{{8, lmr.LKey, addr(local)}}}, SyndromeLocalQPOp, false},
	} {
		t.Run(strings.ReplaceAll(c.what, " ", "_"), func(t *testing.T) {
			clear(remote)
			binary.NativeEndian.PutUint64(remote[64:], 0x77)
			binary.NativeEndian.PutUint64(local, 0xdead)
			faults := len(r.d.Faults())
			a, b := pair(t, r, c.o)
			w := c.w
			w.fm, w.atomic = tSignaled, true
			idx := a.post(w)
			checkCQE(t, c.what, a.scq.next(), a.wantErr(tReqErr, c.syndrome, w.opcode, idx, 0))
			a.waitState(StateERR)
			if c.respErr {
				b.waitState(StateERR)
			} else if s := b.state(); s != StateRTS {
				t.Errorf("the responder is in state %#x, want RTS", s)
			}
			if v := binary.NativeEndian.Uint64(remote[64:]); v != 0x77 {
				t.Errorf("the remote 8 bytes are %#x, want 0x77 (untouched)", v)
			}
			if v := binary.NativeEndian.Uint64(local); v != 0xdead {
				t.Errorf("the result segment holds %#x, want 0xdead (untouched)", v)
			}
			if f := r.d.Faults(); len(f) != faults {
				t.Errorf("faults: %q, want none new (each is a device's answer, not a gap)", f[faults:])
			}
		})
	}
}

// TestAtomicModeFromCaps: mlx5_ib's get_atomic_mode on each profile's
// atomic caps: CMP_SWAP and FETCH_ADD without the extended (masked) ones
// give MLX5_ATOMIC_MODE_IB_COMP, with them the size's mode.
func TestAtomicModeFromCaps(t *testing.T) {
	for _, name := range []string{"cx5", "cx6dx", "cx7"} {
		p := profiles[name]
		if p.extendedAtomics() {
			t.Errorf("%s: the profile reports extended atomics, which the model does not execute", name)
		}
		for _, dct := range []bool{false, true} {
			if m, ok := p.atomicMode(dct); !ok || m != atomicModeIBComp {
				t.Errorf("%s dct=%v: atomic mode %d %v, want IB_COMP (1)", name, dct, m, ok)
			}
		}
	}
}

// TestResetForgetsAccess: a QP taken back to RESET starts its next life
// from CREATE_QP's context (the IB spec's Reset state: its attributes are
// their initial values), so a RESET to INIT without rae leaves the remote
// atomics of its last life off, though the transitions apply only the
// non-zero fields they carry.
func TestResetForgetsAccess(t *testing.T) {
	r := newRig(t, "cx7")
	local, lmr := r.mr(4096, tAtomicAll)
	remote, rmr := r.mr(4096, tAtomicAll)
	a, b := pair(t, r, qpOpts{rae: true})
	b.reset()
	b.modify(prm.MLX5_CMD_OP_RST2INIT_QP, func(in []byte, qpc prm.Field) { prm.Qpc.Rwe.At(qpc).Set(in, 1) }) // remote write only
	b.modify(prm.MLX5_CMD_OP_INIT2RTR_QP, func(in []byte, qpc prm.Field) { prm.Qpc.RemoteQpn.At(qpc).Set(in, uint64(a.qpn)) })
	b.modify(prm.MLX5_CMD_OP_RTR2RTS_QP, nil)
	r.d.h.mu.Lock()
	rae := prm.Qpc.Rae.Get(r.d.h.qps[b.qpn].qpc)
	r.d.h.mu.Unlock()
	if rae != 0 {
		t.Fatalf("rae %d after RESET and a RESET to INIT without it", rae)
	}
	idx := a.post(twqe{opcode: tOpAtomicFA, fm: tSignaled, atomic: true, raddr: addr(remote), rkey: rmr.RKey, swapAdd: 1,
		sges: []tsge{{8, lmr.LKey, addr(local)}}})
	checkCQE(t, "FETCH_AND_ADD to a QP without rae", a.scq.next(), a.wantErr(tReqErr, SyndromeRemoteInvalReq, tOpAtomicFA, idx, 0))
}
