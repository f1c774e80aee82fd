package doorbell

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
)

// vector is one post of testdata/doorbells.jsonl (see testdata/README.md).
type vector struct {
	Source string `json:"source"`
	Case   string `json:"case"`
	Post   int    `json:"post"`
	API    string `json:"api"`
	Ret    int    `json:"ret"`
	QP     struct {
		Name   string `json:"name"`
		QPN    int    `json:"qpn"`
		WQECnt int    `json:"sq_wqe_cnt"`
		BFSize int    `json:"bf_size"`
	} `json:"qp"`
	SQBefore int `json:"sq_pi_before"`
	SQAfter  int `json:"sq_pi_after"`
	RQBefore int `json:"rq_pi_before"`
	RQAfter  int `json:"rq_pi_after"`
	WQEs     []struct {
		Counter int      `json:"counter"`
		DS      int      `json:"ds"`
		Opcode  string   `json:"opcode"`
		Slots   []int    `json:"slots"`
		WQEBBs  []string `json:"wqebbs"`
	} `json:"wqes"`
	DBRec struct {
		Recv string `json:"recv_counter_be32"`
		Send string `json:"send_counter_be32"`
	} `json:"dbrec"`
	BF struct {
		Size   int `json:"size"`
		Writes []struct {
			Offset int    `json:"offset"`
			Len    int    `json:"len"`
			Hex    string `json:"hex"`
		} `json:"writes"`
	} `json:"bf"`
}

func (v *vector) name() string { return fmt.Sprintf("%s/%s/post%d", v.Source, v.Case, v.Post) }

func loadVectors(t testing.TB) []vector {
	t.Helper()
	var vs []vector
	oracle.Records(t, "testdata/doorbells.jsonl", nil, func(v *vector) { vs = append(vs, *v) })
	return vs
}

// unhex is internal/oracle's, by the name these tests use.
var unhex = oracle.Unhex

// fakeDevice is the memory a ring writes: a doorbell record and a UAR page,
// as ordinary Go memory. Its BlueFlame register is bfreg 0.
type fakeDevice struct {
	rec []byte
	uar []byte
}

func newFake() *fakeDevice {
	// uint64 backing arrays give the alignment mmap'd pages have.
	return &fakeDevice{
		rec: u64bytes(RecordSize),
		uar: u64bytes(UARSize),
	}
}

func u64bytes(n int) []byte {
	w := make([]uint64, (n+7)/8)
	return bytesOf(w)[:n]
}

func (d *fakeDevice) reg(bfSize int) []byte {
	return d.uar[BlueFlameOffset : BlueFlameOffset+2*bfSize]
}

// TestOracleDoorbells replays every post of the oracle's umr_sig, datapath
// and wrap families through RQ and SQ: it starts from the record the
// harness left (the counters before the post), rings with the counter after
// the post and the WQEs the vector holds, choosing Ring or RingBF with
// UseBlueFlame, and compares the whole record and the whole BlueFlame
// register (both halves) with what libmlx5 left. A post that rang nothing
// (failed posts, receive posts) must leave the register zero.
//
// The BlueFlame half of the first ring of a case depends on the QP's
// history (the oracle lists it as varying), so it is taken from the vector;
// every later ring in the case must use the other half.
func TestOracleDoorbells(t *testing.T) {
	vs := loadVectors(t)
	if len(vs) < 400 {
		t.Fatalf("%d vectors, want the 449 the extraction gives", len(vs))
	}
	counts := map[string]int{}
	var sq *SQ
	var dev *fakeDevice
	for i := range vs {
		v := &vs[i]
		if v.Post == 0 {
			dev = newFake()
			var err error
			sq, err = NewSQ(dev.rec, dev.reg(v.BF.Size), v.BF.Size)
			if err != nil {
				t.Fatal(err)
			}
			if len(v.BF.Writes) > 0 {
				sq.SetHalf(v.BF.Writes[0].Offset)
			}
		}
		// The record and the register as the harness left them.
		putBE32(dev.rec[RecvOffset:], uint32(v.RQBefore))
		putBE32(dev.rec[SendOffset:], uint32(v.SQBefore))
		clear(dev.reg(v.BF.Size))
		rq, err := NewRQ(dev.rec)
		if err != nil {
			t.Fatal(err)
		}

		kind := "none"
		if v.RQAfter != v.RQBefore {
			rq.Ring(uint16(v.RQAfter))
			kind = "rq"
		}
		if n := len(v.WQEs); n > 0 && v.SQAfter != v.SQBefore {
			last := v.WQEs[n-1]
			if sq.UseBlueFlame(n, last.DS) {
				kind = "bf"
				var wqe, wrap []byte
				for j, s := range last.Slots {
					b := unhex(t, last.WQEBBs[j])
					if j > 0 && s < last.Slots[j-1] || wrap != nil {
						wrap = append(wrap, b...)
					} else {
						wqe = append(wqe, b...)
					}
				}
				if wrap != nil {
					kind = "bf-wrap"
				}
				var err error
				if len(wqe) == WQEBB && wrap == nil { // one WQEBB: RingBF1
					kind = "bf1"
					err = sq.RingBF1(uint16(v.SQAfter), (*[WQEBB]byte)(wqe))
				} else if len(wqe) == 2*WQEBB && wrap == nil { // two: RingBF2
					kind = "bf2"
					err = sq.RingBF2(uint16(v.SQAfter), (*[2 * WQEBB]byte)(wqe))
				} else {
					err = sq.RingBF(uint16(v.SQAfter), wqe, wrap)
				}
				if err != nil {
					t.Fatalf("%s: %v", v.name(), err)
				}
			} else {
				kind = "db"
				ctrl := unhex(t, last.WQEBBs[0])[:8]
				if v.SQAfter%2 == 0 { // half the posts ring with the word
					kind = "db-word"
					sq.RingWord(uint16(v.SQAfter), binary.BigEndian.Uint64(ctrl))
				} else if err := sq.Ring(uint16(v.SQAfter), ctrl); err != nil {
					t.Fatalf("%s: %v", v.name(), err)
				}
			}
		}
		counts[v.Source+"/"+kind]++

		wantRec := append(unhex(t, v.DBRec.Recv), unhex(t, v.DBRec.Send)...)
		if !bytes.Equal(dev.rec, wantRec) {
			t.Errorf("%s: record %x, libmlx5 %x", v.name(), dev.rec, wantRec)
		}
		wantReg := make([]byte, 2*v.BF.Size)
		for _, w := range v.BF.Writes {
			b := unhex(t, w.Hex)
			if len(b) != w.Len {
				t.Fatalf("%s: write of %d bytes with %d in hex", v.name(), w.Len, len(b))
			}
			copy(wantReg[w.Offset:], b)
		}
		if got := dev.reg(v.BF.Size); !bytes.Equal(got, wantReg) {
			t.Errorf("%s (%s): BlueFlame register\n got %s\nwant %s", v.name(), kind, writes(got, v.BF.Size), writes(wantReg, v.BF.Size))
		}
	}
	t.Logf("posts replayed by kind: %v", counts)
	// Every kind of ring must have been exercised.
	for _, k := range []string{"umr_sig/db", "datapath/db", "datapath/db-word", "datapath/bf", "datapath/bf1", "datapath/bf2", "datapath/rq", "wrap/db", "wrap/bf", "wrap/bf-wrap"} {
		if counts[k] == 0 {
			t.Errorf("no %s posts", k)
		}
	}
}

// writes describes a register as the oracle does: per half, the non-zero
// extent rounded to 8 bytes, or to 64 if longer than 8.
func writes(reg []byte, half int) string {
	var s []string
	for h := 0; h < 2; h++ {
		p := reg[h*half : (h+1)*half]
		last := 0
		for k, b := range p {
			if b != 0 {
				last = k + 1
			}
		}
		if last == 0 {
			continue
		}
		last = (last + 7) &^ 7
		if last > 8 {
			last = (last + 63) &^ 63
		}
		s = append(s, fmt.Sprintf("{off %d len %d %x}", h*half, last, p[:last]))
	}
	return "[" + strings.Join(s, " ") + "]"
}
