package wqe

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzBuildSendDC: any work request on a DCI (a DC destination, a stream
// id, any opcode, SGL or inline data, ring position and room) either
// fails with one of the documented errors and leaves the ring untouched,
// or writes exactly its WQEBBs: the ctrl segment with the stream id in
// bytes 9-10, then the address vector segment with the DC key, the DCT
// number | ExtendedUDAV and the AH's address vector, as libmlx5 writes
// them (TestOracleDCWQEs), then what an RC WQE of the opcode holds.
func FuzzBuildSendDC(f *testing.F) {
	f.Add(uint8(0), uint8(7), uint16(0), uint8(1), uint16(0), uint16(7), uint32(0x1234), uint64(0x0123456789abcdef), int16(8), false)
	f.Add(uint8(5), uint8(7), uint16(127), uint8(2), uint16(0), uint16(0xffff), uint32(0xffffff), ^uint64(0), int16(128), true)
	f.Add(uint8(3), uint8(5), uint16(65535), uint8(0), uint16(76), uint16(63), uint32(0x81000001), uint64(0), int16(2), false)
	f.Add(uint8(6), uint8(0), uint16(1), uint8(4), uint16(0), uint16(1), uint32(1), uint64(1), int16(1), true)
	f.Fuzz(func(t *testing.T, opSel, logRing uint8, pi uint16, nsge uint8, inl, stream uint16, dctn uint32, key uint64, free int16, grh bool) {
		ah := &AHAttr{DLID: 0x22, SL: 3, SrcPathBits: 1, StaticRate: uint8(dctn), IsGlobal: grh, FlowLabel: dctn, SGIDIndex: uint8(key), HopLimit: 64, TClass: uint8(key >> 8)}
		ah.DGID[0], ah.DGID[15] = 0xfe, byte(dctn)
		s := &Send{
			QPN: 0x1a4, Opcode: fuzzOpcodes[int(opSel)%len(fuzzOpcodes)], Flags: SendFlags(opSel >> 4),
			Imm: 0x11223344, RemoteAddr: 0x1000, RKey: 7, SwapAdd: 1, Compare: 2, MaxSGE: 4, MaxInline: 92,
			DC: &DC{AV: IBAV(ah), DCTN: dctn, Key: key, StreamID: stream},
		}
		for i := range int(nsge) % 8 {
			s.SGL = append(s.SGL, SGE{Addr: uint64(i) << 12, Length: uint32(i + 1), LKey: uint32(i)})
		}
		if inl > 0 {
			s.Inline = [][]byte{bytes.Repeat([]byte{0xab}, int(inl)%200)}
		}
		n := 1 << (logRing % 10)
		r := make(Ring, n*WQEBB)
		for i := range r {
			r[i] = 0x5a
		}
		res, err := BuildSend(r, pi, int(free), s)
		if err != nil {
			if bytes.Count(r, []byte{0x5a}) != len(r) {
				t.Fatalf("%v: ring written", err)
			}
			for _, e := range []error{ErrNoRoom, ErrOpcode, ErrTooManySGEs, ErrInlineTooLong, ErrInline, ErrTooLarge, ErrRing, ErrQPN} {
				if errors.Is(err, e) {
					if e == ErrQPN && dctn <= 0xffffff {
						t.Fatalf("ErrQPN for DCT number %#x", dctn)
					}
					return
				}
			}
			t.Fatalf("undocumented error %v", err)
		}
		if dctn > 0xffffff {
			t.Fatalf("built a WQE to DCT number %#x", dctn)
		}
		if res.WQEBBs < 1 || res.WQEBBs > n || res.WQEBBs > int(free) || res.DS < 4 || (int(res.DS)*16+63)/64 != res.WQEBBs {
			t.Fatalf("result %+v on %d WQEBBs, %d free", res, n, free)
		}
		// The WQE as it lies in the ring, across its end.
		var w []byte
		for i := range res.WQEBBs {
			w = append(w, r.Slot(pi+uint16(i))...)
		}
		var av [DatagramSegSize]byte
		_ = PutDCAddr(av[:], s.DC)
		if be.Uint64(w) != res.Doorbell || w[3] != s.Opcode || be.Uint16(w[9:]) != stream || !bytes.Equal(w[CtrlSegSize:CtrlSegSize+DatagramSegSize], av[:]) {
			t.Fatalf("WQE % x", w[:64])
		}
		if be.Uint32(av[8:]) != dctn|ExtendedUDAV || be.Uint64(av[:]) != key {
			t.Fatalf("address vector % x", av)
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
