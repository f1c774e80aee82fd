package model

import (
	"github.com/mlx5go/mlx5go/prm"
)

// Object number ranges. Real firmware keeps low numbers for the kernel's
// own objects; where the model starts is its choice (docs/MODEL.md).
const (
	firstPDN   = 0x10
	firstMkey  = 0x100
	firstPSV   = 0x10
	firstCQN   = 0x400
	firstQPN   = 0x800 // clear of QP0 and QP1
	firstUMem  = 0x1
	firstUAR   = 0x10
	psvLogMax  = 20
	umemLogMax = 24
)

// mkc access modes (enum in mlx5_ifc.h).
const (
	accessModePA   = 0x0
	accessModeMTT  = 0x1
	accessModeKLMS = 0x2
	accessModeKSM  = 0x3
)

// PD.

func allocPD(h *hca, c *fwCall) *fwErr {
	n, ok := alloc(h, "pd", h.pds, firstPDN, limit(firstPDN, h.prof.cap(prm.CmdHcaCap.LogMaxPd)))
	if !ok {
		return limitReached()
	}
	h.pds[n] = &pdObj{uid: c.uid, ctx: c.ctx}
	prm.AllocPdOut.Pd.Set(c.out, uint64(n))
	return nil
}

func deallocPD(h *hca, c *fwCall) *fwErr {
	n := uint32(c.get(prm.DeallocPdIn.Pd))
	pd, ok := h.pds[n]
	if !ok {
		return noObject()
	}
	if e := checkOwner(pd.uid, c.uid); e != nil {
		return e
	}
	if pd.refs > 0 {
		return inUse()
	}
	delete(h.pds, n)
	return nil
}

// pdRef checks that pd n exists and belongs to uid, for an object that
// will refer to it.
func (h *hca) pdRef(n uint32, uid uint16) *fwErr {
	pd, ok := h.pds[n]
	if !ok {
		return noObject()
	}
	return checkOwner(pd.uid, uid)
}

// Mkey.

func createMkey(h *hca, c *fwCall) *fwErr {
	mkcF := prm.CreateMkeyIn.MemoryKeyMkeyEntry
	mkc := mkcF.Bytes(c.in)
	// The translation entries follow the fixed part, 16 bytes per octword.
	octwords := c.get(prm.CreateMkeyIn.TranslationsOctwordActualSize)
	if uint64(len(c.in)) < uint64(prm.CreateMkeyIn.KlmPasMtt.Off/8)+16*octwords {
		return fail(prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR, SyndromeInputLength)
	}
	mode := prm.Mkc.AccessMode10.Get(mkc) | prm.Mkc.AccessMode42.Get(mkc)<<2
	switch mode {
	case accessModeMTT, accessModeKLMS, accessModeKSM:
	default:
		// PA is the kernel's (uid 0) alone; SW_ICM and MEMIC need device
		// memory the model does not have.
		return badParam(SyndromeBadValue)
	}
	if prm.Mkc.BsfEn.Get(mkc) != 0 && prm.Mkc.BsfOctwordSize.Get(mkc) == 0 {
		return badParam(SyndromeBadValue)
	}
	if e := h.checkCryptoMkey(mkc); e != nil {
		return e
	}
	pdn := uint32(prm.Mkc.Pd.Get(mkc))
	if e := h.pdRef(pdn, c.uid); e != nil {
		return e
	}
	n, ok := alloc(h, "mkey", h.mkeys, firstMkey, limit(firstMkey, h.prof.cap(prm.CmdHcaCap.LogMaxMkey)))
	if !ok {
		return limitReached()
	}
	mk := &mkeyObj{uid: c.uid, ctx: c.ctx, pdn: pdn, mkc: append([]byte(nil), mkc...)}
	if mode == accessModeKLMS {
		// The initial translation: octwords KLM entries after the fixed
		// part (struct mlx5_klm: byte count, key, address).
		mk.klms = parseKLMs(c.in[prm.CreateMkeyIn.KlmPasMtt.Off/8:], int(octwords))
	}
	h.mkeys[n] = mk
	h.pds[pdn].refs++
	prm.CreateMkeyOut.MkeyIndex.Set(c.out, uint64(n))
	return nil
}

func queryMkey(h *hca, c *fwCall) *fwErr {
	mk, ok := h.mkeys[uint32(c.get(prm.QueryMkeyIn.MkeyIndex))]
	if !ok {
		return noObject()
	}
	if e := checkOwner(mk.uid, c.uid); e != nil {
		return e
	}
	copy(prm.QueryMkeyOut.MemoryKeyMkeyEntry.Bytes(c.out), mk.mkc)
	return nil
}

func destroyMkey(h *hca, c *fwCall) *fwErr {
	n := uint32(c.get(prm.DestroyMkeyIn.MkeyIndex))
	mk, ok := h.mkeys[n]
	if !ok || mk.verbs { // an MR's mkey is the kernel's to destroy
		return noObject()
	}
	if e := checkOwner(mk.uid, c.uid); e != nil {
		return e
	}
	h.releaseMkey(n, mk)
	return nil
}

func (h *hca) releaseMkey(n uint32, mk *mkeyObj) {
	h.pds[mk.pdn].refs--
	delete(h.mkeys, n)
	unmapDmabuf(mk.unmap)
}

// PSV.

func createPSV(h *hca, c *fwCall) *fwErr {
	num := c.get(prm.CreatePsvIn.NumPsv)
	if num < 1 || num > 4 {
		return badParam(SyndromeBadValue)
	}
	pdn := uint32(c.get(prm.CreatePsvIn.Pd))
	if e := h.pdRef(pdn, c.uid); e != nil {
		return e
	}
	out := []prm.Field{prm.CreatePsvOut.Psv0Index, prm.CreatePsvOut.Psv1Index, prm.CreatePsvOut.Psv2Index, prm.CreatePsvOut.Psv3Index}
	end := limit(firstPSV, psvLogMax)
	if uint64(len(h.psvs))+num > uint64(end-firstPSV) {
		return limitReached()
	}
	for i := range int(num) {
		n, _ := alloc(h, "psv", h.psvs, firstPSV, end)
		h.psvs[n] = &psvObj{uid: c.uid, ctx: c.ctx, pdn: pdn}
		h.pds[pdn].refs++
		out[i].Set(c.out, uint64(n))
	}
	return nil
}

func destroyPSV(h *hca, c *fwCall) *fwErr {
	n := uint32(c.get(prm.DestroyPsvIn.Psvn))
	p, ok := h.psvs[n]
	if !ok {
		return noObject()
	}
	if e := checkOwner(p.uid, c.uid); e != nil {
		return e
	}
	h.pds[p.pdn].refs--
	delete(h.psvs, n)
	return nil
}

// CQ.

// CQ modify field selects and the resize op_mod (include/linux/mlx5/cq.h).
const (
	cqModifyPeriod  = 1 << 0
	cqModifyCount   = 1 << 1
	cqModifyOverrun = 1 << 2

	cqOpModResize      = 1
	cqResizeLogSize    = 1 << 0
	cqResizePageOffset = 1 << 1
	cqResizePageSize   = 1 << 2
)

// checkCQC applies the cap limits to a CQ context.
func (h *hca) checkCQC(cqc []byte) *fwErr {
	if prm.Cqc.LogCqSize.Get(cqc) > h.prof.cap(prm.CmdHcaCap.LogMaxCqSz) {
		return badParam(SyndromeBadValue)
	}
	if prm.Cqc.CqeSz.Get(cqc) > 1 { // 64 or 128 bytes
		return badParam(SyndromeBadValue)
	}
	eqn := uint32(prm.Cqc.CEqnOrApuElement.Get(cqc))
	if eqn < h.prof.firstCompEQN || eqn >= h.prof.firstCompEQN+h.prof.compVectors {
		return badParam(SyndromeBadValue)
	}
	return nil
}

func createCQ(h *hca, c *fwCall) *fwErr {
	cqc := prm.CreateCqIn.CqContext.Bytes(c.in)
	if e := h.checkCQC(cqc); e != nil {
		return e
	}
	cq := &cqObj{uid: c.uid, ctx: c.ctx, cqc: append([]byte(nil), cqc...)}
	prm.Cqc.Status.Set(cq.cqc, 0) // CQ_OK
	if e := h.bindCQ(c, cq); e != nil {
		return e
	}
	n, ok := alloc(h, "cq", h.cqs, firstCQN, limit(firstCQN, h.prof.cap(prm.CmdHcaCap.LogMaxCq)))
	if !ok {
		return limitReached()
	}
	h.cqs[n] = cq
	for _, id := range []uint32{cq.bufUMem, cq.dbrUM} {
		if id != 0 {
			h.umems[id].refs++
		}
	}
	prm.CreateCqOut.Cqn.Set(c.out, uint64(n))
	return nil
}

// bindCQ finds the CQ's buffer and doorbell record: the CQEs at
// cq_umem_offset of UMEM cq_umem_id, the doorbell record at dbr_addr of
// UMEM cqc.dbr_umem_id. An id of 0 binds nothing (the model then cannot
// write CQEs, see docs/MODEL.md); any other id must be a UMEM of the
// caller that holds what is asked of it.
func (h *hca) bindCQ(c *fwCall, cq *cqObj) *fwErr {
	if c.mem != nil {
		// A verbs CQ: the ring and the doorbell record mlx5_ib pinned
		// (create_cq_user), the ring exactly 1 << log_cq_size CQEs.
		if uint64(len(c.mem.buf)) < cqBytes(cq.cqc) || len(c.mem.dbr) < 8 {
			return badParam(SyndromeBadValue)
		}
		cq.buf, cq.dbr = c.mem.buf[:cqBytes(cq.cqc)], c.mem.dbr
		return nil
	}
	if id := uint32(c.get(prm.CreateCqIn.CqUmemId)); id != 0 {
		off := c.get(prm.CreateCqIn.CqUmemOffset)
		mem, e := h.umemRange(id, c.uid, off, cqBytes(cq.cqc))
		if e != nil {
			return e
		}
		cq.buf, cq.bufUMem, cq.bufOff = mem, id, off
	}
	if id := uint32(prm.Cqc.DbrUmemId.Get(cq.cqc)); id != 0 {
		mem, e := h.umemRange(id, c.uid, prm.Cqc.DbrAddr.Get(cq.cqc), 8)
		if e != nil {
			return e
		}
		cq.dbr, cq.dbrUM = mem, id
	}
	return nil
}

// cqBytes is the size of a CQ's ring: 1<<log_cq_size CQEs of 64<<cqe_sz
// bytes.
func cqBytes(cqc []byte) uint64 {
	return (uint64(64) << prm.Cqc.CqeSz.Get(cqc)) << prm.Cqc.LogCqSize.Get(cqc)
}

// umemRange returns length bytes at offset of UMEM id, which uid must
// own: BAD_RES_ERR for no such UMEM, BAD_PARAM_ERR when the UMEM is too
// short.
func (h *hca) umemRange(id uint32, uid uint16, offset, length uint64) ([]byte, *fwErr) {
	u, ok := h.umems[id]
	if !ok {
		return nil, noObject()
	}
	if e := checkOwner(u.uid, uid); e != nil {
		return nil, e
	}
	if offset > uint64(len(u.mem)) || length > uint64(len(u.mem))-offset {
		return nil, badParam(SyndromeBadValue)
	}
	return u.mem[offset : offset+length : offset+length], nil
}

func (h *hca) cq(n uint32, uid uint16) (*cqObj, *fwErr) {
	cq, ok := h.cqs[n]
	if !ok {
		return nil, noObject()
	}
	return cq, checkOwner(cq.uid, uid)
}

func queryCQ(h *hca, c *fwCall) *fwErr {
	cq, e := h.cq(uint32(c.get(prm.QueryCqIn.Cqn)), c.uid)
	if e != nil {
		return e
	}
	copy(prm.QueryCqOut.CqContext.Bytes(c.out), cq.cqc)
	return nil
}

func modifyCQ(h *hca, c *fwCall) *fwErr {
	cq, e := h.cq(uint32(c.get(prm.ModifyCqIn.Cqn)), c.uid)
	if e != nil {
		return e
	}
	sel := c.get(prm.ModifyCqIn.ModifyFieldSelectResizeFieldSelect)
	in := prm.ModifyCqIn.CqContext.Bytes(c.in)
	next := append([]byte(nil), cq.cqc...)
	var fields []struct {
		bit uint64
		f   prm.Field
	}
	switch c.get(prm.ModifyCqIn.OpMod) {
	case 0:
		fields = []struct {
			bit uint64
			f   prm.Field
		}{{cqModifyPeriod, prm.Cqc.CqPeriod}, {cqModifyCount, prm.Cqc.CqMaxCount}, {cqModifyOverrun, prm.Cqc.Oi}}
	case cqOpModResize:
		if h.prof.cap(prm.CmdHcaCap.CqResize) == 0 {
			return badParam(SyndromeNoCap)
		}
		fields = []struct {
			bit uint64
			f   prm.Field
		}{{cqResizeLogSize, prm.Cqc.LogCqSize}, {cqResizePageOffset, prm.Cqc.PageOffset}, {cqResizePageSize, prm.Cqc.LogPageSize}}
	default:
		return badParam(SyndromeBadOpMod)
	}
	known := uint64(0)
	for _, f := range fields {
		known |= f.bit
		if sel&f.bit != 0 {
			f.f.Set(next, f.f.Get(in))
		}
	}
	if sel&^known != 0 {
		return badParam(SyndromeBadValue)
	}
	if e := h.checkCQC(next); e != nil {
		return e
	}
	if c.get(prm.ModifyCqIn.OpMod) == cqOpModResize && cq.outstanding() > 1<<prm.Cqc.LogCqSize.Get(next) {
		// The PRM's BAD_SIZE_OUTS_CQES_ERR (mlx5_core: "bad size too
		// many outstanding CQEs", EINVAL): ibv_resize_cq(3)'s cqe must
		// be at least the CQEs not yet polled.
		return fail(prm.MLX5_CMD_STAT_BAD_SIZE_OUTS_CQES_ERR, SyndromeBadValue)
	}
	if c.mem != nil && c.mem.buf != nil {
		// mlx5_ib's resize of a user CQ: the new ring is the buffer it
		// pinned. The device ends the old ring with a resize CQE, which
		// counts as one; the next CQE goes to the new ring.
		if uint64(len(c.mem.buf)) < cqBytes(next) {
			return badParam(SyndromeBadValue)
		}
		if cq.buf != nil {
			h.postResizeCQE(cq)
		}
		cq.buf = c.mem.buf[:cqBytes(next)]
	} else if cq.bufUMem != 0 && cqBytes(next) != cqBytes(cq.cqc) {
		// A DEVX resize keeps the UMEM (the model has no resize
		// buffer): the new ring must fit in it from the same offset.
		mem, e := h.umemRange(cq.bufUMem, cq.uid, cq.bufOff, cqBytes(next))
		if e != nil {
			return badParam(SyndromeBadValue)
		}
		cq.buf = mem
	}
	cq.cqc = next
	return nil
}

// postResizeCQE ends a CQ's old ring, as a resize does, with a CQE of
// opcode MLX5_CQE_RESIZE_CQ at the producer counter; the owner bit is
// the old ring's. The consumer copies the CQEs before it to the new ring.
// outstanding is the number of CQEs cq holds that the driver has not
// consumed: the producer counter less the consumer counter of the CQ's
// doorbell record (0 without one: the device cannot tell).
func (cq *cqObj) outstanding() uint64 {
	if cq.dbr == nil {
		return 0
	}
	return uint64((cq.pi - load32(cq.dbr[0:4])) & 0xffffff)
}

func (h *hca) postResizeCQE(cq *cqObj) {
	logSize := prm.Cqc.LogCqSize.Get(cq.cqc)
	stride := uint64(64) << prm.Cqc.CqeSz.Get(cq.cqc)
	off := uint64(cq.pi&(1<<logSize-1))*stride + stride - 64
	slot := cq.buf[off : off+64 : off+64]
	var c cqe
	c[cqeOpOwn] = cqeResizeCQ<<4 | uint8(cq.pi>>logSize)&1
	copy(slot[:60], c[:60])
	store32(slot[60:64], c[60:64])
	cq.pi++
	prm.Cqc.ProducerCounter.Set(cq.cqc, uint64(cq.pi&0xffffff))
}

func destroyCQ(h *hca, c *fwCall) *fwErr {
	n := uint32(c.get(prm.DestroyCqIn.Cqn))
	cq, e := h.cq(n, c.uid)
	if e != nil {
		return e
	}
	if cq.refs > 0 {
		return inUse()
	}
	h.releaseCQ(n, cq)
	return nil
}

func (h *hca) releaseCQ(n uint32, cq *cqObj) {
	for _, id := range []uint32{cq.bufUMem, cq.dbrUM} {
		if u, ok := h.umems[id]; ok && id != 0 {
			u.refs--
		}
	}
	delete(h.cqs, n)
}
