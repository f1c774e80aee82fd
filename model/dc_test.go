package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// The DC data path (docs/MODEL.md, "DC"): DCIs made with libmlx5's driver
// data, DCI WQEs as libmlx5 writes them, DCTs answering by number and key,
// stream channels, their errors and resets.

const (
	tOpSendInval = 0x01
	tOpAtomicCS  = 0x11
	tOpAtomicFA  = 0x12
	tSolicited   = 0x02
	dcKey1       = 0x0123456789abcdef // setup/create_dct1's access key
	dcKey2       = ^uint64(0)         // setup/create_dct2's
)

// TestDCDataPath runs every opcode libmlx5 allows on a DCI but the UMR
// ones (SEND, SEND_WITH_IMM, SEND_WITH_INV, RDMA_WRITE(_WITH_IMM),
// RDMA_READ, CMP_AND_SWP, FETCH_AND_ADD) from one DCI to two DCTs, on
// every profile, and checks the requester's and the DCTs' completions
// and the data.
func TestDCDataPath(t *testing.T) {
	for _, p := range Profiles() {
		t.Run(p, func(t *testing.T) {
			r := newDCRig(t, p, Options{})
			d1 := r.dct(dcKey1, remoteRW|ibAccessRemoteAtomic, 0x31)
			d2 := r.dct(dcKey2, remoteRW|ibAccessRemoteAtomic, 0x32)
			q := r.dci("dci_basic", 7)
			lk, rk, l, rm := r.lmr.LKey, r.rmr.RKey, addr(r.local), addr(r.remote)

			// SEND of two SGEs to DCT 1.
			ri := r.recv(dcRecvBytes)
			idx := q.post(dcw{op: tOpSend, fm: tSignaled, sges: []tsge{{100, lk, l}, {28, lk, l + 500}}}.to(d1))[0]
			checkDC(t, "SEND", r.cq.next(), q.wantReq(tOpSend, idx, 0))
			checkDC(t, "SEND at DCT 1", r.dcq.next(), d1.wantRecv(2, ri, 128, 0, q.qpn))
			if got := r.rbufOf(ri); !bytes.Equal(got[:100], r.local[:100]) || !bytes.Equal(got[100:128], r.local[500:528]) {
				t.Error("SEND: the receive buffer does not hold the message")
			}
			// SEND_WITH_IMM, inline and solicited, to DCT 2.
			ri = r.recv(dcRecvBytes)
			msg := []byte("inline, to the second DCT")
			idx = q.post(dcw{op: tOpSendImm, fm: tSignaled | tSolicited, imm: 0x11223344, inline: msg}.to(d2))[0]
			checkDC(t, "SEND_IMM", r.cq.next(), q.wantReq(tOpSendImm, idx, 0))
			checkDC(t, "SEND_IMM at DCT 2", r.dcq.next(), d2.wantRecv(3, ri, uint32(len(msg)), 0x11223344, q.qpn))
			if !bytes.Equal(r.rbufOf(ri)[:len(msg)], msg) {
				t.Error("SEND_IMM: the receive buffer does not hold the message")
			}
			// RDMA WRITE to DCT 1: no receive completion.
			idx = q.post(dcw{op: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: rm + 4096, rkey: rk, sges: []tsge{{256, lk, l + 1024}}}.to(d1))[0]
			checkDC(t, "RDMA WRITE", r.cq.next(), q.wantReq(tOpRDMAWrite, idx, 0))
			if !bytes.Equal(r.remote[4096:4352], r.local[1024:1280]) {
				t.Error("RDMA WRITE: the remote memory does not hold the data")
			}
			// RDMA WRITE_WITH_IMM to DCT 2 takes a receive WQE.
			ri = r.recv(dcRecvBytes)
			idx = q.post(dcw{op: tOpRDMAWriteImm, fm: tSignaled, imm: 0xa1b2c3d4, hasRaddr: true, raddr: rm + 8192, rkey: rk, sges: []tsge{{64, lk, l + 2048}}}.to(d2))[0]
			checkDC(t, "RDMA WRITE_IMM", r.cq.next(), q.wantReq(tOpRDMAWriteImm, idx, 0))
			checkDC(t, "RDMA WRITE_IMM at DCT 2", r.dcq.next(), d2.wantRecv(1, ri, 64, 0xa1b2c3d4, q.qpn))
			if !bytes.Equal(r.remote[8192:8256], r.local[2048:2112]) {
				t.Error("RDMA WRITE_IMM: the remote memory does not hold the data")
			}
			// RDMA READ from DCT 1 into two SGEs.
			idx = q.post(dcw{op: tOpRDMARead, fm: tSignaled, hasRaddr: true, raddr: rm + 12288, rkey: rk, sges: []tsge{{128, lk, l + 16384}, {128, lk, l + 20000}}}.to(d1))[0]
			checkDC(t, "RDMA READ", r.cq.next(), q.wantReq(tOpRDMARead, idx, 256))
			if !bytes.Equal(r.local[16384:16512], r.remote[12288:12416]) || !bytes.Equal(r.local[20000:20128], r.remote[12416:12544]) {
				t.Error("RDMA READ: the local memory does not hold the remote data")
			}
			// Atomics: host byte order in memory (atomic_req_8B_endianness_mode 1).
			ne := binary.NativeEndian
			ne.PutUint64(r.remote[16384:], 0x1111)
			atom := func(op uint8, d *dctT, swapAdd, compare uint64, at uint64) uint16 {
				return q.post(dcw{op: op, fm: tSignaled, atomic: true, raddr: rm + 16384, rkey: rk, swapAdd: swapAdd, compare: compare,
					sges: []tsge{{8, lk, l + at}}}.to(d))[0]
			}
			idx = atom(tOpAtomicCS, d1, 0x2222, 0x1111, 24576)
			checkDC(t, "CMP_AND_SWP", r.cq.next(), q.wantReq(tOpAtomicCS, idx, 8))
			if got, old := ne.Uint64(r.remote[16384:]), ne.Uint64(r.local[24576:]); got != 0x2222 || old != 0x1111 {
				t.Errorf("CMP_AND_SWP: remote %#x, original %#x; want 0x2222, 0x1111", got, old)
			}
			idx = atom(tOpAtomicCS, d2, 0x3333, 0x1111, 24584)
			checkDC(t, "CMP_AND_SWP (no match)", r.cq.next(), q.wantReq(tOpAtomicCS, idx, 8))
			if got, old := ne.Uint64(r.remote[16384:]), ne.Uint64(r.local[24584:]); got != 0x2222 || old != 0x2222 {
				t.Errorf("CMP_AND_SWP (no match): remote %#x, original %#x; want 0x2222, 0x2222", got, old)
			}
			idx = atom(tOpAtomicFA, d2, 5, 0, 24592)
			checkDC(t, "FETCH_AND_ADD", r.cq.next(), q.wantReq(tOpAtomicFA, idx, 8))
			if got, old := ne.Uint64(r.remote[16384:]), ne.Uint64(r.local[24592:]); got != 0x2227 || old != 0x2222 {
				t.Errorf("FETCH_AND_ADD: remote %#x, original %#x; want 0x2227, 0x2222", got, old)
			}
			// SEND_WITH_INV of a key that names no mkey: the IB transport's
			// class J, as for RC: the requester completes, the receive WQE
			// completes in error; the DCT stays in RTR.
			ri = r.recv(dcRecvBytes)
			idx = q.post(dcw{op: tOpSendInval, fm: tSignaled, imm: 0x00dead01, inline: []byte("x")}.to(d1))[0]
			checkDC(t, "SEND_INV", r.cq.next(), q.wantReq(tOpSendInval, idx, 0))
			checkDC(t, "SEND_INV at DCT 1", r.dcq.next(), d1.wantRecvErr(0x12, ri))
			// Unsignaled work completes without a CQE; the DCTs go on.
			ri = r.recv(dcRecvBytes)
			q.post(dcw{op: tOpSend, inline: []byte("unsignaled")}.to(d1))
			checkDC(t, "unsignaled SEND at DCT 1", r.dcq.next(), d1.wantRecv(2, ri, 10, 0, q.qpn))
			r.cq.none(time.Millisecond)
			if s := q.state(); s != StateRTS {
				t.Errorf("the DCI is in state %#x, want RTS", s)
			}
		})
	}
}

// TestDCStreamErrorFlushesOnlyItsStream is mlx5dv_dci_stream_id_reset(3):
// an error on one stream flushes that stream's WRs, in SQ order, while the
// other streams' complete; the stream stays in error (its WRs flush) until
// reset; then its work runs. A reset of a stream that is not in error is
// refused (rdma-core 44.0's test_dc_send_stream_bad_flow expects it).
func TestDCStreamErrorFlushesOnlyItsStream(t *testing.T) {
	for _, p := range []string{"cx6dx", "cx7"} {
		t.Run(p, func(t *testing.T) {
			r := newDCRig(t, p, Options{})
			d1 := r.dct(dcKey1, remoteRW, 0x31)
			q := r.dci("dci_s8", 7) // 2^3 stream channels, 2^2 errored
			lk, rk, l, rm := r.lmr.LKey, r.rmr.RKey, addr(r.local), addr(r.remote)
			send := func(s uint16, fm uint8) dcw {
				return dcw{op: tOpSend, fm: fm, stream: s, sges: []tsge{{32, lk, l}}}.to(d1)
			}
			write := func(s uint16, rkey uint32) dcw {
				return dcw{op: tOpRDMAWrite, fm: tSignaled, stream: s, hasRaddr: true, raddr: rm, rkey: rkey, sges: []tsge{{64, lk, l}}}.to(d1)
			}
			bad := rk ^ 0xff // the mkey's variant byte is wrong: a remote access error
			var ri [3]uint16
			for i := range ri {
				ri[i] = r.recv(dcRecvBytes)
			}
			idx := q.post(write(1, bad), send(2, tSignaled), send(1, tSignaled), send(3, tSignaled), write(2, rk), send(1, 0), send(3, 0))
			checkDC(t, "stream 1: bad rkey", r.cq.next(), q.wantErr(tOpRDMAWrite, dcRemoteAccess, idx[0]))
			checkDC(t, "stream 2: SEND", r.cq.next(), q.wantReq(tOpSend, idx[1], 0))
			checkDC(t, "stream 1: SEND flushed", r.cq.next(), q.wantErr(tOpSend, dcFlushStatus, idx[2]))
			checkDC(t, "stream 3: SEND", r.cq.next(), q.wantReq(tOpSend, idx[3], 0))
			checkDC(t, "stream 2: RDMA WRITE", r.cq.next(), q.wantReq(tOpRDMAWrite, idx[4], 0))
			checkDC(t, "stream 1: unsignaled SEND flushed", r.cq.next(), q.wantErr(tOpSend, dcFlushStatus, idx[5]))
			r.cq.none(time.Millisecond) // stream 3's unsignaled SEND completed without one
			checkDC(t, "stream 2 at the DCT", r.dcq.next(), d1.wantRecv(2, ri[0], 32, 0, q.qpn))
			checkDC(t, "stream 3 at the DCT", r.dcq.next(), d1.wantRecv(2, ri[1], 32, 0, q.qpn))
			checkDC(t, "stream 3 (unsignaled) at the DCT", r.dcq.next(), d1.wantRecv(2, ri[2], 32, 0, q.qpn))
			if s := q.state(); s != StateRTS {
				t.Fatalf("after a stream error the DCI is in state %#x, want RTS", s)
			}
			// Until the reset, the stream's new work flushes too.
			idx = q.post(send(1, tSignaled))
			checkDC(t, "stream 1 before the reset", r.cq.next(), q.wantErr(tOpSend, dcFlushStatus, idx[0]))
			// libmlx5's command for stream 1, with this DCI's number.
			cmd := resetCmdOf(t, "dci_reset/dci_s8/rts/id_1")
			prm.Rts2rtsQpIn.Qpn.Set(cmd, uint64(q.qpn))
			if st := q.modify(cmd); st != prm.MLX5_CMD_STAT_OK {
				t.Fatalf("libmlx5's reset of stream 1: %v", st)
			}
			ri[0] = r.recv(dcRecvBytes)
			idx = q.post(send(1, tSignaled))
			checkDC(t, "stream 1 after the reset", r.cq.next(), q.wantReq(tOpSend, idx[0], 0))
			checkDC(t, "stream 1 after the reset, at the DCT", r.dcq.next(), d1.wantRecv(2, ri[0], 32, 0, q.qpn))
			for _, s := range []uint16{1, 2} {
				if st := q.reset(s); st != prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR {
					t.Errorf("reset of stream %d, not in error: %v, want BAD_RES_STATE_ERR", s, st)
				}
			}
			if s := q.state(); s != StateRTS {
				t.Errorf("the DCI is in state %#x, want RTS", s)
			}
		})
	}
}

// TestDCErroredStreamsLimit: when 2^log_num_errored streams are in error
// the DCI goes to ERR and everything flushes (rdma-core's
// test_dc_stream_qp_recovery; the oracle's
// cqe/dci/errored_streams_reach_limit_qp_err script); RESET to RTS
// recovers it. Streams reset after each error never reach the limit
// (test_dc_stream_ids_recovery).
func TestDCErroredStreamsLimit(t *testing.T) {
	for _, p := range []string{"cx6dx", "cx7"} {
		t.Run(p, func(t *testing.T) {
			r := newDCRig(t, p, Options{})
			d1 := r.dct(dcKey1, remoteRW, 0x31)
			q := r.dci("dci_s8", 7) // 2^2 errored streams
			lk, rk, l, rm := r.lmr.LKey, r.rmr.RKey, addr(r.local), addr(r.remote)
			write := func(s uint16, rkey uint32) dcw {
				return dcw{op: tOpRDMAWrite, fm: tSignaled, stream: s, hasRaddr: true, raddr: rm, rkey: rkey, sges: []tsge{{64, lk, l}}}.to(d1)
			}
			// With a reset after each error the QP stays in RTS, past the
			// limit.
			for s := uint16(1); s <= 8; s++ {
				idx := q.post(write(s, rk^0xff))
				checkDC(t, fmt.Sprintf("stream %d: bad rkey", s), r.cq.next(), q.wantErr(tOpRDMAWrite, dcRemoteAccess, idx[0]))
				if st := q.state(); st != StateRTS {
					t.Fatalf("after the error on stream %d the DCI is in state %#x, want RTS", s, st)
				}
				if st := q.reset(s); st != prm.MLX5_CMD_STAT_OK {
					t.Fatalf("reset of stream %d: %v", s, st)
				}
			}
			// Without resets, the fourth errored stream takes the QP to ERR.
			idx := q.post(write(1, rk^0xff), write(2, rk^0xff), write(3, rk^0xff), write(4, rk^0xff), write(5, rk), write(6, rk))
			for i := range 4 {
				checkDC(t, fmt.Sprintf("stream %d: bad rkey", i+1), r.cq.next(), q.wantErr(tOpRDMAWrite, dcRemoteAccess, idx[i]))
			}
			checkDC(t, "stream 5 flushed", r.cq.next(), q.wantErr(tOpRDMAWrite, dcFlushStatus, idx[4]))
			checkDC(t, "stream 6 flushed", r.cq.next(), q.wantErr(tOpRDMAWrite, dcFlushStatus, idx[5]))
			if s := q.state(); s != StateERR {
				t.Fatalf("after 4 errored streams the DCI is in state %#x, want ERR", s)
			}
			if st := q.reset(1); st != prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR {
				t.Errorf("stream reset in ERR: %v, want BAD_RES_STATE_ERR", st)
			}
			q.recover()
			idx = q.post(write(1, rk))
			checkDC(t, "stream 1 after the QP's recovery", r.cq.next(), q.wantReq(tOpRDMAWrite, idx[0], 0))
		})
	}
}

// TestDCStreamIDsBeyondChannels: rdma-core's good flow
// (test_dc_rdma_write_stream) posts stream ids up to 2^log_num_concurent
// + 2 and expects them to complete; the model maps an id to its channel
// modulo the channel count, for errors and resets alike.
func TestDCStreamIDsBeyondChannels(t *testing.T) {
	r := newDCRig(t, "cx7", Options{})
	d1 := r.dct(dcKey1, remoteRW, 0x31)
	q := r.dci("dci_s8", 7)
	lk, rk, l, rm := r.lmr.LKey, r.rmr.RKey, addr(r.local), addr(r.remote)
	write := func(s uint16, rkey uint32) dcw {
		return dcw{op: tOpRDMAWrite, fm: tSignaled, stream: s, hasRaddr: true, raddr: rm, rkey: rkey, sges: []tsge{{64, lk, l}}}.to(d1)
	}
	for s := uint16(0); s <= 10; s++ {
		idx := q.post(write(s, rk))
		checkDC(t, fmt.Sprintf("stream id %d", s), r.cq.next(), q.wantReq(tOpRDMAWrite, idx[0], 0))
	}
	// Stream id 9 is channel 1 of 8.
	idx := q.post(write(9, rk^0xff), write(1, rk), write(2, rk), write(17, rk))
	checkDC(t, "stream id 9: bad rkey", r.cq.next(), q.wantErr(tOpRDMAWrite, dcRemoteAccess, idx[0]))
	checkDC(t, "stream id 1 (channel 1)", r.cq.next(), q.wantErr(tOpRDMAWrite, dcFlushStatus, idx[1]))
	checkDC(t, "stream id 2", r.cq.next(), q.wantReq(tOpRDMAWrite, idx[2], 0))
	checkDC(t, "stream id 17 (channel 1)", r.cq.next(), q.wantErr(tOpRDMAWrite, dcFlushStatus, idx[3]))
	if st := q.reset(9); st != prm.MLX5_CMD_STAT_OK {
		t.Fatalf("reset of stream id 9: %v", st)
	}
	idx = q.post(write(1, rk))
	checkDC(t, "stream id 1 after the reset of 9", r.cq.next(), q.wantReq(tOpRDMAWrite, idx[0], 0))
	// libmlx5's reset of id 0xffff is channel 7's.
	idx = q.post(write(7, rk^0xff))
	checkDC(t, "stream id 7: bad rkey", r.cq.next(), q.wantErr(tOpRDMAWrite, dcRemoteAccess, idx[0]))
	cmd := resetCmdOf(t, "dci_reset/dci_s8/rts/id_65535_beyond_streams")
	prm.Rts2rtsQpIn.Qpn.Set(cmd, uint64(q.qpn))
	if st := q.modify(cmd); st != prm.MLX5_CMD_STAT_OK {
		t.Fatalf("libmlx5's reset of stream id 0xffff: %v", st)
	}
	idx = q.post(write(7, rk))
	checkDC(t, "stream id 7 after the reset of 0xffff", r.cq.next(), q.wantReq(tOpRDMAWrite, idx[0], 0))
}

// TestDCIWithoutStreams: a DCI made without DCI streams has one channel
// and an errored limit of one, so an error takes it to ERR as an RC QP's
// does; a stream reset finds nothing in error.
func TestDCIWithoutStreams(t *testing.T) {
	for _, p := range Profiles() {
		t.Run(p, func(t *testing.T) {
			r := newDCRig(t, p, Options{})
			d1 := r.dct(dcKey1, remoteRW, 0x31)
			q := r.dci("dci_basic", 7)
			lk, rk, l, rm := r.lmr.LKey, r.rmr.RKey, addr(r.local), addr(r.remote)
			noErr := prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR
			if p == "cx5" {
				noErr = prm.MLX5_CMD_STAT_BAD_PARAM_ERR // no qpc_extension
			}
			if st := q.reset(0); st != noErr {
				t.Errorf("stream reset of a DCI without streams, no error: %v, want %v", st, noErr)
			}
			idx := q.post(dcw{op: tOpRDMAWrite, fm: tSignaled, stream: 5, hasRaddr: true, raddr: rm, rkey: rk ^ 0xff, sges: []tsge{{64, lk, l}}}.to(d1),
				dcw{op: tOpSend, fm: tSignaled, stream: 6, inline: []byte("x")}.to(d1))
			checkDC(t, "bad rkey", r.cq.next(), q.wantErr(tOpRDMAWrite, dcRemoteAccess, idx[0]))
			checkDC(t, "SEND flushed", r.cq.next(), q.wantErr(tOpSend, dcFlushStatus, idx[1]))
			if s := q.state(); s != StateERR {
				t.Errorf("the DCI without streams is in state %#x after an error, want ERR", s)
			}
		})
	}
}

// TestDCWrongKeyAndMissingDCT: a request with another DC access key, to a
// number that is no DCT, or to an address off the model's network gets no
// answer: TRANSPORT_RETRY_EXC_ERR, a stream error; the DCT's SRQ is
// untouched.
func TestDCWrongKeyAndMissingDCT(t *testing.T) {
	r := newDCRig(t, "cx7", Options{})
	d1 := r.dct(dcKey1, remoteRW, 0x31)
	q := r.dci("dci_s8", 7)
	ri := r.recv(dcRecvBytes)
	// libmlx5's InfiniBand address vector (LID 0x22, no GRH): no address
	// on the model's RoCE port.
	var ib [avSize]byte
	for _, rec := range dcRecords(t) {
		if rec.Case == "wr/addr/send_sge1/ah_lid_0x22_sl3_path1" {
			copy(ib[:], rec.wqes(t)[0][16:64])
		}
	}
	if ib[15] != 0x22 {
		t.Fatalf("libmlx5's LID address vector: %x", ib)
	}
	for i, c := range []struct {
		what string
		w    dcw
	}{
		{"a wrong DC access key", dcw{dctn: d1.dctn, key: dcKey1 ^ 1}},
		{"a DCI's number", dcw{dctn: q.qpn, key: dcKey1}},
		{"a number of no QP", dcw{dctn: 0xabcdef, key: dcKey1}},
		{"an InfiniBand address", dcw{dctn: d1.dctn, key: dcKey1, av: &ib}},
	} {
		w := c.w
		w.op, w.fm, w.stream, w.inline = tOpSend, tSignaled, uint16(i), []byte("lost")
		idx := q.post(w)
		checkDC(t, c.what, r.cq.next(), q.wantErr(tOpSend, dcRetryExc, idx[0]))
		if s := q.state(); s != StateRTS {
			t.Fatalf("%s: the DCI is in state %#x, want RTS (a stream error)", c.what, s)
		}
		if st := q.reset(uint16(i)); st != prm.MLX5_CMD_STAT_OK {
			t.Fatalf("%s: reset of stream %d: %v", c.what, i, st)
		}
	}
	r.dcq.none(time.Millisecond)
	idx := q.post(dcw{op: tOpSend, fm: tSignaled, inline: []byte("found")}.to(d1))
	checkDC(t, "SEND with the DCT's key", r.cq.next(), q.wantReq(tOpSend, idx[0], 0))
	checkDC(t, "SEND at the DCT, in the receive WQE the others did not take", r.dcq.next(), d1.wantRecv(2, ri, 5, 0, q.qpn))
}

// TestDCResponderErrors: the DCT checks as an RC responder does (its
// access rights, PD, receive WQEs), and every error leaves it in RTR for
// the next request; the DCI gets a stream error.
func TestDCResponderErrors(t *testing.T) {
	r := newDCRig(t, "cx7", Options{})
	full := r.dct(dcKey1, remoteRW|ibAccessRemoteAtomic, 0x31)
	readOnly := r.dct(dcKey2, ibAccessRemoteRead, 0x32)
	writeOnly := r.dct(7, ibAccessRemoteWrite, 0x33)
	q := r.dci("dci_s8", 7)
	lk, rk, l, rm := r.lmr.LKey, r.rmr.RKey, addr(r.local), addr(r.remote)
	noAtomic, noAtomicMR := r.mr(4096, accessLocalWrite|accessRemoteWrite|accessRemoteRead)
	_ = noAtomic
	small := r.recv(16)
	for _, c := range []struct {
		what     string
		w        dcw
		syndrome uint8
	}{
		{"RDMA WRITE to a DCT without remote write", dcw{op: tOpRDMAWrite, hasRaddr: true, raddr: rm, rkey: rk, sges: []tsge{{8, lk, l}}}.to(readOnly), 0x12},
		{"RDMA READ from a DCT without remote read", dcw{op: tOpRDMARead, hasRaddr: true, raddr: rm, rkey: rk, sges: []tsge{{8, lk, l}}}.to(writeOnly), 0x12},
		{"an atomic to a DCT without atomics", dcw{op: tOpAtomicFA, atomic: true, raddr: rm, rkey: rk, swapAdd: 1, sges: []tsge{{8, lk, l}}}.to(readOnly), 0x12},
		{"an atomic at an address not 8-byte aligned", dcw{op: tOpAtomicFA, atomic: true, raddr: rm + 4, rkey: rk, swapAdd: 1, sges: []tsge{{8, lk, l}}}.to(full), 0x12},
		{"an atomic through an rkey without remote atomic", dcw{op: tOpAtomicCS, atomic: true, raddr: addr(noAtomic), rkey: noAtomicMR.RKey, sges: []tsge{{8, lk, l}}}.to(full), dcRemoteAccess},
		{"RDMA READ past the remote MR", dcw{op: tOpRDMARead, hasRaddr: true, raddr: rm + 1<<20 - 4, rkey: rk, sges: []tsge{{8, lk, l}}}.to(full), dcRemoteAccess},
		{"a SEND longer than the DCT's receive WQE", dcw{op: tOpSend, inline: make([]byte, 17)}.to(full), 0x12},
		{"a SEND from a bad lkey", dcw{op: tOpSend, sges: []tsge{{8, lk ^ 0xff, l}}}.to(full), 0x04},
	} {
		w := c.w
		w.fm, w.stream = tSignaled, 1
		idx := q.post(w)
		checkDC(t, c.what, r.cq.next(), q.wantErr(w.op, c.syndrome, idx[0]))
		if s := q.state(); s != StateRTS {
			t.Fatalf("%s: the DCI is in state %#x, want RTS", c.what, s)
		}
		if st := q.reset(1); st != prm.MLX5_CMD_STAT_OK {
			t.Fatalf("%s: reset: %v", c.what, st)
		}
	}
	checkDC(t, "the receive WQE too small", r.dcq.next(), full.wantRecvErr(0x01, small))
	for _, d := range []*dctT{full, readOnly, writeOnly} {
		ri := r.recv(dcRecvBytes)
		idx := q.post(dcw{op: tOpSend, fm: tSignaled, inline: []byte("still there")}.to(d))
		checkDC(t, fmt.Sprintf("SEND to DCT %#x after the errors", d.dctn), r.cq.next(), q.wantReq(tOpSend, idx[0], 0))
		checkDC(t, fmt.Sprintf("DCT %#x after the errors", d.dctn), r.dcq.next(), d.wantRecv(2, ri, 11, 0, q.qpn))
	}
}

// TestDCRNR: a DCT without receive WQEs answers with RNR NAKs; the DCI
// retries after the DCT's RNR timer, rnr_retry times, then completes with
// RNR_RETRY_EXC_ERR, a stream error.
func TestDCRNR(t *testing.T) {
	r := newDCRig(t, "cx7", Options{})
	d1 := r.dct(dcKey1, remoteRW, 0x31)
	q := r.dci("dci_s8", 1)
	idx := q.post(dcw{op: tOpSend, fm: tSignaled, stream: 2, inline: []byte("no WQE")}.to(d1))
	checkDC(t, "SEND to a DCT without receive WQEs", r.cq.next(), q.wantErr(tOpSend, 0x16, idx[0]))
	if s := q.state(); s != StateRTS {
		t.Fatalf("the DCI is in state %#x, want RTS", s)
	}
	// Forever (rnr_retry 7): the SEND waits for a receive WQE.
	q2 := r.dci("dci_basic", 7)
	idx = q2.post(dcw{op: tOpSend, fm: tSignaled, inline: []byte("waits")}.to(d1))
	r.cq.none(2 * time.Millisecond)
	ri := r.recv(dcRecvBytes)
	checkDC(t, "SEND after the receive WQE came", r.cq.next(), q2.wantReq(tOpSend, idx[0], 0))
	checkDC(t, "at the DCT", r.dcq.next(), d1.wantRecv(2, ri, 5, 0, q2.qpn))
}

// TestDCIStreamResetRefusals: the firmware's answers to RTS2RTS_QP with
// the stream channel's optional parameter (mlx5dv_dci_stream_id_reset's
// command) where there is nothing to reset.
func TestDCIStreamResetRefusals(t *testing.T) {
	r := newDCRig(t, "cx7", Options{})
	q := r.dci("dci_s8", 7)
	if st := q.reset(3); st != prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR {
		t.Errorf("reset of a stream not in error: %v, want BAD_RES_STATE_ERR", st)
	}
	if st := q.modify(resetCmd(q.qpn, 3)[:272]); st != prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR {
		t.Errorf("the command without its extension (272 bytes): %v, want BAD_INP_LEN_ERR", st)
	}
	// An RC QP in RTS.
	peer := r.qp(r.cq, r.cq, vqpOpts{typ: seam.QPTypeRC})
	rc := r.qp(r.cq, r.cq, vqpOpts{typ: seam.QPTypeRC})
	rc.connect(peer, remoteRW)
	out := make([]byte, 16)
	var fe *FirmwareError
	if err := r.d.ObjModify(rc.h, resetCmd(rc.qpn, 0), out); !errors.As(err, &fe) || fe.Cmd.Status != prm.MLX5_CMD_STAT_BAD_PARAM_ERR {
		t.Errorf("stream reset of an RC QP: %v, want BAD_PARAM_ERR", err)
	}
	// A DCI in INIT.
	c := oracleCmdOf(t, dcVectors, "setup/create_dci_s8", "QP", "QP_CREATE")
	cq, in := r.qpCmdOf(t, c, r.cq, r.cq)
	h, got, err := r.d.CreateQP(cq, in, make([]byte, 40))
	if err != nil {
		t.Fatal(err)
	}
	a := seam.QPAttr{State: QPStateInit, Port: 1}
	if err := r.d.ModifyQP(h, &a, maskState|maskPKey|maskPort, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.d.ObjModify(h, resetCmd(got.QPN, 0), out); !errors.As(err, &fe) || fe.Cmd.Status != prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR {
		t.Errorf("stream reset of a DCI in INIT: %v, want BAD_RES_STATE_ERR", err)
	}
	// As Linux 6.1 returns it from DEVX (cmd_status_to_err): EINVAL, what
	// libmlx5's mlx5dv_dci_stream_id_reset passes on.
	r2 := newDCRig(t, "cx7", Options{StatusErrno: true})
	q2 := r2.dci("dci_s8", 7)
	if err := r2.d.ObjModify(q2.h, resetCmd(q2.qpn, 0), out); !errors.Is(err, unix.EINVAL) {
		t.Errorf("stream reset of a stream not in error with StatusErrno: %v, want EINVAL", err)
	}
}

// TestDCIErroredAboveConcurrent: rdma-core's Mlx5DcStreamsRes makes its
// second DCI with log_num_concurent 2 and log_num_errored 3
// (tests/mlx5_base.py, generate_dci_attr: min of [2, 3] and the caps);
// nothing refuses more errored streams than stream channels.
func TestDCIErroredAboveConcurrent(t *testing.T) {
	r := newDCRig(t, "cx7", Options{})
	c := oracleCmdOf(t, dcVectors, "setup/create_dci_s8", "QP", "QP_CREATE")
	var u mlx5abi.Mlx5IbCreateQp
	decodeDrv(c.In["UHW_IN"], &u)
	u.DciStreams.LogNumConcurent, u.DciStreams.LogNumErrored = 2, 3
	q, in := r.qpCmdOf(t, oracleCmd{In: map[string][]byte{"UHW_IN": drv(&u), "TYPE": c.In["TYPE"], "CAP": c.In["CAP"]}}, r.cq, r.cq)
	if _, _, err := r.d.CreateQP(q, in, make([]byte, 40)); err != nil {
		t.Errorf("a DCI with 2^2 stream channels and 2^3 errored streams: %v", err)
	}
}

// TestDCPostSendLayout: ibv_post_send on a DCI writes no address vector
// (the oracle's post_send records): the device finds no DCI WQE there, a
// local QP operation error, which is the QP's, not a stream's.
func TestDCPostSendLayout(t *testing.T) {
	r := newDCRig(t, "cx7", Options{})
	q := r.dci("dci_s8", 7)
	var n int
	for _, rec := range dcRecords(t) {
		if !strings.HasPrefix(rec.Case, "post_send/") {
			continue
		}
		n++
		q.recover()
		b := rec.wqes(t)[0]
		idx := q.put(b)
		q.ring(idx)
		checkDC(t, rec.Case, r.cq.next(), q.wantErr(b[3], 0x02, idx))
		if s := q.state(); s != StateERR {
			t.Errorf("%s: the DCI is in state %#x, want ERR", rec.Case, s)
		}
	}
	if n != 3 {
		t.Errorf("%d post_send records, want 3", n)
	}
}

// TestDCKeyViolationsAndStreamState: a DCT counts the requests it dropped
// for their key (dctc.dc_access_key_violation_count, read here through
// DCTKeyViolations); DCIErroredStreams lists a DCI's channels in error;
// WQEErrors says why a WR failed, and not for the flushes.
func TestDCKeyViolationsAndStreamState(t *testing.T) {
	r := newDCRig(t, "cx7", Options{})
	d1 := r.dct(dcKey1, remoteRW, 0x31)
	q := r.dci("dci_s8", 7)
	wrong := dcw{op: tOpSend, fm: tSignaled, dctn: d1.dctn, key: dcKey2, inline: []byte("k")}
	w1, w3, w1b := wrong, wrong, wrong
	w1.stream, w3.stream, w1b.stream = 1, 3, 9
	idx := q.post(w1, w3, w1b)
	checkDC(t, "wrong key, stream 1", r.cq.next(), q.wantErr(tOpSend, dcRetryExc, idx[0]))
	checkDC(t, "wrong key, stream 3", r.cq.next(), q.wantErr(tOpSend, dcRetryExc, idx[1]))
	checkDC(t, "stream 9 (channel 1), flushed", r.cq.next(), q.wantErr(tOpSend, dcFlushStatus, idx[2]))
	if n, ok := r.d.DCTKeyViolations(d1.dctn); !ok || n != 2 {
		t.Errorf("DCT %#x key violations: %d, %v; want 2 (the flushed request never left)", d1.dctn, n, ok)
	}
	if _, ok := r.d.DCTKeyViolations(q.qpn); ok {
		t.Error("key violations of a DCI")
	}
	if ch, ok := r.d.DCIErroredStreams(q.qpn); !ok || fmt.Sprint(ch) != "[1 3]" {
		t.Errorf("errored stream channels %v, %v; want [1 3]", ch, ok)
	}
	if st := q.reset(1); st != prm.MLX5_CMD_STAT_OK {
		t.Fatal(st)
	}
	if ch, _ := r.d.DCIErroredStreams(q.qpn); fmt.Sprint(ch) != "[3]" {
		t.Errorf("errored stream channels after the reset of 1: %v, want [3]", ch)
	}
	if _, ok := r.d.DCIErroredStreams(d1.dctn); ok {
		t.Error("errored streams of a DCT")
	}
	errs := r.d.WQEErrors()
	if len(errs) != 2 || !strings.Contains(errs[0], "is not the DCT's") || !strings.Contains(errs[1], "stream channel 3 is in error until reset") {
		t.Errorf("WQE errors %q, want the two key violations", errs)
	}
	// Back to RESET, no channel is in error.
	q.recover()
	if ch, _ := r.d.DCIErroredStreams(q.qpn); len(ch) != 0 {
		t.Errorf("errored stream channels after RESET: %v", ch)
	}
}

// TestDCIRetryErrorTakesQP: with Options.DCIRetryErrorTakesQP a DCI whose
// request nothing answers goes to ERR whatever its streams; other errors
// stay stream errors.
func TestDCIRetryErrorTakesQP(t *testing.T) {
	r := newDCRig(t, "cx7", Options{DCIRetryErrorTakesQP: true})
	d1 := r.dct(dcKey1, remoteRW, 0x31)
	q := r.dci("dci_s8", 7)
	idx := q.post(dcw{op: tOpRDMAWrite, fm: tSignaled, stream: 1, hasRaddr: true, raddr: addr(r.remote), rkey: r.rmr.RKey ^ 0xff,
		sges: []tsge{{8, r.lmr.LKey, addr(r.local)}}}.to(d1))
	checkDC(t, "bad rkey", r.cq.next(), q.wantErr(tOpRDMAWrite, dcRemoteAccess, idx[0]))
	if s := q.state(); s != StateRTS {
		t.Fatalf("after a remote access error the DCI is in state %#x, want RTS", s)
	}
	idx = q.post(dcw{op: tOpSend, fm: tSignaled, stream: 2, dctn: 0xabcdef, key: dcKey1, inline: []byte("x")},
		dcw{op: tOpSend, fm: tSignaled, stream: 3, inline: []byte("x")}.to(d1))
	checkDC(t, "no DCT", r.cq.next(), q.wantErr(tOpSend, dcRetryExc, idx[0]))
	checkDC(t, "stream 3 flushed", r.cq.next(), q.wantErr(tOpSend, dcFlushStatus, idx[1]))
	if s := q.state(); s != StateERR {
		t.Errorf("after a retry error the DCI is in state %#x, want ERR", s)
	}
}

// TestDCILocalWQEsOnStreams: the WQEs that reach no DCT (UMR, NOP) belong
// to their stream channel too: libmlx5's LOCAL_INV (the dc vectors'
// wr/local_inv/signaled, on an mkey the model does not have) fails with a
// local protection error on channel 0, and a NOP there flushes, while
// channel 1 goes on.
func TestDCILocalWQEsOnStreams(t *testing.T) {
	r := newDCRig(t, "cx7", Options{})
	d1 := r.dct(dcKey1, remoteRW, 0x31)
	q := r.dci("dci_s8", 7)
	var inv []byte
	for _, rec := range dcRecords(t) {
		if rec.Case == "wr/local_inv/signaled" {
			inv = rec.wqes(t)[0]
		}
	}
	if inv == nil || inv[3] != opUMR {
		t.Fatalf("libmlx5's LOCAL_INV: %x", inv)
	}
	ri := r.recv(dcRecvBytes)
	li := q.put(inv)
	nop := make([]byte, 16)
	binary.BigEndian.PutUint32(nop[4:], 1)
	nop[11] = tSignaled
	ni := q.put(nop)
	idx := q.post(dcw{op: tOpSend, fm: tSignaled, stream: 1, inline: []byte("x")}.to(d1))
	checkDC(t, "LOCAL_INV of no mkey", r.cq.next(), q.wantErr(opUMR, 0x04, li))
	checkDC(t, "NOP on channel 0", r.cq.next(), q.wantErr(0, dcFlushStatus, ni))
	checkDC(t, "SEND on channel 1", r.cq.next(), q.wantReq(tOpSend, idx[0], 0))
	checkDC(t, "SEND on channel 1 at the DCT", r.dcq.next(), d1.wantRecv(2, ri, 1, 0, q.qpn))
	if s := q.state(); s != StateRTS {
		t.Errorf("the DCI is in state %#x, want RTS", s)
	}
}

// TestDCScale is an initiator reaching many targets through a few DCIs
// with streams: 4 DCIs of 2^3 stream channels (DCT j on channel j mod 8)
// write to 256 DCTs, and now and then one target fails (its requests go
// unanswered: TRANSPORT_RETRY_EXC_ERR). Only that target's channel
// flushes, in SQ order, every other WR completes; each failed channel is
// reset and its WRs are posted again; every WR completes once. With -short
// fewer rounds.
func TestDCScale(t *testing.T) {
	rounds := 150
	if testing.Short() {
		rounds = 15
	}
	const nDCT, nDCI, perRound, region = 256, 4, 24, 256
	r := newDCRig(t, "cx7", Options{})
	dcts := make([]*dctT, nDCT)
	for i := range dcts {
		dcts[i] = r.dct(uint64(i)*0x9e3779b97f4a7c15+1, remoteRW, uint32(0x100+i))
	}
	c := oracleCmdOf(t, dcVectors, "setup/create_dci_s8", "QP", "QP_CREATE")
	dcis := make([]*dciT, nDCI)
	for i := range dcis {
		dcis[i] = r.dciOn(r.vrig.cq(255, nil), c.In["UHW_IN"], c, 7)
	}
	type work struct{ id, dct int }
	rng := rand.New(rand.NewPCG(16, 256))
	pending := make([][]work, nDCI)
	done := map[int]bool{}
	ids, failures, flushes := 0, 0, 0
	start := time.Now()
	for round := 0; round < rounds || slices.ContainsFunc(pending, func(p []work) bool { return len(p) > 0 }); round++ {
		for i := range dcis {
			for range perRound * min(1, rounds-round) {
				pending[i] = append(pending[i], work{ids, rng.IntN(nDCT)})
				ids++
			}
		}
		// At random moments one target, one the round writes to, fails.
		failing := -1
		if p := pending[rng.IntN(nDCI)]; round < rounds && len(p) > 0 && rng.IntN(3) == 0 {
			failing = p[rng.IntN(len(p))].dct
		}
		for i, q := range dcis {
			batch := pending[i]
			pending[i] = nil
			if len(batch) == 0 {
				continue
			}
			ws := make([]dcw, len(batch))
			for k, w := range batch {
				d := dcts[w.dct]
				key := d.key
				if w.dct == failing {
					key = ^key
				}
				// Each WR writes its id into its own place of the remote MR.
				binary.BigEndian.PutUint64(r.local[w.id%4096*8:], uint64(w.id))
				ws[k] = dcw{op: tOpRDMAWrite, fm: tSignaled, stream: uint16(w.dct % 8), dctn: d.dctn, key: key, hasRaddr: true,
					raddr: addr(r.remote) + uint64(w.id%4096*region), rkey: r.rmr.RKey, sges: []tsge{{8, r.lmr.LKey, addr(r.local) + uint64(w.id%4096*8)}}}
			}
			idx := q.post(ws...)
			errored := map[uint16]bool{}
			for k, w := range batch {
				s := uint16(w.dct % 8)
				var want []byte
				switch {
				case errored[s]:
					want = q.wantErr(tOpRDMAWrite, dcFlushStatus, idx[k])
					flushes++
				case w.dct == failing:
					want = q.wantErr(tOpRDMAWrite, dcRetryExc, idx[k])
					errored[s] = true
					failures++
				default:
					want = q.wantReq(tOpRDMAWrite, idx[k], 0)
				}
				got := q.cq.next()
				checkDC(t, fmt.Sprintf("round %d DCI %d WR %d (DCT %d, stream %d)", round, i, w.id, w.dct, s), got, want)
				if got[63]>>4 != 0 {
					pending[i] = append(pending[i], w)
					continue
				}
				if done[w.id] {
					t.Fatalf("WR %d completed twice", w.id)
				}
				done[w.id] = true
				if v := binary.BigEndian.Uint64(r.remote[w.id%4096*region:]); v != uint64(w.id) {
					t.Fatalf("WR %d: the remote memory holds %d", w.id, v)
				}
			}
			for s := range errored {
				if st := q.reset(s); st != prm.MLX5_CMD_STAT_OK {
					t.Fatalf("round %d DCI %d: reset of stream %d: %v", round, i, s, st)
				}
			}
			if st := q.state(); st != StateRTS {
				t.Fatalf("round %d: DCI %d in state %#x", round, i, st)
			}
		}
	}
	if len(done) != ids {
		t.Errorf("%d of %d WRs completed", len(done), ids)
	}
	if failures == 0 || flushes == 0 {
		t.Errorf("%d failures and %d flushes: the test saw no stream error", failures, flushes)
	}
	t.Logf("%d DCTs, %d DCIs of 8 streams: %d WRs, %d retry errors, %d flushes, in %v", nDCT, nDCI, ids, failures, flushes, time.Since(start))
}
