package model

import (
	"encoding/binary"
	"fmt"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// Shared receive queues: UVERBS_METHOD_SRQ_CREATE of a basic SRQ and
// mlx5_ib_create_srq (drivers/infiniband/hw/mlx5/srq.c) with struct
// mlx5_ib_create_srq. mlx5_ib creates a basic SRQ as an RMP on an ISSI 1
// device (mlx5_cmd_create_srq, create_rmp_cmd); prm has no RMP layouts,
// so the model's kernel side creates the firmware object directly, with
// what create_rmp_cmd would send: the PD, the log size, the stride, the
// pinned buffer and doorbell record, the context's uid.
//
// The queue is a linked list (struct mlx5_wqe_srq_next_seg at the start of
// every WQE: its next_wqe_index, big-endian, at byte 2): the device takes
// the WQE at its head, then follows the WQE's next index; the driver puts
// the WQEs it gets back at the tail (libmlx5's mlx5_free_srq_wqe) and
// counts the WQEs it posted in word 0 of the doorbell record. The head
// starts at WQE 0, as libmlx5 links WQE i to i+1 at creation.

// srqObj is the firmware's SRQ (an RMP).
type srqObj struct {
	uid  uint16
	ctx  ctxID
	pdn  uint32
	buf  []byte // 1 << logSize WQEs of stride bytes
	dbr  []byte
	size int // WQEs
	// stride is the WQE size: 16 << (wqe_shift - 4), the next segment and
	// the data segments.
	stride int
	head   uint16 // the next WQE the device takes
	ci     uint16 // WQEs taken (the doorbell record counts those posted)
	lwm    uint32 // the armed limit (0: not armed)
	refs   int    // QPs taking WQEs from it
	ib     *vsrq
}

func (s *srqObj) owner() ctxID { return s.ctx }

// firstSRQN is where SRQ (RMP) numbers start: the model's choice.
const firstSRQN = 0x200

// vsrq is the kernel's SRQ (struct mlx5_ib_srq with its ib_usrq_object).
type vsrq struct {
	d      *Device
	h      seam.Handle
	srqn   uint32
	user   uint64
	pd     *uobj
	max    uint32 // msrq.max: WQEs
	maxGS  uint32
	usecnt int // QPs using it
}

// CreateSRQ creates a basic SRQ (mlx5_ib_create_srq, create_srq_user):
// max_wr under 1 << log_max_srq_sz and max_sge at most max_wqe_sz_rq / 16
// (EINVAL), 1 << log WQEs for max_wr + 1, WQEs of the next segment and
// max_sge data segments rounded up to a power of two (at least 32 bytes),
// the buffer of all of them at buf_addr and the doorbell record at
// db_addr. The limit of the create is not armed (mlx5_ib_create_srq does
// not read it; ModifySRQ arms). The kernel answers max_wr = WQEs - 1 and
// the SRQN (drvOut: struct mlx5_ib_create_srq_resp).
func (d *Device) CreateSRQ(s seam.SRQCreate, drvIn, drvOut []byte) (seam.Handle, seam.SRQCreated, error) {
	const call = "create srq"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return 0, seam.SRQCreated{}, err
	}
	pd, err := d.lookupKind(call, s.PD, kindPD)
	if err != nil {
		return 0, seam.SRQCreated{}, err
	}
	maxWQEs := uint64(1) << d.h.prof.cap(prm.CmdHcaCap.LogMaxSrqSz)
	maxSGE := d.h.prof.cap(prm.CmdHcaCap.MaxWqeSzRq) / wqeDataSegSize
	if uint64(s.MaxWR) >= maxWQEs || uint64(s.MaxSGE) > maxSGE {
		return 0, seam.SRQCreated{}, kerr(call, unix.EINVAL, fmt.Sprintf("mlx5_ib_create_srq: max_wr %d (limit %d) or max_sge %d (limit %d)", s.MaxWR, maxWQEs-1, s.MaxSGE, maxSGE))
	}
	n := roundPow2(uint64(s.MaxWR) + 1)
	desc := max(roundPow2(wqeDataSegSize+uint64(s.MaxSGE)*wqeDataSegSize), 32)
	// create_srq_user.
	const sizeofCreateSRQ = 32
	var u mlx5abi.Mlx5IbCreateSrq
	decodeDrv(drvIn[:min(len(drvIn), sizeofCreateSRQ)], &u)
	if u.Reserved0 != 0 || u.Reserved1 != 0 {
		return 0, seam.SRQCreated{}, kerr(call, unix.EINVAL, "create_srq_user: reserved fields set")
	}
	if len(drvIn) > sizeofCreateSRQ && !zero(drvIn[sizeofCreateSRQ:]) {
		return 0, seam.SRQCreated{}, kerr(call, unix.EINVAL, "create_srq_user: the driver data is not clear after the struct")
	}
	buf, errno := userMem(u.BufAddr, n*desc, false)
	if errno != 0 {
		return 0, seam.SRQCreated{}, kerr(call, errno, "ib_umem_get of the SRQ buffer")
	}
	dbr, errno := userMem(u.DbAddr, dbrSize, false)
	if errno != 0 {
		return 0, seam.SRQCreated{}, kerr(call, errno, "mlx5_ib_db_map_user of the doorbell record")
	}
	// CREATE_RMP: the firmware object.
	num, ok := alloc(d.h, "srq", d.h.srqs, firstSRQN, limit(firstSRQN, d.h.prof.cap(prm.CmdHcaCap.LogMaxSrq)))
	if !ok {
		return 0, seam.SRQCreated{}, kerr(call, statusErrno(prm.MLX5_CMD_STAT_LIM_ERR), "CREATE_RMP: log_max_srq SRQs exist")
	}
	fw := &srqObj{uid: d.uid, ctx: d.id, pdn: pd.pdn, buf: buf, dbr: dbr, size: int(n), stride: int(desc)}
	d.h.srqs[num] = fw
	d.h.pds[pd.pdn].refs++
	putDrv(drvOut, &mlx5abi.Mlx5IbCreateSrqResp{Srqn: num}, 8)
	v := &vsrq{d: d, srqn: num, user: s.UserHandle, pd: pd, max: uint32(n), maxGS: s.MaxSGE}
	fw.ib = v
	v.h = d.newHandle(&uobj{kind: kindSRQ, srq: v, objID: encObjID(prm.MLX5_CMD_OP_CREATE_RMP, num)})
	return v.h, seam.SRQCreated{SRQN: num, MaxWR: uint32(n - 1), MaxSGE: s.MaxSGE}, nil
}

// ModifySRQ arms the SRQ's limit (mlx5_ib_modify_srq with IB_SRQ_LIMIT):
// a limit of at least the SRQ's WQEs is EINVAL; 0 disarms. The event
// comes when a receive leaves fewer WQEs than the limit (srq.go,
// takeSRQ).
func (d *Device) ModifySRQ(h seam.Handle, limit uint32) error {
	const call = "modify srq"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	o, err := d.lookupKind(call, h, kindSRQ)
	if err != nil {
		return err
	}
	if limit >= o.srq.max {
		return kerr(call, unix.EINVAL, "mlx5_ib_modify_srq: srq_limit is not below the SRQ's WQEs")
	}
	if fw, ok := d.h.srqs[o.srq.srqn]; ok {
		fw.lwm = limit // MODIFY_RMP with the lwm (arm_rmp_cmd)
	}
	return nil
}

// DestroySRQ is UVERBS_METHOD_SRQ_DESTROY: EBUSY while QPs use the SRQ
// (ib_destroy_srq_user), then DESTROY_RMP; its unread events go.
func (d *Device) DestroySRQ(h seam.Handle) error {
	const call = "destroy srq"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	o, err := d.lookupKind(call, h, kindSRQ)
	if err != nil {
		return err
	}
	if err := d.destroySRQ(o.srq); err != nil {
		return err
	}
	delete(d.handles, h)
	return nil
}

func (d *Device) destroySRQ(v *vsrq) error {
	if v.usecnt > 0 {
		return kerr("destroy srq", unix.EBUSY, "ib_destroy_srq_user: QPs use the SRQ")
	}
	if fw, ok := d.h.srqs[v.srqn]; ok {
		if fw.refs > 0 {
			// DEVX QPs of the context name it: the firmware refuses.
			return &KernelError{Call: "destroy srq", Errno: statusErrno(prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR), Rule: "DESTROY_RMP: QPs use the SRQ"}
		}
		d.h.releaseSRQ(v.srqn, fw)
	}
	d.async.drop(v)
	return nil
}

func (h *hca) releaseSRQ(n uint32, s *srqObj) {
	h.pds[s.pdn].refs--
	delete(h.srqs, n)
}

// The data path of an SRQ.

// srqWQEs is how many WQEs the SRQ holds: posted (the doorbell record's
// counter) less taken.
func (s *srqObj) avail() uint16 { return uint16(dbrWord(s.dbr, 0)) - s.ci }

// srqRecvWQE reads the SRQ's head WQE, if it has one: its data segments
// (after the 16-byte next segment) up to MLX5_INVALID_LKEY or the stride's
// end, and its index.
func (h *hca) srqRecvWQE(s *srqObj) (sges []sge, idx uint16, ok bool) {
	if s.avail() == 0 {
		return nil, 0, false
	}
	if int(s.avail()) > s.size {
		h.fault(s.ctx, "SRQ: the doorbell record counts %d WQEs posted, %d taken, the SRQ has %d", uint16(dbrWord(s.dbr, 0)), s.ci, s.size)
		return nil, 0, false
	}
	idx = s.head & uint16(s.size-1)
	b := s.buf[int(idx)*s.stride:][:s.stride][16:]
	sges, bad := readSGEs(b)
	if bad != 0 {
		h.fault(s.ctx, "SRQ receive WQE %d: a data segment's byte_count %#x has bit 31 (MLX5_INLINE_SEG) set", idx, bad)
	}
	return sges, idx, true
}

// takeSRQ consumes the head WQE: the head follows its next_wqe_index, and
// if the SRQ is armed and now holds fewer WQEs than the limit, the limit
// event fires and the SRQ is disarmed (rxe_resp.c's get_srq_wqe; the
// firmware raises MLX5_EVENT_TYPE_SRQ_RQ_LIMIT, srq_event_notifier).
func (h *hca) takeSRQ(s *srqObj, n uint32) {
	idx := s.head & uint16(s.size-1)
	s.head = binary.BigEndian.Uint16(s.buf[int(idx)*s.stride+2:])
	s.ci++
	if s.lwm != 0 && uint32(s.avail()) < s.lwm {
		s.lwm = 0
		h.raise(qpSrqEQE(evSRQRQLimit, queueTypeSRQ, n))
	}
}

// readSGEs reads a receive WQE's data segments, up to MLX5_INVALID_LKEY
// or the end. A byte_count with bit 31 (MLX5_INLINE_SEG) set has no
// meaning in a receive WQE (what a device does with it is not public):
// bad is the first such, which the caller reports as a fault; the
// segment is read as its 32 bits say.
func readSGEs(b []byte) (sges []sge, bad uint32) {
	for ; len(b) >= 16; b = b[16:] {
		key := binary.BigEndian.Uint32(b[4:])
		if key == invalidLKey {
			break
		}
		bc := binary.BigEndian.Uint32(b)
		if bc&inlineSeg != 0 && bad == 0 {
			bad = bc
		}
		n := uint64(bc)
		if n == 0 {
			n = dataSegZero
		}
		sges = append(sges, sge{n, key, binary.BigEndian.Uint64(b[8:])})
	}
	return sges, bad
}
