package mlx5_test

import (
	"fmt"
	"log"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
)

// A DCI with streams sends to a DCT; an RDMA WRITE with a bad key fails
// on stream 1 and flushes the SEND behind it on that stream, while
// stream 2's SEND completes. The QP is still in RTS, so the stream is
// reset and its work posted again (mlx5dv_dci_stream_id_reset(3)); had
// the QP gone to ERR, it would be recovered through RESET instead.
func ExampleQP_ResetDCIStream() {
	c, err := mlx5test.Open("cx7")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	buf, err := mlx5.AllocBuffer(1 << 16)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 64})
	if err != nil {
		log.Fatal(err)
	}
	path, err := c.LoopbackPath(1)
	if err != nil {
		log.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}

	// The target: a DCT on an SRQ, its access key, in RTR.
	srq, err := c.CreateSRQ(mlx5.SRQOptions{PD: pd, MaxWR: 16, MaxSGE: 1})
	must(err)
	const key = 0xbadc0de
	dct, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCT, PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: srq, DCAccessKey: key})
	must(err)
	must(dct.Modify(&mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1, Access: mlx5.AccessRemoteWrite},
		mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort|mlx5.QPAttrAccessFlags))
	must(dct.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path, MinRNRTimer: 12},
		mlx5.QPAttrState|mlx5.QPAttrAV|mlx5.QPAttrPathMTU|mlx5.QPAttrMinRNRTimer))
	for i := range uint64(4) {
		must(srq.PostRecv(100+i, []mlx5.SGE{{Addr: mr.Addr() + 0x8000 + 256*i, Length: 256, LKey: mr.LKey()}}))
	}

	// The initiator: a DCI of 2^3 streams, 2^1 of which may be in error.
	dci, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCI, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 16,
		DCIStreams: &mlx5.DCIStreams{LogConcurrent: 3, LogErrored: 1}})
	must(err)
	must(dci.Modify(&mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1}, mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort))
	must(dci.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path}, mlx5.QPAttrState|mlx5.QPAttrPathMTU|mlx5.QPAttrAV))
	must(dci.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
		mlx5.QPAttrState|mlx5.QPAttrTimeout|mlx5.QPAttrRetryCnt|mlx5.QPAttrRNRRetry|mlx5.QPAttrSQPSN|mlx5.QPAttrMaxQPRdAtomic))
	ah, err := pd.CreateAH(path)
	must(err)

	// Every work request names the DCT: its AH, number and key.
	to := func(wr mlx5.SendWR) mlx5.SendWR {
		wr.Flags |= mlx5.SendSignaled
		wr.AH, wr.RemoteQPN, wr.DCAccessKey = ah, dct.QPN(), key
		wr.SGL = []mlx5.SGE{{Addr: mr.Addr(), Length: 64, LKey: mr.LKey()}}
		return wr
	}
	must(dci.PostSendList([]mlx5.SendWR{
		to(mlx5.SendWR{WrID: 1, Opcode: mlx5.OpRDMAWrite, StreamID: 1, RemoteAddr: mr.Addr() + 0x4000, RKey: mr.RKey() + 1}), // a bad key
		to(mlx5.SendWR{WrID: 2, Opcode: mlx5.OpSend, StreamID: 1}),
		to(mlx5.SendWR{WrID: 3, Opcode: mlx5.OpSend, StreamID: 2}),
	}))
	poll := func(n int) {
		wc := make([]mlx5.Completion, 8)
		for got := 0; got < n; {
			k, err := cq.Poll(wc)
			must(err)
			for _, c := range wc[:k] {
				if c.QPN == dci.QPN() {
					fmt.Printf("DCI wr_id %d: %v\n", c.WrID, c.Status)
				}
			}
			got += k
			time.Sleep(time.Millisecond)
		}
	}
	poll(4) // the DCI's three and the DCT's receive of wr_id 3

	// An error completion: is the QP still in RTS?
	a, err := dci.Query(mlx5.QPAttrState)
	must(err)
	fmt.Println("DCI state:", a.State)
	if a.State == mlx5.QPStateRTS {
		must(dci.ResetDCIStream(1))
		again := to(mlx5.SendWR{WrID: 4, Opcode: mlx5.OpSend, StreamID: 1})
		must(dci.PostSend(&again))
		poll(2)
	}
	// Output:
	// DCI wr_id 1: remote access error
	// DCI wr_id 2: work request flushed
	// DCI wr_id 3: success
	// DCI state: RTS
	// DCI wr_id 4: success
}

// A DC initiator sends to two targets through one DCI: each SEND names
// its DCT (the AH that reaches the DCT's port, the DCT's number and its
// access key), and each DCT receives on its SRQ. The same DCI could reach
// any number of DCTs; nothing is connected beforehand.
func Example_dynamicallyConnected() {
	c, err := mlx5test.Open("cx7")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	must := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	pd, err := c.AllocPD()
	must(err)
	buf, err := mlx5.AllocBuffer(1 << 16)
	must(err)
	defer buf.Close()
	mem := buf.Bytes()
	mr, err := pd.RegMR(mem, mlx5.AccessLocalWrite)
	must(err)
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 64})
	must(err)
	path, err := c.LoopbackPath(1)
	must(err)

	// Two targets: DCTs of their own access keys on one SRQ, in RTR (a
	// DCT goes no further), a receive for each.
	srq, err := c.CreateSRQ(mlx5.SRQOptions{PD: pd, MaxWR: 16, MaxSGE: 1})
	must(err)
	keys := []uint64{0x1111, 0x2222}
	var dcts []*mlx5.QP
	for _, key := range keys {
		dct, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCT, PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: srq, DCAccessKey: key})
		must(err)
		must(dct.Modify(&mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1},
			mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort|mlx5.QPAttrAccessFlags))
		must(dct.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path, MinRNRTimer: 12},
			mlx5.QPAttrState|mlx5.QPAttrAV|mlx5.QPAttrPathMTU|mlx5.QPAttrMinRNRTimer))
		dcts = append(dcts, dct)
	}
	for i := range uint64(2) {
		must(srq.PostRecv(100+i, []mlx5.SGE{{Addr: mr.Addr() + 0x8000 + 0x100*i, Length: 0x100, LKey: mr.LKey()}}))
	}

	// The initiator: one DCI, to RTS without naming any peer.
	dci, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCI, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 16})
	must(err)
	must(dci.Modify(&mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1}, mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort))
	must(dci.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTR, Path: path}, mlx5.QPAttrState|mlx5.QPAttrPathMTU|mlx5.QPAttrAV))
	must(dci.Modify(&mlx5.QPAttr{State: mlx5.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
		mlx5.QPAttrState|mlx5.QPAttrTimeout|mlx5.QPAttrRetryCnt|mlx5.QPAttrRNRRetry|mlx5.QPAttrSQPSN|mlx5.QPAttrMaxQPRdAtomic))
	ah, err := pd.CreateAH(path)
	must(err)

	// One list, two targets.
	msgs := []string{"to the first target", "to the second target"}
	wrs := make([]mlx5.SendWR, 2)
	for i, m := range msgs {
		copy(mem[0x100*i:], m)
		wrs[i] = mlx5.SendWR{WrID: uint64(i + 1), Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled,
			SGL: []mlx5.SGE{{Addr: mr.Addr() + uint64(0x100*i), Length: uint32(len(m)), LKey: mr.LKey()}},
			AH:  ah, RemoteQPN: dcts[i].QPN(), DCAccessKey: keys[i]}
	}
	must(dci.PostSendList(wrs))

	// Four completions: the DCI's two SENDs, and a receive at each DCT,
	// which names the DCT (QPN) and the DCI that sent (SrcQP).
	var sent []uint64
	got := map[uint32]string{}
	wc := make([]mlx5.Completion, 4)
	for n := 0; n < 4; {
		k, err := cq.Poll(wc)
		must(err)
		for _, w := range wc[:k] {
			switch {
			case w.Status != mlx5.WCSuccess:
				log.Fatalf("%+v", w)
			case w.QPN == dci.QPN():
				sent = append(sent, w.WrID)
			case w.SrcQP == dci.QPN():
				off := 0x8000 + 0x100*(w.WrID-100)
				got[w.QPN] = string(mem[off : off+uint64(w.ByteLen)])
			}
		}
		n += k
		time.Sleep(time.Millisecond)
	}
	fmt.Println("the DCI's SENDs done:", len(sent))
	for i, dct := range dcts {
		fmt.Printf("DCT %d received %q\n", i+1, got[dct.QPN()])
	}
	// Output:
	// the DCI's SENDs done: 2
	// DCT 1 received "to the first target"
	// DCT 2 received "to the second target"
}
