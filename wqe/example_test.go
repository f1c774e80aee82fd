package wqe_test

import (
	"encoding/binary"
	"fmt"

	"github.com/mlx5go/mlx5go/wqe"
)

// Post a signaled RDMA write of one 4 KiB buffer on an RC send queue of 8
// WQEBBs, then read its completion. The WQE is the one libmlx5 writes for
// the same work request (the oracle's wr_rdma_write_sge1 benchmark); the
// doorbell word goes to the UAR after the doorbell record is set to the
// new producer counter.
func ExampleBuildSend() {
	sq := make(wqe.Ring, 8*wqe.WQEBB)
	var pi uint16   // the send queue's producer counter
	var tail uint16 // the producer counter after the last completed WQE
	// The WQEBBs posted and not yet completed are not free: a WQE that
	// needs more than the rest fails with wqe.ErrNoRoom (poll the CQ,
	// then build it again).
	free := 8 - int(pi-tail)
	res, err := wqe.BuildSend(sq, pi, free, &wqe.Send{
		QPN:        0x1a2,
		Opcode:     wqe.OpcodeRDMAWrite,
		Flags:      wqe.SendSignaled,
		RemoteAddr: 0x10000000,
		RKey:       0xabcd01,
		SGL:        []wqe.SGE{{Addr: 0x7e5a00000000, Length: 4096, LKey: 0x200100}},
		MaxSGE:     4,   // the QP's max_send_sge
		MaxInline:  316, // the QP's max_inline_data
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("% x\n", sq.Slot(pi)[:res.DS*16])
	pi += uint16(res.WQEBBs)
	fmt.Printf("ds %d, %d WQEBB, doorbell record %d, doorbell %#016x\n", res.DS, res.WQEBBs, pi, res.Doorbell)

	// The device's completion, in a fresh CQ of 4 entries.
	cq := make([]byte, 4*wqe.CQESize)
	wqe.InitCQE(cq)
	var ci uint32
	fmt.Println("owned before the device wrote it:", wqe.CQEOwned(cq, ci, 2))
	cqe := cq[:wqe.CQESize]
	binary.BigEndian.PutUint32(cqe[56:], uint32(wqe.OpcodeRDMAWrite)<<24|0x1a2) // sop_drop_qpn
	cqe[63] = wqe.CQEReq << 4                                                   // op_own, owner 0 on the first pass
	if wqe.CQEOwned(cqe, ci, 2) {
		var c wqe.CQE
		if err := c.Decode(cqe); err == nil {
			fmt.Printf("opcode %d qpn %#x wqe_counter %d wqe opcode %#x\n", c.Opcode, c.QPN, c.WQECounter, c.WQEOpcode)
		}
	}
	// Output:
	// 00 00 00 08 00 01 a2 03 00 00 00 08 00 00 00 00 00 00 00 00 10 00 00 00 00 ab cd 01 00 00 00 00 00 00 10 00 00 20 01 00 00 00 7e 5a 00 00 00 00
	// ds 3, 1 WQEBB, doorbell record 1, doorbell 0x000000080001a203
	// owned before the device wrote it: false
	// opcode 0 qpn 0x1a2 wqe_counter 0 wqe opcode 0x8
}
