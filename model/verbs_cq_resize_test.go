package model

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/wqe"
)

// TestResizeCQBelowOutstanding: a resize to fewer entries than the CQEs
// not yet polled is the firmware's BAD_SIZE_OUTS_CQES_ERR, EINVAL from
// the kernel (rdma-core's tests/test_cq.py test_resize_cq expects EINVAL;
// ibv_resize_cq(3): cqe must be at least the unpolled entries). The CQ
// keeps its ring; once enough CQEs are polled the same resize succeeds.
func TestResizeCQBelowOutstanding(t *testing.T) {
	r := newVRig(t, "cx6dx")
	cq := r.cq(7, nil)
	a := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
	b := r.qp(cq, cq, vqpOpts{typ: seam.QPTypeRC, uidx: 2})
	a.connect(b, remoteRW)
	b.connect(a, remoteRW)
	mem, mr := r.mr(8192, accessLocalWrite|remoteRW)
	const sent = 6
	for range sent {
		a.post(wqe.Send{Opcode: wqe.OpcodeRDMAWrite, Flags: wqe.SendSignaled, RemoteAddr: addr(mem[4096:]), RKey: mr.RKey,
			SGL: []wqe.SGE{{Addr: addr(mem), Length: 8, LKey: mr.LKey}}})
	}
	resize := func(cqe uint32) (uint32, error) {
		n := roundPow2(uint64(cqe) + 1)
		ring := r.mmap(int(n) * 64)
		wqe.InitCQE(ring)
		return r.d.ResizeCQ(cq.h, cqe, drv(&mlx5abi.Mlx5IbResizeCq{BufAddr: addr(ring), CqeSize: 64}))
	}
	refused := func(cqe uint32, outstanding int) {
		t.Helper()
		_, err := resize(cqe)
		var ke *KernelError
		if !errors.Is(err, unix.EINVAL) || !errors.As(err, &ke) || ke.Cmd == nil || ke.Cmd.Status != prm.MLX5_CMD_STAT_BAD_SIZE_OUTS_CQES_ERR {
			t.Errorf("resize to %d with %d CQEs outstanding: %v, want EINVAL from BAD_SIZE_OUTS_CQES_ERR", cqe, outstanding, err)
		}
	}
	// Right after the doorbell, as test_resize_cq does: the sends rung
	// before the command have completed when the firmware counts.
	refused(1, sent) // 2 entries
	refused(3, sent) // 4 entries
	// Refused, the ring is the old one: the CQEs are still there in order.
	for range 3 {
		if c := decode(t, cq.next()); c.Opcode != wqe.CQEReq || c.QPN != a.qpn {
			t.Fatalf("CQE %+v after a refused resize", c)
		}
	}
	refused(1, sent-3)
	if n, err := resize(3); err != nil || n != 3 {
		t.Errorf("resize to 3 with 3 CQEs outstanding: %d, %v; want 3 entries", n, err)
	}
	if f := r.d.Faults(); len(f) != 0 {
		t.Errorf("faults: %q", f)
	}
}
