package mlx5_test

import (
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// FuzzCreateOptions creates a QP, a CQ, an SRQ and an mkey on the software
// ConnectX with arbitrary sizes (issue 15, item 3). Each create must not
// panic, and must either fail with ErrInvalid (EINVAL) or ErrUnsupported
// (EOPNOTSUPP), or make an object that grants at least what was asked: a
// QP whose send queue takes MaxSendWR sends of MaxInlineData inline bytes
// (posted), and SGEs, receives and inline bytes no fewer than asked; a CQ
// of more entries; an SRQ of as many receives and SGEs. Closed, nothing of
// them may remain on the device.
func FuzzCreateOptions(f *testing.F) {
	// The issue's: a receive SGE count whose WQE size overflows (a divide
	// by zero in rqSize), and one whose product wraps to 16 bytes.
	f.Add(int64(8), int64(1), int64(0), int64(8), int64(9223372036854775807), uint8(0), uint32(0), false, int64(0), false,
		int64(16), int64(8), int64(1), int64(0), int64(4), true)
	f.Add(int64(8), int64(1), int64(0), int64(8), int64(1<<60+1), uint8(0), uint32(0), false, int64(0), false,
		int64(16), int64(8), int64(1), int64(0), int64(4), true)
	// Item 4's QP: MkeyConfigure, 1639 sends of 1 SGE, no inline data.
	f.Add(int64(1639), int64(1), int64(0), int64(16), int64(1), uint8(0), uint32(0), true, int64(0), false,
		int64(256), int64(64), int64(2), int64(8), int64(1), true)
	// MaxMkeyEntries asking for more inline data than a WQE holds; a
	// DEVX QP; SEND alone with configures; a UC QP with configures.
	f.Add(int64(64), int64(1), int64(0), int64(16), int64(1), uint8(0), uint32(0), true, int64(1024), false,
		int64(1), int64(1), int64(0), int64(0), int64(1024), false)
	f.Add(int64(30), int64(30), int64(200), int64(30), int64(30), uint8(0), uint32(0), true, int64(8), true,
		int64(4096), int64(32767), int64(31), int64(32767), int64(16), true)
	f.Add(int64(1), int64(1), int64(0), int64(1), int64(1), uint8(0), uint32(1<<mlx5.OpSend), true, int64(0), false,
		int64(1), int64(1), int64(0), int64(1), int64(1), false)
	f.Add(int64(64), int64(2), int64(64), int64(0), int64(0), uint8(mlx5.QPTypeUC), uint32(0), true, int64(0), false,
		int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), true)
	f.Fuzz(func(t *testing.T, sendWR, sendSGE, inline, recvWR, recvSGE int64, typ uint8, ops uint32, mkeyConf bool, mkeyEntries int64, devx bool,
		cqEntries, srqWR, srqSGE, srqLimit, mkeyMax int64, sigMkey bool) {
		r := newRig(t, "cx7", model.Options{}, 64)
		r.qp(t, mlx5.QPOptions{MaxSendWR: 1}, false).Close() // the BlueFlame page the context keeps
		before := r.dev.Objects()
		refused := func(what string, err error) {
			t.Helper()
			if !(errors.Is(err, mlx5.ErrInvalid) && errors.Is(err, unix.EINVAL)) && !(errors.Is(err, mlx5.ErrUnsupported) && errors.Is(err, unix.EOPNOTSUPP)) {
				t.Fatalf("%s: %v, want ErrInvalid (EINVAL) or ErrUnsupported (EOPNOTSUPP)", what, err)
			}
		}
		var closers []interface{ Close() error }

		o := mlx5.QPOptions{Type: mlx5.QPType(typ % 3), PD: r.pd, SendCQ: r.cq, RecvCQ: r.cq, MaxSendWR: int(sendWR), MaxSendSGE: int(sendSGE),
			MaxInlineData: int(inline), MaxRecvWR: int(recvWR), MaxRecvSGE: int(recvSGE), SendOps: mlx5.OpcodeSet(ops),
			MkeyConfigure: mkeyConf, MaxMkeyEntries: int(mkeyEntries), DEVX: devx}
		if qp, err := r.c.CreateQP(o); err != nil {
			refused("CreateQP", err)
		} else {
			closers = append(closers, qp)
			checkQPCaps(t, r, qp, &o)
		}
		if cq, err := r.c.CreateCQ(mlx5.CQOptions{Entries: int(cqEntries)}); err != nil {
			refused("CreateCQ", err)
		} else {
			closers = append(closers, cq)
			if cq.Size() <= int(cqEntries) {
				t.Errorf("CQ of %d entries holds %d", cqEntries, cq.Size())
			}
		}
		if srq, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: int(srqWR), MaxSGE: int(srqSGE), Limit: int(srqLimit)}); err != nil {
			refused("CreateSRQ", err)
		} else {
			closers = append(closers, srq)
			if c := srq.Caps(); c.MaxWR < int(srqWR) || c.MaxSGE < int(srqSGE) {
				t.Errorf("SRQ of %d receives of %d SGEs grants %+v", srqWR, srqSGE, c)
			}
		}
		if m, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: int(mkeyMax), BlockSignature: sigMkey}); err != nil {
			refused("CreateMkey", err)
		} else {
			closers = append(closers, m)
		}
		for i := len(closers) - 1; i >= 0; i-- {
			if err := closers[i].Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
		}
		if n := r.dev.Objects(); n != before {
			t.Fatalf("%d device objects after closing everything made, %d before", n, before)
		}
	})
}

// checkQPCaps checks that qp grants what o asked, and that its send
// queue takes Caps.MaxSendWR sends of Caps.MaxInlineData inline bytes (in
// RST nothing consumes them: the ring must hold them all; RC and UC, a UD
// send needs an AH).
func checkQPCaps(t *testing.T, r *rig, qp *mlx5.QP, o *mlx5.QPOptions) {
	t.Helper()
	c := qp.Caps()
	if o.MaxSendWR > 0 && (c.MaxSendWR < o.MaxSendWR || c.MaxSendSGE < max(o.MaxSendSGE, 1) || c.MaxInlineData < o.MaxInlineData) {
		t.Fatalf("%+v grants %+v", *o, c)
	}
	if o.MaxRecvWR > 0 && (c.MaxRecvWR < o.MaxRecvWR || c.MaxRecvSGE < o.MaxRecvSGE) {
		t.Fatalf("%+v grants %+v", *o, c)
	}
	if o.MaxSendWR == 0 || c.MaxSendWR > 256 || o.Type == mlx5.QPTypeUD || o.SendOps != 0 && o.SendOps&(1<<mlx5.OpSend) == 0 {
		return
	}
	// A control segment describes at most 63 16-byte units (1008 bytes):
	// libmlx5's sizing (and the kernel's) grants up to a 1024-byte WQE's
	// worth of inline data, which a SEND of fewer operations' overhead
	// cannot carry; the builder refuses more (ErrInvalid), libmlx5
	// would write a ds of 64.
	data := make([]byte, min(c.MaxInlineData, wqe.MaxDS*16-wqe.CtrlSegSize-4))
	wr := &mlx5.SendWR{Opcode: mlx5.OpSend, Inline: [][]byte{data}}
	for i := range c.MaxSendWR {
		wr.WrID = uint64(i)
		if err := qp.PostSend(wr); err != nil {
			t.Fatalf("%+v grants %+v: send %d of %d inline bytes: %v", *o, c, i, len(data), err)
		}
	}
}
