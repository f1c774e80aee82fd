package mlx5_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// The DC data path end to end through the public API on the software
// ConnectX (package model, docs/MODEL.md "DC"): DCIs with and without
// streams post to DCTs on an SRQ, every opcode, and the stream reset.

// dcRig is an evRig with one CQ for everything, an SRQ, DCTs on it and
// an AH to the port.
type dcRig struct {
	*evRig
	cq  *mlx5.CQ
	srq *mlx5.SRQ
	ah  *mlx5.AH
}

func newDCRig(t testing.TB, profile string, opt model.Options) *dcRig {
	t.Helper()
	r := &dcRig{evRig: newEvRig(t, profile, opt)}
	r.cq = r.evRig.cq(t, 1024, false)
	var err error
	if r.srq, err = r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 256, MaxSGE: 1}); err != nil {
		t.Fatal(err)
	}
	if r.ah, err = r.pd.CreateAH(r.path); err != nil {
		t.Fatal(err)
	}
	return r
}

// dct makes a DCT of key on the rig's SRQ with the access given, in RTR,
// where it answers DCIs.
func (r *dcRig) dct(t testing.TB, key uint64, access mlx5.AccessFlags) *mlx5.QP {
	t.Helper()
	q, err := r.c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCT, PD: r.pd, SendCQ: r.cq, RecvCQ: r.cq, SRQ: r.srq, DCAccessKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	modify(t, q, mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1, Access: access},
		mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort|mlx5.QPAttrAccessFlags)
	modify(t, q, mlx5.QPAttr{State: mlx5.QPStateRTR, Path: r.path, MinRNRTimer: 1},
		mlx5.QPAttrState|mlx5.QPAttrAV|mlx5.QPAttrPathMTU|mlx5.QPAttrMinRNRTimer)
	return q
}

// dci makes a DCI of o's sizes on the rig's CQ, in RTS.
func (r *dcRig) dci(t testing.TB, o mlx5.QPOptions) *mlx5.QP {
	t.Helper()
	o.Type, o.PD, o.SendCQ, o.RecvCQ = mlx5.QPTypeDCI, r.pd, r.cq, r.cq
	if o.MaxSendWR == 0 {
		o.MaxSendWR = 64
	}
	q, err := r.c.CreateQP(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	r.toRTS(t, q)
	return q
}

// toRTS takes a DCI from RESET (or after RESET) to RTS, as rdma-core's
// tests do (tests/utils.py, modify_qp for a DCI: no access flags at
// INIT, the path at RTR, timers and retries at RTS).
func (r *dcRig) toRTS(t testing.TB, q *mlx5.QP) {
	t.Helper()
	modify(t, q, mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1}, mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort)
	modify(t, q, mlx5.QPAttr{State: mlx5.QPStateRTR, Path: r.path}, mlx5.QPAttrState|mlx5.QPAttrPathMTU|mlx5.QPAttrAV)
	modify(t, q, mlx5.QPAttr{State: mlx5.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
		mlx5.QPAttrState|mlx5.QPAttrTimeout|mlx5.QPAttrRetryCnt|mlx5.QPAttrRNRRetry|mlx5.QPAttrSQPSN|mlx5.QPAttrMaxQPRdAtomic)
}

// recvs posts n receives of 256 bytes each on the SRQ, at off in the
// rig's buffer, wr_ids from id.
func (r *dcRig) recvs(t testing.TB, n int, off uint64, id uint64) {
	t.Helper()
	for i := range uint64(n) {
		if err := r.srq.PostRecv(id+i, []mlx5.SGE{{Addr: r.addr(off + 256*i), Length: 256, LKey: r.mr.LKey()}}); err != nil {
			t.Fatal(err)
		}
	}
}

// addr is the address of byte off of the rig's buffer.
func (r *dcRig) addr(off uint64) uint64 { return r.mr.Addr() + off }

// A SEND from a DCI lands in the receive buffer of the DCT it names, on
// the DCT's SRQ: one completion at each end, the DCI's with the DCI's QP
// number, the DCT's naming the DCT and the sending DCI.
func TestDCSendReachesDCT(t *testing.T) {
	r := newDCRig(t, "cx7", model.Options{})
	dct := r.dct(t, 0, mlx5.AccessRemoteWrite)
	dci := r.dci(t, mlx5.QPOptions{})
	r.recvs(t, 1, 0x8000, 100)
	buf := r.buf.Bytes()
	copy(buf[0x100:], bytes.Repeat([]byte("dc"), 32))
	post(t, dci, &mlx5.SendWR{WrID: 7, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled,
		SGL: []mlx5.SGE{{Addr: r.addr(0x100), Length: 64, LKey: r.mr.LKey()}},
		AH:  r.ah, RemoteQPN: dct.QPN()})
	var send, recv *mlx5.Completion
	wc := pollN(t, r.cq, 2, 5*time.Second)
	for i := range wc {
		switch wc[i].QPN {
		case dci.QPN():
			send = &wc[i]
		case dct.QPN():
			recv = &wc[i]
		}
	}
	if send == nil || send.WrID != 7 || send.Status != mlx5.WCSuccess || send.Opcode != mlx5.WCSend {
		t.Errorf("the DCI's completion: %+v", wc)
	}
	if recv == nil || recv.WrID != 100 || recv.Status != mlx5.WCSuccess || recv.Opcode != mlx5.WCRecv || recv.ByteLen != 64 || recv.SrcQP != dci.QPN() {
		t.Errorf("the DCT's completion: %+v", wc)
	}
	if !bytes.Equal(buf[0x8000:0x8040], buf[0x100:0x140]) {
		t.Errorf("received % x", buf[0x8000:0x8040])
	}
}

// dcOps is every operation libmlx5 allows on a DCI that the model runs
// end to end (BIND_MW aside, which mlx5 has not; SEND_INV needs a key the
// DCT may invalidate: its bytes are TestOracleDCPost's).
var dcOps = []mlx5.Opcode{mlx5.OpSend, mlx5.OpSendImm, mlx5.OpRDMAWrite, mlx5.OpRDMAWriteImm, mlx5.OpRDMARead,
	mlx5.OpAtomicCAS, mlx5.OpAtomicFAA, mlx5.OpLocalInv, mlx5.OpNOP}

// TestDCEveryOpcode posts each DCI operation to two DCTs of different
// keys, on a DCI with streams (each on its own stream) and one without,
// through PostSend, PostSendList and Begin/Add/Commit, on every profile,
// inline or with SGEs; every completion is checked once (status, wr_id,
// opcode, QP), and the data: what a SEND or RDMA WRITE moved, what an
// RDMA READ brought back, what the atomics left on both sides.
func TestDCEveryOpcode(t *testing.T) {
	for _, p := range model.Profiles() {
		t.Run(p, func(t *testing.T) {
			r := newDCRig(t, p, model.Options{})
			mr, err := r.pd.RegMR(r.buf.Bytes(), mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead|mlx5.AccessRemoteAtomic)
			if err != nil {
				t.Fatal(err)
			}
			const access = mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead | mlx5.AccessRemoteAtomic
			dcts := []*mlx5.QP{r.dct(t, 0x0123456789abcdef, access), r.dct(t, ^uint64(0), access)}
			keys := []uint64{0x0123456789abcdef, ^uint64(0)}
			var streams *mlx5.DCIStreams
			if m := r.c.Caps().MaxDCIStreams; m.LogConcurrent > 0 {
				streams = &mlx5.DCIStreams{LogConcurrent: m.LogConcurrent, LogErrored: m.LogErrored}
			}
			dcis := []*mlx5.QP{r.dci(t, mlx5.QPOptions{MaxSendSGE: 2, MaxInlineData: 64})}
			if streams != nil {
				dcis = append(dcis, r.dci(t, mlx5.QPOptions{MaxSendSGE: 2, MaxInlineData: 64, DCIStreams: streams}))
			}
			buf := r.buf.Bytes()
			for i := range 0xc000 {
				buf[i] = byte(i * 7)
			}
			ne := binary.NativeEndian
			id := uint64(0)
			for di, dci := range dcis {
				for oi, op := range dcOps {
					for api := range 3 {
						id++
						k := int(id) % 2
						src, dst := uint64(0x100*oi), uint64(0x8000+0x100*(int(id)%64))
						wr := mlx5.SendWR{WrID: id, Opcode: op, Flags: mlx5.SendSignaled, AH: r.ah, RemoteQPN: dcts[k].QPN(), DCAccessKey: keys[k],
							SGL:        []mlx5.SGE{{Addr: r.addr(src), Length: 48, LKey: mr.LKey()}, {Addr: r.addr(src + 64), Length: 16, LKey: mr.LKey()}},
							RemoteAddr: r.addr(dst), RKey: mr.RKey(), Imm: uint32(id), Compare: ne.Uint64(buf[dst:]), SwapAdd: 5}
						if di == 1 {
							wr.StreamID = uint16(int(id) % (1 << streams.LogConcurrent))
						}
						if api == 2 && (op == mlx5.OpSend || op == mlx5.OpRDMAWrite) {
							wr.SGL, wr.Inline = nil, [][]byte{buf[src : src+40], buf[src+64 : src+88]}
						}
						switch op {
						case mlx5.OpAtomicCAS, mlx5.OpAtomicFAA:
							dst &^= 7
							wr.RemoteAddr, wr.Compare = r.addr(dst), ne.Uint64(buf[dst:])
							wr.SGL = wr.SGL[:1]
							wr.SGL[0].Length = 8
						case mlx5.OpLocalInv, mlx5.OpNOP:
							wr.AH, wr.RemoteQPN, wr.DCAccessKey, wr.StreamID, wr.SGL = nil, 0, 0, 0, nil
							if op == mlx5.OpLocalInv {
								continue // no key to invalidate here: its bytes are TestOracleDCPost's
							}
						}
						recv := op == mlx5.OpSend || op == mlx5.OpSendImm || op == mlx5.OpRDMAWriteImm
						if recv {
							r.recvs(t, 1, 0xc000, 1000+id)
							clear(buf[0xc000:0xc100])
						}
						before := ne.Uint64(buf[dst:])
						var err error
						switch api {
						case 0:
							err = dci.PostSend(&wr)
						case 1:
							err = dci.PostSendList([]mlx5.SendWR{wr})
						default:
							err = dci.Begin().Add(&wr).Commit()
						}
						if err != nil {
							t.Fatalf("DCI %d %v (api %d): %v", di, op, api, err)
						}
						n := 1
						if recv {
							n = 2
						}
						wc := pollN(t, r.cq, n, 5*time.Second)
						what := fmt.Sprintf("DCI %d %v (api %d) to DCT %d", di, op, api, k)
						var req *mlx5.Completion
						for i := range wc {
							c := &wc[i]
							if c.Status != mlx5.WCSuccess {
								t.Fatalf("%s: %+v", what, wc)
							}
							if c.QPN == dci.QPN() && c.WrID == id {
								req = c
							} else if c.QPN != dcts[k].QPN() || c.WrID != 1000+id || c.SrcQP != dci.QPN() {
								t.Errorf("%s: a completion of another: %+v", what, c)
							}
						}
						wantOp := map[mlx5.Opcode]mlx5.WCOpcode{mlx5.OpSend: mlx5.WCSend, mlx5.OpSendImm: mlx5.WCSend, mlx5.OpRDMAWrite: mlx5.WCRDMAWrite,
							mlx5.OpRDMAWriteImm: mlx5.WCRDMAWrite, mlx5.OpRDMARead: mlx5.WCRDMARead, mlx5.OpAtomicCAS: mlx5.WCCompSwap,
							mlx5.OpAtomicFAA: mlx5.WCFetchAdd, mlx5.OpNOP: mlx5.WCNOP}[op]
						if req == nil || req.Opcode != wantOp {
							t.Fatalf("%s: %+v", what, wc)
						}
						msg := append(append([]byte(nil), buf[src:src+48]...), buf[src+64:src+80]...)
						if wr.Inline != nil {
							msg = append(append([]byte(nil), buf[src:src+40]...), buf[src+64:src+88]...)
						}
						switch op {
						case mlx5.OpSend, mlx5.OpSendImm:
							if !bytes.Equal(buf[0xc000:0xc000+len(msg)], msg) {
								t.Errorf("%s: received % x", what, buf[0xc000:0xc000+len(msg)])
							}
						case mlx5.OpRDMAWrite, mlx5.OpRDMAWriteImm:
							if !bytes.Equal(buf[dst:dst+uint64(len(msg))], msg) {
								t.Errorf("%s: written % x", what, buf[dst:dst+uint64(len(msg))])
							}
						case mlx5.OpRDMARead:
							if !bytes.Equal(buf[src:src+48], buf[dst:dst+48]) || !bytes.Equal(buf[src+64:src+80], buf[dst+48:dst+64]) {
								t.Errorf("%s: read % x", what, buf[src:src+80])
							}
						case mlx5.OpAtomicCAS, mlx5.OpAtomicFAA:
							want := uint64(5)
							if op == mlx5.OpAtomicFAA {
								want = before + 5
							}
							if got := ne.Uint64(buf[dst:]); got != want || ne.Uint64(buf[src:]) != before {
								t.Errorf("%s: remote %#x (want %#x), returned %#x (want %#x)", what, got, want, ne.Uint64(buf[src:]), before)
							}
						}
					}
				}
			}
		})
	}
}

// completions polls cq until n completions came (failing after 5 s) and
// returns them by wr_id, each once.
func completions(t testing.TB, cq *mlx5.CQ, n int) map[uint64]mlx5.Completion {
	t.Helper()
	got := map[uint64]mlx5.Completion{}
	for _, c := range pollN(t, cq, n, 5*time.Second) {
		if _, dup := got[c.WrID]; dup {
			t.Fatalf("wr_id %#x completed twice", c.WrID)
		}
		got[c.WrID] = c
	}
	return got
}

// TestDCStreamErrorAndReset, after mlx5dv_dci_stream_id_reset(3) and
// rdma-core's test_dc_stream_ids_recovery and test_dc_stream_qp_recovery
// (tests/test_mlx5_dc.py), on the model: a remote access error on one
// stream flushes that stream's later work requests, signaled or not,
// while the other streams complete; the QP stays in RTS; the stream is
// reset and runs again; a stream not in error is the firmware's refusal
// (a *prm.CmdError, EINVAL); 2^LogErrored streams in error take the QP to
// ERR, where the reset is refused, and the QP recovers through RESET.
func TestDCStreamErrorAndReset(t *testing.T) {
	for _, p := range []string{"cx6dx", "cx7"} {
		t.Run(p, func(t *testing.T) {
			r := newDCRig(t, p, model.Options{})
			dct := r.dct(t, 0xbadc0de, mlx5.AccessRemoteWrite)
			dci := r.dci(t, mlx5.QPOptions{DCIStreams: &mlx5.DCIStreams{LogConcurrent: 3, LogErrored: 1}})
			to := func(wr mlx5.SendWR) mlx5.SendWR {
				wr.AH, wr.RemoteQPN, wr.DCAccessKey = r.ah, dct.QPN(), 0xbadc0de
				wr.SGL = []mlx5.SGE{{Addr: r.addr(0), Length: 32, LKey: r.mr.LKey()}}
				return wr
			}
			badWrite := func(id uint64, stream uint16) mlx5.SendWR {
				return to(mlx5.SendWR{WrID: id, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: r.addr(0x4000), RKey: r.mr.RKey() ^ 0xff, StreamID: stream})
			}
			send := func(id uint64, stream uint16, f mlx5.SendFlags) mlx5.SendWR {
				return to(mlx5.SendWR{WrID: id, Opcode: mlx5.OpSend, Flags: f, StreamID: stream})
			}
			r.recvs(t, 16, 0x8000, 100)
			if err := dci.PostSendList([]mlx5.SendWR{badWrite(1, 1), send(2, 2, mlx5.SendSignaled), send(3, 1, mlx5.SendSignaled),
				send(4, 3, 0), send(5, 1, 0), send(6, 3, mlx5.SendSignaled)}); err != nil {
				t.Fatal(err)
			}
			// DCI: 1 remote access error, 3 and 5 flushed, 2 and 6 done (4
			// unsignaled); the DCT received 2, 4 and 6.
			wc := completions(t, r.cq, 8)
			for id, want := range map[uint64]mlx5.WCStatus{1: mlx5.WCRemAccessErr, 2: mlx5.WCSuccess, 3: mlx5.WCWRFlushErr, 5: mlx5.WCWRFlushErr, 6: mlx5.WCSuccess} {
				if c, ok := wc[id]; !ok || c.Status != want || c.QPN != dci.QPN() {
					t.Errorf("wr_id %d: %+v, want %v", id, c, want)
				}
			}
			for id := uint64(100); id < 103; id++ {
				if c, ok := wc[id]; !ok || c.Status != mlx5.WCSuccess || c.QPN != dct.QPN() || c.SrcQP != dci.QPN() {
					t.Errorf("receive %d: %+v", id, c)
				}
			}
			if a, err := dci.Query(mlx5.QPAttrState); err != nil || a.State != mlx5.QPStateRTS {
				t.Fatalf("after a stream error: %v, %v", a.State, err)
			}
			// A stream not in error: the firmware refuses the reset.
			err := dci.ResetDCIStream(2)
			var ce *prm.CmdError
			if !errors.As(err, &ce) || ce.Opcode != prm.MLX5_CMD_OP_RTS2RTS_QP || !errors.Is(err, unix.EINVAL) || errors.Is(err, mlx5.ErrInvalid) {
				t.Errorf("reset of a stream not in error: %v", err)
			}
			if err := dci.ResetDCIStream(1); err != nil {
				t.Fatalf("reset of stream 1: %v", err)
			}
			post(t, dci, ptr(send(7, 1, mlx5.SendSignaled)))
			wc = completions(t, r.cq, 2)
			if wc[7].Status != mlx5.WCSuccess || wc[103].Status != mlx5.WCSuccess {
				t.Errorf("after the reset: %+v", wc)
			}

			// Two streams in error (2^1): the QP goes to ERR and flushes.
			if err := dci.PostSendList([]mlx5.SendWR{badWrite(8, 4), badWrite(9, 5), send(10, 6, mlx5.SendSignaled)}); err != nil {
				t.Fatal(err)
			}
			wc = completions(t, r.cq, 3)
			if wc[8].Status != mlx5.WCRemAccessErr || wc[9].Status != mlx5.WCRemAccessErr || wc[10].Status != mlx5.WCWRFlushErr {
				t.Errorf("two errored streams: %+v", wc)
			}
			// Before a Query the driver has the QP in RTS, as libmlx5: the
			// command goes, and the firmware refuses it.
			if err := dci.ResetDCIStream(4); !errors.As(err, &ce) || ce.Status != prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR || errors.Is(err, mlx5.ErrInvalid) {
				t.Errorf("reset in ERR before a Query: %v, want the firmware's refusal", err)
			}
			if a, err := dci.Query(mlx5.QPAttrState); err != nil || a.State != mlx5.QPStateErr {
				t.Fatalf("after 2 errored streams: %v, %v", a.State, err)
			}
			if err := dci.ResetDCIStream(4); !errors.Is(err, mlx5.ErrInvalid) || !errors.Is(err, unix.EINVAL) {
				t.Errorf("reset in ERR: %v, want ErrInvalid", err)
			}
			modify(t, dci, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
			r.toRTS(t, dci)
			post(t, dci, ptr(send(11, 4, mlx5.SendSignaled)))
			wc = completions(t, r.cq, 2)
			if wc[11].Status != mlx5.WCSuccess || wc[104].Status != mlx5.WCSuccess {
				t.Errorf("after the QP's recovery: %+v", wc)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestDCIStreamResetRefusals: what ResetDCIStream refuses before sending
// anything, on the model (whose firmware would answer otherwise): a DCI
// without streams, a stream beyond the DCI's, a QP not in RTS, an RC QP
// and a DCT (ErrInvalid); a device without errored streams or QP context
// extension (cx5: ErrUnsupported).
func TestDCIStreamResetRefusals(t *testing.T) {
	r := newDCRig(t, "cx7", model.Options{})
	plain := r.dci(t, mlx5.QPOptions{})
	streams := r.dci(t, mlx5.QPOptions{DCIStreams: &mlx5.DCIStreams{LogConcurrent: 2, LogErrored: 1}})
	rc := r.qp(t, mlx5.QPOptions{SendCQ: r.cq, RecvCQ: r.cq})
	dct := r.dct(t, 1, mlx5.AccessRemoteWrite)
	fresh, err := r.c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCI, PD: r.pd, SendCQ: r.cq, RecvCQ: r.cq, MaxSendWR: 4,
		DCIStreams: &mlx5.DCIStreams{LogConcurrent: 2, LogErrored: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for _, c := range []struct {
		name   string
		qp     *mlx5.QP
		stream uint16
	}{
		{"a DCI without streams", plain, 0},
		{"stream 4 of 4", streams, 4},
		{"stream 0xffff of 4", streams, 0xffff},
		{"a DCI in RESET", fresh, 0},
		{"an RC QP", rc, 0},
		{"a DCT", dct, 0},
	} {
		err := c.qp.ResetDCIStream(c.stream)
		if !errors.Is(err, mlx5.ErrInvalid) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
		mlx5.CheckAPIError(t, err)
	}
	// A stream in range, not in error: sent, and the firmware refuses it.
	err = streams.ResetDCIStream(3)
	if !errors.Is(err, unix.EINVAL) || errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("stream 3 of 4, not in error: %v, want the firmware's refusal", err)
	}
	mlx5.CheckAPIError(t, err)
	if err := streams.Close(); err != nil {
		t.Fatal(err)
	}
	if err := streams.ResetDCIStream(0); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("closed: %v", err)
	}

	r5 := newDCRig(t, "cx5", model.Options{})
	if m := r5.c.Caps().MaxDCIStreams; m != (mlx5.DCIStreams{}) {
		t.Fatalf("cx5's DCI streams: %+v", m)
	}
	if err := r5.dci(t, mlx5.QPOptions{}).ResetDCIStream(0); !errors.Is(err, mlx5.ErrUnsupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("cx5: %v, want ErrUnsupported", err)
	}
}

// TestDCCaps: Context.DCCaps on every profile, as the model's profiles
// have them (docs/MODEL.md, "Profiles"): mlx5dv_query_device's
// dci_streams (what the kernel copies from log_max_dci_stream_channels
// and log_max_dci_errored_streams) and the DC HCA caps; the stream reset
// where both errored streams and qpc_extension are there.
func TestDCCaps(t *testing.T) {
	for _, c := range []struct {
		profile string
		want    mlx5.DCCaps
	}{
		{"cx5", mlx5.DCCaps{DCT: true, LogMaxRAReq: 4, LogMaxRARes: 4, MaxWQESize: 1024, LogMaxAtomicSize: 3}},
		{"cx6dx", mlx5.DCCaps{DCT: true, Streams: mlx5.DCIStreams{LogConcurrent: 4, LogErrored: 2}, LogMaxStreamChannels: 4, LogMaxErroredStreams: 2,
			QPCExtension: true, StreamReset: true, LogMaxRAReq: 4, LogMaxRARes: 4, MaxWQESize: 1024, LogMaxAtomicSize: 3}},
		{"cx7", mlx5.DCCaps{DCT: true, Streams: mlx5.DCIStreams{LogConcurrent: 6, LogErrored: 3}, LogMaxStreamChannels: 6, LogMaxErroredStreams: 3,
			QPCExtension: true, StreamReset: true, LogMaxRAReq: 4, LogMaxRARes: 4, MaxWQESize: 1024, LogMaxAtomicSize: 3}},
	} {
		r := newEvRig(t, c.profile, model.Options{})
		got, err := r.c.DCCaps()
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v\nwant %+v", c.profile, got, err, c.want)
		}
		if got.Streams != r.c.Caps().MaxDCIStreams {
			t.Errorf("%s: Streams %+v, Caps.MaxDCIStreams %+v", c.profile, got.Streams, r.c.Caps().MaxDCIStreams)
		}
	}
}

// ResetDCIStream and DCCaps on nil, zero and closed objects fail as the
// other methods do (the package doc's rules), naming the operation.
func TestDCNilAndClosed(t *testing.T) {
	var nilQP *mlx5.QP
	for _, err := range []error{nilQP.ResetDCIStream(0), (&mlx5.QP{}).ResetDCIStream(0)} {
		if !errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("%v, want ErrInvalid", err)
		}
		mlx5.CheckAPIError(t, err)
	}
	var nilCtx *mlx5.Context
	if _, err := nilCtx.DCCaps(); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("nil context: %v", err)
	}
	c := mlx5test.New(t, "cx7")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := c.DCCaps()
	if !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("closed context: %v", err)
	}
	mlx5.CheckAPIError(t, err)
}
