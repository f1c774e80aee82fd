package mlx5

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// rxe's driver-data responses (<rdma/rdma_user_rxe.h>), which rxe needs
// room for.
const (
	labRXECreateCQResp  = 16
	labRXECreateQPResp  = 32
	labRXECreateSRQResp = 24
)

// The verbs half of kernelDevice for real, on the lab's rxe0: no mlx5
// driver data (rxe takes its own), but the generic calls, the caller's user
// handles coming back in async events, the GID table's netdev MACs, the
// handle bookkeeping and the kernel's refusals.
func TestLabKernelVerbsOnRXE(t *testing.T) {
	labenv.Require(t)
	uctx, err := uverbs.Open(labenv.RXEDevice, &uverbs.Options{DriverID: uverbs.DriverRXE})
	if err != nil {
		t.Fatal(err)
	}
	defer uctx.Close()
	k := &kernelDevice{ctx: uctx}

	// The device query: rxe answers the generic attributes (with its ODP
	// caps on 7.x, moderation caps 0 and 0) and has no driver data for
	// them.
	da, err := uctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if a, err := k.QueryDevice(nil); err != nil || a != (seam.DeviceAttr{AtomicCap: uint32(da.AtomicCap), HCACoreClock: da.HCACoreClock, NodeGUID: da.NodeGUID, CapFlags: uint64(da.DeviceCapFlagsEx),
		ODP:               seam.ODPCaps{General: da.ODPCaps.General, RC: da.ODPCaps.RC, UC: da.ODPCaps.UC, UD: da.ODPCaps.UD, XRC: da.XRCODPCaps},
		CQModerationCount: da.CQModerationCaps.MaxCQCount, CQModerationPeriod: da.CQModerationCaps.MaxCQPeriod}) || a.NodeGUID == 0 {
		t.Errorf("query device: %+v, %v; uverbs says atomic cap %v, core clock %d, node GUID %#x", a, err, da.AtomicCap, da.HCACoreClock, da.NodeGUID)
	}
	// 6.1 and 6.12 refuse the driver response (EINVAL); 7.x zeroes it
	// (ib_respond_empty_udata; uverbs' TestLabQueryDeviceDriverData checks
	// the bytes).
	if _, err := k.QueryDevice(make([]byte, 104)); err != nil && !errors.Is(err, unix.EINVAL) {
		t.Errorf("query device with mlx5's driver response on rxe: %v, want EINVAL or success", err)
	}
	pa, err := k.QueryPort(1)
	if err != nil || pa.State != 4 || pa.LinkLayer != 2 {
		t.Fatalf("port 1: %+v, %v; want ACTIVE on Ethernet", pa, err)
	}
	ifi, err := net.InterfaceByName(labenv.Netdev)
	if err != nil {
		t.Fatal(err)
	}
	gids, err := k.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	var gid seam.GIDEntry
	for _, g := range gids {
		if g.Type == 2 && g.GID[10] == 0xff && g.GID[11] == 0xff { // RoCE v2, IPv4-mapped
			gid = g
		}
		if g.Type != 0 && !bytes.Equal(g.MAC[:], ifi.HardwareAddr) {
			t.Errorf("GID %x: MAC %x, %s has %v", g.GID, g.MAC, ifi.Name, ifi.HardwareAddr)
		}
	}
	if gid.Type == 0 {
		t.Fatalf("no IPv4-mapped RoCE v2 GID in %+v", gids)
	}

	pd, _, err := k.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	const cqHandle, qpA, qpB = 0xc0ffee, 0x5555_0000_aaaa, 0x5555_0000_bbbb
	cq, cqe, err := k.CreateCQ(seam.CQCreate{CQE: 64, UserHandle: cqHandle}, nil, make([]byte, labRXECreateCQResp))
	if err != nil || cqe < 64 {
		t.Fatalf("create cq: %d entries, %v", cqe, err)
	}
	qp := func(uh uint64) (seam.Handle, uint32) {
		h, c, err := k.CreateQP(seam.QPCreate{Type: seam.QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: seam.NoHandle,
			Cap: seam.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}, UserHandle: uh},
			nil, make([]byte, labRXECreateQPResp))
		if err != nil {
			t.Fatal(err)
		}
		return h, c.QPN
	}
	a, qpnA := qp(qpA)
	b, qpnB := qp(qpB)
	av := seam.AHAttr{IsGlobal: true, Port: 1, GRH: seam.GlobalRoute{DGID: gid.GID, SGIDIndex: uint8(gid.Index), HopLimit: 64}}
	connect := func(h seam.Handle, dest uint32) {
		steps := []struct {
			a    seam.QPAttr
			mask uverbs.QPAttrMask
		}{
			{seam.QPAttr{State: seam.QPStateInit, Port: 1, AccessFlags: uint32(uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead)},
				uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
			{seam.QPAttr{State: seam.QPStateRTR, PathMTU: 3, DestQPN: dest, RQPSN: 100, MaxDestRdAtomic: 1, MinRNRTimer: 12, AH: av},
				uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
					uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer},
			{seam.QPAttr{State: seam.QPStateRTS, SQPSN: 100, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
				uverbs.QPAttrState | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry |
					uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRdAtomic},
		}
		for _, s := range steps {
			if err := k.ModifyQP(h, &s.a, uint32(s.mask), nil, nil); err != nil {
				t.Fatalf("QP %d to %d: %v", h, s.a.State, err)
			}
		}
	}
	connect(a, qpnB)
	connect(b, qpnA)
	got, err := k.QueryQP(a, uint32(uverbs.QPAttrState|uverbs.QPAttrDestQPN|uverbs.QPAttrAV))
	if err != nil || got.State != seam.QPStateRTS || got.DestQPN != qpnB || got.AH.GRH.DGID != gid.GID {
		t.Fatalf("query: %+v, %v", got, err)
	}
	// RTS -> SQD: the SQ_DRAINED event names a by the user handle the
	// seam gave it.
	sqd := seam.QPAttr{State: seam.QPStateSQD, EnSQDAsyncNotify: true}
	if err := k.ModifyQP(a, &sqd, uint32(uverbs.QPAttrState|uverbs.QPAttrEnSQDAsyncNotify), nil, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := k.NextAsyncEvent(ctx)
		if err != nil {
			t.Fatalf("waiting for SQ_DRAINED: %v", err)
		}
		t.Logf("event %+v", ev)
		if ev.Type == uint32(uverbs.EventSQDrained) {
			if ev.Element != qpA {
				t.Errorf("SQ_DRAINED for %#x, the QP's user handle is %#x", ev.Element, uint64(qpA))
			}
			break
		}
	}
	// SQD -> RTS by the extended command with a driver response.
	if err := k.ModifyQP(a, &seam.QPAttr{State: seam.QPStateRTS}, uint32(uverbs.QPAttrState), nil, make([]byte, 8)); err != nil {
		t.Fatalf("SQD -> RTS (extended): %v", err)
	}

	srq, _, err := k.CreateSRQ(seam.SRQCreate{PD: pd, MaxWR: 32, MaxSGE: 1, UserHandle: 0x5e}, nil, make([]byte, labRXECreateSRQResp))
	if err != nil {
		t.Fatal(err)
	}
	// mlx5 arms the limit with no driver data; rxe wants its own
	// (rxe_modify_srq_cmd), so here the kernel, having got the command,
	// refuses it (uverbs' TestLabObjects arms it with rxe's data).
	if err := k.ModifySRQ(srq, 4); !errors.Is(err, unix.EINVAL) {
		t.Errorf("arm the SRQ limit without rxe's driver data: %v, want rxe's EINVAL", err)
	}
	ah, err := k.CreateAH(pd, &av, 0x4a4a, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The kernel refuses to destroy a CQ its QPs use: the CQ stays.
	if err := k.DestroyCQ(cq); !errors.Is(err, unix.EBUSY) {
		t.Errorf("destroy a CQ in use: %v, want EBUSY", err)
	}
	if err := k.ModifyQP(a, &seam.QPAttr{State: 9}, uint32(uverbs.QPAttrState), nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("state 9: %v", err)
	}
	for _, d := range []struct {
		name string
		f    func() error
	}{
		{"ah", func() error { return k.DestroyAH(ah) }},
		{"srq", func() error { return k.DestroySRQ(srq) }},
		{"qp a", func() error { return k.DestroyQP(a) }},
		{"qp b", func() error { return k.DestroyQP(b) }},
		{"cq", func() error { return k.DestroyCQ(cq) }},
		{"pd", func() error { return k.DeallocPD(pd) }},
	} {
		if err := d.f(); err != nil {
			t.Errorf("destroy %s: %v", d.name, err)
		}
	}
	if err := k.DestroyQP(a); !errors.Is(err, unix.ENOENT) {
		t.Errorf("destroy a destroyed QP: %v", err)
	}
}
