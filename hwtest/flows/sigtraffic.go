package flows

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/sig"
)

// rdma-core's signature scenarios (tests/test_mlx5_mkey.py, v44.0) and
// the examples of mlx5dv_wr_set_mkey_sig_block(3), as traffic between two
// loopback QPs: A sends (or is read from), B receives (or reads).
//
// Every length through a signature mkey counts wire bytes (mlx5.SendWR's
// SGL): four 512-byte blocks with an 8-byte T10-DIF wire signature are an
// SGE of 4 × 520 bytes over a 2048-byte layout.

// sigBlocks 512-byte blocks move in each transfer.
const (
	sigBlocks = 4
	sigData   = sigBlocks * 512
)

// rdmaT10DIF is test_mkey_sig_t10dif's signature block: no memory
// signature; on the wire T10-DIF per 512 bytes with a CRC guard seeded
// 0xffff, application tag 0xabcd, reference tags from 0x01234567 up
// (REF_REMAP), both escapes; guard, application and reference tags
// checked.
func rdmaT10DIF() *sig.BlockAttr {
	return &sig.BlockAttr{
		Wire: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512, T10DIF: &sig.T10DIF{
			Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0xabcd, RefTag: 0x01234567,
			Flags: sig.T10DIFRefRemap | sig.T10DIFAppEscape | sig.T10DIFAppRefEscape}},
		CheckMask: sig.MaskT10DIFGuard | sig.MaskT10DIFAppTag | sig.MaskT10DIFRefTag,
	}
}

// crc32Domain is a CRC32 signature per 512 bytes seeded with all ones, as
// rdma-core's CRC scenarios configure it.
func crc32Domain() *sig.Domain {
	return &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize512, CRC: &sig.CRC{Type: sig.CRCTypeCRC32, Seed: 0xffffffff}}
}

func engine(t testing.TB, attr *sig.BlockAttr) *sig.Engine {
	t.Helper()
	eng, err := sig.NewEngine(attr)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// transfer is what sig's engine makes of src in direction dir, with no
// check failing.
func transfer(t testing.TB, eng *sig.Engine, dir sig.Direction, src []byte) []byte {
	t.Helper()
	n, err := eng.OutputLen(dir, len(src))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, n)
	if me, err := eng.Transfer(dir, out, src); err != nil || !me.OK() {
		t.Fatalf("engine %v: %v %v", dir, me, err)
	}
	return out
}

// badCheck is the error sig's engine finds in buf, laid out as domain d;
// it must find one of type typ.
func badCheck(t testing.TB, eng *sig.Engine, d sig.SigDomain, buf []byte, typ sig.MkeyErrType) sig.MkeyErr {
	t.Helper()
	me, err := eng.Check(d, buf)
	if err != nil || me.Type != typ {
		t.Fatalf("engine check of the corrupted buffer: %v %v, want %v", me, err, typ)
	}
	return me
}

func sge(mr *mlx5.MR, n int) mlx5.SGE {
	return mlx5.SGE{Addr: mr.Addr(), Length: uint32(n), LKey: mr.LKey()}
}

func mkeySGE(m *mlx5.Mkey, n int) mlx5.SGE {
	return mlx5.SGE{Addr: 0, Length: uint32(n), LKey: m.LKey()}
}

func send(wrID uint64, s mlx5.SGE) mlx5.SendWR {
	return mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: []mlx5.SGE{s}}
}

func rdma(wrID uint64, op mlx5.Opcode, raddr uint64, rkey uint32, s mlx5.SGE) mlx5.SendWR {
	return mlx5.SendWR{WrID: wrID, Opcode: op, Flags: mlx5.SendSignaled, RemoteAddr: raddr, RKey: rkey, SGL: []mlx5.SGE{s}}
}

// T10DIFTraffic runs rdma-core's test_mkey_sig_t10dif and the same
// signature over every operation: A's mkey lays T10-DIF on the wire over
// four blocks of A's data, B's over B's buffer, and each step checks the
// data, the PI against sig's engine and every completion:
//
//  1. SEND from A's mkey into a plain receive of B: the wire bytes, PI
//     inserted after each block;
//  2. SEND from A's mkey into a receive through B's: PI inserted, checked,
//     stripped; no error in either mkey;
//  3. rdma-core's own lengths: a 512-byte SEND through both mkeys carries
//     the first block's data without its PI, which nobody checks;
//  4. RDMA WRITE from A's mkey into B's;
//  5. RDMA READ by B of A's mkey (mlx5dv_wr_set_mkey_sig_block(3)'s
//     example 2) into a plain buffer, then into B's mkey;
//  6. SEND from a plain buffer of A holding wire bytes with a bad
//     reference tag in block 2 into B's mkey: the data arrives, and
//     Mkey.Check on B (the receiver checked) reports what sig's engine
//     finds;
//  7. after B's mkey is configured again, as after any signature error,
//     RDMA READ by B of wire bytes with a bad guard in block 3 into its
//     mkey: the requester checks, and B's Mkey.Check reports it.
func T10DIFTraffic(t *testing.T, c *mlx5.Context, objs Objects) {
	l := NewLoopback(t, c, objs)
	attr := rdmaT10DIF()
	eng := engine(t, attr)
	const wire = sigBlocks * 520
	lw := mlx5.AccessLocalWrite
	src, srcMR := buffer(t, l.PD, sigData, lw)
	for i := range src {
		src[i] = byte(i*29 + i>>9 + 7)
	}
	want := transfer(t, eng, sig.TX, src)
	dst, dstMR := buffer(t, l.PD, sigData, lw)
	plainA, plainAMR := buffer(t, l.PD, wire, lw|mlx5.AccessRemoteRead)
	plainB, plainBMR := buffer(t, l.PD, wire, lw)
	mA, mB := sigMkey(t, l.PD), sigMkey(t, l.PD)
	configure(t, l, l.A, mA, srcMR, sigData, attr, lw|mlx5.AccessRemoteRead)
	configure(t, l, l.B, mB, dstMR, sigData, attr, lw|mlx5.AccessRemoteWrite)
	none := sig.MkeyErr{}

	// 1. Sender's mkey alone.
	recv(t, l.B, 100, sge(plainBMR, wire))
	post(t, l.A, send(1, mkeySGE(mA, wire)))
	l.expect(t, ok(l.A, 1, mlx5.WCSend), okLen(l.B, 100, mlx5.WCRecv, wire))
	sameBlocks(t, "SEND from A's mkey", plainB, want, 520, 512)
	checkMkey(t, l, mA, none)

	// 2. Both mkeys.
	recv(t, l.B, 101, mkeySGE(mB, wire))
	post(t, l.A, send(2, mkeySGE(mA, wire)))
	l.expect(t, ok(l.A, 2, mlx5.WCSend), okLen(l.B, 101, mlx5.WCRecv, wire))
	if !slices.Equal(dst, src) {
		t.Fatal("SEND through both mkeys: B's memory does not hold A's data")
	}
	checkMkey(t, l, mA, none)
	checkMkey(t, l, mB, none)

	// 3. rdma-core's 512 bytes.
	clear(dst)
	recv(t, l.B, 102, mkeySGE(mB, 512))
	post(t, l.A, send(3, mkeySGE(mA, 512)))
	l.expect(t, ok(l.A, 3, mlx5.WCSend), okLen(l.B, 102, mlx5.WCRecv, 512))
	if !slices.Equal(dst[:512], src[:512]) || !allBytes(dst[512:], 0) {
		t.Fatal("a 512-byte SEND through both mkeys: B's memory does not hold the first block alone")
	}
	checkMkey(t, l, mA, none)
	checkMkey(t, l, mB, none)

	// 4. RDMA WRITE through both mkeys.
	clear(dst)
	post(t, l.A, rdma(4, mlx5.OpRDMAWrite, 0, mB.RKey(), mkeySGE(mA, wire)))
	l.expect(t, ok(l.A, 4, mlx5.WCRDMAWrite))
	if !slices.Equal(dst, src) {
		t.Fatal("RDMA WRITE through both mkeys: B's memory does not hold A's data")
	}
	checkMkey(t, l, mA, none)
	checkMkey(t, l, mB, none)

	// 5. RDMA READ of A's mkey.
	clear(plainB)
	post(t, l.B, rdma(5, mlx5.OpRDMARead, 0, mA.RKey(), sge(plainBMR, wire)))
	l.expect(t, okLen(l.B, 5, mlx5.WCRDMARead, wire))
	sameBlocks(t, "RDMA READ of A's mkey", plainB, want, 520, 512)
	clear(dst)
	post(t, l.B, rdma(6, mlx5.OpRDMARead, 0, mA.RKey(), mkeySGE(mB, wire)))
	l.expect(t, okLen(l.B, 6, mlx5.WCRDMARead, wire))
	if !slices.Equal(dst, src) {
		t.Fatal("RDMA READ of A's mkey into B's: B's memory does not hold A's data")
	}
	checkMkey(t, l, mA, none)
	checkMkey(t, l, mB, none)

	// 6. The receiver's mkey finds a bad reference tag.
	copy(plainA, want)
	binary.BigEndian.PutUint32(plainA[2*520+516:], 0x0badf00d)
	wantErr := badCheck(t, eng, sig.DomainWire, plainA, sig.MkeyErrBadRefTag)
	clear(dst)
	recv(t, l.B, 103, mkeySGE(mB, wire))
	post(t, l.A, send(7, sge(plainAMR, wire)))
	l.expect(t, ok(l.A, 7, mlx5.WCSend), okLen(l.B, 103, mlx5.WCRecv, wire))
	if !slices.Equal(dst, src) {
		t.Error("a SEND with a bad reference tag: the data did not arrive whole")
	}
	checkMkey(t, l, mB, wantErr)

	// 7. The requester's mkey finds a bad guard in what it reads.
	configure(t, l, l.B, mB, dstMR, sigData, attr, lw|mlx5.AccessRemoteWrite)
	copy(plainA, want)
	plainA[3*520+513] ^= 0x20
	wantErr = badCheck(t, eng, sig.DomainWire, plainA, sig.MkeyErrBadGuard)
	clear(dst)
	post(t, l.B, rdma(8, mlx5.OpRDMARead, plainAMR.Addr(), plainAMR.RKey(), mkeySGE(mB, wire)))
	l.expect(t, okLen(l.B, 8, mlx5.WCRDMARead, wire))
	if !slices.Equal(dst, src) {
		t.Error("an RDMA READ with a bad guard: the data did not arrive whole")
	}
	checkMkey(t, l, mB, wantErr)
}

// CRCSend runs rdma-core's test_mkey_sig_crc (CRC32 on the wire, seeded
// with all ones) over four blocks, and the same with CRC32C and
// CRC64_XP10 (seeded with all ones). CRC64_XP10's parameters are not
// settled (docs/SIG.md): the flow expects sig's default,
// sig.DefaultCRC64XP10, which is the model's and may not be the device's
// (TestHWCRC64XP10 settles it). For each CRC, with A's and B's mkeys
// laying it on the wire over their buffers:
//
//  1. SEND from A's mkey into a plain receive of B: each block followed by
//     its CRC, as sig's engine computes it;
//  2. SEND through both mkeys: the data arrives, no error in either;
//  3. SEND of those wire bytes with block 1's CRC corrupted from a plain
//     buffer into B's mkey: the data arrives, B's Mkey.Check reports the
//     bad guard sig's engine finds.
//
// A device without the CRC (ErrUnsupported) skips it.
func CRCSend(t *testing.T, c *mlx5.Context, objs Objects) {
	l := NewLoopback(t, c, objs)
	for _, tc := range []struct {
		typ  sig.CRCType
		seed uint64
		mask sig.Mask
	}{
		{sig.CRCTypeCRC32, 0xffffffff, sig.MaskCRC32},
		{sig.CRCTypeCRC32C, 0xffffffff, sig.MaskCRC32C},
		{sig.CRCTypeCRC64XP10, ^uint64(0), sig.MaskCRC64XP10},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			attr := &sig.BlockAttr{Wire: &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize512,
				CRC: &sig.CRC{Type: tc.typ, Seed: tc.seed}}, CheckMask: tc.mask}
			eng := engine(t, attr)
			_, p := eng.Layout(sig.DomainWire)
			blk := 512 + p
			wire := sigBlocks * blk
			lw := mlx5.AccessLocalWrite
			src, srcMR := buffer(t, l.PD, sigData, lw)
			for i := range src {
				src[i] = byte(i*17 + i>>9*5 + int(tc.typ))
			}
			want := transfer(t, eng, sig.TX, src)
			dst, dstMR := buffer(t, l.PD, sigData, lw)
			plainA, plainAMR := buffer(t, l.PD, wire, lw)
			plainB, plainBMR := buffer(t, l.PD, wire, lw)
			mA, mB := sigMkey(t, l.PD), sigMkey(t, l.PD)
			configure(t, l, l.A, mA, srcMR, sigData, attr, lw)
			configure(t, l, l.B, mB, dstMR, sigData, attr, lw)
			none := sig.MkeyErr{}

			recv(t, l.B, 100, sge(plainBMR, wire))
			post(t, l.A, send(1, mkeySGE(mA, wire)))
			l.expect(t, ok(l.A, 1, mlx5.WCSend), okLen(l.B, 100, mlx5.WCRecv, uint32(wire)))
			what := "SEND from A's mkey"
			if tc.typ == sig.CRCTypeCRC64XP10 {
				what += " (CRC64_XP10 with sig.DefaultCRC64XP10, unsettled: see TestHWCRC64XP10)"
			}
			sameBlocks(t, what, plainB, want, blk, 512)
			checkMkey(t, l, mA, none)

			recv(t, l.B, 101, mkeySGE(mB, wire))
			post(t, l.A, send(2, mkeySGE(mA, wire)))
			l.expect(t, ok(l.A, 2, mlx5.WCSend), okLen(l.B, 101, mlx5.WCRecv, uint32(wire)))
			if !slices.Equal(dst, src) {
				t.Fatal("SEND through both mkeys: B's memory does not hold A's data")
			}
			checkMkey(t, l, mA, none)
			checkMkey(t, l, mB, none)

			copy(plainA, want)
			plainA[blk+512] ^= 0x04
			wantErr := badCheck(t, eng, sig.DomainWire, plainA, sig.MkeyErrBadGuard)
			clear(dst)
			recv(t, l.B, 102, mkeySGE(mB, wire))
			post(t, l.A, send(3, sge(plainAMR, wire)))
			l.expect(t, ok(l.A, 3, mlx5.WCSend), okLen(l.B, 102, mlx5.WCRecv, uint32(wire)))
			if !slices.Equal(dst, src) {
				t.Error("a SEND with a bad CRC: the data did not arrive whole")
			}
			checkMkey(t, l, mB, wantErr)
		})
	}
}

// SigBadGuard runs rdma-core's test_mkey_sig_err: A's mkey lays a CRC32
// memory signature over 512 + 4 bytes of A's buffer, which holds 'c'
// throughout (no valid CRC); B's signature mkey lays 512 bytes of its
// buffer with no signature. A SENDs 512 bytes (wire bytes) from its mkey
// into a receive through B's: both complete successfully, B's buffer holds
// the 512 'c's, and Mkey.Check reports a bad guard on A's mkey (the
// sender checked its memory), with the actual and expected CRCs and the
// offset sig's engine finds, and nothing on B's.
func SigBadGuard(t *testing.T, c *mlx5.Context, objs Objects) {
	l := NewLoopback(t, c, objs)
	attr := &sig.BlockAttr{Mem: crc32Domain(), CheckMask: sig.MaskCRC32}
	eng := engine(t, attr)
	lw := mlx5.AccessLocalWrite
	bufA, mrA := buffer(t, l.PD, 516, lw)
	bufB, mrB := buffer(t, l.PD, 512, lw)
	fill(bufA, 'c')
	fill(bufB, 's')
	wantErr := badCheck(t, eng, sig.DomainMemory, bufA, sig.MkeyErrBadGuard)
	mA, mB := sigMkey(t, l.PD), sigMkey(t, l.PD)
	configure(t, l, l.A, mA, mrA, 516, attr, lw)
	configureWR(t, l, l.B, &mlx5.MkeyConfigureWR{WrID: 2, Mkey: mB, Flags: mlx5.SendSignaled, SetAccess: true, Access: lw,
		List: []mlx5.KLM{{Addr: mrB.Addr(), ByteCount: 512, Mkey: mrB.LKey()}}})

	recv(t, l.B, 100, mkeySGE(mB, 512))
	post(t, l.A, send(3, mkeySGE(mA, 512)))
	l.expect(t, ok(l.A, 3, mlx5.WCSend), okLen(l.B, 100, mlx5.WCRecv, 512))
	if !allBytes(bufB, 'c') {
		t.Errorf("B's buffer: % x, want 512 'c's", bufB[:64])
	}
	checkMkey(t, l, mA, wantErr)
	checkMkey(t, l, mB, sig.MkeyErr{})
}

// ManPageCRC32 runs mlx5dv_wr_set_mkey_sig_block(3)'s examples 1 and 1.1:
// a memory domain with a CRC32 per 512 bytes (seeded with all ones) and a
// plain wire, over four blocks.
//
//  1. Example 1: A SENDs from its mkey over its memory, each block's CRC
//     generated by sig's engine: the device checks and strips the CRCs,
//     and B's plain receive gets the 2048 data bytes.
//  2. Example 1.1: A SENDs the 2048 data bytes from a plain buffer into a
//     receive through B's mkey: B's memory holds each block followed by
//     the CRC sig's engine computes.
//  3. Both at once: a SEND from A's mkey into B's.
//  4. Block 2's CRC corrupted in A's memory: the SEND still delivers the
//     data, and A's Mkey.Check reports the bad guard sig's engine finds.
func ManPageCRC32(t *testing.T, c *mlx5.Context, objs Objects) {
	l := NewLoopback(t, c, objs)
	attr := &sig.BlockAttr{Mem: crc32Domain(), CheckMask: sig.MaskCRC32}
	eng := engine(t, attr)
	const mem = sigBlocks * 516
	lw := mlx5.AccessLocalWrite
	src, srcMR := buffer(t, l.PD, sigData, lw)
	for i := range src {
		src[i] = byte(i*11 + i>>9*3 + 1)
	}
	memA, memAMR := buffer(t, l.PD, mem, lw)
	copy(memA, transfer(t, eng, sig.RX, src)) // data laid out in memory, CRCs generated
	want := slices.Clone(memA)
	memB, memBMR := buffer(t, l.PD, mem, lw)
	plainB, plainBMR := buffer(t, l.PD, sigData, lw)
	mA, mB := sigMkey(t, l.PD), sigMkey(t, l.PD)
	configure(t, l, l.A, mA, memAMR, mem, attr, lw)
	configure(t, l, l.B, mB, memBMR, mem, attr, lw)
	none := sig.MkeyErr{}

	// Example 1.
	recv(t, l.B, 100, sge(plainBMR, sigData))
	post(t, l.A, send(1, mkeySGE(mA, sigData)))
	l.expect(t, ok(l.A, 1, mlx5.WCSend), okLen(l.B, 100, mlx5.WCRecv, sigData))
	if !slices.Equal(plainB, src) {
		t.Fatal("example 1: B's receive does not hold the data alone")
	}
	checkMkey(t, l, mA, none)

	// Example 1.1.
	recv(t, l.B, 101, mkeySGE(mB, sigData))
	post(t, l.A, send(2, sge(srcMR, sigData)))
	l.expect(t, ok(l.A, 2, mlx5.WCSend), okLen(l.B, 101, mlx5.WCRecv, sigData))
	sameBlocks(t, "example 1.1: B's memory", memB, want, 516, 512)
	checkMkey(t, l, mB, none)

	// Both.
	clear(memB)
	recv(t, l.B, 102, mkeySGE(mB, sigData))
	post(t, l.A, send(3, mkeySGE(mA, sigData)))
	l.expect(t, ok(l.A, 3, mlx5.WCSend), okLen(l.B, 102, mlx5.WCRecv, sigData))
	sameBlocks(t, "examples 1 and 1.1: B's memory", memB, want, 516, 512)
	checkMkey(t, l, mA, none)
	checkMkey(t, l, mB, none)

	// A bad CRC in A's memory.
	memA[2*516+512] ^= 0x01
	wantErr := badCheck(t, eng, sig.DomainMemory, memA, sig.MkeyErrBadGuard)
	clear(plainB)
	recv(t, l.B, 103, sge(plainBMR, sigData))
	post(t, l.A, send(4, mkeySGE(mA, sigData)))
	l.expect(t, ok(l.A, 4, mlx5.WCSend), okLen(l.B, 103, mlx5.WCRecv, sigData))
	if !slices.Equal(plainB, src) {
		t.Error("a SEND with a bad CRC in memory: the data did not arrive whole")
	}
	checkMkey(t, l, mA, wantErr)
}
