package model

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// Options tune how the model reports firmware failures, what tests can
// control of its timing and numbering, and how its crypto engine was
// commissioned.
type Options struct {
	// StatusErrno makes a failed firmware command come back as Linux 6.1
	// returns it from the DEVX methods: mlx5_cmd_exec turns the status into
	// an errno (cmd_status_to_err: BAD_PARAM_ERR is EINVAL, LIM_ERR ENOMEM,
	// ...) and the output mailbox is not copied back. By default the output
	// mailbox, with status and syndrome, is copied back and the call fails
	// with a *FirmwareError (which wraps EREMOTEIO, as mlx5_cmd_do returns),
	// as the seam's contract asks. Asynchronous queries deliver the mailbox
	// either way, as the kernel does.
	StatusErrno bool
	// ManualDrain keeps a QP whose send queue stopped after a signature
	// error (drain_sigerr) in SQ_DRAINING until FinishDrain, so that tests
	// can see the draining state; by default the context's doorbell
	// goroutine ends the drain at its next pass (SQD and SQ_DRAINED).
	ManualDrain bool
	// SigStop says where, in the window the man page of
	// mlx5dv_qp_cancel_posted_send_wrs allows, the send queue of one of
	// the context's QPs with drain_sigerr stops after a requester-side
	// signature error: by default right after the WQE whose check failed;
	// see SigStop and docs/MODEL.md, "Where it stops".
	SigStop SigStop
	// ReuseQPN makes CREATE_QP take the lowest free QP number, so that a
	// destroyed QP's number comes back at once: a test mode for drivers,
	// which must not take a destroyed QP's stale completions or events for
	// its successor's. By default numbers come from a cursor that wraps
	// only after 2^log_max_qp creations. Real firmware's order is not
	// public. It is the HCA's: New and NewWithOptions set it, contexts
	// from Open and OpenWithOptions share it.
	ReuseQPN bool
	// NoDEVX opens the context without DEVX, as mlx5_ib_alloc_ucontext
	// does for a GET_CONTEXT request without MLX5_IB_ALLOC_UCTX_DEVX
	// (libmlx5 sends one when the request with it failed): no CREATE_UCTX,
	// uid 0. The DEVX methods that need a uid refuse (devx_get_uid and the
	// devx_uid checks of devx.c); UAR_OBJ_ALLOC, QUERY_EQN, the async
	// command FD and event channel allocations and every verbs call work,
	// and the firmware objects the kernel creates for the context carry uid
	// 0. See docs/MODEL.md, "Contexts without DEVX".
	NoDEVX bool
	// SigErrOncePerMkey makes an mkey, and not only its PSVs, hold back
	// signature errors: after it reported one, the mkey reports none until
	// a UMR with the SIG_ERR mask bit writes an expected_sigerr_count
	// other than its count of reported errors (modulo 2), as libmlx5 and
	// mlx5_ib do after every error ("Next UMR, Arm SIGERR"). By default
	// only the PSVs do: the PSV of the domain whose check failed reports
	// the first failure and ignores the next ones until a SET_PSV
	// (rdma-core commit 88ec631), so a transfer checked in the other
	// domain still reports. The public sources allow both (docs/MODEL.md,
	// "Signature errors"). It is the HCA's, as ReuseQPN.
	SigErrOncePerMkey bool
	// DCIRetryErrorTakesQP makes a DCI's transport retry error (no DCT
	// answers: none of that number, a wrong DC access key, an address
	// off the network) take the whole DCI to ERR, as an RC QP's does. By
	// default it is an error of the WR's stream channel, like the remote
	// access and local protection errors rdma-core's DCI stream tests
	// make: which of the two a ConnectX does is not public (docs/MODEL.md,
	// "DC"). It is the context's: its DCIs'.
	DCIRetryErrorTakesQP bool
	// DCIStreamOrder says which stream channel of one of the context's
	// DCIs with streams runs next, among those whose next WQE can run: by
	// default the one whose WQE comes first in the send queue; with
	// DCIStreamsSeeded one drawn from a seeded PCG, so that completions
	// of different streams come out of send queue order, reproducibly.
	// Either way each channel runs in order and a channel that waits
	// (an RNR NAK) does not stop the others (docs/MODEL.md, "DC").
	DCIStreamOrder DCIStreamOrder
	// DCIReadAtFetch makes the context's DCIs with streams copy each WQE
	// out of the ring when they fetch it, in send queue order, so that a
	// later write over its WQEBBs does not change what runs. By default
	// a WQE is read when its channel runs it, and a WQE that changed
	// since its fetch is a fault (a driver that reused WQEBBs the device
	// had not run): the stricter reading for catching driver bugs; which
	// of the two a ConnectX does is not public.
	DCIReadAtFetch bool
	// Crypto is how a crypto officer commissioned the AES-XTS engine of
	// a profile that has one: by default it imports plaintext DEKs; see
	// CryptoOptions and docs/MODEL.md, "Crypto objects". It is the HCA's,
	// as ReuseQPN.
	Crypto CryptoOptions
	// PageFault is the driver's page-fault handler for ODP MRs: when the
	// device touches or prefetches pages of an ODP MR that this process
	// does not map (or not writable, for a write), the model calls it
	// with the page-aligned range before it fails the access, as the
	// device raises a page request that mlx5_ib resolves
	// (pagefault_single_data_segment, hmm_range_fault), and checks the
	// range again after it returns. By default there is none: the
	// process's own memory is the caller's, and what it does not map
	// cannot be faulted in. It runs with the HCA locked, from the context
	// that made the access, and must not call back into the model
	// (hwtest/pyverbs's bridge maps the pages another process holds). It
	// is the HCA's, as ReuseQPN.
	PageFault func(addr, length uint64, write bool)
}

// Device is one context on a software ConnectX, with DEVX or without
// (Options.NoDEVX): it implements seam.Device. The kernel side (handles,
// DEVX rules, the uid) is the context's own; the firmware side (objects,
// caps) is shared with every context Open makes on the same HCA.
type Device struct {
	h   *hca
	id  ctxID  // the context's identity on the HCA
	uid uint16 // its DEVX uid; 0 without DEVX
	opt Options

	// Guarded by h.mu.
	closed  bool
	handles map[seam.Handle]*uobj
	next    seam.Handle
	seq     uint64
	fds     map[*asyncFD]bool
	chans   map[*eventChannel]bool
	maps    map[*byte][]byte
	// uars are the UAR pages of the mappings, by mapping; the doorbell
	// poller watches them while the context is open.
	uars map[*byte]uint32
	pl   *poller // nil when no page is watched

	// clocks are the clock-info pages mapped, by mapping.
	clocks map[*byte]*clockPage
	// drains are the context's QPs in SQ_DRAINING whose drain the doorbell
	// goroutine ends at its next pass; pendingDrains counts them for the
	// goroutine, which reads it without the lock.
	drains        []*qpObj
	pendingDrains atomic.Int32
	// sigStops draws the stops of Options.SigStop's SigStopSeeded; nil
	// for the other policies.
	sigStops *rand.Rand
	// dciOrder draws the stream channels of Options.DCIStreamOrder's
	// DCIStreamsSeeded; nil for DCIStreamsInOrder.
	dciOrder *rand.Rand

	// The verbs event files: the async event file (opened with the
	// context, as libmlx5 does) and the completion channels.
	async *evQueue[seam.AsyncEvent]
	comps map[*compChannel]bool
	// mmapIdx are the context's mmap entries in use (UAR_OBJ_ALLOC).
	mmapIdx map[uint32]bool
}

var _ seam.Device = (*Device)(nil)

type uobjKind int

const (
	kindDevxObj uobjKind = iota
	kindUMem
	kindUAR
	kindPD
	kindMR
	kindCQ
	kindQP
	kindSRQ
	kindAH
)

var uobjKindNames = [...]string{kindDevxObj: "a DEVX object", kindUMem: "a UMEM", kindUAR: "a UAR", kindPD: "a PD", kindMR: "an MR",
	kindCQ: "a CQ", kindQP: "a QP", kindSRQ: "an SRQ", kindAH: "an AH"}

// uobj is one handle of the context, like a uverbs uobject.
type uobj struct {
	kind uobjKind
	seq  uint64
	// DEVX object: its encoded id (get_enc_obj_id) and the destroy command
	// the kernel recorded when it was created.
	objID   uint64
	destroy []byte
	umemID  uint32
	uar     seam.UAR
	mmapIdx uint32 // a UAR's mmap entry (mmapOffset)
	pdn     uint32 // verbs PD
	mkey    uint32 // verbs MR: its mkey index
	// The verbs objects of seam.Verbs.
	cq  *vcq
	qp  *vqp
	srq *vsrq
	ah  *vah
	// subs are the event subscriptions on a DEVX object.
	subs []*subscription
}

// New makes a software ConnectX of the named profile (see Profiles) and
// opens a DEVX context on it.
func New(profile string) (*Device, error) { return NewWithOptions(profile, Options{}) }

// NewWithOptions is New with options: opt.ReuseQPN,
// opt.SigErrOncePerMkey, opt.Crypto and opt.PageFault are the HCA's, the rest the
// context's.
func NewWithOptions(profile string, opt Options) (*Device, error) {
	p, ok := profiles[profile]
	if !ok {
		return nil, fmt.Errorf("model: no profile %q (have %v)", profile, Profiles())
	}
	p, err := p.withCrypto(opt.Crypto)
	if err != nil {
		return nil, err
	}
	h := newHCA(p)
	h.reuseQPN = opt.ReuseQPN
	h.sigErrOncePerMkey = opt.SigErrOncePerMkey
	h.pageFault = opt.PageFault
	h.commission(opt.Crypto)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open(opt)
}

// Open opens another context on the same software ConnectX with this
// context's options, as a second process opening the device would: with
// its own uid, or without DEVX if this one has none.
func (d *Device) Open() (*Device, error) { return d.OpenWithOptions(d.opt) }

// OpenWithOptions opens another context on the same software ConnectX
// with its own options (NoDEVX, StatusErrno, ManualDrain, SigStop,
// DCIRetryErrorTakesQP, DCIStreamOrder, DCIReadAtFetch); ReuseQPN,
// SigErrOncePerMkey and Crypto are the HCA's, set when it was made, and
// opt's are ignored.
func (d *Device) OpenWithOptions(opt Options) (*Device, error) {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	return d.h.open(opt)
}

// open is mlx5_ib_alloc_ucontext: with DEVX, mlx5_ib_devx_create's
// CREATE_UCTX gives the context its uid; without, it has uid 0.
func (h *hca) open(opt Options) (*Device, error) {
	opt.ReuseQPN, opt.SigErrOncePerMkey, opt.Crypto, opt.PageFault = h.reuseQPN, h.sigErrOncePerMkey, h.cryptoOpt, h.pageFault
	if err := opt.SigStop.check(); err != nil {
		return nil, err
	}
	if err := opt.DCIStreamOrder.check(); err != nil {
		return nil, err
	}
	uid := uint16(0)
	if !opt.NoDEVX {
		var ok bool
		if uid, ok = h.newUID(); !ok {
			return nil, &KernelError{Call: "open", Errno: unix.ENOMEM, Rule: "mlx5_ib_devx_create: CREATE_UCTX: log_max_uctx uids are in use"}
		}
	}
	h.nextCtx++
	d := &Device{h: h, id: h.nextCtx, uid: uid, opt: opt, handles: map[seam.Handle]*uobj{},
		fds: map[*asyncFD]bool{}, chans: map[*eventChannel]bool{}, maps: map[*byte][]byte{}, uars: map[*byte]uint32{},
		async: newEvQueue[seam.AsyncEvent](), comps: map[*compChannel]bool{}, mmapIdx: map[uint32]bool{}}
	if opt.SigStop.Policy == SigStopSeeded {
		d.sigStops = rand.New(rand.NewPCG(opt.SigStop.Seed, sigStopStream))
	}
	if opt.DCIStreamOrder.Policy == DCIStreamsSeeded {
		d.dciOrder = rand.New(rand.NewPCG(opt.DCIStreamOrder.Seed, dciOrderStream))
	}
	h.ctxs[d.id] = d
	return d, nil
}

// UID returns the DEVX uid the kernel gave the context, which it writes
// into every command the context sends; 0 for a context without DEVX.
func (d *Device) UID() uint16 { return d.uid }

// DEVX reports whether the context has a DEVX uid (Options.NoDEVX).
func (d *Device) DEVX() bool { return d.uid != 0 }

// Profile returns the profile's name.
func (d *Device) Profile() string { return d.h.prof.name }

// Objects counts what is live: the firmware objects of every context on
// the HCA (PDs, mkeys, PSVs, CQs, QPs and DCTs, SRQs, UMEMs, UAR pages,
// DEKs and crypto logins; not the credentials and import KEKs provisioned),
// plus this context's handles (verbs CQs, QPs, SRQs and AHs among them),
// asynchronous command FDs, event channels, completion channels and UAR
// mappings. It is 0 once everything created has been destroyed.
func (d *Device) Objects() int {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	return d.h.objects() + len(d.handles) + len(d.fds) + len(d.chans) + len(d.comps) + len(d.maps)
}

// QPState returns the state (StateRST ...) of QP qpn, for tests of the
// state machine; ok is false if there is no such QP.
func (d *Device) QPState(qpn uint32) (state uint8, ok bool) {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	q, ok := d.h.qps[qpn]
	if !ok {
		return 0, false
	}
	return q.state(), true
}

// InjectSigErr does to QP qpn what a requester-side signature error does,
// without traffic (the data path reaches it by running WQEs): a QP in RTS
// created or modified with drain_sigerr stops in SQ_DRAINING, and its
// drain ends as the data path's does (SQD and SQ_DRAINED: at the doorbell
// goroutine's next pass, at once for a context with no mapped UAR page, at
// FinishDrain with Options.ManualDrain); SQD_RTS resumes it. No WQE
// failed, so the stop is at once whatever Options.SigStop says. Without
// drain_sigerr the QP stays in RTS (the error is only reported in a CQE).
func (d *Device) InjectSigErr(qpn uint32) error {
	return d.onQP(qpn, StateRTS, "RTS", func(q *qpObj) {
		if prm.Qpc.DrainSigerr.Get(q.qpc) != 0 {
			d.h.drainStop(q)
		}
	})
}

// onQP runs f, under the HCA's lock, on QP qpn of this context, which
// must be in state st (named stName in the error).
func (d *Device) onQP(qpn uint32, st uint8, stName string, f func(q *qpObj)) error {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	q, ok := d.h.qps[qpn]
	if !ok || q.ctx != d.id {
		return fmt.Errorf("model: no QP %#x on this context", qpn)
	}
	if q.state() != st {
		return fmt.Errorf("model: QP %#x is in state %#x, not %s", qpn, q.state(), stName)
	}
	f(q)
	return nil
}

// InjectSendError sets the state a send queue error on QP qpn in RTS
// leads to, without traffic: SQER, where SQERR2RTS resumes it. (The data
// path's RC errors lead to ERR.)
func (d *Device) InjectSendError(qpn uint32) error {
	return d.onQP(qpn, StateRTS, "RTS", func(q *qpObj) { prm.Qpc.State.Set(q.qpc, StateSQER) })
}

// Exec runs one firmware command directly, as the context's uid, without
// the kernel's DEVX rules: for tests of the firmware that DEVX cannot
// reach (SQD2RTS). A context without DEVX runs it as uid 0, the kernel's:
// the firmware cannot tell its objects from those of other contexts
// without DEVX. Objects it creates are the context's (Close removes them).
// It returns the status the command wrote into out.
func (d *Device) Exec(in, out []byte) prm.Status {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	in = append([]byte(nil), in...)
	prm.MboxIn.Uid.Set(in, uint64(d.uid))
	st, _ := d.h.exec(d.uid, d.id, in, out)
	return st
}

// The kernel side of each call. Every call copies the input mailbox (the
// kernel works on its own copy, UA_ALLOC_AND_COPY) and writes the uid in.

const hdrLen = 16 // general_obj_in_cmd_hdr, general_obj_out_cmd_hdr

func (d *Device) enter(call string) error {
	if d.closed {
		return kerr(call, unix.EBADF, "the context is closed")
	}
	return nil
}

// mailboxes applies the attributes' UVERBS_ATTR_MIN_SIZE and the
// vhca_tunnel_id check of the object methods.
func mailboxes(call string, in []byte, outLen int, object bool) error {
	if len(in) < hdrLen || outLen < hdrLen {
		return kerr(call, unix.EINVAL, "UVERBS_ATTR_MIN_SIZE: mailboxes hold at least the 16-byte command header")
	}
	if object && prm.GeneralObjInCmdHdr.VhcaTunnelId.Get(in) != 0 {
		return kerr(call, unix.EINVAL, "vhca_tunnel_id is not allowed on DEVX object methods")
	}
	return nil
}

// run executes a command for the context, as uid (the kernel already
// wrote it into in), and reports a failure as Options asks.
func (d *Device) run(call string, uid uint16, in, out []byte) error {
	tmp := make([]byte, len(out))
	st, syn := d.h.exec(uid, d.id, in, tmp)
	if st == prm.MLX5_CMD_STAT_OK {
		copy(out, tmp)
		return nil
	}
	return d.failed(call, in, out, tmp, st, syn)
}

func (d *Device) failed(call string, in, out, tmp []byte, st prm.Status, syn uint32) error {
	ce := &prm.CmdError{Opcode: uint16(prm.MboxIn.Opcode.Get(in)), OpMod: uint16(prm.MboxIn.OpMod.Get(in)), Status: st, Syndrome: syn}
	if d.opt.StatusErrno {
		return &KernelError{Call: call, Errno: statusErrno(st), Rule: "mlx5_cmd_exec: " + ce.Error()}
	}
	if out == nil {
		return &KernelError{Call: call, Errno: statusErrno(st), Rule: "mlx5_cmd_exec", Cmd: ce}
	}
	copy(out, tmp)
	return &FirmwareError{Call: call, Cmd: ce}
}

// cmdAs is the kernel's copy of an input mailbox with uid written in.
func cmdAs(in []byte, uid uint16) []byte {
	c := append([]byte(nil), in...)
	prm.MboxIn.Uid.Set(c, uint64(uid))
	return c
}

// devxUID is devx_get_uid: the uid a DEVX command runs as. The whitelisted
// general commands (devx_is_whitelist_cmd: QUERY_HCA_CAP,
// QUERY_HCA_VPORT_CONTEXT, QUERY_ESW_VPORT_CONTEXT, QUERY_ESW_FUNCTIONS)
// run as the context's uid or, without one, as the device's whitelist uid
// (EOPNOTSUPP if the device has none); every other command needs the
// context's uid (EINVAL without).
func (d *Device) devxUID(call string, in []byte) (uint16, error) {
	op := uint16(prm.MboxIn.Opcode.Get(in))
	if whitelistCmds[op] {
		switch {
		case d.uid != 0:
			return d.uid, nil
		case d.h.whitelistUID != 0:
			return d.h.whitelistUID, nil
		}
		return 0, kerr(call, unix.EOPNOTSUPP, "devx_get_uid: "+prm.OpcodeName(op)+" is whitelisted, but the context has no DEVX uid and the device no whitelist uid")
	}
	if d.uid == 0 {
		return 0, kerr(call, unix.EINVAL, "devx_get_uid: the context has no DEVX uid and "+prm.OpcodeName(op)+" is not whitelisted")
	}
	return d.uid, nil
}

// GeneralCmd is MLX5_IB_METHOD_DEVX_OTHER.
func (d *Device) GeneralCmd(in, out []byte) error {
	const call = "devx general cmd"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	if err := mailboxes(call, in, len(out), false); err != nil {
		return err
	}
	uid, err := d.devxUID(call, in)
	if err != nil {
		return err
	}
	if !isGeneralCmd(uint16(prm.MboxIn.Opcode.Get(in))) {
		return kerr(call, unix.EINVAL, "devx_is_general_cmd: "+prm.OpcodeName(uint16(prm.MboxIn.Opcode.Get(in)))+" is not a general command")
	}
	return d.run(call, uid, cmdAs(in, uid), out)
}

func (d *Device) newHandle(o *uobj) seam.Handle {
	d.next++
	d.seq++
	o.seq = d.seq
	d.handles[d.next] = o
	return d.next
}

// ObjCreate is MLX5_IB_METHOD_DEVX_OBJ_CREATE.
func (d *Device) ObjCreate(in, out []byte) (seam.Handle, error) {
	const call = "devx obj create"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return 0, err
	}
	if err := mailboxes(call, in, len(out), true); err != nil {
		return 0, err
	}
	uid, err := d.devxUID(call, in)
	if err != nil {
		return 0, err
	}
	op := uint16(prm.MboxIn.Opcode.Get(in))
	if !isCreateCmd(in) {
		return 0, kerr(call, unix.EINVAL, "devx_is_obj_create_cmd: "+prm.OpcodeName(op)+" is not a create command")
	}
	c := cmdAs(in, uid)
	if op == prm.MLX5_CMD_OP_CREATE_MKEY && len(c) < int((prm.CreateMkeyIn.MemoryKeyMkeyEntry.Off+prm.CreateMkeyIn.MemoryKeyMkeyEntry.Width)/8) {
		return 0, kerr(call, unix.EINVAL, "devx_handle_mkey_create: the input ends before the mkey context")
	}
	setUmemValid(c)
	if err := d.run(call, uid, c, out); err != nil {
		return 0, err
	}
	cr, ok := createdObjs[op]
	if !ok {
		// Every create the firmware implements is in createdObjs; this is
		// the kernel's WARN_ON in devx_get_created_obj_id.
		return 0, kerr(call, unix.EINVAL, "devx_get_created_obj_id: no destroy command for "+prm.OpcodeName(op))
	}
	id := uint32(cr.id.Get(out))
	destroy := make([]byte, hdrLen)
	prm.MboxIn.Opcode.Set(destroy, uint64(cr.destroyOp))
	prm.MboxIn.Uid.Set(destroy, uint64(uid))
	cr.destroyID.Set(destroy, uint64(id))
	objID := encObjID(op, id)
	if op == prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT {
		prm.GeneralObjInCmdHdr.ObjType.Set(destroy, prm.GeneralObjInCmdHdr.ObjType.Get(c))
		objID = genObjID(c, id)
	}
	return d.newHandle(&uobj{kind: kindDevxObj, objID: objID, destroy: destroy}), nil
}

// lookup is the uverbs IDR lookup: ENOENT for no such handle.
func (d *Device) lookup(call string, h seam.Handle) (*uobj, error) {
	o, ok := d.handles[h]
	if !ok {
		return nil, kerr(call, unix.ENOENT, fmt.Sprintf("no handle %d", h))
	}
	return o, nil
}

// lookupKind is lookup for a method whose handle attribute takes one
// object type: EINVAL for a handle of another type.
func (d *Device) lookupKind(call string, h seam.Handle, k uobjKind) (*uobj, error) {
	o, err := d.lookup(call, h)
	if err != nil {
		return nil, err
	}
	if o.kind != k {
		return nil, kerr(call, unix.EINVAL, "the handle is not "+uobjKindNames[k])
	}
	return o, nil
}

// objCmd applies the rules of the query and modify methods and returns
// the uid the command runs as.
func (d *Device) objCmd(call string, h seam.Handle, in []byte, outLen int, allowed func([]byte) bool, rule string) (uint16, error) {
	if err := d.enter(call); err != nil {
		return 0, err
	}
	if err := mailboxes(call, in, outLen, true); err != nil {
		return 0, err
	}
	o, err := d.lookup(call, h)
	if err != nil {
		return 0, err
	}
	uid, err := d.devxUID(call, in)
	if err != nil {
		return 0, err
	}
	if !allowed(in) {
		return 0, kerr(call, unix.EINVAL, rule+": "+prm.OpcodeName(uint16(prm.MboxIn.Opcode.Get(in)))+" is not allowed")
	}
	if !validObjID(o, in) {
		return 0, kerr(call, unix.EINVAL, "devx_is_valid_obj_id: the command names another object than the handle")
	}
	return uid, nil
}

// validObjID is devx_is_valid_obj_id: the object the command names
// (devx_get_obj_id) is the handle's, a DEVX object or a verbs CQ, QP or
// SRQ (get_enc_obj_id of the command that created it in the firmware).
func validObjID(o *uobj, in []byte) bool {
	id := objIDOf(in)
	if id == 0 || o.objID != id {
		return false
	}
	switch o.kind {
	case kindDevxObj, kindCQ, kindQP, kindSRQ:
		return true
	}
	return false
}

// ObjQuery is MLX5_IB_METHOD_DEVX_OBJ_QUERY.
func (d *Device) ObjQuery(h seam.Handle, in, out []byte) error {
	const call = "devx obj query"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	uid, err := d.objCmd(call, h, in, len(out), isQueryCmd, "devx_is_obj_query_cmd")
	if err != nil {
		return err
	}
	return d.run(call, uid, cmdAs(in, uid), out)
}

// ObjModify is MLX5_IB_METHOD_DEVX_OBJ_MODIFY.
func (d *Device) ObjModify(h seam.Handle, in, out []byte) error {
	const call = "devx obj modify"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	uid, err := d.objCmd(call, h, in, len(out), isModifyCmd, "devx_is_obj_modify_cmd")
	if err != nil {
		return err
	}
	c := cmdAs(in, uid)
	setUmemValid(c)
	return d.run(call, uid, c, out)
}

// ObjDestroy is MLX5_IB_METHOD_DEVX_OBJ_DESTROY: the recorded destroy
// command runs; if the firmware refuses, the handle stays.
func (d *Device) ObjDestroy(h seam.Handle) error {
	const call = "devx obj destroy"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	o, err := d.lookupKind(call, h, kindDevxObj)
	if err != nil {
		return err
	}
	d.runPending()
	out := make([]byte, hdrLen)
	if st, syn := d.h.exec(uint16(prm.MboxIn.Uid.Get(o.destroy)), d.id, o.destroy, out); st != prm.MLX5_CMD_STAT_OK {
		// devx_obj_cleanup returns mlx5_cmd_exec's errno; there is no
		// output mailbox to copy.
		return d.failed(call, o.destroy, nil, nil, st, syn)
	}
	d.h.unsubscribeObject(o)
	delete(d.handles, h)
	return nil
}

// IB access flags DEVX UMEM registration accepts (enum ib_access_flags).
const (
	accessLocalWrite  = 1 << 0
	accessRemoteWrite = 1 << 1
	accessRemoteRead  = 1 << 2
)

// UMemReg is MLX5_IB_METHOD_DEVX_UMEM_REG: the kernel pins mem and
// registers it with CREATE_UMEM. It is UMemRegEx (verbs_dmabuf.go) with
// the default page sizes.
func (d *Device) UMemReg(mem []byte, access uint32) (seam.Handle, uint32, error) {
	return d.UMemRegEx(seam.UMemRegEx{Mem: mem, Dmabuf: -1, Access: access})
}

// UMemDereg is MLX5_IB_METHOD_DEVX_UMEM_DEREG: devx_umem_cleanup runs
// the DESTROY_UMEM recorded at registration and returns its errno
// (mlx5_cmd_exec); if it fails, uverbs_destroy_uobject keeps the handle
// and the UMEM stays. The firmware refuses a UMEM that a CQ or QP uses,
// with BAD_RES_STATE as for every destroy of an object in use
// (docs/MODEL.md "Failures"): EINVAL, carrying the command's failure
// unless Options.StatusErrno. No uobject count is involved: a DEVX
// object names its UMEMs by id in its mailbox, not by handle.
func (d *Device) UMemDereg(h seam.Handle) error {
	const call = "devx umem dereg"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	o, err := d.lookupKind(call, h, kindUMem)
	if err != nil {
		return err
	}
	if d.h.umems[o.umemID].refs > 0 {
		destroy := make([]byte, hdrLen)
		prm.MboxIn.Opcode.Set(destroy, prm.MLX5_CMD_OP_DESTROY_UMEM)
		e := inUse()
		return d.failed(call, destroy, nil, nil, e.status, e.syndrome)
	}
	unmapDmabuf(d.h.umems[o.umemID].unmap)
	delete(d.h.umems, o.umemID)
	delete(d.handles, h)
	return nil
}

const pageSize = 4096

// UARAlloc is MLX5_IB_METHOD_UAR_OBJ_ALLOC: a UAR page (ALLOC_UAR with the
// context's uid, 0 without DEVX: alloc_uar_entry) and the mmap offset that
// maps it. It is mlx5_ib's method, not DEVX's: a context without DEVX
// takes its UARs with it too (libmlx5's dynamic UARs).
func (d *Device) UARAlloc(typ uint32) (seam.UAR, error) {
	const call = "uar alloc"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return seam.UAR{}, err
	}
	if typ != 0 && typ != 1 {
		return seam.UAR{}, kerr(call, unix.EOPNOTSUPP, "the type is neither MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF nor _NC")
	}
	page, ok := alloc(d.h, "uar", d.h.uars, firstUAR, 1<<24)
	if !ok {
		return seam.UAR{}, &KernelError{Call: call, Errno: unix.ENOMEM, Rule: "ALLOC_UAR: no UAR page left"}
	}
	d.h.uars[page] = uarObj{uid: d.uid, ctx: d.id}
	idx := uint32(0)
	for d.mmapIdx[idx] {
		idx++
	}
	d.mmapIdx[idx] = true
	u := seam.UAR{PageID: page, MMapOffset: mmapOffset(idx), MMapLength: pageSize}
	u.Handle = d.newHandle(&uobj{kind: kindUAR, mmapIdx: idx})
	d.handles[u.Handle].uar = u
	return u, nil
}

// mlx5IBMmapOffsetStart is MLX5_IB_MMAP_OFFSET_START (mlx5_ib.h): the
// "command" of the mmap offsets of UAR_OBJ_ALLOC's entries.
const mlx5IBMmapOffsetStart = 9

// mmapOffset is the mmap offset the kernel answers for the idx-th mmap
// entry of a context (mlx5_rdma_user_mmap_entry_insert takes the lowest
// free page offset from MLX5_IB_MMAP_OFFSET_START << 16 of the context's
// mmap_xa; mlx5_entry_to_mmap_offset encodes it: the index's high byte
// at bit 16, the command at bit 8 (MLX5_IB_MMAP_CMD_SHIFT), its low byte
// at bit 0, all in pages).
func mmapOffset(idx uint32) uint64 {
	return (uint64(idx>>8)<<16 | mlx5IBMmapOffsetStart<<8 | uint64(idx&0xff)) << 12
}

// UARFree is MLX5_IB_METHOD_UAR_OBJ_DESTROY (DEALLOC_UAR).
func (d *Device) UARFree(h seam.Handle) error {
	const call = "uar free"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	o, err := d.lookupKind(call, h, kindUAR)
	if err != nil {
		return err
	}
	delete(d.h.uars, o.uar.PageID)
	delete(d.mmapIdx, o.mmapIdx)
	delete(d.handles, h)
	return nil
}

// MapUAR maps the UAR page: anonymous memory outside the Go heap, which
// the context's doorbell goroutine watches for doorbell and BlueFlame
// writes. As with the kernel's mmap, the offset and length must be those
// UARAlloc returned.
func (d *Device) MapUAR(u seam.UAR) ([]byte, error) {
	const call = "mmap uar"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return nil, err
	}
	o, ok := d.handles[u.Handle]
	if !ok || o.kind != kindUAR || o.uar.MMapOffset != u.MMapOffset || u.MMapLength != pageSize {
		return nil, kerr(call, unix.EINVAL, "no UAR of this context at that mmap offset and length")
	}
	b, err := unix.Mmap(-1, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("model: mmap uar: %w", err)
	}
	d.maps[unsafe.SliceData(b)] = b
	d.uars[unsafe.SliceData(b)] = u.PageID
	d.watch(b, u.PageID)
	return b, nil
}

// UnmapUAR releases a mapping MapUAR made; the doorbell poller stops
// watching it first, and stops when it was the last. Like munmap, it works
// after the context is closed.
func (d *Device) UnmapUAR(page []byte) error {
	d.h.mu.Lock()
	b, ok := d.maps[unsafe.SliceData(page)]
	if !ok || len(page) != len(b) {
		d.h.mu.Unlock()
		return kerr("munmap uar", unix.EINVAL, "not a UAR mapping of this context")
	}
	delete(d.maps, unsafe.SliceData(page))
	delete(d.uars, unsafe.SliceData(page))
	stopped := d.unwatch(b)
	d.h.mu.Unlock()
	if stopped != nil {
		stopped.wait()
	}
	return unix.Munmap(b)
}

// QueryEQN is MLX5_IB_METHOD_DEVX_QUERY_EQN (mlx5_vector2eqn). Its handler
// reads no uid: a context without DEVX is answered too.
func (d *Device) QueryEQN(vector uint32) (uint32, error) {
	const call = "devx query eqn"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return 0, err
	}
	if vector >= d.h.prof.compVectors {
		return 0, kerr(call, unix.ENOENT, fmt.Sprintf("mlx5_vector2eqn: the device has %d completion vectors", d.h.prof.compVectors))
	}
	return d.h.prof.firstCompEQN + vector, nil
}

// Close closes the context as the kernel does when its file is closed:
// every object is destroyed, newest first, UMEMs and UARs released, the
// asynchronous command FDs and event channels woken with EIO (their
// subscriptions end), and the uid, if any, freed. UAR mappings
// stay until UnmapUAR. Closing twice returns nil.
func (d *Device) Close() error {
	d.h.mu.Lock()
	pl := d.close()
	d.h.mu.Unlock()
	if pl != nil {
		pl.wait()
	}
	return nil
}

// close is Close under the HCA's lock; it returns the doorbell poller it
// stopped, for the caller to wait for once the lock is released.
func (d *Device) close() *poller {
	if d.closed {
		return nil
	}
	d.closed = true
	pl := d.pl
	if pl != nil {
		d.pl = nil
		pl.stop()
	}
	// The handles go newest first, in passes until one destroys nothing,
	// as __uverbs_cleanup_ufile retries what failed: a handle whose object
	// is still in use stays for the next pass. What is left then is held by
	// firmware objects no handle owns (Exec's); purge drops those first.
	for progress := true; progress && len(d.handles) > 0; {
		progress = false
		hs := make([]seam.Handle, 0, len(d.handles))
		for h := range d.handles {
			hs = append(hs, h)
		}
		sort.Slice(hs, func(i, j int) bool { return d.handles[hs[i]].seq > d.handles[hs[j]].seq })
		for _, h := range hs {
			if d.release(d.handles[h]) {
				delete(d.handles, h)
				progress = true
			}
		}
	}
	d.h.purge(d.id)
	clear(d.handles)
	for fd := range d.fds {
		fd.destroy()
		delete(d.fds, fd)
	}
	for c := range d.chans {
		c.destroy()
		delete(d.chans, c)
	}
	for c := range d.comps {
		c.q.destroy()
		delete(d.comps, c)
	}
	d.async.destroy()
	d.drains = nil
	d.pendingDrains.Store(0)
	if d.uid != 0 {
		delete(d.h.uids, d.uid) // mlx5_ib_devx_destroy
	}
	delete(d.h.ctxs, d.id)
	return pl
}

// release destroys the object of one handle as the context's close does;
// false if it is still in use (the firmware refused, or an object no handle
// owns refers to it).
func (d *Device) release(o *uobj) bool {
	switch o.kind {
	case kindDevxObj:
		st, _ := d.h.exec(uint16(prm.MboxIn.Uid.Get(o.destroy)), d.id, o.destroy, make([]byte, hdrLen))
		return st == prm.MLX5_CMD_STAT_OK
	case kindUMem:
		if u, ok := d.h.umems[o.umemID]; ok && u.refs > 0 {
			return false
		}
		delete(d.h.umems, o.umemID)
	case kindUAR:
		delete(d.h.uars, o.uar.PageID)
		delete(d.mmapIdx, o.mmapIdx)
	case kindPD:
		if pd, ok := d.h.pds[o.pdn]; ok && pd.refs > 0 {
			return false
		}
		delete(d.h.pds, o.pdn)
	case kindMR:
		d.h.dropVerbsMkey(o.mkey)
	case kindCQ:
		return d.destroyCQ(o.cq) == nil
	case kindQP:
		d.destroyQP(o.qp)
	case kindSRQ:
		return d.destroySRQ(o.srq) == nil
	case kindAH:
		d.destroyAH(o.ah)
	}
	return true
}

// purge drops the firmware objects of context ctx left after its handles
// are gone: those Exec created, and what they kept in use. DESTROY_UCTX
// leaves nothing of a DEVX uid; a context without DEVX has no uid to
// destroy, and the model drops what its Exec calls left all the same (by
// the context, not the uid, which is 0 for every such context). QPs go
// first: releasing one updates the PD, CQs and UMEMs it uses, which are
// still there.
func (h *hca) purge(ctx ctxID) {
	for n, q := range h.qps {
		if q.ctx == ctx {
			h.releaseQP(n, q)
		}
	}
	dropCtx(h.mkeys, ctx)
	dropCtx(h.psvs, ctx)
	h.purgeCrypto(ctx)
	for n, s := range h.srqs {
		if s.ctx == ctx {
			h.releaseSRQ(n, s)
		}
	}
	dropCtx(h.cqs, ctx)
	dropCtx(h.pds, ctx)
	dropCtx(h.umems, ctx)
	dropCtx(h.uars, ctx)
}

// owned is a firmware object with the context that created it.
type owned interface{ owner() ctxID }

func (o *pdObj) owner() ctxID   { return o.ctx }
func (o *mkeyObj) owner() ctxID { return o.ctx }
func (o *psvObj) owner() ctxID  { return o.ctx }
func (o *cqObj) owner() ctxID   { return o.ctx }
func (o *umemObj) owner() ctxID { return o.ctx }
func (o uarObj) owner() ctxID   { return o.ctx }

// dropCtx deletes context ctx's objects from a table.
func dropCtx[V owned](m map[uint32]V, ctx ctxID) {
	maps.DeleteFunc(m, func(_ uint32, o V) bool { return o.owner() == ctx })
}
