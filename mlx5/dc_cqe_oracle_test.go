package mlx5

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	dp "github.com/mlx5go/mlx5go/internal/oracle/datapath"
	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// dcScript is one cqe/ record of testdata/dc.jsonl: posts on a DCI, or
// receives on the DCTs' SRQ, then the CQEs the harness wrote, each
// polled, with QP-state queries, stream resets and a recovery between.
type dcScript struct {
	Case string `json:"case"`
	QP   *struct {
		QPN        uint32 `json:"qpn"`
		SQWQECnt   int    `json:"sq_wqe_cnt"`
		DCIStreams *struct {
			Conc int `json:"log_num_concurent"`
		} `json:"dci_streams"`
		SendCap struct {
			MaxSendSGE    int `json:"max_send_sge"`
			MaxInlineData int `json:"max_inline_data"`
		} `json:"send_cap"`
	} `json:"qp"`
	DCT *struct {
		QPN uint32 `json:"qpn"`
		SRQ struct {
			SRQN   uint32 `json:"srqn"`
			Stride int    `json:"stride"`
			WQEs   int    `json:"wqes"`
		} `json:"srq"`
	} `json:"dct"`
	Steps []struct {
		Step     string  `json:"step"`
		WRs      []dp.WR `json:"wrs"`
		PIAfter  int     `json:"sq_pi_after"`
		Counters []int   `json:"wqe_counters"`
		SQ       struct {
			WQEBBs []dp.WQEBB `json:"wqebbs"`
		} `json:"sq"`
		SRQWQEs []dp.WQEBB `json:"srq_wqes_changed"`
		CQE     struct {
			Index int    `json:"cq_index"`
			Hex   string `json:"hex"`
		} `json:"cqe"`
		Poll json.RawMessage `json:"poll"`
		// ibv_query_qp, mlx5dv_dci_stream_id_reset
		State    string      `json:"qp_state"`
		StreamID uint16      `json:"stream_id"`
		Ret      int         `json:"ret"`
		Cmds     []resetCall `json:"kernel_cmds"`
	} `json:"steps"`
}

// ibvWC is what libmlx5 reported for a CQE: ibv_poll_cq's struct ibv_wc
// (fields it did not write keep the harness's 0xa5 fill), or the
// ibv_wc_read_* readers after ibv_start_poll.
type ibvWC struct {
	WrID      uint64 `json:"wr_id"`
	Status    int    `json:"status"`
	Opcode    int    `json:"opcode"`
	VendorErr uint32 `json:"vendor_err"`
	ByteLen   uint32 `json:"byte_len"`
	Imm       string `json:"imm_data_be32toh"`
	InvRKey   string `json:"invalidated_rkey"`
	QPN       uint32 `json:"qp_num"`
	SrcQP     uint32 `json:"src_qp"`
	WCFlags   int    `json:"wc_flags"`
	PKeyIndex *int   `json:"pkey_index"`
	SLID      uint16 `json:"slid"`
	SL        uint8  `json:"sl"`
	DLIDPath  uint8  `json:"dlid_path_bits"`
}

// The bits of enum ibv_wc_flags.
const (
	ibvWCGRH     = 1 << 0
	ibvWCWithImm = 1 << 1
	ibvWCWithInv = 1 << 3
)

// srqDevice answers CreateSRQ for a DCT's SRQ of the record, then is a
// resetDevice.
type srqDevice struct {
	resetDevice
	srqn uint32
}

func (d *srqDevice) CreateSRQ(s seam.SRQCreate, drvIn, drvOut []byte) (seam.Handle, seam.SRQCreated, error) {
	return 5, seam.SRQCreated{SRQN: d.srqn, MaxWR: s.MaxWR, MaxSGE: s.MaxSGE}, nil
}

// TestOracleDCCompletions replays the dc family's CQE scripts
// (testdata/dc.jsonl cqe/): the DCI's work requests posted as libmlx5
// posted them (its WQEBBs and counters, byte for byte), the receives on
// the DCTs' SRQ (its WQEs, byte for byte), then each CQE the harness
// wrote, polled with CQ.Poll and compared with what libmlx5 reported: a
// DCI's wr_id (mapped by wqe_counter, also out of SQ order), status,
// vendor error, QP number, opcode of a success and an RDMA READ's
// byte_len; a DCT's receive (wr_id from its SRQ, opcode, byte_len,
// immediate data, invalidated key, source QP, SL, SLID, path bits, P_Key
// index, GRH); a stream reset and the QP-state queries between (the
// reset in ERR is refused with ErrInvalid where libmlx5 says EOPNOTSUPP,
// docs/MLX5.md); and the recovery through RESET. Not compared, as for an
// RC QP's completions: a requester's IBV_WC_WITH_IMM and an atomic's
// byte_len of 8 (mlx5's Completion reports neither for the sender), and
// the ibv_cq_ex readers' view of an error CQE (zero fields where Poll
// reports the receive's opcode).
func TestOracleDCCompletions(t *testing.T) {
	n := 0
	dev := &srqDevice{resetDevice: resetDevice{qpcExt: true}}
	c := &Context{dev: dev, devx: true, verbs: true}
	c.caps.MaxDCIStreams = DCIStreams{LogConcurrent: 6, LogErrored: 4} // the fake kernel's
	c.caps.MaxSRQRecvWR = 32767
	var srq *SRQ // the DCTs': the records use it one after the other
	for _, line := range loadLines(t, "testdata/dc.jsonl") {
		var s dcScript
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s.Case, "cqe/") {
			continue
		}
		n++
		if s.DCT != nil && srq == nil {
			dev.srqn = s.DCT.SRQ.SRQN
			var err error
			if srq, err = c.CreateSRQ(SRQOptions{PD: &PD{c: c}, MaxWR: 16, MaxSGE: 1}); err != nil {
				t.Fatal(err)
			}
			if got := len(srq.wrID) << srq.shift; len(srq.wrID) != s.DCT.SRQ.WQEs || got != s.DCT.SRQ.WQEs*s.DCT.SRQ.Stride {
				t.Fatalf("SRQ of %d WQEs, %d bytes; libmlx5's %+v", len(srq.wrID), got, s.DCT.SRQ)
			}
		}
		t.Run(s.Case, func(t *testing.T) { dcScriptCase(t, c, dev, srq, &s) })
	}
	if n != 7 {
		t.Errorf("%d cqe records, want the oracle's 7", n)
	}
}

// dcScriptStreams are the scripts that post on streams their DCI does not
// have: mlx5 refuses those (docs/MLX5.md), so the replay posts them on the
// stream id modulo the DCI's streams (the channel the model reads it as)
// to replay libmlx5's CQEs, and compares the WQEs but for the stream id.
var dcScriptStreams = map[string]string{
	"cqe/dci/req_err_each_syndrome": "14 SENDs on streams 0 to 13 of a DCI of 2^3",
}

func dcScriptCase(t *testing.T, c *Context, dev *srqDevice, srq *SRQ, s *dcScript) {
	cq := testCQ(t, c, 512, 0)
	var qp *QP
	switch {
	case s.QP != nil:
		qp, _ = testQP(t, c, s.QP.SQWQECnt)
		qp.qpn, qp.name, qp.typ, qp.sq.maxWQE, qp.verbs = s.QP.QPN, qpName(s.QP.QPN), QPTypeDCI, s.QP.SQWQECnt, true
		qp.sq.maxSGE, qp.sq.maxInline, qp.state, qp.sendCQ, qp.recvCQ = s.QP.SendCap.MaxSendSGE, s.QP.SendCap.MaxInlineData, QPStateRTS, cq, cq
		if st := s.QP.DCIStreams; st != nil {
			qp.dciStreams, qp.sq.maxStream = true, uint16(1<<st.Conc-1)
		}
	default:
		qp = &QP{c: c, qpn: s.DCT.QPN, name: qpName(s.DCT.QPN), typ: QPTypeDCT, srq: srq, verbs: true, sendCQ: cq, recvCQ: cq}
	}
	cq.attachLocked(qp)
	for i := range s.Steps {
		st := &s.Steps[i]
		switch st.Step {
		case "post":
			before := qp.sq.pi
			b := qp.Begin()
			wrs := make([]SendWR, len(st.WRs))
			_, modulo := dcScriptStreams[s.Case]
			for k := range st.WRs {
				wrs[k] = dcSendWR(t, qp, &st.WRs[k])
				if modulo {
					wrs[k].StreamID &= qp.sq.maxStream
				}
				b.Add(&wrs[k])
			}
			if err := b.Commit(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if int(qp.sq.pi) != st.PIAfter {
				t.Errorf("step %d: counter %d, libmlx5 %d", i, qp.sq.pi, st.PIAfter)
			}
			for k, w := range st.SQ.WQEBBs {
				bb := qp.sq.ring.Slot(before + uint16(k))
				if modulo && slices.Contains(st.Counters, int(before)+k) { // a ctrl segment
					bb = append([]byte(nil), bb...)
					copy(bb[9:11], dp.Unhex(t, w.Hex[18:22]))
				}
				if g := hex.EncodeToString(bb); g != w.Hex {
					t.Errorf("step %d: WQEBB %d\n got %s\nwant %s", i, k, g, w.Hex)
				}
			}
		case "ibv_post_srq_recv":
			wrs := make([]RecvWR, len(st.WRs))
			for k, w := range st.WRs {
				wrs[k].WrID = w.WrID
				for _, g := range w.SGList {
					wrs[k].SGL = append(wrs[k].SGL, SGE{Addr: dp.Num(t, g.Addr), Length: g.Length, LKey: uint32(dp.Num(t, g.Lkey))})
				}
			}
			if err := qp.srq.PostRecvList(wrs); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			for _, w := range st.SRQWQEs {
				if g := hex.EncodeToString(qp.srq.wqe(uint16(w.Index))); g != w.Hex {
					t.Errorf("step %d: SRQ WQE %d\n got %s\nwant %s", i, w.Index, g, w.Hex)
				}
			}
		case "cqe":
			copy(cq.ring[st.CQE.Index%512*cqeSize:], dp.Unhex(t, st.CQE.Hex))
			cq.ci = uint32(st.CQE.Index) // the harness's CQ had completed others before
			var wc [2]Completion
			got, err := cq.Poll(wc[:])
			if err != nil || got != 1 {
				t.Fatalf("step %d: %d completions, %v", i, got, err)
			}
			checkDCCompletion(t, i, qp, &wc[0], st.Poll)
		case "ibv_query_qp":
			qp.state = ibvStates[st.State] // what Query keeps, as ibv_query_qp
		case "mlx5dv_dci_stream_id_reset":
			dev.calls, dev.answer = nil, &resetCall{Ret: 0}
			err := qp.ResetDCIStream(st.StreamID)
			switch {
			case st.Ret == 0 && (err != nil || len(dev.calls) != 1):
				t.Errorf("step %d: reset of stream %d: %v, %d commands", i, st.StreamID, err, len(dev.calls))
			case st.Ret == int(unix.EOPNOTSUPP) && qp.state != QPStateRTS:
				// libmlx5: EOPNOTSUPP for a QP not in RTS; mlx5: ErrInvalid.
				if !errors.Is(err, ErrInvalid) || len(dev.calls) != 0 {
					t.Errorf("step %d: reset in %v: %v, %d commands", i, qp.state, err, len(dev.calls))
				}
			case st.Ret != 0 && !errors.Is(err, unix.Errno(st.Ret)):
				t.Errorf("step %d: reset: %v, libmlx5 errno %d", i, err, st.Ret)
			}
			if len(st.Cmds) == 1 && len(dev.calls) == 1 {
				if _, in, _ := st.Cmds[0].attr("CMD_IN"); hex.EncodeToString(dev.calls[0].in) != hex.EncodeToString(in) {
					t.Errorf("step %d: reset command\n %x\nlibmlx5\n %x", i, dev.calls[0].in, in)
				}
			}
		case "ibv_modify_qp": // RESET -> RTS: the QP starts over at counter 0
			qp.restart()
			qp.state = QPStateRTS
		case "device_reports_state":
		default:
			t.Fatalf("step %d: %s", i, st.Step)
		}
	}
}

// checkDCCompletion compares what Poll made of CQE step i with what
// libmlx5 reported.
func checkDCCompletion(t *testing.T, i int, qp *QP, g *Completion, poll json.RawMessage) {
	t.Helper()
	var p struct {
		API string `json:"api"`
		WC  *ibvWC `json:"wc"`
		ibvWC
	}
	if err := json.Unmarshal(poll, &p); err != nil {
		t.Fatal(err)
	}
	w := &p.ibvWC
	if p.WC != nil {
		w = p.WC
	}
	bad := g.WrID != w.WrID || int(g.Status) != w.Status || g.QPN != w.QPN
	if w.Status != 0 {
		bad = bad || uint32(g.VendorErr) != w.VendorErr
	} else {
		bad = bad || int(g.Opcode) != w.Opcode
	}
	switch {
	case qp.typ == QPTypeDCI && g.Opcode == WCRDMARead:
		bad = bad || g.ByteLen != w.ByteLen
	case qp.typ == QPTypeDCT && w.Status == 0:
		bad = bad || g.ByteLen != w.ByteLen || g.SrcQP != w.SrcQP || g.SL != w.SL || g.SLID != w.SLID || g.DLIDPathBits != w.DLIDPath ||
			g.GRH != (w.WCFlags&ibvWCGRH != 0) || g.WithImm != (w.WCFlags&ibvWCWithImm != 0) || g.WithInv != (w.WCFlags&ibvWCWithInv != 0)
		if g.WithImm {
			bad = bad || g.Imm != uint32(dp.Num(t, w.Imm))
		}
		if g.WithInv {
			bad = bad || g.InvalidatedRkey != uint32(dp.Num(t, w.InvRKey))
		}
		if w.PKeyIndex != nil {
			bad = bad || int(g.PKeyIndex) != *w.PKeyIndex
		}
	}
	if bad {
		t.Errorf("step %d: %+v\nlibmlx5 (%s): %+v", i, *g, p.API, *w)
	}
}
