package model

import (
	"encoding/binary"
	"testing"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// FuzzVerbs feeds random driver data and attributes to every verbs entry
// point: nothing may panic, and a closed context holds nothing. With
// patch set, the driver data's first two addresses (buffer and doorbell
// record of every struct) point into a mapping fenced by inaccessible
// pages, so that creates can succeed and reach deep.
func FuzzVerbs(f *testing.F) {
	r := newVRig(f, "cx7")
	cqc, cqIn, _, _ := r.cqCmd(63)
	_, qpU, _, _ := r.qpCmd(&vcqT{}, &vcqT{}, vqpOpts{typ: seam.QPTypeRC})
	_, srqIn, _, _, _, _ := r.srqCmd(15, 1)
	for _, s := range []struct {
		op  uint8
		in  []byte
		a   uint32
		typ uint8
	}{
		{0, cqIn, cqc.CQE, 0}, {1, drv(&qpU), 16, seam.QPTypeRC}, {1, drv(&qpU), 16, seam.QPTypeUD}, {1, drv(&qpU), 16, seam.QPTypeUC},
		{2, srqIn, 15, 0}, {3, nil, 3, 0},
	} {
		f.Add(s.op, s.in, s.a, uint32(0x39), s.typ, true)
	}
	f.Fuzz(func(t *testing.T, op uint8, in []byte, a, mask uint32, typ uint8, patch bool) {
		d, err := New("cx7")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		// 1 MiB between two PROT_NONE pages.
		region, err := unix.Mmap(-1, 0, 1<<20+2*pageSize, unix.PROT_NONE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(region)
		mem := region[pageSize : pageSize+1<<20]
		if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_WRITE); err != nil {
			t.Fatal(err)
		}
		if patch && len(in) >= 16 {
			in = append([]byte(nil), in...)
			binary.NativeEndian.PutUint64(in[0:], addr(mem)+uint64(a%(1<<14))*64)
			binary.NativeEndian.PutUint64(in[8:], addr(mem)+1<<19+uint64(mask%4096))
		}
		pd, _, _ := d.AllocPD()
		ch, _ := d.NewCompChannel()
		uar, _ := d.UARAlloc(1)
		cqIn := drv(&mlx5abi.Mlx5IbCreateCq{BufAddr: addr(mem), DbAddr: addr(mem[1<<19:]), CqeSize: 64,
			Flags: mlx5abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX, UarPageIndex: uint16(uar.PageID)})
		cq, _, _ := d.CreateCQ(seam.CQCreate{CQE: 63, Channel: ch, UserHandle: 1}, cqIn, make([]byte, 8))
		srqIn := drv(&mlx5abi.Mlx5IbCreateSrq{BufAddr: addr(mem[1<<18:]), DbAddr: addr(mem[1<<19+64:])})
		srq, _, _ := d.CreateSRQ(seam.SRQCreate{PD: pd, MaxWR: 15, MaxSGE: 1}, srqIn, make([]byte, 8))
		out := make([]byte, int(a%64))
		switch op % 5 {
		case 0:
			d.CreateCQ(seam.CQCreate{CQE: a % 4096, CompVector: mask % 9, Flags: mask >> 28, Channel: ch}, in, out)
		case 1, 4:
			q := seam.QPCreate{Type: typ, PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: seam.NoHandle, Flags: mask & 0x1f02,
				Cap: seam.QPCap{MaxRecvWR: a % 64, MaxRecvSGE: a % 5, MaxSendWR: a % 128}}
			if op%5 == 4 {
				q.SRQ = srq
			}
			h, got, err := d.CreateQP(q, in, out)
			if err != nil {
				break
			}
			// Through the states, with attributes from the input.
			attr := seam.QPAttr{State: QPStateInit, Port: 1, QKey: a, AccessFlags: mask & 0xf}
			d.ModifyQP(h, &attr, maskState|maskPKey|maskPort|mask&(maskAccess|maskQKey), nil, nil)
			attr = seam.QPAttr{State: QPStateRTR, PathMTU: uint8(a), DestQPN: got.QPN, AH: seam.AHAttr{IsGlobal: mask&1 == 0,
				Port: uint8(mask>>8) % 3, GRH: seam.GlobalRoute{SGIDIndex: uint8(a >> 8), DGID: d.h.gidTable()[3].GID}},
				MinRNRTimer: uint8(mask), MaxDestRdAtomic: uint8(a >> 16)}
			d.ModifyQP(h, &attr, mask|maskState, in, out)
			attr = seam.QPAttr{State: QPStateRTS, SQPSN: a, Timeout: uint8(mask), RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: uint8(a)}
			d.ModifyQP(h, &attr, mask|maskState, in, out)
			d.QueryQP(h, mask)
			if mask&1 != 0 {
				d.DestroyQP(h)
			}
		case 2:
			d.CreateSRQ(seam.SRQCreate{PD: pd, MaxWR: a % 1024, MaxSGE: mask % 40}, in, out)
			d.ModifySRQ(srq, a%32)
		case 3:
			var dgid [16]byte
			copy(dgid[:], in)
			ah := seam.AHAttr{IsGlobal: mask&1 == 0, Port: uint8(a % 3), GRH: seam.GlobalRoute{DGID: dgid, SGIDIndex: uint8(mask >> 8)}}
			if h, err := d.CreateAH(pd, &ah, 1, out); err == nil && mask&2 != 0 {
				d.DestroyAH(h)
			}
		}
		d.Close()
		if n := d.Objects(); n != 0 {
			t.Fatalf("%d objects after Close", n)
		}
	})
}
