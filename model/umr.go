package model

import (
	"encoding/binary"
	"fmt"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

// UMR (MLX5_OPCODE_UMR) and SET_PSV (MLX5_OPCODE_SET_PSV) WQEs: the
// layout is struct mlx5_wqe_umr_ctrl_seg, struct mlx5_wqe_mkey_context_seg
// (the PRM mkc), the inline translation (struct mlx5_wqe_umr_klm_seg
// entries or struct mlx5_wqe_umr_repeat_block_seg) and struct mlx5_bsf
// (mlx5dv.h, include/linux/mlx5/qp.h), as libmlx5 writes them for
// mlx5dv_wr_mkey_configure (the oracle's umr_sig vectors).

// UMR control segment flags (MLX5_WQE_UMR_CTRL_FLAG_*).
const (
	umrInline      = 1 << 7
	umrCheckFree   = 1 << 5
	umrXltOffset   = 1 << 4
	umrCheckQPN    = 1 << 3
	umrCtrlSegSize = 48
	umrMkcSegSize  = 64
	bsfSize        = 64
)

// Mkey mask bits of the UMR control segment (MLX5_WQE_UMR_CTRL_MKEY_MASK_*
// in mlx5dv.h; LOCAL_READ is the kernel's MLX5_MKEY_MASK_LR).
const (
	maskLen       = 1 << 0
	maskStartAddr = 1 << 6
	maskEnRinval  = 1 << 8 // MLX5_MKEY_MASK_EN_RINVAL (include/linux/mlx5/device.h)
	maskSigErr    = 1 << 9
	maskBSFEnable = 1 << 12
	maskMkey      = 1 << 13
	maskQPN       = 1 << 14
	maskLR        = 1 << 17
	maskLW        = 1 << 18
	maskRR        = 1 << 19
	maskRW        = 1 << 20
	maskA         = 1 << 21
	maskFree      = 1 << 29
)

// maskFields are the mkey context fields each mask bit the model applies
// updates.
var maskFields = []struct {
	bit    uint64
	fields []prm.Field
}{
	{maskLen, []prm.Field{prm.Mkc.Len, prm.Mkc.Length64}},
	{maskStartAddr, []prm.Field{prm.Mkc.StartAddr}},
	{maskEnRinval, []prm.Field{prm.Mkc.EnRinval}},
	{maskSigErr, []prm.Field{prm.Mkc.ExpectedSigerrCount}},
	{maskBSFEnable, []prm.Field{prm.Mkc.BsfEn}},
	{maskMkey, []prm.Field{prm.Mkc.Mkey70}},
	{maskQPN, []prm.Field{prm.Mkc.Qpn}},
	{maskLR, []prm.Field{prm.Mkc.Lr}},
	{maskLW, []prm.Field{prm.Mkc.Lw}},
	{maskRR, []prm.Field{prm.Mkc.Rr}},
	{maskRW, []prm.Field{prm.Mkc.Rw}},
	{maskA, []prm.Field{prm.Mkc.A}},
	{maskFree, []prm.Field{prm.Mkc.Free}},
}

// wqeFail is a WQE the HCA refuses: the error CQE's syndrome and why.
type wqeFail struct {
	syndrome uint8
	why      string
	// unmodelled marks what hardware may well run but the model does not:
	// a fault besides the error completion.
	unmodelled bool
}

func unmodelled(format string, args ...any) *wqeFail {
	return &wqeFail{syndrome: SyndromeLocalQPOp, why: fmt.Sprintf(format, args...), unmodelled: true}
}

func qpOpErr(format string, args ...any) *wqeFail {
	return &wqeFail{syndrome: SyndromeLocalQPOp, why: fmt.Sprintf(format, args...)}
}

func protErr(format string, args ...any) *wqeFail {
	return &wqeFail{syndrome: SyndromeLocalProt, why: fmt.Sprintf(format, args...)}
}

// execUMR runs a UMR WQE of QP q on the mkey its ctrl imm names. Every
// check comes before any change, so a refused UMR changes nothing.
func (h *hca) execUMR(q *qpObj, w *sendWQE) *wqeFail {
	b := w.b
	if len(b) < 16+umrCtrlSegSize+umrMkcSegSize {
		return qpOpErr("UMR: ds %d is shorter than ctrl, UMR ctrl and mkey context segments", w.ds)
	}
	uc := b[16 : 16+umrCtrlSegSize]
	flags := uc[0]
	xlt := int(binary.BigEndian.Uint16(uc[4:]))
	bsfOw := int(binary.BigEndian.Uint16(uc[6:]))
	mask := binary.BigEndian.Uint64(uc[8:])
	seg := b[16+umrCtrlSegSize : 16+umrCtrlSegSize+umrMkcSegSize]
	if flags&umrXltOffset != 0 {
		if xlt != 0 {
			return unmodelled("UMR: a translation offset update is not modelled")
		}
		bsfOw = 0 // the field is the translation offset
	}
	rest := b[16+umrCtrlSegSize+umrMkcSegSize:]
	if len(rest) < 16*(xlt+bsfOw) {
		return qpOpErr("UMR: ds %d does not hold %d translation and %d BSF octwords", w.ds, xlt, bsfOw)
	}
	if xlt > 0 && flags&umrInline == 0 {
		return unmodelled("UMR: translations by pointer (no INLINE flag) are not modelled")
	}
	if bsfOw != 0 && bsfOw != bsfSize/16 && bsfOw != 2*bsfSize/16 {
		return qpOpErr("UMR: %d BSF octwords, not %d (one BSF) or %d (signature and crypto)", bsfOw, bsfSize/16, 2*bsfSize/16)
	}

	n := w.imm >> 8
	mk, ok := h.mkeys[n]
	switch {
	case !ok:
		return protErr("UMR: no mkey %#x", n)
	case mk.pdn != q.pdn:
		return protErr("UMR: mkey %#x is in PD %#x, the QP in PD %#x", n, mk.pdn, q.pdn)
	case prm.Mkc.UmrEn.Get(mk.mkc) == 0:
		return protErr("UMR: mkey %#x was not created with umr_en", n)
	case flags&umrCheckFree != 0 && prm.Mkc.Free.Get(mk.mkc) == 0:
		return protErr("UMR: CHECK_FREE and mkey %#x is not free", n)
	case flags&umrCheckQPN != 0 && prm.Mkc.Qpn.Get(mk.mkc) != 0xffffff && uint32(prm.Mkc.Qpn.Get(mk.mkc)) != q.qpn:
		return protErr("UMR: CHECK_QPN and mkey %#x belongs to QP %#x", n, prm.Mkc.Qpn.Get(mk.mkc))
	case uint64(xlt) > prm.Mkc.TranslationsOctwordSize.Get(mk.mkc):
		return qpOpErr("UMR: %d translation octwords, mkey %#x was created for %d", xlt, n, prm.Mkc.TranslationsOctwordSize.Get(mk.mkc))
	case bsfOw != 0 && prm.Mkc.BsfOctwordSize.Get(mk.mkc) < uint64(bsfOw):
		return qpOpErr("UMR: a BSF for mkey %#x, created with bsf_octword_size %d", n, prm.Mkc.BsfOctwordSize.Get(mk.mkc))
	}

	var klms []klm
	var rep *repeatBlock
	if xlt > 0 {
		t := rest[:16*xlt]
		if binary.BigEndian.Uint32(t[4:]) == stridedBlockOp {
			if rep, ok = parseRepeat(t, xlt); !ok {
				return qpOpErr("UMR: malformed repeat block")
			}
		} else {
			klms = parseKLMs(t, xlt)
			for _, k := range klms {
				if k.byteCount > maxKLMBytes {
					return unmodelled("UMR: a KLM of %#x bytes: a KLM maps up to 2 GiB (mlx5dv.h)", k.byteCount)
				}
			}
		}
	}
	var sc *sigConf
	var cc *cryptoConf
	if bsfOw != 0 {
		var f *wqeFail
		if sc, cc, f = h.parseBSFs(mk, rest[16*xlt:16*(xlt+bsfOw)]); f != nil {
			return f
		}
	}

	next := append([]byte(nil), mk.mkc...)
	known := uint64(0)
	for _, m := range maskFields {
		known |= m.bit
		if mask&m.bit != 0 {
			for _, f := range m.fields {
				f.Set(next, f.Get(seg))
			}
		}
	}
	if mask&^known != 0 {
		h.fault(q.ctx, "QP %#x UMR on mkey %#x: mkey mask bits %#x are not modelled and were ignored", q.qpn, n, mask&^known)
	}
	mk.mkc = next
	if xlt > 0 {
		mk.klms, mk.rep = klms, rep
	}
	if bsfOw != 0 {
		// The UMR's BSFs replace the mkey's: a signature BSF alone leaves
		// no crypto, and an empty signature BSF beside a crypto BSF no
		// signature.
		mk.sig, mk.crypto = sc, cc
	}
	return nil
}

// execSetPSV runs a SET_PSV WQE: the PSV, which must be in the QP's PD,
// takes the transient signature and goes to INIT, out of its ERROR state
// if a signature error put it there.
func (h *hca) execSetPSV(q *qpObj, w *sendWQE) *wqeFail {
	if len(w.b) < 32 {
		return qpOpErr("SET_PSV: ds %d, not 2", w.ds)
	}
	n := binary.BigEndian.Uint32(w.b[16:]) & 0xffffff
	p, ok := h.psvs[n]
	if !ok || p.pdn != q.pdn {
		return protErr("SET_PSV: no PSV %#x in PD %#x", n, q.pdn)
	}
	p.transient = binary.BigEndian.Uint64(w.b[24:])
	p.failed = false
	return nil
}

// The BSF's block size selectors (the PRM's encoding as libmlx5 writes
// it: 512:1 520:2 4096:3 4160:4 4048:6) and signature selectors (the top
// byte of w/m_bfs_psv: 0 for T10-DIF, CRC32 0x2_, CRC32C 0x4_, CRC64_XP10
// 0x5_, low nibble 2 for an all-ones seed and 3 for seed 0).
var bsfBlockSizes = map[uint8]sig.BlockSize{1: sig.BlockSize512, 2: sig.BlockSize520, 3: sig.BlockSize4096, 4: sig.BlockSize4160, 6: sig.BlockSize4048}

var bsfCRCTypes = map[uint8]sig.CRCType{0x2: sig.CRCTypeCRC32, 0x4: sig.CRCTypeCRC32C, 0x5: sig.CRCTypeCRC64XP10}

// BSF bits (include/linux/mlx5/qp.h MLX5_BSF_*, and the seed bit of
// rp_inv_seed the oracle shows).
const (
	bsfSBS          = 1 << 4
	bsfInlValid     = 1 << 15
	bsfIncRefTag    = 1 << 6
	bsfAppRefEscape = 0x2
	bsfAppEscape    = 0x1
	bsfSeedOnes     = 0x08
	bsfDifCRC       = 0x1 // MLX5_DIF_CRC
	bsfDifIPCS      = 0x2 // MLX5_DIF_IPCS
)

// parseBSF reads a BSF (basic, extended, wire inline, memory inline
// parts) into a signature configuration and builds its engine. The PSVs
// it names must exist in PD pdn.
func (h *hca) parseBSF(b []byte, pdn uint32) (*sigConf, *wqeFail) {
	attr, memPSV, wirePSV, why := decodeBSF(b)
	if why != "" {
		return nil, qpOpErr("UMR: BSF: %s", why)
	}
	for _, p := range []struct {
		d   *sig.Domain
		psv uint32
	}{{attr.Mem, memPSV}, {attr.Wire, wirePSV}} {
		if p.d == nil {
			continue
		}
		if o, ok := h.psvs[p.psv]; !ok || o.pdn != pdn {
			return nil, protErr("UMR: BSF names PSV %#x, not one of PD %#x", p.psv, pdn)
		}
	}
	eng, err := sig.NewEngine(attr)
	if err != nil {
		return nil, qpOpErr("UMR: BSF: %v", err)
	}
	return &sigConf{attr: *attr, eng: eng, memPSV: memPSV, wirePSV: wirePSV}, nil
}

// decodeBSF reads the block signature attributes a BSF encodes; why is
// non-empty for a BSF the model cannot read.
func decodeBSF(b []byte) (attr *sig.BlockAttr, memPSV, wirePSV uint32, why string) {
	sbs := b[0]&bsfSBS != 0
	attr = &sig.BlockAttr{CheckMask: sig.Mask(b[1])}
	wSel, mSel := b[2], b[3]
	wBfs, mBfs := binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])
	var err string
	if mSel != 0 {
		if attr.Mem, err = bsfDomain(mSel, mBfs, b[48:64]); err != "" {
			return nil, 0, 0, "memory domain: " + err
		}
		memPSV = mBfs & 0xffffff
	}
	switch {
	case sbs:
		// Same block structure: the wire byte is the copy mask and the
		// wire domain has the memory domain's block size.
		if mSel == 0 {
			return nil, 0, 0, "same block structure without a memory domain"
		}
		attr.Flags, attr.CopyMask = sig.BlockAttrCopyMask, sig.Mask(wSel)
		wSel = mSel
		fallthrough
	case wSel != 0:
		if attr.Wire, err = bsfDomain(wSel, wBfs, b[32:48]); err != "" {
			return nil, 0, 0, "wire domain: " + err
		}
		wirePSV = wBfs & 0xffffff
	}
	if attr.Mem == nil && attr.Wire == nil {
		return nil, 0, 0, "no domain"
	}
	return attr, memPSV, wirePSV, ""
}

// bsfDomain reads one domain: its block size selector, its bfs_psv word
// and its inline part (struct mlx5_bsf_inl).
func bsfDomain(sel uint8, bfs uint32, inl []byte) (*sig.Domain, string) {
	bs, ok := bsfBlockSizes[sel]
	if !ok {
		return nil, fmt.Sprintf("block size selector %#x", sel)
	}
	d := &sig.Domain{BlockSize: bs}
	if s := uint8(bfs >> 24); s != 0 {
		t, ok := bsfCRCTypes[s>>4]
		if !ok || s&0xf < 2 || s&0xf > 3 {
			return nil, fmt.Sprintf("signature selector %#x", s)
		}
		seed := ^uint64(0)
		if t != sig.CRCTypeCRC64XP10 {
			seed = 0xffffffff
		}
		if s&1 != 0 {
			seed = 0
		}
		d.Type, d.CRC = sig.SigTypeCRC, &sig.CRC{Type: t, Seed: seed}
		return d, ""
	}
	if binary.BigEndian.Uint16(inl)&bsfInlValid == 0 {
		return nil, "T10-DIF without a valid inline part"
	}
	dif := &sig.T10DIF{AppTag: binary.BigEndian.Uint16(inl[2:]), RefTag: binary.BigEndian.Uint32(inl[4:])}
	switch inl[8] {
	case bsfDifCRC:
		dif.Guard = sig.T10DIFGuardCRC
	case bsfDifIPCS:
		dif.Guard = sig.T10DIFGuardCsum
	default:
		return nil, fmt.Sprintf("T10-DIF sig_type %#x", inl[8])
	}
	if inl[9]&bsfSeedOnes != 0 {
		dif.Seed = 0xffff
	}
	f := inl[13]
	if f&bsfIncRefTag != 0 {
		dif.Flags |= sig.T10DIFRefRemap
	}
	switch {
	case f&bsfAppRefEscape != 0:
		dif.Flags |= sig.T10DIFAppRefEscape
	case f&bsfAppEscape != 0:
		dif.Flags |= sig.T10DIFAppEscape
	}
	if m := binary.BigEndian.Uint16(inl[14:]); m != 0xffff {
		return nil, fmt.Sprintf("application tag check mask %#x (only 0xffff is modelled)", m)
	}
	d.Type, d.T10DIF = sig.SigTypeT10DIF, dif
	return d, ""
}
