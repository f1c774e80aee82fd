package model

import (
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

// Transfers through a signature mkey. An SGE or a remote address and
// length that name a signature mkey count bytes of the wire domain: the
// bytes of the message (docs/MODEL.md, "Signature mkeys", for the
// sources). The mkey's own length (mkc.len) is its memory layout's, and
// the wire range is mapped onto it through the data the two domains
// share.

// sigLayout is how a domain lays out data: b data bytes per block, each
// followed by p bytes of signature; b is 0 for a domain without a
// signature (plain data).
type sigLayout struct{ b, p uint64 }

func layoutOf(e *sig.Engine, d sig.SigDomain) sigLayout {
	b, p := e.Layout(d)
	return sigLayout{uint64(b), uint64(p)}
}

// unit is what data offsets align to in the domain: its block size, or 1
// for plain data.
func (l sigLayout) unit() uint64 {
	if l.b == 0 {
		return 1
	}
	return l.b
}

// bytes is how many domain bytes the data bytes [0, d) take, from a block
// boundary on: every block whose data is complete with its signature.
func (l sigLayout) bytes(d uint64) uint64 {
	if l.b == 0 {
		return d
	}
	return d/l.b*(l.b+l.p) + d%l.b
}

// data is how many data bytes n domain bytes from a block boundary hold
// (a block's data may be partial; a partial signature holds none).
func (l sigLayout) data(n uint64) uint64 {
	if l.b == 0 {
		return n
	}
	return n/(l.b+l.p)*l.b + min(n%(l.b+l.p), l.b)
}

// whole is how many data bytes the complete blocks, signature included,
// of n domain bytes from a block boundary hold.
func (l sigLayout) whole(n uint64) uint64 {
	if l.b == 0 {
		return n
	}
	return n / (l.b + l.p) * l.b
}

// pos is where data byte i lies in the domain, and run how many data
// bytes follow it in its block (from a block boundary on).
func (l sigLayout) pos(i uint64) (at, run uint64) {
	if l.b == 0 {
		return i, ^uint64(0)
	}
	return i/l.b*(l.b+l.p) + i%l.b, l.b - i%l.b
}

// moveData copies n data bytes from src, laid out as sl, into dst, laid
// out as dl, both from a block boundary; signatures are not touched.
func moveData(dst []byte, dl sigLayout, src []byte, sl sigLayout, n uint64) {
	for i := uint64(0); i < n; {
		sp, sr := sl.pos(i)
		dp, dr := dl.pos(i)
		k := min(sr, dr, n-i)
		copy(dst[dp:dp+k], src[sp:sp+k])
		i += k
	}
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// sigXfer is a transfer through a signature mkey: the wire bytes [off,
// off+n) of its address space, the data they carry and the memory-domain
// bytes that data takes.
type sigXfer struct {
	mem, wire sigLayout
	d0, dn    uint64 // the data offset of the start (from the mkey's) and the data bytes carried
	memAddr   uint64 // the memory-domain address of the start (start_addr based)
	memLen    uint64 // memory-domain bytes the data takes
}

// sigPlan maps n wire bytes at addr of signature mkey mk (named by key)
// onto its memory domain. The start must be on a block boundary of both
// domains (an assumption: a device may keep a block's state across
// messages, the model does not); the end may fall anywhere.
func (mk *mkeyObj) sigPlan(key uint32, addr, n uint64) (sigXfer, *keyErr) {
	e := mk.sig.eng
	x := sigXfer{mem: layoutOf(e, sig.DomainMemory), wire: layoutOf(e, sig.DomainWire)}
	start := prm.Mkc.StartAddr.Get(mk.mkc)
	if addr < start {
		return x, keyFail("key %#x: address %#x is below the mkey's start %#x", key, addr, start)
	}
	off := addr - start
	if x.wire.b != 0 && off%(x.wire.b+x.wire.p) != 0 {
		return x, keyFail("key %#x: wire offset %#x is not on a wire-domain block boundary", key, off)
	}
	x.d0 = x.wire.data(off)
	if x.d0%x.mem.unit() != 0 {
		return x, keyFail("key %#x: wire offset %#x is not on a memory-domain block boundary", key, off)
	}
	x.dn = x.wire.data(n)
	x.memAddr = start + x.mem.bytes(x.d0)
	x.memLen = x.mem.bytes(x.dn)
	return x, nil
}

// transfer runs transfer x of signature mkey mk in direction dir over src,
// the input domain's bytes (TX: x.memLen memory bytes; RX: the wire
// bytes), and returns the output domain's (RX: x.memLen memory bytes; TX:
// at least the wire bytes, which the caller cuts to the range's end).
//
// The data is moved whole. Blocks complete in both domains go through
// sig's engine (TransferAt: checks, generation, copy masks). What follows
// them, when the range ends inside a block (or within a common multiple
// of two different block sizes), is moved as the bytes stream through:
// an input block whose data and signature are all in the range is
// checked, an output block whose data is all there gets its signature
// generated (on TX it may then be cut by the range's end), and a block
// cut short in either domain is neither checked nor signed.
func (mk *mkeyObj) transfer(key uint32, dir sig.Direction, x sigXfer, src []byte) ([]byte, *sigEvent, *keyErr) {
	e := mk.sig.eng
	in, out, inD, outD := x.mem, x.wire, sig.DomainMemory, sig.DomainWire
	if dir == sig.RX {
		in, out, inD, outD = x.wire, x.mem, sig.DomainWire, sig.DomainMemory
	}
	lcm := in.unit() / gcd(in.unit(), out.unit()) * out.unit()
	core := min(x.dn, in.whole(uint64(len(src)))) / lcm * lcm
	dst := make([]byte, out.bytes(x.dn))
	ci, co := in.bytes(core), out.bytes(core)
	me, err := e.TransferAt(dir, dst[:co], src[:ci], x.d0)
	if err != nil {
		return nil, nil, keyFail("key %#x: signature transfer of %d data bytes at data offset %d: %v", key, core, x.d0, err)
	}
	if t := x.dn - core; t > 0 {
		tin, tout, td0 := src[ci:], dst[co:], x.d0+core
		if in.b != 0 {
			if k := in.whole(uint64(len(tin))); k > 0 {
				ce, err := e.CheckAt(inD, tin[:in.bytes(k)], td0)
				if err != nil {
					return nil, nil, keyFail("key %#x: signature check of %d data bytes at data offset %d: %v", key, k, td0, err)
				}
				if me.OK() {
					me = ce
				}
			}
		}
		moveData(tout, out, tin, in, t)
		if out.b != 0 {
			if k := t / out.b * out.b; k > 0 {
				if err := e.GenerateAt(outD, tout[:out.bytes(k)], td0); err != nil {
					return nil, nil, keyFail("key %#x: signature generation of %d data bytes at data offset %d: %v", key, k, td0, err)
				}
			}
		}
	}
	if me.OK() {
		return dst, nil, nil
	}
	return dst, &sigEvent{key, me}, nil
}
