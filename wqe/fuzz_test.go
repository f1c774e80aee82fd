package wqe

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/sig"
)

var fuzzOpcodes = []uint8{OpcodeSend, OpcodeSendImm, OpcodeSendInval, OpcodeRDMAWrite, OpcodeRDMAWriteImm, OpcodeRDMARead, OpcodeAtomicCS, OpcodeAtomicFA, OpcodeNOP, 0x42}

// FuzzBuildSend: any work request (BuildSend, BuildLocalInv or BuildNOP,
// by kind) either fails with one of the documented errors and leaves the
// ring untouched, or writes exactly its WQEBBs, no more than free, with a
// ctrl segment that describes it. ErrNoRoom says how many WQEBBs the work
// request needs: more than free, and what it takes when they are free.
func FuzzBuildSend(f *testing.F) {
	f.Add(uint8(3), uint8(1), uint16(0), uint8(3), uint16(0), uint8(4), uint16(316), false, uint8(0), int16(2), uint8(0), uint32(0), uint32(0))
	f.Add(uint8(0), uint8(3), uint16(1023), uint8(0), uint16(200), uint8(4), uint16(316), false, uint8(0), int16(4), uint8(0), uint32(0), uint32(0))
	f.Add(uint8(0), uint8(3), uint16(1023), uint8(0), uint16(200), uint8(4), uint16(316), false, uint8(0), int16(3), uint8(0), uint32(0), uint32(0))
	f.Add(uint8(1), uint8(0), uint16(65535), uint8(2), uint16(60), uint8(2), uint16(124), true, uint8(2), int16(1), uint8(0), uint32(0), uint32(0))
	f.Add(uint8(6), uint8(2), uint16(7), uint8(1), uint16(0), uint8(1), uint16(0), false, uint8(9), int16(-1), uint8(0), uint32(0), uint32(0))
	f.Add(uint8(0), uint8(10), uint16(5), uint8(63), uint16(0), uint8(63), uint16(0), false, uint8(4), int16(5000), uint8(0), uint32(0), uint32(0))
	f.Add(uint8(0x18), uint8(3), uint16(7), uint8(0), uint16(0), uint8(0), uint16(0), false, uint8(0), int16(1), uint8(1), uint32(0), uint32(0))
	f.Add(uint8(0x20), uint8(0), uint16(9), uint8(0), uint16(0), uint8(0), uint16(0), false, uint8(0), int16(0), uint8(2), uint32(0), uint32(0))
	f.Add(uint8(3), uint8(1), uint16(0), uint8(2), uint16(0), uint8(4), uint16(316), false, uint8(0), int16(2), uint8(0), uint32(1<<31), uint32(0))
	f.Add(uint8(1), uint8(1), uint16(0), uint8(2), uint16(0), uint8(4), uint16(316), false, uint8(0), int16(2), uint8(0), uint32(1<<30), uint32(1<<30))
	f.Fuzz(func(t *testing.T, opSel, logRing uint8, pi uint16, nsge uint8, inl uint16, maxSGE uint8, maxInl uint16, ud bool, zeroMask uint8, free int16, kind uint8, big, maxMsg uint32) {
		s := &Send{
			QPN: 0x1a3, Opcode: fuzzOpcodes[int(opSel)%len(fuzzOpcodes)], Flags: SendFlags(opSel >> 4),
			SmallFence: opSel&8 != 0, Imm: 0x11223344, RemoteAddr: 0x1000, RKey: 7, SwapAdd: 1, Compare: 2,
			MaxSGE: int(maxSGE), MaxInline: int(maxInl), MaxMessage: maxMsg,
		}
		var total uint64
		var or uint32
		for i := range int(nsge) % 70 {
			l := uint32(i + 1)
			if i == 0 && big != 0 {
				l = big
			}
			if zeroMask>>(i%8)&1 != 0 {
				l = 0
			}
			s.SGL = append(s.SGL, SGE{Addr: uint64(i) << 12, Length: l, LKey: uint32(i)})
			total, or = total+uint64(l), or|l
		}
		if inl > 0 {
			s.Inline = [][]byte{bytes.Repeat([]byte{0xab}, int(inl)%1100)}
		}
		if ud {
			s.UD = &UD{AV: IBAV(&AHAttr{DLID: 3}), RemoteQPN: 9, QKey: 1}
		}
		qpn := s.QPN
		if zeroMask == 0xff {
			qpn = 1 << 24
		}
		opcode := s.Opcode
		build := func(r Ring, free int) (Result, error) {
			switch kind % 3 {
			case 1:
				opcode = OpcodeUMR
				return BuildLocalInv(r, pi, free, &LocalInv{QPN: qpn, RKey: 0x55, Flags: s.Flags, SmallFence: s.SmallFence})
			case 2:
				opcode = OpcodeNOP
				return BuildNOP(r, pi, free, qpn, s.Flags)
			}
			return BuildSend(r, pi, free, s)
		}
		n := 1 << (logRing % 12)
		if logRing >= 200 {
			n = int(logRing) // not a power of two
		}
		r := make(Ring, n*WQEBB)
		for i := range r {
			r[i] = 0x5a
		}
		res, err := build(r, int(free))
		if err != nil {
			if bytes.Count(r, []byte{0x5a}) != len(r) {
				t.Fatalf("%v: ring written", err)
			}
			if errors.Is(err, ErrNoRoom) {
				if res.WQEBBs <= int(free) || res.WQEBBs > n {
					t.Fatalf("ErrNoRoom: %+v with %d free on %d WQEBBs", res, free, n)
				}
				full, err := build(r, n)
				if err != nil || full.WQEBBs != res.WQEBBs {
					t.Fatalf("ErrNoRoom needs %d WQEBBs; with all %d free: %+v, %v", res.WQEBBs, n, full, err)
				}
				return
			}
			for _, e := range []error{ErrOpcode, ErrTooManySGEs, ErrInlineTooLong, ErrInline, ErrTooLarge, ErrRing, ErrQPN, ErrSGELength, ErrMsgTooLong} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("undocumented error %v", err)
		}
		if res.WQEBBs < 1 || res.WQEBBs > n || res.WQEBBs > int(free) || int(res.DS) > MaxDS || (int(res.DS)*16+63)/64 != res.WQEBBs {
			t.Fatalf("result %+v on %d WQEBBs, %d free", res, n, free)
		}
		limit := uint64(maxMsg)
		if limit == 0 {
			limit = MaxMessage
		}
		if kind%3 == 0 && len(s.Inline) == 0 && opcode != OpcodeAtomicCS && opcode != OpcodeAtomicFA && (or&InlineSeg != 0 || total > limit) {
			t.Fatalf("built a WQE of %d bytes (SGE lengths' or %#x), the maximum message is %d", total, or, limit)
		}
		ctrl := r.Slot(pi)
		if be.Uint64(ctrl) != res.Doorbell || ctrl[7]&0x3f != res.DS || ctrl[3] != opcode || be.Uint16(ctrl[1:]) != pi {
			t.Fatalf("ctrl % x, result %+v", ctrl[:16], res)
		}
		for i := range n {
			if int(uint16(i)-pi)&(n-1) < res.WQEBBs {
				continue
			}
			if bytes.Count(r.Slot(uint16(i)), []byte{0x5a}) != WQEBB {
				t.Fatalf("WQEBB %d written, result %+v at %d", i, res, pi)
			}
		}
	})
}

// FuzzDecode: no CQE bytes and no receive WQE input make the decoders or
// PutRecv panic.
func FuzzDecode(f *testing.F) {
	f.Add(make([]byte, 64), uint32(0), uint8(4), uint8(2))
	f.Add(bytes.Repeat([]byte{0xc1}, 64), uint32(640), uint8(9), uint8(5))
	f.Add([]byte{1, 2, 3}, uint32(1), uint8(40), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, ci uint32, logSize, nsge uint8) {
		var c CQE
		var s SigErrCQE
		errC, errS := c.Decode(b), s.Decode(b)
		owned := CQEOwned(b, ci, logSize)
		if len(b) < CQESize {
			if !errors.Is(errC, ErrShort) || !errors.Is(errS, ErrShort) || owned {
				t.Fatalf("short CQE: %v, %v, %v", errC, errS, owned)
			}
		} else if errC != nil || (errS != nil) != (c.Opcode != CQESigErr) || (owned && c.Opcode == CQEInvalid) {
			t.Fatalf("opcode %d: %v, %v, owned %v", c.Opcode, errC, errS, owned)
		}
		_ = c.Syndrome.String()
		if err := PutRecv(b, make([]SGE, nsge%8)); err == nil && (len(b)%16 != 0 || len(b) < 16*int(nsge%8)) {
			t.Fatalf("PutRecv accepted %d SGEs in %d bytes", nsge%8, len(b))
		}
	})
}

// FuzzSegments: every segment writer, on a buffer of any length, fails
// with ErrShort exactly when the buffer is shorter than its segment, and
// writes nothing past the segment; Slot answers for any ring.
func FuzzSegments(f *testing.F) {
	f.Add(uint16(0), uint16(0), uint8(0), uint64(0))
	f.Add(uint16(15), uint16(16), uint8(3), uint64(1))
	f.Add(uint16(64), uint16(200), uint8(9), ^uint64(0))
	f.Add(uint16(130), uint16(7), uint8(0xff), uint64(0x1234))
	a := sample().Sig
	f.Fuzz(func(t *testing.T, n, pi uint16, inl uint8, v uint64) {
		n %= 4096
		b := make([]byte, n+64)
		for i := range b {
			b[i] = 0xa5
		}
		u := &UD{AV: IBAV(&AHAttr{DLID: uint16(v), IsGlobal: v&1 != 0}), RemoteQPN: uint32(v), QKey: uint32(v >> 32)}
		inline := make([]byte, inl)
		inlSize := 0
		if inl > 0 {
			inlSize = inlineSize(int(inl))
		}
		for _, s := range []struct {
			name string
			size int
			put  func(b []byte) error
		}{
			{"ctrl", CtrlSegSize, func(b []byte) error { return PutCtrl(b, &Ctrl{QPN: uint32(v), DS: uint8(v), Imm: uint32(v)}) }},
			{"umr ctrl", UMRCtrlSegSize, func(b []byte) error { return PutUMRCtrl(b, &UMRCtrl{MkeyMask: MkeyMask(v)}) }},
			{"mkc", MkcSegSize, func(b []byte) error { return PutMkc(b, &Mkc{QPN: uint32(v), Len: v, PD: uint32(v)}) }},
			{"klm", KLMSegSize, func(b []byte) error { return PutKLM(b, KLM{Addr: v}) }},
			{"repeat", 16, func(b []byte) error { return PutRepeatBlockHeader(b, uint32(v), uint32(v>>32), uint16(v)) }},
			{"entry", 16, func(b []byte) error {
				return PutRepeatEntry(b, RepeatEntry{ByteCount: uint32(v) & 0x7fff, Skip: uint32(v>>32) & 0x7fff})
			}},
			{"psv", SetPSVSegSize, func(b []byte) error { return PutSetPSV(b, SetPSV{PSVIndex: uint32(v), TransientSignature: v}) }},
			{"bsf", BSFSegSize, func(b []byte) error { return PutBSF(b, a, uint32(v)&0xffffff, 2) }},
			{"data", DataSegSize, func(b []byte) error { return PutData(b, SGE{Addr: v}) }},
			{"raddr", RaddrSegSize, func(b []byte) error { return PutRaddr(b, v, uint32(v)) }},
			{"atomic", AtomicSegSize, func(b []byte) error { return PutAtomic(b, v, ^v) }},
			{"datagram", DatagramSegSize, func(b []byte) error { return PutDatagram(b, u) }},
			{"dc addr", DatagramSegSize, func(b []byte) error { return PutDCAddr(b, &DC{AV: u.AV, DCTN: uint32(v), Key: v}) }},
			{"inline", inlSize, func(b []byte) error { _, err := PutInline(b, inline); return err }},
		} {
			w := b[:n:n] // the writer may not reach past n
			err := s.put(w)
			if (err != nil) != (int(n) < s.size) || (err != nil && !errors.Is(err, ErrShort)) {
				t.Fatalf("%s: %d bytes for a %d-byte segment: %v", s.name, n, s.size, err)
			}
			if bytes.Count(b[n:], []byte{0xa5}) != 64 {
				t.Fatalf("%s: written past the buffer", s.name)
			}
		}
		if s := Ring(b[:n]).Slot(pi); (s == nil) != !Ring(b[:n]).valid() || (s != nil && len(s) != WQEBB) {
			t.Fatalf("Slot(%d) of %d bytes: %d bytes", pi, n, len(s))
		}
		InitCQE(b[:n])
	})
}

// fuzzSigAttrs are the signature blocks FuzzBuildMkeyConfigure picks
// from: nil, valid ones of one and two domains, and invalid ones.
var fuzzSigAttrs = []*sig.BlockAttr{
	nil,
	sample().Sig,
	{Wire: &sig.Domain{Type: sig.SigTypeCRC, CRC: &sig.CRC{Type: sig.CRCTypeCRC32C}, BlockSize: sig.BlockSize4096}, CheckMask: 0xf0},
	{Mem: &sig.Domain{Type: sig.SigTypeCRC, CRC: &sig.CRC{Type: sig.CRCTypeCRC64XP10, Seed: ^uint64(0)}, BlockSize: sig.BlockSize512}},
	{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512}},
	{},
}

// FuzzBuildMkeyConfigure: any mkey configure either fails with one of the
// documented errors and leaves the ring untouched, or writes a UMR WQE
// and its SET_PSVs (of the new block, or of the current one after a
// signature error counter update), exactly its WQEBBs and no more than
// free, with the completion on the last WQE only. ErrNoRoom says how many WQEBBs it
// needs: more than free, and what it takes when they are free.
func FuzzBuildMkeyConfigure(f *testing.F) {
	f.Add(uint8(3), uint16(0), int16(8), uint8(0x0b), uint8(1), uint8(1), uint8(1), uint8(0x0d), uint8(0), uint8(1))
	f.Add(uint8(10), uint16(1021), int16(6), uint8(0x0a), uint8(4), uint8(1), uint8(1), uint8(0x0d), uint8(0), uint8(1))
	f.Add(uint8(10), uint16(65534), int16(5), uint8(0x0a), uint8(4), uint8(1), uint8(1), uint8(0x0d), uint8(0), uint8(1))
	f.Add(uint8(4), uint16(3), int16(16), uint8(0x08), uint8(0x83), uint8(2), uint8(2), uint8(0x0c), uint8(1), uint8(1))
	f.Add(uint8(4), uint16(3), int16(16), uint8(0x08), uint8(0), uint8(0), uint8(0), uint8(0x01), uint8(1), uint8(1))
	f.Add(uint8(1), uint16(9), int16(-3), uint8(0x08), uint8(60), uint8(0), uint8(4), uint8(0x05), uint8(7), uint8(1))
	f.Add(uint8(3), uint16(2), int16(8), uint8(0x08), uint8(0x41), uint8(1), uint8(0), uint8(0x15), uint8(1), uint8(1))
	f.Add(uint8(3), uint16(2), int16(8), uint8(0x08), uint8(0x41), uint8(1), uint8(0), uint8(0x15), uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, logRing uint8, pi uint16, free int16, flags, layout, maxEnt, sigSel, state, sigErrs, blockSel uint8) {
		c := &MkeyConfigure{
			QPN: 0x1a2, Mkey: 0x207300, Flags: SendFlags(flags & 0xf), SmallFence: flags&0x10 != 0,
			SetAccess: flags&0x20 != 0, Access: AccessLocalWrite | AccessRemoteRead,
			MaxEntries: int(maxEnt) % 8,
			Sig:        fuzzSigAttrs[int(sigSel)%len(fuzzSigAttrs)],
			MemPSV:     0x3e1, WirePSV: 0x3e2,
			SigMkey:      state&1 != 0,
			BSF:          BSFState(state >> 4 & 3),
			ResetSig:     state&8 != 0,
			UpdateSigErr: state&4 != 0,
			SigErrs:      uint32(sigErrs),
			Block:        PSVsOf(fuzzSigAttrs[int(blockSel)%len(fuzzSigAttrs)]),
		}
		if flags&0x40 != 0 {
			c.QPN = 1 << 24
		}
		if flags&0x80 != 0 {
			c.WirePSV = 1 << 24
		}
		n := int(layout & 0x3f)
		switch {
		case layout&0x80 != 0:
			for i := range n {
				c.Interleaved = append(c.Interleaved, RepeatEntry{Addr: uint64(i) << 12, ByteCount: 512, Skip: uint32(i) * 8, Mkey: 7})
			}
			if c.Interleaved == nil {
				c.Interleaved = []RepeatEntry{}
			}
			c.RepeatCount = uint32(layout>>6&1) * 8
		case layout&0x40 != 0:
			for i := range n {
				c.List = append(c.List, KLM{Addr: uint64(i) << 12, ByteCount: 4096, Mkey: 7})
			}
		}
		size := 1 << (logRing % 12)
		r := make(Ring, size*WQEBB)
		for i := range r {
			r[i] = 0x5a
		}
		res, err := BuildMkeyConfigure(r, pi, int(free), c)
		if err != nil {
			if bytes.Count(r, []byte{0x5a}) != len(r) {
				t.Fatalf("%v: ring written", err)
			}
			if errors.Is(err, ErrNoRoom) {
				if res.WQEBBs <= int(free) || res.WQEBBs > size {
					t.Fatalf("ErrNoRoom: %+v with %d free on %d WQEBBs", res, free, size)
				}
				full, err := BuildMkeyConfigure(r, pi, size, c)
				if err != nil || full.WQEBBs != res.WQEBBs {
					t.Fatalf("ErrNoRoom needs %d WQEBBs; with all %d free: %+v, %v", res.WQEBBs, size, full, err)
				}
				return
			}
			for _, e := range []error{ErrNotInline, ErrTooManyEntries, ErrLayout, ErrNotSigMkey, ErrResetWithSig, ErrRing, ErrQPN, ErrPSV, ErrNoSigBlock, sig.ErrInvalidAttr} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("undocumented error %v", err)
		}
		umrBBs := (int(res.UMRDS)*16 + WQEBB - 1) / WQEBB
		psvs := 0 // a new block's SET_PSVs, or the current block's after a counter update
		switch {
		case c.Sig != nil:
			psvs = PSVsOf(c.Sig).count()
		case c.SigMkey && c.UpdateSigErr && c.BSF == BSFSet && !c.ResetSig:
			psvs = c.Block.count()
		}
		if res.PSVs != psvs {
			t.Fatalf("%d SET_PSVs, want %d: %+v", res.PSVs, psvs, res)
		}
		if res.WQEBBs > int(free) || res.WQEBBs > size || umrBBs+res.PSVs != res.WQEBBs || res.PSVs > 2 ||
			(res.PSVs == 0) != (res.PSVDS == 0) || !res.SmallFence {
			t.Fatalf("result %+v, %d free on %d WQEBBs", res, free, size)
		}
		last := pi // the last WQE: the UMR or the last SET_PSV
		if res.PSVs > 0 {
			last = pi + uint16(res.WQEBBs) - 1
		}
		for i := range res.PSVs + 1 {
			at, op, ds := pi, OpcodeUMR, res.UMRDS
			if i > 0 {
				at, op, ds = pi+uint16(umrBBs+i-1), OpcodeSetPSV, res.PSVDS
			}
			ctrl := r.Slot(at)
			if ctrl[3] != op || be.Uint16(ctrl[1:]) != at || ctrl[7]&0x3f != ds {
				t.Fatalf("WQE %d at %d: ctrl % x, result %+v", i, at, ctrl[:16], res)
			}
			if signaled := ctrl[11]&CtrlCQUpdate != 0; signaled != (at == last && c.Flags&SendSignaled != 0) {
				t.Fatalf("WQE %d at %d: fm_ce_se %#x, flags %#x, result %+v", i, at, ctrl[11], c.Flags, res)
			}
		}
		if be.Uint64(r.Slot(last)) != res.Doorbell {
			t.Fatalf("doorbell %#x, result %+v", res.Doorbell, res)
		}
		for i := range size {
			if int(uint16(i)-pi)&(size-1) < res.WQEBBs {
				continue
			}
			if bytes.Count(r.Slot(uint16(i)), []byte{0x5a}) != WQEBB {
				t.Fatalf("WQEBB %d written, result %+v at %d", i, res, pi)
			}
		}
	})
}
