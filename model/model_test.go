package model

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// Mailbox builders: the PRM layouts filled with prm's accessors.

func mbox(l *prm.Layout, op uint16) []byte {
	b := l.New()
	prm.MboxIn.Opcode.Set(b, uint64(op))
	return b
}

func newDev(t testing.TB, profile string) *Device {
	t.Helper()
	d, err := New(profile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func mustCreate(t testing.TB, d *Device, in []byte, outLen int) (seam.Handle, []byte) {
	t.Helper()
	out := make([]byte, outLen)
	h, err := d.ObjCreate(in, out)
	if err != nil {
		t.Fatalf("create %s: %v", prm.OpcodeName(uint16(prm.MboxIn.Opcode.Get(in))), err)
	}
	return h, out
}

func allocPDIn() []byte { return mbox(prm.AllocPdIn.Layout(), prm.MLX5_CMD_OP_ALLOC_PD) }

func createPD(t testing.TB, d *Device) (seam.Handle, uint32) {
	h, out := mustCreate(t, d, allocPDIn(), 16)
	return h, uint32(prm.AllocPdOut.Pd.Get(out))
}

func createMkeyIn(pdn uint32, mode uint64) []byte {
	in := mbox(prm.CreateMkeyIn.Layout(), prm.MLX5_CMD_OP_CREATE_MKEY)
	mkc := prm.CreateMkeyIn.MemoryKeyMkeyEntry
	prm.Mkc.AccessMode10.At(mkc).Set(in, mode&3)
	prm.Mkc.AccessMode42.At(mkc).Set(in, mode>>2)
	prm.Mkc.Pd.At(mkc).Set(in, uint64(pdn))
	prm.Mkc.Mkey70.At(mkc).Set(in, 0x5a)
	prm.Mkc.Lr.At(mkc).Set(in, 1)
	prm.Mkc.Qpn.At(mkc).Set(in, 0xffffff)
	prm.Mkc.Len.At(mkc).Set(in, 1<<20)
	return in
}

func createCQIn(eqn uint32) []byte {
	in := mbox(prm.CreateCqIn.Layout(), prm.MLX5_CMD_OP_CREATE_CQ)
	cqc := prm.CreateCqIn.CqContext
	prm.Cqc.LogCqSize.At(cqc).Set(in, 8)
	prm.Cqc.CEqnOrApuElement.At(cqc).Set(in, uint64(eqn))
	prm.Cqc.UarPage.At(cqc).Set(in, firstUAR)
	return in
}

func newCQ(t testing.TB, d *Device) (seam.Handle, uint32) {
	eqn, err := d.QueryEQN(0)
	if err != nil {
		t.Fatal(err)
	}
	h, out := mustCreate(t, d, createCQIn(eqn), 16)
	return h, uint32(prm.CreateCqOut.Cqn.Get(out))
}

func createQPIn(pdn, cqn, umem uint32, st uint64) []byte {
	in := mbox(prm.CreateQpIn.Layout(), prm.MLX5_CMD_OP_CREATE_QP)
	qpc := prm.CreateQpIn.Qpc
	prm.Qpc.St.At(qpc).Set(in, st)
	prm.Qpc.Pd.At(qpc).Set(in, uint64(pdn))
	prm.Qpc.CqnSnd.At(qpc).Set(in, uint64(cqn))
	prm.Qpc.CqnRcv.At(qpc).Set(in, uint64(cqn))
	prm.Qpc.LogSqSize.At(qpc).Set(in, 6)
	prm.Qpc.LogRqSize.At(qpc).Set(in, 6)
	prm.Qpc.DbrUmemId.At(qpc).Set(in, uint64(umem))
	prm.CreateQpIn.WqUmemId.Set(in, uint64(umem))
	return in
}

// qpSetup is a PD, a CQ and a UMEM to create QPs with.
type qpSetup struct {
	pdn, cqn, umem uint32
}

func setupQP(t testing.TB, d *Device) qpSetup {
	_, pdn := createPD(t, d)
	_, cqn := newCQ(t, d)
	// The queues (64 receive WQEs of 16 bytes, 64 WQEBBs) and the doorbell
	// record share the UMEM.
	_, umem, err := d.UMemReg(make([]byte, 8192), accessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	return qpSetup{pdn, cqn, umem}
}

func (s qpSetup) create(t testing.TB, d *Device, st uint64) (seam.Handle, uint32) {
	h, out := mustCreate(t, d, createQPIn(s.pdn, s.cqn, s.umem, st), 16)
	return h, uint32(prm.CreateQpOut.Qpn.Get(out))
}

// transitionIn is a modify QP command for qpn.
func transitionIn(op uint16, qpn uint32) []byte {
	t := transitions[op]
	in := make([]byte, t.minIn)
	prm.MboxIn.Opcode.Set(in, uint64(op))
	t.qpn.Set(in, uint64(qpn))
	return in
}

func TestProfiles(t *testing.T) {
	got := Profiles()
	want := []string{"cx5", "cx6dx", "cx7"}
	if len(got) != len(want) {
		t.Fatalf("Profiles() = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] || Describe(want[i]) == "" {
			t.Fatalf("Profiles() = %v, want %v with descriptions", got, want)
		}
	}
	if _, err := New("cx3"); err == nil {
		t.Fatal("New(cx3) succeeded")
	}
}

func queryCap(t *testing.T, d *Device, capType uint16, cur bool) ([]byte, error) {
	t.Helper()
	in := mbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_HCA_CAP)
	prm.QueryHcaCapIn.OpMod.Set(in, uint64(prm.QueryHCACapOpMod(capType, cur)))
	out := prm.QueryHcaCapOut.Layout().New()
	err := d.GeneralCmd(in, out)
	return prm.QueryHcaCapOut.Capability.Bytes(out), err
}

func TestQueryHCACapProfiles(t *testing.T) {
	gen := prm.CmdHcaCap
	for _, c := range []struct {
		profile                                 string
		drain, block4048, crc64, qpcExt, dciLog uint64
		hasCap2                                 bool
	}{
		{"cx5", 0, 0, 0, 0, 0, false},
		{"cx6dx", 1, 1, 1, 1, 4, true},
		{"cx7", 1, 1, 1, 1, 6, true},
	} {
		t.Run(c.profile, func(t *testing.T) {
			d := newDev(t, c.profile)
			for _, cur := range []bool{false, true} {
				caps, err := queryCap(t, d, prm.MLX5_CAP_GENERAL, cur)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range []struct {
					f    prm.Field
					want uint64
				}{
					{gen.DrainSigerr, c.drain}, {gen.SigBlock4048, c.block4048}, {gen.SigCrc64Xp10, c.crc64},
					{gen.QpcExtension, c.qpcExt}, {gen.LogMaxDciStreamChannels, c.dciLog},
					{gen.LogMaxQp, 18}, {gen.LogMaxMkey, 24}, {gen.SigCrc32c, 1}, {gen.CqeVersion, 1},
				} {
					if got := f.f.Get(caps); got != f.want {
						t.Errorf("cur=%v %s = %d, want %d", cur, f.f.Name, got, f.want)
					}
				}
			}
			for _, ct := range []uint16{prm.MLX5_CAP_ODP, prm.MLX5_CAP_ROCE, prm.MLX5_CAP_ATOMIC} {
				if _, err := queryCap(t, d, ct, false); err != nil {
					t.Errorf("cap type %#x: %v", ct, err)
				}
			}
			_, err := queryCap(t, d, prm.MLX5_CAP_GENERAL_2, false)
			if c.hasCap2 != (err == nil) {
				t.Errorf("GENERAL_2: %v, want it answered: %v", err, c.hasCap2)
			}
			if !c.hasCap2 && !errors.Is(err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR) {
				t.Errorf("GENERAL_2 on %s: %v, want BAD_PARAM_ERR", c.profile, err)
			}
		})
	}
}

func TestGeneralCmdErrors(t *testing.T) {
	d := newDev(t, "cx6dx")
	// An op_mod the firmware does not know: the debug caps.
	_, err := queryCap(t, d, prm.MLX5_CAP_DEBUG, false)
	var fe *FirmwareError
	if !errors.As(err, &fe) || fe.Cmd.Status != prm.MLX5_CMD_STAT_BAD_PARAM_ERR || fe.Cmd.Syndrome != SyndromeBadOpMod {
		t.Errorf("debug caps: %v, want BAD_PARAM_ERR with SyndromeBadOpMod", err)
	}
	// The flow table and device memory pages: answered, every
	// capability 0 (the model has neither).
	for _, c := range []uint16{prm.MLX5_CAP_FLOW_TABLE, prm.MLX5_CAP_DEV_MEM} {
		for _, cur := range []bool{false, true} {
			pg, err := queryCap(t, d, c, cur)
			if err != nil {
				t.Errorf("caps page %#x (cur %v): %v", c, cur, err)
			} else if !zero(pg) {
				t.Errorf("caps page %#x (cur %v): not all 0", c, cur)
			}
		}
	}
	// A general command the kernel allows but the model does not implement.
	in := mbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_VPORT_STATE)
	out := make([]byte, 64)
	err = d.GeneralCmd(in, out)
	if !errors.Is(err, prm.MLX5_CMD_STAT_BAD_OP_ERR) || !errors.Is(err, unix.EREMOTEIO) {
		t.Errorf("QUERY_VPORT_STATE: %v, want BAD_OP_ERR", err)
	}
	if prm.Status(prm.MboxOut.Status.Get(out)) != prm.MLX5_CMD_STAT_BAD_OP_ERR || prm.MboxOut.Syndrome.Get(out) != uint64(SyndromeBadOpcode) {
		t.Errorf("output mailbox %x does not carry BAD_OP_ERR and its syndrome", out[:8])
	}
	// Output shorter than the answer: the firmware's BAD_OUTP_LEN_ERR.
	in = mbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_HCA_CAP)
	if err := d.GeneralCmd(in, make([]byte, 272)); !errors.Is(err, prm.MLX5_CMD_STAT_BAD_OUTP_LEN_ERR) {
		t.Errorf("short output: %v, want BAD_OUTP_LEN_ERR", err)
	}
	// Input shorter than the command: BAD_INP_LEN_ERR.
	mk := createMkeyIn(0, accessModeMTT)[:80]
	if err := d.Exec(mk, make([]byte, 16)); err != prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR {
		t.Errorf("short CREATE_MKEY: %v, want BAD_INP_LEN_ERR", err)
	}
	// Mailboxes shorter than the header: the kernel's EINVAL.
	if err := d.GeneralCmd(in[:8], out); !errors.Is(err, unix.EINVAL) {
		t.Errorf("8-byte input: %v, want EINVAL", err)
	}
	if err := d.GeneralCmd(in, out[:12]); !errors.Is(err, unix.EINVAL) {
		t.Errorf("12-byte output: %v, want EINVAL", err)
	}
	// Not a general command: the kernel's devx_is_general_cmd.
	if err := d.GeneralCmd(allocPDIn(), out); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ALLOC_PD as general cmd: %v, want EINVAL", err)
	}
	// The input is the caller's: the kernel writes the uid into its copy.
	if prm.MboxIn.Uid.Get(in) != 0 {
		t.Error("GeneralCmd wrote into the caller's input")
	}
}

func TestAdapterAndISSI(t *testing.T) {
	d := newDev(t, "cx7")
	out := prm.QueryAdapterOut.Layout().New()
	if err := d.GeneralCmd(mbox(prm.QueryAdapterIn.Layout(), prm.MLX5_CMD_OP_QUERY_ADAPTER), out); err != nil {
		t.Fatal(err)
	}
	blk := prm.QueryAdapterOut.QueryAdapterStruct
	if v := prm.QueryAdapterParamBlock.VsdVendorId.At(blk).Get(out); v != 0x15b3 {
		t.Errorf("vsd_vendor_id %#x", v)
	}
	if p := string(prm.QueryAdapterParamBlock.VsdContdPsid.At(blk).Bytes(out)[:9]); p != "MODEL_CX7" {
		t.Errorf("psid %q", p)
	}
	out = prm.QueryIssiOut.Layout().New()
	if err := d.GeneralCmd(mbox(prm.QueryIssiIn.Layout(), prm.MLX5_CMD_OP_QUERY_ISSI), out); err != nil {
		t.Fatal(err)
	}
	if prm.QueryIssiOut.CurrentIssi.Get(out) != 1 || prm.QueryIssiOut.SupportedIssiDw0.Get(out) != 3 {
		t.Errorf("ISSI answer %x", out)
	}
	in := mbox(prm.QueryIssiIn.Layout(), prm.MLX5_CMD_OP_QUERY_ISSI)
	prm.QueryIssiIn.OpMod.Set(in, 1)
	if err := d.GeneralCmd(in, out); !errors.Is(err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR) {
		t.Errorf("QUERY_ISSI op_mod 1: %v, want BAD_PARAM_ERR", err)
	}
}

// qpInState creates a QP and drives it to state s through the firmware.
// SQ_DRAINING needs a context with Options.ManualDrain.
func qpInState(t *testing.T, d *Device, s qpSetup, state uint8) uint32 {
	t.Helper()
	_, qpn := s.create(t, d, stRC)
	driveQP(t, d, qpn, state)
	return qpn
}

// driveQP drives QP qpn from RST to state s; to SQD and SQ_DRAINING by a
// signature error with drain_sigerr.
func driveQP(t *testing.T, d *Device, qpn uint32, state uint8) {
	t.Helper()
	toRTS := []uint16{prm.MLX5_CMD_OP_RST2INIT_QP, prm.MLX5_CMD_OP_INIT2RTR_QP, prm.MLX5_CMD_OP_RTR2RTS_QP}
	path := map[uint8][]uint16{
		StateRST:        nil,
		StateINIT:       toRTS[:1],
		StateRTR:        toRTS[:2],
		StateRTS:        toRTS,
		StateSQER:       toRTS,
		StateSQD:        toRTS,
		StateSQDraining: toRTS,
		StateERR:        {prm.MLX5_CMD_OP_2ERR_QP},
	}[state]
	for i, op := range path {
		in := transitionIn(op, qpn)
		if i == 0 && (state == StateSQD || state == StateSQDraining) {
			prm.Qpc.DrainSigerr.At(transitions[op].qpc).Set(in, 1)
		}
		if st := d.Exec(in, make([]byte, 16)); st != prm.MLX5_CMD_STAT_OK {
			t.Fatalf("%s: %v", prm.OpcodeName(op), st)
		}
	}
	switch state {
	case StateSQER:
		if err := d.InjectSendError(qpn); err != nil {
			t.Fatal(err)
		}
	case StateSQD, StateSQDraining:
		if err := d.InjectSigErr(qpn); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := d.QPState(qpn); state == StateSQD && got == StateSQDraining {
		if err := d.FinishDrain(qpn); err != nil { // Options.ManualDrain
			t.Fatal(err)
		}
	}
	if got, _ := d.QPState(qpn); got != state {
		t.Fatalf("QP in state %#x, want %#x", got, state)
	}
}

// TestQPStateMachine runs every transition from every state: the PRM's
// table of legal transitions, BAD_RES_STATE_ERR for the others. SQD_RTS
// leaves SQD, not SQ_DRAINING.
func TestQPStateMachine(t *testing.T) {
	d, err := NewWithOptions("cx6dx", Options{ManualDrain: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s := setupQP(t, d)
	states := []uint8{StateRST, StateINIT, StateRTR, StateRTS, StateSQER, StateSQD, StateERR, StateSQDraining}
	legal := map[uint16]map[uint8]uint8{ // opcode -> from -> to
		prm.MLX5_CMD_OP_RST2INIT_QP:  {StateRST: StateINIT},
		prm.MLX5_CMD_OP_INIT2INIT_QP: {StateINIT: StateINIT},
		prm.MLX5_CMD_OP_INIT2RTR_QP:  {StateINIT: StateRTR},
		prm.MLX5_CMD_OP_RTR2RTS_QP:   {StateRTR: StateRTS},
		prm.MLX5_CMD_OP_RTS2RTS_QP:   {StateRTS: StateRTS},
		prm.MLX5_CMD_OP_SQERR2RTS_QP: {StateSQER: StateRTS},
		prm.MLX5_CMD_OP_SQD_RTS_QP:   {StateSQD: StateRTS},
		prm.MLX5_CMD_OP_2ERR_QP:      {},
		prm.MLX5_CMD_OP_2RST_QP:      {},
	}
	for _, from := range states {
		legal[prm.MLX5_CMD_OP_2ERR_QP][from] = StateERR
		legal[prm.MLX5_CMD_OP_2RST_QP][from] = StateRST
	}
	for op, table := range legal {
		for _, from := range states {
			qpn := qpInState(t, d, s, from)
			out := make([]byte, 16)
			st := d.Exec(transitionIn(op, qpn), out)
			to, ok := table[from]
			got, _ := d.QPState(qpn)
			switch {
			case ok && (st != prm.MLX5_CMD_STAT_OK || got != to):
				t.Errorf("%s from %#x: %v, state %#x; want OK and %#x", prm.OpcodeName(op), from, st, got, to)
			case !ok && (st != prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR || got != from ||
				prm.MboxOut.Syndrome.Get(out) != uint64(SyndromeQPState)):
				t.Errorf("%s from %#x: %v, state %#x; want BAD_RES_STATE_ERR and %#x", prm.OpcodeName(op), from, st, got, from)
			}
		}
	}
}

func TestDrainSigerr(t *testing.T) {
	for _, c := range []struct {
		profile string
		want    prm.Status
	}{{"cx5", prm.MLX5_CMD_STAT_BAD_PARAM_ERR}, {"cx6dx", prm.MLX5_CMD_STAT_OK}, {"cx7", prm.MLX5_CMD_STAT_OK}} {
		d := newDev(t, c.profile)
		s := setupQP(t, d)
		_, qpn := s.create(t, d, stRC)
		for _, op := range []uint16{prm.MLX5_CMD_OP_RST2INIT_QP, prm.MLX5_CMD_OP_INIT2INIT_QP} {
			in := transitionIn(op, qpn)
			prm.Qpc.DrainSigerr.At(transitions[op].qpc).Set(in, 1)
			if st := d.Exec(in, make([]byte, 16)); st != c.want && !(op == prm.MLX5_CMD_OP_INIT2INIT_QP && c.want != prm.MLX5_CMD_STAT_OK) {
				t.Errorf("%s %s with drain_sigerr: %v, want %v", c.profile, prm.OpcodeName(op), st, c.want)
			}
		}
		if c.want != prm.MLX5_CMD_STAT_OK {
			continue
		}
		out := prm.QueryQpOut.Layout().New()
		if st := d.Exec(transitionInQuery(qpn), out); st != prm.MLX5_CMD_STAT_OK {
			t.Fatal(st)
		}
		if prm.Qpc.DrainSigerr.At(prm.QueryQpOut.Qpc).Get(out) != 1 {
			t.Errorf("%s: drain_sigerr not stored", c.profile)
		}
		if prm.Qpc.Pd.At(prm.QueryQpOut.Qpc).Get(out) != uint64(s.pdn) {
			t.Errorf("%s: the transition's QP context overwrote pd", c.profile)
		}
	}
}

func transitionInQuery(qpn uint32) []byte {
	in := mbox(prm.QueryQpIn.Layout(), prm.MLX5_CMD_OP_QUERY_QP)
	prm.QueryQpIn.Qpn.Set(in, uint64(qpn))
	return in
}

func TestDCIStreamsAndQPCExt(t *testing.T) {
	for _, c := range []struct {
		profile string
		log     uint64
		want    prm.Status
	}{{"cx5", 1, prm.MLX5_CMD_STAT_BAD_PARAM_ERR}, {"cx6dx", 4, prm.MLX5_CMD_STAT_OK}, {"cx6dx", 5, prm.MLX5_CMD_STAT_BAD_PARAM_ERR}, {"cx7", 6, prm.MLX5_CMD_STAT_OK}} {
		d := newDev(t, c.profile)
		s := setupQP(t, d)
		in := createQPIn(s.pdn, s.cqn, s.umem, stDCI)
		prm.Qpc.LogNumDciStreamChannels.At(prm.CreateQpIn.Qpc).Set(in, c.log)
		out := make([]byte, 16)
		if st := d.Exec(in, out); st != c.want {
			t.Errorf("%s DCI with 2^%d stream channels: %v, want %v", c.profile, c.log, st, c.want)
		}
		if c.want != prm.MLX5_CMD_STAT_OK {
			continue
		}
		qpn := uint32(prm.CreateQpOut.Qpn.Get(out))
		for _, op := range []uint16{prm.MLX5_CMD_OP_RST2INIT_QP, prm.MLX5_CMD_OP_INIT2RTR_QP, prm.MLX5_CMD_OP_RTR2RTS_QP} {
			if st := d.Exec(transitionIn(op, qpn), make([]byte, 16)); st != prm.MLX5_CMD_STAT_OK {
				t.Fatal(st)
			}
		}
		// RTS2RTS with qpc_ext: the full 464 bytes; without the stream
		// channel's optional parameter the id is not applied.
		in = make([]byte, prm.Rts2rtsQpIn.Layout().Size)
		prm.MboxIn.Opcode.Set(in, prm.MLX5_CMD_OP_RTS2RTS_QP)
		prm.Rts2rtsQpIn.Qpn.Set(in, uint64(qpn))
		prm.Rts2rtsQpIn.QpcExt.Set(in, 1)
		prm.QpcExt.DciStreamChannelId.At(prm.Rts2rtsQpIn.QpcDataExt).Set(in, 3)
		if st := d.Exec(in, make([]byte, 16)); st != prm.MLX5_CMD_STAT_OK {
			t.Errorf("%s RTS2RTS with qpc_ext: %v", c.profile, st)
		}
		if st := d.Exec(in[:272], make([]byte, 16)); st != prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR {
			t.Errorf("%s RTS2RTS with qpc_ext in 272 bytes: %v, want BAD_INP_LEN_ERR", c.profile, st)
		}
		prm.QpcExt.DciStreamChannelId.At(prm.Rts2rtsQpIn.QpcDataExt).Set(in, 1<<c.log)
		if st := d.Exec(in, make([]byte, 16)); st != prm.MLX5_CMD_STAT_OK {
			t.Errorf("%s RTS2RTS with channel id %d, not applied: %v", c.profile, 1<<c.log, st)
		}
		// With it (mlx5dv_dci_stream_id_reset), a channel not in error is
		// refused (dc_test.go has the resets of channels in error).
		prm.Rts2rtsQpIn.OptParamMask9532.Set(in, optMask32DCIStreamChannelID)
		if st := d.Exec(in, make([]byte, 16)); st != prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR {
			t.Errorf("%s RTS2RTS resetting channel id %d, not in error: %v, want BAD_RES_STATE_ERR", c.profile, 1<<c.log, st)
		}
	}
}

// TestKernelRules checks the DEVX rules of devx.c, each an errno.
func TestKernelRules(t *testing.T) {
	d := newDev(t, "cx6dx")
	s := setupQP(t, d)
	qpH, qpn := s.create(t, d, stRC)
	pdH, _ := createPD(t, d)
	out := make([]byte, 272)

	psv := mbox(prm.CreatePsvIn.Layout(), prm.MLX5_CMD_OP_CREATE_PSV)
	prm.CreatePsvIn.NumPsv.Set(psv, 2)
	prm.CreatePsvIn.Pd.Set(psv, uint64(s.pdn))
	tunnel := allocPDIn()
	prm.GeneralObjInCmdHdr.VhcaTunnelId.Set(tunnel, 1)
	sqd := transitionIn(prm.MLX5_CMD_OP_SQD_RTS_QP, qpn)
	query := transitionInQuery(qpn)
	otherQP := transitionInQuery(qpn + 1)

	cases := []struct {
		name  string
		call  func() error
		errno unix.Errno
	}{
		{"create with a query opcode", func() error { _, err := d.ObjCreate(query, out); return err }, unix.EINVAL},
		{"create PSV with num_psv 2", func() error { _, err := d.ObjCreate(psv, out); return err }, unix.EINVAL},
		{"create with vhca_tunnel_id", func() error { _, err := d.ObjCreate(tunnel, out); return err }, unix.EINVAL},
		{"create mkey of 64 bytes", func() error {
			_, err := d.ObjCreate(createMkeyIn(s.pdn, accessModeMTT)[:64], out)
			return err
		}, unix.EINVAL},
		{"query with a modify opcode", func() error { return d.ObjQuery(qpH, transitionIn(prm.MLX5_CMD_OP_2ERR_QP, qpn), out) }, unix.EINVAL},
		{"modify with a query opcode", func() error { return d.ObjModify(qpH, query, out) }, unix.EINVAL},
		{"SQD2RTS through DEVX", func() error { return d.ObjModify(qpH, sqd, out) }, unix.EINVAL},
		{"query naming another QP", func() error { return d.ObjQuery(qpH, otherQP, out) }, unix.EINVAL},
		{"query a PD", func() error { return d.ObjQuery(pdH, query, out) }, unix.EINVAL},
		{"query an unknown handle", func() error { return d.ObjQuery(9999, query, out) }, unix.ENOENT},
		{"destroy an unknown handle", func() error { return d.ObjDestroy(9999) }, unix.ENOENT},
		{"short input", func() error { return d.ObjQuery(qpH, query[:15], out) }, unix.EINVAL},
		{"UMEM with remote write only", func() error { _, _, err := d.UMemReg(make([]byte, 64), accessRemoteWrite); return err }, unix.EINVAL},
		{"UMEM with an unknown access bit", func() error { _, _, err := d.UMemReg(make([]byte, 64), 1<<5); return err }, unix.EINVAL},
		{"UAR of type 2", func() error { _, err := d.UARAlloc(2); return err }, unix.EOPNOTSUPP},
		{"EQN of vector 8", func() error { _, err := d.QueryEQN(8); return err }, unix.ENOENT},
		{"map a UAR never allocated", func() error { _, err := d.MapUAR(seam.UAR{Handle: 1, MMapLength: 4096}); return err }, unix.EINVAL},
	}
	for _, c := range cases {
		err := c.call()
		var ke *KernelError
		if !errors.Is(err, c.errno) || !errors.As(err, &ke) {
			t.Errorf("%s: %v, want a KernelError with %v", c.name, err, c.errno)
		}
	}
	if got, _ := d.QPState(qpn); got != StateRST {
		t.Errorf("a refused command changed the QP: state %#x", got)
	}
	// The firmware itself runs SQD2RTS: only the kernel's DEVX path refuses it.
	if st := d.Exec(sqd, make([]byte, 16)); st != prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR {
		t.Errorf("firmware SQD2RTS from RST: %v, want BAD_RES_STATE_ERR", st)
	}
}

// TestUID checks that contexts on one HCA get their own uids and that the
// firmware refuses objects of another uid.
func TestUID(t *testing.T) {
	a := newDev(t, "cx7")
	b, err := a.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.UID() == 0 || b.UID() == 0 || a.UID() == b.UID() {
		t.Fatalf("uids %d and %d", a.UID(), b.UID())
	}
	_, pdn := createPD(t, a)
	// b names a's PD in an mkey: the firmware's uid check.
	in := createMkeyIn(pdn, accessModeMTT)
	prm.MboxIn.Uid.Set(in, uint64(a.UID())) // the kernel overwrites it
	out := make([]byte, 16)
	_, err = b.ObjCreate(in, out)
	var fe *FirmwareError
	if !errors.As(err, &fe) || fe.Cmd.Status != prm.MLX5_CMD_STAT_BAD_RES_ERR || fe.Cmd.Syndrome != SyndromeWrongUID {
		t.Errorf("mkey on another context's PD: %v, want BAD_RES_ERR with SyndromeWrongUID", err)
	}
	if _, err := a.ObjCreate(in, out); err != nil {
		t.Errorf("mkey on own PD: %v", err)
	}
	// b's handles are not a's.
	h, _ := createPD(t, b)
	if err := a.ObjDestroy(h + 100); !errors.Is(err, unix.ENOENT) {
		t.Errorf("destroy of a foreign handle: %v, want ENOENT", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ObjCreate(allocPDIn(), out); !errors.Is(err, unix.EBADF) {
		t.Errorf("create on a closed context: %v, want EBADF", err)
	}
}

func TestStatusErrno(t *testing.T) {
	d, err := NewWithOptions("cx5", Options{StatusErrno: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out := make([]byte, 64)
	for i := range out {
		out[i] = 0xee
	}
	err = d.GeneralCmd(mbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_VPORT_STATE), out)
	if !errors.Is(err, unix.EINVAL) || errors.Is(err, prm.MLX5_CMD_STAT_BAD_OP_ERR) {
		t.Errorf("BAD_OP_ERR as Linux 6.1 returns it: %v, want EINVAL alone", err)
	}
	if out[0] != 0xee {
		t.Error("the output mailbox was copied back")
	}
	_, pdn := createPD(t, d)
	// LIM_ERR is ENOMEM; here BAD_RES_ERR (no such PD) is EINVAL.
	if _, err := d.ObjCreate(createMkeyIn(pdn+1, accessModeMTT), out); !errors.Is(err, unix.EINVAL) {
		t.Errorf("mkey on no PD: %v, want EINVAL", err)
	}
}

func TestDependencies(t *testing.T) {
	d := newDev(t, "cx6dx")
	s := setupQP(t, d)
	qpH, _ := s.create(t, d, stRC)
	pdHandle := seam.Handle(1) // setupQP's PD is the first handle
	if err := d.ObjDestroy(pdHandle); !errors.Is(err, prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR) {
		t.Errorf("destroy of a PD a QP uses: %v, want BAD_RES_STATE_ERR", err)
	}
	if err := d.ObjDestroy(qpH); err != nil {
		t.Fatal(err)
	}
	if err := d.ObjDestroy(pdHandle); err != nil {
		t.Errorf("destroy of the PD after its QP: %v", err)
	}
}

// TestCloseReleasesEverything leaves objects of every kind and closes.
func TestCloseReleasesEverything(t *testing.T) {
	d, err := New("cx7")
	if err != nil {
		t.Fatal(err)
	}
	s := setupQP(t, d)
	qpH, _ := s.create(t, d, stRC)
	mustCreate(t, d, createMkeyIn(s.pdn, accessModeKLMS), 16)
	psv := mbox(prm.CreatePsvIn.Layout(), prm.MLX5_CMD_OP_CREATE_PSV)
	prm.CreatePsvIn.NumPsv.Set(psv, 1)
	prm.CreatePsvIn.Pd.Set(psv, uint64(s.pdn))
	mustCreate(t, d, psv, 32)
	u, err := d.UARAlloc(0)
	if err != nil {
		t.Fatal(err)
	}
	page, err := d.MapUAR(u)
	if err != nil {
		t.Fatal(err)
	}
	page[0] = 1 // writable
	if _, err := d.NewAsyncCmdFD(); err != nil {
		t.Fatal(err)
	}
	ch, err := d.NewEventChannel(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Subscribe(ch, qpH, []uint16{evSQDrained}, 1); err != nil {
		t.Fatal(err)
	}
	if n := d.Objects(); n < 11 {
		t.Fatalf("Objects() = %d before Close", n)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.UnmapUAR(page); err != nil {
		t.Fatal(err)
	}
	if n := d.Objects(); n != 0 || len(d.h.subs) != 0 {
		t.Errorf("Objects() = %d, %d subscription keys after Close", n, len(d.h.subs))
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCloseAfterExec closes contexts that hold firmware objects Exec
// created, which no handle owns, on top of objects that handles own: Close
// must release them all without touching what it already released (it
// panicked when a UMEM or verbs PD handle was dropped before an Exec QP
// that used it; FuzzCommands found it).
func TestCloseAfterExec(t *testing.T) {
	for _, c := range []struct {
		name string
		pd   func(t *testing.T, d *Device) uint32 // the QP's PD
	}{
		{"DEVX PD", func(t *testing.T, d *Device) uint32 { _, pdn := createPD(t, d); return pdn }},
		{"verbs PD", func(t *testing.T, d *Device) uint32 {
			_, pdn, err := d.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			return pdn
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := New("cx7")
			if err != nil {
				t.Fatal(err)
			}
			pdn := c.pd(t, d)
			_, cqn := newCQ(t, d)
			_, umem, err := d.UMemReg(make([]byte, 8192), accessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			// The QP's queues in the UMEM: Exec does not set the umem_valid
			// bits the kernel sets.
			qp := createQPIn(pdn, cqn, umem, stRC)
			setUmemValid(qp)
			for _, in := range [][]byte{qp, createMkeyIn(pdn, accessModeKLMS), createCQIn(7)} {
				if st := d.Exec(in, make([]byte, 16)); st != prm.MLX5_CMD_STAT_OK {
					t.Fatalf("Exec %s: %v", prm.OpcodeName(uint16(prm.MboxIn.Opcode.Get(in))), st)
				}
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if n := d.Objects(); n != 0 {
				t.Errorf("Objects() = %d after Close", n)
			}
		})
	}
}

func TestAsyncQuery(t *testing.T) {
	d := newDev(t, "cx6dx")
	cqH, cqn := newCQ(t, d)
	fd, err := d.NewAsyncCmdFD()
	if err != nil {
		t.Fatal(err)
	}
	in := mbox(prm.QueryCqIn.Layout(), prm.MLX5_CMD_OP_QUERY_CQ)
	prm.QueryCqIn.Cqn.Set(in, uint64(cqn))
	outLen := int(prm.QueryCqOut.Layout().Size)
	for i := range 3 {
		if err := d.ObjQueryAsync(cqH, in, outLen, uint64(100+i), fd); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.ObjQueryAsync(cqH, in, outLen, 0, &asyncFD{}); !errors.Is(err, unix.EBADF) {
		t.Errorf("foreign FD: %v, want EBADF", err)
	}
	ctx := context.Background()
	if _, err := fd.Next(ctx, make([]byte, 8+outLen-1)); !errors.Is(err, unix.ENOSPC) {
		t.Errorf("short buffer: %v, want ENOSPC", err)
	}
	buf := make([]byte, 8+outLen)
	for i := range 3 {
		n, err := fd.Next(ctx, buf)
		if err != nil || n != len(buf) {
			t.Fatalf("Next: %d, %v", n, err)
		}
		if id := binary.NativeEndian.Uint64(buf); id != uint64(100+i) {
			t.Errorf("wr_id %d, want %d", id, 100+i)
		}
		out := buf[8:]
		if prm.MboxOut.Status.Get(out) != 0 || prm.Cqc.LogCqSize.At(prm.QueryCqOut.CqContext).Get(out) != 8 {
			t.Errorf("completion %d: %x", i, out[:32])
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := fd.Next(cctx, buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next on an empty FD: %v, want DeadlineExceeded", err)
	}
	// 1 MiB outstanding: the kernel's EAGAIN.
	var err2 error
	for i := 0; err2 == nil && i < 1<<20; i++ {
		err2 = d.ObjQueryAsync(cqH, in, 0xffff, 0, fd)
	}
	if !errors.Is(err2, unix.EAGAIN) {
		t.Errorf("past 1 MiB: %v, want EAGAIN", err2)
	}
	// A waiter wakes with EIO when the context closes.
	fd2, _ := d.NewAsyncCmdFD()
	done := make(chan error)
	go func() { _, err := fd2.Next(ctx, buf); done <- err }()
	time.Sleep(10 * time.Millisecond)
	d.Close()
	select {
	case err := <-done:
		if !errors.Is(err, unix.EIO) {
			t.Errorf("Next across Close: %v, want EIO", err)
		}
	case <-time.After(mustCome):
		t.Fatal("Next did not wake on Close")
	}
	if err := fd.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fd.Next(ctx, buf); !errors.Is(err, unix.EBADF) {
		t.Errorf("Next after Close: %v, want EBADF", err)
	}
}

// TestLeak runs 10,000 create/destroy cycles of every object type and
// checks that the tables are empty after.
func TestLeak(t *testing.T) {
	const cycles = 10000
	d := newDev(t, "cx6dx")
	s := setupQP(t, d)
	base := d.Objects()
	psv := mbox(prm.CreatePsvIn.Layout(), prm.MLX5_CMD_OP_CREATE_PSV)
	prm.CreatePsvIn.NumPsv.Set(psv, 1)
	prm.CreatePsvIn.Pd.Set(psv, uint64(s.pdn))
	eqn, _ := d.QueryEQN(0)
	kinds := map[string]func(){
		"pd":   func() { h, _ := mustCreate(t, d, allocPDIn(), 16); destroy(t, d, h) },
		"mkey": func() { h, _ := mustCreate(t, d, createMkeyIn(s.pdn, accessModeMTT), 16); destroy(t, d, h) },
		"psv":  func() { h, _ := mustCreate(t, d, psv, 32); destroy(t, d, h) },
		"cq":   func() { h, _ := mustCreate(t, d, createCQIn(eqn), 16); destroy(t, d, h) },
		"qp":   func() { h, _ := s.create(t, d, stRC); destroy(t, d, h) },
		"umem": func() {
			h, _, err := d.UMemReg(make([]byte, 64), accessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.UMemDereg(h); err != nil {
				t.Fatal(err)
			}
		},
		"event channel": func() {
			ch, err := d.NewEventChannel(false)
			if err != nil {
				t.Fatal(err)
			}
			h, _ := mustCreate(t, d, createCQIn(eqn), 16)
			if err := d.Subscribe(ch, h, []uint16{evCQError, evComp}, 1); err != nil {
				t.Fatal(err)
			}
			destroy(t, d, h)
			if err := d.Subscribe(ch, h, []uint16{evCQError}, 1); !errors.Is(err, unix.ENOENT) {
				t.Fatalf("subscribe to a destroyed object: %v", err)
			}
			if err := ch.Close(); err != nil {
				t.Fatal(err)
			}
		},
		"uar": func() {
			u, err := d.UARAlloc(1)
			if err != nil {
				t.Fatal(err)
			}
			p, err := d.MapUAR(u)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.UnmapUAR(p); err != nil {
				t.Fatal(err)
			}
			if err := d.UARFree(u.Handle); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, cycle := range kinds {
		start := time.Now()
		for range cycles {
			cycle()
		}
		if n := d.Objects(); n != base || len(d.h.subs) != 0 {
			t.Errorf("%s: %d objects and %d subscription keys after %d cycles, want %d and 0", name, n, len(d.h.subs), cycles, base)
		}
		t.Logf("%s: %d cycles in %v", name, cycles, time.Since(start))
	}
	d.Close()
	if n := d.Objects(); n != 0 {
		t.Errorf("%d objects after Close", n)
	}
}

func destroy(t testing.TB, d *Device, h seam.Handle) {
	t.Helper()
	if err := d.ObjDestroy(h); err != nil {
		t.Fatal(err)
	}
}

// FuzzCommands feeds random mailboxes to every DEVX entry point and to the
// firmware directly: nothing may panic, and a closed context holds
// nothing.
func FuzzCommands(f *testing.F) {
	for _, in := range [][]byte{
		allocPDIn(), createMkeyIn(firstPDN, accessModeMTT), createCQIn(7), createQPIn(firstPDN, firstCQN, 1, stRC),
		transitionIn(prm.MLX5_CMD_OP_RTS2RTS_QP, firstQPN), mbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_HCA_CAP),
	} {
		f.Add(in, uint16(len(in)), uint16(4112))
	}
	f.Fuzz(func(t *testing.T, in []byte, inLen, outLen uint16) {
		d, err := New("cx7")
		if err != nil {
			t.Fatal(err)
		}
		if int(inLen) < len(in) {
			in = in[:inLen]
		}
		out := make([]byte, int(outLen)%8192)
		// A PD, CQ and UMEM exist so that creates can reach deep.
		d.ObjCreate(allocPDIn(), make([]byte, 16))
		d.ObjCreate(createCQIn(7), make([]byte, 16))
		d.UMemReg(make([]byte, 64), accessLocalWrite)
		d.GeneralCmd(in, out)
		h, err := d.ObjCreate(in, out)
		if err == nil {
			d.ObjQuery(h, in, out)
			d.ObjModify(h, in, out)
		}
		d.ObjQuery(1, in, out)
		d.ObjModify(2, in, out)
		fd, _ := d.NewAsyncCmdFD()
		d.ObjQueryAsync(2, in, len(out), 1, fd)
		// Event subscriptions, with the input's words as event types.
		ch, _ := d.NewEventChannel(false)
		var types []uint16
		for i := 0; i+1 < len(in) && len(types) < 20; i += 2 {
			types = append(types, binary.BigEndian.Uint16(in[i:]))
		}
		if err == nil {
			d.Subscribe(ch, h, types, 1)
		}
		d.Subscribe(ch, 2, types, 2)
		// DEVX commands on verbs objects' handles (devx_is_valid_obj_id
		// takes CQs, QPs and SRQs).
		for _, vh := range verbsObjects(t, d) {
			d.ObjQuery(vh, in, out)
			d.ObjModify(vh, in, out)
			d.ObjQueryAsync(vh, in, len(out), 3, fd)
			d.Subscribe(ch, vh, types, 3)
			d.ObjDestroy(vh)
		}
		d.Exec(in, out)
		d.Close()
		if n := d.Objects(); n != 0 || len(d.h.subs) != 0 {
			t.Fatalf("%d objects and %d subscription keys after Close", n, len(d.h.subs))
		}
	})
}

// verbsObjects creates a verbs CQ, an RC QP on it and an SRQ on d, in
// memory that stays mapped for the test, and returns their handles.
func verbsObjects(t *testing.T, d *Device) []seam.Handle {
	mem, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	pd, _, _ := d.AllocPD()
	u, _ := d.UARAlloc(1)
	cq, _, err := d.CreateCQ(seam.CQCreate{CQE: 15}, drv(&mlx5abi.Mlx5IbCreateCq{BufAddr: addr(mem), DbAddr: addr(mem[4096:]),
		CqeSize: 64, Flags: mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX, UarPageIndex: uint16(u.PageID)}), make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	qp, _, err := d.CreateQP(seam.QPCreate{Type: seam.QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: seam.NoHandle, Cap: seam.QPCap{MaxRecvWR: 4}},
		drv(&mlx5abi.Mlx5IbCreateQp{BufAddr: addr(mem[8192:]), DbAddr: addr(mem[4096+64:]), SqWqeCount: 16, RqWqeCount: 4,
			RqWqeShift: 6, Flags: mlx5abi.MLX5_QP_FLAG_UAR_PAGE_INDEX, BfregIndex: u.PageID}), nil)
	if err != nil {
		t.Fatal(err)
	}
	srq, _, err := d.CreateSRQ(seam.SRQCreate{PD: pd, MaxWR: 7, MaxSGE: 1}, drv(&mlx5abi.Mlx5IbCreateSrq{BufAddr: addr(mem[32768:]),
		DbAddr: addr(mem[4096+128:])}), nil)
	if err != nil {
		t.Fatal(err)
	}
	return []seam.Handle{cq, qp, srq}
}
