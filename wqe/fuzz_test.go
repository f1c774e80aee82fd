package wqe

import (
	"bytes"
	"errors"
	"testing"
)

var fuzzOpcodes = []uint8{OpcodeSend, OpcodeSendImm, OpcodeSendInval, OpcodeRDMAWrite, OpcodeRDMAWriteImm, OpcodeRDMARead, OpcodeAtomicCS, OpcodeAtomicFA, OpcodeNOP, 0x42}

// FuzzBuildSend: any work request (BuildSend, BuildLocalInv or BuildNOP,
// by kind) either fails with one of the documented errors and leaves the
// ring untouched, or writes exactly its WQEBBs, no more than free, with a
// ctrl segment that describes it. ErrNoRoom says how many WQEBBs the work
// request needs: more than free, and what it takes when they are free.
func FuzzBuildSend(f *testing.F) {
	f.Add(uint8(3), uint8(1), uint16(0), uint8(3), uint16(0), uint8(4), uint16(316), false, uint8(0), int16(2), uint8(0))
	f.Add(uint8(0), uint8(3), uint16(1023), uint8(0), uint16(200), uint8(4), uint16(316), false, uint8(0), int16(4), uint8(0))
	f.Add(uint8(0), uint8(3), uint16(1023), uint8(0), uint16(200), uint8(4), uint16(316), false, uint8(0), int16(3), uint8(0))
	f.Add(uint8(1), uint8(0), uint16(65535), uint8(2), uint16(60), uint8(2), uint16(124), true, uint8(2), int16(1), uint8(0))
	f.Add(uint8(6), uint8(2), uint16(7), uint8(1), uint16(0), uint8(1), uint16(0), false, uint8(9), int16(-1), uint8(0))
	f.Add(uint8(0), uint8(10), uint16(5), uint8(63), uint16(0), uint8(63), uint16(0), false, uint8(4), int16(5000), uint8(0))
	f.Add(uint8(0x18), uint8(3), uint16(7), uint8(0), uint16(0), uint8(0), uint16(0), false, uint8(0), int16(1), uint8(1))
	f.Add(uint8(0x20), uint8(0), uint16(9), uint8(0), uint16(0), uint8(0), uint16(0), false, uint8(0), int16(0), uint8(2))
	f.Fuzz(func(t *testing.T, opSel, logRing uint8, pi uint16, nsge uint8, inl uint16, maxSGE uint8, maxInl uint16, ud bool, zeroMask uint8, free int16, kind uint8) {
		s := &Send{
			QPN: 0x1a3, Opcode: fuzzOpcodes[int(opSel)%len(fuzzOpcodes)], Flags: SendFlags(opSel >> 4),
			SmallFence: opSel&8 != 0, Imm: 0x11223344, RemoteAddr: 0x1000, RKey: 7, SwapAdd: 1, Compare: 2,
			MaxSGE: int(maxSGE), MaxInline: int(maxInl),
		}
		for i := range int(nsge) % 70 {
			l := uint32(i + 1)
			if zeroMask>>(i%8)&1 != 0 {
				l = 0
			}
			s.SGL = append(s.SGL, SGE{Addr: uint64(i) << 12, Length: l, LKey: uint32(i)})
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
			for _, e := range []error{ErrOpcode, ErrTooManySGEs, ErrInlineTooLong, ErrInline, ErrTooLarge, ErrRing, ErrQPN} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("undocumented error %v", err)
		}
		if res.WQEBBs < 1 || res.WQEBBs > n || res.WQEBBs > int(free) || int(res.DS) > MaxDS || (int(res.DS)*16+63)/64 != res.WQEBBs {
			t.Fatalf("result %+v on %d WQEBBs, %d free", res, n, free)
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
