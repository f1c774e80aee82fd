package model

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mlx5go/mlx5go/model/internal/rdmacm"
	"github.com/mlx5go/mlx5go/prm"
)

// hca is the software ConnectX's firmware state, shared by every context
// (Device) opened on it. All of it, and the contexts' kernel-side tables,
// is guarded by mu.
type hca struct {
	mu   sync.Mutex
	prof *profile
	odp  ODPStats // odp.go
	// clock is the device's free-running core clock.
	clock deviceClock

	// uids are the DEVX uids in use (CREATE_UCTX): the contexts' and the
	// whitelist uid.
	uids    map[uint16]bool
	nextUID uint32
	// whitelistUID is the uid mlx5_ib_devx_init creates for the device
	// (mlx5_ib_devx_create without a user): devx_get_uid runs the
	// whitelisted general commands of a context without DEVX as it.
	whitelistUID uint16
	// ctxs are the open contexts by their identity: the data path finds
	// the context that owns an object through it. A context's uid cannot
	// serve: every context without DEVX has uid 0.
	ctxs    map[ctxID]*Device
	nextCtx ctxID

	pds   map[uint32]*pdObj
	mkeys map[uint32]*mkeyObj
	psvs  map[uint32]*psvObj
	cqs   map[uint32]*cqObj
	qps   map[uint32]*qpObj
	srqs  map[uint32]*srqObj
	umems map[uint32]*umemObj
	uars  map[uint32]uarObj
	deks  map[uint32]*dekObj // ENCRYPTION_KEY general objects (crypto.go)
	// crypto holds the crypto logins and what the crypto officer
	// provisioned for them (crypto.go); cryptoOpt is how the HCA was
	// commissioned (Options.Crypto).
	crypto    cryptoStore
	cryptoOpt CryptoOptions

	next map[string]uint32 // allocation cursor per table
	// reuseQPN: CREATE_QP takes the lowest free number (Options.ReuseQPN).
	reuseQPN bool
	// sigErrOncePerMkey: an mkey reports one signature error until a UMR
	// re-arms it (Options.SigErrOncePerMkey).
	sigErrOncePerMkey bool
	// pageFault resolves ODP page faults this process cannot
	// (Options.PageFault); nil for none.
	pageFault func(addr, length uint64, write bool)
	// subs are the DEVX event subscriptions of every context, filed as
	// devx.c files them (see subKey).
	subs map[subKey][]*subscription
	// variant is the last mkey variant byte RegMR gave (mlx5_ib counts
	// its key variants per device too).
	variant uint8

	// faults are what the data path saw the driver do wrong (or do what
	// the model cannot run), per context, for tests (Device.Faults).
	faults    []fault
	wqeErrors []fault // why WQEs completed with errors
	dropped   int     // entries past maxFaults, not kept

	// rnrWaiting counts QPs waiting out an RNR NAK, so that the doorbell
	// pollers look for them only when there are some.
	rnrWaiting atomic.Int32

	// guid is the node GUID (cm.go); cm is the RDMA connection manager
	// of the HCA's netdev, made on the first OpenCM.
	guid uint64
	cm   *rdmacm.Net
}

// ctxID is a context's identity on its HCA: the model's, not the
// firmware's. Numbers are never reused; 0 is no context. Every firmware
// object records the context whose command created it (ctx) next to the
// uid the command carried (uid): the firmware checks the uid, and the
// model charges faults to, finds the owner of and purges objects by the
// context.
type ctxID uint32

// fault is one data-path fault, charged to the context whose doorbell or
// object met it.
type fault struct {
	ctx ctxID
	msg string
}

const maxFaults = 1024

// fault records a data-path fault for context ctx.
func (h *hca) fault(ctx ctxID, format string, args ...any) {
	h.record(&h.faults, ctx, fmt.Sprintf(format, args...))
}

func (h *hca) record(l *[]fault, ctx ctxID, msg string) {
	if len(*l) >= maxFaults {
		h.dropped++
		return
	}
	*l = append(*l, fault{ctx, msg})
}

type pdObj struct {
	uid  uint16
	ctx  ctxID
	refs int
}

type mkeyObj struct {
	uid uint16
	ctx ctxID
	pdn uint32
	mkc []byte // the mkey context: as created, then as UMRs changed it (64 bytes)

	// mem is the memory of an MTT mkey that RegMR made (its start_addr is
	// &mem[0]); nil for DEVX mkeys, whose MTT the model does not keep.
	mem []byte
	// verbs marks RegMR's mkeys: DESTROY_MKEY does not reach them.
	verbs bool
	// access is a verbs MR's ib_uverbs_access_flags (mr->access_flags),
	// which ReregMR compares with the new ones.
	access uint32
	// odp marks an ODP MR's mkey (odp.go): mem is nil, pages are faulted
	// in at each access.
	odp *odpMkey
	// unmap is the dma-buf mapping of a RegDmabufMR mkey, unmapped with
	// it (verbs_dmabuf.go).
	unmap []byte
	// The translation of a KLM mkey: a list of entries or a repeat block
	// (CREATE_MKEY's inline KLMs or the last UMR's).
	klms []klm
	rep  *repeatBlock
	// sig is the signature configuration the last UMR with a BSF set; it
	// applies while mkc.bsf_en is 1.
	sig *sigConf
	// crypto is the crypto configuration the last UMR with a BSF set (nil
	// if its BSF had none); it applies while mkc.bsf_en is 1, to an mkey
	// created with crypto_en.
	crypto *cryptoConf
	// reported counts, modulo 2, the signature errors the mkey reported
	// (0 at CREATE_MKEY): with Options.SigErrOncePerMkey it reports one
	// only while this differs from mkc.expected_sigerr_count
	// (docs/MODEL.md, "Signature errors").
	reported uint8
}

type psvObj struct {
	uid uint16
	ctx ctxID
	pdn uint32
	// transient is the signature the last SET_PSV loaded.
	transient uint64
	// failed is the PSV's ERROR state: its domain's check failed and was
	// reported; it ignores further failures until a SET_PSV puts it back
	// in INIT (docs/MODEL.md, "Signature errors").
	failed bool
}

type cqObj struct {
	uid  uint16
	ctx  ctxID
	cqc  []byte // 64 bytes
	refs int

	// The data path: the CQE ring (nil when create_cq_in named no UMEM)
	// and the doorbell record (nil when cqc named no UMEM), and the UMEMs
	// they live in (0 for none).
	buf            []byte
	dbr            []byte
	bufUMem, dbrUM uint32
	bufOff         uint64
	pi             uint32 // CQEs written
	overrun        bool   // the CQ overran: nothing more is written

	// ib is the kernel's verbs CQ when mlx5_ib created it (nil for DEVX
	// CQs): where its events go.
	ib *vcq
	// The arm state (see arm.go): the request of the last arm doorbell
	// that has not fired (armNone, armNext, armSolicited), its consumer
	// index, the sequence number the next arm must carry, and the
	// producer counter after the last CQE a solicited arm fires for.
	armed  uint8
	armCI  uint32
	armSN  uint8
	solPI  uint32
	hasSol bool
	// lastArm is the last arm word applied (armSeen: there was one).
	lastArm uint32
	armSeen bool
	// modTimer is the moderation period running for an armed CQ's
	// pending CQEs (moderate), nil when none runs.
	modTimer *time.Timer
}

type umemObj struct {
	uid  uint16
	ctx  ctxID
	mem  []byte
	refs int
	// unmap is the dma-buf mapping of a UMemRegEx UMEM, unmapped with
	// it (verbs_dmabuf.go).
	unmap []byte
}

// uarObj is a UAR page (ALLOC_UAR with the context's uid).
type uarObj struct {
	uid uint16
	ctx ctxID
}

func newHCA(p *profile) *hca {
	h := &hca{
		prof:  p,
		uids:  map[uint16]bool{},
		ctxs:  map[ctxID]*Device{},
		subs:  map[subKey][]*subscription{},
		pds:   map[uint32]*pdObj{},
		mkeys: map[uint32]*mkeyObj{},
		psvs:  map[uint32]*psvObj{},
		cqs:   map[uint32]*cqObj{},
		qps:   map[uint32]*qpObj{},
		srqs:  map[uint32]*srqObj{},
		umems: map[uint32]*umemObj{},
		uars:  map[uint32]uarObj{},
		deks:  map[uint32]*dekObj{},
		next:  map[string]uint32{},
		guid:  nextNodeGUID(),
	}
	h.crypto = newCryptoStore()
	h.clock = newDeviceClock(p)
	// mlx5_ib_devx_init: a device with log_max_uctx gets a uid of its own
	// at load, before any context opens.
	if p.cap(prm.CmdHcaCap.LogMaxUctx) != 0 {
		h.whitelistUID, _ = h.newUID()
	}
	return h
}

// newUID is CREATE_UCTX: the next free uid (never 0); ok is false when
// 2^log_max_uctx - 1 are in use.
func (h *hca) newUID() (uint16, bool) {
	max := uint32(1) << h.prof.cap(prm.CmdHcaCap.LogMaxUctx)
	if uint32(len(h.uids)) >= max-1 {
		return 0, false
	}
	uid := uint16(0)
	for uid == 0 || h.uids[uid] {
		h.nextUID = h.nextUID%(max-1) + 1
		uid = uint16(h.nextUID)
	}
	h.uids[uid] = true
	return uid, true
}

// objects counts the firmware objects of every table.
func (h *hca) objects() int {
	return len(h.pds) + len(h.mkeys) + len(h.psvs) + len(h.cqs) + len(h.qps) + len(h.srqs) + len(h.umems) + len(h.uars) +
		len(h.deks) + len(h.crypto.logins)
}

// alloc finds a free number in [base, limit) for table name, starting at
// its cursor, as firmware hands out object numbers; ok is false when the
// table holds limit-base objects.
func alloc[T any](h *hca, name string, m map[uint32]T, base, limit uint32) (uint32, bool) {
	if limit <= base || uint64(len(m)) >= uint64(limit-base) {
		return 0, false
	}
	n := h.next[name]
	if n < base || n >= limit {
		n = base
	}
	for {
		if _, used := m[n]; !used {
			h.next[name] = n + 1
			return n, true
		}
		n++
		if n >= limit {
			n = base
		}
	}
}

// allocLowest finds the lowest free number in [base, limit) of a table
// (Options.ReuseQPN); ok is false when the table holds limit-base objects.
func allocLowest[T any](m map[uint32]T, base, limit uint32) (uint32, bool) {
	if limit <= base || uint64(len(m)) >= uint64(limit-base) {
		return 0, false
	}
	n := base
	for {
		if _, used := m[n]; !used {
			return n, true
		}
		n++
	}
}

// limit returns 1<<log capped to the 24-bit object numbers PRM uses, plus
// base: the end of a table's number range.
func limit(base uint32, log uint64) uint32 {
	if log > 24 {
		log = 24
	}
	n := uint64(base) + 1<<log
	if n > 1<<24 {
		n = 1 << 24
	}
	return uint32(n)
}

// exec runs one firmware command as uid for context ctx: in is the input
// mailbox (the kernel already wrote the uid into it), out the output
// mailbox, which exec overwrites whole. It returns the status and syndrome
// it wrote.
func (h *hca) exec(uid uint16, ctx ctxID, in, out []byte) (prm.Status, uint32) {
	return h.execCall(&fwCall{uid: uid, ctx: ctx, in: in, out: out})
}

// execCall is exec of a prepared call (the kernel's own commands pass the
// memory of the user buffers it pinned in c.mem).
func (h *hca) execCall(c *fwCall) (prm.Status, uint32) {
	in, out := c.in, c.out
	clear(out)
	op := uint16(prm.MboxIn.Opcode.Get(in))
	cmd, ok := commands[op]
	var e *fwErr
	switch {
	case len(in) < 16:
		e = fail(prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR, SyndromeInputLength)
	case !ok:
		e = fail(prm.MLX5_CMD_STAT_BAD_OP_ERR, SyndromeBadOpcode)
	case len(in) < cmd.in:
		e = fail(prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR, SyndromeInputLength)
	case len(out) < cmd.out:
		e = fail(prm.MLX5_CMD_STAT_BAD_OUTP_LEN_ERR, SyndromeOutputLength)
	case !cmd.opMods && prm.MboxIn.OpMod.Get(in) != 0:
		e = badParam(SyndromeBadOpMod)
	case len(out) < cmd.answer:
		// A mailbox the firmware accepts but shorter than the struct
		// today's mlx5_ifc.h lays out gets the answer's first bytes.
		whole := *c
		whole.out = make([]byte, cmd.answer)
		if e = cmd.run(h, &whole); e == nil {
			copy(out, whole.out)
		}
	default:
		e = cmd.run(h, c)
	}
	if e == nil {
		return prm.MLX5_CMD_STAT_OK, 0
	}
	clear(out)
	prm.MboxOut.Status.Set(out, uint64(e.status))
	prm.MboxOut.Syndrome.Set(out, uint64(e.syndrome))
	return e.status, e.syndrome
}

// fwCall is one command as the firmware sees it: the uid it carries, and
// the context that sent it (the model's bookkeeping: the objects it creates
// are that context's).
type fwCall struct {
	uid     uint16
	ctx     ctxID
	in, out []byte
	// mem is the memory behind the physical addresses (pas, dbr_addr) of
	// a command mlx5_ib sends for a verbs object: the user buffers it
	// pinned. DEVX commands name UMEMs instead and have none.
	mem *pinned
}

// pinned is the user memory of a verbs object's queue, as ib_umem_get
// pinned it (see usermem.go): the ring and the doorbell record.
type pinned struct {
	buf, dbr []byte
}

func (c *fwCall) get(f prm.Field) uint64 { return f.Get(c.in) }

// command is one opcode the firmware implements: the shortest input and
// output mailboxes it accepts, and what it does.
type command struct {
	in, out int
	// answer, when set, is the size of the output struct in today's
	// mlx5_ifc.h where it is longer than out, the struct the firmware
	// checks the mailbox against (an older PRM's, before reserved space
	// was added at its end). A mailbox of at least out bytes but fewer
	// than answer gets the bytes of the answer that fit.
	answer int
	run    func(h *hca, c *fwCall) *fwErr
	// opMods is true for commands that read op_mod themselves; the others
	// accept only op_mod 0.
	opMods bool
}

func size(l *prm.Layout) int { return int(l.Size) }

// hcaCapOutMin is the firmware's query_hca_cap_out: the header and a
// 2048-byte (0x4000-bit) capability union.
var hcaCapOutMin = int(prm.QueryHcaCapOut.Capability.Off/8) + 2048

// commands are the opcodes the model's firmware implements. Any other
// opcode fails with BAD_OP_ERR.
var commands map[uint16]command

func init() {
	commands = map[uint16]command{
		// The firmware's query_hca_cap_out is the PRM's before
		// hca_cap_union grew from 0x4000 to 0x8000 bits: rdma-core's
		// tests/mlx5_base.py (is_eth) queries with 16 + 2048 bytes and
		// passes on ConnectX hardware.
		prm.MLX5_CMD_OP_QUERY_HCA_CAP: {in: size(prm.QueryHcaCapIn.Layout()), out: hcaCapOutMin, answer: size(prm.QueryHcaCapOut.Layout()), run: queryHCACap},
		prm.MLX5_CMD_OP_QUERY_ADAPTER: {in: size(prm.QueryAdapterIn.Layout()), out: size(prm.QueryAdapterOut.Layout()), run: queryAdapter},
		prm.MLX5_CMD_OP_QUERY_ISSI:    {in: size(prm.QueryIssiIn.Layout()), out: size(prm.QueryIssiOut.Layout()), run: queryISSI},
		prm.MLX5_CMD_OP_NOP:           {in: 16, out: 16, run: nop},

		prm.MLX5_CMD_OP_ALLOC_PD:   {in: size(prm.AllocPdIn.Layout()), out: size(prm.AllocPdOut.Layout()), run: allocPD},
		prm.MLX5_CMD_OP_DEALLOC_PD: {in: size(prm.DeallocPdIn.Layout()), out: size(prm.DeallocPdOut.Layout()), run: deallocPD},

		prm.MLX5_CMD_OP_CREATE_MKEY:  {in: size(prm.CreateMkeyIn.Layout()), out: size(prm.CreateMkeyOut.Layout()), run: createMkey},
		prm.MLX5_CMD_OP_QUERY_MKEY:   {in: size(prm.QueryMkeyIn.Layout()), out: size(prm.QueryMkeyOut.Layout()), run: queryMkey},
		prm.MLX5_CMD_OP_DESTROY_MKEY: {in: size(prm.DestroyMkeyIn.Layout()), out: size(prm.DestroyMkeyOut.Layout()), run: destroyMkey},

		prm.MLX5_CMD_OP_CREATE_PSV:  {in: size(prm.CreatePsvIn.Layout()), out: size(prm.CreatePsvOut.Layout()), run: createPSV},
		prm.MLX5_CMD_OP_DESTROY_PSV: {in: size(prm.DestroyPsvIn.Layout()), out: size(prm.DestroyPsvOut.Layout()), run: destroyPSV},

		prm.MLX5_CMD_OP_CREATE_CQ:  {in: size(prm.CreateCqIn.Layout()), out: size(prm.CreateCqOut.Layout()), run: createCQ},
		prm.MLX5_CMD_OP_QUERY_CQ:   {in: size(prm.QueryCqIn.Layout()), out: size(prm.QueryCqOut.Layout()), run: queryCQ},
		prm.MLX5_CMD_OP_MODIFY_CQ:  {in: size(prm.ModifyCqIn.Layout()), out: size(prm.ModifyCqOut.Layout()), run: modifyCQ},
		prm.MLX5_CMD_OP_DESTROY_CQ: {in: size(prm.DestroyCqIn.Layout()), out: size(prm.DestroyCqOut.Layout()), run: destroyCQ},

		prm.MLX5_CMD_OP_CREATE_QP:  {in: size(prm.CreateQpIn.Layout()), out: size(prm.CreateQpOut.Layout()), run: createQP},
		prm.MLX5_CMD_OP_QUERY_QP:   {in: size(prm.QueryQpIn.Layout()), out: size(prm.QueryQpOut.Layout()), run: queryQP},
		prm.MLX5_CMD_OP_DESTROY_QP: {in: size(prm.DestroyQpIn.Layout()), out: size(prm.DestroyQpOut.Layout()), run: destroyQP},

		// obj_type is where op_mod is; the object types check their own
		// mailbox sizes (crypto.go).
		prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT:  {in: hdrLen, out: hdrLen, run: createGeneralObj, opMods: true},
		prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT:   {in: hdrLen, out: hdrLen, run: queryGeneralObj, opMods: true},
		prm.MLX5_CMD_OP_DESTROY_GENERAL_OBJECT: {in: hdrLen, out: hdrLen, run: destroyGeneralObj, opMods: true},
	}
	for _, op := range []uint16{prm.MLX5_CMD_OP_QUERY_HCA_CAP, prm.MLX5_CMD_OP_MODIFY_CQ} {
		c := commands[op]
		c.opMods = true
		commands[op] = c
	}
	for op, t := range transitions {
		commands[op] = command{in: t.minIn, out: 16, run: modifyQP}
	}
}

// checkOwner is the firmware's uid check: an object a command names must
// belong to the command's uid.
func checkOwner(owner, uid uint16) *fwErr {
	if owner != uid {
		return fail(prm.MLX5_CMD_STAT_BAD_RES_ERR, SyndromeWrongUID)
	}
	return nil
}

func noObject() *fwErr { return fail(prm.MLX5_CMD_STAT_BAD_RES_ERR, SyndromeNoObject) }

func limitReached() *fwErr { return fail(prm.MLX5_CMD_STAT_LIM_ERR, SyndromeLimit) }

func inUse() *fwErr { return fail(prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, SyndromeInUse) }

// General commands.

func nop(*hca, *fwCall) *fwErr { return nil }

func queryHCACap(h *hca, c *fwCall) *fwErr {
	opMod := uint16(c.get(prm.QueryHcaCapIn.OpMod))
	if c.get(prm.QueryHcaCapIn.OtherFunction) != 0 {
		return badParam(SyndromeNoCap) // a DEVX context manages no other function
	}
	pg, ok := h.prof.pages[opMod>>1]
	if !ok {
		return badParam(SyndromeBadOpMod)
	}
	// The maximum and current pages are the same: the model's driver
	// changes nothing with SET_HCA_CAP.
	copy(prm.QueryHcaCapOut.Capability.Bytes(c.out), pg)
	return nil
}

func queryAdapter(h *hca, c *fwCall) *fwErr {
	blk := prm.QueryAdapterOut.QueryAdapterStruct
	prm.QueryAdapterParamBlock.IeeeVendorId.At(blk).Set(c.out, 0x0002c9) // Mellanox OUI
	prm.QueryAdapterParamBlock.VsdVendorId.At(blk).Set(c.out, 0x15b3)    // PCI vendor
	copy(prm.QueryAdapterParamBlock.VsdContdPsid.At(blk).Bytes(c.out), h.prof.psid)
	return nil
}

func queryISSI(h *hca, c *fwCall) *fwErr {
	prm.QueryIssiOut.CurrentIssi.Set(c.out, 1)
	prm.QueryIssiOut.SupportedIssiDw0.Set(c.out, 0x3) // ISSI 0 and 1
	return nil
}
