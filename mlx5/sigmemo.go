package mlx5

import (
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// sigMemo is the last signature block an mkey's configure checked and
// found good (sig.BlockAttr.Validate, and the device's caps when the
// mkey checks them), kept by value with its SET_PSV values: a configure
// with a block of the same value, the common case of a storage target
// that sets the same protection on every I/O, skips the checks and the
// PSVs' computation. A value, not a pointer: the caller may change a
// block between posts. The poster's, as the rest of an mkey's
// configure state.
type sigMemo struct {
	ok                  bool
	flags               sig.BlockAttrFlags
	checkMask, copyMask sig.Mask
	compMask            uint64
	mem, wire           domainMemo
	psvs                wqe.BlockPSVs
	// bsf is the block's BSF with the mkey's PSV indexes (wqe.PutBSF).
	bsf [wqe.BSFSegSize]byte
}

// domainMemo is one domain of a sigMemo: absent (!set), or the
// domain's fields and the values its T10DIF and CRC pointers point at.
type domainMemo struct {
	set, dif, crc bool
	typ           sig.SigType
	blockSize     sig.BlockSize
	compMask      uint64
	t10dif        sig.T10DIF
	crcv          sig.CRC
}

// matches reports whether a has the value of the block m remembers.
func (m *sigMemo) matches(a *sig.BlockAttr) bool {
	return m.ok && a.Flags == m.flags && a.CheckMask == m.checkMask && a.CopyMask == m.copyMask &&
		a.CompMask == m.compMask && m.mem.matches(a.Mem) && m.wire.matches(a.Wire)
}

func (m *domainMemo) matches(d *sig.Domain) bool {
	if d == nil || !m.set {
		return d == nil && !m.set
	}
	return d.Type == m.typ && d.BlockSize == m.blockSize && d.CompMask == m.compMask &&
		(d.T10DIF != nil) == m.dif && (d.T10DIF == nil || *d.T10DIF == m.t10dif) &&
		(d.CRC != nil) == m.crc && (d.CRC == nil || *d.CRC == m.crcv)
}

// remember makes a, a block found good, the one m remembers, with its
// SET_PSV values and its BSF for PSV indexes memPSV and wirePSV.
func (m *sigMemo) remember(a *sig.BlockAttr, memPSV, wirePSV uint32) {
	*m = sigMemo{flags: a.Flags, checkMask: a.CheckMask, copyMask: a.CopyMask, compMask: a.CompMask, psvs: wqe.PSVsOf(a)}
	m.mem.remember(a.Mem)
	m.wire.remember(a.Wire)
	m.ok = wqe.PutBSF(m.bsf[:], a, memPSV, wirePSV) == nil
}

func (m *domainMemo) remember(d *sig.Domain) {
	if d == nil {
		return
	}
	*m = domainMemo{set: true, typ: d.Type, blockSize: d.BlockSize, compMask: d.CompMask, dif: d.T10DIF != nil, crc: d.CRC != nil}
	if d.T10DIF != nil {
		m.t10dif = *d.T10DIF
	}
	if d.CRC != nil {
		m.crcv = *d.CRC
	}
}
