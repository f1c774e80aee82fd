package mlx5

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// FuzzPoll writes arbitrary bytes as CQEs (64 at a time, owner bits as the
// device would set them) into a CQ whose QP has posted sends, receives
// and an mkey configure, and polls: Poll must not panic, must return no
// more than it was given room for, and may report only work requests
// that were posted, with the QP's number.
func FuzzPoll(f *testing.F) {
	f.Add([]byte{}, uint8(4))
	cqe := make([]byte, 64)
	cqe[56], cqe[57], cqe[58], cqe[59] = 0, 0, 0x1, 0xa2 // qpn 0x1a2
	f.Add(append([]byte(nil), cqe...), uint8(1))
	cqe[63] = wqe.CQEReqErr << 4
	cqe[55] = uint8(wqe.SyndromeWRFlush)
	f.Add(append(append([]byte(nil), cqe...), cqe...), uint8(8))
	cqe[63] = wqe.CQESigErr << 4
	f.Add(cqe, uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, room uint8) {
		c := &Context{devx: true}
		cq := testCQ(t, c, 16, 0)
		qp, _ := testQP(t, c, 16)
		qp.sq.maxWQE, qp.mkeyConf = 16, true
		qp.rq.wrID = make([]uint64, 4)
		qp.rq.ring = make([]byte, 4*16)
		qp.rq.stride, qp.rq.maxSGE = 16, 1
		cq.attachLocked(qp)
		posted := map[uint64]bool{}
		for i := range 3 {
			if err := qp.PostSend(&SendWR{WrID: uint64(100 + i), Opcode: OpSend, Flags: SendSignaled,
				SGL: []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}); err != nil {
				t.Fatal(err)
			}
			posted[uint64(100+i)] = true
		}
		qp.sq.track(200, WCUMR, 6, qp.sq.pi+5, 0) // a configure's bookkeeping
		posted[200] = true
		for i := range 4 {
			qp.rq.wrID[i] = uint64(300 + i)
			posted[uint64(300+i)] = true
		}
		for i := 0; i+64 <= len(data) && i/64 < 16; i += 64 {
			b := cq.ring[i : i+64]
			copy(b, data[i:i+64])
			b[63] &^= 1 // the first pass: owner bit 0
		}
		wc := make([]Completion, int(room)%17)
		for range 3 {
			n, _ := cq.Poll(wc)
			if n > len(wc) {
				t.Fatalf("Poll returned %d with room for %d", n, len(wc))
			}
			for _, w := range wc[:n] {
				if !posted[w.WrID] || w.QPN != qp.qpn {
					t.Fatalf("completion %+v of nothing posted", w)
				}
			}
		}
	})
}

// FuzzCryptoAttr posts configures of a crypto mkey built from the
// fuzzer's crypto attribute (order and data unit size of any value, tweak
// and keytag of any length, a DEK good, nil, foreign, of another PD, with
// or without a keytag, closed or in error), layout (none, a list, an
// interleaved one, of any length), signature block (none, one domain,
// both, a reset) and mkey (with or without block signature, on a
// single-block or a multi-block engine, on a QP of little or much inline
// data), three in a row on one mkey so that its crypto and signature
// state carry over. A post never panics; a refusal is an *Error and
// leaves the ring, the counter and the DEK's references as they were; an
// accepted configure writes exactly the WQEs wqe.BuildMkeyConfigure (the
// encoder the oracle's vectors prove) writes for its inputs, the crypto
// taken from the attribute here, not by the driver; and the mkey's DEK
// holds the one reference there is.
func FuzzCryptoAttr(f *testing.F) {
	f.Add(true, uint8(0), uint32(0), []byte("0123456789abcdef"), []byte{}, uint8(0), uint8(0), uint8(1), uint32(4096), uint8(0), uint8(0))
	f.Add(false, uint8(1), uint32(1), []byte("0123456789abcdef"), []byte("keytag!!"), uint8(1), uint8(3), uint8(2), uint32(520), uint8(3), uint8(1))
	f.Add(true, uint8(0), uint32(3), []byte{}, []byte("keytag!!"), uint8(5), uint8(1), uint8(0), uint32(1<<31), uint8(4), uint8(2))
	f.Add(true, uint8(2), uint32(7), []byte{1}, []byte{1, 2, 3}, uint8(2), uint8(2), uint8(3), uint32(0), uint8(2), uint8(3))
	f.Fuzz(func(t *testing.T, encrypt bool, order uint8, du uint32, tweak, keytag []byte, dekKind, mkeyKind, layout uint8, length uint32, sigKind, qpKind uint8) {
		inline := 256
		if qpKind&1 != 0 {
			inline = 92
		}
		r := newCryptoRig(t, inline)
		m := r.mkey(0x510000, mkeyKind&1 != 0, true, mkeyKind&2 == 0)
		good := r.dek(0x77, dekKind&1 != 0)
		var d *DEK
		switch dekKind >> 1 % 6 {
		case 0:
			d = good
		case 1:
			d = nil
		case 2:
			d = &DEK{c: sbsContext(), pd: r.pd, id: 1}
		case 3:
			d = &DEK{c: r.c, pd: &PD{c: r.c, pdn: 9}, id: 2}
		case 4:
			d, good.closed = good, true
		case 5:
			d, good.state = good, DEKError
		}
		a := &CryptoAttr{EncryptOnTx: encrypt, Order: SigCryptoOrder(order % 4), DataUnitSize: sig.BlockSize(du % 8), DEK: d}
		copy(a.InitialTweak[:], tweak)
		if len(keytag) > 0 {
			a.Keytag = keytag
		}
		wr := &MkeyConfigureWR{WrID: 1, Mkey: m, Flags: SendSignaled, SetAccess: true, Access: AccessRemoteRead, Crypto: a}
		switch layout % 4 {
		case 1:
			wr.List = []KLM{{Addr: 0x1000, ByteCount: length, Mkey: 5}}
		case 2:
			wr.List = []KLM{{ByteCount: length}, {ByteCount: length / 3}, {ByteCount: 7}}
		case 3:
			wr.Interleaved, wr.RepeatCount = []RepeatEntry{{ByteCount: length % 600, Skip: 8}, {ByteCount: 8}}, length%9
		}
		dom := &sig.Domain{Type: sig.SigTypeT10DIF, T10DIF: &sig.T10DIF{RefTag: length}, BlockSize: sig.BlockSize512}
		switch sigKind % 5 {
		case 1:
			wr.Sig = &sig.BlockAttr{Mem: dom, CheckMask: 0xff}
		case 2:
			wr.Sig = &sig.BlockAttr{Wire: dom}
		case 3:
			wr.Sig = &sig.BlockAttr{Mem: dom, Wire: dom}
		case 4:
			wr.ResetSig = true
		}
		// The configure, again with its crypto, then a layout alone.
		wrs := []*MkeyConfigureWR{wr, wr, {WrID: 3, Mkey: m, Flags: SendSignaled, List: []KLM{{ByteCount: length}}}}
		for i, w := range wrs {
			qp := r.qp
			want := make(wqe.Ring, len(qp.sq.ring))
			copy(want, qp.sq.ring)
			var c wqe.MkeyConfigure
			access, _ := w.Access.mkeyAccess()
			mkeyConfigure(&c, qp, m, w, access, m.sigErrs.Load())
			var exp wqe.Crypto
			if w.Crypto != nil && d != nil {
				exp = wqe.Crypto{EncryptOnTx: encrypt, SigBeforeCrypto: a.Order == SigBeforeCryptoOnTx, DataUnitSize: a.DataUnitSize,
					InitialTweak: a.InitialTweak, DEK: d.id}
				copy(exp.Keytag[:], a.Keytag)
				c.Crypto = &exp
			}
			_, buildErr := wqe.BuildMkeyConfigure(want, qp.sq.pi, len(qp.sq.slots), &c)
			pi, before, held := qp.sq.pi, bytes.Clone(qp.sq.ring), users(good)
			err := qp.PostMkeyConfigure(w)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("configure %d: %v is not an *Error", i, err)
				}
				if qp.sq.pi != pi || !bytes.Equal(qp.sq.ring, before) || users(good) != held {
					t.Fatalf("configure %d: refused (%v), but the queue or the DEK's references changed", i, err)
				}
				continue
			}
			if buildErr != nil {
				t.Fatalf("configure %d: accepted; the encoder refuses its inputs: %v", i, buildErr)
			}
			if !bytes.Equal(qp.sq.ring, want) {
				t.Fatalf("configure %d: the WQEs are not the encoder's", i)
			}
			qp.sq.tail.Store(uint32(qp.sq.pi))
			if mc := m.crypto; mc.dek != nil && users(mc.dek) != 1 {
				t.Fatalf("configure %d: the mkey's DEK has %d references", i, users(mc.dek))
			}
		}
		_ = m.Close()
		if users(good) != 0 {
			t.Fatalf("%d references left after Close", users(good))
		}
	})
}
