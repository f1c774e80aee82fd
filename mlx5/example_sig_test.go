package mlx5_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"github.com/mlx5go/mlx5go/sig"
)

// A storage target with signature pipelining: each read is an RDMA WRITE
// of T10-DIF protected blocks through a signature mkey (the device checks
// and strips the protection information) and, right behind it, the good
// response SEND, fenced, without waiting. One block of the second read is
// corrupt: the device stops the send queue before that read's response,
// the context reports SQ_DRAINED, RecoverSigStop finds the failed read,
// cancels its good response and resumes, and the target sends a bad one.
// The client sees GOOD for the first read and BAD for the second.
func Example_signaturePipelining() {
	c, err := mlx5test.Open("cx7")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	pd, _ := c.AllocPD()
	buf, _ := mlx5.AllocBuffer(1 << 16)
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	tcq, _ := c.CreateCQ(mlx5.CQOptions{Entries: 64})
	ccq, _ := c.CreateCQ(mlx5.CQOptions{Entries: 64})
	target, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: tcq, RecvCQ: tcq, MaxSendWR: 32, MaxSendSGE: 1,
		SigPipelining: true, MkeyConfigure: true, MaxMkeyEntries: 1})
	if err != nil {
		log.Fatal(err)
	}
	client, _ := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: ccq, RecvCQ: ccq, MaxSendWR: 4, MaxRecvWR: 8, MaxRecvSGE: 1})
	path, _ := c.LoopbackPath(1)
	if err := target.Connect(client.QPN(), path); err != nil {
		log.Fatal(err)
	}
	if err := client.Connect(target.QPN(), path); err != nil {
		log.Fatal(err)
	}

	// Each read's data in the target's memory: 4 blocks of 512 bytes, each
	// followed by its 8-byte T10-DIF tuple (the memory domain). The wire
	// carries plain data.
	attr := &sig.BlockAttr{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
		T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x1234, RefTag: 100, Flags: sig.T10DIFRefRemap}},
		CheckMask: sig.MaskT10DIFGuard}
	eng, err := sig.NewEngine(attr)
	if err != nil {
		log.Fatal(err)
	}
	mem := buf.Bytes()
	const blocks, stored = 4, 4 * 520
	var open []mlx5.SigTransfer
	for read := range 2 {
		data := mem[read*4096 : read*4096+stored]
		for i := range data {
			data[i] = byte(i + read)
		}
		if err := eng.Generate(sig.DomainMemory, data); err != nil {
			log.Fatal(err)
		}
		if read == 1 {
			data[2*520+9] ^= 0xff // block 2's data no longer matches its guard
		}
		mk, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
		if err != nil {
			log.Fatal(err)
		}
		resp := mem[16384+read*64:]
		copy(resp, fmt.Sprintf("GOOD %d", read))
		b := target.Begin()
		b.AddMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: uint64(10 * read), Mkey: mk,
			List: []mlx5.KLM{{Addr: mr.Addr() + uint64(read*4096), ByteCount: stored, Mkey: mr.LKey()}}, Sig: attr})
		// The SGE through the mkey counts the bytes on the wire: the
		// data without its protection information.
		b.Add(&mlx5.SendWR{WrID: uint64(10*read + 1), Opcode: mlx5.OpRDMAWrite, RemoteAddr: mr.Addr() + 32768 + uint64(read*4096),
			RKey: mr.RKey(), SGL: []mlx5.SGE{{Addr: 0, Length: blocks * 512, LKey: mk.LKey()}}})
		b.Add(&mlx5.SendWR{WrID: uint64(10*read + 2), Opcode: mlx5.OpSend, Flags: mlx5.SendFence | mlx5.SendSignaled,
			SGL: []mlx5.SGE{{Addr: mr.Addr() + uint64(16384+read*64), Length: 6, LKey: mr.LKey()}}})
		if err := client.PostRecv(uint64(read), []mlx5.SGE{{Addr: mr.Addr() + 20480 + uint64(read*64), Length: 64, LKey: mr.LKey()}}); err != nil {
			log.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			log.Fatal(err)
		}
		open = append(open, mlx5.SigTransfer{Mkey: mk, Response: uint64(10*read + 2)})
	}

	// The target's event loop: the send queue stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := c.NextEvent(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("event:", ev.Type, ev.QP == target)
	wc := make([]mlx5.Completion, 16)
	failed, err := target.RecoverSigStop(tcq, wc, func([]mlx5.Completion) {}, open)
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range failed {
		fmt.Printf("read %d failed: %v at offset %d, %d response canceled\n", f.Transfer, f.Err.Type, f.Err.Offset, f.Canceled)
		copy(mem[16384+128:], fmt.Sprintf("BAD  %d", f.Transfer))
		if err := target.PostSend(&mlx5.SendWR{WrID: 99, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled,
			SGL: []mlx5.SGE{{Addr: mr.Addr() + 16384 + 128, Length: 6, LKey: mr.LKey()}}}); err != nil {
			log.Fatal(err)
		}
	}

	// The client's receives.
	for got := 0; got < 2; {
		n, err := ccq.Poll(wc)
		if err != nil {
			log.Fatal(err)
		}
		for _, w := range wc[:n] {
			fmt.Printf("client: %s\n", mem[20480+w.WrID*64:20480+w.WrID*64+uint64(w.ByteLen)])
		}
		if got += n; ctx.Err() != nil {
			log.Fatal("the client's responses did not come")
		}
	}
	// Output:
	// event: SQ_DRAINED true
	// read 1 failed: bad guard at offset 1040, 1 response canceled
	// client: GOOD 0
	// client: BAD  1
}

// The write path of a block store that keeps T10-DIF protection on the
// wire (mlx5dv_wr_set_mkey_sig_block(3)'s example 2.1): the initiator
// RDMA-WRITEs data with an 8-byte T10-DIF tuple after every 512 bytes
// into the target's signature mkey, whose wire domain is T10-DIF and
// whose memory has none. The device checks every tuple, strips it, and
// lays the bare data in the target's memory. Then a write with one bad
// guard: the data still lands, and Mkey.Check tells the target which
// block was bad.
func Example_writeChecksAndStrips() {
	c, err := mlx5test.Open("cx7")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	pd, _ := c.AllocPD()
	buf, _ := mlx5.AllocBuffer(1 << 16)
	defer buf.Close()
	mr, _ := pd.RegMR(buf.Bytes(), mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite)
	cq, _ := c.CreateCQ(mlx5.CQOptions{Entries: 64})
	opt := mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 8, MaxSendSGE: 1, MkeyConfigure: true, MaxMkeyEntries: 1}
	initiator, _ := c.CreateQP(opt)
	target, _ := c.CreateQP(opt)
	path, _ := c.LoopbackPath(1)
	if err := initiator.Connect(target.QPN(), path); err != nil {
		log.Fatal(err)
	}
	if err := target.Connect(initiator.QPN(), path); err != nil {
		log.Fatal(err)
	}
	wait := func(wrID uint64) {
		var wc [1]mlx5.Completion
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			if n, err := cq.Poll(wc[:]); err != nil || (n == 1 && (wc[0].WrID != wrID || wc[0].Status != mlx5.WCSuccess)) {
				log.Fatalf("%+v %v", wc[0], err)
			} else if n == 1 {
				return
			}
		}
		log.Fatal("no completion")
	}

	// The target's mkey: 4 blocks of bare data in memory, T10-DIF on the
	// wire, every field checked.
	attr := &sig.BlockAttr{Wire: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
		T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x0001, RefTag: 5000, Flags: sig.T10DIFRefRemap}},
		CheckMask: sig.MaskT10DIFGuard | sig.MaskT10DIFAppTag | sig.MaskT10DIFRefTag}
	mk, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
	if err != nil {
		log.Fatal(err)
	}
	const data, target0 = 4 * 512, 32768
	if err := target.PostMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: 1, Mkey: mk, Flags: mlx5.SendSignaled,
		SetAccess: true, Access: mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite,
		List: []mlx5.KLM{{Addr: mr.Addr() + target0, ByteCount: data, Mkey: mr.LKey()}}, Sig: attr}); err != nil {
		log.Fatal(err)
	}
	wait(1)

	// The initiator's wire bytes: data and tuples, made with sig's engine.
	eng, err := sig.NewEngine(attr)
	if err != nil {
		log.Fatal(err)
	}
	mem := buf.Bytes()
	plain := make([]byte, data)
	for i := range plain {
		plain[i] = byte(i * 3)
	}
	wire := mem[:4*520]
	if me, err := eng.Transfer(sig.TX, wire, plain); err != nil || !me.OK() {
		log.Fatal(me, err)
	}
	for round, corrupt := range []bool{false, true} {
		if corrupt {
			wire[3*520+512] ^= 0x80 // block 3's guard
		}
		wrID := uint64(10 + round)
		if err := initiator.PostSend(&mlx5.SendWR{WrID: wrID, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
			RemoteAddr: 0, RKey: mk.RKey(), SGL: []mlx5.SGE{{Addr: mr.Addr(), Length: 4 * 520, LKey: mr.LKey()}}}); err != nil {
			log.Fatal(err)
		}
		wait(wrID)
		// The device reports a bad block with a SIG_ERR CQE on the CQ of
		// the side that checked (the target's, here the same CQ): poll
		// until it is read, then check.
		me, err := mk.Check()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("write %d: data intact %v, check: %v\n", round, bytes.Equal(mem[target0:target0+data], plain), me.Type)
		if !me.OK() {
			fmt.Printf("  bad block at wire offset %d (block %d)\n", me.Offset, me.Offset/520)
		}
	}
	// Output:
	// write 0: data intact true, check: no error
	// write 1: data intact true, check: bad guard
	//   bad block at wire offset 1560 (block 3)
}
