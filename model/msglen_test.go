package model

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/wqe"
)

// Lengths the device cannot take (issue 15, item 2): a data segment's
// byte_count with bit 31 set, a message past the QP's log_msg_max, a KLM
// of more than 2 GiB. None is silently accepted.

// hasFault reports whether one of d's faults contains s.
func hasFault(d *Device, s string) bool {
	for _, f := range d.Faults() {
		if strings.Contains(f, s) {
			return true
		}
	}
	return false
}

// A data segment's byte_count with bit 31 set is an inline segment
// (MLX5_INLINE_SEG): what a driver writes for an SGE of 2^31 bytes or
// more. Of exactly 2^31 it is an empty inline segment, which libmlx5
// never writes (it leaves the segment out) and whose fate on a device is
// not public: a local QP operation error and a fault, not a success that
// moved nothing. Longer, the inline data runs past the WQE: a local QP
// operation error. In a receive WQE, where no inline segment belongs, it
// is a fault.
func TestDataSegmentWithInlineBit(t *testing.T) {
	const reqErr, synLocalOp = 13, 0x02
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	r := newRig(t, "cx7")
	src, smr := r.mr(4096, all)
	dst, dmr := r.mr(4096, all)
	for _, n := range []uint32{1 << 31, 1<<31 + 64} {
		a, _ := pair(t, r, qpOpts{})
		idx := a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: dmr.RKey, sges: []tsge{{n, smr.LKey, addr(src)}}})
		checkCQE(t, "an RDMA WRITE whose data segment has bit 31", a.scq.next(), a.wantErr(reqErr, synLocalOp, tOpRDMAWrite, idx, 0))
	}
	if !hasFault(r.d, "empty inline segment") {
		t.Errorf("faults %q, want the empty inline segment's", r.d.Faults())
	}

	a, b := pair(t, r, qpOpts{})
	b.recv(tsge{1<<31 | 64, dmr.LKey, addr(dst)})
	a.post(twqe{opcode: tOpSend, fm: tSignaled, sges: []tsge{{64, smr.LKey, addr(src)}}})
	a.scq.next()
	if !hasFault(r.d, "receive WQE") {
		t.Errorf("faults %q, want the receive WQE's data segment with bit 31", r.d.Faults())
	}
}

// A message longer than the QP's maximum (qpc.log_msg_max, which mlx5_ib
// sets from log_max_msg with the path MTU) is a local length error at the
// requester, found before any byte is read: the IB spec's Local Length
// Error, ibv_poll_cq's IBV_WC_LOC_LEN_ERR. The data segments' sum counts,
// each within its 31 bits; an RDMA READ's too.
func TestMessageOverLogMsgMax(t *testing.T) {
	r := newVRig(t, "cx7")
	cq := r.cq(255, nil)
	mem, mr := r.mr(1<<16, accessLocalWrite|ibAccessRemoteWrite|ibAccessRemoteRead)
	a := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
	b := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 2})
	a.connect(b, ibAccessRemoteWrite|ibAccessRemoteRead)
	b.connect(a, ibAccessRemoteWrite|ibAccessRemoteRead)
	over := []wqe.SGE{{Addr: addr(mem), Length: 1 << 30, LKey: mr.LKey}, {Addr: addr(mem), Length: 1, LKey: mr.LKey}}
	for _, op := range []uint8{wqe.OpcodeRDMAWrite, wqe.OpcodeSend, wqe.OpcodeRDMARead} {
		a := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 3})
		a.connect(b, ibAccessRemoteWrite|ibAccessRemoteRead)
		a.post(wqe.Send{Opcode: op, Flags: wqe.SendSignaled, RemoteAddr: addr(mem), RKey: mr.RKey, SGL: over})
		if c := decode(t, cq.next()); c.Opcode != wqe.CQEReqErr || c.Syndrome != wqe.Syndrome(SyndromeLocalLength) {
			t.Errorf("opcode %#x of 2^30+1 bytes: %+v, want a local length error", op, c)
		}
	}
	// 2^30 bytes are a message, which the 64 KiB MR does not hold: a
	// protection error.
	a.post(wqe.Send{Opcode: wqe.OpcodeRDMAWrite, Flags: wqe.SendSignaled, RemoteAddr: addr(mem), RKey: mr.RKey, SGL: over[:1]})
	if c := decode(t, cq.next()); c.Opcode != wqe.CQEReqErr || c.Syndrome != wqe.Syndrome(SyndromeLocalProt) {
		t.Errorf("a WRITE of 2^30 bytes: %+v, want a local protection error", c)
	}
	if f := r.d.Faults(); len(f) != 0 {
		t.Errorf("faults %q", f)
	}
}

// A KLM maps at most 2 GiB (mlx5dv.h's struct mlx5_wqe_umr_klm_seg: "up
// to 2GB"; libmlx5's memory window bind refuses more): a UMR with a longer
// one fails, the mkey unchanged, and the model reports it.
func TestUMRKLMOver2GiB(t *testing.T) {
	r := newRig(t, "cx7")
	a, _ := pair(t, r, qpOpts{})
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	m1, k1 := r.mr(4096, all)
	mk := r.freeMkey(4, false)
	c := wqe.MkeyConfigure{QPN: a.qpn, Mkey: mk.key, Flags: wqe.SendInline | wqe.SendSignaled, SetAccess: true, Access: wqe.AccessLocalWrite,
		List: []wqe.KLM{{Addr: addr(m1), ByteCount: 64, Mkey: k1.LKey}}}
	res, err := wqe.BuildMkeyConfigure(wqe.Ring(a.sq), a.sqPI, len(a.sq)/wqe.WQEBB, &c)
	if err != nil {
		t.Fatal(err)
	}
	// The KLM follows the ctrl, UMR ctrl and mkey context segments.
	klm := a.sq[64*int(a.sqPI)+16+48+64:]
	binary.BigEndian.PutUint32(klm, 1<<31+1)
	idx := a.sqPI
	a.sqPI += uint16(res.WQEBBs)
	a.ring(idx)
	checkCQE(t, "a UMR with a KLM of 2^31+1 bytes", a.scq.next(), a.wantErr(13, 0x02, 0x25, idx, 0))
	if st := r.mkeyState(mk.key); prm.Mkc.Free.Get(st.mkc) != 1 || len(st.klms) != 0 {
		t.Errorf("the mkey changed: mkc %x, klms %v", st.mkc, st.klms)
	}
	if !hasFault(r.d, "2 GiB") {
		t.Errorf("faults %q, want the KLM's", r.d.Faults())
	}
}
