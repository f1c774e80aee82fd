package wqe

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestSegmentWords checks the segment words against the field writers:
// CtrlWords and PutWords write what PutCtrl writes, RaddrWords what
// PutRaddr's fields are, DataWords what a data segment's fields are, and
// CtrlFlags what SendFlags.fence and CtrlCQUpdate make, for random
// fields.
func TestSegmentWords(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 1))
	for i := range 10000 {
		opcode, pi, qpn := uint8(r.Uint32()), uint16(r.Uint32()), r.Uint32()
		ds, fm, imm := uint8(r.Uint32()), uint8(r.Uint32()), r.Uint32()
		var got, want [16]byte
		w0, w1 := CtrlWords(opcode, pi, qpn, ds, fm, imm)
		PutWords(got[:], w0, w1)
		_ = PutCtrl(want[:], &Ctrl{Opcode: opcode, WQEIndex: pi, QPN: qpn, DS: ds, FmCeSe: fm, Imm: imm})
		if got != want {
			t.Fatalf("case %d: CtrlWords(%#x, %#x, %#x, %#x, %#x, %#x) writes %x, PutCtrl %x", i, opcode, pi, qpn, ds, fm, imm, got, want)
		}

		raddr, rkey := r.Uint64(), r.Uint32()
		w0, w1 = RaddrWords(raddr, rkey)
		PutWords(got[:], w0, w1)
		want = [16]byte{}
		binary.BigEndian.PutUint64(want[0:], raddr)
		binary.BigEndian.PutUint32(want[8:], rkey)
		if got != want {
			t.Fatalf("case %d: RaddrWords(%#x, %#x) writes %x, want %x", i, raddr, rkey, got, want)
		}

		s := SGE{Addr: r.Uint64(), Length: r.Uint32() >> 1, LKey: r.Uint32()}
		w0, w1 = DataWords(s)
		PutWords(got[:], w0, w1)
		binary.BigEndian.PutUint32(want[0:], s.Length)
		binary.BigEndian.PutUint32(want[4:], s.LKey)
		binary.BigEndian.PutUint64(want[8:], s.Addr)
		if got != want {
			t.Fatalf("case %d: DataWords(%+v) writes %x, want %x", i, s, got, want)
		}
		var put [16]byte
		if err := PutData(put[:], s); err != nil || !bytes.Equal(put[:], want[:]) {
			t.Fatalf("case %d: PutData(%+v) writes %x (%v), want %x", i, s, put, err, want)
		}
	}
	for f := range SendFlags(16) {
		for _, small := range []bool{false, true} {
			want := f.fence(small)
			if f&SendSignaled != 0 {
				want |= CtrlCQUpdate
			}
			if got := CtrlFlags(f, small); got != want {
				t.Errorf("CtrlFlags(%#x, %v) = %#x, want %#x", uint32(f), small, got, want)
			}
		}
	}
}
