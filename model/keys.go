package model

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

// Memory access through keys: every lkey and rkey a WQE names is resolved
// as the HCA does, against the mkey table.

// access is what an operation does through a key.
type access int

const (
	accLocalRead access = iota // gather (always allowed)
	accLocalWrite
	accRemoteRead
	accRemoteWrite
	accRemoteAtomic // mkc.a: an atomic at the responder (dc.go)
)

var accessNames = [...]string{accLocalRead: "local read", accLocalWrite: "local write", accRemoteRead: "remote read", accRemoteWrite: "remote write",
	accRemoteAtomic: "remote atomic"}

// local is the access an inner (KLM) key needs for an outer access: the
// HCA reads or writes the memory behind it on the owner's behalf.
func (a access) local() access {
	if a == accRemoteWrite || a == accLocalWrite || a == accRemoteAtomic {
		return accLocalWrite
	}
	return accLocalRead
}

// maxKLMBytes is the most a KLM maps: struct mlx5_wqe_umr_klm_seg's
// byte_count is "up to 2GB" (mlx5dv.h), and libmlx5 refuses to bind a
// memory window over more ("KLM support only 2GB", qp.c).
const maxKLMBytes = 1 << 31

// klm is one entry of an indirect mkey's translation (struct mlx5_klm /
// mlx5_wqe_umr_klm_seg): byteCount bytes at address va of key.
type klm struct {
	byteCount uint32
	key       uint32
	va        uint64
}

// repeatBlock is an interleaved translation (struct
// mlx5_wqe_umr_repeat_block_seg): count repetitions of the entries, each
// repetition byteCount bytes.
type repeatBlock struct {
	byteCount uint32
	count     uint32
	ents      []repeatEnt
}

// repeatEnt is one entry of a repeat block (struct
// mlx5_wqe_umr_repeat_ent_seg): repetition r takes byteCount bytes at
// va + r*stride of key.
type repeatEnt struct {
	stride, byteCount uint16
	key               uint32
	va                uint64
}

// parseKLMs reads n 16-byte KLM entries; all-zero entries are the padding
// libmlx5 adds up to a multiple of four, and are dropped.
func parseKLMs(b []byte, n int) []klm {
	var out []klm
	for i := 0; i < n && 16*i+16 <= len(b); i++ {
		e := b[16*i : 16*i+16]
		if zero(e) {
			continue
		}
		out = append(out, klm{binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:]), binary.BigEndian.Uint64(e[8:])})
	}
	return out
}

// stridedBlockOp is the op of a repeat block header (MLX5_STRIDE_BLOCK_OP,
// qp.h); a translation whose first entry's key word holds it is a repeat
// block, not a KLM list.
const stridedBlockOp = 0x400

// parseRepeat reads a repeat block of n octwords (header and entries).
func parseRepeat(b []byte, n int) (*repeatBlock, bool) {
	if n < 1 || len(b) < 16*n {
		return nil, false
	}
	r := &repeatBlock{byteCount: binary.BigEndian.Uint32(b), count: binary.BigEndian.Uint32(b[8:])}
	num := int(binary.BigEndian.Uint16(b[14:]))
	if num == 0 || num > n-1 {
		return nil, false
	}
	sum := uint32(0)
	for i := range num {
		e := b[16+16*i:]
		ent := repeatEnt{binary.BigEndian.Uint16(e), binary.BigEndian.Uint16(e[2:]), binary.BigEndian.Uint32(e[4:]), binary.BigEndian.Uint64(e[8:])}
		sum += uint32(ent.byteCount)
		r.ents = append(r.ents, ent)
	}
	if sum != r.byteCount || sum == 0 {
		return nil, false
	}
	return r, true
}

// keyErr is why a key did not resolve.
type keyErr struct{ why string }

func (e *keyErr) Error() string { return e.why }

func keyFail(format string, args ...any) *keyErr { return &keyErr{fmt.Sprintf(format, args...)} }

// mkey checks that key names a usable mkey of PD pdn that allows a: it
// exists, is not free, has the key's variant byte, is in the PD and its
// access bits permit a (local read always).
func (h *hca) mkey(key, pdn uint32, a access) (*mkeyObj, *keyErr) {
	mk, ok := h.mkeys[key>>8]
	switch {
	case !ok:
		return nil, keyFail("key %#x: no mkey %#x", key, key>>8)
	case prm.Mkc.Free.Get(mk.mkc) != 0:
		return nil, keyFail("key %#x: the mkey is free", key)
	case uint8(key) != uint8(prm.Mkc.Mkey70.Get(mk.mkc)):
		return nil, keyFail("key %#x: the mkey's variant is %#x", key, prm.Mkc.Mkey70.Get(mk.mkc))
	case mk.pdn != pdn:
		return nil, keyFail("key %#x: the mkey is in PD %#x, not %#x", key, mk.pdn, pdn)
	}
	var bit prm.Field
	switch a {
	case accLocalWrite:
		bit = prm.Mkc.Lw
	case accRemoteRead:
		bit = prm.Mkc.Rr
	case accRemoteWrite:
		bit = prm.Mkc.Rw
	case accRemoteAtomic:
		bit = prm.Mkc.A
	default:
		return mk, nil
	}
	if bit.Get(mk.mkc) == 0 {
		return nil, keyFail("key %#x: the mkey does not allow %s", key, accessNames[a])
	}
	return mk, nil
}

// inRange checks [addr, addr+n) against the mkey's [start_addr,
// start_addr+len) and returns the offset of addr.
func inRange(mk *mkeyObj, key uint32, addr, n uint64) (uint64, *keyErr) {
	start := prm.Mkc.StartAddr.Get(mk.mkc)
	length := prm.Mkc.Len.Get(mk.mkc)
	if prm.Mkc.Length64.Get(mk.mkc) != 0 {
		length = ^uint64(0) // 2^64 bytes
	}
	end, carry := bits.Add64(addr, n, 0)
	if addr < start || carry != 0 || end-start > length {
		return 0, keyFail("key %#x: [%#x, +%#x) is outside the mkey's [%#x, +%#x)", key, addr, n, start, length)
	}
	return addr - start, nil
}

// translate appends to spans the memory behind [addr, addr+n) of mkey mk
// (named by key), walking KLM translations down to RegMR's memory. depth
// counts the indirections taken so far.
func (h *hca) translate(spans [][]byte, mk *mkeyObj, key uint32, addr, n uint64, a access, depth int) ([][]byte, *keyErr) {
	off, e := inRange(mk, key, addr, n)
	if e != nil || n == 0 {
		return spans, e
	}
	mode := prm.Mkc.AccessMode10.Get(mk.mkc) | prm.Mkc.AccessMode42.Get(mk.mkc)<<2
	switch mode {
	case accessModeMTT:
		if mk.odp != nil {
			return h.odpSpan(spans, mk, key, addr, n, a)
		}
		if mk.mem == nil {
			h.fault(mk.ctx, "key %#x: a DEVX MTT mkey was used; the model keeps no MTT (prm has no mkey_umem_id), so the access fails", key)
			return spans, keyFail("key %#x: a DEVX MTT mkey, whose pages the model does not keep", key)
		}
		return append(spans, mk.mem[off:off+n:off+n]), nil
	case accessModeKLMS:
	default:
		h.fault(mk.ctx, "key %#x: access mode %d is not modelled, so the access fails", key, mode)
		return spans, keyFail("key %#x: access mode %d is not modelled", key, mode)
	}
	if depth >= int(h.prof.cap(prm.CmdHcaCap.MaxIndirection)) {
		return spans, keyFail("key %#x: more than max_indirection (%d) levels of indirect mkeys", key, h.prof.cap(prm.CmdHcaCap.MaxIndirection))
	}
	inner := func(spans [][]byte, k uint32, va, n uint64) ([][]byte, *keyErr) {
		in, e := h.mkey(k, mk.pdn, a.local())
		if e != nil {
			return spans, keyFail("key %#x: translation entry: %s", key, e.why)
		}
		if in.sigOn() {
			return spans, keyFail("key %#x: translation entry %#x is a signature mkey", key, k)
		}
		if in.cryptoMkey() {
			return spans, keyFail("key %#x: translation entry %#x is a crypto mkey", key, k)
		}
		return h.translate(spans, in, k, va, n, a, depth+1)
	}
	if r := mk.rep; r != nil {
		rep, w := off/uint64(r.byteCount), off%uint64(r.byteCount)
		for n > 0 {
			if rep >= uint64(r.count) {
				return spans, keyFail("key %#x: past the repeat block's %d repetitions", key, r.count)
			}
			pos := uint64(0)
			for _, ent := range r.ents {
				bc := uint64(ent.byteCount)
				if n > 0 && w < pos+bc {
					take := min(pos+bc-w, n)
					var e *keyErr
					spans, e = inner(spans, ent.key, ent.va+rep*uint64(ent.stride)+w-pos, take)
					if e != nil {
						return spans, e
					}
					n -= take
					w += take
				}
				pos += bc
			}
			rep, w = rep+1, 0
		}
		return spans, nil
	}
	for _, k := range mk.klms {
		bc := uint64(k.byteCount)
		if off >= bc {
			off -= bc
			continue
		}
		take := min(bc-off, n)
		var e *keyErr
		if spans, e = inner(spans, k.key, k.va+off, take); e != nil {
			return spans, e
		}
		n -= take
		off = 0
		if n == 0 {
			return spans, nil
		}
	}
	return spans, keyFail("key %#x: past the end of its KLM list", key)
}

// sigConf is a signature mkey's configuration from its BSF.
type sigConf struct {
	attr            sig.BlockAttr
	eng             *sig.Engine
	memPSV, wirePSV uint32
}

// sigOn reports whether the mkey presents a signature: bsf_en with a
// configuration a UMR set.
func (mk *mkeyObj) sigOn() bool { return mk.sig != nil && prm.Mkc.BsfEn.Get(mk.mkc) != 0 }

// sigEvent is a signature check failure to report in a SIG_ERR CQE.
type sigEvent struct {
	key uint32
	err sig.MkeyErr
}

// read gathers n bytes at addr of key for an operation of access a by a
// QP of PD pdn and returns them as they go on the wire. Through a
// signature mkey, addr and n count wire-domain bytes ("Signature mkeys"
// in docs/MODEL.md): the memory behind them goes through the engine's TX
// transfer (memory to wire), whose check failure, if any, is returned as
// an event. Through a crypto mkey the data is encrypted or decrypted on
// its way, before or after the signature engine ("Crypto data path").
func (h *hca) read(key, pdn uint32, addr, n uint64, a access) ([]byte, *sigEvent, *keyErr) {
	mk, e := h.mkey(key, pdn, a)
	if e != nil {
		return nil, nil, e
	}
	if !mk.sigOn() {
		cj, e := h.cryptoPlan(mk, key, addr, n, nil)
		if e != nil {
			return nil, nil, e
		}
		spans, e := h.translate(nil, mk, key, addr, n, a, 0)
		if e != nil {
			return nil, nil, e
		}
		b := gatherSpans(spans, n)
		if cj != nil {
			b = cj.run(sig.TX, b)
		}
		return b, nil, nil
	}
	x, e := mk.sigPlan(key, addr, n)
	if e != nil {
		return nil, nil, e
	}
	cj, e := h.cryptoPlan(mk, key, addr, n, &x)
	if e != nil {
		return nil, nil, e
	}
	spans, e := h.translate(nil, mk, key, x.memAddr, x.memLen, a, 0)
	if e != nil {
		return nil, nil, e
	}
	mem := gatherSpans(spans, x.memLen)
	if cj != nil && !cj.wire {
		mem = cj.run(sig.TX, mem)
	}
	wire, ev, e := mk.transfer(key, sig.TX, x, mem)
	if e != nil {
		return nil, nil, e
	}
	wire = wire[:n]
	if cj != nil && cj.wire {
		wire = cj.run(sig.TX, wire)
	}
	return wire, h.sigReport(mk, ev), nil
}

// write scatters wire bytes at addr of key. Through a signature mkey,
// addr counts wire-domain bytes and the bytes go through the engine's RX
// transfer (wire to memory) first; through a crypto mkey they are
// decrypted or encrypted before or after it. It returns the check
// failure, if any.
func (h *hca) write(key, pdn uint32, addr uint64, wire []byte, a access) (*sigEvent, *keyErr) {
	mk, e := h.mkey(key, pdn, a)
	if e != nil {
		return nil, e
	}
	mem, ev, where := wire, (*sigEvent)(nil), addr
	if mk.sigOn() {
		x, e := mk.sigPlan(key, addr, uint64(len(wire)))
		if e != nil {
			return nil, e
		}
		// The range first: a transfer that cannot land checks nothing.
		if _, e := inRange(mk, key, x.memAddr, x.memLen); e != nil {
			return nil, e
		}
		cj, e := h.cryptoPlan(mk, key, addr, uint64(len(wire)), &x)
		if e != nil {
			return nil, e
		}
		if cj != nil && cj.wire {
			wire = cj.run(sig.RX, wire)
		}
		if mem, ev, e = mk.transfer(key, sig.RX, x, wire); e != nil {
			return nil, e
		}
		if cj != nil && !cj.wire {
			mem = cj.run(sig.RX, mem)
		}
		where = x.memAddr
	} else {
		cj, e := h.cryptoPlan(mk, key, addr, uint64(len(wire)), nil)
		if e != nil {
			return nil, e
		}
		if cj != nil {
			mem = cj.run(sig.RX, wire)
		}
	}
	spans, e := h.translate(nil, mk, key, where, uint64(len(mem)), a, 0)
	if e != nil {
		return nil, e
	}
	for _, s := range spans {
		mem = mem[dmaCopy(s, mem):]
	}
	return h.sigReport(mk, ev), nil
}

// sigReport returns the check failure ev of a transfer through signature
// mkey mk if the device reports it in a SIG_ERR CQE, nil if it ignores
// it ("Signature errors" in docs/MODEL.md). The PSV of the failed domain
// reports its first failure and goes to its ERROR state, where it ignores
// the next ones until a SET_PSV; with Options.SigErrOncePerMkey the mkey
// also reports only while its count of reported errors (modulo 2) differs
// from expected_sigerr_count, which a UMR's SIG_ERR mask bit sets. An
// ignored failure changes nothing: the data moved all the same.
func (h *hca) sigReport(mk *mkeyObj, ev *sigEvent) *sigEvent {
	if ev == nil {
		return nil
	}
	n := mk.sig.memPSV
	if ev.err.Domain == sig.DomainWire {
		n = mk.sig.wirePSV
	}
	p, ok := h.psvs[n]
	if !ok {
		h.fault(mk.ctx, "mkey %#x: a signature error in a domain whose PSV %#x was destroyed is not modelled; reported", ev.key, n)
		return ev
	}
	if p.failed || h.sigErrOncePerMkey && uint64(mk.reported) == prm.Mkc.ExpectedSigerrCount.Get(mk.mkc) {
		return nil
	}
	p.failed = true
	mk.reported ^= 1
	return ev
}

// reach checks that n bytes at addr of key (wire-domain bytes for a
// signature mkey) lie in the mkey and that it allows a, as a gather or
// scatter would, without moving anything.
func (h *hca) reach(key, pdn uint32, addr, n uint64, a access) *keyErr {
	mk, e := h.mkey(key, pdn, a)
	if e != nil {
		return e
	}
	var sx *sigXfer
	if mk.sigOn() {
		x, e := mk.sigPlan(key, addr, n)
		if e != nil {
			return e
		}
		sx = &x
	}
	if _, e := h.cryptoPlan(mk, key, addr, n, sx); e != nil {
		return e
	}
	if sx != nil {
		addr, n = sx.memAddr, sx.memLen
	}
	_, e = inRange(mk, key, addr, n)
	return e
}

// gatherSpans concatenates spans (n bytes in all), with the device's DMA
// (dmaCopy).
func gatherSpans(spans [][]byte, n uint64) []byte {
	out := make([]byte, n)
	at := out
	for _, s := range spans {
		at = at[dmaCopy(at, s):]
	}
	return out[:len(out)-len(at)]
}
