package flows

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
)

// rdma-core's layout scenarios (tests/test_mlx5_mkey.py, v44.0): an
// indirect mkey over pieces of a buffer, traffic through it, and an
// access past its end.

// entry is one piece of a layout: n bytes at offset off of a buffer and,
// in an interleaved layout, skip bytes skipped after them.
type entry struct{ off, n, skip int }

// layout is an mkey layout over one buffer: a list (repeat 0) or an
// interleaved layout of its entries repeated.
type layout struct {
	name    string
	entries []entry
	repeat  int
}

// rdma-core's layouts: 8 bytes at 0 and 8 at 64 (reg_mr_list); the same
// with 2 bytes skipped after each, three times (reg_mr_interleaved).
var rdmaLayouts = []layout{
	{name: "list", entries: []entry{{0, 8, 0}, {64, 8, 0}}},
	{name: "interleaved", entries: []entry{{0, 8, 2}, {64, 8, 2}}, repeat: 3},
}

// pieces are the buffer's pieces in the mkey's address order: the layout
// maps the mkey's bytes [0, len) onto them, one after another.
func (lay layout) pieces() []entry {
	if lay.repeat == 0 {
		return lay.entries
	}
	var out []entry
	for r := range lay.repeat {
		for _, e := range lay.entries {
			out = append(out, entry{off: e.off + r*(e.n+e.skip), n: e.n})
		}
	}
	return out
}

// len is the mkey's length.
func (lay layout) len() int {
	n := 0
	for _, p := range lay.pieces() {
		n += p.n
	}
	return n
}

// gather is what the mkey's bytes [0, len) read from buf.
func (lay layout) gather(buf []byte) []byte {
	var out []byte
	for _, p := range lay.pieces() {
		out = append(out, buf[p.off:p.off+p.n]...)
	}
	return out
}

// scatter is buf after msg was written at the mkey's offset at.
func (lay layout) scatter(buf []byte, at int, msg []byte) []byte {
	out := slices.Clone(buf)
	pos := 0
	for _, p := range lay.pieces() {
		for i := range p.n {
			if pos >= at && pos-at < len(msg) {
				out[p.off+i] = msg[pos-at]
			}
			pos++
		}
	}
	return out
}

// wr is the mkey configure that lays m over mr with the layout.
func (lay layout) wr(wrID uint64, m *mlx5.Mkey, mr *mlx5.MR, access mlx5.AccessFlags) *mlx5.MkeyConfigureWR {
	wr := &mlx5.MkeyConfigureWR{WrID: wrID, Mkey: m, Flags: mlx5.SendSignaled, SetAccess: true, Access: access}
	for _, e := range lay.entries {
		if lay.repeat == 0 {
			wr.List = append(wr.List, mlx5.KLM{Addr: mr.Addr() + uint64(e.off), ByteCount: uint32(e.n), Mkey: mr.LKey()})
		} else {
			wr.Interleaved = append(wr.Interleaved, mlx5.RepeatEntry{Addr: mr.Addr() + uint64(e.off), ByteCount: uint32(e.n), Skip: uint32(e.skip), Mkey: mr.LKey()})
		}
	}
	wr.RepeatCount = uint32(lay.repeat)
	return wr
}

// indirectMkey creates an indirect mkey of up to n layout entries (as
// rdma-core's tests do, 3), or skips the test on a device or context
// without them.
func indirectMkey(t testing.TB, pd *mlx5.PD, n int) *mlx5.Mkey {
	t.Helper()
	return newMkey(t, pd, mlx5.MkeyOptions{MaxEntries: n})
}

// newMkey creates an mkey of o, or skips the test on a device or context
// that makes none; t's cleanup closes it.
func newMkey(t testing.TB, pd *mlx5.PD, o mlx5.MkeyOptions) *mlx5.Mkey {
	t.Helper()
	m, err := pd.CreateMkey(o)
	if errors.Is(err, mlx5.ErrUnsupported) || errors.Is(err, mlx5.ErrNoDEVX) {
		t.Skipf("no indirect mkeys: %v", err)
	}
	if err != nil {
		t.Fatalf("create mkey: %v", err)
	}
	t.Cleanup(func() { closeAll(t, m) })
	return m
}

// configureWR posts an mkey configure on qp and expects its one
// completion.
func configureWR(t testing.TB, l *Loopback, qp *mlx5.QP, wr *mlx5.MkeyConfigureWR) {
	t.Helper()
	if err := qp.PostMkeyConfigure(wr); err != nil {
		t.Fatalf("mkey configure %d: %v", wr.WrID, err)
	}
	l.expect(t, ok(qp, wr.WrID, mlx5.WCUMR))
}

// fill sets every byte of b to c.
func fill(b []byte, c byte) {
	for i := range b {
		b[i] = c
	}
}

// MkeyLayouts runs rdma-core's test_mkey_list_new_api and
// test_mkey_interleaved_new_api and more traffic through the same mkeys.
// For each layout (rdma-core's list of two 8-byte pieces, and its
// interleaved layout of the same pieces with 2 bytes skipped after each,
// three times), A and B each lay an indirect mkey over their own buffer
// by an mkey configure, then:
//
//  1. ten times, as rdma-core does: A's buffer gets new bytes, B's is
//     filled with 's', A SENDs the mkey's whole length from its mkey into
//     a receive through B's; B's pieces must hold A's pieces' bytes, in
//     order, and every other byte of B's buffer must still be 's';
//  2. A RDMA-WRITEs plain bytes into B's mkey at offset 5 (the write
//     straddles pieces), then RDMA-READs B's mkey whole into a plain
//     buffer;
//  3. A RDMA-WRITEs from its mkey into a plain buffer of B's, and
//     RDMA-READs B's plain bytes into its mkey;
//  4. as rdma-core ends each test (invalidate_mkeys), A and B each
//     invalidate their own mkey with a LOCAL_INV; the next layout's
//     configure makes them usable again.
//
// Every completion is checked: status, opcode, byte length, wr_id, once.
func MkeyLayouts(t *testing.T, c *mlx5.Context, objs Objects) {
	l := NewLoopback(t, c, objs)
	const size = 256
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	bufA, mrA := buffer(t, l.PD, size, all)
	bufB, mrB := buffer(t, l.PD, size, all)
	plainA, plainAMR := buffer(t, l.PD, size, all)
	plainB, plainBMR := buffer(t, l.PD, size, all)
	mA := indirectMkey(t, l.PD, 3)
	mB := indirectMkey(t, l.PD, 3)
	wr := uint64(100)
	next := func() uint64 { wr++; return wr }

	for _, lay := range rdmaLayouts {
		t.Run(lay.name, func(t *testing.T) {
			n := lay.len()
			configureWR(t, l, l.A, lay.wr(next(), mA, mrA, all))
			configureWR(t, l, l.B, lay.wr(next(), mB, mrB, all))

			// 1. rdma-core's traffic.
			for i := range 10 {
				for j := range bufA {
					bufA[j] = byte(j*7 + i*31 + 1)
				}
				fill(bufB, 's')
				before := slices.Clone(bufB)
				r, s := next(), next()
				recv(t, l.B, r, mlx5.SGE{Addr: 0, Length: uint32(n), LKey: mB.LKey()})
				post(t, l.A, mlx5.SendWR{WrID: s, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled,
					SGL: []mlx5.SGE{{Addr: 0, Length: uint32(n), LKey: mA.LKey()}}})
				l.expect(t, ok(l.A, s, mlx5.WCSend), okLen(l.B, r, mlx5.WCRecv, uint32(n)))
				if want := lay.scatter(before, 0, lay.gather(bufA)); !slices.Equal(bufB, want) {
					t.Fatalf("SEND %d through the mkeys: B's buffer\n% x\nwant\n% x", i, bufB[:100], want[:100])
				}
			}

			// 2. RDMA WRITE into B's mkey from offset 5, RDMA READ of it.
			for j := range plainA {
				plainA[j] = byte(j*13 + 3)
			}
			before := slices.Clone(bufB)
			w := next()
			post(t, l.A, mlx5.SendWR{WrID: w, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: 5, RKey: mB.RKey(),
				SGL: []mlx5.SGE{{Addr: plainAMR.Addr(), Length: uint32(n - 5), LKey: plainAMR.LKey()}}})
			l.expect(t, ok(l.A, w, mlx5.WCRDMAWrite))
			if want := lay.scatter(before, 5, plainA[:n-5]); !slices.Equal(bufB, want) {
				t.Fatalf("RDMA WRITE into B's mkey at 5: B's buffer\n% x\nwant\n% x", bufB[:100], want[:100])
			}
			clear(plainA)
			rd := next()
			post(t, l.A, mlx5.SendWR{WrID: rd, Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled, RemoteAddr: 0, RKey: mB.RKey(),
				SGL: []mlx5.SGE{{Addr: plainAMR.Addr(), Length: uint32(n), LKey: plainAMR.LKey()}}})
			l.expect(t, okLen(l.A, rd, mlx5.WCRDMARead, uint32(n)))
			if want := lay.gather(bufB); !slices.Equal(plainA[:n], want) {
				t.Fatalf("RDMA READ of B's mkey: % x, want % x", plainA[:n], want)
			}

			// 3. RDMA WRITE from A's mkey, RDMA READ into it.
			clear(plainB)
			w = next()
			post(t, l.A, mlx5.SendWR{WrID: w, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: plainBMR.Addr(), RKey: plainBMR.RKey(),
				SGL: []mlx5.SGE{{Addr: 0, Length: uint32(n), LKey: mA.LKey()}}})
			l.expect(t, ok(l.A, w, mlx5.WCRDMAWrite))
			if want := lay.gather(bufA); !slices.Equal(plainB[:n], want) {
				t.Fatalf("RDMA WRITE from A's mkey: % x, want % x", plainB[:n], want)
			}
			for j := range plainB {
				plainB[j] = byte(j*5 + 11)
			}
			before = slices.Clone(bufA)
			rd = next()
			post(t, l.A, mlx5.SendWR{WrID: rd, Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled, RemoteAddr: plainBMR.Addr(), RKey: plainBMR.RKey(),
				SGL: []mlx5.SGE{{Addr: 0, Length: uint32(n), LKey: mA.LKey()}}})
			l.expect(t, okLen(l.A, rd, mlx5.WCRDMARead, uint32(n)))
			if want := lay.scatter(before, 0, plainB[:n]); !slices.Equal(bufA, want) {
				t.Fatalf("RDMA READ into A's mkey: A's buffer\n% x\nwant\n% x", bufA[:100], want[:100])
			}

			// 4. rdma-core's invalidate_mkeys.
			ia, ib := next(), next()
			post(t, l.A, mlx5.SendWR{WrID: ia, Opcode: mlx5.OpLocalInv, Flags: mlx5.SendSignaled, InvalidateKey: mA.LKey()})
			post(t, l.B, mlx5.SendWR{WrID: ib, Opcode: mlx5.OpLocalInv, Flags: mlx5.SendSignaled, InvalidateKey: mB.LKey()})
			l.expect(t, ok(l.A, ia, mlx5.WCLocalInv), ok(l.B, ib, mlx5.WCLocalInv))
		})
	}
}

// RemoteInvalidate runs rdma-core's test_mkey_remote_invalidate: A and B
// lay mkeys created with remote invalidation (MkeyOptions.RemoteInvalidate)
// over rdma-core's list layout and exchange a SEND through them; then A
// SENDs with invalidate naming B's mkey into an empty receive of B's
// (through that mkey): B's completion says it invalidated B's rkey.
// After that a SEND into a receive through B's mkey fails: B's receive
// with a local protection error, A's SEND with an error (rdma-core
// expects traffic to fail, not a status).
func RemoteInvalidate(t *testing.T, c *mlx5.Context, objs Objects) {
	l := NewLoopback(t, c, objs)
	lay := rdmaLayouts[0]
	n := lay.len()
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	bufA, mrA := buffer(t, l.PD, 256, all)
	bufB, mrB := buffer(t, l.PD, 256, all)
	rinval := mlx5.MkeyOptions{MaxEntries: 3, RemoteInvalidate: true}
	mA, mB := newMkey(t, l.PD, rinval), newMkey(t, l.PD, rinval)
	configureWR(t, l, l.A, lay.wr(1, mA, mrA, all))
	configureWR(t, l, l.B, lay.wr(2, mB, mrB, all))
	for j := range bufA {
		bufA[j] = byte(j*3 + 1)
	}
	fill(bufB, 's')
	before := slices.Clone(bufB)
	recv(t, l.B, 100, mlx5.SGE{Addr: 0, Length: uint32(n), LKey: mB.LKey()})
	post(t, l.A, mlx5.SendWR{WrID: 3, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: []mlx5.SGE{{Addr: 0, Length: uint32(n), LKey: mA.LKey()}}})
	l.expect(t, ok(l.A, 3, mlx5.WCSend), okLen(l.B, 100, mlx5.WCRecv, uint32(n)))
	if want := lay.scatter(before, 0, lay.gather(bufA)); !slices.Equal(bufB, want) {
		t.Fatalf("SEND through the mkeys: B's buffer % x, want % x", bufB[:80], want[:80])
	}

	// SEND with invalidate of B's mkey, as rdma-core posts it: no data.
	recv(t, l.B, 101, mlx5.SGE{Addr: 0, Length: 0, LKey: mB.LKey()})
	post(t, l.A, mlx5.SendWR{WrID: 4, Opcode: mlx5.OpSendInv, Flags: mlx5.SendSignaled, InvalidateKey: mB.RKey(),
		SGL: []mlx5.SGE{{Addr: 0, Length: 0, LKey: mA.LKey()}}})
	got := l.Wait(t, 2)
	for _, w := range got {
		switch {
		case w.QPN == l.A.QPN() && w.WrID == 4 && w.Status == mlx5.WCSuccess && w.Opcode == mlx5.WCSend:
		case w.QPN == l.B.QPN() && w.WrID == 101 && w.Status == mlx5.WCSuccess && w.Opcode == mlx5.WCRecv &&
			w.WithInv && w.InvalidatedRkey == mB.RKey() && w.ByteLen == 0:
		default:
			t.Fatalf("SEND with invalidate: completion %+v (B's rkey %#x)", w, mB.RKey())
		}
	}
	l.quiet(t, time.Millisecond)

	// Traffic through B's invalidated mkey fails.
	recv(t, l.B, 102, mlx5.SGE{Addr: 0, Length: uint32(n), LKey: mB.LKey()})
	post(t, l.A, mlx5.SendWR{WrID: 5, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: []mlx5.SGE{{Addr: 0, Length: uint32(n), LKey: mA.LKey()}}})
	for _, w := range l.Wait(t, 2) {
		switch {
		case w.QPN == l.B.QPN() && w.WrID == 102 && w.Status == mlx5.WCLocProtErr:
		case w.QPN == l.A.QPN() && w.WrID == 5 && w.Status != mlx5.WCSuccess:
		default:
			t.Errorf("SEND into the invalidated mkey: completion %+v", w)
		}
	}
}

// MkeyPastLayout runs rdma-core's test_mkey_list_bad_flow and its remote
// counterparts: over rdma-core's list layout (16 bytes), an access of 100
// bytes fails.
//
//   - SEND of 100 bytes from A's mkey (rdma-core's case; B has a receive
//     of 100 bytes through its own mkey posted): A's send completes with a
//     local protection error; B's receive does not complete.
//   - RDMA READ of 100 bytes into A's mkey: a local protection error.
//   - RDMA WRITE and RDMA READ of 100 bytes at B's mkey: a remote access
//     error at A.
//
// Each case runs on a new loopback pair (the failing QP goes to the error
// state).
func MkeyPastLayout(t *testing.T, c *mlx5.Context, objs Objects) {
	all := mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead
	lay := rdmaLayouts[0]
	const past = 100
	cases := []struct {
		name   string
		wr     func(mA, mB *mlx5.Mkey, plain *mlx5.MR) mlx5.SendWR
		status mlx5.WCStatus
	}{
		{"send", func(mA, _ *mlx5.Mkey, _ *mlx5.MR) mlx5.SendWR {
			return mlx5.SendWR{Opcode: mlx5.OpSend, SGL: []mlx5.SGE{{Addr: 0, Length: past, LKey: mA.LKey()}}}
		}, mlx5.WCLocProtErr},
		{"read into", func(mA, _ *mlx5.Mkey, plain *mlx5.MR) mlx5.SendWR {
			return mlx5.SendWR{Opcode: mlx5.OpRDMARead, RemoteAddr: plain.Addr(), RKey: plain.RKey(), SGL: []mlx5.SGE{{Addr: 0, Length: past, LKey: mA.LKey()}}}
		}, mlx5.WCLocProtErr},
		{"write at", func(_, mB *mlx5.Mkey, plain *mlx5.MR) mlx5.SendWR {
			return mlx5.SendWR{Opcode: mlx5.OpRDMAWrite, RemoteAddr: 0, RKey: mB.RKey(), SGL: []mlx5.SGE{{Addr: plain.Addr(), Length: past, LKey: plain.LKey()}}}
		}, mlx5.WCRemAccessErr},
		{"read at", func(_, mB *mlx5.Mkey, plain *mlx5.MR) mlx5.SendWR {
			return mlx5.SendWR{Opcode: mlx5.OpRDMARead, RemoteAddr: 0, RKey: mB.RKey(), SGL: []mlx5.SGE{{Addr: plain.Addr(), Length: past, LKey: plain.LKey()}}}
		}, mlx5.WCRemAccessErr},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLoopback(t, c, objs)
			bufA, mrA := buffer(t, l.PD, 256, all)
			bufB, mrB := buffer(t, l.PD, 256, all)
			_, plainMR := buffer(t, l.PD, 256, all)
			fill(bufA, 'c')
			fill(bufB, 's')
			mA := indirectMkey(t, l.PD, 3)
			mB := indirectMkey(t, l.PD, 3)
			configureWR(t, l, l.A, lay.wr(1, mA, mrA, all))
			configureWR(t, l, l.B, lay.wr(2, mB, mrB, all))
			if tc.name == "send" {
				recv(t, l.B, 3, mlx5.SGE{Addr: 0, Length: past, LKey: mB.LKey()})
			}
			wr := tc.wr(mA, mB, plainMR)
			wr.WrID, wr.Flags = uint64(10+i), mlx5.SendSignaled
			post(t, l.A, wr)
			l.expect(t, want{wrID: wr.WrID, qp: l.A, status: tc.status})
			if !allBytes(bufB, 's') {
				t.Errorf("B's buffer changed: % x", bufB[:100])
			}
		})
	}
}

// allBytes reports whether every byte of b is c.
func allBytes(b []byte, c byte) bool {
	return !slices.ContainsFunc(b, func(x byte) bool { return x != c })
}
