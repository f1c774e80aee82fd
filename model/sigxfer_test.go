package model

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

// TestSigTransferShapes runs transfers of every length up to three wire
// blocks through signature mkeys of several shapes (a signature on one
// side, on both with the same or different block sizes) and checks
// what "Signature mkeys" in docs/MODEL.md promises: TX gives exactly the
// range's wire bytes, a range of whole blocks gives what sig's engine
// gives, the data survives TX then RX, and no check fails on data whose
// signatures are right.
func TestSigTransferShapes(t *testing.T) {
	t10 := func(bs sig.BlockSize) *sig.Domain { return t10dif(bs, 5) }
	crc := func(bs sig.BlockSize, typ sig.CRCType) *sig.Domain {
		return &sig.Domain{Type: sig.SigTypeCRC, BlockSize: bs, CRC: &sig.CRC{Type: typ, Seed: 0xffffffff}}
	}
	attrs := []*sig.BlockAttr{
		{Wire: t10(sig.BlockSize512)},
		{Mem: crc(sig.BlockSize512, sig.CRCTypeCRC32)},
		{Mem: t10(sig.BlockSize512), Wire: crc(sig.BlockSize512, sig.CRCTypeCRC32C)},
		{Mem: t10(sig.BlockSize512), Wire: crc(sig.BlockSize4096, sig.CRCTypeCRC32)},
		{Mem: crc(sig.BlockSize4096, sig.CRCTypeCRC32), Wire: t10(sig.BlockSize512)},
		{Mem: t10(sig.BlockSize520), Wire: t10(sig.BlockSize520)},
	}
	for i, attr := range attrs {
		attr.CheckMask = 0xff
		eng, err := sig.NewEngine(attr)
		if err != nil {
			t.Fatal(err)
		}
		mk := &mkeyObj{mkc: prm.Mkc.Layout().New(), sig: &sigConf{attr: *attr, eng: eng}}
		wl, ml := layoutOf(eng, sig.DomainWire), layoutOf(eng, sig.DomainMemory)
		unit := max(wl.unit(), ml.unit(), 512)
		data := make([]byte, 8*unit)
		pattern(data, uint64(i))
		mem := make([]byte, ml.bytes(uint64(len(data))))
		moveData(mem, ml, data, sigLayout{}, uint64(len(data)))
		if ml.b != 0 {
			if err := eng.Generate(sig.DomainMemory, mem); err != nil {
				t.Fatal(err)
			}
		}
		wholeWire := make([]byte, wl.bytes(uint64(len(data))))
		if me, err := eng.Transfer(sig.TX, wholeWire, mem); err != nil || !me.OK() {
			t.Fatal(me, err)
		}
		step := uint64(1)
		if unit > 512 {
			step = 61
		}
		for n := uint64(0); n <= 3*(wl.unit()+wl.p); n += step {
			name := fmt.Sprintf("attr %d, %d wire bytes", i, n)
			x, e := mk.sigPlan(1, 0, n)
			if e != nil {
				t.Fatalf("%s: %v", name, e)
			}
			wire, ev, e := mk.transfer(1, sig.TX, x, mem[:x.memLen])
			if e != nil || ev != nil {
				t.Fatalf("%s: TX: %v %v", name, e, ev)
			}
			if uint64(len(wire)) < n || !bytes.Equal(wire[:n], wholeWire[:n]) {
				t.Fatalf("%s: TX gives %d bytes, not the whole transfer's first %d", name, len(wire), n)
			}
			back, ev, e := mk.transfer(1, sig.RX, x, wire[:n])
			if e != nil || ev != nil {
				t.Fatalf("%s: RX: %v %v", name, e, ev)
			}
			got := make([]byte, x.dn)
			moveData(got, sigLayout{}, back, ml, x.dn)
			if !bytes.Equal(got, data[:x.dn]) {
				t.Fatalf("%s: the %d data bytes did not survive TX then RX", name, x.dn)
			}
		}
	}
}
