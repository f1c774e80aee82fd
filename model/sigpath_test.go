package model

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// UMR-configured mkeys on the data path. The UMR WQEs come from the
// driver's encoder, wqe.BuildMkeyConfigure (byte-exact against libmlx5),
// which the model parses on its own.

// tmkey is a free mkey for UMR, as mlx5dv_create_mkey makes it: KLM
// access mode, umr_en, free, local read, qpn 0xffffff, room for
// maxEntries translations and, for a signature mkey, a BSF and two PSVs.
type tmkey struct {
	key             uint32
	memPSV, wirePSV uint32
	sig             bool
	umrs            int
}

func (r *rig) freeMkey(maxEntries int, signature bool) *tmkey {
	return r.freeMkeyRinval(maxEntries, signature, false)
}

// freeMkeyRinval is freeMkey, with en_rinval (remote invalidation allowed)
// if rinval.
func (r *rig) freeMkeyRinval(maxEntries int, signature, rinval bool) *tmkey {
	r.t.Helper()
	return r.freeMkeyPD(r.pdn, maxEntries, signature, rinval)
}

// freeMkeyPD is freeMkeyRinval in PD pdn; each of more changes the
// CREATE_MKEY mailbox last.
func (r *rig) freeMkeyPD(pdn uint32, maxEntries int, signature, rinval bool, more ...func(in []byte)) *tmkey {
	r.t.Helper()
	in := mbox(prm.CreateMkeyIn.Layout(), prm.MLX5_CMD_OP_CREATE_MKEY)
	mkc := prm.CreateMkeyIn.MemoryKeyMkeyEntry
	prm.Mkc.Free.At(mkc).Set(in, 1)
	prm.Mkc.UmrEn.At(mkc).Set(in, 1)
	prm.Mkc.Lr.At(mkc).Set(in, 1)
	prm.Mkc.AccessMode10.At(mkc).Set(in, accessModeKLMS)
	prm.Mkc.Qpn.At(mkc).Set(in, 0xffffff)
	prm.Mkc.Mkey70.At(mkc).Set(in, 0x5c)
	prm.Mkc.Pd.At(mkc).Set(in, uint64(pdn))
	prm.Mkc.TranslationsOctwordSize.At(mkc).Set(in, uint64((maxEntries+3)&^3))
	if rinval {
		prm.Mkc.EnRinval.At(mkc).Set(in, 1)
	}
	m := &tmkey{sig: signature}
	if signature {
		prm.Mkc.BsfEn.At(mkc).Set(in, 1)
		prm.Mkc.BsfOctwordSize.At(mkc).Set(in, 4)
		for _, p := range []*uint32{&m.memPSV, &m.wirePSV} {
			psv := mbox(prm.CreatePsvIn.Layout(), prm.MLX5_CMD_OP_CREATE_PSV)
			prm.CreatePsvIn.NumPsv.Set(psv, 1)
			prm.CreatePsvIn.Pd.Set(psv, uint64(pdn))
			*p = uint32(prm.CreatePsvOut.Psv0Index.Get(r.create(psv, 32)))
		}
	}
	for _, f := range more {
		f(in)
	}
	out := r.create(in, 16)
	m.key = uint32(prm.CreateMkeyOut.MkeyIndex.Get(out))<<8 | 0x5c
	return m
}

// mkeyState is a copy of the model's state of mkey key.
func (r *rig) mkeyState(key uint32) mkeyObj {
	r.d.h.mu.Lock()
	defer r.d.h.mu.Unlock()
	mk := *r.d.h.mkeys[key>>8]
	mk.mkc = append([]byte(nil), mk.mkc...)
	return mk
}

// psvFailed reports whether PSV n is in its ERROR state.
func (r *rig) psvFailed(n uint32) bool {
	r.d.h.mu.Lock()
	defer r.d.h.mu.Unlock()
	return r.d.h.psvs[n].failed
}

// configure posts an mkey configure work request built by the driver's
// encoder (access LW|RR|RW, signaled) and returns the counter of its last
// WQE, the one that completes.
func (q *tqp) configure(m *tmkey, c wqe.MkeyConfigure) uint16 {
	q.r.t.Helper()
	c.QPN, c.Mkey = q.qpn, m.key
	c.Flags |= wqe.SendInline | wqe.SendSignaled
	if !c.SetAccess {
		c.SetAccess, c.Access = true, wqe.AccessLocalWrite|wqe.AccessRemoteRead|wqe.AccessRemoteWrite
	}
	c.SigMkey, c.MemPSV, c.WirePSV = m.sig, m.memPSV, m.wirePSV
	c.UpdateSigErr = c.UpdateSigErr || m.umrs == 0
	if m.umrs > 0 {
		c.BSF = wqe.BSFSet
	}
	res, err := wqe.BuildMkeyConfigure(wqe.Ring(q.sq), q.sqPI, len(q.sq)/wqe.WQEBB, &c)
	if err != nil {
		q.r.t.Fatal(err)
	}
	m.umrs++
	idx := q.sqPI
	if res.PSVs > 0 {
		idx += uint16(res.WQEBBs - 1)
	}
	q.sqPI += uint16(res.WQEBBs)
	q.setDBR(1, uint32(q.sqPI))
	var db [8]byte
	binary.BigEndian.PutUint64(db[:], res.Doorbell)
	q.r.ringRaw(q.r.page, db[:])
	return idx
}

func TestUMRKLM(t *testing.T) {
	r := newRig(t, "cx6dx")
	_, b := pair(t, r, qpOpts{})
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	m1, k1 := r.mr(4096, all)
	m2, k2 := r.mr(4096, all)
	src, ks := r.mr(8192, all)
	pattern(src, 3)

	// Before the UMR the mkey is free: using it is a protection error.
	mk := r.freeMkey(4, false)
	idx := b.post(twqe{opcode: tOpRDMAWrite, hasRaddr: true, raddr: 0, rkey: mk.key, sges: []tsge{{16, ks.LKey, addr(src)}}})
	checkCQE(t, "RDMA WRITE to a free mkey", b.scq.next(), b.wantErr(13, 0x13, tOpRDMAWrite, idx, 0))

	a, b := pair(t, r, qpOpts{})
	umr := a.configure(mk, wqe.MkeyConfigure{List: []wqe.KLM{
		{Addr: addr(m1[100:]), ByteCount: 1000, Mkey: k1.LKey},
		{Addr: addr(m2), ByteCount: 3000, Mkey: k2.LKey},
	}})
	checkCQE(t, "UMR", a.scq.next(), a.wantReq(0x25, umr, 0, 0))
	st := r.mkeyState(mk.key)
	if prm.Mkc.Free.Get(st.mkc) != 0 || prm.Mkc.Len.Get(st.mkc) != 4000 || prm.Mkc.Rw.Get(st.mkc) != 1 || len(st.klms) != 2 {
		t.Fatalf("mkey after the UMR: mkc %x, klms %v", st.mkc, st.klms)
	}

	// RDMA WRITE through the KLM mkey: 500 bytes into m1, 1500 into m2.
	idx = b.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: 500, rkey: mk.key, sges: []tsge{{2000, ks.LKey, addr(src)}}})
	checkCQE(t, "RDMA WRITE through KLMs", b.scq.next(), b.wantReq(tOpRDMAWrite, idx, 0, 0))
	if !bytes.Equal(m1[600:1100], src[:500]) || !bytes.Equal(m2[:1500], src[500:2000]) {
		t.Error("RDMA WRITE through KLMs: the data is not where the KLMs point")
	}
	// RDMA READ of the whole mkey, and a SEND gathered through it.
	idx = b.post(twqe{opcode: tOpRDMARead, fm: tSignaled, hasRaddr: true, raddr: 0, rkey: mk.key, sges: []tsge{{4000, ks.LKey, addr(src[4096:])}}})
	checkCQE(t, "RDMA READ through KLMs", b.scq.next(), b.wantReq(tOpRDMARead, idx, 4000, 0))
	if !bytes.Equal(src[4096:5096], m1[100:1100]) || !bytes.Equal(src[5096:8096], m2[:3000]) {
		t.Error("RDMA READ through KLMs: wrong data")
	}
	ri := b.recv(tsge{64, ks.LKey, addr(src)})
	idx = a.post(twqe{opcode: tOpSend, fm: tSignaled, sges: []tsge{{64, mk.key, 980}}})
	checkCQE(t, "SEND from KLMs", b.rcq.next(), b.wantResp(2, ri, 64, 0, a.qpn, 0))
	checkCQE(t, "SEND", a.scq.next(), a.wantReq(tOpSend, idx, 0, 0))
	if !bytes.Equal(src[:20], m1[1080:1100]) || !bytes.Equal(src[20:64], m2[:44]) {
		t.Error("SEND gathered through KLMs: wrong data")
	}
	// Past the mkey's length: a remote access error.
	idx = b.post(twqe{opcode: tOpRDMAWrite, hasRaddr: true, raddr: 3990, rkey: mk.key, sges: []tsge{{20, ks.LKey, addr(src)}}})
	checkCQE(t, "RDMA WRITE past the mkey", b.scq.next(), b.wantErr(13, 0x13, tOpRDMAWrite, idx, 0))

	// An interleaved layout: 4 repetitions of 512 bytes of m1 then 8 of m2.
	a, b = pair(t, r, qpOpts{})
	mk2 := r.freeMkey(4, false)
	umr = a.configure(mk2, wqe.MkeyConfigure{Interleaved: []wqe.RepeatEntry{
		{Addr: addr(m1), ByteCount: 512, Mkey: k1.LKey},
		{Addr: addr(m2), ByteCount: 8, Mkey: k2.LKey},
	}, RepeatCount: 4})
	checkCQE(t, "UMR interleaved", a.scq.next(), a.wantReq(0x25, umr, 0, 0))
	pattern(m1, 4)
	pattern(m2, 5)
	idx = b.post(twqe{opcode: tOpRDMARead, fm: tSignaled, hasRaddr: true, raddr: 256, rkey: mk2.key, sges: []tsge{{4*520 - 256, ks.LKey, addr(src)}}})
	checkCQE(t, "RDMA READ interleaved", b.scq.next(), b.wantReq(tOpRDMARead, idx, 4*520-256, 0))
	var want []byte
	for i := range 4 {
		want = append(append(want, m1[512*i:512*i+512]...), m2[8*i:8*i+8]...)
	}
	if !bytes.Equal(src[:4*520-256], want[256:]) {
		t.Error("RDMA READ through a repeat block: wrong data")
	}

	// A UMR on an mkey of another PD, or without umr_en: protection
	// errors.
	a, _ = pair(t, r, qpOpts{})
	var bad wqe.MkeyConfigure
	bad.List = []wqe.KLM{{Addr: addr(m1), ByteCount: 64, Mkey: k1.LKey}}
	idx = a.configure(&tmkey{key: k1.LKey}, bad) // an MR's mkey: no umr_en
	checkCQE(t, "UMR on an MR", a.scq.next(), a.wantErr(13, 0x04, 0x25, idx, 0))

	if f := r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}

// TestSQWrap runs WQEs across the send queue's end and across the 16-bit
// counter's wrap: an inline SEND split by the ring's end, and a UMR with
// its SET_PSVs from counter 65534 (ring index 4094) on.
func TestSQWrap(t *testing.T) {
	r := newRig(t, "cx6dx")
	a, b := pair(t, r, qpOpts{logSQ: 12})
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	dst, kd := r.mr(8192, all)
	advance := func(to int) {
		for n := (to - int(a.sqPI)) & 0xffff; n > 0; {
			k := min(n, 4096)
			for i := range k {
				w := twqe{opcode: tOpNOP}
				if i == k-1 {
					w.fm = tSignaled
				}
				a.put(w.encode(a.qpn, a.sqPI))
			}
			a.ring(a.sqPI - 1)
			if c := a.scq.next(); c[63]>>4 != 0 {
				t.Fatalf("NOP: %x", c)
			}
			n -= k
		}
	}
	advance(4094)
	msg := make([]byte, 200)
	pattern(msg, 7)
	ri := b.recv(tsge{200, kd.LKey, addr(dst)})
	idx := a.post(twqe{opcode: tOpSend, fm: tSignaled, inline: msg})
	if idx != 4094 || a.sqPI != 4098 {
		t.Fatalf("the SEND is at %d..%d", idx, a.sqPI)
	}
	checkCQE(t, "receive across the ring's end", b.rcq.next(), b.wantResp(2, ri, 200, 0, a.qpn, 0))
	checkCQE(t, "SEND across the ring's end", a.scq.next(), a.wantReq(tOpSend, idx, 0, 0))
	if !bytes.Equal(dst[:200], msg) {
		t.Error("the inline data split by the ring's end arrived wrong")
	}

	advance(65534)
	data, kdata := r.mr(4096, all)
	pattern(data, 8)
	attr := &sig.BlockAttr{Wire: t10dif(sig.BlockSize4096, 77), CheckMask: 0xff}
	mk := r.freeMkey(1, true)
	last := a.configure(mk, wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(data), ByteCount: 4096, Mkey: kdata.LKey}}, Sig: attr})
	if last != 2 || a.sqPI != 3 { // UMR 65534..1, SET_PSV 2
		t.Fatalf("the configure ends at %d, counter %d", last, a.sqPI)
	}
	checkCQE(t, "UMR across the counter's wrap", a.scq.next(), a.wantReq(0x20, 2, 0, 0))
	idx = a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kd.RKey, sges: []tsge{{4104, mk.key, 0}}})
	checkCQE(t, "RDMA WRITE through it", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
	eng, _ := sig.NewEngine(attr)
	want := make([]byte, 4104)
	eng.Transfer(sig.TX, want, data)
	if !bytes.Equal(dst[:4104], want) {
		t.Error("the signature mkey configured across the wrap inserts the wrong PI")
	}
	if f := r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}

// t10dif is a T10-DIF domain with reference tags counting per block.
func t10dif(bs sig.BlockSize, ref uint32) *sig.Domain {
	return &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: bs,
		T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x1234, RefTag: ref, Flags: sig.T10DIFRefRemap}}
}

// decodeSigErr reads a SIG_ERR CQE (struct mlx5_sig_err_cqe) the way
// libmlx5's mlx5dv_mkey_check reports it, as the oracle's mkey_check
// records pin down: the reference tag syndrome wins over the application
// tag, which wins over the guard; a T10-DIF guard is the top 16 bits of
// the transaction signature, an application tag its low 16, a 32-bit CRC
// all of it, a CRC64 the signature and reference tag words together.
func decodeSigErr(c []byte, d *sig.Domain) (typ sig.MkeyErrType, actual, expected, offset uint64) {
	expTrans, actTrans := binary.BigEndian.Uint32(c[16:]), binary.BigEndian.Uint32(c[20:])
	expRef, actRef := binary.BigEndian.Uint32(c[24:]), binary.BigEndian.Uint32(c[28:])
	syn := binary.BigEndian.Uint16(c[32:])
	offset = binary.BigEndian.Uint64(c[40:])
	switch {
	case syn&0x0800 != 0:
		return sig.MkeyErrBadRefTag, uint64(actRef), uint64(expRef), offset
	case syn&0x1000 != 0:
		return sig.MkeyErrBadAppTag, uint64(actTrans & 0xffff), uint64(expTrans & 0xffff), offset
	case syn&0x2000 != 0:
		switch {
		case d.Type == sig.SigTypeT10DIF:
			return sig.MkeyErrBadGuard, uint64(actTrans >> 16), uint64(expTrans >> 16), offset
		case d.CRC.Type == sig.CRCTypeCRC64XP10:
			return sig.MkeyErrBadGuard, uint64(actTrans)<<32 | uint64(actRef), uint64(expTrans)<<32 | uint64(expRef), offset
		}
		return sig.MkeyErrBadGuard, uint64(actTrans), uint64(expTrans), offset
	}
	return sig.MkeyNoErr, 0, 0, 0
}

// checkSigErr compares a SIG_ERR CQE with the error sig's engine finds.
func checkSigErr(t *testing.T, c []byte, key, qpn uint32, want sig.MkeyErr, d *sig.Domain, owner uint8) {
	t.Helper()
	if c[63] != 12<<4|owner || c[34] != 0 || c[35] != uint8(want.Domain) ||
		binary.BigEndian.Uint32(c[36:]) != key || binary.BigEndian.Uint32(c[56:]) != qpn {
		t.Errorf("SIG_ERR CQE %x: want op_own %#x, block sig_type, domain %d, mkey %#x, qpn %#x", c, 12<<4|owner, want.Domain, key, qpn)
	}
	typ, act, exp, off := decodeSigErr(c, d)
	if typ != want.Type || act != want.Actual || exp != want.Expected || off != want.Offset {
		t.Errorf("SIG_ERR CQE decodes to %v actual %#x expected %#x offset %#x; the engine found %v", typ, act, exp, off, want)
	}
}

func TestSignatureMkeys(t *testing.T) {
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	t.Run("insert", func(t *testing.T) {
		// Memory plain, wire T10-DIF: the requester's gather inserts PI.
		r := newRig(t, "cx6dx")
		a, b := pair(t, r, qpOpts{})
		data, kd := r.mr(4096, all)
		dst, kdst := r.mr(8192, all)
		pattern(data, 6)
		attr := &sig.BlockAttr{Wire: t10dif(sig.BlockSize512, 100), CheckMask: 0xff}
		mk := r.freeMkey(1, true)
		a.configure(mk, wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(data), ByteCount: 4096, Mkey: kd.LKey}}, Sig: attr})
		a.scq.next()
		idx := a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kdst.RKey, sges: []tsge{{8 * 520, mk.key, 0}}})
		checkCQE(t, "RDMA WRITE with PI inserted", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
		eng, err := sig.NewEngine(attr)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, 8*520)
		if e, err := eng.Transfer(sig.TX, want, data); err != nil || !e.OK() {
			t.Fatal(e, err)
		}
		if !bytes.Equal(dst[:len(want)], want) {
			t.Error("the remote buffer does not hold the data with the PI sig's engine generates")
		}
		// From the middle of the mkey: the reference tags go on from
		// block 2; and an RDMA READ from the signature mkey as an rkey
		// inserts the same way at the responder.
		clear(dst)
		idx = a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kdst.RKey, sges: []tsge{{2 * 520, mk.key, 2 * 520}}})
		checkCQE(t, "RDMA WRITE from block 2", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
		if !bytes.Equal(dst[:2*520], want[2*520:4*520]) {
			t.Error("RDMA WRITE from block 2: wrong reference tags")
		}
		clear(dst)
		idx = b.post(twqe{opcode: tOpRDMARead, fm: tSignaled, hasRaddr: true, raddr: 520, rkey: mk.key, sges: []tsge{{3 * 520, kdst.LKey, addr(dst)}}})
		checkCQE(t, "RDMA READ from a signature mkey", b.scq.next(), b.wantReq(tOpRDMARead, idx, 3*520, 0))
		if !bytes.Equal(dst[:3*520], want[520:4*520]) {
			t.Error("RDMA READ from a signature mkey: wrong wire bytes")
		}
		if f := r.d.Faults(); len(f) != 0 {
			t.Errorf("faults: %q", f)
		}
	})
	t.Run("strip", func(t *testing.T) {
		// Memory T10-DIF, wire plain: the gather checks and strips the PI.
		r := newRig(t, "cx6dx")
		a, _ := pair(t, r, qpOpts{drainSigerr: true})
		mem, km := r.mr(8*520, all)
		dst, kdst := r.mr(8192, all)
		attr := &sig.BlockAttr{Mem: t10dif(sig.BlockSize512, 7), CheckMask: 0xff}
		eng, err := sig.NewEngine(attr)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			pattern(mem[520*i:520*i+512], uint64(10+i))
		}
		if err := eng.Generate(sig.DomainMemory, mem); err != nil {
			t.Fatal(err)
		}
		mk := r.freeMkey(1, true)
		a.configure(mk, wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(mem), ByteCount: 8 * 520, Mkey: km.LKey}}, Sig: attr})
		a.scq.next()
		idx := a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kdst.RKey, sges: []tsge{{8 * 512, mk.key, 0}}})
		checkCQE(t, "RDMA WRITE with PI stripped", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
		for i := range 8 {
			if !bytes.Equal(dst[512*i:512*i+512], mem[520*i:520*i+512]) {
				t.Fatalf("block %d: the PI was not stripped", i)
			}
		}
		// Corrupt block 5's data: its guard no longer matches. The WRITE
		// completes, after a SIG_ERR CQE on the requester's send CQ,
		// and with drain_sigerr the send queue stops: it drains, enters
		// SQD and raises SQ_DRAINED.
		ch := newChannel(t, r.d)
		if err := r.d.Subscribe(ch, a.h, []uint16{evSQDrained}, 5); err != nil {
			t.Fatal(err)
		}
		mem[5*520+17] ^= 0x40
		want := make([]byte, 8*512)
		wantErr, err := eng.Transfer(sig.TX, want, mem)
		if err != nil || wantErr.Type != sig.MkeyErrBadGuard || wantErr.Offset != 5*520 {
			t.Fatalf("the engine finds %v, %v", wantErr, err)
		}
		idx = a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kdst.RKey, sges: []tsge{{8 * 512, mk.key, 0}}})
		nop := a.post(twqe{opcode: tOpNOP, fm: tSignaled})
		checkSigErr(t, a.scq.next(), mk.key, a.qpn, wantErr, attr.Mem, 0)
		checkCQE(t, "RDMA WRITE after the signature error", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
		if !bytes.Equal(dst[:8*512], want) {
			t.Error("the corrupted transfer did not complete as the engine's")
		}
		ev := nextEvent(t, ch, mustCome)
		if _, qpn := ev.qpSrq(); ev.cookie != 5 || ev.typ != evSQDrained || qpn != a.qpn {
			t.Errorf("event %+v, want SQ_DRAINED for QP %#x", ev, a.qpn)
		}
		// What mlx5dv_qp_cancel_posted_send_wrs reads: state SQD (0x5),
		// and hw_sq_wqebb_counter at the first WQE that did not run.
		in := mbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
		prm.QueryQpIn.Qpn.Set(in, uint64(a.qpn))
		out := prm.QueryQpOut.Layout().New()
		if err := r.d.ObjQuery(a.h, in, out); err != nil {
			t.Fatal(err)
		}
		qpc := prm.QueryQpOut.Qpc
		if st, ci := prm.Qpc.State.At(qpc).Get(out), prm.Qpc.HwSqWqebbCounter.At(qpc).Get(out); st != 0x5 || ci != uint64(nop) {
			t.Errorf("QUERY_QP: state %#x, hw_sq_wqebb_counter %d; want 0x5 and %d", st, ci, nop)
		}
		a.scq.none(2 * time.Millisecond)
		if !r.psvFailed(mk.memPSV) || r.psvFailed(mk.wirePSV) || r.mkeyState(mk.key).reported != 1 {
			t.Errorf("after the error: memory PSV failed %v, wire PSV failed %v, the mkey's count %d; want true, false, 1",
				r.psvFailed(mk.memPSV), r.psvFailed(mk.wirePSV), r.mkeyState(mk.key).reported)
		}
		// SQD -> RTS resumes the queue: the NOP runs.
		a.modify(prm.MLX5_CMD_OP_SQD_RTS_QP, nil)
		checkCQE(t, "NOP after SQD->RTS", a.scq.next(), a.wantReq(tOpNOP, nop, 0, 0))
		// A UMR with the SIG_ERR mask bit and the block's SET_PSVs re-arm
		// the mkey: expected_sigerr_count is the next count, the PSV is
		// out of its error state.
		a.configure(mk, wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(mem), ByteCount: 8 * 520, Mkey: km.LKey}}, Sig: attr,
			UpdateSigErr: true, SigErrs: 1})
		a.scq.next()
		if r.psvFailed(mk.memPSV) || prm.Mkc.ExpectedSigerrCount.Get(r.mkeyState(mk.key).mkc) != 0 {
			t.Errorf("after a UMR with SIG_ERR and SET_PSVs: memory PSV failed %v, expected_sigerr_count %d; want false, 0",
				r.psvFailed(mk.memPSV), prm.Mkc.ExpectedSigerrCount.Get(r.mkeyState(mk.key).mkc))
		}
	})
	t.Run("responder", func(t *testing.T) {
		// An RDMA WRITE into a signature rkey (wire T10-DIF, memory
		// plain): the responder checks and strips; a bad reference tag
		// is a SIG_ERR CQE on the responder's receive CQ.
		r := newRig(t, "cx7")
		a, b := pair(t, r, qpOpts{})
		const blk = 4096 + 8
		wire, kw := r.mr(4*blk, all)
		mem, km := r.mr(4*4096, all)
		attr := &sig.BlockAttr{Wire: t10dif(sig.BlockSize4096, 0x1000), CheckMask: 0xff}
		eng, _ := sig.NewEngine(attr)
		for i := range 4 {
			pattern(wire[blk*i:blk*i+4096], uint64(20+i))
		}
		if err := eng.Generate(sig.DomainWire, wire); err != nil {
			t.Fatal(err)
		}
		mk := r.freeMkey(1, true)
		b.configure(mk, wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(mem), ByteCount: 4 * 4096, Mkey: km.LKey}}, Sig: attr})
		b.scq.next()
		binary.BigEndian.PutUint32(wire[2*blk+4096+4:], 0xdeadbeef) // block 2's reference tag
		want := make([]byte, 3*4096)
		wantErr, err := eng.TransferAt(sig.RX, want, wire[blk:], 4096)
		if err != nil || wantErr.Type != sig.MkeyErrBadRefTag {
			t.Fatal(wantErr, err)
		}
		idx := a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: blk, rkey: mk.key, sges: []tsge{{3 * blk, kw.LKey, addr(wire[blk:])}}})
		checkSigErr(t, b.rcq.next(), mk.key, b.qpn, wantErr, attr.Wire, 0)
		checkCQE(t, "RDMA WRITE into a signature rkey", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
		if !bytes.Equal(mem[4096:], want) {
			t.Error("the responder's memory does not hold the stripped data")
		}
		a.scq.none(time.Millisecond)
	})
	t.Run("read scatter", func(t *testing.T) {
		// An RDMA READ of wire-format data into a local signature mkey
		// (wire CRC32C, memory plain): the requester checks and strips
		// as it scatters; a bad CRC is a SIG_ERR CQE on its send CQ, and
		// without drain_sigerr the queue goes on.
		r := newRig(t, "cx6dx")
		a, _ := pair(t, r, qpOpts{})
		attr := &sig.BlockAttr{Wire: &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize512,
			CRC: &sig.CRC{Type: sig.CRCTypeCRC32C, Seed: 0xffffffff}}, CheckMask: 0xf0}
		eng, _ := sig.NewEngine(attr)
		remote, kr := r.mr(4*516, all)
		local, kl := r.mr(4*512, all)
		for i := range 4 {
			pattern(remote[516*i:516*i+512], uint64(30+i))
		}
		if err := eng.Generate(sig.DomainWire, remote); err != nil {
			t.Fatal(err)
		}
		remote[3*516+513] ^= 1 // block 3's CRC
		mk := r.freeMkey(1, true)
		a.configure(mk, wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(local), ByteCount: 4 * 512, Mkey: kl.LKey}}, Sig: attr})
		a.scq.next()
		want := make([]byte, 4*512)
		wantErr, _ := eng.Transfer(sig.RX, want, remote)
		if wantErr.Type != sig.MkeyErrBadGuard || wantErr.Offset != 3*516 {
			t.Fatalf("the engine finds %v", wantErr)
		}
		idx := a.post(twqe{opcode: tOpRDMARead, fm: tSignaled, hasRaddr: true, raddr: addr(remote), rkey: kr.RKey, sges: []tsge{{4 * 516, mk.key, 0}}})
		checkSigErr(t, a.scq.next(), mk.key, a.qpn, wantErr, attr.Wire, 0)
		checkCQE(t, "RDMA READ into a signature lkey", a.scq.next(), a.wantReq(tOpRDMARead, idx, 4*516, 0))
		if !bytes.Equal(local, want) {
			t.Error("the local memory does not hold the stripped data")
		}
		idx = a.post(twqe{opcode: tOpNOP, fm: tSignaled})
		checkCQE(t, "NOP after the signature error", a.scq.next(), a.wantReq(tOpNOP, idx, 0, 0))
	})
}

// fuzzMR is the key of FuzzWQE's MR (start address 0).
const fuzzMR = (firstMkey + 1) << 8

// FuzzWQE runs arbitrary bytes as the send queue of an RC QP in RTS (and
// its peer's receive queue): the model may refuse them with error
// completions, but must not panic, and must consume what it is given.
func FuzzWQE(f *testing.F) {
	nop := twqe{opcode: tOpNOP, fm: tSignaled}.encode(0, 0)
	send := twqe{opcode: tOpSend, inline: []byte("seed")}.encode(0, 0)
	write := twqe{opcode: tOpRDMAWrite, hasRaddr: true, sges: []tsge{{64, 0x10001, 0}}}.encode(0, 0)
	// A signature UMR and an interleaved one on the fuzz QP's mkey
	// (firstMkey, variant 0) over its MR (key fuzzMR).
	umr := make([]byte, 64*16)
	ring := wqe.Ring(umr)
	attr := &sig.BlockAttr{Mem: t10dif(sig.BlockSize512, 1), Wire: &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize512,
		CRC: &sig.CRC{Type: sig.CRCTypeCRC64XP10}}, CheckMask: 0xff}
	res, err := wqe.BuildMkeyConfigure(ring, 0, len(ring)/wqe.WQEBB, &wqe.MkeyConfigure{QPN: firstQPN, Mkey: firstMkey << 8, Flags: wqe.SendInline | wqe.SendSignaled,
		SetAccess: true, Access: wqe.AccessLocalWrite | wqe.AccessRemoteRead | wqe.AccessRemoteWrite,
		List: []wqe.KLM{{Addr: 0, ByteCount: 8 * 520, Mkey: fuzzMR}}, Sig: attr, MemPSV: firstPSV, WirePSV: firstPSV + 1, SigMkey: true, UpdateSigErr: true})
	if err != nil {
		f.Fatal(err)
	}
	write2 := twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, rkey: fuzzMR, sges: []tsge{{7 * 520, firstMkey << 8, 520}}}.encode(firstQPN, uint16(res.WQEBBs))
	copy(umr[64*res.WQEBBs:], write2)
	il := make([]byte, 64*16)
	res2, err := wqe.BuildMkeyConfigure(wqe.Ring(il), 0, len(il)/wqe.WQEBB, &wqe.MkeyConfigure{QPN: firstQPN, Mkey: firstMkey << 8, Flags: wqe.SendInline,
		SetAccess: true, Access: wqe.AccessLocalWrite | wqe.AccessRemoteRead | wqe.AccessRemoteWrite, Interleaved: []wqe.RepeatEntry{{Addr: 0, ByteCount: 512, Mkey: fuzzMR}, {Addr: 8192, ByteCount: 8, Mkey: fuzzMR}}, RepeatCount: 8})
	if err != nil {
		f.Fatal(err)
	}
	read := twqe{opcode: tOpRDMARead, fm: tSignaled, hasRaddr: true, rkey: firstMkey << 8, sges: []tsge{{520 * 8, fuzzMR, 0}}}.encode(firstQPN, uint16(res2.WQEBBs))
	copy(il[64*res2.WQEBBs:], read)
	for _, s := range [][]byte{nop, send, write} {
		f.Add(s, uint8(1))
	}
	f.Add(umr, uint8(res.WQEBBs)) // the configure and the WRITE
	f.Add(il, uint8(res2.WQEBBs)) // the configure and the READ
	f.Fuzz(func(t *testing.T, b []byte, wqebbs uint8) {
		h := newHCA(profiles["cx7"])
		h.mu.Lock()
		defer h.mu.Unlock()
		mem := make([]byte, 64*16+16*16+16)
		pd, cq := uint32(firstPDN), uint32(firstCQN)
		h.pds[pd] = &pdObj{uid: 1}
		cqc := prm.Cqc.Layout().New()
		prm.Cqc.LogCqSize.Set(cqc, 4)
		h.cqs[cq] = &cqObj{uid: 1, cqc: cqc, buf: make([]byte, 64*16)}
		qpc := prm.Qpc.Layout().New()
		prm.Qpc.LogSqSize.Set(qpc, 4)
		prm.Qpc.LogRqSize.Set(qpc, 4)
		prm.Qpc.State.Set(qpc, StateRTS)
		prm.Qpc.RemoteQpn.Set(qpc, firstQPN)
		prm.Qpc.CqnSnd.Set(qpc, uint64(cq))
		prm.Qpc.CqnRcv.Set(qpc, uint64(cq))
		prm.Qpc.Rre.Set(qpc, 1)
		prm.Qpc.Rwe.Set(qpc, 1)
		q := &qpObj{uid: 1, qpn: firstQPN, qpc: qpc, pdn: pd, wq: mem[:64*16+16*16], dbr: mem[64*16+16*16:]}
		q.rq, q.sq = wqGeometry(qpc)
		h.qps[firstQPN] = q
		// A free signature mkey for UMRs, two PSVs, and an MR over 16 KiB.
		mkc := prm.Mkc.Layout().New()
		prm.Mkc.Free.Set(mkc, 1)
		prm.Mkc.UmrEn.Set(mkc, 1)
		prm.Mkc.AccessMode10.Set(mkc, accessModeKLMS)
		prm.Mkc.BsfEn.Set(mkc, 1)
		prm.Mkc.BsfOctwordSize.Set(mkc, 4)
		prm.Mkc.TranslationsOctwordSize.Set(mkc, 4)
		prm.Mkc.Qpn.Set(mkc, 0xffffff)
		h.mkeys[firstMkey] = &mkeyObj{uid: 1, pdn: pd, mkc: mkc}
		h.psvs[firstPSV] = &psvObj{uid: 1, pdn: pd}
		h.psvs[firstPSV+1] = &psvObj{uid: 1, pdn: pd}
		mr := make([]byte, 16384)
		mrc := prm.Mkc.Layout().New()
		prm.Mkc.AccessMode10.Set(mrc, accessModeMTT)
		for _, f := range []prm.Field{prm.Mkc.Lr, prm.Mkc.Lw, prm.Mkc.Rr, prm.Mkc.Rw} {
			f.Set(mrc, 1)
		}
		prm.Mkc.Len.Set(mrc, uint64(len(mr)))
		h.mkeys[fuzzMR>>8] = &mkeyObj{uid: 1, pdn: pd, mkc: mrc, mem: mr, verbs: true}
		copy(q.wq[q.sq.off:], b)
		copy(q.wq[:q.sq.off], b) // the receive queue too
		n := uint16(wqebbs%16) + 1
		binary.BigEndian.PutUint32(q.dbr[4:], uint32(n))
		binary.BigEndian.PutUint32(q.dbr[0:], uint32(wqebbs>>4))
		h.runSQ(q)
		if n-q.sqCI > n {
			t.Errorf("the hardware's counter %d passed the producer's %d", q.sqCI, n)
		}
		if q.state() == StateRTS && q.rnr == nil && q.sqCI != n && len(h.faults) == 0 {
			t.Errorf("the QP stopped at %d of %d WQEBBs with no reason", q.sqCI, n)
		}
	})
}

// TestSignatureWireLengths pins down that an SGE, a remote address and a
// length through a signature mkey count wire-domain bytes, and what a
// range that ends inside a block does.
func TestSignatureWireLengths(t *testing.T) {
	all := uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)
	crc32 := func(seed uint64) *sig.Domain {
		return &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize512, CRC: &sig.CRC{Type: sig.CRCTypeCRC32, Seed: seed}}
	}
	t.Run("memory signature, wire plain", func(t *testing.T) {
		// rdma-core's test_mkey_sig_err: a 516-byte layout with a CRC32
		// memory signature that was never generated, and a 512-byte
		// SEND: the block is gathered whole, its CRC checked and
		// stripped; the SEND succeeds and the check fails.
		r := newRig(t, "cx6dx")
		a, b := pair(t, r, qpOpts{})
		mem, km := r.mr(516, all)
		dst, kd := r.mr(1024, all)
		pattern(mem, 40)
		attr := &sig.BlockAttr{Mem: crc32(0xffffffff), CheckMask: sig.MaskCRC32}
		eng, _ := sig.NewEngine(attr)
		wantErr, _ := eng.Check(sig.DomainMemory, mem)
		if wantErr.Type != sig.MkeyErrBadGuard {
			t.Fatalf("the engine finds %v", wantErr)
		}
		mk := r.freeMkey(1, true)
		a.configure(mk, wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(mem), ByteCount: 516, Mkey: km.LKey}}, Sig: attr})
		a.scq.next()
		ri := b.recv(tsge{1024, kd.LKey, addr(dst)})
		idx := a.post(twqe{opcode: tOpSend, fm: tSignaled, sges: []tsge{{512, mk.key, 0}}})
		checkCQE(t, "receive", b.rcq.next(), b.wantResp(2, ri, 512, 0, a.qpn, 0))
		checkSigErr(t, a.scq.next(), mk.key, a.qpn, wantErr, attr.Mem, 0)
		checkCQE(t, "SEND", a.scq.next(), a.wantReq(tOpSend, idx, 0, 0))
		if !bytes.Equal(dst[:512], mem[:512]) {
			t.Error("the data did not arrive")
		}
		// 516 wire bytes need a second memory block: past the layout.
		idx = a.post(twqe{opcode: tOpSend, fm: tSignaled, sges: []tsge{{516, mk.key, 0}}})
		checkCQE(t, "SEND past the layout", a.scq.next(), a.wantErr(13, SyndromeLocalProt, tOpSend, idx, 0))
	})
	t.Run("wire signature, memory plain", func(t *testing.T) {
		r := newRig(t, "cx6dx")
		a, b := pair(t, r, qpOpts{})
		data, kdata := r.mr(1024, all)
		pattern(data, 41)
		attr := &sig.BlockAttr{Wire: t10dif(sig.BlockSize512, 9), CheckMask: 0xff}
		eng, _ := sig.NewEngine(attr)
		wire := make([]byte, 2*520)
		if me, err := eng.Transfer(sig.TX, wire, data); err != nil || !me.OK() {
			t.Fatal(me, err)
		}
		tx := r.freeMkey(1, true)
		a.configure(tx, wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(data), ByteCount: 1024, Mkey: kdata.LKey}}, Sig: attr})
		a.scq.next()
		mem, kmem := r.mr(1024, all)
		rx := r.freeMkey(1, true)
		b.configure(rx, wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(mem), ByteCount: 1024, Mkey: kmem.LKey}}, Sig: attr})
		b.scq.next()
		// Two whole wire blocks (1040 bytes over a 1024-byte layout):
		// inserted by the sender, checked and stripped by the receiver.
		ri := b.recv(tsge{1040, rx.key, 0})
		idx := a.post(twqe{opcode: tOpSend, fm: tSignaled, sges: []tsge{{1040, tx.key, 0}}})
		checkCQE(t, "receive", b.rcq.next(), b.wantResp(2, ri, 1040, 0, a.qpn, 0))
		checkCQE(t, "SEND", a.scq.next(), a.wantReq(tOpSend, idx, 0, 0))
		if !bytes.Equal(mem, data) {
			t.Error("the receiver's memory does not hold the data")
		}
		// rdma-core's test_mkey_sig_t10dif sends 512 bytes: the first
		// block's data without its PI, which nobody checks.
		clear(mem)
		ri = b.recv(tsge{512, rx.key, 0})
		idx = a.post(twqe{opcode: tOpSend, fm: tSignaled, sges: []tsge{{512, tx.key, 0}}})
		checkCQE(t, "receive of 512", b.rcq.next(), b.wantResp(2, ri, 512, 0, a.qpn, 0))
		checkCQE(t, "SEND of 512", a.scq.next(), a.wantReq(tOpSend, idx, 0, 0))
		if !bytes.Equal(mem[:512], data[:512]) || !zero(mem[512:]) {
			t.Error("512 wire bytes: the receiver's memory does not hold the first block's data alone")
		}
		// A range ending inside a PI: the block's PI is generated and
		// cut; the receiver, missing part of it, checks nothing.
		dst, kd := r.mr(2048, all)
		idx = a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kd.RKey, sges: []tsge{{520 + 516, tx.key, 0}}})
		checkCQE(t, "RDMA WRITE ending inside a PI", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
		if !bytes.Equal(dst[:1036], wire[:1036]) {
			t.Error("a range ending inside a PI: wrong wire bytes")
		}
		clear(mem)
		dst[1033] ^= 1 // in the second block's cut PI
		idx = a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: 0, rkey: rx.key, sges: []tsge{{1036, kd.LKey, addr(dst)}}})
		checkCQE(t, "RDMA WRITE of a cut PI", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
		if !bytes.Equal(mem, data) {
			t.Error("a cut PI: the data did not arrive")
		}
		b.rcq.none(time.Millisecond)
		// A start inside a block is a protection error.
		idx = a.post(twqe{opcode: tOpSend, fm: tSignaled, sges: []tsge{{8, tx.key, 512}}})
		checkCQE(t, "SEND from inside a block", a.scq.next(), a.wantErr(13, SyndromeLocalProt, tOpSend, idx, 0))
		if f := r.d.Faults(); len(f) != 0 {
			t.Errorf("faults: %q", f)
		}
	})
	t.Run("different block sizes", func(t *testing.T) {
		// Memory T10-DIF per 512 bytes, wire CRC32 per 4096: 2000 wire
		// bytes end inside the first wire block. The three memory blocks
		// whose data and PI were gathered are checked; the wire block is
		// never complete, so it has no CRC.
		r := newRig(t, "cx7")
		a, _ := pair(t, r, qpOpts{})
		mem, km := r.mr(8*520, all)
		dst, kd := r.mr(4100, all)
		attr := &sig.BlockAttr{Mem: t10dif(sig.BlockSize512, 3), Wire: &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize4096,
			CRC: &sig.CRC{Type: sig.CRCTypeCRC32, Seed: 0xffffffff}}, CheckMask: 0xff}
		eng, _ := sig.NewEngine(attr)
		for i := range 8 {
			pattern(mem[520*i:520*i+512], uint64(50+i))
		}
		if err := eng.Generate(sig.DomainMemory, mem); err != nil {
			t.Fatal(err)
		}
		mem[520+3] ^= 0x10 // block 1's data
		wantErr, _ := eng.Check(sig.DomainMemory, mem)
		mk := r.freeMkey(1, true)
		a.configure(mk, wqe.MkeyConfigure{List: []wqe.KLM{{Addr: addr(mem), ByteCount: 8 * 520, Mkey: km.LKey}}, Sig: attr})
		a.scq.next()
		idx := a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kd.RKey, sges: []tsge{{2000, mk.key, 0}}})
		checkSigErr(t, a.scq.next(), mk.key, a.qpn, wantErr, attr.Mem, 0)
		checkCQE(t, "RDMA WRITE of part of a wire block", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
		for i := range 3 {
			if !bytes.Equal(dst[512*i:512*i+512], mem[520*i:520*i+512]) {
				t.Errorf("block %d's data did not arrive", i)
			}
		}
		if !bytes.Equal(dst[1536:2000], mem[3*520:3*520+464]) {
			t.Error("block 3's data did not arrive")
		}
		// The whole wire block: eight memory blocks, one CRC. Block 1 fails
		// again, but the memory PSV, in its error state since the first
		// report, ignores it: no SIG_ERR CQE ("Signature errors").
		want := make([]byte, 4100)
		eng.Transfer(sig.TX, want, mem)
		idx = a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kd.RKey, sges: []tsge{{4100, mk.key, 0}}})
		checkCQE(t, "RDMA WRITE of the wire block", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
		if !bytes.Equal(dst, want) {
			t.Error("the whole wire block differs from the engine's transfer")
		}
	})
}
