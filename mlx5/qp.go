package mlx5

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// QPOptions describe a QP.
type QPOptions struct {
	// Type is the transport: RC (the zero value), UC, UD, or mlx5's DC
	// types, DCI and DCT.
	Type           QPType
	PD             *PD
	SendCQ, RecvCQ *CQ
	// SRQ makes the QP take its receives from a shared receive queue (a
	// DCT must); it then has no receive queue of its own.
	SRQ *SRQ
	// MaxSendWR is the number of send work requests of the largest kind
	// the send queue must hold at once (0 makes a verbs QP without a send
	// queue: it only receives); MaxSendSGE bounds their SGEs (0 means 1),
	// MaxInlineData their inline bytes (SendWR.Inline). The QP grants what
	// libmlx5 would (QP.Caps), and takes what libmlx5 takes: as many SGEs
	// and inline bytes as fit the device's largest send WQE, and receive
	// SGEs its largest receive WQE (a DEVX QP: 30 SGEs, the device's
	// max_sge). The ring is sized for the largest WQE of the operations
	// SendOps names (0: every operation of the QP type, as libmlx5 sizes a
	// QP without send_ops_flags).
	MaxSendWR, MaxSendSGE, MaxInlineData int
	SendOps                              OpcodeSet
	// MaxRecvWR and MaxRecvSGE size the receive queue; MaxRecvWR 0 makes
	// a QP without one (it cannot receive SENDs).
	MaxRecvWR, MaxRecvSGE int
	// MkeyConfigure lets the QP post mkey configures
	// (MLX5DV_QP_EX_WITH_MKEY_CONFIGURE; an RC QP only, as libmlx5). It
	// changes nothing of the QP's size, as in libmlx5: a configure's
	// translations (16 bytes a layout entry, padded to 64) and its BSFs
	// (a new signature block's 64-byte BSF; on a crypto mkey, when the BSF
	// is rewritten, the signature BSF of a signature mkey and the 64-byte
	// crypto BSF) travel as the UMR's inline data and must fit the QP's
	// Caps.MaxInlineData + 4 bytes, or PostMkeyConfigure refuses it
	// (ErrInvalid; libmlx5's ENOMEM). An RC QP of the default operations
	// with up to 4 SGEs and 60 inline bytes grants 60: room for a list of
	// 4 entries without a BSF, or one BSF without a list ("Default WQE
	// size can fit only 4 SGE entries", mlx5dv_wr_mkey_configure(3)). For
	// more, ask MaxInlineData, or MaxMkeyEntries: not 0, it asks as much
	// inline data as a list of that many entries with a signature block
	// and crypto takes (16 × MaxMkeyEntries rounded up to 4 entries, +
	// 124 bytes; an interleaved layout's repeat block takes one entry
	// more). A configure takes more WQEBBs than a send: the UMR's 128
	// bytes of control segments, its inline data and a SET_PSV per
	// signature domain.
	MkeyConfigure  bool
	MaxMkeyEntries int
	// SigPipelining makes the QP stop its send queue after a work
	// request whose signature check failed, raising EventSQDrained, so
	// that the fenced work behind it can be canceled
	// (MLX5DV_QP_CREATE_SIG_PIPELINING). It needs a verbs QP, DEVX and a
	// kernel that moves QPs from SQD back to RTS (Caps.SQD2RTS).
	SigPipelining bool
	// DCAccessKey is a DCT's access key, which a DCI's sends name it by.
	DCAccessKey uint64
	// DCIStreams gives a DCI concurrent streams
	// (MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS): 2^LogConcurrent stream
	// channels, of which 2^LogErrored may be in error at once.
	DCIStreams *DCIStreams
	// DEVX creates the QP as a DEVX object (an RC QP only), its work queue
	// and doorbell record in UMEMs, instead of through the kernel's verbs
	// (the default on a device that speaks verbs). It needs DEVX.
	DEVX bool
}

// DCIStreams are a DCI's stream channels (struct
// mlx5dv_dci_streams).
type DCIStreams struct {
	LogConcurrent, LogErrored int
}

// QP is a queue pair, its work queue and doorbell record in memory mlx5go
// owns: created through the kernel's verbs with mlx5's driver data (as
// libmlx5 does), or as a DEVX object on UMEMs. One goroutine at a time may
// post on it (the Post methods take no lock); another may poll its CQs,
// and any may Close it: posts in flight finish first, later ones return
// ErrClosed, and an open batch ends with Close.
type QP struct {
	c             *Context
	pd            *PD
	obj           *DevxObj    // a DEVX QP's
	handle        seam.Handle // a verbs QP's
	verbs         bool
	made          bool // the kernel made the verbs QP
	user          uint64
	uidx          uint32
	hasIdx        bool
	bf            bfReg
	hasBF         bool
	srq           *SRQ
	sigPipelining bool
	state         QPState // after the last Modify
	caps          QPCaps
	qpn           uint32
	name          string
	sendCQ        *CQ
	recvCQ        *CQ

	g          guard // posts inside; Close
	typ        QPType
	batch      Batch
	sq         sendQueue
	rq         recvQueue
	dbRQ       *doorbell.RQ
	mkeyConf   bool // the QP posts mkey configures (QPOptions.MkeyConfigure)
	dciStreams bool // a DCI made with DCIStreams
	errs       postErrors
	cancel     cancelBox // CancelPostedSends's QUERY_QP mailboxes (the poster's)

	mu     sync.Mutex
	res    resources
	closed bool
	// wq is the mapping of the work queue (in res): what an open batch
	// writes, which Close leaves to the batch (releaseWQ).
	wq *Buffer
}

type recvQueue struct {
	ring   []byte
	stride int
	maxSGE int
	pi     uint16
	wrID   []uint64
	sync   handoff
	_      [64]byte
	tail   atomic.Uint32
}

// postErrors are a QP's errors for a full queue and a closed QP, made at
// creation so that the hot path returns them without allocating.
type postErrors struct {
	full, closed [numPostOps]error
}

type postOp int

const (
	postSend postOp = iota
	postRecv
	postMkeyConfigure
	numPostOps
)

var postOpNames = [numPostOps]string{"post send", "post recv", "post mkey configure"}

func (qp *QP) initErrors() {
	for i, op := range postOpNames {
		qp.errs.full[i] = opErr(op, qp.name, ErrQueueFull)
		qp.errs.closed[i] = opErr(op, qp.name, ErrClosed)
	}
}

// QPType is a QP's transport service type.
type QPType uint8

// QP types.
const (
	QPTypeRC  QPType = iota // reliable connected
	QPTypeUC                // unreliable connected
	QPTypeUD                // unreliable datagram
	QPTypeDCI               // dynamically connected initiator (mlx5dv)
	QPTypeDCT               // dynamically connected target (mlx5dv)
)

var qpTypeNames = [...]string{"RC", "UC", "UD", "DCI", "DCT"}

func (t QPType) String() string {
	if int(t) < len(qpTypeNames) {
		return qpTypeNames[t]
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPN is the QP's number.
func (qp *QP) QPN() uint32 {
	if qp == nil {
		return 0
	}
	return qp.qpn
}

// usable fails for a nil QP and one not made by CreateQP.
func (qp *QP) usable(op string) error {
	if qp == nil || qp.c == nil {
		return unusable(op, "QP", "Context.CreateQP", qp == nil)
	}
	return nil
}

const (
	dataSegSize   = 16 // struct mlx5_wqe_data_seg
	raddrSegSize  = 16 // struct mlx5_wqe_raddr_seg
	atomicSegSize = 16 // struct mlx5_wqe_atomic_seg
	inlineHdrSize = 4  // struct mlx5_wqe_inline_seg's byte_count
	psvWQEBBs     = 1  // a SET_PSV WQE: control and PSV segments
)

func roundPow2(n int) int { return 1 << bits.Len(uint(n-1)) }

// QPCaps are what a QP grants (ibv_query_qp's cap): the work requests of
// the largest kind its send queue holds, SGEs and inline bytes per send,
// and its receive queue's work requests and SGEs.
type QPCaps struct {
	MaxSendWR, MaxSendSGE, MaxInlineData int
	MaxRecvWR, MaxRecvSGE                int
}

// Caps returns what the QP grants.
func (qp *QP) Caps() QPCaps {
	if qp == nil {
		return QPCaps{}
	}
	return qp.caps
}

// geometry is the QP's queues as libmlx5 sizes them, and its largest work
// request in WQEBBs.
func (o *QPOptions) geometry(lim *deviceLimits) (sqGeometry, rqGeometry, int, error) {
	if o.Type == QPTypeDCT {
		return sqGeometry{}, rqGeometry{}, 0, nil // a DCT only receives, through its SRQ
	}
	ops := o.SendOps
	if ops == 0 {
		ops = defaultOps(o.Type)
	}
	inline := o.MaxInlineData
	if o.MkeyConfigure && o.MaxMkeyEntries > 0 {
		// A configure's translations and BSF travel as the UMR's inline
		// data: MaxMkeyEntries asks for as much as a list of that many
		// entries with a signature block takes, as a libmlx5 program asks
		// max_inline_data. Without it the QP is libmlx5's for its caps.
		inline = max(inline, umrInline(o.MaxMkeyEntries))
	}
	sq, err := sqSize(lim, o.Type, ops, o.MaxSendWR, max(o.MaxSendSGE, 1), inline)
	if err != nil {
		return sq, rqGeometry{}, 0, err
	}
	var rq rqGeometry
	if o.SRQ == nil {
		if rq, err = rqSize(lim, o.MaxRecvWR, o.MaxRecvSGE); err != nil {
			return sq, rq, 0, err
		}
	}
	largest := sq.wqeSize / wqe.WQEBB
	if o.MkeyConfigure {
		// No work request is larger than the ring: a configure that
		// needs more than it holds is refused (libmlx5 writes it over
		// itself).
		largest = min(max(largest, umrLargest(sq.maxInline)), sq.wqeCnt)
	}
	return sq, rq, largest, nil
}

// CreateQP creates a QP in the RST state.
func (c *Context) CreateQP(o QPOptions) (*QP, error) {
	const op = "create qp"
	if err := c.usable(op); err != nil {
		return nil, err
	}
	verbs := !o.DEVX && c.speaksVerbs()
	var err error
	if verbs {
		err = c.checkOpen(op)
	} else {
		err = c.check(op, "")
	}
	if err != nil {
		return nil, err
	}
	if err := c.checkQPOptions(&o, verbs); err != nil {
		return nil, opErr(op, c.name, err)
	}
	if o.PD.isClosed() {
		return nil, opErr(op, pdName(o.PD.pdn), ErrClosed)
	}
	lim := c.caps.limits()
	sq, rq, largest, err := o.geometry(&lim)
	if err != nil {
		return nil, invalid(op, c.name, "%v", err)
	}
	// The CQs cannot be destroyed while the QP is being made on them.
	if err := o.SendCQ.ref(); err != nil {
		return nil, err
	}
	if err := o.RecvCQ.ref(); err != nil {
		o.SendCQ.unref()
		return nil, err
	}
	if o.SRQ != nil {
		if err := o.SRQ.ref(); err != nil {
			o.SendCQ.unref()
			o.RecvCQ.unref()
			return nil, err
		}
	}
	qp := &QP{c: c, pd: o.PD, sendCQ: o.SendCQ, recvCQ: o.RecvCQ, mkeyConf: o.MkeyConfigure,
		typ: o.Type, verbs: verbs, srq: o.SRQ, sigPipelining: o.SigPipelining}
	qp.sq.maxWQE = largest
	if s := o.DCIStreams; s != nil {
		// A stream id has 16 bits: more channels than that are all of them.
		qp.dciStreams, qp.sq.maxStream = true, uint16(1<<min(s.LogConcurrent, 16)-1)
	}
	qp.sq.maxSGE, qp.sq.maxInline = max(o.MaxSendSGE, 1), sq.maxInline
	qp.sq.maxMsg = c.maxMessage()
	if o.Type == QPTypeUD {
		// Until Modify names the port: no port's MTU is larger.
		qp.sq.maxMsg = min(qp.sq.maxMsg, maxMTUBytes)
	}
	qp.caps = QPCaps{MaxSendWR: sq.maxPost, MaxSendSGE: sq.maxSGE, MaxInlineData: sq.maxInline, MaxRecvWR: rq.maxPost, MaxRecvSGE: rq.maxSGE}
	if verbs {
		err = qp.createVerbs(&o, sq, rq)
	} else {
		err = qp.create(&o, sq, rq)
	}
	if err == nil {
		qp.name = qpName(qp.qpn)
		qp.initErrors()
		qp.sq.setPost(qp.typ, qp.qpn)
		qp.g.open()
		// A QP closing on these CQs with the same number (the firmware
		// reuses numbers at once) has cleaned its CQEs out of them before
		// this one is found there.
		unlock := lockCQs(o.SendCQ, o.RecvCQ)
		o.SendCQ.attachLocked(qp)
		o.RecvCQ.attachLocked(qp)
		unlock()
		if err = c.adopt(qp); err != nil {
			qp.Close()
			return nil, opErr(op, c.name, err)
		}
	}
	if err != nil {
		if qp.made {
			c.dev.DestroyQP(qp.handle)
		}
		qp.release()
		o.SendCQ.unref()
		o.RecvCQ.unref()
		if o.SRQ != nil {
			o.SRQ.unref()
		}
		return nil, wrapAs(op, c.name, "", err)
	}
	return qp, nil
}

// checkQPOptions refuses what cannot be made, before anything is.
func (c *Context) checkQPOptions(o *QPOptions, verbs bool) error {
	bad := func(format string, args ...any) error {
		return &reasonError{msg: fmt.Sprintf(format, args...), errs: []error{ErrInvalid, unix.EINVAL}}
	}
	lim := c.caps.limits()
	switch {
	case o.PD == nil || o.SendCQ == nil || o.RecvCQ == nil:
		return bad("PD, SendCQ and RecvCQ are required")
	case o.PD.c != c || o.SendCQ.c != c || o.RecvCQ.c != c || o.SRQ != nil && o.SRQ.c != c:
		return bad("PD, CQ or SRQ of another context")
	case o.Type > QPTypeDCT:
		return bad("QP type %v", o.Type)
	case o.MaxSendWR < 0 || o.MaxSendWR > 1<<15:
		return bad("MaxSendWR %d (0 to 32768)", o.MaxSendWR)
	case o.MaxSendSGE < 0 || o.MaxSendSGE > lim.maxSQDesc/dataSegSize:
		return bad("MaxSendSGE %d (0 to %d: a send WQE takes at most %d bytes)", o.MaxSendSGE, lim.maxSQDesc/dataSegSize, lim.maxSQDesc)
	case o.MaxRecvSGE < 0 || o.MaxRecvSGE > lim.maxRQDesc/dataSegSize:
		return bad("MaxRecvSGE %d (0 to %d: a receive WQE takes at most %d bytes)", o.MaxRecvSGE, lim.maxRQDesc/dataSegSize, lim.maxRQDesc)
	case o.MaxRecvWR < 0 || o.MaxRecvWR > 1<<15:
		return bad("MaxRecvWR %d (0 to 32768)", o.MaxRecvWR)
	case o.MaxInlineData < 0 || o.MaxInlineData > 1024:
		return bad("MaxInlineData %d (0 to 1024)", o.MaxInlineData)
	case o.MaxMkeyEntries < 0 || o.MaxMkeyEntries > 1<<10:
		return bad("MaxMkeyEntries %d (0 to 1024)", o.MaxMkeyEntries)
	case o.Type != QPTypeDCT && o.SRQ == nil && o.MaxSendWR == 0 && o.MaxRecvWR == 0:
		return bad("a QP with no send queue (MaxSendWR 0), no receive queue (MaxRecvWR 0) and no SRQ can do nothing")
	case o.SRQ != nil && o.MaxRecvWR > 0:
		return bad("a QP on an SRQ has no receive queue of its own (MaxRecvWR %d)", o.MaxRecvWR)
	case o.Type == QPTypeDCT && o.SRQ == nil:
		return bad("a DCT receives through an SRQ")
	case o.Type != QPTypeDCI && o.DCIStreams != nil:
		return bad("DCI streams on a %v QP", o.Type)
	case o.SendOps != 0 && o.SendOps&^(1<<numOpcodes-2) != 0:
		return bad("SendOps %#x", uint32(o.SendOps))
	}
	if o.MkeyConfigure && o.Type != QPTypeRC {
		// libmlx5 44.0's mlx5_qp_fill_wr_pfns offers
		// MLX5DV_QP_EX_WITH_MKEY_CONFIGURE on RC QPs only: EOPNOTSUPP.
		return &reasonError{msg: fmt.Sprintf("mkey configures on a %v QP (RC only)", o.Type), errs: []error{ErrUnsupported, unix.EOPNOTSUPP}}
	}
	if o.SigPipelining {
		switch {
		case !verbs:
			return bad("signature pipelining needs a verbs QP (it moves from SQD to RTS)")
		case !c.devx:
			return &reasonError{msg: "signature pipelining needs DEVX (its INIT2INIT with drain_sigerr)", errs: []error{ErrNoDEVX}}
		case !c.caps.SQD2RTS:
			return &reasonError{msg: "signature pipelining needs a kernel that moves a QP from SQD to RTS (Caps.SQD2RTS)", errs: []error{ErrUnsupported, unix.EOPNOTSUPP}}
		case o.Type != QPTypeRC:
			return bad("signature pipelining on a %v QP", o.Type)
		}
	}
	if !verbs {
		switch {
		case o.Type != QPTypeRC:
			return bad("a DEVX QP is an RC QP here, not %v", o.Type)
		case o.MaxSendWR == 0:
			return bad("a DEVX QP has a send queue (MaxSendWR 1 to 32768)")
		case o.MaxSendSGE > 30 || o.MaxRecvSGE > 30:
			return bad("at most 30 SGEs per work request on a DEVX QP")
		case o.SRQ != nil:
			return bad("a DEVX QP has its own receive queue")
		}
		return nil
	}
	if !o.SendCQ.verbs || !o.RecvCQ.verbs {
		return bad("a verbs QP needs verbs CQs (not CQOptions.DEVX)")
	}
	if s := o.DCIStreams; s != nil && (s.LogConcurrent < 0 || s.LogErrored < 0 || s.LogConcurrent > 0xff || s.LogErrored > 0xff) {
		return bad("DCI streams %+v", *s)
	}
	// libmlx5's create_qp: streams past the device's dci_streams_caps are
	// EINVAL before any command (none reported: only 2^0 of each).
	if s, m := o.DCIStreams, c.caps.MaxDCIStreams; s != nil && (s.LogConcurrent > m.LogConcurrent || s.LogErrored > m.LogErrored) {
		return bad("DCI streams of 2^%d concurrent and 2^%d errored channels: the device allows at most 2^%d and 2^%d (Caps.MaxDCIStreams, dci_streams_caps max_log_num_concurent and max_log_num_errored)",
			s.LogConcurrent, s.LogErrored, m.LogConcurrent, m.LogErrored)
	}
	return nil
}

// release frees what a QP made besides its device object. The work
// queue's mapping stays if a batch is open, until the batch ends
// (releaseWQ), or until the QP is unreachable.
func (qp *QP) release() {
	if qp.wq != nil && qp.g.handOff() {
		res := qp.res[:0:0]
		for _, r := range qp.res {
			if r != qp.wq {
				res = append(res, r)
			}
		}
		qp.res = res
		runtime.AddCleanup(qp, func(wq *Buffer) { wq.Close() }, qp.wq)
	}
	qp.res.close()
	c := qp.c
	if qp.hasBF {
		c.putBFReg(qp.bf)
		qp.hasBF = false
	}
	if qp.hasIdx {
		c.freeUIdx(qp.uidx)
		qp.hasIdx = false
	}
	if qp.user != 0 {
		c.dropHandle(qp.user)
		qp.user = 0
	}
}

// releaseWQ unmaps the work queue Close left to the batch that was open
// (release). The Buffer's Close is idempotent: the QP's cleanup calls it
// again.
func (qp *QP) releaseWQ() { qp.wq.Close() }

// rings places the queues in the work queue buffer wq, receive queue
// first, as libmlx5 lays them out.
func (qp *QP) rings(wq []byte, sq sqGeometry, rq rqGeometry) {
	rqBytes := rq.wqeCnt << rq.wqeShift
	if rq.wqeCnt > 0 {
		qp.rq.ring, qp.rq.stride, qp.rq.maxSGE = wq[:rqBytes], 1<<rq.wqeShift, rq.maxSGE
		qp.rq.wrID = make([]uint64, rq.wqeCnt)
	}
	qp.sq.ring = wqe.Ring(wq[rqBytes : rqBytes+sq.wqeCnt*wqe.WQEBB])
	qp.sq.slots = make([]sqSlot, sq.wqeCnt)
	if qp.dciStreams && qp.sq.maxStream > 0 && sq.wqeCnt > 0 {
		n := int(qp.sq.maxStream) + 1
		qp.sq.streams = &streamBook{stream: make([]uint16, sq.wqeCnt), doneTo: make([]uint16, n), ahead: make([]bool, n)}
	}
}

func (qp *QP) create(o *QPOptions, sq sqGeometry, rq rqGeometry) error {
	c := qp.c
	q, err := c.queueMemory(&qp.res, rq.wqeCnt<<rq.wqeShift+sq.wqeCnt*wqe.WQEBB, UARBlueFlame)
	qp.wq = q.bufMap
	if err != nil {
		return err
	}
	qp.rings(q.buf, sq, rq)

	in := mailbox(prm.CreateQpIn.Layout().Size, prm.MLX5_CMD_OP_CREATE_QP)
	qpc := prm.CreateQpIn.Qpc
	set := func(f prm.Field, v uint64) { f.At(qpc).Set(in, v) }
	set(prm.Qpc.St, qpcServiceRC)
	set(prm.Qpc.PmState, qpcPMMigrated)
	set(prm.Qpc.Pd, uint64(o.PD.pdn))
	set(prm.Qpc.UarPage, uint64(q.uar.pageID))
	set(prm.Qpc.LogSqSize, uint64(bits.Len(uint(sq.wqeCnt))-1))
	if rq.wqeCnt > 0 {
		set(prm.Qpc.RqType, qpcRQRegular)
		set(prm.Qpc.LogRqSize, uint64(bits.Len(uint(rq.wqeCnt))-1))
		set(prm.Qpc.LogRqStride, uint64(rq.wqeShift-4))
	} else {
		set(prm.Qpc.RqType, qpcRQZeroLength)
	}
	set(prm.Qpc.CqnSnd, uint64(o.SendCQ.cqn))
	set(prm.Qpc.CqnRcv, uint64(o.RecvCQ.cqn))
	set(prm.Qpc.LogPageSize, 0) // 4 KiB pages, log in units of 4 KiB
	set(prm.Qpc.DbrUmemValid, 1)
	set(prm.Qpc.DbrUmemId, uint64(q.dbrID))
	set(prm.Qpc.DbrAddr, 0)
	prm.CreateQpIn.WqUmemValid.Set(in, 1)
	prm.CreateQpIn.WqUmemId.Set(in, uint64(q.bufID))
	out := make([]byte, prm.CreateQpOut.Layout().Size)
	obj, err := c.createObj("devx obj create", in, out)
	if err != nil {
		return err
	}
	qp.res.add(obj)
	qp.obj = obj
	qp.qpn = uint32(prm.CreateQpOut.Qpn.Get(out))

	if qp.sq.bell, err = doorbell.NewSQ(q.dbr, q.uar.page[doorbell.BlueFlameOffset:], c.caps.BFRegSize/2); err != nil {
		return err
	}
	qp.dbRQ, err = doorbell.NewRQ(q.dbr)
	return err
}

// uarBFRegStride is the bytes between a UAR page's BlueFlame registers
// when the context did not say (bf_reg_size 0, which no mlx5_ib answers):
// the 512 of the page's layout. Such registers get no BlueFlame writes.
const uarBFRegStride = 512

// Values of the QP context (MLX5_QP_ST_RC, MLX5_QP_PM_MIGRATED,
// MLX5_NON_ZERO_RQ / MLX5_ZERO_LEN_RQ in the kernel's qp.h).
const (
	qpcServiceRC    = 0x0
	qpcPMMigrated   = 0x3
	qpcRQRegular    = 0x0
	qpcRQZeroLength = 0x3
)

// qpcIn is a modify command's input mailbox and the place of its QP
// context.
type qpcIn struct {
	in  []byte
	qpc prm.Field
}

func (q qpcIn) set(f prm.Field, v uint64) { f.At(q.qpc).Set(q.in, v) }
func (q qpcIn) bytes(f prm.Field) []byte  { return f.At(q.qpc).Bytes(q.in) }

// modify runs one QP state transition command whose QP context fill
// writes (2ERR and 2RST have none: fill is not called). Its error is
// Modify's.
func (qp *QP) modify(name string, opcode uint16, l *prm.Layout, outSize uint32, fill func(qpcIn)) error {
	qpn, ok := l.Field("qpn")
	if !ok {
		return opErr("modify", qp.name, fmt.Errorf("%s: prm has no layout for it", name))
	}
	in := mailbox(l.Size, opcode)
	qpn.Set(in, uint64(qp.qpn))
	if qpc, ok := l.Field("qpc"); ok {
		fill(qpcIn{in, qpc})
	}
	// The firmware's error names the command (prm.CmdError).
	return qp.c.modifyObj("modify", qp.name, qp.obj.handle, in, make([]byte, outSize))
}

// Close destroys the QP and frees its queues. It stops new posts first
// (they return ErrClosed) and waits for those in flight to finish, then
// asks the device to destroy the QP, so that no doorbell follows the
// destroy. It does not wait for an open batch, which ends with it
// (Batch). If the device refuses the destroy, the QP is as it was and
// usable (a post racing that Close may have got ErrClosed), and Close
// may be called again. Closing twice is safe.
//
// The work outstanding at Close, posted and its completion not yet
// polled, ends as with libmlx5's ibv_destroy_qp (the kernel destroys a
// QP without flushing it), except for SRQ receives the QP consumed:
//   - Sends (RDMA and atomic operations too) and mkey configures that
//     the device had not completed never complete: the destroy moves
//     the QP to RESET, which writes no CQE. Their completions already in
//     the send CQ, unread, are removed (libmlx5's __mlx5_cq_clean), so
//     that they are never reported, in particular not as those of a
//     later QP that gets the same number. A configure that did not
//     complete may or may not have changed its mkey: configure the mkey
//     again before it is used.
//   - Receives posted to the QP's own receive queue: likewise, never
//     completed, and their completions in the receive CQ removed.
//   - Receives of the QP's SRQ that it had not consumed stay in the SRQ
//     for its other QPs.
//   - Receives of its SRQ that the QP consumed (a DCT's, or an RC QP's
//     on an SRQ) are the SRQ's work requests, not the QP's, and each
//     completes once: one whose CQE the CQ holds at Close is reported by
//     the CQ's next Poll, ahead of the completions the CQ holds, as the
//     device wrote it (its wr_id, status, byte count and sender, and
//     this QP's number), and its WQE goes back to the SRQ. libmlx5
//     drops these; a move to RESET reports them the same way. mlx5_ib
//     drains a DCT before it destroys it (DRAIN_DCT, then the
//     DCT_DRAINED event), so a DCT's receives have all completed by
//     then. An RC QP may be taking a message at Close: a receive the
//     device consumed but had not completed when the QP went is never
//     reported, and its WQE is not given back. To close such a QP with
//     none in flight, move it to ERR, wait for EventQPLastWQEReached (it
//     consumes no receive after it) and poll, as the IB specification
//     has QPs on an SRQ torn down.
//   - On a DCI, the work of every stream, and the flushes of a stream
//     in error, as sends.
//   - Signature error reports (Mkey.Check) stay in the CQ: they are an
//     mkey's, not the QP's.
//
// To have every work request complete, move the QP to ERR (Modify) and
// poll its CQs until each has (WCWRFlushErr for those that had not run)
// before Close.
func (qp *QP) Close() error {
	const op = "destroy qp"
	if err := qp.usable(op); err != nil {
		return err
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.closed {
		return nil
	}
	// No post starts from here, and those in flight finish (a batch's
	// ring among them) before the device is told: on a ConnectX a
	// doorbell after the destroy names a QP number the firmware may
	// already have given to a new QP. An open batch is not waited for;
	// it ends with Close (Batch).
	qp.g.close()
	var err error
	if qp.verbs {
		if !qp.c.closedNow() {
			err = qp.c.dev.DestroyQP(qp.handle)
		}
	} else {
		err = qp.obj.Close()
	}
	if err != nil {
		qp.g.reopen() // the QP is as it was, and usable
		return wrapAs(op, qp.name, "", err)
	}
	unlock := lockCQs(qp.sendCQ, qp.recvCQ)
	defer unlock()
	qp.sendCQ.refs-- // one reference per role, as CreateQP took them
	qp.recvCQ.refs--
	cqs := []*CQ{qp.sendCQ, qp.recvCQ}
	if qp.recvCQ == qp.sendCQ {
		cqs = cqs[:1]
	}
	for _, cq := range cqs {
		cq.closeQPLocked(qp)
	}
	if qp.srq != nil {
		qp.srq.unref()
	}
	qp.closed = true
	qp.c.forget(qp)
	qp.release()
	return nil
}

// LoopbackPath returns the address path by which a QP on port reaches
// another QP of the same device: the port's LID on InfiniBand; on RoCE its
// first RoCE v2 GID (IPv4-mapped preferred), that GID's netdev MAC and
// index, hop limit 64. The MTU is the port's active MTU. A device that
// makes no verbs objects (a DEVX-only model) gets an InfiniBand path with
// LID 0 and MTU 1024.
func (c *Context) LoopbackPath(port uint8) (AddressPath, error) {
	const op = "loopback path"
	if err := c.checkOpen(op); err != nil {
		return AddressPath{}, err
	}
	if !c.speaksVerbs() {
		return AddressPath{Port: port, MTU: 3}, nil
	}
	pa, err := c.dev.QueryPort(port)
	if err != nil {
		return AddressPath{}, opErr(op, c.name, err)
	}
	path := AddressPath{Port: port, MTU: pa.ActiveMTU, LID: pa.LID}
	if pa.LinkLayer != linkLayerEthernet {
		return path, nil
	}
	gids, err := c.dev.QueryGIDTable()
	if err != nil {
		return AddressPath{}, opErr(op, c.name, err)
	}
	var best *seam.GIDEntry
	for i := range gids {
		g := &gids[i]
		if g.Port != uint32(port) || g.Type != gidTypeRoCEv2 {
			continue
		}
		if best == nil || (!ipv4Mapped(best.GID) && ipv4Mapped(g.GID)) {
			best = g
		}
	}
	if best == nil {
		return AddressPath{}, opErr(op, c.name, fmt.Errorf("port %d has no RoCE v2 GID", port))
	}
	path.GRH, path.GID, path.SGIDIndex, path.HopLimit, path.MAC = true, best.GID, uint8(best.Index), 64, best.MAC
	return path, nil
}

// linkLayerEthernet is IBV_LINK_LAYER_ETHERNET.
const linkLayerEthernet = 2

func ipv4Mapped(g [16]byte) bool {
	for _, b := range g[:10] {
		if b != 0 {
			return false
		}
	}
	return g[10] == 0xff && g[11] == 0xff
}

// streamBook is the bookkeeping of a DCI with streams, whose work
// completes in send queue order within a stream, not across streams (an
// error on one stream, or a slow target, leaves the others going on).
// libmlx5 moves its tail to whichever work request completed, freeing the
// WQEBBs of earlier ones still outstanding on other streams; here the tail
// only moves over work that is done, so that the poster never overwrites
// a WQE, or the record of a work request, the device has not completed.
// A completion of a stream's work request says that the stream's earlier
// ones are done too (signaled or not), as a completion on a QP does.
type streamBook struct {
	// stream is the stream of the work request starting at each WQEBB
	// (the poster's, written before the doorbell).
	stream []uint16
	// doneTo[s] is the counter after the last completed work request of
	// stream s, while the tail has not reached it (ahead[s]); the
	// poller's.
	doneTo []uint16
	ahead  []bool
	// reach is the counter after the furthest work request a completion
	// named, from the tail on; the poller's. The poster has published
	// (rung) everything before it, so the tail walk reads the poster's
	// records below it only: at and past it the poster may be writing
	// the records of work it has not rung.
	reach uint16
}

// complete turns b, a CQE of the QP whose opcode is opcode, into a
// completion: an error CQE of a send (a successful one is Poll's own) or
// a receive CQE. It returns false for a CQE that completes nothing more:
// one of a work request already reported (the other WQEs of an mkey
// configure after its first failed, or were flushed), one on a QP
// without the queue it names, or one of another opcode. It reads from b
// only the fields the opcode's completion reports (what wqe.CQE.Decode
// would decode of them).
func (qp *QP) complete(b []byte, opcode uint8, wc *Completion) bool {
	switch opcode {
	case wqe.CQEReqErr:
		s, ok := qp.sq.retire(wqe.CQEWQECounter(b), retireTail)
		if !ok {
			return false
		}
		syn, vendor := wqe.CQEErr(b)
		*wc = Completion{WrID: s.wrID, Opcode: s.op, QPN: qp.qpn, Status: statusOf(syn), VendorErr: vendor}
		return true
	case wqe.CQERespSend, wqe.CQERespSendImm, wqe.CQERespWRImm, wqe.CQERespSendInv, wqe.CQERespErr:
		return qp.completeRecv(b, opcode, wc)
	}
	return false
}

// reqBits adds to wc, the completion of a successful send, what its
// slot's bits say it reports beyond WrID, Opcode and QPN, from its CQE b.
func (wc *Completion) reqBits(bits uint8, b []byte) {
	switch {
	case bits&slotImm != 0:
		wc.WithImm = true
	case bits&slotByteCount != 0:
		wc.ByteLen = wqe.CQEByteCount(b)
	case bits&slotAtomic != 0:
		wc.ByteLen = 8 // the old value
	}
}

// completeRecv is complete for a responder CQE.
func (qp *QP) completeRecv(b []byte, opcode uint8, wc *Completion) bool {
	ctr := wqe.CQEWQECounter(b)
	var id uint64
	switch n := len(qp.rq.wrID); {
	case qp.srq != nil:
		id = qp.srq.complete(ctr)
	case n == 0:
		return false
	default:
		qp.rq.sync.observe()
		id = qp.rq.wrID[int(ctr)&(n-1)]
		qp.rq.tail.Add(1)
	}
	if opcode == wqe.CQERespErr {
		syn, vendor := wqe.CQEErr(b)
		*wc = Completion{WrID: id, Opcode: WCRecv, QPN: qp.qpn, Status: statusOf(syn), VendorErr: vendor}
		return true
	}
	flags, imm := wqe.CQEFlagsRQPN(b), wqe.CQEImm(b)
	*wc = Completion{WrID: id, Opcode: WCRecv, QPN: qp.qpn, ByteLen: wqe.CQEByteCount(b),
		SrcQP: flags & 0xffffff, SLID: wqe.CQESLID(b), SL: uint8(flags>>24) & 0xf,
		DLIDPathBits: wqe.CQEMLPath(b) & 0x7f, GRH: (flags>>28)&3 != 0, PKeyIndex: uint16(imm)}
	switch opcode {
	case wqe.CQERespWRImm:
		wc.Opcode, wc.Imm, wc.WithImm = WCRecvRDMAWithImm, imm, true
	case wqe.CQERespSendImm:
		wc.Imm, wc.WithImm = imm, true
	case wqe.CQERespSendInv:
		wc.InvalidatedRkey, wc.WithInv = imm, true
	}
	return true
}
