package wqe

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestSegmentWriters checks the segment writers against the segments'
// field layouts (the offsets TestLabBTFWQE checks against the kernel's
// BTF), field by field, for random fields: StoreCtrl, StoreRaddr,
// StoreData, StoreAtomic and StoreAV (of AV.Image) write each field
// big-endian at its offset and zeros in the reserved bytes; the Put functions write the
// same; CtrlFlags is what SendFlags.fence and CtrlCQUpdate make.
func TestSegmentWriters(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 1))
	for i := range 10000 {
		opmod, opcode, pi, qpn := uint8(r.Uint32()), uint8(r.Uint32()), uint16(r.Uint32()), r.Uint32()
		ds, sg, stream, fm, imm := uint8(r.Uint32()), uint8(r.Uint32()), uint16(r.Uint32()), uint8(r.Uint32()), r.Uint32()
		var got, want [16]byte
		db := StoreCtrl(&got, CtrlHeadOf(opmod, opcode, qpn), pi, ds, sg, stream, fm, imm)
		binary.BigEndian.PutUint32(want[ctrlOffOpmodIdxOpcode:], uint32(opmod)<<24|uint32(pi)<<8|uint32(opcode))
		binary.BigEndian.PutUint32(want[ctrlOffQPNDS:], qpn<<8|uint32(ds&0x3f))
		want[ctrlOffSignature] = sg
		binary.BigEndian.PutUint16(want[ctrlOffStreamID:], stream)
		want[ctrlOffFmCeSe] = fm
		binary.BigEndian.PutUint32(want[ctrlOffImm:], imm)
		if got != want || db != binary.BigEndian.Uint64(want[:8]) {
			t.Fatalf("case %d: StoreCtrl writes %x (doorbell word %#x), want %x", i, got, db, want)
		}
		var put [16]byte
		if err := PutCtrl(put[:], &Ctrl{OpMod: opmod, Opcode: opcode, WQEIndex: pi, QPN: qpn, DS: ds, Signature: sg, StreamID: stream, FmCeSe: fm, Imm: imm}); err != nil || put != want {
			t.Fatalf("case %d: PutCtrl writes %x (%v), want %x", i, put, err, want)
		}

		raddr, rkey := r.Uint64(), r.Uint32()
		StoreRaddr(&got, raddr, rkey)
		want = [16]byte{}
		binary.BigEndian.PutUint64(want[raddrOffRaddr:], raddr)
		binary.BigEndian.PutUint32(want[raddrOffRKey:], rkey)
		if got != want {
			t.Fatalf("case %d: StoreRaddr(%#x, %#x) writes %x, want %x", i, raddr, rkey, got, want)
		}

		s := SGE{Addr: r.Uint64(), Length: r.Uint32() >> 1, LKey: r.Uint32()}
		StoreData(&got, s)
		binary.BigEndian.PutUint32(want[dataOffByteCount:], s.Length)
		binary.BigEndian.PutUint32(want[dataOffLKey:], s.LKey)
		binary.BigEndian.PutUint64(want[dataOffAddr:], s.Addr)
		if got != want {
			t.Fatalf("case %d: StoreData(%+v) writes %x, want %x", i, s, got, want)
		}
		if err := PutData(put[:], s); err != nil || !bytes.Equal(put[:], want[:]) {
			t.Fatalf("case %d: PutData(%+v) writes %x (%v), want %x", i, s, put, err, want)
		}

		swap, cmp := r.Uint64(), r.Uint64()
		StoreAtomic(&got, swap, cmp)
		binary.BigEndian.PutUint64(want[atomicOffSwapAdd:], swap)
		binary.BigEndian.PutUint64(want[atomicOffCompare:], cmp)
		if got != want {
			t.Fatalf("case %d: StoreAtomic(%#x, %#x) writes %x, want %x", i, swap, cmp, got, want)
		}

		av := AV{StatRateSL: uint8(r.Uint32()), FlMlid: uint8(r.Uint32()), RLID: uint16(r.Uint32()),
			TClass: uint8(r.Uint32()), HopLimit: uint8(r.Uint32()), GRHGidFl: r.Uint32()}
		for j := range av.RMAC {
			av.RMAC[j] = uint8(r.Uint32())
		}
		for j := range av.RGID {
			av.RGID[j] = uint8(r.Uint32())
		}
		key, dqp := r.Uint64(), r.Uint32()
		var gotAV, wantAV [DatagramSegSize]byte
		for j := range gotAV {
			gotAV[j] = 0xee // every byte is written
		}
		img := av.Image()
		if [12]byte(img[:12]) != [12]byte{} {
			t.Fatalf("case %d: AV.Image's key and dqp_dct are %x, want zeros", i, img[:12])
		}
		for j := range 12 {
			img[j] = uint8(r.Uint32()) // StoreAV does not read them
		}
		StoreAV(&gotAV, key, dqp, &img)
		binary.BigEndian.PutUint64(wantAV[avOffQKey:], key)
		binary.BigEndian.PutUint32(wantAV[avOffDQPDCT:], dqp)
		wantAV[avOffStatRateSL], wantAV[avOffFlMlid] = av.StatRateSL, av.FlMlid
		binary.BigEndian.PutUint16(wantAV[avOffRLID:], av.RLID)
		copy(wantAV[avOffRMAC:], av.RMAC[:])
		wantAV[avOffTClass], wantAV[avOffHopLimit] = av.TClass, av.HopLimit
		binary.BigEndian.PutUint32(wantAV[avOffGRHGidFl:], av.GRHGidFl)
		copy(wantAV[avOffRGID:], av.RGID[:])
		if gotAV != wantAV {
			t.Fatalf("case %d: StoreAV writes %x, want %x", i, gotAV, wantAV)
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
