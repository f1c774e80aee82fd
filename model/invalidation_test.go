package model

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// Invalidation: LOCAL_INV (a UMR WQE, as libmlx5 posts it: wqe's
// BuildLocalInv, byte-exact against the oracle) and SEND with
// invalidate.

// localInv posts a LOCAL_INV of key built by the driver's encoder and
// returns its counter.
func (q *tqp) localInv(key uint32, flags wqe.SendFlags) uint16 {
	q.r.t.Helper()
	res, err := wqe.BuildLocalInv(wqe.Ring(q.sq), q.sqPI, len(q.sq)/wqe.WQEBB, &wqe.LocalInv{QPN: q.qpn, RKey: key, Flags: flags})
	if err != nil {
		q.r.t.Fatal(err)
	}
	idx := q.sqPI
	q.sqPI += uint16(res.WQEBBs)
	q.ring(idx)
	return idx
}

// TestLocalInvalidate: LOCAL_INV frees a configured signature mkey; every
// access through it then fails (a local protection error for an lkey, a
// remote access error for an rkey); what the UMR's mask does not name
// stays: bsf_en, the BSF and the translation, so a later configure
// without a signature block (libmlx5's after a LOCAL_INV: the BSF is set)
// makes the mkey usable again with the same signature.
func TestLocalInvalidate(t *testing.T) {
	r := newRig(t, "cx6dx")
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	data, kd := r.mr(4096, all)
	dst, kdst := r.mr(8192, all)
	pattern(data, 9)
	attr := &sig.BlockAttr{Wire: t10dif(sig.BlockSize512, 7), CheckMask: 0xff}
	eng, err := sig.NewEngine(attr)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 8*520)
	if me, err := eng.Transfer(sig.TX, want, data); err != nil || !me.OK() {
		t.Fatal(me, err)
	}
	layout := []wqe.KLM{{Addr: addr(data), ByteCount: 4096, Mkey: kd.LKey}}
	mk := r.freeMkey(1, true)

	a, _ := pair(t, r, qpOpts{})
	umr := a.configure(mk, wqe.MkeyConfigure{List: layout, Sig: attr})
	checkCQE(t, "configure", a.scq.next(), a.wantReq(0x20, umr, 0, 0))
	insert := func(q *tqp, what string) {
		t.Helper()
		clear(dst)
		idx := q.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kdst.RKey, sges: []tsge{{8 * 520, mk.key, 0}}}) // wire bytes
		checkCQE(t, what, q.scq.next(), q.wantReq(tOpRDMAWrite, idx, 0, 0))
		if !bytes.Equal(dst[:len(want)], want) {
			t.Errorf("%s: the wire bytes are not the engine's (data and PI)", what)
		}
	}
	insert(a, "RDMA WRITE through the mkey")

	// LOCAL_INV: one 2-WQEBB UMR, its own completion (the UMR opcode).
	idx := a.localInv(mk.key, wqe.SendSignaled)
	checkCQE(t, "LOCAL_INV", a.scq.next(), a.wantReq(0x25, idx, 0, 0))
	st := r.mkeyState(mk.key)
	if prm.Mkc.Free.Get(st.mkc) != 1 || prm.Mkc.BsfEn.Get(st.mkc) != 1 || st.sig == nil || len(st.klms) != 1 ||
		prm.Mkc.Len.Get(st.mkc) != 4096 || prm.Mkc.Rw.Get(st.mkc) != 1 || prm.Mkc.Mkey70.Get(st.mkc) != 0 {
		t.Fatalf("mkey after LOCAL_INV: mkc %x, signature %v, klms %v: want free, the rest as configured, mkey_7_0 0", st.mkc, st.sig != nil, st.klms)
	}

	// The mkey is free: an lkey is a local protection error, an rkey a
	// remote access error at the requester (and the responder goes to
	// ERR).
	idx = a.post(twqe{opcode: tOpRDMAWrite, hasRaddr: true, raddr: addr(dst), rkey: kdst.RKey, sges: []tsge{{512, mk.key, 0}}})
	checkCQE(t, "RDMA WRITE from the invalidated mkey", a.scq.next(), a.wantErr(13, 0x04, tOpRDMAWrite, idx, 0))
	_, b := pair(t, r, qpOpts{})
	src, ks := r.mr(4096, all)
	idx = b.post(twqe{opcode: tOpRDMAWrite, hasRaddr: true, raddr: 0, rkey: mk.key, sges: []tsge{{520, ks.LKey, addr(src)}}})
	checkCQE(t, "RDMA WRITE to the invalidated mkey", b.scq.next(), b.wantErr(13, 0x13, tOpRDMAWrite, idx, 0))

	// Configured again without a signature block, as libmlx5 does after
	// a LOCAL_INV (the BSF state is "set": no BSF, no BSF_ENABLE): the
	// device kept the BSF, so the mkey inserts the same PI.
	a, _ = pair(t, r, qpOpts{})
	umr = a.configure(mk, wqe.MkeyConfigure{List: layout})
	checkCQE(t, "configure after LOCAL_INV", a.scq.next(), a.wantReq(0x25, umr, 0, 0))
	insert(a, "RDMA WRITE after the reconfigure")

	// LOCAL_INV again, then a configure with a new signature block.
	idx = a.localInv(mk.key, wqe.SendSignaled)
	checkCQE(t, "second LOCAL_INV", a.scq.next(), a.wantReq(0x25, idx, 0, 0))
	attr2 := &sig.BlockAttr{Wire: t10dif(sig.BlockSize512, 0x55), CheckMask: 0xff}
	umr = a.configure(mk, wqe.MkeyConfigure{List: layout, Sig: attr2})
	checkCQE(t, "configure with a new block", a.scq.next(), a.wantReq(0x20, umr, 0, 0))
	if eng, err = sig.NewEngine(attr2); err != nil {
		t.Fatal(err)
	}
	if me, err := eng.Transfer(sig.TX, want, data); err != nil || !me.OK() {
		t.Fatal(me, err)
	}
	insert(a, "RDMA WRITE with the new block")

	// An unsignaled LOCAL_INV completes nothing; the next signaled WQE
	// does.
	a.localInv(mk.key, 0)
	idx = a.post(twqe{opcode: tOpNOP, fm: tSignaled})
	checkCQE(t, "NOP after an unsignaled LOCAL_INV", a.scq.next(), a.wantReq(tOpNOP, idx, 0, 0))
	if st := r.mkeyState(mk.key); prm.Mkc.Free.Get(st.mkc) != 1 {
		t.Error("the unsignaled LOCAL_INV did not free the mkey")
	}

	// LOCAL_INV of an mkey of another PD: a local protection error, the
	// mkey untouched.
	_, pdn2, err := r.d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	other := r.freeMkeyPD(pdn2, 1, false, false)
	before := r.mkeyState(other.key)
	idx = a.localInv(other.key, wqe.SendSignaled)
	checkCQE(t, "LOCAL_INV of another PD's mkey", a.scq.next(), a.wantErr(13, 0x04, 0x25, idx, 0))
	if after := r.mkeyState(other.key); !bytes.Equal(after.mkc, before.mkc) {
		t.Error("a refused LOCAL_INV changed the mkey")
	}
	if f := r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}

// TestSendInvalidate: a SEND with invalidate frees the responder's mkey
// its IETH names when the mkey is in the responder's PD and allows
// remote invalidation (en_rinval); the receive completes as RESP_SEND_INV
// with the key. Otherwise the IB transport's class J (as rxe implements
// it): the message is acknowledged, so the SEND completes successfully,
// while the receive completes with REMOTE_INVAL_REQ_ERR and the responder
// goes to ERR; the mkey is untouched.
func TestSendInvalidate(t *testing.T) {
	r := newRig(t, "cx6dx")
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	m1, k1 := r.mr(4096, all)
	src, ks := r.mr(4096, all)
	layout := []wqe.KLM{{Addr: addr(m1), ByteCount: 64, Mkey: k1.LKey}}
	free := func(key uint32) bool { return prm.Mkc.Free.Get(r.mkeyState(key).mkc) != 0 }

	// Success; the mkey is free after, and a configure makes it usable
	// again.
	a, b := pair(t, r, qpOpts{})
	inv := r.freeMkeyRinval(1, true, true)
	umr := a.configure(inv, wqe.MkeyConfigure{List: layout})
	checkCQE(t, "UMR", a.scq.next(), a.wantReq(0x25, umr, 0, 0))
	ri := b.recv(tsge{16, ks.LKey, addr(src)})
	idx := a.post(twqe{opcode: 0x01, fm: tSignaled, imm: inv.key, inline: []byte("invalidate")})
	checkCQE(t, "receive (SEND_INVAL)", b.rcq.next(), b.wantResp(4, ri, 10, inv.key, a.qpn, 0))
	checkCQE(t, "SEND_INVAL", a.scq.next(), a.wantReq(0x01, idx, 0, 0))
	if !free(inv.key) {
		t.Fatal("the mkey is not free after SEND_INVAL")
	}
	idx = a.post(twqe{opcode: tOpRDMAWrite, hasRaddr: true, raddr: 0, rkey: inv.key, sges: []tsge{{16, ks.LKey, addr(src)}}})
	checkCQE(t, "RDMA WRITE to an invalidated mkey", a.scq.next(), a.wantErr(13, 0x13, tOpRDMAWrite, idx, 0))
	a, _ = pair(t, r, qpOpts{})
	umr = a.configure(inv, wqe.MkeyConfigure{List: layout})
	checkCQE(t, "UMR after the invalidation", a.scq.next(), a.wantReq(0x25, umr, 0, 0))
	pattern(src, 3)
	idx = a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: 0, rkey: inv.key, sges: []tsge{{64, ks.LKey, addr(src)}}})
	checkCQE(t, "RDMA WRITE after the reconfigure", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
	if !bytes.Equal(m1[:64], src[:64]) {
		t.Error("the reconfigured mkey did not take the write")
	}

	// An mkey already free is invalidated again without error.
	a, b = pair(t, r, qpOpts{})
	fresh := r.freeMkeyRinval(1, false, true)
	ri = b.recv(tsge{16, ks.LKey, addr(src)})
	idx = a.post(twqe{opcode: 0x01, fm: tSignaled, imm: fresh.key, inline: []byte("again")})
	checkCQE(t, "receive (SEND_INVAL of a free mkey)", b.rcq.next(), b.wantResp(4, ri, 5, fresh.key, a.qpn, 0))
	checkCQE(t, "SEND_INVAL of a free mkey", a.scq.next(), a.wantReq(0x01, idx, 0, 0))

	// Refused: without en_rinval, of another PD, another variant, no
	// such mkey.
	_, pdn2, err := r.d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	noRinval := r.freeMkeyRinval(1, false, false)
	otherPD := r.freeMkeyPD(pdn2, 1, false, true)
	for _, c := range []struct {
		what string
		key  uint32
		mk   *tmkey
	}{
		{"without en_rinval", noRinval.key, noRinval},
		{"of another PD", otherPD.key, otherPD},
		{"with another variant", inv.key ^ 0x01, inv},
		{"of no mkey", 0xfff000, nil},
	} {
		a, b := pair(t, r, qpOpts{})
		var before []byte
		if c.mk != nil {
			if c.mk == inv {
				umr := a.configure(inv, wqe.MkeyConfigure{List: layout})
				checkCQE(t, "UMR", a.scq.next(), a.wantReq(0x25, umr, 0, 0))
			}
			before = r.mkeyState(c.mk.key).mkc
		}
		ri := b.recv(tsge{16, ks.LKey, addr(src)})
		idx := a.post(twqe{opcode: 0x01, fm: tSignaled, imm: c.key, inline: []byte("invalidate")})
		checkCQE(t, "receive (SEND_INVAL "+c.what+")", b.rcq.next(), b.wantErr(14, 0x12, 0, ri, 0))
		checkCQE(t, "SEND_INVAL "+c.what, a.scq.next(), a.wantReq(0x01, idx, 0, 0))
		b.waitState(StateERR)
		if st := a.state(); st != StateRTS {
			t.Errorf("SEND_INVAL %s: the requester is in state %d, want RTS", c.what, st)
		}
		if c.mk != nil && !bytes.Equal(r.mkeyState(c.mk.key).mkc, before) {
			t.Errorf("SEND_INVAL %s: the mkey changed", c.what)
		}
	}
	if e := r.d.WQEErrors(); len(e) != 5 { // the RDMA WRITE above and the four refusals
		t.Errorf("WQE errors: %q", e)
	}
	if f := r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}

// A UMR's EN_RINVAL mask bit (MLX5_MKEY_MASK_EN_RINVAL, which mlx5_ib's
// fast registration sets) writes mkc.en_rinval: the mkey may then be
// invalidated remotely.
func TestUMREnRinval(t *testing.T) {
	r := newRig(t, "cx6dx")
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	m1, k1 := r.mr(4096, all)
	src, ks := r.mr(4096, all)
	a, b := pair(t, r, qpOpts{})
	mk := r.freeMkey(1, false)
	c := wqe.MkeyConfigure{QPN: a.qpn, Mkey: mk.key, Flags: wqe.SendInline | wqe.SendSignaled, SetAccess: true,
		Access: wqe.AccessLocalWrite | wqe.AccessRemoteWrite, List: []wqe.KLM{{Addr: addr(m1), ByteCount: 64, Mkey: k1.LKey}}}
	res, err := wqe.BuildMkeyConfigure(wqe.Ring(a.sq), a.sqPI, len(a.sq)/wqe.WQEBB, &c)
	if err != nil {
		t.Fatal(err)
	}
	bb := wqe.Ring(a.sq).Slot(a.sqPI)
	mask := binary.BigEndian.Uint64(bb[16+8:])
	binary.BigEndian.PutUint64(bb[16+8:], mask|maskEnRinval)
	prm.Mkc.EnRinval.Set(wqe.Ring(a.sq).Slot(a.sqPI+1), 1)
	idx := a.sqPI
	a.sqPI += uint16(res.WQEBBs)
	a.ring(idx)
	checkCQE(t, "UMR with EN_RINVAL", a.scq.next(), a.wantReq(0x25, idx, 0, 0))
	if prm.Mkc.EnRinval.Get(r.mkeyState(mk.key).mkc) != 1 {
		t.Fatal("en_rinval not set")
	}
	ri := b.recv(tsge{16, ks.LKey, addr(src)})
	idx = a.post(twqe{opcode: 0x01, fm: tSignaled, imm: mk.key})
	checkCQE(t, "receive (SEND_INVAL)", b.rcq.next(), b.wantResp(4, ri, 0, mk.key, a.qpn, 0))
	checkCQE(t, "SEND_INVAL", a.scq.next(), a.wantReq(0x01, idx, 0, 0))
	if f := r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}
