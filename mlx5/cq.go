package mlx5

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/mlx5go/mlx5go/doorbell"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/uverbs"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// CQOptions size a completion queue.
type CQOptions struct {
	// Entries is the least number of CQEs the queue holds; it is rounded
	// up to a power of two (at least 2).
	Entries int
	// Vector is the completion vector whose EQ receives the CQ's events.
	Vector uint32
}

// CQ is a completion queue created through DEVX, with its CQE ring and
// doorbell record in memory mlx5go owns (UMEMs). It has a single poller:
// Poll is not safe for concurrent use.
type CQ struct {
	c       *Context
	cqn     uint32
	logSize uint8
	ring    []byte // 64-byte CQEs
	ci      uint32
	db      *doorbell.CQ

	// qps are the QPs whose completions arrive here, by qpn; replaced
	// whole (copy on write) so Poll reads it without a lock.
	qps atomic.Pointer[map[uint32]*QP]
	mu  sync.Mutex // serialises attach and detach

	res    resources
	closed bool
	dead   atomic.Bool // closed: the ring is unmapped
}

// resources is what an object made, closed in reverse order.
type resources []interface{ Close() error }

func (r *resources) add(c interface{ Close() error }) { *r = append(*r, c) }

// close closes everything, newest first, and returns the first error.
func (r *resources) close() error {
	var first error
	for i := len(*r) - 1; i >= 0; i-- {
		if err := (*r)[i].Close(); err != nil && first == nil {
			first = err
		}
	}
	*r = nil
	return first
}

// cqeSize is the CQE size mlx5go uses (cqc.cqe_sz 0: 64 bytes).
const cqeSize = 64

// CreateCQ creates a completion queue: a ring of CQEs and a doorbell
// record in UMEMs, on an NC UAR page for its arm doorbell and on the EQ of
// the completion vector.
func (c *Context) CreateCQ(opt CQOptions) (*CQ, error) {
	const op = "create cq"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if opt.Entries <= 0 || opt.Entries > 1<<22 {
		return nil, fmt.Errorf("mlx5: %s: %d entries (1 to 4194304)", op, opt.Entries)
	}
	logSize := uint8(bits.Len(uint(max(opt.Entries, 2) - 1)))
	cq := &CQ{c: c, logSize: logSize}
	m := map[uint32]*QP{}
	cq.qps.Store(&m)
	if err := cq.create(opt); err != nil {
		cq.res.close()
		return nil, fmt.Errorf("mlx5: %s: %w", op, err)
	}
	return cq, nil
}

func (cq *CQ) create(opt CQOptions) error {
	c := cq.c
	q, err := c.queueMemory(&cq.res, cqeSize<<cq.logSize, MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC)
	if err != nil {
		return err
	}
	cq.ring = q.buf
	for i := 0; i < len(cq.ring); i += cqeSize {
		wqe.InitCQE(cq.ring[i : i+cqeSize])
	}
	eqn, err := c.QueryEQN(opt.Vector)
	if err != nil {
		return err
	}

	in := mailbox(prm.CreateCqIn.Layout().Size, prm.MLX5_CMD_OP_CREATE_CQ)
	cqc := prm.CreateCqIn.CqContext
	prm.Cqc.CqeSz.At(cqc).Set(in, 0)
	prm.Cqc.LogCqSize.At(cqc).Set(in, uint64(cq.logSize))
	prm.Cqc.UarPage.At(cqc).Set(in, uint64(q.uar.PageID))
	prm.Cqc.CEqnOrApuElement.At(cqc).Set(in, uint64(eqn))
	prm.Cqc.LogPageSize.At(cqc).Set(in, 0) // 4 KiB pages, log in units of 4 KiB
	prm.Cqc.DbrUmemValid.At(cqc).Set(in, 1)
	prm.Cqc.DbrUmemId.At(cqc).Set(in, uint64(q.dbrID))
	prm.CreateCqIn.CqUmemValid.Set(in, 1)
	prm.CreateCqIn.CqUmemId.Set(in, uint64(q.bufID))
	out := make([]byte, prm.CreateCqOut.Layout().Size)
	obj, err := c.CreateObj(in, out)
	if err != nil {
		return err
	}
	cq.res.add(obj)
	cq.cqn = uint32(prm.CreateCqOut.Cqn.Get(out))
	cq.db, err = doorbell.NewCQ(q.dbr, q.uar.Page, cq.cqn)
	return err
}

// queueMemory is what a CQ or a QP needs besides its create command: the
// queue's buffer and a doorbell record, each in its own UMEM, and a UAR
// page.
type queueMemory struct {
	buf, dbr     []byte
	bufID, dbrID uint32 // umem ids
	uar          *UAR
}

// queueMemory makes it, adding each piece to res.
func (c *Context) queueMemory(res *resources, size int, uarType uint32) (queueMemory, error) {
	var q queueMemory
	buf, err := AllocBuffer(size)
	if err != nil {
		return q, err
	}
	res.add(buf)
	dbr, err := AllocBuffer(4096)
	if err != nil {
		return q, err
	}
	res.add(dbr)
	q.buf, q.dbr = buf.Bytes(), dbr.Bytes()[:doorbell.RecordSize]
	for _, m := range []struct {
		mem []byte
		id  *uint32
	}{{q.buf, &q.bufID}, {dbr.Bytes(), &q.dbrID}} {
		u, err := c.RegUMem(m.mem, uint32(uverbs.AccessLocalWrite))
		if err != nil {
			return q, err
		}
		res.add(u)
		*m.id = u.ID
	}
	if q.uar, err = c.AllocUAR(uarType); err != nil {
		return q, err
	}
	res.add(q.uar)
	return q, nil
}

// mailbox returns an input mailbox of n bytes with the opcode set.
func mailbox(n uint32, opcode uint16) []byte {
	in := make([]byte, n)
	prm.MboxIn.Opcode.Set(in, uint64(opcode))
	return in
}

// CQN is the CQ's number.
func (cq *CQ) CQN() uint32 { return cq.cqn }

// Size is the number of CQEs the ring holds.
func (cq *CQ) Size() int { return 1 << cq.logSize }

// Close destroys the CQ; the QPs on it must be closed first. Closing twice
// is safe.
func (cq *CQ) Close() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return nil
	}
	if n := len(*cq.qps.Load()); n > 0 && !cq.c.closedNow() {
		return fmt.Errorf("mlx5: destroy cq %#x: %d QPs still use it: %w", cq.cqn, n, errBusy)
	}
	cq.closed = true
	cq.dead.Store(true)
	if err := cq.res.close(); err != nil {
		return fmt.Errorf("mlx5: destroy cq %#x: %w", cq.cqn, err)
	}
	return nil
}

func (cq *CQ) attach(qp *QP) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	old := *cq.qps.Load()
	m := make(map[uint32]*QP, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[qp.qpn] = qp
	cq.qps.Store(&m)
}

func (cq *CQ) detach(qp *QP) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	old := *cq.qps.Load()
	if _, ok := old[qp.qpn]; !ok {
		return
	}
	m := make(map[uint32]*QP, len(old))
	for k, v := range old {
		if k != qp.qpn {
			m[k] = v
		}
	}
	cq.qps.Store(&m)
}

var errBusy = unix.EBUSY

// Poll reads up to len(wc) completions into wc and returns how many it
// read (ibv_poll_cq); 0 once the CQ is closed. Signature error reports (SIG_ERR CQEs) are not
// completions: Poll hands them to their Mkey, for Mkey.Check. It does not
// allocate, lock or make a system call.
func (cq *CQ) Poll(wc []Completion) int {
	if cq.dead.Load() {
		return 0
	}
	qps := *cq.qps.Load()
	mask := uint32(1)<<cq.logSize - 1
	n := 0
	start := cq.ci
	var q wqe.CQE
	for n < len(wc) {
		off := (cq.ci & mask) * cqeSize
		b := cq.ring[off : off+cqeSize : off+cqeSize]
		if !owned(b, cq.ci, cq.logSize) {
			break
		}
		cq.ci++
		if q.Decode(b) != nil {
			continue
		}
		if q.Opcode == wqe.CQESigErr {
			cq.sigErr(b)
			continue
		}
		qp := qps[q.QPN]
		if qp == nil {
			continue // a closed QP's
		}
		if qp.complete(&q, &wc[n]) {
			n++
		}
	}
	if cq.ci != start {
		cq.db.SetCI(cq.ci)
	}
	return n
}

// owned is wqe.CQEOwned with the ordering the device's write needs: the
// device writes op_own (the CQE's last byte) after the rest, so op_own is
// read with an atomic load (load-acquire on arm64, libmlx5's
// udma_from_device_barrier), and the CQE's other bytes are read after it.
func owned(cqe []byte, ci uint32, logSize uint8) bool {
	w := atomic.LoadUint32((*uint32)(unsafe.Pointer(&cqe[cqeSize-4])))
	var last [4]byte
	binary.NativeEndian.PutUint32(last[:], w)
	var probe [cqeSize]byte
	probe[cqeSize-1] = last[3]
	return wqe.CQEOwned(probe[:], ci, logSize)
}

// sigErr hands a SIG_ERR CQE's report to its mkey.
func (cq *CQ) sigErr(b []byte) {
	var s wqe.SigErrCQE
	if s.Decode(b) != nil {
		return
	}
	m := cq.c.mkeyByIndex(s.Mkey >> 8)
	if m == nil {
		return
	}
	m.recordSigErr(s.Sig())
}

// complete turns a CQE of the QP into a completion; false for a CQE that
// completes nothing the user posted.
func (qp *QP) complete(q *wqe.CQE, wc *Completion) bool {
	*wc = Completion{QPN: qp.qpn, ByteLen: q.ByteCount}
	switch q.Opcode {
	case wqe.CQEReq, wqe.CQEReqErr:
		i := int(q.WQECounter) & (len(qp.sq.wrID) - 1)
		wc.WrID, wc.Opcode = qp.sq.wrID[i], qp.sq.op[i]
		qp.sq.tail.Store(uint32(qp.sq.next[i]))
		if wc.Opcode != WCRDMARead {
			wc.ByteLen = 0
		}
	case wqe.CQERespSend, wqe.CQERespSendImm, wqe.CQERespWRImm, wqe.CQERespSendInv, wqe.CQERespErr:
		n := len(qp.rq.wrID)
		if n == 0 {
			return false
		}
		i := int(q.WQECounter) & (n - 1)
		wc.WrID = qp.rq.wrID[i]
		qp.rq.tail.Add(1)
		wc.Opcode = WCRecv
		switch q.Opcode {
		case wqe.CQERespWRImm:
			wc.Opcode, wc.Imm, wc.WithImm = WCRecvRDMAWithImm, q.Imm, true
		case wqe.CQERespSendImm:
			wc.Imm, wc.WithImm = q.Imm, true
		}
	default:
		return false
	}
	if q.Opcode == wqe.CQEReqErr || q.Opcode == wqe.CQERespErr {
		wc.Status, wc.VendorErr = statusOf(q.Syndrome), q.VendorSyndrome
		wc.ByteLen, wc.Imm, wc.WithImm = 0, 0, false
	}
	return true
}

// statusOf maps an error CQE's syndrome to the work completion status
// libmlx5 reports for it.
func statusOf(s wqe.Syndrome) WCStatus {
	if st, ok := syndromeStatus[s]; ok {
		return st
	}
	return WCGeneralErr
}

var syndromeStatus = map[wqe.Syndrome]WCStatus{
	wqe.SyndromeLocalLength: WCLocLenErr, wqe.SyndromeLocalQPOp: WCLocQPOpErr, wqe.SyndromeLocalProt: WCLocProtErr,
	wqe.SyndromeWRFlush: WCWRFlushErr, wqe.SyndromeMWBind: WCMWBindErr, wqe.SyndromeBadResp: WCBadRespErr,
	wqe.SyndromeLocalAccess: WCLocAccessErr, wqe.SyndromeRemoteInvalReq: WCRemInvReqErr,
	wqe.SyndromeRemoteAccess: WCRemAccessErr, wqe.SyndromeRemoteOp: WCRemOpErr,
	wqe.SyndromeTransportRetryExc: WCRetryExcErr, wqe.SyndromeRNRRetryExc: WCRNRRetryExcErr,
	wqe.SyndromeRemoteAborted: WCRemAbortErr,
}
