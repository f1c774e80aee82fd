package mlx5_test

import (
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
)

// TestPingPongHotPathAllocs: the posts and polls of the ping-pong test
// allocate nothing: single, list and batch posts of SENDs (gathered and
// inline), RDMA WRITEs with immediate and READs of several SGEs, UD sends
// with an AH, receives single and in lists, and polls. The QPs are in
// INIT, where the device runs nothing (the model allocates as it runs
// WQEs, and AllocsPerRun counts every goroutine's allocations).
func TestPingPongHotPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, typ := range []mlx5.QPType{mlx5.QPTypeRC, mlx5.QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			p := newPingPong(t, ppConfig{name: "allocs " + typ.String(), typ: typ, maxMsg: 1024}, 1)
			a := p.sides[0]
			init := mlx5.QPAttrState | mlx5.QPAttrPKeyIndex | mlx5.QPAttrPort | mlx5.QPAttrAccessFlags
			if typ == mlx5.QPTypeUD {
				init = mlx5.QPAttrState | mlx5.QPAttrPKeyIndex | mlx5.QPAttrPort | mlx5.QPAttrQKey
			}
			for _, s := range p.sides {
				if err := s.qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState); err != nil {
					t.Fatal(err)
				}
				if err := s.qp.Modify(&mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1, QKey: ppQKey}, init); err != nil {
					t.Fatal(err)
				}
			}
			mem := a.slot(0)
			sgl := []mlx5.SGE{{Addr: a.base(), Length: 100, LKey: a.mr.LKey()}, {Addr: a.base() + 200, Length: 50, LKey: a.mr.LKey()}}
			inline := [][]byte{mem[:40], mem[64:80]}
			peer := a.peer
			wrs := []mlx5.SendWR{
				{WrID: 1, Opcode: mlx5.OpSend, SGL: sgl},
				{WrID: 2, Opcode: mlx5.OpSendImm, Imm: 7, Inline: inline},
				{WrID: 3, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: sgl[:1]},
			}
			if typ == mlx5.QPTypeRC {
				wrs = append(wrs,
					mlx5.SendWR{WrID: 4, Opcode: mlx5.OpRDMAWriteImm, Imm: 9, SGL: sgl, RemoteAddr: peer.base() + uint64(peer.writeOff), RKey: peer.mr.RKey()},
					mlx5.SendWR{WrID: 5, Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled, SGL: sgl, RemoteAddr: peer.base() + uint64(peer.readOff), RKey: peer.mr.RKey()})
			} else {
				for i := range wrs {
					wrs[i].AH, wrs[i].RemoteQPN, wrs[i].QKey = a.ah, peer.qpn, ppQKey
				}
			}
			rwrs := []mlx5.RecvWR{{WrID: 10, SGL: sgl}, {WrID: 11, SGL: sgl[:1]}}
			wc := make([]mlx5.Completion, 16)
			// Each run takes 2+len(wrs) WRs of the send queue and 3 receives.
			runs := min(a.window/(2+len(wrs)), a.pool.capacity/3) - 1
			allocs := testing.AllocsPerRun(runs, func() {
				if err := a.qp.PostSend(&wrs[0]); err != nil {
					t.Fatal(err)
				}
				if err := a.qp.PostSendList(wrs); err != nil {
					t.Fatal(err)
				}
				b := a.qp.Begin()
				b.Add(&wrs[1])
				if err := b.Commit(); err != nil {
					t.Fatal(err)
				}
				if err := a.qp.PostRecv(12, sgl); err != nil {
					t.Fatal(err)
				}
				if err := a.qp.PostRecvList(rwrs); err != nil {
					t.Fatal(err)
				}
				if n, err := a.scq.Poll(wc); n != 0 || err != nil {
					t.Fatal(n, err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per round of posts and a poll, want 0", allocs)
			}
		})
	}
}
