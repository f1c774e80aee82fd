package cm_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
)

// The NVMe/RDMA transport's private data (NVMe over Fabrics, RDMA
// transport binding; Linux's include/linux/nvme-rdma.h): the host's
// request, the controller's reply, and its reject, all little-endian.
type nvmeRDMAReq struct {
	RecFmt  uint16 // 0: format 1.0
	QID     uint16 // 0 for the admin queue
	HRQSize uint16 // host receive queue size
	HSQSize uint16 // host send queue size, 0's based
	_       [24]byte
}

type nvmeRDMARep struct {
	RecFmt  uint16
	CRQSize uint16 // controller receive queue size
	_       [28]byte
}

type nvmeRDMARej struct {
	RecFmt uint16
	Status uint16 // enum nvme_rdma_cm_status
}

const (
	nvmeRDMAInvalidRecFmt  = 0x02
	nvmeRDMAInvalidHSQSize = 0x04
	nvmeAdminQueueDepth    = 32 // NVME_AQ_DEPTH
)

func marshal(v any) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		log.Fatal(err)
	}
	return b
}

// side is a context on the software ConnectX, its connection manager,
// and a registered buffer for capsules.
type side struct {
	c   *mlx5.Context
	m   *cm.Manager
	pd  *mlx5.PD
	cq  *mlx5.CQ
	buf *mlx5.Buffer
	mr  *mlx5.MR
}

func newSide(c *mlx5.Context) *side {
	s := &side{c: c}
	var err error
	if s.m, err = mlx5test.OpenCM(c); err != nil {
		log.Fatal(err)
	}
	if s.pd, err = c.AllocPD(); err != nil {
		log.Fatal(err)
	}
	if s.cq, err = c.CreateCQ(mlx5.CQOptions{Entries: 64}); err != nil {
		log.Fatal(err)
	}
	if s.buf, err = mlx5.AllocBuffer(4096); err != nil {
		log.Fatal(err)
	}
	if s.mr, err = s.pd.RegMR(s.buf.Bytes(), mlx5.AccessLocalWrite); err != nil {
		log.Fatal(err)
	}
	return s
}

func (s *side) close() {
	s.m.Close()
	s.mr.Close()
	s.buf.Close()
	s.cq.Close()
	s.pd.Close()
}

func (s *side) newQP() *mlx5.QP {
	qp, err := s.c.CreateQP(mlx5.QPOptions{PD: s.pd, SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 32, MaxSendSGE: 1,
		MaxInlineData: 64, MaxRecvWR: 32, MaxRecvSGE: 1})
	if err != nil {
		log.Fatal(err)
	}
	return qp
}

// wait polls the CQ for the completion of wrID.
func (s *side) wait(wrID uint64) mlx5.Completion {
	var wc [4]mlx5.Completion
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		n, err := s.cq.Poll(wc[:])
		if err != nil {
			log.Fatal(err)
		}
		for _, w := range wc[:n] {
			if w.WrID == wrID {
				return w
			}
		}
	}
	log.Fatalf("no completion of %d", wrID)
	return mlx5.Completion{}
}

// An NVMe over Fabrics-style connect over the RDMA connection manager, on
// the software ConnectX: the host asks for an admin queue with the
// NVMe/RDMA request private data (record format, queue id, queue sizes);
// the target checks it and rejects with a status, or accepts with its
// reply private data; then a command capsule goes to the target by SEND
// and its completion comes back. On a real host, cm.Open replaces
// mlx5test.OpenCM and mlx5.Open the contexts.
func Example_nvmeOverFabrics() {
	tc, err := mlx5test.Open("cx7") // the target's context
	if err != nil {
		log.Fatal(err)
	}
	defer tc.Close()
	hc, err := mlx5test.OpenPeer(tc) // the host's, on the same ConnectX
	if err != nil {
		log.Fatal(err)
	}
	defer hc.Close()
	target, host := newSide(tc), newSide(hc)
	defer target.close()
	defer host.close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// The target: check each request as an NVMe/RDMA target does
	// (nvmet_rdma_parse_cm_connect_req), then accept with its reply, a
	// receive posted first for the host's command capsule.
	l, err := target.m.Listen(ctx, "tcp", "192.0.2.1:4420", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	served := make(chan *cm.Conn, 1)
	go func() {
		for {
			r, err := l.Accept(ctx)
			if err != nil {
				return
			}
			var req nvmeRDMAReq
			if _, err := binary.Decode(r.PrivateData(), binary.LittleEndian, &req); err != nil {
				log.Fatal(err)
			}
			recvQueue := int(req.HSQSize) + 1
			switch {
			case req.RecFmt != 0:
				r.Reject(0, marshal(nvmeRDMARej{Status: nvmeRDMAInvalidRecFmt}))
				continue
			case req.QID == 0 && recvQueue > nvmeAdminQueueDepth:
				r.Reject(0, marshal(nvmeRDMARej{Status: nvmeRDMAInvalidHSQSize}))
				continue
			}
			qp := target.newQP()
			if err := qp.PostRecv(1, []mlx5.SGE{{Addr: target.mr.Addr(), Length: 64, LKey: target.mr.LKey()}}); err != nil {
				log.Fatal(err)
			}
			conn, err := r.Accept(ctx, &cm.AcceptOptions{QP: qp, PrivateData: marshal(nvmeRDMARep{CRQSize: uint16(recvQueue)})})
			if err != nil {
				log.Fatal(err)
			}
			served <- conn
		}
	}()

	// The host: an admin queue too deep for the target, then one it takes.
	for _, hsq := range []uint16{63, 31} {
		qp := host.newQP()
		pd := marshal(nvmeRDMAReq{QID: 0, HRQSize: hsq + 1, HSQSize: hsq})
		conn, err := host.m.Dial(ctx, "tcp", "192.0.2.1:4420", &cm.DialOptions{QP: qp, PrivateData: pd})
		var rej *cm.RejectError
		if errors.As(err, &rej) {
			var r nvmeRDMARej
			binary.Decode(rej.PrivateData, binary.LittleEndian, &r)
			fmt.Printf("admin queue of %d entries: rejected, NVMe/RDMA status %#x\n", hsq+1, r.Status)
			qp.Close()
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		var rep nvmeRDMARep
		binary.Decode(conn.PrivateData(), binary.LittleEndian, &rep)
		fmt.Printf("admin queue of %d entries: accepted, controller receive queue %d\n", hsq+1, rep.CRQSize)
		tconn := <-served

		// A command capsule (a Fabrics Connect: opcode 0x7f, fctype 1)
		// by SEND, and a 16-byte completion back.
		capsule := make([]byte, 64)
		capsule[0], capsule[4] = 0x7f, 0x01
		if err := host.newRecv(qp); err != nil {
			log.Fatal(err)
		}
		if err := qp.PostSend(&mlx5.SendWR{WrID: 2, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, Inline: [][]byte{capsule}}); err != nil {
			log.Fatal(err)
		}
		w := target.wait(1)
		got := target.buf.Bytes()[:w.ByteLen]
		fmt.Printf("target received a %d-byte capsule: opcode %#x fctype %#x\n", len(got), got[0], got[4])
		completion := make([]byte, 16)
		binary.LittleEndian.PutUint16(completion[12:], 1) // command id
		if err := tconn.QP().(*mlx5.QP).PostSend(&mlx5.SendWR{WrID: 3, Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, Inline: [][]byte{completion}}); err != nil {
			log.Fatal(err)
		}
		w = host.wait(4)
		fmt.Printf("host received a %d-byte completion for command %d\n", w.ByteLen, binary.LittleEndian.Uint16(host.buf.Bytes()[12:]))

		// The host disconnects; the target sees it.
		conn.Disconnect()
		<-tconn.Done()
		fmt.Println("target:", tconn.Err())
		conn.Close()
		tconn.Close()
		tconn.QP().(*mlx5.QP).Close()
		qp.Close()
	}
	// Output:
	// admin queue of 64 entries: rejected, NVMe/RDMA status 0x4
	// admin queue of 32 entries: accepted, controller receive queue 32
	// target received a 64-byte capsule: opcode 0x7f fctype 0x1
	// host received a 16-byte completion for command 1
	// target: disconnected
}

// newRecv posts the host's receive for the completion.
func (s *side) newRecv(qp *mlx5.QP) error {
	return qp.PostRecv(4, []mlx5.SGE{{Addr: s.mr.Addr(), Length: 64, LKey: s.mr.LKey()}})
}
