package model

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/prm"
)

// A DCI's stream channels run apart (docs/MODEL.md, "DC", "Channels run
// apart"): each in order, none waiting for another.

// streamRig is a DC rig with one DCT whose SRQ starts empty and a DCI of
// 2^3 stream channels and 2^2 errored streams (libmlx5's dci_s8) with
// rnr_retry rnrRetry (7: forever).
type streamRig struct {
	*dcRig
	d1 *dctT
	q  *dciT
}

func newStreamRig(t *testing.T, profile string, opt Options, rnrRetry uint8) *streamRig {
	r := newDCRig(t, profile, opt)
	return &streamRig{dcRig: r, d1: r.dct(dcKey1, remoteRW, 0x31), q: r.dci("dci_s8", rnrRetry)}
}

// newSlowStreamRig is newStreamRig with a DCT whose RNR NAK timer is
// 655 ms: a SEND that waits is not read again for that long, so a test
// can write over its WQEBBs while the device does not read them.
func newSlowStreamRig(t *testing.T, opt Options) *streamRig {
	r := newDCRig(t, "cx7", opt)
	return &streamRig{dcRig: r, d1: r.dctTimer(dcKey1, remoteRW, 0x31, 0), q: r.dci("dci_s8", 7)}
}

// send is a signaled SEND on stream s: it waits while the DCT's SRQ is
// empty.
func (r *streamRig) send(s uint16) dcw {
	return dcw{op: tOpSend, fm: tSignaled, stream: s, inline: []byte("waits for a receive WQE")}.to(r.d1)
}

// write is a signaled RDMA WRITE of 64 bytes on stream s to place k of
// the remote MR, with rkey (the MR's, or not).
func (r *streamRig) write(s uint16, k int, rkey uint32) dcw {
	return dcw{op: tOpRDMAWrite, fm: tSignaled, stream: s, hasRaddr: true, raddr: addr(r.remote) + uint64(64*k), rkey: rkey,
		sges: []tsge{{64, r.lmr.LKey, addr(r.local) + uint64(64*k)}}}.to(r.d1)
}

// hw is QUERY_QP's state and hw_sq_wqebb_counter of the DCI.
func (r *streamRig) hw(t *testing.T) (uint8, uint16) {
	t.Helper()
	out := prm.QueryQpOut.Layout().New()
	if err := r.d.ObjQuery(r.q.h, transitionInQuery(r.q.qpn), out); err != nil {
		t.Fatal(err)
	}
	qpc := prm.QueryQpOut.Qpc
	return uint8(prm.Qpc.State.At(qpc).Get(out)), uint16(prm.Qpc.HwSqWqebbCounter.At(qpc).Get(out))
}

// noFaults fails the test if the model saw the driver do something wrong.
func (r *streamRig) noFaults(t *testing.T) {
	t.Helper()
	if f := r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}

// TestDCIChannelsRunApart: a SEND whose DCT has no receive WQE (RNR NAKs,
// retried forever) holds its channel, and the WRs posted behind it on the
// same channel, but not the other channels: their WRs complete at once,
// out of send queue order (mlx5dv_create_qp(3): streams "handled by HW"
// in parallel, each stream's work requests in order). The hardware's
// consumer counter stays at the waiting WQE. When the receive WQE comes,
// the channel runs, in order.
func TestDCIChannelsRunApart(t *testing.T) {
	for _, p := range []string{"cx6dx", "cx7"} {
		t.Run(p, func(t *testing.T) {
			r := newStreamRig(t, p, Options{}, 7)
			q, rk := r.q, r.rmr.RKey
			idx := q.post(r.send(0), r.write(1, 0, rk), r.write(0, 1, rk), r.write(2, 2, rk), r.write(9, 3, rk))
			checkDC(t, "channel 1 past channel 0's wait", r.cq.next(), q.wantReq(tOpRDMAWrite, idx[1], 0))
			checkDC(t, "channel 2", r.cq.next(), q.wantReq(tOpRDMAWrite, idx[3], 0))
			checkDC(t, "stream id 9 (channel 1)", r.cq.next(), q.wantReq(tOpRDMAWrite, idx[4], 0))
			r.cq.none(2 * time.Millisecond) // channel 0's SEND, and its WRITE behind it, wait
			if st, ci := r.hw(t); st != StateRTS || ci != idx[0] {
				t.Errorf("QUERY_QP: state %#x, hw_sq_wqebb_counter %d; want RTS, %d (the WQE that waits)", st, ci, idx[0])
			}
			for lap := range 3 {
				more := q.post(r.write(1, 4+lap, rk), r.write(3, 8+lap, rk))
				checkDC(t, fmt.Sprintf("channel 1, lap %d", lap), r.cq.next(), q.wantReq(tOpRDMAWrite, more[0], 0))
				checkDC(t, fmt.Sprintf("channel 3, lap %d", lap), r.cq.next(), q.wantReq(tOpRDMAWrite, more[1], 0))
			}
			ri := r.recv(dcRecvBytes)
			checkDC(t, "channel 0's SEND once a receive WQE came", r.cq.next(), q.wantReq(tOpSend, idx[0], 0))
			checkDC(t, "channel 0's WRITE behind it", r.cq.next(), q.wantReq(tOpRDMAWrite, idx[2], 0))
			checkDC(t, "the SEND at the DCT", r.dcq.next(), r.d1.wantRecv(2, ri, 23, 0, q.qpn))
			if st, ci := r.hw(t); st != StateRTS || ci != q.pi {
				t.Errorf("QUERY_QP: state %#x, hw_sq_wqebb_counter %d; want RTS, %d (all ran)", st, ci, q.pi)
			}
			r.noFaults(t)
		})
	}
}

// TestDCIRNRRetriesExceededOnOneChannel: with rnr_retry 1 the waiting
// SEND fails with RNR_RETRY_EXC_ERR after its retry, a stream error of its
// channel (its WRITE behind it flushes); the other channel completed
// before it and goes on; the QP stays in RTS. The DCT's RNR NAK timer is
// 655 ms, so that the other channel's WRITE surely runs during the wait
// however late the model's poller takes the doorbell (with a 10 us timer,
// a poller delayed by a loaded machine found the retry due first).
func TestDCIRNRRetriesExceededOnOneChannel(t *testing.T) {
	dc := newDCRig(t, "cx7", Options{})
	r := &streamRig{dcRig: dc, d1: dc.dctTimer(dcKey1, remoteRW, 0x31, 0), q: dc.dci("dci_s8", 1)}
	q, rk := r.q, r.rmr.RKey
	idx := q.post(r.send(2), r.write(2, 0, rk), r.write(5, 1, rk))
	checkDC(t, "channel 5", r.cq.next(), q.wantReq(tOpRDMAWrite, idx[2], 0))
	checkDC(t, "channel 2's SEND, out of RNR retries", r.cq.next(), q.wantErr(tOpSend, 0x16, idx[0]))
	checkDC(t, "channel 2's WRITE, flushed", r.cq.next(), q.wantErr(tOpRDMAWrite, dcFlushStatus, idx[1]))
	more := q.post(r.write(5, 2, rk))
	checkDC(t, "channel 5 again", r.cq.next(), q.wantReq(tOpRDMAWrite, more[0], 0))
	if st, _ := r.hw(t); st != StateRTS {
		t.Errorf("the DCI is in state %#x, want RTS", st)
	}
	if ch, _ := r.d.DCIErroredStreams(q.qpn); fmt.Sprint(ch) != "[2]" {
		t.Errorf("errored channels %v, want [2]", ch)
	}
	r.noFaults(t)
}

// TestDCIErrorFlushesEveryChannel: when the QP goes to ERR, by the
// errored-stream limit (2^2 channels in error) or by a QP error (a DCI
// WQE without an address vector), every WQE not run, of every channel,
// waiting or behind a waiting one, completes with WR_FLUSH_ERR in send
// queue order; RESET and RTS start the channels over.
func TestDCIErrorFlushesEveryChannel(t *testing.T) {
	for _, how := range []string{"errored-stream limit", "QP error"} {
		t.Run(how, func(t *testing.T) {
			r := newStreamRig(t, "cx7", Options{}, 7)
			q, rk := r.q, r.rmr.RKey
			bad := rk ^ 0xff
			idx := q.post(r.send(0), r.send(1), r.write(0, 0, rk), r.write(1, 1, rk))
			r.cq.none(time.Millisecond) // channels 0 and 1 wait
			if how == "QP error" {
				noAV := make([]byte, 16)
				noAV[3] = tOpSend
				binary.BigEndian.PutUint32(noAV[4:], 1) // ds 1: no address vector
				noAV[10], noAV[11] = 5, tSignaled       // stream 5
				e := q.put(noAV)
				late := q.post(r.write(6, 6, rk))
				idx = append(idx, late[0])
				checkDC(t, "a WQE without an address vector", r.cq.next(), q.wantErr(tOpSend, 0x02, e))
			} else {
				more := q.post(r.write(2, 2, bad), r.write(3, 3, bad), r.write(4, 4, bad), r.write(5, 5, bad), r.write(6, 6, rk))
				idx = append(idx, more[4])
				for i, e := range more[:4] {
					checkDC(t, fmt.Sprintf("error on channel %d", i+2), r.cq.next(), q.wantErr(tOpRDMAWrite, dcRemoteAccess, e))
				}
			}
			ops := []uint8{tOpSend, tOpSend, tOpRDMAWrite, tOpRDMAWrite, tOpRDMAWrite}
			for i, c := range idx {
				checkDC(t, fmt.Sprintf("WQE %d flushed", c), r.cq.next(), q.wantErr(ops[i], dcFlushStatus, c))
			}
			r.cq.none(time.Millisecond)
			if st, ci := r.hw(t); st != StateERR || ci != q.pi {
				t.Errorf("QUERY_QP: state %#x, hw_sq_wqebb_counter %d; want ERR, %d", st, ci, q.pi)
			}
			late := q.post(r.write(7, 7, rk))
			checkDC(t, "posted in ERR", r.cq.next(), q.wantErr(tOpRDMAWrite, dcFlushStatus, late[0]))
			q.recover()
			r.recv(dcRecvBytes)
			again := q.post(r.send(0), r.write(1, 1, rk))
			got := [][]byte{r.cq.next(), r.cq.next()}
			slices.SortFunc(got, func(a, b []byte) int {
				return int(binary.BigEndian.Uint16(a[60:])) - int(binary.BigEndian.Uint16(b[60:]))
			})
			checkDC(t, "channel 0 after the recovery", got[0], q.wantReq(tOpSend, again[0], 0))
			checkDC(t, "channel 1 after the recovery", got[1], q.wantReq(tOpRDMAWrite, again[1], 0))
			r.noFaults(t)
		})
	}
}

// seededOrder posts 16 RDMA WRITEs on 4 channels with one doorbell on a
// context with opt and returns the counters of their completions in the
// order they came, after checking each channel's order.
func seededOrder(t *testing.T, opt Options) (got, sq []uint16) {
	t.Helper()
	r := newStreamRig(t, "cx7", opt, 7)
	var ws []dcw
	for i := range 16 {
		ws = append(ws, r.write(uint16(i*5%4), i, r.rmr.RKey))
	}
	sq = r.q.post(ws...)
	last := map[uint16]int{}
	for range ws {
		c := r.cq.next()
		if c[63]>>4 != 0 {
			t.Fatalf("CQE %x", c)
		}
		at := binary.BigEndian.Uint16(c[60:])
		i := slices.Index(sq, at)
		ch := uint16(i * 5 % 4)
		if p, ok := last[ch]; ok && p > i {
			t.Errorf("channel %d: WQE %d completed after WQE %d", ch, sq[p], at)
		}
		last[ch] = i
		got = append(got, at)
	}
	r.cq.none(time.Millisecond)
	r.noFaults(t)
	return got, sq
}

// TestDCIStreamOrderSeeded: with DCIStreamsSeeded the channels' WQEs
// interleave as the seed draws them: each channel in order, the send queue
// not; the same seed gives the same order; in order (the default) is the
// send queue's order.
func TestDCIStreamOrderSeeded(t *testing.T) {
	inOrder, sq := seededOrder(t, Options{})
	if !slices.Equal(inOrder, sq) {
		t.Errorf("in order: %v, want the send queue's %v", inOrder, sq)
	}
	outOfOrder := 0
	orders := map[string]bool{}
	for seed := range uint64(4) {
		opt := Options{DCIStreamOrder: DCIStreamOrder{Policy: DCIStreamsSeeded, Seed: seed}}
		a, _ := seededOrder(t, opt)
		b, _ := seededOrder(t, opt)
		if !slices.Equal(a, b) {
			t.Errorf("seed %d: %v, then %v", seed, a, b)
		}
		if !slices.Equal(a, sq) {
			outOfOrder++
		}
		orders[fmt.Sprint(a)] = true
	}
	if outOfOrder == 0 || len(orders) < 2 {
		t.Errorf("4 seeds: %d orders not the send queue's, %d different orders", outOfOrder, len(orders))
	}
	if _, err := NewWithOptions("cx7", Options{DCIStreamOrder: DCIStreamOrder{Policy: 9}}); err == nil || !strings.Contains(err.Error(), "unknown policy") {
		t.Errorf("an unknown policy: %v", err)
	}
}

// TestDCIOverwriteBeforeRun: a driver that frees the WQEBBs of a WQE
// that waits (its channel waits) and writes the next lap's WQE over them.
// By default the device reads a WQE when it runs it: the control segment
// changed since the fetch, a fault, and the QP goes to ERR. With
// DCIReadAtFetch it copied the WQE at the fetch: what waits runs as
// posted.
func TestDCIOverwriteBeforeRun(t *testing.T) {
	for _, atFetch := range []bool{false, true} {
		t.Run(fmt.Sprintf("DCIReadAtFetch=%v", atFetch), func(t *testing.T) {
			r := newSlowStreamRig(t, Options{DCIReadAtFetch: atFetch})
			q, rk := r.q, r.rmr.RKey
			idx := q.post(r.send(0), r.write(1, 0, rk))
			checkDC(t, "channel 1", r.cq.next(), q.wantReq(tOpRDMAWrite, idx[1], 0))
			n := len(q.sq) / sendWQEBB
			over := r.write(1, 1, rk).encode(r.av, q.qpn, idx[0]+uint16(n))
			copy(q.sq[sendWQEBB*(int(idx[0])&(n-1)):], over)
			ri := r.recv(dcRecvBytes)
			if !atFetch {
				checkDC(t, "the overwritten WQE", r.cq.next(), q.wantErr(tOpSend, 0x02, idx[0]))
				if f := r.d.Faults(); len(f) != 1 || !strings.Contains(f[0], fmt.Sprintf("the WQE at counter %d has wqe_index %d, not %d, since the device fetched it", idx[0], idx[0]+uint16(n), idx[0])) {
					t.Errorf("faults %q", f)
				}
				if st, _ := r.hw(t); st != StateERR {
					t.Errorf("the DCI is in state %#x, want ERR", st)
				}
				r.dcq.none(time.Millisecond)
				return
			}
			checkDC(t, "the SEND as posted", r.cq.next(), q.wantReq(tOpSend, idx[0], 0))
			checkDC(t, "the SEND at the DCT", r.dcq.next(), r.d1.wantRecv(2, ri, 23, 0, q.qpn))
			r.noFaults(t)
		})
	}
}

// TestDCIRingIsTheDevicesUntilRun: by default the WQEBBs from the
// earliest WQE not run are the device's: a send counter more than the
// ring past it is a fault (and nothing more is fetched). With
// DCIReadAtFetch they are the device's from the fetch counter only.
func TestDCIRingIsTheDevicesUntilRun(t *testing.T) {
	for _, atFetch := range []bool{false, true} {
		t.Run(fmt.Sprintf("DCIReadAtFetch=%v", atFetch), func(t *testing.T) {
			r := newSlowStreamRig(t, Options{DCIReadAtFetch: atFetch})
			q, rk := r.q, r.rmr.RKey
			n := len(q.sq) / sendWQEBB
			idx := q.post(r.send(0))
			k := 0
			for int(q.pi-idx[0]) < n {
				more := q.post(r.write(1, k, rk))
				checkDC(t, fmt.Sprintf("channel 1, WRITE %d", k), r.cq.next(), q.wantReq(tOpRDMAWrite, more[0], 0))
				k++
			}
			r.noFaults(t)
			over := q.post(r.write(1, k, rk)) // over the SEND's WQEBBs
			if !atFetch {
				want := fmt.Sprintf("the send counter %d is %d WQEBBs past the earliest WQE not run, %d; the ring has %d", q.pi, q.pi-idx[0], idx[0], n)
				f := r.d.Faults()
				for end := time.Now().Add(mustCome); len(f) == 0 && time.Now().Before(end); f = r.d.Faults() {
					time.Sleep(20 * time.Microsecond)
				}
				if len(f) == 0 || !strings.Contains(f[0], want) {
					t.Errorf("faults %q, want %q", f, want)
				}
				r.cq.none(time.Millisecond) // nothing past the fault was fetched
				return
			}
			checkDC(t, "the WRITE over the SEND's WQEBBs", r.cq.next(), q.wantReq(tOpRDMAWrite, over[0], 0))
			ri := r.recv(dcRecvBytes)
			checkDC(t, "the SEND, copied at its fetch", r.cq.next(), q.wantReq(tOpSend, idx[0], 0))
			checkDC(t, "the SEND at the DCT", r.dcq.next(), r.d1.wantRecv(2, ri, 23, 0, q.qpn))
			r.noFaults(t)
		})
	}
}
