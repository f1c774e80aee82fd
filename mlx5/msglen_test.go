package mlx5_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"golang.org/x/sys/unix"
)

// Issue 15, item 2: a data segment's byte_count has 31 bits of count
// (bit 31 is MLX5_INLINE_SEG, and 2 GiB is written as 0), and a message
// is at most the port's max_msg_sz. Lengths that do not fit are refused
// on every post path, before anything is written.

// wantInvalid checks that err is ErrInvalid with EINVAL.
func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, mlx5.ErrInvalid) || !errors.Is(err, unix.EINVAL) {
		t.Errorf("%s: %v, want ErrInvalid (EINVAL)", what, err)
	}
}

// firstCompletion polls the rig's CQ for one completion and checks it is
// wrID's, successful: whatever was refused before it left nothing behind.
func firstCompletion(t *testing.T, r *rig, what string, wrIDs ...uint64) {
	t.Helper()
	got, err := r.poll(t, len(wrIDs), 5*time.Second)
	if err != nil {
		t.Fatalf("%s: poll: %v", what, err)
	}
	if len(got) != len(wrIDs) {
		t.Fatalf("%s: %d completions %+v, want %d", what, len(got), got, len(wrIDs))
	}
	for _, w := range got {
		found := false
		for _, id := range wrIDs {
			found = found || w.WrID == id
		}
		if !found || w.Status != mlx5.WCSuccess {
			t.Errorf("%s: completion %+v, want wr_ids %#x, successful", what, w, wrIDs)
		}
	}
}

// An SGE of 2^31 bytes or more cannot be written as a data segment: its
// bit 31 would make the segment an inline one (libmlx5 writes the length
// as it is, and the device then reads an empty or overlong inline
// segment). Every send path, RDMA READ included, and every receive path
// refuses it with ErrInvalid, and nothing of it reaches the queues: the
// next good work request is the first the device sees.
func TestSGEOverDataSegmentIsRefused(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 16, MaxSendSGE: 2, MaxRecvWR: 8, MaxRecvSGE: 2}, true)
	good := mlx5.SGE{Addr: r.mr.Addr(), Length: 64, LKey: r.mr.LKey()}
	for _, n := range []uint32{1 << 31, 1<<31 + 64, 0xffffffff} {
		bad := mlx5.SGE{Addr: r.mr.Addr(), Length: n, LKey: r.mr.LKey()}
		for _, op := range []mlx5.Opcode{mlx5.OpRDMAWrite, mlx5.OpSend, mlx5.OpRDMARead} {
			what := fmt.Sprintf("%v with an SGE of %#x bytes", op, n)
			wr := mlx5.SendWR{WrID: 1, Opcode: op, Flags: mlx5.SendSignaled, RemoteAddr: r.mr.Addr() + 8192, RKey: r.mr.RKey(),
				SGL: []mlx5.SGE{good, bad}}
			wantInvalid(t, "PostSend: "+what, qp.PostSend(&wr))
			ok := *r.write(2, mlx5.SendSignaled, r.mr.RKey())
			wantInvalid(t, "PostSendList: "+what, qp.PostSendList([]mlx5.SendWR{ok, wr}))
			wantInvalid(t, "Batch: "+what, qp.Begin().Add(&ok).Add(&wr).Commit())
		}
		wantInvalid(t, fmt.Sprintf("PostRecv of %#x bytes", n), qp.PostRecv(3, []mlx5.SGE{bad}))
		wantInvalid(t, fmt.Sprintf("PostRecvList of %#x bytes", n), qp.PostRecvList([]mlx5.RecvWR{{WrID: 4, SGL: []mlx5.SGE{good}}, {WrID: 5, SGL: []mlx5.SGE{good, bad}}}))
	}
	// Nothing was posted: the next WRITE is the first completion, and the
	// next receive takes the next SEND.
	if err := qp.PostSend(r.write(6, mlx5.SendSignaled, r.mr.RKey())); err != nil {
		t.Fatal(err)
	}
	firstCompletion(t, r, "the WRITE after the refusals", 6)
	if err := qp.PostRecv(7, []mlx5.SGE{{Addr: r.mr.Addr() + 8192, Length: 64, LKey: r.mr.LKey()}}); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend(&mlx5.SendWR{WrID: 8, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: []mlx5.SGE{good}}); err != nil {
		t.Fatal(err)
	}
	firstCompletion(t, r, "the SEND and receive after the refusals", 7, 8)
	if f := r.dev.Faults(); len(f) != 0 {
		t.Errorf("model faults: %q", f)
	}
}

// An SRQ refuses such an SGE too, and posts none of its list.
func TestSRQSGEOverDataSegmentIsRefused(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	srq, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 8, MaxSGE: 2})
	if err != nil {
		t.Fatal(err)
	}
	a := r.qp(t, mlx5.QPOptions{MaxSendWR: 8, MaxSendSGE: 1}, false)
	b := r.qp(t, mlx5.QPOptions{MaxSendWR: 8, SRQ: srq}, false)
	path, err := r.c.LoopbackPath(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(b.QPN(), path); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(a.QPN(), path); err != nil {
		t.Fatal(err)
	}
	good := mlx5.SGE{Addr: r.mr.Addr() + 8192, Length: 64, LKey: r.mr.LKey()}
	bad := mlx5.SGE{Addr: r.mr.Addr(), Length: 1 << 31, LKey: r.mr.LKey()}
	wantInvalid(t, "SRQ.PostRecv of 2^31 bytes", srq.PostRecv(1, []mlx5.SGE{good, bad}))
	wantInvalid(t, "SRQ.PostRecvList of 2^31+64 bytes", srq.PostRecvList([]mlx5.RecvWR{{WrID: 2, SGL: []mlx5.SGE{good}},
		{WrID: 3, SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: 1<<31 + 64, LKey: r.mr.LKey()}}}}))
	if err := srq.PostRecv(4, []mlx5.SGE{good}); err != nil {
		t.Fatal(err)
	}
	if err := a.PostSend(&mlx5.SendWR{WrID: 5, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled,
		SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: 64, LKey: r.mr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	firstCompletion(t, r, "the SEND into the SRQ after the refusals", 4, 5)
}

// A message longer than the port's max_msg_sz (ibv_query_port; mlx5_ib
// answers 1 << log_max_msg, 2^30 on the model's ConnectX-7) is refused
// at post, as rxe refuses it (validate_send_wr), on every send path: the
// SGEs' lengths add up past it, each fitting its data segment.
func TestMessageOverMaxMsgSzIsRefused(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 16, MaxSendSGE: 3}, true)
	for _, sgl := range [][]mlx5.SGE{
		{{Addr: r.mr.Addr(), Length: 1 << 30, LKey: r.mr.LKey()}, {Addr: r.mr.Addr(), Length: 1, LKey: r.mr.LKey()}},
		{{Addr: r.mr.Addr(), Length: 1<<31 - 1, LKey: r.mr.LKey()}, {Addr: r.mr.Addr(), Length: 1<<31 - 1, LKey: r.mr.LKey()}, {Addr: r.mr.Addr(), Length: 2, LKey: r.mr.LKey()}},
	} {
		for _, op := range []mlx5.Opcode{mlx5.OpRDMAWrite, mlx5.OpRDMAWriteImm, mlx5.OpSend, mlx5.OpRDMARead} {
			what := fmt.Sprintf("%v of %d SGEs past 2^30 bytes", op, len(sgl))
			wr := mlx5.SendWR{WrID: 1, Opcode: op, Flags: mlx5.SendSignaled, RemoteAddr: r.mr.Addr() + 8192, RKey: r.mr.RKey(), SGL: sgl}
			wantInvalid(t, "PostSend: "+what, qp.PostSend(&wr))
			wantInvalid(t, "PostSendList: "+what, qp.PostSendList([]mlx5.SendWR{*r.write(2, 0, r.mr.RKey()), wr}))
			wantInvalid(t, "Batch: "+what, qp.Begin().Add(r.write(3, 0, r.mr.RKey())).Add(&wr).Commit())
		}
	}
	err := qp.PostSend(&mlx5.SendWR{WrID: 9, Opcode: mlx5.OpRDMARead, RemoteAddr: r.mr.Addr(), RKey: r.mr.RKey(),
		SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: 1<<30 + 1, LKey: r.mr.LKey()}}})
	want := fmt.Sprintf("mlx5: post send QP %#x: work request 0 (wr_id 0x9): wqe: message longer than the QP's maximum message size (1073741824 bytes)", qp.QPN())
	if err == nil || err.Error() != want {
		t.Errorf("a READ of 2^30+1 bytes: %v, want %q", err, want)
	}
	if err := qp.PostSend(r.write(4, mlx5.SendSignaled, r.mr.RKey())); err != nil {
		t.Fatal(err)
	}
	firstCompletion(t, r, "the WRITE after the refusals", 4)
}

// A KLM maps at most 2 GiB (mlx5dv.h: "up to 2GB"; libmlx5's memory
// window bind refuses more): an mkey configure with a longer one is
// refused before anything is written.
func TestKLMOver2GiBIsRefused(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	qp := r.qp(t, mlx5.QPOptions{MaxSendWR: 8, MkeyConfigure: true, MaxMkeyEntries: 2}, true)
	m, err := r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []uint32{1<<31 + 1, 0xffffffff} {
		wr := &mlx5.MkeyConfigureWR{WrID: 1, Mkey: m, Flags: mlx5.SendSignaled,
			List: []mlx5.KLM{{Addr: r.mr.Addr(), ByteCount: 64, Mkey: r.mr.LKey()}, {Addr: r.mr.Addr(), ByteCount: n, Mkey: r.mr.LKey()}}}
		wantInvalid(t, fmt.Sprintf("PostMkeyConfigure with a KLM of %#x bytes", n), qp.PostMkeyConfigure(wr))
		wantInvalid(t, fmt.Sprintf("a batch with a KLM of %#x bytes", n), qp.Begin().Add(r.write(2, 0, r.mr.RKey())).AddMkeyConfigure(wr).Commit())
	}
	if err := qp.PostSend(r.write(3, mlx5.SendSignaled, r.mr.RKey())); err != nil {
		t.Fatal(err)
	}
	firstCompletion(t, r, "the WRITE after the refusals", 3)
}

// A datagram longer than the port's active MTU is refused at post. The IB
// spec (C10-93.1.1, quoted in rxe_req.c) has the device send nothing for
// it and complete it successfully: a silent no-op, which the driver turns
// into an error the caller can see.
func TestDatagramOverMTUIsRefused(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	// The model's port is RoCE on a 1500-byte netdev: active MTU 1024.
	opt := mlx5.QPOptions{Type: mlx5.QPTypeUD, MaxSendWR: 8, MaxSendSGE: 2, MaxRecvWR: 8, MaxRecvSGE: 1}
	ud := [2]*mlx5.QP{r.qp(t, opt, false), r.qp(t, opt, false)}
	const qkey = 0x11111111
	for _, q := range ud {
		if err := q.Ready(1, qkey); err != nil {
			t.Fatal(err)
		}
	}
	path, err := r.c.LoopbackPath(1)
	if err != nil {
		t.Fatal(err)
	}
	ah, err := r.pd.CreateAH(path)
	if err != nil {
		t.Fatal(err)
	}
	dgram := func(wrID uint64, n uint32) *mlx5.SendWR {
		return &mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, AH: ah, RemoteQPN: ud[1].QPN(), QKey: qkey,
			SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: n - 1, LKey: r.mr.LKey()}, {Addr: r.mr.Addr(), Length: 1, LKey: r.mr.LKey()}}}
	}
	wantInvalid(t, "a datagram of 1025 bytes (MTU 1024)", ud[0].PostSend(dgram(5, 1025)))
	wantInvalid(t, "a datagram of 4097 bytes", ud[0].PostSend(dgram(5, 4097)))
	if err := ud[1].PostRecv(6, []mlx5.SGE{{Addr: r.mr.Addr() + 8192, Length: 40 + 1024, LKey: r.mr.LKey()}}); err != nil {
		t.Fatal(err)
	}
	if err := ud[0].PostSend(dgram(7, 1024)); err != nil {
		t.Fatalf("a datagram of the MTU: %v", err)
	}
	firstCompletion(t, r, "the datagram of 1024 bytes", 6, 7)
}
