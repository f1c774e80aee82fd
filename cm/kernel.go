package cm

import (
	"context"
	"net/netip"
	"time"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/ucma"
)

// kernelCM is the seam over the kernel's rdma_ucm: package ucma's File.
type kernelCM struct{ f *ucma.File }

func openKernel() (seam.CM, error) {
	f, err := ucma.Open()
	if err != nil {
		return nil, err
	}
	return &kernelCM{f: f}, nil
}

func (k *kernelCM) CreateID(uid uint64, ps uint16, qpType uint8) (uint32, error) {
	id, err := k.f.CreateID(uid, ucma.PortSpace(ps), ucma.QPType(qpType))
	return uint32(id), err
}

func (k *kernelCM) DestroyID(id uint32) error {
	_, err := k.f.DestroyID(ucma.ID(id))
	return err
}

func (k *kernelCM) Bind(id uint32, a netip.AddrPort) error { return k.f.Bind(ucma.ID(id), a) }

func (k *kernelCM) ResolveAddr(id uint32, src, dst netip.AddrPort, timeoutMs uint32) error {
	return k.f.ResolveAddr(ucma.ID(id), src, dst, time.Duration(timeoutMs)*time.Millisecond)
}

func (k *kernelCM) ResolveRoute(id uint32, timeoutMs uint32) error {
	return k.f.ResolveRoute(ucma.ID(id), time.Duration(timeoutMs)*time.Millisecond)
}

func (k *kernelCM) QueryAddr(id uint32) (seam.CMAddr, error) {
	a, err := k.f.QueryAddr(ucma.ID(id))
	if err != nil {
		return seam.CMAddr{}, err
	}
	return seam.CMAddr{Src: a.Src, Dst: a.Dst, NodeGUID: a.NodeGUID, Port: a.Port}, nil
}

func (k *kernelCM) Listen(id uint32, backlog int) error { return k.f.Listen(ucma.ID(id), backlog) }

func connParam(p *seam.CMConnParam) *ucma.ConnParam {
	if p == nil {
		return nil
	}
	return &ucma.ConnParam{QPN: p.QPN, QKey: p.QKey, PrivateData: p.PrivateData, SRQ: p.SRQ,
		ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth, FlowControl: p.FlowControl,
		RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount}
}

func (k *kernelCM) Connect(id uint32, p *seam.CMConnParam) error {
	return k.f.Connect(ucma.ID(id), connParam(p), ucma.ECE{})
}

func (k *kernelCM) Accept(id uint32, uid uint64, p *seam.CMConnParam) error {
	return k.f.Accept(ucma.ID(id), uid, connParam(p), ucma.ECE{})
}

func (k *kernelCM) Reject(id uint32, reason uint8, privateData []byte) error {
	return k.f.Reject(ucma.ID(id), reason, privateData)
}

func (k *kernelCM) Disconnect(id uint32) error { return k.f.Disconnect(ucma.ID(id)) }

func ahAttr(a *ucma.AHAttr) seam.AHAttr {
	return seam.AHAttr{GRH: seam.GlobalRoute{DGID: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, SGIDIndex: a.GRH.SGIDIndex,
		HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass}, DLID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits,
		StaticRate: a.StaticRate, IsGlobal: a.IsGlobal, Port: a.Port}
}

func (k *kernelCM) InitQPAttr(id uint32, state uint8) (seam.QPAttr, uint32, error) {
	a, err := k.f.InitQPAttr(ucma.ID(id), ucma.QPState(state))
	if err != nil {
		return seam.QPAttr{}, 0, err
	}
	return seam.QPAttr{State: uint8(a.State), CurState: uint8(a.CurState), PathMTU: a.PathMTU, PathMigState: a.PathMigState,
		QKey: a.QKey, RQPSN: a.RQPSN, SQPSN: a.SQPSN, DestQPN: a.DestQPN, AccessFlags: a.AccessFlags,
		AH: ahAttr(&a.AH), AltAH: ahAttr(&a.AltAH), PKeyIndex: a.PKeyIndex, AltPKeyIndex: a.AltPKeyIndex,
		EnSQDAsyncNotify: a.EnSQDAsyncNotify, SQDraining: a.SQDraining, MaxRdAtomic: a.MaxRdAtomic,
		MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer, Port: a.Port, Timeout: a.Timeout,
		RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, AltPort: a.AltPort, AltTimeout: a.AltTimeout}, a.Mask, nil
}

func (k *kernelCM) SetOption(id uint32, level, name uint32, value []byte) error {
	return k.f.SetOption(ucma.ID(id), level, name, value)
}

func (k *kernelCM) NextEvent(ctx context.Context) (seam.CMEvent, error) {
	ev, err := k.f.GetEvent(ctx)
	if err != nil {
		return seam.CMEvent{}, err
	}
	return seam.CMEvent{UID: ev.UID, ID: uint32(ev.ID), Type: uint32(ev.Type), Status: ev.Status,
		Conn: seam.CMConnParam{QPN: ev.Conn.QPN, QKey: ev.Conn.QKey, PrivateData: ev.Conn.PrivateData, SRQ: ev.Conn.SRQ,
			ResponderResources: ev.Conn.ResponderResources, InitiatorDepth: ev.Conn.InitiatorDepth,
			FlowControl: ev.Conn.FlowControl, RetryCount: ev.Conn.RetryCount, RNRRetryCount: ev.Conn.RNRRetryCount},
		UD: seam.CMUDParam{QPN: ev.UD.QPN, QKey: ev.UD.QKey, AH: ahAttr(&ev.UD.AH), PrivateData: ev.UD.PrivateData}}, nil
}

func (k *kernelCM) Close() error { return k.f.Close() }
