package wqe

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/oracle/datapath"
)

// The records of testdata/datapath.jsonl and the datapath records of
// testdata/wrap.jsonl (see testdata/README.md) are read by
// internal/oracle/datapath.
type (
	dpRecord = datapath.Record
	dpWR     = datapath.WR
	dpWQEBB  = datapath.WQEBB
)

// ibvOpcode maps enum ibv_wr_opcode to the mlx5 opcode; LOCAL_INV (7) is
// BuildLocalInv.
var ibvOpcode = map[int]uint8{
	0: OpcodeRDMAWrite,    // IBV_WR_RDMA_WRITE
	1: OpcodeRDMAWriteImm, // IBV_WR_RDMA_WRITE_WITH_IMM
	2: OpcodeSend,         // IBV_WR_SEND
	3: OpcodeSendImm,      // IBV_WR_SEND_WITH_IMM
	4: OpcodeRDMARead,     // IBV_WR_RDMA_READ
	5: OpcodeAtomicCS,     // IBV_WR_ATOMIC_CMP_AND_SWP
	6: OpcodeAtomicFA,     // IBV_WR_ATOMIC_FETCH_AND_ADD
	9: OpcodeSendInval,    // IBV_WR_SEND_WITH_INV
}

const ibvWRLocalInv = 7

// The oracle readers of internal/oracle, by the names these tests use.
var (
	unhex     = oracle.Unhex
	readLines = oracle.Lines
)

// sendOf turns one work request of a record into the builder's input:
// exactly one of the results is non-nil.
func sendOf(t *testing.T, r *dpRecord, api string, wr *dpWR) (*Send, *LocalInv) {
	flags := SendFlags(wr.SendFlags)
	if wr.OpcodeValue == ibvWRLocalInv {
		return nil, &LocalInv{QPN: r.QP.QPN, RKey: uint32(num(t, wr.InvalidateRKey)), Flags: flags}
	}
	op, ok := ibvOpcode[wr.OpcodeValue]
	if !ok {
		op = uint8(wr.OpcodeValue) // an opcode libmlx5 does not know: so must the builder
	}
	s := &Send{
		QPN:       r.QP.QPN,
		Opcode:    op,
		Flags:     flags,
		MaxSGE:    r.QP.SendCap.MaxSendSGE,
		MaxInline: r.QP.SendCap.MaxInlineData,
	}
	switch {
	case wr.ImmData != "":
		s.Imm = uint32(num(t, wr.ImmData))
	case wr.InvalidateRKey != "":
		s.Imm = uint32(num(t, wr.InvalidateRKey))
	}
	if wr.RDMA != nil {
		s.RemoteAddr, s.RKey = num(t, wr.RDMA.RemoteAddr), uint32(num(t, wr.RDMA.RKey))
	}
	if a := wr.Atomic; a != nil {
		s.RemoteAddr, s.RKey = num(t, a.RemoteAddr), uint32(num(t, a.RKey))
		if op == OpcodeAtomicCS {
			s.SwapAdd, s.Compare = num(t, a.Swap), num(t, a.CompareAdd)
		} else {
			s.SwapAdd = num(t, a.CompareAdd)
		}
	}
	switch {
	case api == "ibv_post_send" && flags&SendInline != 0 && len(wr.SGList) > 0:
		// ibv_post_send copies the SGEs' bytes into the WQE.
		for _, g := range wr.SGList {
			if g.BytesHex == nil {
				t.Fatalf("%s: inline SGE without bytes", r.Case)
			}
			s.Inline = append(s.Inline, unhex(t, *g.BytesHex))
		}
	case wr.Setter == "ibv_wr_set_inline_data" || wr.Setter == "ibv_wr_set_inline_data_list":
		for _, d := range wr.InlineData {
			s.Inline = append(s.Inline, unhex(t, d.Hex))
		}
		if s.Inline == nil {
			s.Inline = [][]byte{}
		}
	default:
		for _, g := range wr.SGList {
			s.SGL = append(s.SGL, SGE{Addr: num(t, g.Addr), Length: g.Length, LKey: uint32(num(t, g.Lkey))})
		}
	}
	if u := wr.UD; u != nil {
		a := AHAttr{DLID: u.AH.DLID, SL: u.AH.SL, SrcPathBits: u.AH.SrcPathBits, StaticRate: u.AH.StaticRate, IsGlobal: u.AH.IsGlobal != 0}
		if g := u.AH.GRH; g != nil {
			copy(a.DGID[:], unhex(t, g.DGID))
			a.FlowLabel, a.SGIDIndex, a.HopLimit, a.TClass = g.FlowLabel, g.SGIDIndex, g.HopLimit, g.TrafficClass
		}
		s.UD = &UD{AV: IBAV(&a), RemoteQPN: uint32(num(t, u.RemoteQPN)), QKey: uint32(num(t, u.RemoteQKey))}
	}
	if d := wr.DC; d != nil {
		s.DC = &DC{AV: IBAV(ahAttr(t, &d.AH)), DCTN: uint32(num(t, d.RemoteDCTN)), Key: num(t, d.RemoteDCKey)}
		if d.StreamID != nil {
			s.DC.StreamID = uint16(*d.StreamID)
		}
	}
	return s, nil
}

// ahAttr is a recorded AH's attributes.
func ahAttr(t *testing.T, ah *datapath.AH) *AHAttr {
	a := &AHAttr{DLID: ah.DLID, SL: ah.SL, SrcPathBits: ah.SrcPathBits, StaticRate: ah.StaticRate, IsGlobal: ah.IsGlobal != 0}
	if g := ah.GRH; g != nil {
		copy(a.DGID[:], unhex(t, g.DGID))
		a.FlowLabel, a.SGIDIndex, a.HopLimit, a.TClass = g.FlowLabel, g.SGIDIndex, g.HopLimit, g.TrafficClass
	}
	return a
}

// errQueueFull stands for the one failure that is not the encoder's: the
// queue has no free WQE. The queue's owner checks it; the test models it.
var errQueueFull = errors.New("queue full")

// Errors the builders must return for libmlx5's errno, per queue.
var (
	sendErrnos = map[int][]error{12: {ErrTooManySGEs, ErrInlineTooLong}, 22: {ErrOpcode}}
	recvErrnos = map[int][]error{12: {errQueueFull}, 22: {ErrTooManySGEs}}
)

func errorIsAny(err error, want []error) bool {
	for _, w := range want {
		if errors.Is(err, w) {
			return true
		}
	}
	return false
}

// ringHex is the hex of n WQEBBs of r from producer counter pi on.
func ringHex(r Ring, pi uint16, n int) string {
	var s string
	for i := range n {
		s += hex.EncodeToString(r.Slot(pi + uint16(i)))
	}
	return s
}

type dpCounts struct{ records, exact, errs int }

const junk = 0xee // what the rings hold before a case: every byte the oracle shows must be written

// checkDatapath replays every datapath record of path with the builders
// and compares each WQEBB of the send and receive queues, the doorbell
// record counters, the doorbell or BlueFlame write of every post, and the
// errors.
func checkDatapath(t *testing.T, path string) dpCounts {
	return checkRecords(t, func(each func(*dpRecord)) { datapath.Read(t, path, each) })
}

// checkRecords is checkDatapath for the records read calls each with.
func checkRecords(t *testing.T, read func(each func(r *dpRecord))) dpCounts {
	var n dpCounts
	read(func(r *dpRecord) {
		n.records++
		fails := 0
		errorf := func(format string, args ...any) {
			t.Helper()
			fails++
			t.Errorf("%s: %s", r.Case, fmt.Sprintf(format, args...))
		}
		if r.QP.SQStride != WQEBB {
			t.Fatalf("%s: SQ stride %d", r.Case, r.QP.SQStride)
		}
		ring := make(Ring, r.QP.SQWQECnt*WQEBB)
		rq := make([]byte, r.QP.RQWQECnt*r.QP.RQStride)
		for i := range ring {
			ring[i] = junk
		}
		for i := range rq {
			rq[i] = junk
		}
		rqSlot := func(pi int) []byte {
			i := pi % r.QP.RQWQECnt
			return rq[i*r.QP.RQStride : (i+1)*r.QP.RQStride]
		}
		pi, small := uint16(r.Input.SQStart), false
		rqpi := r.Input.RQStart
		sawErr := false
		if len(r.Result.Posts) != len(r.Input.Posts) {
			t.Fatalf("%s: %d posts, %d results", r.Case, len(r.Input.Posts), len(r.Result.Posts))
		}
		for p, post := range r.Input.Posts {
			want := &r.Result.Posts[p]
			var err error
			bad := -1
			if post.API == "ibv_post_recv" {
				for k := range post.WRs {
					wr := &post.WRs[k]
					if rqpi-r.Input.RQStart >= r.QP.RQWQECnt {
						err, bad = errQueueFull, k
						break
					}
					sgl := make([]SGE, 0, len(wr.SGList))
					for _, g := range wr.SGList {
						sgl = append(sgl, SGE{Addr: num(t, g.Addr), Length: g.Length, LKey: uint32(num(t, g.Lkey))})
					}
					if err = PutRecv(rqSlot(rqpi), sgl); err != nil {
						bad = k
						break
					}
					rqpi++
				}
				if got := rqpi & 0xffff; got != want.RQPIAfter || got != want.DBRec.Recv {
					errorf("post %d: RQ counter %d, libmlx5 %d (dbrec %d)", p, got, want.RQPIAfter, want.DBRec.Recv)
				}
				if len(want.BF.Writes) != 0 {
					errorf("post %d: libmlx5 rang a doorbell for receives", p)
				}
			} else {
				start, startSmall := pi, small
				var last Result
				lastPI := pi
				posted := 0
				for k := range post.WRs {
					s, li := sendOf(t, r, post.API, &post.WRs[k])
					// The SQ is empty when a case starts (the harness
					// completes what it posted to reach sq_start), and
					// nothing completes during it.
					free := r.QP.SQWQECnt - int(pi-uint16(r.Input.SQStart))
					var res Result
					if li != nil {
						li.SmallFence = small
						res, err = BuildLocalInv(ring, pi, free, li)
					} else {
						s.SmallFence = small
						res, err = BuildSend(ring, pi, free, s)
					}
					if err != nil {
						bad = k
						break
					}
					lastPI, last = pi, res
					pi += uint16(res.WQEBBs)
					small = res.SmallFence
					posted++
				}
				if err != nil && post.API == "ibv_wr" {
					// An ibv_wr batch is all or nothing: libmlx5 rolls
					// back the counter and the small fence.
					pi, small, posted = start, startSmall, 0
				}
				if got := int(pi); got != want.SQPIAfter || got != want.DBRec.Send {
					errorf("post %d: SQ counter %d, libmlx5 %d (dbrec %d)", p, got, want.SQPIAfter, want.DBRec.Send)
				}
				// libmlx5 copies a post of one WQE of 2..bf_size/16
				// 16-byte units to the BlueFlame register, else writes the
				// last WQE's first 8 bytes to the doorbell.
				var db string
				switch {
				case posted == 0:
				case posted == 1 && last.DS > 1 && int(last.DS)*16 <= want.BF.Size:
					db = ringHex(ring, lastPI, last.WQEBBs)
				default:
					db = hexU64(last.Doorbell)
				}
				w := want.BF.Writes
				switch {
				case db == "" && len(w) != 0:
					errorf("post %d: no doorbell, libmlx5 wrote %+v", p, w)
				case db != "" && (len(w) != 1 || w[0].Hex != db || w[0].Len != len(db)/2):
					errorf("post %d: doorbell write %s, libmlx5 wrote %+v", p, db, w)
				}
			}
			// Errors: the same WR fails, with the matching error.
			switch {
			case want.Ret == 0 && err != nil:
				errorf("post %d: WR %d: %v; libmlx5 posted it", p, bad, err)
			case want.Ret != 0:
				sawErr = true
				errnos := sendErrnos
				if post.API == "ibv_post_recv" {
					errnos = recvErrnos
				}
				if !errorIsAny(err, errnos[want.Ret]) {
					errorf("post %d: libmlx5 failed with errno %d, builder: %v", p, want.Ret, err)
				}
				if want.BadWR != nil && *want.BadWR != bad {
					errorf("post %d: WR %d failed, libmlx5 bad_wr %d", p, bad, *want.BadWR)
				}
			}
		}

		// The send queue: every WQEBB libmlx5 wrote, at the same ring index.
		if got := (int(pi) - r.SQPIBefore) & 0xffff; got != len(r.SQ.WQEBBs) || int(pi) != r.SQPIAfter {
			errorf("%d WQEBBs to counter %d, libmlx5 %d to %d", got, pi, len(r.SQ.WQEBBs), r.SQPIAfter)
		}
		inCase := map[int]bool{}
		for i, w := range r.SQ.WQEBBs {
			at := uint16(r.SQPIBefore) + uint16(i)
			inCase[slotIndex(ring, at)] = true
			if slotIndex(ring, at) != w.Index {
				errorf("WQEBB %d at ring index %d, libmlx5 %d", i, slotIndex(ring, at), w.Index)
			}
			if got := hex.EncodeToString(ring.Slot(at)); got != w.Hex {
				errorf("WQEBB %d (ring %d)\n got %s\nwant %s", i, w.Index, got, w.Hex)
			}
		}
		// Outside the posted WQEBBs the builders wrote only what libmlx5
		// also left there (the WQEs of a rolled-back ibv_wr batch).
		stray := map[int]string{}
		for _, s := range r.Stray {
			stray[s.Index] = s.Hex
		}
		for i := range r.QP.SQWQECnt {
			bb := ring.Slot(uint16(i))
			if inCase[i] || bytes.Count(bb, []byte{junk}) == len(bb) {
				continue
			}
			if got := hex.EncodeToString(bb); stray[i] != got {
				errorf("ring index %d outside the posted WQEs written:\n got %s\nlibmlx5 %q", i, got, stray[i])
			}
		}
		// The receive queue.
		if r.RQ != nil {
			if r.RQ.Stride != r.QP.RQStride || r.RQ.WQECnt != r.QP.RQWQECnt {
				t.Fatalf("%s: RQ geometry %+v", r.Case, r.RQ)
			}
			if got := rqpi - r.Input.RQStart; got != len(r.RQ.WQEs) {
				errorf("%d receive WQEs, libmlx5 %d", got, len(r.RQ.WQEs))
			}
			for i, w := range r.RQ.WQEs {
				at := r.Input.RQStart + i
				if at%r.QP.RQWQECnt != w.Index {
					errorf("receive WQE %d at index %d, libmlx5 %d", i, at%r.QP.RQWQECnt, w.Index)
				}
				if got := hex.EncodeToString(rqSlot(at)); got != w.Hex {
					errorf("receive WQE %d\n got %s\nwant %s", i, got, w.Hex)
				}
			}
		}
		for i := rqpi; i < r.Input.RQStart+r.QP.RQWQECnt; i++ {
			if w := rqSlot(i); bytes.Count(w, []byte{junk}) != len(w) {
				errorf("receive queue index %d written outside the posted WQEs", i%r.QP.RQWQECnt)
			}
		}
		switch {
		case fails > 0:
		case sawErr:
			n.errs++
		default:
			n.exact++
		}
	})
	return n
}

// TestOracleDatapath replays all 147 records of the datapath family: RC
// and UD sends, RDMA, atomics and LOCAL_INV through both the ibv_wr and
// the ibv_post_send API, inline data, flags and fences, batches, receives,
// and the error cases.
func TestOracleDatapath(t *testing.T) {
	n := checkDatapath(t, "testdata/datapath.jsonl")
	t.Logf("datapath: %d records, %d byte-exact, %d with errors as libmlx5's", n.records, n.exact, n.errs)
	if n.records != 147 || n.exact+n.errs != n.records || n.errs != 9 {
		t.Errorf("datapath: %+v", n)
	}
}

// TestOracleWrapDatapath does the same for the datapath records of the
// wrap family: WQEs across the ring's end and the 16-bit counter wrap.
func TestOracleWrapDatapath(t *testing.T) {
	n := checkDatapath(t, "testdata/wrap.jsonl")
	t.Logf("wrap: %d datapath records, %d byte-exact", n.records, n.exact)
	if n.records != 38 || n.exact != n.records {
		t.Errorf("wrap: %+v", n)
	}
}
