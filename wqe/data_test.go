package wqe

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/sig"
)

// rdmaWrite is the oracle's wr_rdma_write_sge1 benchmark WR: an RDMA write
// of 4096 bytes from one SGE, on its QP 0x1a2 (send caps of dp_rc).
func rdmaWrite() *Send {
	return &Send{
		QPN: 0x1a2, Opcode: OpcodeRDMAWrite, Flags: SendSignaled,
		RemoteAddr: 0x10000000, RKey: 0xabcd01,
		SGL:    []SGE{{Addr: 0x7e5a00000000, Length: 4096, LKey: 0x200100}},
		MaxSGE: 4, MaxInline: 316,
	}
}

// send4 is a signaled SEND of four SGEs.
func send4() *Send {
	return &Send{
		QPN: 0x1a3, Opcode: OpcodeSend, Flags: SendSignaled,
		SGL: []SGE{
			{Addr: 0x7e5a00000040, Length: 256, LKey: 0x200100},
			{Addr: 0x7e5a00001040, Length: 512, LKey: 0x200100},
			{Addr: 0x7e5a00002040, Length: 768, LKey: 0x200100},
			{Addr: 0x7e5a00003040, Length: 1024, LKey: 0xc0ffee},
		},
		MaxSGE: 4, MaxInline: 316,
	}
}

// benchWQE is the WQE libmlx5 wrote for the wr_rdma_write_sge1 benchmark
// (the oracle's bench.json, wqe_sample, at producer counter 0).
const benchWQE = "000000080001a2030000000800000000000000001000000000abcd0100000000" +
	"000010000020010000007e5a0000000000000000000000000000000000000000"

func TestBuildSendRDMAWrite(t *testing.T) {
	r := make(Ring, 4*WQEBB)
	res, err := BuildSend(r, 0, 4, rdmaWrite())
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(r.Slot(0)); got != benchWQE {
		t.Errorf("got  %s\nwant %s", got, benchWQE)
	}
	if res != (Result{WQEBBs: 1, DS: 3, Doorbell: 0x000000080001a203}) {
		t.Errorf("result %+v", res)
	}
}

// TestBuildSendWrap puts a 3-WQEBB inline send on the last WQEBB of a
// ring: the inline bytes continue at the ring's start, split mid-segment.
func TestBuildSendWrap(t *testing.T) {
	data := make([]byte, 150)
	for i := range data {
		data[i] = byte(i + 1)
	}
	s := &Send{QPN: 7, Opcode: OpcodeSend, Inline: [][]byte{data[:100], data[100:]}, MaxInline: 150}
	r := make(Ring, 4*WQEBB)
	for i := range r {
		r[i] = 0xff
	}
	res, err := BuildSend(r, 3, 3, s)
	if err != nil {
		t.Fatal(err)
	}
	if res.WQEBBs != 3 || res.DS != 1+(4+150+15)/16 {
		t.Fatalf("result %+v", res)
	}
	wqe := append(append(append([]byte{}, r.Slot(3)...), r.Slot(4)...), r.Slot(5)...)
	if !bytes.Equal(wqe[20:170], data) || be.Uint32(wqe[16:]) != 150|InlineSeg {
		t.Errorf("inline segment %x", wqe[16:170])
	}
	if !bytes.Equal(wqe[170:], make([]byte, 3*WQEBB-170)) {
		t.Errorf("tail not zeroed: %x", wqe[170:])
	}
	if !bytes.Equal(r.Slot(2), bytes.Repeat([]byte{0xff}, WQEBB)) {
		t.Errorf("slot 2 written")
	}
}

func TestBuildSendErrors(t *testing.T) {
	ud := &UD{AV: IBAV(&AHAttr{DLID: 1}), RemoteQPN: 2, QKey: 3}
	cases := []struct {
		name string
		mod  func(s *Send, r *Ring)
		want error
	}{
		{"qpn", func(s *Send, _ *Ring) { s.QPN = 1 << 24 }, ErrQPN},
		{"ud qpn", func(s *Send, _ *Ring) { s.Opcode = OpcodeSend; s.UD = &UD{RemoteQPN: 1 << 24} }, ErrQPN},
		{"opcode", func(s *Send, _ *Ring) { s.Opcode = 42 }, ErrOpcode},
		{"opcode nop", func(s *Send, _ *Ring) { s.Opcode = OpcodeNOP }, ErrOpcode},
		{"opcode umr", func(s *Send, _ *Ring) { s.Opcode = OpcodeUMR }, ErrOpcode},
		{"ud write", func(s *Send, _ *Ring) { s.UD = ud }, ErrOpcode},
		{"sges", func(s *Send, _ *Ring) { s.SGL = make([]SGE, 5) }, ErrTooManySGEs},
		{"sges max 0", func(s *Send, _ *Ring) { s.MaxSGE = 0 }, ErrTooManySGEs},
		{"inline long", func(s *Send, _ *Ring) { s.SGL = nil; s.Inline = [][]byte{make([]byte, 200), make([]byte, 117)} }, ErrInlineTooLong},
		{"inline and sgl", func(s *Send, _ *Ring) { s.Inline = [][]byte{{1}} }, ErrInline},
		{"inline read", func(s *Send, _ *Ring) { s.SGL = nil; s.Opcode = OpcodeRDMARead; s.Inline = [][]byte{{1}} }, ErrInline},
		{"inline atomic", func(s *Send, _ *Ring) { s.SGL = nil; s.Opcode = OpcodeAtomicFA; s.Inline = [][]byte{{1}} }, ErrInline},
		{"ds", func(s *Send, _ *Ring) {
			s.MaxSGE = 100
			s.SGL = make([]SGE, 62)
			s.SGL[61].Length = 1
			s.SGL[60].Length = 1
		}, nil},
		{"ds over", func(s *Send, _ *Ring) {
			s.MaxSGE = 100
			s.SGL = make([]SGE, 62)
			for i := range s.SGL {
				s.SGL[i].Length = 1
			}
		}, ErrTooLarge},
		{"inline ds over", func(s *Send, _ *Ring) { s.SGL = nil; s.MaxInline = 2000; s.Inline = [][]byte{make([]byte, 1000)} }, ErrTooLarge},
		{"ring small", func(s *Send, r *Ring) { *r = (*r)[:WQEBB]; s.SGL = make([]SGE, 4); s.SGL[3].Length = 1 }, nil},
		{"ring too small", func(s *Send, r *Ring) {
			*r = (*r)[:WQEBB]
			s.SGL = []SGE{{Length: 1}, {Length: 1}, {Length: 1}, {Length: 1}}
		}, ErrRing},
		{"ring not pow2", func(_ *Send, r *Ring) { *r = (*r)[:3*WQEBB] }, ErrRing},
		{"ring ragged", func(_ *Send, r *Ring) { *r = (*r)[:4*WQEBB+1] }, ErrRing},
		{"ring empty", func(_ *Send, r *Ring) { *r = nil }, ErrRing},
		// A data segment's byte_count has 31 bits: bit 31 is InlineSeg.
		{"sge 2^31-1", func(s *Send, _ *Ring) { s.SGL[0].Length = MaxSGELength }, nil},
		{"sge 2^31", func(s *Send, _ *Ring) { s.SGL[0].Length = 1 << 31 }, ErrSGELength},
		{"sge 2^31+64", func(s *Send, _ *Ring) { s.SGL[0].Length = 1<<31 + 64 }, ErrSGELength},
		{"sge 2^31 after an empty one", func(s *Send, _ *Ring) { s.SGL = []SGE{{}, {Length: 0xffffffff}} }, ErrSGELength},
		{"sge 2^31 read", func(s *Send, _ *Ring) { s.Opcode = OpcodeRDMARead; s.SGL[0].Length = 1 << 31 }, ErrSGELength},
		{"sge 2^31 send", func(s *Send, _ *Ring) { s.Opcode = OpcodeSend; s.SGL[0].Length = 1 << 31 }, ErrSGELength},
		// An atomic's data segment is written with 8, whatever the SGE says.
		{"sge 2^31 atomic", func(s *Send, _ *Ring) { s.Opcode = OpcodeAtomicFA; s.SGL[0].Length = 1 << 31 }, nil},
		// The message: the SGEs' sum, against MaxMessage (0: 2^31).
		{"message 2^31", func(s *Send, _ *Ring) { s.SGL = []SGE{{Length: 1 << 30}, {Length: 1 << 30}} }, nil},
		{"message 2^31+1", func(s *Send, _ *Ring) { s.SGL = []SGE{{Length: 1 << 30}, {Length: 1 << 30}, {Length: 1}} }, ErrMsgTooLong},
		{"message 3 x (2^31-1)", func(s *Send, _ *Ring) {
			s.SGL = []SGE{{Length: MaxSGELength}, {Length: MaxSGELength}, {Length: MaxSGELength}}
		}, ErrMsgTooLong},
		{"message max", func(s *Send, _ *Ring) { s.MaxMessage = 4096; s.SGL = []SGE{{Length: 4000}, {Length: 96}} }, nil},
		{"message over max", func(s *Send, _ *Ring) { s.MaxMessage = 4096; s.SGL = []SGE{{Length: 4000}, {Length: 97}} }, ErrMsgTooLong},
		{"read over max", func(s *Send, _ *Ring) { s.Opcode = OpcodeRDMARead; s.MaxMessage = 4096; s.SGL[0].Length = 4097 }, ErrMsgTooLong},
		{"inline over max", func(s *Send, _ *Ring) {
			s.SGL = nil
			s.MaxMessage = 100
			s.Inline = [][]byte{make([]byte, 60), make([]byte, 41)}
		}, ErrMsgTooLong},
		{"atomic over max", func(s *Send, _ *Ring) { s.Opcode = OpcodeAtomicCS; s.MaxMessage = 4; s.SGL[0].Length = 8 }, nil},
		// Inline data never reaches bit 31: a WQE holds less than 1 KiB.
		{"inline huge", func(s *Send, _ *Ring) { s.SGL = nil; s.MaxInline = 1 << 40; s.Inline = [][]byte{make([]byte, 4096)} }, ErrTooLarge},
	}
	for _, tc := range cases {
		s := rdmaWrite()
		r := make(Ring, 8*WQEBB+1)[:4*WQEBB]
		tc.mod(s, &r)
		_, err := BuildSend(r, 3, len(r)/WQEBB, s)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == nil {
			continue
		}
		if !bytes.Equal(r[:cap(r)], make([]byte, cap(r))) {
			t.Errorf("%s: ring written", tc.name)
		}
	}
}

func TestBuildNOP(t *testing.T) {
	r := make(Ring, 2*WQEBB)
	for i := range r {
		r[i] = 0xff
	}
	res, err := BuildNOP(r, 0xfffe, 1, 0x1a2, SendSignaled|SendFence)
	if err != nil {
		t.Fatal(err)
	}
	want := "00fffe00" + "0001a201" + "00000088" + "00000000"
	want += string(bytes.Repeat([]byte("0"), 2*WQEBB-len(want)))
	if got := hex.EncodeToString(r.Slot(0)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if res != (Result{WQEBBs: 1, DS: 1, Doorbell: 0x00fffe000001a201}) {
		t.Errorf("result %+v", res)
	}
	if _, err := BuildNOP(r, 0, 2, 1<<24, 0); !errors.Is(err, ErrQPN) {
		t.Errorf("qpn: %v", err)
	}
	if _, err := BuildNOP(r[:WQEBB+1], 0, 1, 1, 0); !errors.Is(err, ErrRing) {
		t.Errorf("ring: %v", err)
	}
	if _, err := BuildLocalInv(r[:WQEBB], 0, 1, &LocalInv{QPN: 1}); !errors.Is(err, ErrRing) {
		t.Errorf("local inv ring: %v", err)
	}
	if _, err := BuildLocalInv(r, 0, 2, &LocalInv{QPN: 1 << 24}); !errors.Is(err, ErrQPN) {
		t.Errorf("local inv qpn: %v", err)
	}
}

func TestPutRecv(t *testing.T) {
	w := bytes.Repeat([]byte{0xff}, 48)
	if err := PutRecv(w, []SGE{{Addr: 1, Length: 2, LKey: 3}, {Length: 0}}); err != nil {
		t.Fatal(err)
	}
	want := "00000002" + "00000003" + "0000000000000001" + "00000000" + "00000100" + "0000000000000000" +
		"00000000000000000000000000000000"
	if got := hex.EncodeToString(w); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	full := []SGE{{Length: 1}, {Length: 2}, {Length: 3}}
	if err := PutRecv(w, full); err != nil || be.Uint32(w[32:]) != 3 {
		t.Errorf("full WQE: %v %x", err, w)
	}
	for _, c := range []struct {
		n, sges int
		want    error
	}{{0, 0, ErrRecvStride}, {24, 1, ErrRecvStride}, {32, 3, ErrTooManySGEs}} {
		w := make([]byte, c.n)
		if err := PutRecv(w, make([]SGE, c.sges)); !errors.Is(err, c.want) {
			t.Errorf("stride %d, %d SGEs: %v, want %v", c.n, c.sges, err, c.want)
		}
		if !bytes.Equal(w, make([]byte, c.n)) {
			t.Errorf("stride %d: written", c.n)
		}
	}
	// A receive SGE of 2^31 bytes or more fits no data segment; a
	// receive longer than any message is no error.
	for _, c := range []struct {
		sgl  []SGE
		want error
	}{
		{[]SGE{{Length: MaxSGELength}, {Length: MaxSGELength}, {Length: MaxSGELength}}, nil},
		{[]SGE{{Length: 1}, {Length: 1 << 31}}, ErrSGELength},
		{[]SGE{{Length: 0xffffffff}}, ErrSGELength},
		{make([]SGE, 4), ErrTooManySGEs},
	} {
		if err := CheckRecv(c.sgl, 3); !errors.Is(err, c.want) {
			t.Errorf("CheckRecv %v: %v, want %v", c.sgl, err, c.want)
		}
		w := make([]byte, 48)
		if err := PutRecv(w, c.sgl); !errors.Is(err, c.want) {
			t.Errorf("PutRecv %v: %v, want %v", c.sgl, err, c.want)
		}
		if c.want != nil && !bytes.Equal(w, make([]byte, 48)) {
			t.Errorf("PutRecv %v: written", c.sgl)
		}
		// WriteRecv writes in one pass and says whether the SGEs fit.
		if c.want == ErrTooManySGEs {
			continue
		}
		w2 := make([]byte, 48)
		if ok := WriteRecv(w2, c.sgl); ok != (c.want == nil) || (ok && !bytes.Equal(w, w2)) {
			t.Errorf("WriteRecv %v: %v, %x; PutRecv wrote %x", c.sgl, ok, w2, w)
		}
	}
}

func TestPutInline(t *testing.T) {
	b := bytes.Repeat([]byte{0xff}, 40)
	n, err := PutInline(b, []byte{1, 2, 3}, nil, []byte{4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	if err != nil || n != 32 {
		t.Fatalf("%d, %v", n, err)
	}
	want := "8000000d" + "0102030405060708090a0b0c0d" + "000000000000000000000000000000"
	if got := hex.EncodeToString(b[:32]); got != want || b[32] != 0xff {
		t.Errorf("got  %x\nwant %s", b, want)
	}
	if n, err := PutInline(b, nil, []byte{}); n != 0 || err != nil {
		t.Errorf("empty: %d, %v", n, err)
	}
	if _, err := PutInline(b[:31], make([]byte, 13)); !errors.Is(err, ErrShort) {
		t.Errorf("short: %v", err)
	}
}

func TestIBAVRates(t *testing.T) {
	// The ibv_rate values and libmlx5's codes (rates past the table and
	// "168 Gb/s and more" mean no limit).
	for rate, code := range map[uint8]uint8{0: 0, 2: 7, 3: 8, 4: 9, 5: 10, 6: 11, 7: 12, 8: 13, 9: 14, 10: 15, 11: 11, 12: 13, 13: 15, 14: 0, 15: 9, 16: 15, 19: 9, 20: 13, 22: 0, 23: 0, 255: 0} {
		if got := IBAV(&AHAttr{StaticRate: rate, SL: 0x1f}).StatRateSL; got != code<<4|0xf {
			t.Errorf("rate %d: stat_rate_sl %#x, want %#x", rate, got, code<<4|0xf)
		}
	}
}

func TestDataSegmentsShort(t *testing.T) {
	b := make([]byte, 15)
	for name, err := range map[string]error{
		"data":     PutData(b, SGE{}),
		"raddr":    PutRaddr(b, 0, 0),
		"atomic":   PutAtomic(b, 0, 0),
		"datagram": PutDatagram(make([]byte, 47), &UD{}),
	} {
		if !errors.Is(err, ErrShort) {
			t.Errorf("%s: %v, want ErrShort", name, err)
		}
	}
}

func TestDataZeroAllocs(t *testing.T) {
	r := make(Ring, 1024*WQEBB)
	ws, s4 := rdmaWrite(), send4()
	inl := &Send{QPN: 1, Opcode: OpcodeSend, Inline: [][]byte{make([]byte, 60)}, MaxInline: 316}
	li := &LocalInv{QPN: 1, RKey: 2}
	rq := make([]byte, 64)
	pi := uint16(1020)
	if n := testing.AllocsPerRun(100, func() {
		for _, s := range []*Send{ws, s4, inl} {
			res, err := BuildSend(r, pi, 1024, s)
			if err != nil {
				t.Fatal(err)
			}
			pi += uint16(res.WQEBBs)
		}
		res, _ := BuildLocalInv(r, pi, 1024, li)
		pi += uint16(res.WQEBBs)
		res, _ = BuildNOP(r, pi, 1024, 1, 0)
		pi += uint16(res.WQEBBs)
		_ = PutRecv(rq, s4.SGL)
	}); n != 0 {
		t.Errorf("%v allocs per build", n)
	}
}

// BenchmarkBuildSendRDMAWrite is the WQE of the oracle's
// wr_rdma_write_sge1 and post_send_rdma_write_sge1 benches: a signaled
// RDMA write of one 4096-byte SGE.
func BenchmarkBuildSendRDMAWrite(b *testing.B) {
	benchSend(b, rdmaWrite())
}

// BenchmarkBuildSendSGE4 is a signaled SEND of four SGEs (2 WQEBBs).
func BenchmarkBuildSendSGE4(b *testing.B) {
	benchSend(b, send4())
}

func benchSend(b *testing.B, s *Send) {
	r := make(Ring, 1024*WQEBB)
	var pi uint16
	b.ReportAllocs()
	for b.Loop() {
		res, err := BuildSend(r, pi, 1024, s)
		if err != nil {
			b.Fatal(err)
		}
		pi += uint16(res.WQEBBs)
	}
}

// TestBuildNoRoom checks every builder against the free WQEBBs: exactly
// enough succeeds, one fewer fails with ErrNoRoom, the WQEBBs needed and
// an untouched ring; more than the ring counts as the ring; work request
// and ring errors come first.
func TestBuildNoRoom(t *testing.T) {
	mc := sample()
	builders := []struct {
		name  string
		need  int
		build func(r Ring, free int) (Result, error)
		bad   func(r Ring, free int) (Result, error) // an invalid work request
	}{
		{"send", 2,
			func(r Ring, free int) (Result, error) { return BuildSend(r, 7, free, send4()) },
			func(r Ring, free int) (Result, error) { s := send4(); s.MaxSGE = 3; return BuildSend(r, 7, free, s) }},
		{"local inv", 2,
			func(r Ring, free int) (Result, error) { return BuildLocalInv(r, 7, free, &LocalInv{QPN: 1, RKey: 2}) },
			func(r Ring, free int) (Result, error) { return BuildLocalInv(r, 7, free, &LocalInv{QPN: 1 << 24}) }},
		{"nop", 1,
			func(r Ring, free int) (Result, error) { return BuildNOP(r, 7, free, 1, 0) },
			func(r Ring, free int) (Result, error) { return BuildNOP(r, 7, free, 1<<24, 0) }},
		{"mkey configure", 6,
			func(r Ring, free int) (Result, error) {
				res, err := BuildMkeyConfigure(r, 7, free, mc)
				return res.Result, err
			},
			func(r Ring, free int) (Result, error) {
				c := *mc
				c.Flags = 0
				res, err := BuildMkeyConfigure(r, 7, free, &c)
				return res.Result, err
			}},
	}
	for _, b := range builders {
		r := make(Ring, 8*WQEBB)
		for _, free := range []int{b.need - 1, 0, -1, -1 << 40} {
			res, err := b.build(r, free)
			if !errors.Is(err, ErrNoRoom) || res != (Result{WQEBBs: b.need}) {
				t.Errorf("%s, %d free: %+v, %v; want ErrNoRoom needing %d", b.name, free, res, err, b.need)
			}
			if !bytes.Equal(r, make([]byte, len(r))) {
				t.Fatalf("%s, %d free: ring written", b.name, free)
			}
			if _, err := b.bad(r, free); err == nil || errors.Is(err, ErrNoRoom) {
				t.Errorf("%s, %d free, invalid request: %v", b.name, free, err)
			}
			if _, err := b.build(r[:8*WQEBB-1], free); !errors.Is(err, ErrRing) {
				t.Errorf("%s, %d free, bad ring: %v, want ErrRing", b.name, free, err)
			}
			if b.need > 1 {
				if _, err := b.build(r[:WQEBB], free); !errors.Is(err, ErrRing) {
					t.Errorf("%s, %d free, ring of 1 WQEBB: %v, want ErrRing", b.name, free, err)
				}
			}
		}
		for _, free := range []int{b.need, 8, 9, 1 << 40} {
			res, err := b.build(r, free)
			if err != nil || res.WQEBBs != b.need {
				t.Errorf("%s, %d free: %+v, %v", b.name, free, res, err)
			}
		}
	}
}

// TestNilInputs: every exported function that takes a pointer (or has a
// pointer receiver) answers a nil one without panicking: the builders,
// segment writers and decoders with ErrNil and nothing written, the
// accessors with the zero value.
func TestNilInputs(t *testing.T) {
	r := make(Ring, 8*WQEBB)
	b := make([]byte, 256)
	for name, f := range map[string]func() (Result, error){
		"BuildSend":     func() (Result, error) { return BuildSend(r, 0, 8, nil) },
		"BuildLocalInv": func() (Result, error) { return BuildLocalInv(r, 0, 8, nil) },
		"BuildMkeyConfigure": func() (Result, error) {
			res, err := BuildMkeyConfigure(r, 0, 8, nil)
			if res != (MkeyConfigureResult{}) {
				return Result{WQEBBs: -1}, err
			}
			return res.Result, err
		},
	} {
		if res, err := f(); !errors.Is(err, ErrNil) || res != (Result{}) {
			t.Errorf("%s(nil): %+v, %v; want ErrNil", name, res, err)
		}
	}
	var cqe *CQE
	var sigCQE *SigErrCQE
	for name, err := range map[string]error{
		"PutCtrl":          PutCtrl(b, nil),
		"PutUMRCtrl":       PutUMRCtrl(b, nil),
		"PutMkc":           PutMkc(b, nil),
		"PutDatagram":      PutDatagram(b, nil),
		"CQE.Decode":       cqe.Decode(b),
		"SigErrCQE.Decode": sigCQE.Decode(b),
	} {
		if !errors.Is(err, ErrNil) {
			t.Errorf("%s(nil): %v; want ErrNil", name, err)
		}
	}
	if !bytes.Equal(r, make([]byte, len(r))) || !bytes.Equal(b, make([]byte, len(b))) {
		t.Error("written")
	}
	if err := PutBSF(b, nil, 1, 2); !errors.Is(err, sig.ErrNoDomain) {
		t.Errorf("PutBSF(nil): %v", err)
	}
	if cqe.SrcQP() != 0 || cqe.SL() != 0 || cqe.GRH() || cqe.IsError() || sigCQE.Sig() != (sig.SigErrCQE{}) {
		t.Error("accessors of a nil CQE")
	}
	if av := IBAV(nil); av != (AV{}) {
		t.Errorf("IBAV(nil) = %+v", av)
	}
	for _, bad := range []Ring{nil, r[:3*WQEBB], r[:WQEBB+1]} {
		if s := bad.Slot(5); s != nil {
			t.Errorf("Slot of a %d-byte ring: %d bytes", len(bad), len(s))
		}
	}
}
