package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// The verbs half of the seam, against libmlx5 44.0's driver data (the
// oracle's create_cmds, datapath_setup and dci records) and Linux 6.1's
// rules.

func TestDriverContext(t *testing.T) {
	// The request the model assumes is the one libmlx5 sends.
	get := oracleCmdOf(t, "create_cmds.jsonl", "open_device", "DEVICE", "GET_CONTEXT")
	if req := drv(&libmlx5Request); !bytes.Equal(req, get.In["UHW_IN"]) {
		t.Errorf("libmlx5's request\n%x, the model assumes\n%x", get.In["UHW_IN"], req)
	}
	const base = mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET | mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_MKEY_UPDATE_TAG
	// cx6dx and cx7 have real-time timestamps (sq_ts_format, rq_ts_format
	// and qp_ts_format FREE_RUNNING_AND_REAL_TIME), cx5 not.
	const dx = base | mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE | mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS |
		mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS
	for _, tc := range []struct {
		profile  string
		compMask uint32
	}{{"cx5", base}, {"cx6dx", dx}, {"cx7", dx}} {
		t.Run(tc.profile, func(t *testing.T) {
			d := newDev(t, tc.profile)
			b := d.DriverContext()
			if len(b) != len(get.Out["UHW_OUT"]) {
				t.Fatalf("%d bytes, libmlx5 asks for %d", len(b), len(get.Out["UHW_OUT"]))
			}
			var r mlx5abi.Mlx5IbAllocUcontextResp
			decodeDrv(b, &r)
			want := mlx5abi.Mlx5IbAllocUcontextResp{QpTabSize: 1 << 18, BfRegSize: 512, CacheLineSize: 64, MaxSqDescSz: 1024,
				MaxRqDescSz: 512, MaxSendWqebb: 1 << 15, MaxRecvWr: 1 << 15, MaxSrqRecvWr: 1 << 15, NumPorts: 1,
				CompMask: tc.compMask, ResponseLength: 72, CqeVersion: 1, CmdsSuppUhw: 3, EthMinInline: 2,
				ClockInfoVersions: 1, LogUarSize: 12, NumUarsPerPage: 1}
			if r != want {
				t.Errorf("got  %+v\nwant %+v", r, want)
			}
			b[0] ^= 0xff
			if c := d.DriverContext(); c[0] == b[0] {
				t.Error("DriverContext returns the context's own bytes")
			}
		})
	}
}

func TestQueryPortAndGIDs(t *testing.T) {
	d := newDev(t, "cx6dx")
	p, err := d.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	want := seam.PortAttr{State: 4, MaxMTU: 5, ActiveMTU: 3, GIDTableLen: 255, PortCapFlags: 1<<16 | 1<<26, MaxMsgSz: 1 << 30, LinkLayer: 2}
	if p != want {
		t.Errorf("port %+v, want %+v", p, want)
	}
	for _, port := range []uint8{0, 2} {
		if _, err := d.QueryPort(port); !errors.Is(err, unix.EINVAL) {
			t.Errorf("port %d: %v, want EINVAL", port, err)
		}
	}
	gids, err := d.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	ll := [16]byte{0xfe, 0x80, 8: 0x00, 9: 0x00, 10: 0x00, 11: 0xff, 12: 0xfe, 13: 0, 14: 0, 15: 1}
	v4 := [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 0, 14: 2, 15: 1}
	e := func(g [16]byte, i, typ uint32) seam.GIDEntry {
		return seam.GIDEntry{GID: g, Index: i, Port: 1, Type: typ, MAC: portMAC}
	}
	v6 := [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	wantG := []seam.GIDEntry{e(ll, 0, 1), e(ll, 1, 2), e(v4, 2, 1), e(v4, 3, 2), e(v6, 4, 1), e(v6, 5, 2)}
	if len(gids) != len(wantG) {
		t.Fatalf("%d GIDs, want %d", len(gids), len(wantG))
	}
	for i := range gids {
		if gids[i] != wantG[i] {
			t.Errorf("GID %d: %+v, want %+v", i, gids[i], wantG[i])
		}
	}
	d.Close()
	if _, err := d.QueryGIDTable(); !errors.Is(err, unix.EBADF) {
		t.Errorf("after Close: %v, want EBADF", err)
	}
}

// TestOracleCreateCQ creates the CQ libmlx5 asked for, from its driver
// data with the process addresses and the UAR page put in (the record's
// "varying"), and checks the kernel's answer: entries - 1 and the CQN.
func TestOracleCreateCQ(t *testing.T) {
	for _, rec := range []struct{ file, name string }{{"create_cmds.jsonl", "create_cq"}, {"datapath_setup.jsonl", "datapath_setup/create_cq"}} {
		c := oracleCmdOf(t, rec.file, rec.name, "CQ", "CQ_CREATE")
		r := newVRig(t, "cx6dx")
		var u mlx5abi.Mlx5IbCreateCq
		decodeDrv(c.In["UHW_IN"], &u)
		if u.CqeSize != 64 || u.Flags != mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX {
			t.Fatalf("%s: libmlx5's CQ driver data %+v", rec.name, u)
		}
		cqe := binary.NativeEndian.Uint32(c.In["CQE"])
		_, _, buf, dbr := r.cqCmd(cqe)
		in := append([]byte(nil), c.In["UHW_IN"]...)
		binary.NativeEndian.PutUint64(in[0:], addr(buf))
		binary.NativeEndian.PutUint64(in[8:], addr(dbr))
		binary.NativeEndian.PutUint16(in[24:], uint16(r.nc.PageID))
		out := make([]byte, len(c.Out["UHW_OUT"]))
		h, n, err := r.d.CreateCQ(seam.CQCreate{CQE: cqe, UserHandle: 1}, in, out)
		if err != nil {
			t.Fatalf("%s: %v", rec.name, err)
		}
		if want := binary.NativeEndian.Uint32(c.Out["RESP_CQE"]); n != want {
			t.Errorf("%s: %d entries granted, the record has %d", rec.name, n, want)
		}
		cqn := binary.NativeEndian.Uint32(out)
		cq := r.d.h.cqs[cqn]
		if cq == nil || cq.ib == nil || prm.Cqc.LogCqSize.Get(cq.cqc) != 9 || uint32(prm.Cqc.UarPage.Get(cq.cqc)) != r.nc.PageID {
			t.Errorf("%s: CQ %#x not made as asked", rec.name, cqn)
		}
		if err := r.d.DestroyCQ(h); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCreateCQRules(t *testing.T) {
	r := newVRig(t, "cx6dx")
	ch, err := r.d.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	other := newVRig(t, "cx6dx")
	otherCh, _ := other.d.NewCompChannel()
	closed, _ := r.d.NewCompChannel()
	closed.Close()
	ro := r.mmap(4096)
	if err := unix.Mprotect(ro, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		f     func(c *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, in *[]byte)
		errno unix.Errno
	}{
		{"ok", func(*seam.CQCreate, *mlx5abi.Mlx5IbCreateCq, *[]byte) {}, 0},
		{"unknown flag", func(c *seam.CQCreate, _ *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { c.Flags = 1 << 5 }, unix.EINVAL},
		{"comp vector", func(c *seam.CQCreate, _ *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { c.CompVector = 8 }, unix.EINVAL},
		{"another context's channel", func(c *seam.CQCreate, _ *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { c.Channel = otherCh }, unix.EBADF},
		{"closed channel", func(c *seam.CQCreate, _ *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { c.Channel = closed }, unix.EBADF},
		{"too many CQEs", func(c *seam.CQCreate, _ *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { c.CQE = 1 << 22 }, unix.EINVAL},
		{"negative", func(c *seam.CQCreate, _ *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { c.CQE = 1 << 31 }, unix.EINVAL},
		{"short driver data", func(_ *seam.CQCreate, _ *mlx5abi.Mlx5IbCreateCq, in *[]byte) { *in = (*in)[:21] }, unix.EINVAL},
		{"up to flags", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, in *[]byte) { *in = (*in)[:22] }, unix.EINVAL}, // no UAR_PAGE_INDEX left
		{"unknown driver flag", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { u.Flags |= 1 << 3 }, unix.EINVAL},
		{"cqe size", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { u.CqeSize = 32 }, unix.EINVAL},
		{"reserved", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { u.Reserved1 = 1 }, unix.EINVAL},
		{"unmapped buffer", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { u.BufAddr = 4096 }, unix.EFAULT},
		{"read-only buffer", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { u.BufAddr = addr(ro) }, unix.EFAULT},
		{"unaligned buffer", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { u.BufAddr += 32 }, unix.EINVAL},
		{"unmapped doorbell", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { u.DbAddr = 8 }, unix.EFAULT},
		{"no UAR page index", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { u.Flags = 0 }, unix.EINVAL},
		{"compression", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, _ *[]byte) { u.CqeCompEn = 1 }, unix.EOPNOTSUPP},
		{"128B pad", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, _ *[]byte) {
			u.CqeSize, u.Flags = 128, u.Flags|mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD
		}, unix.EOPNOTSUPP},
		{"128-byte CQEs", func(_ *seam.CQCreate, u *mlx5abi.Mlx5IbCreateCq, _ *[]byte) {
			u.CqeSize, u.BufAddr = 128, addr(r.mmap(64*128))
		}, 0},
	} {
		c, in, _, _ := r.cqCmd(63)
		c.Channel = ch
		var u mlx5abi.Mlx5IbCreateCq
		decodeDrv(in, &u)
		tc.f(&c, &u, &in)
		b := drv(&u)
		if len(in) < len(b) {
			b = b[:len(in)]
		}
		h, _, err := r.d.CreateCQ(c, b, make([]byte, 8))
		if tc.errno == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if err := r.d.DestroyCQ(h); err != nil {
				t.Error(err)
			}
			continue
		}
		if !errors.Is(err, tc.errno) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.errno)
		}
	}
	// A response too short for the CQN: EFAULT, and no CQ is left.
	c, in, _, _ := r.cqCmd(7)
	before := r.d.Objects()
	if _, _, err := r.d.CreateCQ(c, in, make([]byte, 3)); !errors.Is(err, unix.EFAULT) {
		t.Errorf("short response: %v, want EFAULT", err)
	}
	if n := r.d.Objects(); n != before {
		t.Errorf("%d objects after a failed create, want %d", n, before)
	}
}

// qpCmdOf is an oracle QP_CREATE as the seam carries it, with the
// process addresses and the UAR page put in.
func (r *vrig) qpCmdOf(t *testing.T, c oracleCmd, scq, rcq *vcqT) (seam.QPCreate, []byte) {
	var u mlx5abi.Mlx5IbCreateQp
	decodeDrv(c.In["UHW_IN"], &u)
	size := int(u.RqWqeCount)<<u.RqWqeShift + int(u.SqWqeCount)*64
	buf := r.mmap(max(size, 4096))
	dbr := r.mmap(4096)
	in := append([]byte(nil), c.In["UHW_IN"]...)
	binary.NativeEndian.PutUint64(in[0:], addr(buf))
	binary.NativeEndian.PutUint64(in[8:], addr(dbr))
	binary.NativeEndian.PutUint32(in[36:], r.bf.PageID) // bfreg_index: the UAR page (MLX5_QP_FLAG_UAR_PAGE_INDEX)
	cap := c.In["CAP"]
	q := seam.QPCreate{Type: c.In["TYPE"][0], PD: r.pd, SendCQ: scq.h, RecvCQ: rcq.h, SRQ: seam.NoHandle, UserHandle: 7,
		Cap: seam.QPCap{MaxSendWR: binary.NativeEndian.Uint32(cap[0:]), MaxRecvWR: binary.NativeEndian.Uint32(cap[4:]),
			MaxSendSGE: binary.NativeEndian.Uint32(cap[8:]), MaxRecvSGE: binary.NativeEndian.Uint32(cap[12:]),
			MaxInlineData: binary.NativeEndian.Uint32(cap[16:])}}
	return q, in
}

// TestOracleCreateQP creates the QPs libmlx5 asked for: the RC QP with
// signature pipelining, the data-path RC and UD QPs, and the DCIs with
// DCI streams, whose stream sizes each profile's caps accept or refuse.
func TestOracleCreateQP(t *testing.T) {
	type rec struct{ file, name string }
	rc := []rec{{"create_cmds.jsonl", "create_qp_rc_sig_pipelining"}, {"datapath_setup.jsonl", "datapath_setup/create_qp_dp_rc"},
		{"datapath_setup.jsonl", "datapath_setup/create_qp_dp_ud"}}
	dci := []rec{{"dci.jsonl", "dci_streams/log_conc_2_log_err_1"}, {"dci.jsonl", "dci_streams/log_conc_4_log_err_2"},
		{"dci.jsonl", "dci_streams/log_conc_6_log_err_4"}}
	for _, tc := range []struct {
		profile string
		recs    []rec
		errno   []unix.Errno
	}{
		{"cx6dx", append(rc, dci...), []unix.Errno{0, 0, 0, 0, 0, unix.EINVAL}},
		{"cx7", append(rc, dci...), []unix.Errno{0, 0, 0, 0, 0, unix.EINVAL}}, // log_num_errored 4 > 3
		{"cx5", append(rc, dci...), []unix.Errno{0, 0, 0, unix.EINVAL, unix.EINVAL, unix.EINVAL}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			r := newVRig(t, tc.profile)
			cq := r.cq(255, nil)
			for i, rc := range tc.recs {
				c := oracleCmdOf(t, rc.file, rc.name, "QP", "QP_CREATE")
				q, in := r.qpCmdOf(t, c, cq, cq)
				out := make([]byte, len(c.Out["UHW_OUT"]))
				h, got, err := r.d.CreateQP(q, in, out)
				if want := tc.errno[i]; want != 0 {
					if !errors.Is(err, want) {
						t.Errorf("%s: %v, want %v", rc.name, err, want)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", rc.name, err)
				}
				var resp mlx5abi.Mlx5IbCreateQpResp
				decodeDrv(out, &resp)
				wantECE := uint32(eceVersion1)
				if tc.profile == "cx5" {
					wantECE = 0
				}
				if resp.BfregIndex != mlx5IBInvalidBfreg || resp.EceOptions != wantECE {
					t.Errorf("%s: response %+v, want bfreg_index MLX5_IB_INVALID_BFREG and ECE %#x", rc.name, resp, wantECE)
				}
				// The libmlx5 cap recorded: what was asked, no receive caps
				// for a DCI (max_recv_wr 0 anyway).
				if got.Cap != q.Cap {
					t.Errorf("%s: caps %+v, asked %+v", rc.name, got.Cap, q.Cap)
				}
				fw := r.d.h.qps[got.QPN]
				var u mlx5abi.Mlx5IbCreateQp
				decodeDrv(in, &u)
				if fw == nil || uint32(prm.Qpc.UserIndex.Get(fw.qpc)) != u.Uidx || uint32(prm.Qpc.UarPage.Get(fw.qpc)) != r.bf.PageID ||
					fw.sq.entries != int(u.SqWqeCount) {
					t.Errorf("%s: QP %#x not made as asked", rc.name, got.QPN)
				}
				if err := r.d.DestroyQP(h); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestOracleSigPipelining runs what libmlx5 sends for a QP created with
// MLX5DV_QP_CREATE_SIG_PIPELINING: nothing at create (libmlx5 checks the
// context's SQD2RTS bit and keeps the flag), then at RESET to INIT the
// verbs modify and a DEVX INIT2INIT with drain_sigerr on the verbs QP's
// handle. A signature error then drains it (SQ_DRAINED on the async
// event file) and the verbs modify SQD to RTS resumes it.
func TestOracleSigPipelining(t *testing.T) {
	r := newVRig(t, "cx6dx")
	cq := r.cq(255, nil)
	c := oracleCmdOf(t, "create_cmds.jsonl", "create_qp_rc_sig_pipelining", "QP", "QP_CREATE")
	q, in := r.qpCmdOf(t, c, cq, cq)
	q.UserHandle = 0x5151
	h, got, err := r.d.CreateQP(q, in, make([]byte, 40))
	if err != nil {
		t.Fatal(err)
	}
	cmds := oracleCmds(t, "create_cmds.jsonl", "modify_qp_reset_to_init")
	if len(cmds) != 2 || cmds[0].Method != "INVOKE_WRITE" || cmds[1].Method != "DEVX_OBJ_MODIFY" {
		t.Fatalf("modify_qp_reset_to_init: %d commands", len(cmds))
	}
	core := cmds[0].In["CORE_IN"] // struct ib_uverbs_modify_qp
	mask := binary.NativeEndian.Uint32(core[68:])
	a := seam.QPAttr{State: core[96], AccessFlags: binary.NativeEndian.Uint32(core[88:]), PKeyIndex: binary.NativeEndian.Uint16(core[92:]), Port: core[104]}
	if mask != maskState|maskPKey|maskPort|maskAccess || a.State != QPStateInit || a.Port != 1 {
		t.Fatalf("libmlx5's RESET to INIT: mask %#x, %+v", mask, a)
	}
	if err := r.d.ModifyQP(h, &a, mask, nil, nil); err != nil {
		t.Fatal(err)
	}
	devx := append([]byte(nil), cmds[1].In["CMD_IN"]...)
	prm.Init2initQpIn.Qpn.Set(devx, uint64(got.QPN))
	if err := r.d.ObjModify(h, devx, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	query := mbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(query, uint64(got.QPN))
	out := make([]byte, prm.QueryQpOut.Layout().Size)
	if err := r.d.ObjQuery(h, query, out); err != nil {
		t.Fatal(err)
	}
	qpc := prm.QueryQpOut.Qpc
	if prm.Qpc.DrainSigerr.At(qpc).Get(out) != 1 || prm.Qpc.State.At(qpc).Get(out) != StateINIT {
		t.Fatalf("DEVX QUERY_QP on the verbs QP: drain_sigerr %d, state %d", prm.Qpc.DrainSigerr.At(qpc).Get(out), prm.Qpc.State.At(qpc).Get(out))
	}
	// The other side, to RTS.
	peer := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 9})
	v := &vqpT{r: r, h: h, qpn: got.QPN, typ: seam.QPTypeRC}
	v.connectFrom(peer, QPStateInit, 0)
	peer.connect(v, 0)
	if err := r.d.InjectSigErr(got.QPN); err != nil {
		t.Fatal(err)
	}
	if e := nextAsync(t, r.d, mustCome); e != (seam.AsyncEvent{Type: ibEventSQDrained, Element: 0x5151}) {
		t.Fatalf("async event %+v, want SQ_DRAINED of the QP", e)
	}
	attr, err := r.d.QueryQP(h, maskState)
	if err != nil {
		t.Fatal(err)
	}
	if attr.State != QPStateSQD || attr.SQDraining {
		t.Fatalf("after the drain: state %d, draining %v", attr.State, attr.SQDraining)
	}
	// DEVX cannot resume it (SQD_RTS_QP is no DEVX modify command); the
	// verbs modify can.
	sqd := transitionIn(prm.MLX5_CMD_OP_SQD_RTS_QP, got.QPN)
	if err := r.d.ObjModify(h, sqd, make([]byte, 16)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("DEVX SQD_RTS: %v, want EINVAL", err)
	}
	rts := seam.QPAttr{State: QPStateRTS}
	if err := r.d.ModifyQP(h, &rts, maskState, nil, nil); err != nil {
		t.Fatalf("SQD to RTS: %v", err)
	}
	if s, _ := r.d.QPState(got.QPN); s != StateRTS {
		t.Errorf("state %#x after SQD to RTS", s)
	}
	// mlx5_ib has no RTS to SQD.
	sqdA := seam.QPAttr{State: QPStateSQD, EnSQDAsyncNotify: true}
	if err := r.d.ModifyQP(h, &sqdA, maskState|maskEnSQDAsync, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("RTS to SQD: %v, want EINVAL", err)
	}
}

// connectFrom is connect for a QP the kernel already has in state from.
func (q *vqpT) connectFrom(peer *vqpT, from uint8, access uint32) {
	q.r.t.Helper()
	if from == QPStateReset {
		q.connect(peer, access)
		return
	}
	for _, s := range []struct {
		a    seam.QPAttr
		mask uint32
	}{
		{seam.QPAttr{State: QPStateRTR, PathMTU: ibMTU1024, DestQPN: peer.qpn, AH: q.r.roceAH(3), MaxDestRdAtomic: 1, MinRNRTimer: 12},
			maskState | maskAV | maskPathMTU | maskDestQPN | maskRQPSN | maskMaxDestRdAtomic | maskMinRNRTimer},
		{seam.QPAttr{State: QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			maskState | maskSQPSN | maskTimeout | maskRetryCnt | maskRNRRetry | maskMaxQPRdAtomic},
	} {
		a := s.a
		if err := q.r.d.ModifyQP(q.h, &a, s.mask, nil, nil); err != nil {
			q.r.t.Fatalf("QP %#x to %d: %v", q.qpn, a.State, err)
		}
	}
}

// TestOracleModifyIBPath: libmlx5's INIT to RTR in the oracle carries an
// InfiniBand address (a LID, no GRH); on the model's RoCE port the kernel
// refuses it (rdma_check_ah_attr).
func TestOracleModifyIBPath(t *testing.T) {
	r := newVRig(t, "cx6dx")
	cq := r.cq(63, nil)
	a := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC})
	core := oracleCmdOf(t, "create_cmds.jsonl", "modify_qp_init_to_rtr", "DEVICE", "INVOKE_WRITE").In["CORE_IN"]
	mask := binary.NativeEndian.Uint32(core[68:])
	attr := seam.QPAttr{State: core[96], PathMTU: core[98], DestQPN: a.qpn, RQPSN: binary.NativeEndian.Uint32(core[76:]),
		MaxDestRdAtomic: core[102], MinRNRTimer: core[103],
		AH: seam.AHAttr{DLID: binary.NativeEndian.Uint16(core[20:]), IsGlobal: core[30] != 0, Port: core[31]}}
	init := seam.QPAttr{State: QPStateInit, Port: 1, AccessFlags: 7}
	if err := r.d.ModifyQP(a.h, &init, maskState|maskPKey|maskPort|maskAccess, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.d.ModifyQP(a.h, &attr, mask, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("an IB path on RoCE: %v, want EINVAL", err)
	}
}

func TestCreateQPRules(t *testing.T) {
	r := newVRig(t, "cx6dx")
	cq := r.cq(63, nil)
	srq := r.srq(15, 2)
	// CQs made for free-running timestamps (which the profiles' RoCE caps
	// have: qp_ts_format 0) and for real-time ones (which they do not).
	tsCQ := func(realTime bool) *vcqT {
		c, in, buf, dbr := r.cqCmd(7)
		c.Flags = uverbsCQFlagsTimestamp
		if realTime {
			u := mlx5abi.Mlx5IbCreateCq{BufAddr: addr(buf), DbAddr: addr(dbr), CqeSize: 64, UarPageIndex: uint16(r.nc.PageID),
				Flags: mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX | mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS}
			in = drv(&u)
		}
		h, _, err := r.d.CreateCQ(c, in, make([]byte, 8))
		if err != nil {
			t.Fatal(err)
		}
		return &vcqT{r: r, h: h, buf: buf, dbr: dbr}
	}
	frCQ, rtCQ := tsCQ(false), tsCQ(true)
	type fn = func(q *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, in *[]byte)
	for _, tc := range []struct {
		name  string
		o     vqpOpts
		f     fn
		errno unix.Errno
	}{
		{"rc", vqpOpts{typ: seam.QPTypeRC}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, 0},
		{"uc", vqpOpts{typ: seam.QPTypeUC}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, 0},
		{"ud", vqpOpts{typ: seam.QPTypeUD}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, 0},
		{"rc on an srq", vqpOpts{typ: seam.QPTypeRC, srq: srq.h}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, 0},
		{"no receive queue", vqpOpts{typ: seam.QPTypeRC, noRQ: true}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, 0},
		{"no send queue", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { u.SqWqeCount = 0 }, 0},
		{"xrc", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { q.Type = 9 }, unix.EOPNOTSUPP},
		{"qp type", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { q.Type = 1 }, unix.EINVAL},
		{"no send cq", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { q.SendCQ = seam.NoHandle }, unix.ENOENT},
		{"pd is a cq", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { q.PD = cq.h }, unix.EINVAL},
		{"unknown pd", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { q.PD = 999 }, unix.ENOENT},
		{"create flag on rc", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) {
			q.Flags = uverbsQPCreateBlockMcastLoopback
		}, unix.EINVAL},
		{"create flag on ud", vqpOpts{typ: seam.QPTypeUD}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) {
			q.Flags = uverbsQPCreateBlockMcastLoopback
		}, unix.EOPNOTSUPP},
		{"sq sig all flag", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) {
			q.Flags = uverbsQPCreateSQSigAll
		}, 0},
		{"short driver data", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, in *[]byte) { *in = (*in)[:47] }, unix.EINVAL},
		{"old rdma-core without ece", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, in *[]byte) { *in = (*in)[:48] }, 0},
		{"reserved", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, in *[]byte) { (*in)[55] = 1 }, unix.EINVAL},
		{"tail not clear", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, in *[]byte) {
			*in = append(*in, 0, 0, 0, 1)
		}, unix.EINVAL},
		{"driver without dc type", vqpOpts{typ: seam.QPTypeDriver}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, unix.EINVAL},
		{"both dc types", vqpOpts{typ: seam.QPTypeDriver}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) {
			u.Flags |= mlx5abi.MLX5_QP_FLAG_TYPE_DCI | mlx5abi.MLX5_QP_FLAG_TYPE_DCT
		}, unix.EINVAL},
		{"dci with a receive queue", vqpOpts{typ: seam.QPTypeDriver, flags: mlx5abi.MLX5_QP_FLAG_TYPE_DCI}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, unix.EINVAL},
		{"dci", vqpOpts{typ: seam.QPTypeDriver, flags: mlx5abi.MLX5_QP_FLAG_TYPE_DCI, noRQ: true}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, 0},
		{"dct without srq", vqpOpts{typ: seam.QPTypeDriver, flags: mlx5abi.MLX5_QP_FLAG_TYPE_DCT}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, unix.EINVAL},
		{"tunnel offloads", vqpOpts{typ: seam.QPTypeRC, flags: mlx5abi.MLX5_QP_FLAG_TUNNEL_OFFLOADS}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, unix.EINVAL},
		{"packet based credit", vqpOpts{typ: seam.QPTypeRC, flags: mlx5abi.MLX5_QP_FLAG_PACKET_BASED_CREDIT_MODE}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, unix.EINVAL},
		{"scatter cqe dropped", vqpOpts{typ: seam.QPTypeRC, flags: mlx5abi.MLX5_QP_FLAG_SCATTER_CQE | mlx5abi.MLX5_QP_FLAG_ALLOW_SCATTER_CQE}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, 0},
		{"signature", vqpOpts{typ: seam.QPTypeRC, flags: mlx5abi.MLX5_QP_FLAG_SIGNATURE}, func(*seam.QPCreate, *mlx5abi.Mlx5IbCreateQp, *[]byte) {}, 0},
		{"uidx default", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { u.Uidx = 0xffffff }, unix.EINVAL},
		{"uidx wide", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { u.Uidx = 1 << 24 }, unix.EINVAL},
		{"bfreg index", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) {
			u.Flags = u.Flags&^mlx5abi.MLX5_QP_FLAG_UAR_PAGE_INDEX | mlx5abi.MLX5_QP_FLAG_BFREG_INDEX
		}, unix.EINVAL},
		{"no uar flag", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) {
			u.Flags &^= mlx5abi.MLX5_QP_FLAG_UAR_PAGE_INDEX
		}, unix.EINVAL},
		{"both uar flags", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) {
			u.Flags |= mlx5abi.MLX5_QP_FLAG_BFREG_INDEX
		}, unix.EINVAL},
		{"max recv wr", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { q.Cap.MaxRecvWR = 1<<15 + 1 }, unix.EINVAL},
		{"rq shift", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { u.RqWqeShift = 33 }, unix.EINVAL},
		{"rq without cap", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { q.Cap.MaxRecvWR = 0 }, unix.EINVAL},
		{"rq with srq", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { q.SRQ = srq.h }, unix.EINVAL},
		{"sq count", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { u.SqWqeCount = 48 }, unix.EINVAL},
		{"sq too big", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { u.SqWqeCount = 1 << 16 }, unix.EINVAL},
		{"unmapped buffer", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { u.BufAddr = 1 << 12 }, unix.EFAULT},
		{"unaligned buffer", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { u.BufAddr += 16 }, unix.EINVAL},
		{"no buffer", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { u.BufAddr = 0 }, unix.EINVAL},
		{"unmapped doorbell", vqpOpts{typ: seam.QPTypeRC}, func(_ *seam.QPCreate, u *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { u.DbAddr = 16 }, unix.EFAULT},
		{"free-running timestamp cq", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { q.SendCQ = frCQ.h }, 0},
		{"real-time timestamp cq", vqpOpts{typ: seam.QPTypeRC}, func(q *seam.QPCreate, _ *mlx5abi.Mlx5IbCreateQp, _ *[]byte) { q.SendCQ = rtCQ.h }, unix.EOPNOTSUPP},
	} {
		q, u, _, _ := r.qpCmd(cq, cq, tc.o)
		orig := drv(&u)
		in := drv(&u)
		tc.f(&q, &u, &in)
		// The struct's changes go over the bytes' changes.
		for i, b := range drv(&u) {
			if i < len(in) && b != orig[i] {
				in[i] = b
			}
		}
		h, got, err := r.d.CreateQP(q, in, make([]byte, 40))
		if tc.errno != 0 {
			if !errors.Is(err, tc.errno) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.errno)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if tc.name == "no receive queue" || tc.name == "rc on an srq" {
			if got.Cap.MaxRecvWR != 0 || got.Cap.MaxRecvSGE != 0 {
				t.Errorf("%s: receive caps %+v, want none (set_rq_size)", tc.name, got.Cap)
			}
		}
		if err := r.d.DestroyQP(h); err != nil {
			t.Error(err)
		}
	}
}

// TestVerbsLeak runs 10,000 create/destroy cycles of every verbs object
// (the driver data reused: the memory is the kernel's only while the
// object lives) and checks that nothing is left. Under qemu-user it runs
// 100: there every create reads qemu's emulated /proc/self/maps (see
// userMem), some 10 ms a read, and 10,000 cycles took 9 minutes.
func TestVerbsLeak(t *testing.T) {
	cycles := 10000
	if os.Getenv(labenv.QEMUUserVar) == "1" {
		cycles = 100
	}
	r := newVRig(t, "cx7")
	d := r.d
	cq := r.cq(63, nil)
	srq := r.srq(15, 1)
	base := d.Objects()
	cqC, cqIn, _, _ := r.cqCmd(31)
	qpC, qpU, _, _ := r.qpCmd(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
	udC, udU, _, _ := r.qpCmd(cq, cq, vqpOpts{typ: seam.QPTypeUD, uidx: 2})
	dctC, dctU, _, _ := r.qpCmd(cq, cq, vqpOpts{typ: seam.QPTypeDriver, flags: mlx5abi.MLX5_QP_FLAG_TYPE_DCT, uidx: 3, srq: srq.h})
	srqC, srqIn, _, _, _, _ := r.srqCmd(7, 1)
	ah := r.roceAH(3)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	kinds := map[string]func(){
		"cq": func() {
			h, _, err := d.CreateCQ(cqC, cqIn, make([]byte, 8))
			must(err)
			must(d.DestroyCQ(h))
		},
		"rc qp": func() {
			h, _, err := d.CreateQP(qpC, drv(&qpU), nil)
			must(err)
			a := seam.QPAttr{State: QPStateInit, Port: 1}
			must(d.ModifyQP(h, &a, maskState|maskPKey|maskPort|maskAccess, nil, nil))
			must(d.DestroyQP(h))
		},
		"ud qp": func() {
			h, _, err := d.CreateQP(udC, drv(&udU), nil)
			must(err)
			must(d.DestroyQP(h))
		},
		"dct": func() {
			h, _, err := d.CreateQP(dctC, drv(&dctU), nil)
			must(err)
			a := seam.QPAttr{State: QPStateInit, Port: 1}
			must(d.ModifyQP(h, &a, maskState|maskPKey|maskPort|maskAccess, nil, nil))
			b := seam.QPAttr{State: QPStateRTR, PathMTU: ibMTU1024, AH: r.roceAH(3)}
			must(d.ModifyQP(h, &b, maskState|maskAV|maskPathMTU|maskMinRNRTimer, nil, make([]byte, 16)))
			must(d.DestroyQP(h))
		},
		"srq": func() {
			h, _, err := d.CreateSRQ(srqC, srqIn, nil)
			must(err)
			must(d.DestroySRQ(h))
		},
		"ah": func() {
			h, err := d.CreateAH(r.pd, &ah, 1, make([]byte, 16))
			must(err)
			must(d.DestroyAH(h))
		},
		"comp channel": func() {
			ch, err := d.NewCompChannel()
			must(err)
			c := cqC
			c.Channel = ch
			h, _, err := d.CreateCQ(c, cqIn, make([]byte, 8))
			must(err)
			must(ch.Close())
			must(d.DestroyCQ(h))
		},
	}
	for name, cycle := range kinds {
		start := time.Now()
		for range cycles {
			cycle()
		}
		if n := d.Objects(); n != base {
			t.Errorf("%s: %d objects after %d cycles, want %d", name, n, cycles, base)
		}
		t.Logf("%s: %d cycles in %v", name, cycles, time.Since(start))
	}
}

// TestUARMmapOffsets: UAR_OBJ_ALLOC's mmap offsets are the kernel's
// encoding of the context's lowest free mmap entry
// (mlx5_entry_to_mmap_offset).
func TestUARMmapOffsets(t *testing.T) {
	d := newDev(t, "cx6dx")
	var us []seam.UAR
	for range 3 {
		u, err := d.UARAlloc(0)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, u)
	}
	for i, want := range []uint64{0x900000, 0x901000, 0x902000} {
		if us[i].MMapOffset != want {
			t.Errorf("UAR %d: offset %#x, want %#x", i, us[i].MMapOffset, want)
		}
	}
	if err := d.UARFree(us[0].Handle); err != nil {
		t.Fatal(err)
	}
	u, _ := d.UARAlloc(1)
	if u.MMapOffset != 0x900000 {
		t.Errorf("after a free: offset %#x, want the lowest free 0x900000", u.MMapOffset)
	}
	if got := mmapOffset(0x1ab); got != (1<<16|9<<8|0xab)<<12 {
		t.Errorf("entry 0x1ab: %#x", got)
	}
	// Another context numbers its own entries.
	e, _ := d.Open()
	defer e.Close()
	if u, _ := e.UARAlloc(0); u.MMapOffset != 0x900000 {
		t.Errorf("another context: %#x", u.MMapOffset)
	}
}

// TestVerbsMRMkeyUID: a user MR's mkey is the kernel's (uid 0) on a DEVX
// context too; the PD is the context's uid. DEVX commands of the context
// cannot name the mkey; WQEs use its keys.
func TestVerbsMRMkeyUID(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	_, mr := r.mr(4096, accessLocalWrite)
	d.h.mu.Lock()
	pdUID, mkUID := d.h.pds[r.pdn].uid, d.h.mkeys[mr.LKey>>8].uid
	d.h.mu.Unlock()
	if pdUID != d.UID() || mkUID != 0 {
		t.Errorf("PD uid %d, MR mkey uid %d: want %d and 0", pdUID, mkUID, d.UID())
	}
	in := mbox(prm.QueryMkeyIn.Layout(), prm.MLX5_CMD_OP_QUERY_MKEY)
	prm.QueryMkeyIn.MkeyIndex.Set(in, uint64(mr.LKey>>8))
	if st := d.Exec(in, make([]byte, prm.QueryMkeyOut.Layout().Size)); st != prm.MLX5_CMD_STAT_BAD_RES_ERR {
		t.Errorf("QUERY_MKEY of an MR's mkey as the context's uid: %v, want BAD_RES_ERR", st)
	}
}
