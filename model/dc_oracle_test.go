package model

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/prm"
)

// The oracle's DC vectors (mlx5/testdata/dc.jsonl, rdma-core 44.0's
// libmlx5) on the model.

// dcDataOp reports whether a WQE opcode is a DCI data operation the
// replay runs (the UMR ones, LOCAL_INV and BIND_MW, are RC's UMR path).
func dcDataOp(op uint8) bool {
	switch op {
	case tOpSendInval, tOpRDMAWrite, tOpRDMAWriteImm, tOpSend, tOpSendImm, tOpRDMARead, tOpAtomicCS, tOpAtomicFA:
		return true
	}
	return false
}

// The oracle's object names: the harness MR's mapping, and the remote
// addresses the dc family's work requests name.
const (
	oracleLocalBase  = 0x7e5a00000000
	oracleRemoteBase = 0x10000000
)

// TestOracleDCWQEs runs the DCI WQEs libmlx5 wrote in the dc vectors'
// wr/ and wrap/ records of data work requests: every opcode, SGE count,
// inline size, flag set, address vector, DCT number, key and stream id,
// batches, and WQEs across the ring's end and the 16-bit counter (at the
// same ring slot and counter as libmlx5 wrote them). The bytes that name
// the oracle's objects are replaced by the rig's: the QP number and the
// counter in the control segment, the low 24 bits of dqp_dct (its top
// byte stays libmlx5's), lkeys, rkeys and addresses; and the address part
// of the address vector (bytes 12 to 47: libmlx5's AHs are InfiniBand
// ones, the model's port is RoCE) becomes the port's. Opcodes, flags,
// stream ids, DC keys, ds, segment order, inline data and atomic operands
// stay as libmlx5 wrote them. Each WQE runs with its own doorbell and is
// checked: the completions, the receive, the data.
func TestOracleDCWQEs(t *testing.T) {
	r := newDCRig(t, "cx7", Options{})
	dcis := map[string]*dciT{}
	dcts := map[uint64]*dctT{}
	newDCI := func(name string) *dciT {
		c := oracleCmdOf(t, dcVectors, "setup/create_"+name, "QP", "QP_CREATE")
		var u mlx5abi.Mlx5IbCreateQp
		decodeDrv(c.In["UHW_IN"], &u)
		// dci_s64's 2^4 errored streams are over cx7's 2^3; the WQEs do
		// not depend on it.
		u.DciStreams.LogNumErrored = min(u.DciStreams.LogNumErrored, 3)
		return r.dciFrom(drv(&u), c, 7)
	}
	var records, wqes int
	for _, rec := range dcRecords(t) {
		wrap := strings.HasPrefix(rec.Case, "wrap/")
		if !strings.HasPrefix(rec.Case, "wr/") && !wrap {
			continue
		}
		if strings.Contains(rec.Case, "/error/") || strings.Contains(rec.Case, "no_dc_addr") || strings.Contains(rec.Case, "no_data_setter") {
			continue // refused by libmlx5, or WQEs it never finished
		}
		ws := rec.wqes(t)
		data := len(ws) > 0
		for _, w := range ws {
			data = data && dcDataOp(w[3])
		}
		if !data {
			continue
		}
		q := dcis[rec.QP.Name]
		if q == nil || wrap {
			q = newDCI(rec.QP.Name)
			dcis[rec.QP.Name] = q
		}
		if wrap {
			q.advance(uint16(rec.SqPIBefore))
		}
		records++
		for i, b := range ws {
			wqes++
			r.replayDC(t, q, fmt.Sprintf("%s WQE %d", rec.Case, i), b, func(key uint64) *dctT {
				if dcts[key] == nil {
					dcts[key] = r.dct(key, remoteRW|ibAccessRemoteAtomic, 0x40+uint32(len(dcts)))
				}
				return dcts[key]
			})
		}
	}
	if records < 90 || wqes < 126 {
		t.Errorf("replayed %d records, %d WQEs; want the vectors' 90 and 126", records, wqes)
	}
	r.cq.none(0)
	r.dcq.none(0)
	if f := r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
	t.Logf("%d records, %d WQEs of libmlx5", records, wqes)
}

// advance brings the DCI's producer counter to pi with signaled NOPs (one
// WQEBB each), so that a WQE lands at the ring slot and counter libmlx5
// wrote it at.
func (q *dciT) advance(pi uint16) {
	q.r.t.Helper()
	n := uint16(len(q.sq) / sendWQEBB)
	for q.pi != pi {
		k := min(pi-q.pi, n-1)
		var last uint16
		for i := range k {
			nop := make([]byte, 16)
			binary.BigEndian.PutUint32(nop[4:], 1) // ds 1
			if i == k-1 {
				nop[11] = tSignaled
			}
			last = q.put(nop)
		}
		q.ring(last)
		if c := q.cq.next(); binary.BigEndian.Uint16(c[60:]) != last || c[63]>>4 != 0 {
			q.r.t.Fatalf("NOP %d: CQE %x", last, c)
		}
	}
}

// replayDC runs libmlx5's DCI WQE b on q as TestOracleDCWQEs says.
func (r *dcRig) replayDC(t *testing.T, q *dciT, what string, b []byte, dctFor func(uint64) *dctT) {
	t.Helper()
	be := binary.BigEndian
	b = append([]byte(nil), b...)
	op, fm := b[3], b[11]
	d := dctFor(be.Uint64(b[16:]))
	be.PutUint32(b[24:], be.Uint32(b[24:])&0xff000000|d.dctn)
	copy(b[28:64], r.av[12:])
	end := int(b[7]&0x3f) * 16
	lk, rk, l, rm := r.lmr.LKey, r.rmr.RKey, addr(r.local), addr(r.remote)
	local := func(a uint64, n uint32) []byte {
		if a < oracleLocalBase || a+uint64(n) > oracleLocalBase+uint64(len(r.local)) {
			t.Fatalf("%s: local address %#x", what, a)
		}
		return r.local[a-oracleLocalBase:][:n]
	}
	off := 64
	var raddr uint64
	var remote []byte
	if op == tOpRDMAWrite || op == tOpRDMAWriteImm || op == tOpRDMARead || op == tOpAtomicCS || op == tOpAtomicFA {
		raddr = be.Uint64(b[off:])
		if raddr < oracleRemoteBase || raddr >= oracleRemoteBase+uint64(len(r.remote))-4096 {
			t.Fatalf("%s: remote address %#x", what, raddr)
		}
		remote = r.remote[raddr-oracleRemoteBase:]
		be.PutUint64(b[off:], rm+raddr-oracleRemoteBase)
		be.PutUint32(b[off+8:], rk)
		off += 16
	}
	var swapAdd, compare uint64
	if op == tOpAtomicCS || op == tOpAtomicFA {
		swapAdd, compare = be.Uint64(b[off:]), be.Uint64(b[off+8:])
		off += 16
	}
	var msg []byte
	var spans [][]byte // the data segments' local memory
	if off < end && be.Uint32(b[off:])&(1<<31) != 0 {
		msg = append(msg, b[off+4:off+4+int(be.Uint32(b[off:])&^(1<<31))]...)
	} else {
		for ; off < end; off += 16 {
			n, a := be.Uint32(b[off:]), be.Uint64(b[off+8:])
			s := local(a, n)
			spans = append(spans, s)
			msg = append(msg, s...)
			be.PutUint32(b[off+4:], lk)
			be.PutUint64(b[off+8:], l+a-oracleLocalBase)
		}
	}
	ne := binary.NativeEndian
	var old uint64
	switch op {
	case tOpAtomicCS:
		old = compare // the swap happens
		ne.PutUint64(remote, old)
	case tOpAtomicFA:
		old = 1000
		ne.PutUint64(remote, old)
	}
	var ri uint16
	recv := op == tOpSend || op == tOpSendImm || op == tOpSendInval || op == tOpRDMAWriteImm
	if recv {
		ri = r.recv(dcRecvBytes)
	}
	idx := q.put(b)
	q.ring(idx)

	var byteCnt uint32
	switch op {
	case tOpRDMARead:
		byteCnt = uint32(len(msg))
	case tOpAtomicCS, tOpAtomicFA:
		byteCnt = 8
	}
	if fm&tSignaled != 0 {
		checkDC(t, what, r.cq.next(), q.wantReq(op, idx, byteCnt))
	} else {
		// Unsignaled: a signaled NOP behind it says it ran.
		nop := make([]byte, 16)
		binary.BigEndian.PutUint32(nop[4:], 1)
		nop[11] = tSignaled
		n := q.put(nop)
		q.ring(n)
		checkDC(t, what+" (the NOP behind it)", r.cq.next(), q.wantReq(0, n, 0))
	}
	imm := be.Uint32(b[12:])
	switch op {
	case tOpSend:
		checkDC(t, what+" at the DCT", r.dcq.next(), d.wantRecv(2, ri, uint32(len(msg)), 0, q.qpn))
	case tOpSendImm:
		checkDC(t, what+" at the DCT", r.dcq.next(), d.wantRecv(3, ri, uint32(len(msg)), imm, q.qpn))
	case tOpSendInval:
		// libmlx5's invalidate key names no mkey of the model: class J.
		checkDC(t, what+" at the DCT", r.dcq.next(), d.wantRecvErr(0x12, ri))
	case tOpRDMAWriteImm:
		checkDC(t, what+" at the DCT", r.dcq.next(), d.wantRecv(1, ri, uint32(len(msg)), imm, q.qpn))
	}
	switch op {
	case tOpSend, tOpSendImm, tOpRDMAWriteImm:
		if op != tOpRDMAWriteImm && !bytes.Equal(r.rbufOf(ri)[:len(msg)], msg) {
			t.Errorf("%s: the receive buffer does not hold the message", what)
		}
		fallthrough
	case tOpRDMAWrite:
		if op != tOpSend && op != tOpSendImm && !bytes.Equal(remote[:len(msg)], msg) {
			t.Errorf("%s: the remote memory does not hold the message", what)
		}
	case tOpRDMARead:
		at := 0
		for _, s := range spans {
			if !bytes.Equal(s, remote[at:at+len(s)]) {
				t.Errorf("%s: the local memory does not hold the remote data at %d", what, at)
			}
			at += len(s)
		}
	case tOpAtomicCS, tOpAtomicFA:
		want := swapAdd
		if op == tOpAtomicFA {
			want = old + swapAdd
		}
		if got := ne.Uint64(remote); got != want {
			t.Errorf("%s: remote %#x, want %#x", what, got, want)
		}
		if got := ne.Uint64(spans[0]); got != old {
			t.Errorf("%s: original %#x, want %#x", what, got, old)
		}
	}
}

// FuzzDCIWQE runs arbitrary bytes as the send queue of a DCI in RTS (2^3
// stream channels, 2^1 errored) with a DCT and its SRQ on the HCA: the
// model may refuse them with error completions, but must not panic, and
// must consume what it is given unless the QP stopped for a reason. The
// seeds are DCI WQEs to the DCT (SEND, RDMA WRITE on a stream, an atomic)
// and libmlx5's own DCI WQEs as the dc vectors hold them (their
// InfiniBand address reaches nothing: retry errors, stream flushes).
func FuzzDCIWQE(f *testing.F) {
	const key, dctn = 0x0123456789abcdef, firstQPN + 1
	h0 := newHCA(profiles["cx7"])
	var av [avSize]byte
	copy(av[avRMAC:], portMAC[:])
	binary.BigEndian.PutUint32(av[avGRHGIDFl:], 3<<20)
	g := h0.gidTable()[3].GID
	copy(av[avRGID:], g[:])
	mr := uint32(fuzzMR)
	seeds := [][]byte{
		dcw{op: tOpSend, fm: tSignaled, key: key, dctn: dctn, sges: []tsge{{64, mr, 0}}}.encode(av, firstQPN, 0),
		dcw{op: tOpRDMAWrite, fm: tSignaled, stream: 5, key: key, dctn: dctn, hasRaddr: true, raddr: 4096, rkey: mr, inline: []byte("fuzz")}.encode(av, firstQPN, 0),
		dcw{op: tOpAtomicFA, fm: tSignaled, stream: 9, key: key, dctn: dctn, atomic: true, raddr: 8192, rkey: mr, swapAdd: 3, sges: []tsge{{8, mr, 64}}}.encode(av, firstQPN, 0),
		dcw{op: tOpSend, fm: tSignaled, stream: 1, key: key ^ 1, dctn: dctn, inline: []byte("wrong key")}.encode(av, firstQPN, 0),
	}
	for _, rec := range dcRecords(f) {
		switch rec.Case {
		case "wr/send/sge1/signaled", "wr/rdma_read/sge2/signaled", "wr/atomic_cmp_swp/sge1/signaled", "wr/s8/stream/batch10_rotating_streams_1_to_10", "post_send/send/sge1/signaled":
			seeds = append(seeds, bytes.Join(rec.wqes(f), nil))
		}
	}
	for _, s := range seeds {
		f.Add(s, uint8(len(s)/sendWQEBB), uint8(4))
	}
	f.Fuzz(func(t *testing.T, b []byte, wqebbs, recvs uint8) {
		h := newHCA(profiles["cx7"])
		h.mu.Lock()
		defer h.mu.Unlock()
		pd, cq := uint32(firstPDN), uint32(firstCQN)
		h.pds[pd] = &pdObj{uid: 1}
		cqc := prm.Cqc.Layout().New()
		prm.Cqc.LogCqSize.Set(cqc, 6)
		h.cqs[cq] = &cqObj{uid: 1, cqc: cqc, buf: make([]byte, 64*64)}
		mem := make([]byte, 16*64+8)
		qpc := prm.Qpc.Layout().New()
		prm.Qpc.St.Set(qpc, stDCI)
		prm.Qpc.LogSqSize.Set(qpc, 4)
		prm.Qpc.RqType.Set(qpc, srqRQ)
		prm.Qpc.State.Set(qpc, StateRTS)
		prm.Qpc.LogNumDciStreamChannels.Set(qpc, 3)
		prm.Qpc.LogNumDciErroredStreams.Set(qpc, 1)
		prm.Qpc.RnrRetry.Set(qpc, 1)
		prm.Qpc.CqnSnd.Set(qpc, uint64(cq))
		prm.Qpc.CqnRcv.Set(qpc, uint64(cq))
		q := &qpObj{uid: 1, qpn: firstQPN, qpc: qpc, pdn: pd, wq: mem[:16*64], dbr: mem[16*64:]}
		q.rq, q.sq = wqGeometry(qpc)
		h.qps[firstQPN] = q
		srq := &srqObj{uid: 1, pdn: pd, buf: make([]byte, 16*32), dbr: make([]byte, 8), size: 16, stride: 32}
		for i := range 16 {
			w := srq.buf[i*32:]
			binary.BigEndian.PutUint16(w[2:], uint16(i+1)&15)
			binary.BigEndian.PutUint32(w[16:], 256)
			binary.BigEndian.PutUint32(w[20:], mr)
			binary.BigEndian.PutUint64(w[24:], uint64(i)*256)
		}
		binary.BigEndian.PutUint32(srq.dbr, uint32(recvs%17))
		h.srqs[firstSRQN] = srq
		dctc := prm.Qpc.Layout().New()
		prm.Qpc.State.Set(dctc, StateRTR)
		prm.Qpc.DcAccessKey.Set(dctc, key)
		prm.Qpc.Rre.Set(dctc, 1)
		prm.Qpc.Rwe.Set(dctc, 1)
		prm.Qpc.Rae.Set(dctc, 1)
		prm.Qpc.MinRnrNak.Set(dctc, 1)
		prm.Qpc.CqnRcv.Set(dctc, uint64(cq))
		h.qps[dctn] = &qpObj{uid: 1, qpn: dctn, qpc: dctc, pdn: pd, srq: srq, dct: true}
		buf := make([]byte, 16384)
		mrc := prm.Mkc.Layout().New()
		prm.Mkc.AccessMode10.Set(mrc, accessModeMTT)
		for _, f := range []prm.Field{prm.Mkc.Lr, prm.Mkc.Lw, prm.Mkc.Rr, prm.Mkc.Rw, prm.Mkc.A} {
			f.Set(mrc, 1)
		}
		prm.Mkc.Len.Set(mrc, uint64(len(buf)))
		h.mkeys[mr>>8] = &mkeyObj{uid: 1, pdn: pd, mkc: mrc, mem: buf, verbs: true}
		copy(q.wq, b)
		n := uint16(wqebbs%16) + 1
		binary.BigEndian.PutUint32(q.dbr[4:], uint32(n))
		h.runSQ(q)
		if n-q.sqCI > n {
			t.Errorf("the hardware's counter %d passed the producer's %d", q.sqCI, n)
		}
		if q.state() == StateRTS && q.rnr == nil && q.sqCI != n && len(h.faults) == 0 {
			t.Errorf("the DCI stopped at %d of %d WQEBBs with no reason", q.sqCI, n)
		}
		if q.dc != nil && len(q.dc.errored) >= 2 && q.state() == StateRTS {
			t.Errorf("%d stream channels in error, the limit 2, and the DCI in RTS", len(q.dc.errored))
		}
	})
}
