package model

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/wqe"
)

// A DC rig: DCIs and DCTs made through the verbs calls with libmlx5 44.0's
// driver data (the oracle's dc vectors, mlx5/testdata/dc.jsonl), and DCI
// WQEs encoded here from the header layouts (rdma-core 44.0's mlx5dv.h:
// struct mlx5_wqe_ctrl_seg with dci_stream_channel_id at bytes 9-10,
// struct mlx5_wqe_av, mlx5_wqe_raddr_seg, mlx5_wqe_atomic_seg,
// mlx5_wqe_data_seg, mlx5_wqe_inl_data_seg), never with wqe's encoders.

const (
	// dcVectors is mlx5/testdata/dc.jsonl for oracleCmdOf (which reads
	// testdata/ + the name); dcVectorsPath the same file for readJSONL.
	dcVectors      = "../../mlx5/testdata/dc.jsonl"
	dcVectorsPath  = "../mlx5/testdata/dc.jsonl"
	dciResetPath   = "../mlx5/testdata/dci_reset.jsonl"
	dcAllAccess    = accessLocalWrite | accessRemoteWrite | accessRemoteRead | accessRemoteAtomic
	dcRecvBytes    = 4096
	dcWantL3IPv4   = 1<<28 | 2<<24 // flags_rqpn: a GRH (bits 29:28) and MLX5_CQE_ROCE_L3_HEADER_TYPE_IPV4 (25:24)
	dcFlushStatus  = 0x05          // MLX5_CQE_SYNDROME_WR_FLUSH_ERR
	dcRemoteAccess = 0x13
	dcRetryExc     = 0x15
)

type dcRig struct {
	*vrig
	t      *testing.T
	cq     *vcqT // the DCIs' CQ
	dcq    *vcqT // the DCTs' CQ
	srq    *vsrqT
	av     [avSize]byte // the port's address, GID 3 (RoCE v2, IPv4)
	local  []byte
	remote []byte
	rbuf   []byte
	lmr    seam.MR
	rmr    seam.MR
	rbmr   seam.MR
	dctCmd oracleCmd // libmlx5's DCT create (setup/create_dct1), read once
}

func newDCRig(t *testing.T, profile string, opt Options) *dcRig {
	t.Helper()
	r := &dcRig{vrig: newVRigOpts(t, profile, opt), t: t}
	r.cq = r.vrig.cq(1023, nil)
	r.dcq = r.vrig.cq(1023, nil)
	r.srq = r.vrig.srq(255, 1)
	r.local, r.lmr = r.mr(1<<20, dcAllAccess)
	r.remote, r.rmr = r.mr(1<<20, dcAllAccess)
	r.rbuf, r.rbmr = r.mr(256*dcRecvBytes, accessLocalWrite)
	pattern(r.local, 1)
	pattern(r.remote, 2)
	r.av = r.portAV(3)
	return r
}

// portAV is struct mlx5_wqe_av as libmlx5's mlx5_create_ah writes it for
// an AH to the port's own GID gid on RoCE (providers/mlx5/verbs.c): SL 0,
// no GRH bit (reserved on Ethernet), the MAC the kernel's CREATE_AH
// answered (struct mlx5_ib_create_ah_resp: dmac at 4), the hop limit,
// the source GID index in grh_gid_fl, the destination GID.
func (r *dcRig) portAV(gid uint8) [avSize]byte {
	r.t.Helper()
	ah := r.roceAH(gid)
	out := make([]byte, 16)
	if _, err := r.d.CreateAH(r.pd, &ah, 0xa0, out); err != nil {
		r.t.Fatal(err)
	}
	var av [avSize]byte
	copy(av[20:26], out[4:10])
	av[27] = ah.GRH.HopLimit
	binary.BigEndian.PutUint32(av[28:], uint32(gid)<<20)
	copy(av[32:], ah.GRH.DGID[:])
	return av
}

// mapAt returns the rig's mapping that starts at address a.
func (r *dcRig) mapAt(a uint64) []byte {
	r.t.Helper()
	for _, m := range r.maps {
		if addr(m) == a {
			return m
		}
	}
	r.t.Fatalf("no mapping at %#x", a)
	return nil
}

// recv posts one receive WQE of n bytes on the DCTs' SRQ, in the receive
// buffer of the WQE's index, and returns the index.
func (r *dcRig) recv(n uint32) uint16 {
	idx := r.srq.head
	return r.srq.post(wqe.SGE{Addr: addr(r.rbuf[int(idx)*dcRecvBytes:]), Length: n, LKey: r.rbmr.LKey})
}

// rbufOf is receive WQE idx's buffer.
func (r *dcRig) rbufOf(idx uint16) []byte { return r.rbuf[int(idx)*dcRecvBytes:][:dcRecvBytes] }

// dctT is a DCT: its handle, number (from RTR), user index and key.
type dctT struct {
	h    seam.Handle
	dctn uint32
	uidx uint32
	key  uint64
}

// dct creates a DCT with libmlx5's driver data of setup/create_dct1 (the
// access key and user index replaced), on the rig's SRQ and DCT CQ, with
// access (IB access flags) at INIT, and moves it to RTR with an RNR NAK
// timer of 0.01 ms.
func (r *dcRig) dct(key uint64, access, uidx uint32) *dctT {
	r.t.Helper()
	return r.dctTimer(key, access, uidx, 1)
}

// dctTimer is dct with the RNR NAK timer minRNR (min_rnr_timer's
// encoding: 0 is 655 ms).
func (r *dcRig) dctTimer(key uint64, access, uidx uint32, minRNR uint8) *dctT {
	r.t.Helper()
	if r.dctCmd.In == nil {
		r.dctCmd = oracleCmdOf(r.t, dcVectors, "setup/create_dct1", "QP", "QP_CREATE")
	}
	c := r.dctCmd
	var u mlx5abi.Mlx5IbCreateQp
	decodeDrv(c.In["UHW_IN"], &u)
	if u.Flags&mlx5abi.MLX5_QP_FLAG_TYPE_DCT == 0 {
		r.t.Fatalf("setup/create_dct1 is no DCT: flags %#x", u.Flags)
	}
	u.SqBufAddr, u.Uidx = key, uidx // the access_key union
	q := seam.QPCreate{Type: c.In["TYPE"][0], PD: r.pd, SendCQ: r.dcq.h, RecvCQ: r.dcq.h, SRQ: r.srq.h, UserHandle: 0xd0 + uint64(uidx)}
	h, _, err := r.d.CreateQP(q, drv(&u), make([]byte, 40))
	if err != nil {
		r.t.Fatal(err)
	}
	init := seam.QPAttr{State: QPStateInit, Port: 1, AccessFlags: access}
	if err := r.d.ModifyQP(h, &init, maskState|maskPKey|maskPort|maskAccess, nil, nil); err != nil {
		r.t.Fatal(err)
	}
	rtr := seam.QPAttr{State: QPStateRTR, PathMTU: ibMTU1024, MinRNRTimer: minRNR, AH: r.roceAH(3)}
	resp := make([]byte, 16)
	if err := r.d.ModifyQP(h, &rtr, maskState|maskAV|maskPathMTU|maskMinRNRTimer, nil, resp); err != nil {
		r.t.Fatal(err)
	}
	return &dctT{h: h, dctn: binary.NativeEndian.Uint32(resp[4:]), uidx: uidx, key: key}
}

// dciT is a DCI as libmlx5 makes one, its send queue posted here.
type dciT struct {
	r    *dcRig
	h    seam.Handle
	qpn  uint32
	uidx uint32
	sq   []byte
	dbr  []byte
	pi   uint16
	cq   *vcqT // its CQ
}

// dci creates the DCI libmlx5 created in setup/create_<name> of the dc
// vectors (dci_rc, dci_basic, dci_s8, dci_s64), with its driver data,
// and moves it to RTS with rnrRetry.
func (r *dcRig) dci(name string, rnrRetry uint8) *dciT {
	r.t.Helper()
	c := oracleCmdOf(r.t, dcVectors, "setup/create_"+name, "QP", "QP_CREATE")
	return r.dciFrom(c.In["UHW_IN"], c, rnrRetry)
}

// dciFrom creates a DCI on the rig's CQ from driver data uhw (with the
// create command c's type and caps) and moves it to RTS.
func (r *dcRig) dciFrom(uhw []byte, c oracleCmd, rnrRetry uint8) *dciT {
	r.t.Helper()
	return r.dciOn(r.cq, uhw, c, rnrRetry)
}

// dciOn is dciFrom with the DCI's CQ cq.
func (r *dcRig) dciOn(cq *vcqT, uhw []byte, c oracleCmd, rnrRetry uint8) *dciT {
	r.t.Helper()
	c.In = map[string][]byte{"UHW_IN": uhw, "TYPE": c.In["TYPE"], "CAP": c.In["CAP"]}
	q, in := r.qpCmdOf(r.t, c, cq, cq)
	h, got, err := r.d.CreateQP(q, in, make([]byte, 40))
	if err != nil {
		r.t.Fatal(err)
	}
	var u mlx5abi.Mlx5IbCreateQp
	decodeDrv(in, &u)
	q2 := &dciT{r: r, h: h, qpn: got.QPN, uidx: u.Uidx, sq: r.mapAt(u.BufAddr)[:int(u.SqWqeCount)*sendWQEBB], dbr: r.mapAt(u.DbAddr), cq: cq}
	q2.toRTS(rnrRetry)
	return q2
}

// toRTS is libmlx5's modify of a DCI to RTS (modify_dci_qp_is_ok's
// attributes).
func (q *dciT) toRTS(rnrRetry uint8) {
	q.r.t.Helper()
	for _, s := range []struct {
		a    seam.QPAttr
		mask uint32
	}{
		{seam.QPAttr{State: QPStateInit, Port: 1}, maskState | maskPKey | maskPort},
		{seam.QPAttr{State: QPStateRTR, PathMTU: ibMTU1024}, maskState | maskPathMTU},
		{seam.QPAttr{State: QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: rnrRetry, MaxRdAtomic: 1},
			maskState | maskTimeout | maskRetryCnt | maskRNRRetry | maskMaxQPRdAtomic | maskSQPSN},
	} {
		a := s.a
		if err := q.r.d.ModifyQP(q.h, &a, s.mask, nil, nil); err != nil {
			q.r.t.Fatalf("DCI %#x to %d: %v", q.qpn, s.a.State, err)
		}
	}
}

// recover is the QP recovery of rdma-core's test_dc_stream_qp_recovery:
// RESET, then RTS again; the driver starts its counters over.
func (q *dciT) recover() {
	q.r.t.Helper()
	a := seam.QPAttr{State: QPStateReset}
	if err := q.r.d.ModifyQP(q.h, &a, maskState, nil, nil); err != nil {
		q.r.t.Fatal(err)
	}
	q.pi = 0
	q.setDBR(0)
	q.toRTS(7)
}

func (q *dciT) setDBR(pi uint16) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(pi))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&q.dbr[4])), binary.NativeEndian.Uint32(b[:]))
}

func (q *dciT) state() uint8 {
	s, _ := q.r.d.QPState(q.qpn)
	return s
}

// dcw is a DCI work request to encode.
type dcw struct {
	op       uint8
	fm       uint8 // fm_ce_se: tSignaled (CQ_UPDATE), 0x02 SOLICITED
	imm      uint32
	stream   uint16
	key      uint64
	dctn     uint32
	av       *[avSize]byte // nil: the rig's port address
	raddr    uint64
	rkey     uint32
	hasRaddr bool
	swapAdd  uint64
	compare  uint64
	atomic   bool
	sges     []tsge
	inline   []byte
}

// to addresses w to DCT d with its key.
func (w dcw) to(d *dctT) dcw {
	w.dctn, w.key = d.dctn, d.key
	return w
}

// encode writes w as the WQE at counter pi of QP qpn: ctrl, address vector
// (key, dqp_dct with MLX5_EXTENDED_UD_AV as libmlx5's
// mlx5_send_wr_set_dc_addr ORs it in), then the remote address, atomic,
// and data or inline segments.
func (w dcw) encode(av [avSize]byte, qpn uint32, pi uint16) []byte {
	if w.av != nil {
		av = *w.av
	}
	b := make([]byte, 16, maxWQEBytes)
	binary.BigEndian.PutUint32(b[0:], uint32(pi)<<8|uint32(w.op))
	binary.BigEndian.PutUint16(b[9:], w.stream)
	b[11] = w.fm
	binary.BigEndian.PutUint32(b[12:], w.imm)
	binary.BigEndian.PutUint64(av[0:], w.key)
	binary.BigEndian.PutUint32(av[8:], w.dctn|0x80000000)
	b = append(b, av[:]...)
	if w.hasRaddr || w.atomic {
		seg := make([]byte, 16)
		binary.BigEndian.PutUint64(seg, w.raddr)
		binary.BigEndian.PutUint32(seg[8:], w.rkey)
		b = append(b, seg...)
	}
	if w.atomic {
		seg := make([]byte, 16)
		binary.BigEndian.PutUint64(seg, w.swapAdd)
		binary.BigEndian.PutUint64(seg[8:], w.compare)
		b = append(b, seg...)
	}
	if w.inline != nil {
		seg := make([]byte, (4+len(w.inline)+15)&^15)
		binary.BigEndian.PutUint32(seg, uint32(len(w.inline))|1<<31)
		copy(seg[4:], w.inline)
		b = append(b, seg...)
	}
	for _, s := range w.sges {
		seg := make([]byte, 16)
		binary.BigEndian.PutUint32(seg, s.n)
		binary.BigEndian.PutUint32(seg[4:], s.key)
		binary.BigEndian.PutUint64(seg[8:], s.addr)
		b = append(b, seg...)
	}
	binary.BigEndian.PutUint32(b[4:], qpn<<8|uint32(len(b)/16))
	return b
}

// put copies WQE bytes b into the ring at the producer counter (across
// the ring's end), with the counter and the QP number in its control
// segment, and returns the WQE's counter.
func (q *dciT) put(b []byte) uint16 {
	b = append([]byte(nil), b...)
	idx := q.pi
	binary.BigEndian.PutUint32(b[0:], uint32(idx)<<8|uint32(b[3]))
	binary.BigEndian.PutUint32(b[4:], q.qpn<<8|uint32(b[7]&0x3f))
	n := len(q.sq) / sendWQEBB
	for i := 0; i < (len(b)+sendWQEBB-1)/sendWQEBB; i++ {
		slot := q.sq[sendWQEBB*(int(q.pi)&(n-1)):][:sendWQEBB]
		clear(slot)
		copy(slot, b[sendWQEBB*i:])
		q.pi++
	}
	return idx
}

// ring publishes the producer counter and rings the doorbell with the
// first 8 bytes of the WQE at counter last, as libmlx5 does.
func (q *dciT) ring(last uint16) {
	q.setDBR(q.pi)
	n := len(q.sq) / sendWQEBB
	first := q.sq[sendWQEBB*(int(last)&(n-1)):][:8]
	off := 0x800 + 0x100*(q.r.half.Add(1)&1)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&q.r.bfPage[off])), binary.NativeEndian.Uint64(first))
}

// post encodes, puts and rings the WQEs with one doorbell and returns
// their counters.
func (q *dciT) post(ws ...dcw) []uint16 {
	idx := make([]uint16, len(ws))
	for i, w := range ws {
		idx[i] = q.put(w.encode(q.r.av, q.qpn, q.pi))
	}
	q.ring(idx[len(idx)-1])
	return idx
}

// Expected CQEs (struct mlx5_cqe64 and struct mlx5_err_cqe); the owner
// bit is left out of the comparison.

func (q *dciT) wantReq(op uint8, idx uint16, byteCnt uint32) []byte {
	c := make([]byte, 64)
	binary.BigEndian.PutUint32(c[32:], q.uidx)
	binary.BigEndian.PutUint32(c[44:], byteCnt)
	binary.BigEndian.PutUint32(c[56:], uint32(op)<<24|q.qpn)
	binary.BigEndian.PutUint16(c[60:], idx)
	return c
}

func (q *dciT) wantErr(op, syndrome uint8, idx uint16) []byte {
	c := make([]byte, 64)
	binary.BigEndian.PutUint32(c[32:], q.uidx)
	c[55] = syndrome
	binary.BigEndian.PutUint32(c[56:], uint32(op)<<24|q.qpn)
	binary.BigEndian.PutUint16(c[60:], idx)
	c[63] = 13 << 4 // MLX5_CQE_REQ_ERR
	return c
}

// wantRecv is a DCT's receive completion of a message from DCI from.
func (d *dctT) wantRecv(op uint8, idx uint16, byteCnt, imm, from uint32) []byte {
	c := make([]byte, 64)
	binary.BigEndian.PutUint32(c[24:], dcWantL3IPv4|from)
	binary.BigEndian.PutUint32(c[32:], d.uidx)
	binary.BigEndian.PutUint32(c[36:], imm)
	binary.BigEndian.PutUint32(c[44:], byteCnt)
	binary.BigEndian.PutUint32(c[56:], d.dctn)
	binary.BigEndian.PutUint16(c[60:], idx)
	c[63] = op << 4
	return c
}

// wantRecvErr is a DCT's receive WQE completed in error.
func (d *dctT) wantRecvErr(syndrome uint8, idx uint16) []byte {
	c := make([]byte, 64)
	binary.BigEndian.PutUint32(c[32:], d.uidx)
	c[55] = syndrome
	binary.BigEndian.PutUint32(c[56:], d.dctn)
	binary.BigEndian.PutUint16(c[60:], idx)
	c[63] = 14 << 4 // MLX5_CQE_RESP_ERR
	return c
}

// checkDC compares a CQE with the expected one, owner bit aside.
func checkDC(t *testing.T, what string, got, want []byte) {
	t.Helper()
	g := append([]byte(nil), got...)
	g[63] &^= 1
	checkCQE(t, what, g, want)
}

// resetCmd is the RTS2RTS_QP mlx5dv_dci_stream_id_reset sends for stream
// id, built from the layouts (libmlx5's bytes are in dci_reset.jsonl,
// TestOracleDCIStreamReset).
func resetCmd(qpn uint32, id uint16) []byte {
	in := prm.Rts2rtsQpIn.Layout().New()
	prm.MboxIn.Opcode.Set(in, prm.MLX5_CMD_OP_RTS2RTS_QP)
	prm.Rts2rtsQpIn.Qpn.Set(in, uint64(qpn))
	prm.Rts2rtsQpIn.QpcExt.Set(in, 1)
	prm.Rts2rtsQpIn.OptParamMask9532.Set(in, 1) // MLX5_QPC_OPT_MASK_32_DCI_STREAM_CHANNEL_ID
	prm.QpcExt.DciStreamChannelId.At(prm.Rts2rtsQpIn.QpcDataExt).Set(in, uint64(id))
	return in
}

// reset sends the stream reset of id through DEVX on the DCI's verbs
// handle and returns the firmware status (OK when the call succeeded).
func (q *dciT) reset(id uint16) prm.Status {
	return q.modify(resetCmd(q.qpn, id))
}

func (q *dciT) modify(in []byte) prm.Status {
	out := make([]byte, 16)
	err := q.r.d.ObjModify(q.h, in, out)
	if err == nil {
		return prm.MLX5_CMD_STAT_OK
	}
	var fe *FirmwareError
	if !errors.As(err, &fe) {
		q.r.t.Fatalf("stream reset: %v, not a firmware status", err)
	}
	if st := prm.Status(prm.MboxOut.Status.Get(out)); st != fe.Cmd.Status {
		q.r.t.Errorf("stream reset: status %v in the output, %v in the error", st, fe.Cmd.Status)
	}
	return fe.Cmd.Status
}

// dcRecord is one record of the dc vectors, as the replay reads it.
type dcRecord struct {
	Case string `json:"case"`
	QP   struct {
		Name     string `json:"name"`
		SqWqeCnt int    `json:"sq_wqe_cnt"`
	} `json:"qp"`
	SqPIBefore int `json:"sq_pi_before"`
	SQ         struct {
		WQEBBs []struct {
			Index int    `json:"index"`
			Hex   string `json:"hex"`
		} `json:"wqebbs"`
		WQEs []struct {
			First int `json:"first_wqebb"`
			N     int `json:"num_wqebbs"`
		} `json:"wqes"`
	} `json:"sq"`
}

// dcRecords reads the dc vectors.
func dcRecords(t testing.TB) []dcRecord {
	t.Helper()
	data, err := os.ReadFile(dcVectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var recs []dcRecord
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var r dcRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// wqes returns the record's WQEs as libmlx5 wrote them, each contiguous.
func (rec *dcRecord) wqes(t testing.TB) [][]byte {
	t.Helper()
	bbs := map[int][]byte{}
	for _, b := range rec.SQ.WQEBBs {
		v, err := hex.DecodeString(b.Hex)
		if err != nil {
			t.Fatal(err)
		}
		bbs[b.Index] = v
	}
	var out [][]byte
	for _, w := range rec.SQ.WQEs {
		var b []byte
		for i := range w.N {
			bb, ok := bbs[(w.First+i)%max(rec.QP.SqWqeCnt, 1)]
			if !ok {
				t.Fatalf("%s: WQEBB %d of the WQE at %d is not recorded", rec.Case, i, w.First)
			}
			b = append(b, bb...)
		}
		out = append(out, b)
	}
	return out
}

// resetCmdOf is the DEVX command of a dci_reset.jsonl record.
func resetCmdOf(t *testing.T, name string) []byte {
	t.Helper()
	var cmd []byte
	readJSONL(t, dciResetPath, func(line []byte) {
		var rec struct {
			Case   string `json:"case"`
			Result struct {
				Cmds []struct {
					Method string `json:"method"`
					Attrs  []struct {
						Name string `json:"name"`
						Hex  string `json:"hex"`
					} `json:"attrs"`
				} `json:"kernel_cmds"`
			} `json:"result"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Case != name {
			return
		}
		for _, c := range rec.Result.Cmds {
			for _, a := range c.Attrs {
				if c.Method == "DEVX_OBJ_MODIFY" && a.Name == "CMD_IN" {
					cmd = unhex(t, a.Hex)
				}
			}
		}
	})
	if cmd == nil {
		t.Fatalf("dci_reset.jsonl: no DEVX command in %q", name)
	}
	return cmd
}
