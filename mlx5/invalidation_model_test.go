package mlx5_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/sig"
)

// Invalidation end to end on the model, through the public API: LOCAL_INV
// of a signature mkey and SEND with invalidate of a peer's mkey.

// Offsets in the rig's registered buffer.
const (
	invData   = 0     // 4 blocks of 512 bytes: the signature mkey's memory
	invWire   = 8192  // the wire form (data and PI) an RDMA WRITE lands in
	invSrc    = 16384 // wire bytes to write into the mkey
	invMsg    = 24576 // a SEND's bytes
	invRecv   = 28672 // a receive buffer
	invPlain  = 32768 // 64 bytes behind a plain mkey
	invBlocks = 4
)

// pair creates two RC QPs on pd and the rig's CQ, connected to each
// other, each able to configure mkeys of one entry.
func (r *rig) pair(t *testing.T, pd *mlx5.PD) (a, b *mlx5.QP) {
	t.Helper()
	o := mlx5.QPOptions{PD: pd, SendCQ: r.cq, RecvCQ: r.cq, MaxSendWR: 16, MaxSendSGE: 1, MaxRecvWR: 4, MaxRecvSGE: 1,
		MkeyConfigure: true, MaxMkeyEntries: 1}
	var err error
	if a, err = r.c.CreateQP(o); err != nil {
		t.Fatal(err)
	}
	if b, err = r.c.CreateQP(o); err != nil {
		t.Fatal(err)
	}
	path, err := r.c.LoopbackPath(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(b.QPN(), path); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(a.QPN(), path); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// expect polls for exactly the completions want, in any order, matched
// by QP and wr_id, with the fields the check compares.
func (r *rig) expect(t *testing.T, what string, want ...mlx5.Completion) []mlx5.Completion {
	t.Helper()
	got, err := r.poll(t, len(want), 5*time.Second)
	if err != nil {
		t.Fatalf("%s: poll: %v", what, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: completions %+v, want %+v", what, got, want)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if g.QPN == w.QPN && g.WrID == w.WrID {
				found = true
				if g.Status != w.Status || g.Opcode != w.Opcode || g.WithInv != w.WithInv || g.InvalidatedRkey != w.InvalidatedRkey ||
					(w.ByteLen != 0 && g.ByteLen != w.ByteLen) {
					t.Errorf("%s: completion %+v, want %+v", what, g, w)
				}
			}
		}
		if !found {
			t.Errorf("%s: no completion of QP %#x wr_id %#x in %+v", what, w.QPN, w.WrID, got)
		}
	}
	return got
}

func (r *rig) at(off int) uint64 { return r.mr.Addr() + uint64(off) }

func invT10DIF(ref uint32) *sig.BlockAttr {
	return &sig.BlockAttr{Wire: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
		T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x77, RefTag: ref, Flags: sig.T10DIFRefRemap}},
		CheckMask: sig.MaskT10DIFGuard | sig.MaskT10DIFAppTag | sig.MaskT10DIFRefTag}
}

// TestLocalInvSignatureMkeyOnModel: a signature mkey configured, written
// through both ways, invalidated by LOCAL_INV (its own completion,
// WCLocalInv); then an RDMA WRITE to its rkey fails with a remote access
// error and a gather through its lkey with a local protection error. A
// configure without a signature block (what a storage target posts for
// the next I/O on the same mkey) makes it usable again, with the
// signature it had, which the device kept: PI inserted and checked as
// before, a corrupted guard reported by Check. Then a configure with a
// new signature block.
func TestLocalInvSignatureMkeyOnModel(t *testing.T) {
	r := newRig(t, "cx6dx", model.Options{}, 64)
	mem := r.buf.Bytes()
	data := mem[invData : invData+invBlocks*512]
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	attr := invT10DIF(0x10)
	eng, err := sig.NewEngine(attr)
	if err != nil {
		t.Fatal(err)
	}
	wire := make([]byte, invBlocks*520)
	if me, err := eng.Transfer(sig.TX, wire, data); err != nil || !me.OK() {
		t.Fatal(me, err)
	}
	m, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
	if err != nil {
		t.Fatal(err)
	}
	layout := []mlx5.KLM{{Addr: r.at(invData), ByteCount: invBlocks * 512, Mkey: r.mr.LKey()}}
	access := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead

	configure := func(qp *mlx5.QP, wrID uint64, s *sig.BlockAttr) {
		t.Helper()
		if err := qp.PostMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: wrID, Mkey: m, Flags: mlx5.SendSignaled, SetAccess: true,
			Access: access, List: layout, Sig: s}); err != nil {
			t.Fatal(err)
		}
		r.expect(t, "configure", mlx5.Completion{WrID: wrID, QPN: qp.QPN(), Opcode: mlx5.WCUMR})
	}
	// insert: a RDMA-writes the mkey's memory domain to invWire, PI
	// inserted on the way.
	insert := func(a *mlx5.QP, wrID uint64, want []byte) {
		t.Helper()
		clear(mem[invWire : invWire+len(want)])
		if err := a.PostSend(&mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
			RemoteAddr: r.at(invWire), RKey: r.mr.RKey(), SGL: []mlx5.SGE{{Addr: 0, Length: invBlocks * 520, LKey: m.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		r.expect(t, "insert", mlx5.Completion{WrID: wrID, QPN: a.QPN(), Opcode: mlx5.WCRDMAWrite})
		if !bytes.Equal(mem[invWire:invWire+len(want)], want) {
			t.Errorf("wr %#x: the wire bytes are not the engine's", wrID)
		}
	}
	// strip: b RDMA-writes wire bytes into the mkey's rkey, the PI checked
	// and stripped; Check reports what the device found.
	strip := func(b *mlx5.QP, wrID uint64, in []byte, want sig.MkeyErr) {
		t.Helper()
		copy(mem[invSrc:], in)
		clear(data)
		if err := b.PostSend(&mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
			RemoteAddr: 0, RKey: m.RKey(), SGL: []mlx5.SGE{{Addr: r.at(invSrc), Length: uint32(len(in)), LKey: r.mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		r.expect(t, "strip", mlx5.Completion{WrID: wrID, QPN: b.QPN(), Opcode: mlx5.WCRDMAWrite})
		got, err := m.Check()
		if err != nil || got.Type != want.Type || got.Actual != want.Actual || got.Expected != want.Expected || got.Offset != want.Offset {
			t.Errorf("wr %#x: Check %v %v, want %v", wrID, got, err, want)
		}
	}
	orig := append([]byte(nil), data...)

	a, b := r.pair(t, r.pd)
	configure(a, 1, attr)
	insert(a, 2, wire)
	strip(b, 3, wire, sig.MkeyErr{})
	if !bytes.Equal(data, orig) {
		t.Fatal("strip: the memory domain does not hold the data")
	}

	// LOCAL_INV by a (any QP of the PD may), signaled: one completion.
	if err := a.PostSend(&mlx5.SendWR{WrID: 4, Opcode: mlx5.OpLocalInv, Flags: mlx5.SendSignaled, InvalidateKey: m.LKey()}); err != nil {
		t.Fatal(err)
	}
	r.expect(t, "LOCAL_INV", mlx5.Completion{WrID: 4, QPN: a.QPN(), Opcode: mlx5.WCLocalInv})

	// The rkey is refused: b's RDMA WRITE fails with a remote access
	// error and both QPs go to the error state.
	copy(mem[invSrc:], wire)
	if err := b.PostSend(&mlx5.SendWR{WrID: 5, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
		RemoteAddr: 0, RKey: m.RKey(), SGL: []mlx5.SGE{{Addr: r.at(invSrc), Length: 520, LKey: r.mr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	r.expect(t, "RDMA WRITE to the invalidated rkey", mlx5.Completion{WrID: 5, QPN: b.QPN(), Opcode: mlx5.WCRDMAWrite, Status: mlx5.WCRemAccessErr})
	// The lkey too: a local protection error.
	a, _ = r.pair(t, r.pd)
	if err := a.PostSend(&mlx5.SendWR{WrID: 6, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
		RemoteAddr: r.at(invWire), RKey: r.mr.RKey(), SGL: []mlx5.SGE{{Addr: 0, Length: 520, LKey: m.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	r.expect(t, "RDMA WRITE from the invalidated lkey", mlx5.Completion{WrID: 6, QPN: a.QPN(), Opcode: mlx5.WCRDMAWrite, Status: mlx5.WCLocProtErr})

	// Configured again without a signature block: the same signature.
	a, b = r.pair(t, r.pd)
	configure(a, 7, nil)
	insert(a, 8, wire)
	strip(b, 9, wire, sig.MkeyErr{})
	bad := append([]byte(nil), wire...)
	bad[2*520+512] ^= 0x01 // block 2's guard
	wantErr, err := eng.Check(sig.DomainWire, bad)
	if err != nil || wantErr.Type != sig.MkeyErrBadGuard {
		t.Fatalf("engine check: %v %v", wantErr, err)
	}
	strip(b, 10, bad, wantErr)

	// LOCAL_INV (unsignaled: completed by the next signaled WR), then a
	// configure with a new signature block.
	if err := a.PostSend(&mlx5.SendWR{WrID: 11, Opcode: mlx5.OpLocalInv, InvalidateKey: m.LKey()}); err != nil {
		t.Fatal(err)
	}
	attr2 := invT10DIF(0x900)
	configure(a, 12, attr2)
	eng2, err := sig.NewEngine(attr2)
	if err != nil {
		t.Fatal(err)
	}
	copy(data, orig)
	wire2 := make([]byte, len(wire))
	if me, err := eng2.Transfer(sig.TX, wire2, data); err != nil || !me.OK() {
		t.Fatal(me, err)
	}
	insert(a, 13, wire2)
	if f := r.dev.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}

// TestSendInvOnModel: a peer's SEND with invalidate names an mkey created
// with RemoteInvalidate: the receive completes with WithInv and the key,
// the mkey is free (an RDMA WRITE to it fails with a remote access error)
// until configured again. A SEND with invalidate naming an mkey without
// RemoteInvalidate, of another PD, or no mkey is refused at the
// responder as the model's rule has it (rxe's class J): the SEND
// completes successfully, the receive with WCRemInvReqErr, the receiving
// QP goes to the error state and the mkey stays usable.
func TestSendInvOnModel(t *testing.T) {
	r := newRig(t, "cx6dx", model.Options{}, 64)
	mem := r.buf.Bytes()
	copy(mem[invMsg:], "invalidate me")
	layout := []mlx5.KLM{{Addr: r.at(invPlain), ByteCount: 64, Mkey: r.mr.LKey()}}
	mkey := func(pd *mlx5.PD, o mlx5.MkeyOptions) *mlx5.Mkey {
		t.Helper()
		m, err := pd.CreateMkey(o)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	configure := func(qp *mlx5.QP, wrID uint64, m *mlx5.Mkey) {
		t.Helper()
		if err := qp.PostMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: wrID, Mkey: m, Flags: mlx5.SendSignaled, SetAccess: true,
			Access: mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite, List: layout}); err != nil {
			t.Fatal(err)
		}
		r.expect(t, "configure", mlx5.Completion{WrID: wrID, QPN: qp.QPN(), Opcode: mlx5.WCUMR})
	}
	// write RDMA-writes 64 bytes into m from a and says how it completed.
	write := func(a *mlx5.QP, wrID uint64, m *mlx5.Mkey, status mlx5.WCStatus) {
		t.Helper()
		for i := range 64 {
			mem[invSrc+i] = byte(wrID) + byte(i)
		}
		clear(mem[invPlain : invPlain+64])
		if err := a.PostSend(&mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
			RemoteAddr: 0, RKey: m.RKey(), SGL: []mlx5.SGE{{Addr: r.at(invSrc), Length: 64, LKey: r.mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		r.expect(t, "RDMA WRITE", mlx5.Completion{WrID: wrID, QPN: a.QPN(), Opcode: mlx5.WCRDMAWrite, Status: status})
		if status == mlx5.WCSuccess && !bytes.Equal(mem[invPlain:invPlain+64], mem[invSrc:invSrc+64]) {
			t.Errorf("wr %#x: the write did not land behind the mkey", wrID)
		}
	}
	// sendInv posts a receive on b and a SEND with invalidate of key on
	// a, and checks their completions: the SEND's success and recv.
	sendInv := func(a, b *mlx5.QP, wrID uint64, key uint32, recv mlx5.Completion) {
		t.Helper()
		if err := b.PostRecv(wrID+1, []mlx5.SGE{{Addr: r.at(invRecv), Length: 64, LKey: r.mr.LKey()}}); err != nil {
			t.Fatal(err)
		}
		if err := a.PostSend(&mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpSendInv, Flags: mlx5.SendSignaled, InvalidateKey: key,
			SGL: []mlx5.SGE{{Addr: r.at(invMsg), Length: 13, LKey: r.mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		recv.WrID, recv.QPN, recv.Opcode = wrID+1, b.QPN(), mlx5.WCRecv
		r.expect(t, "SEND with invalidate", mlx5.Completion{WrID: wrID, QPN: a.QPN(), Opcode: mlx5.WCSend}, recv)
	}
	state := func(qp *mlx5.QP) mlx5.QPState {
		t.Helper()
		a, err := qp.Query(mlx5.QPAttrState)
		if err != nil {
			t.Fatal(err)
		}
		return a.State
	}

	// The invalidation.
	m := mkey(r.pd, mlx5.MkeyOptions{MaxEntries: 1, RemoteInvalidate: true})
	a, b := r.pair(t, r.pd)
	configure(b, 1, m)
	write(a, 2, m, mlx5.WCSuccess)
	sendInv(a, b, 3, m.RKey(), mlx5.Completion{ByteLen: 13, WithInv: true, InvalidatedRkey: m.RKey()})
	if got := string(mem[invRecv : invRecv+13]); got != "invalidate me" {
		t.Errorf("received %q", got)
	}
	write(a, 5, m, mlx5.WCRemAccessErr)
	a, b = r.pair(t, r.pd)
	configure(b, 6, m)
	write(a, 7, m, mlx5.WCSuccess)

	// A signature mkey with RemoteInvalidate too.
	ms := mkey(r.pd, mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true, RemoteInvalidate: true})
	configure(b, 8, ms)
	sendInv(a, b, 9, ms.RKey(), mlx5.Completion{ByteLen: 13, WithInv: true, InvalidatedRkey: ms.RKey()})
	write(a, 11, ms, mlx5.WCRemAccessErr)

	// Refused.
	pd2, err := r.c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	plain := mkey(r.pd, mlx5.MkeyOptions{MaxEntries: 1})
	other := mkey(pd2, mlx5.MkeyOptions{MaxEntries: 1, RemoteInvalidate: true})
	for i, c := range []struct {
		what string
		key  uint32
		why  string
	}{
		{"an mkey without RemoteInvalidate", plain.RKey(), "does not allow it (en_rinval)"},
		{"an mkey of another PD", other.RKey(), "the mkey is in PD"},
		{"no mkey", 0xabcdef00, "no such mkey"},
	} {
		wr := uint64(0x100 * (i + 1))
		a, b := r.pair(t, r.pd)
		configure(b, wr, plain)
		sendInv(a, b, wr+1, c.key, mlx5.Completion{Status: mlx5.WCRemInvReqErr})
		if s := state(b); s != mlx5.QPStateErr {
			t.Errorf("%s: the receiving QP is in %v, want ERR", c.what, s)
		}
		if s := state(a); s != mlx5.QPStateRTS {
			t.Errorf("%s: the sending QP is in %v, want RTS", c.what, s)
		}
		e := r.dev.WQEErrors()
		if len(e) == 0 || !strings.Contains(e[len(e)-1], c.why) {
			t.Errorf("%s: the model's reason %q, want %q", c.what, e, c.why)
		}
		// The mkey stays valid: a new pair writes through it.
		a, _ = r.pair(t, r.pd)
		write(a, wr+3, plain, mlx5.WCSuccess)
	}
	if f := r.dev.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}
