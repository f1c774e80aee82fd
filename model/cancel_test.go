package model

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/prm"
)

// What mlx5dv_qp_cancel_posted_send_wrs leaves for the device, on a QP
// stopped in SQD (drain_sigerr) with work posted behind the stop, in a
// ring of 8 WQEBBs so that the work crosses its end: QUERY_QP's
// hw_sq_wqebb_counter is the counter after the last WQE the QP ran; WQEs
// whose opcode byte became NOP (the rest of their control segment, ds
// and the segments after it kept) do nothing whatever their ds and
// segments (an RDMA WRITE's bad rkey and lkey, a 4-WQEBB UMR's garbage),
// complete when they ask (CQ_UPDATE) and not otherwise; SQD_RTS resumes
// at the counter where the QP stopped and runs the rest.
func TestCanceledWQEs(t *testing.T) {
	r := newRig(t, "cx7")
	a, b := pair(t, r, qpOpts{drainSigerr: true, logSQ: 3})
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	src, smr := r.mr(4096, all)
	dst, dmr := r.mr(4096, all)
	pattern(src, 7)
	pattern(dst, 8)
	orig := bytes.Clone(dst)
	hw := func() uint16 {
		t.Helper()
		out := prm.QueryQpOut.Layout().New()
		if err := r.d.ObjQuery(a.h, transitionInQuery(a.qpn), out); err != nil {
			t.Fatal(err)
		}
		return uint16(prm.Qpc.HwSqWqebbCounter.At(prm.QueryQpOut.Qpc).Get(out))
	}
	for range 5 {
		a.post(twqe{opcode: tOpNOP})
	}
	idx := a.post(twqe{opcode: tOpNOP, fm: tSignaled})
	checkCQE(t, "NOP", a.scq.next(), a.wantReq(tOpNOP, idx, 0, 0))
	if got := hw(); got != 6 {
		t.Errorf("hw_sq_wqebb_counter %d after 6 NOPs", got)
	}
	if err := r.d.InjectSigErr(a.qpn); err != nil {
		t.Fatal(err)
	}
	a.waitState(StateSQD)

	const fence = 0x80 // MLX5_WQE_CTRL_FENCE
	write := a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled | fence, hasRaddr: true, raddr: 0x1, rkey: 0xdead00,
		sges: []tsge{{64, 0xbad00, 0x2}}})
	garbage := bytes.Repeat([]byte{0xa5}, 236)
	umr := a.post(twqe{opcode: 0x25, inline: garbage}) // ds 16: 4 WQEBBs, across the ring's end
	ridx := b.recv(tsge{64, dmr.LKey, addr(dst[1024:])})
	send := a.post(twqe{opcode: tOpSend, fm: tSignaled | fence, sges: []tsge{{32, smr.LKey, addr(src)}}})
	last := a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: dmr.RKey,
		sges: []tsge{{64, smr.LKey, addr(src)}}})
	if a.sqPI != 13 || write != 6 || umr != 7 || send != 11 || last != 12 {
		t.Fatalf("counters %d %d %d %d, producer %d", write, umr, send, last, a.sqPI)
	}
	a.scq.none(2 * time.Millisecond)
	if got := hw(); got != 6 {
		t.Errorf("hw_sq_wqebb_counter %d in SQD, want 6 (where it stopped)", got)
	}
	// The cancel: opmod and opcode 0, nothing else.
	for _, c := range []uint16{write, umr, last} {
		ctrl := a.sq[64*(int(c)&7):]
		binary.BigEndian.PutUint32(ctrl, binary.BigEndian.Uint32(ctrl)&0x00ffff00)
	}
	a.modify(prm.MLX5_CMD_OP_SQD_RTS_QP, nil)
	checkCQE(t, "the canceled WRITE", a.scq.next(), a.wantReq(tOpNOP, write, 0, 0))
	checkCQE(t, "receive", b.rcq.next(), b.wantResp(2, ridx, 32, 0, a.qpn, 0))
	checkCQE(t, "SEND", a.scq.next(), a.wantReq(tOpSend, send, 0, 0))
	checkCQE(t, "the canceled last WRITE", a.scq.next(), a.wantReq(tOpNOP, last, 0, 0))
	a.scq.none(2 * time.Millisecond)
	b.rcq.none(2 * time.Millisecond)
	if got := hw(); got != 13 {
		t.Errorf("hw_sq_wqebb_counter %d after the run, want 13", got)
	}
	if !bytes.Equal(dst[:1024], orig[:1024]) || !bytes.Equal(dst[1024+32:], orig[1024+32:]) || !bytes.Equal(dst[1024:1024+32], src[:32]) {
		t.Error("the NOPs wrote to memory, or the SEND did not land")
	}
	if f, e := r.d.Faults(), r.d.WQEErrors(); len(f)+len(e) != 0 {
		t.Errorf("faults %q, WQE errors %q", f, e)
	}
	if st := a.state(); st != StateRTS {
		t.Errorf("state %#x", st)
	}
}
