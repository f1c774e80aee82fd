package mlx5_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
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
		if err := r.srq.PostRecv(id+i, []mlx5.SGE{{Addr: r.addr(off + 256*i), Length: 256, LKey: r.mr.LKey}}); err != nil {
			t.Fatal(err)
		}
	}
}

// addr is the address of byte off of the rig's buffer.
func (r *dcRig) addr(off uint64) uint64 { return r.mr.Addr + off }

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
		SGL: []mlx5.SGE{{Addr: r.addr(0x100), Length: 64, LKey: r.mr.LKey}},
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
