package wqe

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle/datapath"
)

// dcPath holds libmlx5 44.0's DCI work requests (the oracle's dc family,
// recorded with mlx5's dc_oracle.diff; ../mlx5/testdata/README.md).
const dcPath = "../mlx5/testdata/dc.jsonl"

// dcNotBuilt are the dc records whose WQEs BuildSend does not write as
// libmlx5 wrote them, each with the reason. Everything else of the dc
// family's data path is built byte for byte, stream ids beyond a DCI's
// streams included (the builder writes the id it is given; package mlx5
// refuses those, docs/MLX5.md).
var dcNotBuilt = map[string]string{
	"wr/no_dc_addr/send_sge1_alone":                  "a WR without mlx5dv_wr_set_dc_addr: libmlx5 leaves it unfinished, yet rings for it; mlx5 refuses a DCI WR without a DC address",
	"wr/no_dc_addr/send_sge1_then_send_with_dc_addr": "as above: the next WR overwrites the unfinished one",
	"wr/no_data_setter/send_dc_addr_alone":           "no data setter: libmlx5 never finishes the WQE; BuildSend writes a SEND without data (ds 4, as libmlx5's zero-length SGE)",
	"wr/misuse/local_inv_then_dc_addr":               "a DC setter after LOCAL_INV overwrites its UMR segments; mlx5 refuses a DC address on LOCAL_INV",
	"wr/bind_mw/type2/signaled":                      "memory windows: no builder",
	"wr/addr/send_sge1/dct_81000001_over_24_bits":    "a DCT number over 24 bits: BuildSend refuses it (ErrQPN); PutDCAddr writes it as libmlx5 does (TestPutDCAddrUnmasked)",
	"post_send/send/sge1/signaled":                   "ibv_post_send on a DCI writes no address vector: mlx5 posts DCI WRs with their DC address only",
	"post_send/rdma_write/sge2/signaled":             "as above, and no remote address segment either",
	"post_send/send/inline16/inline_signaled":        "as above",
}

// TestOracleDCWQEs replays the dc family's data path records with the
// builders, as TestOracleDatapath does the datapath family's: every DCI
// opcode (SEND, SEND_IMM, SEND_INV, RDMA WRITE, WRITE_IMM, READ, CAS, FAA;
// LOCAL_INV without an address vector), 1, 2 and 4 SGEs, zero-length
// SGEs, inline data up to the granted maximum and over it (ErrInlineTooLong
// for libmlx5's ENOMEM), every flag, three AHs with and without GRH, DCT
// numbers and keys, the DC setter before and after the data setter,
// stream ids (0, 1..7, 8 and 0xffff on 2^3 streams, 63 and 64 on 2^6, 5
// on a DCI without streams), batches to several DCTs, the small fence
// after LOCAL_INV, and WQEs across the ring's end and the 16-bit counter:
// every WQEBB, the doorbell record, the doorbell or BlueFlame write.
func TestOracleDCWQEs(t *testing.T) {
	var skipped []string
	n := checkRecords(t, func(each func(*dpRecord)) {
		datapath.ReadDC(t, dcPath, func(r *dpRecord) {
			if why := dcNotBuilt[r.Case]; why != "" {
				skipped = append(skipped, r.Case)
				return
			}
			each(r)
		})
	})
	t.Logf("dc: %d records, %d byte-exact, %d failing as libmlx5; %d not built (dcNotBuilt)", n.records, n.exact, n.errs, len(skipped))
	if n.records != 99 || n.exact != 94 || n.errs != 5 || len(skipped) != len(dcNotBuilt) {
		t.Errorf("dc: %+v, %d skipped (want 99 records: 94 exact, 5 errors, and %d skipped)", n, len(skipped), len(dcNotBuilt))
	}
}

// TestPutDCAddrUnmasked: PutDCAddr writes the address vector libmlx5's
// mlx5_send_wr_set_dc_addr writes, DCT number over 24 bits included (it
// is ORed in unmasked), and BuildSend refuses such a number.
func TestPutDCAddrUnmasked(t *testing.T) {
	const kase = "wr/addr/send_sge1/dct_81000001_over_24_bits"
	found := false
	datapath.ReadDC(t, dcPath, func(r *dpRecord) {
		if r.Case != kase {
			return
		}
		found = true
		s, _ := sendOf(t, r, "ibv_wr", &r.Input.Posts[0].WRs[0])
		b := bytes.Repeat([]byte{junk}, DatagramSegSize+1)
		if err := PutDCAddr(b, s.DC); err != nil {
			t.Fatal(err)
		}
		if got, want := hex.EncodeToString(b[:DatagramSegSize]), r.SQ.WQEBBs[0].Hex[2*CtrlSegSize:2*WQEBB]; got != want {
			t.Errorf("address vector\n got %s\nwant %s", got, want)
		}
		if b[DatagramSegSize] != junk {
			t.Errorf("written past the segment")
		}
		ring := make(Ring, 4*WQEBB)
		if _, err := BuildSend(ring, 0, 4, s); !errors.Is(err, ErrQPN) {
			t.Errorf("BuildSend with DCT number %#x: %v, want ErrQPN", s.DC.DCTN, err)
		}
		if !bytes.Equal(ring, make(Ring, 4*WQEBB)) {
			t.Errorf("BuildSend wrote the refused WQE")
		}
	})
	if !found {
		t.Fatalf("no record %s", kase)
	}
}

// A DC destination and a UD one on one work request are refused before
// anything is written; the stream id goes to the ctrl segment's bytes 9
// and 10, also through PutCtrl.
func TestBuildSendDCDestinations(t *testing.T) {
	dc := &DC{AV: IBAV(&AHAttr{DLID: 0x22}), DCTN: 0x1234, Key: 0x0123456789abcdef}
	base := Send{QPN: 0x1a4, Opcode: OpcodeSend, Flags: SendSignaled, MaxSGE: 1, SGL: []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}
	for _, c := range []struct {
		name string
		edit func(s *Send)
		err  error
	}{
		{"UD and DC", func(s *Send) { s.DC, s.UD = dc, &UD{RemoteQPN: 1} }, ErrDest},
		{"DCT number of 25 bits", func(s *Send) { s.DC = &DC{DCTN: 1 << 24} }, ErrQPN},
	} {
		s := base
		c.edit(&s)
		ring := make(Ring, 4*WQEBB)
		if _, err := BuildSend(ring, 0, 4, &s); !errors.Is(err, c.err) || !bytes.Equal(ring, make(Ring, 4*WQEBB)) {
			t.Errorf("%s: %v, want %v and nothing written", c.name, err, c.err)
		}
	}
	s := base
	dc.StreamID = 0xbeef
	s.DC = dc
	ring := make(Ring, 4*WQEBB)
	res, err := BuildSend(ring, 3, 4, &s)
	if err != nil || res.DS != 5 || res.WQEBBs != 2 {
		t.Fatalf("%+v, %v", res, err)
	}
	w := ring.Slot(3)
	if w[9] != 0xbe || w[10] != 0xef || w[11] != CtrlCQUpdate || be.Uint64(w[16:]) != dc.Key || be.Uint32(w[24:]) != 0x80001234 {
		t.Errorf("WQE % x", w)
	}
	var c [CtrlSegSize]byte
	if err := PutCtrl(c[:], &Ctrl{Opcode: OpcodeSend, StreamID: 0x0102, FmCeSe: 8}); err != nil || c[9] != 1 || c[10] != 2 || c[11] != 8 {
		t.Errorf("PutCtrl: % x, %v", c, err)
	}
}
