package flows

import (
	"slices"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
)

// Basic runs the plain RC operations over a loopback pair: SEND with
// immediate data into a posted receive, RDMA WRITE, RDMA READ, and an RDMA
// WRITE with a wrong rkey, which fails with a remote access error and
// flushes the next work request.
func Basic(t *testing.T, c *mlx5.Context, objs Objects) {
	l := NewLoopback(t, c, objs)
	const n = 4096
	src, srcMR := buffer(t, l.PD, n, mlx5.AccessLocalWrite)
	for i := range src {
		src[i] = byte(i * 3)
	}
	dst, dstMR := buffer(t, l.PD, n, mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead)
	back, backMR := buffer(t, l.PD, n, mlx5.AccessLocalWrite)

	// SEND with immediate into B's receive.
	if err := l.B.PostRecv(100, []mlx5.SGE{{Addr: dstMR.Addr(), Length: n, LKey: dstMR.LKey()}}); err != nil {
		t.Fatal(err)
	}
	if err := l.A.PostSend(&mlx5.SendWR{WrID: 1, Opcode: mlx5.OpSendImm, Flags: mlx5.SendSignaled, Imm: 0xcafe,
		SGL: []mlx5.SGE{{Addr: srcMR.Addr(), Length: 1000, LKey: srcMR.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	for _, wc := range l.Wait(t, 2) {
		switch {
		case wc.Status != mlx5.WCSuccess:
			t.Errorf("send: %+v", wc)
		case wc.WrID == 1 && (wc.Opcode != mlx5.WCSend || wc.QPN != l.A.QPN()):
			t.Errorf("send completion %+v", wc)
		case wc.WrID == 100 && (wc.Opcode != mlx5.WCRecv || wc.ByteLen != 1000 || !wc.WithImm || wc.Imm != 0xcafe || wc.QPN != l.B.QPN()):
			t.Errorf("receive completion %+v", wc)
		case wc.WrID != 1 && wc.WrID != 100:
			t.Errorf("completion of an unknown work request %+v", wc)
		}
	}
	if !slices.Equal(dst[:1000], src[:1000]) {
		t.Errorf("send: received data differs")
	}

	// RDMA WRITE, then READ it back.
	write(t, l, mlx5.SendWR{WrID: 2, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: dstMR.Addr(), RKey: dstMR.RKey(),
		SGL: []mlx5.SGE{{Addr: srcMR.Addr(), Length: n, LKey: srcMR.LKey()}}})
	if !slices.Equal(dst, src) {
		t.Errorf("RDMA WRITE: data differs")
	}
	if err := l.A.PostSend(&mlx5.SendWR{WrID: 3, Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled, RemoteAddr: dstMR.Addr(), RKey: dstMR.RKey(),
		SGL: []mlx5.SGE{{Addr: backMR.Addr(), Length: n, LKey: backMR.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	if wc := l.Wait(t, 1)[0]; wc.Status != mlx5.WCSuccess || wc.Opcode != mlx5.WCRDMARead || wc.ByteLen != n {
		t.Errorf("RDMA READ completion %+v", wc)
	}
	if !slices.Equal(back, src) {
		t.Errorf("RDMA READ: data differs")
	}

	// A wrong rkey: remote access error, then the QP flushes.
	for i, wr := range []mlx5.SendWR{
		{WrID: 4, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: dstMR.Addr(), RKey: dstMR.RKey() ^ 0xff00,
			SGL: []mlx5.SGE{{Addr: srcMR.Addr(), Length: 64, LKey: srcMR.LKey()}}},
		{WrID: 5, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: dstMR.Addr(), RKey: dstMR.RKey(),
			SGL: []mlx5.SGE{{Addr: srcMR.Addr(), Length: 64, LKey: srcMR.LKey()}}},
	} {
		if err := l.A.PostSend(&wr); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	var got []mlx5.Completion
	for len(got) < 2 {
		got = append(got, l.Wait(t, 1)...)
	}
	// B's side of the failed request may complete too (its receive queue
	// is flushed when it enters the error state); keep A's.
	got = slices.DeleteFunc(got, func(wc mlx5.Completion) bool { return wc.QPN != l.A.QPN() })
	for len(got) < 2 {
		wc := l.Wait(t, 1)[0]
		if wc.QPN == l.A.QPN() {
			got = append(got, wc)
		}
	}
	if got[0].WrID != 4 || got[0].Status != mlx5.WCRemAccessErr {
		t.Errorf("wrong rkey: %+v, want a remote access error", got[0])
	}
	if got[1].WrID != 5 || got[1].Status != mlx5.WCWRFlushErr {
		t.Errorf("after the error: %+v, want a flush", got[1])
	}
}
