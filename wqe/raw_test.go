package wqe

import (
	"bytes"
	"errors"
	"testing"
)

// TestBuildRawIsBuildSend: a WQE built at counter 0 with QPN 0 and
// written by BuildRaw at another counter, across the ring's end, with the
// QP's number, is byte for byte the WQE BuildSend writes there.
func TestBuildRawIsBuildSend(t *testing.T) {
	s := &Send{Opcode: OpcodeRDMAWrite, Flags: SendSignaled | SendSolicited, RemoteAddr: 0x1122334455667788, RKey: 0xabcdef01,
		MaxSGE: 4, SGL: []SGE{{Addr: 1, Length: 2, LKey: 3}, {Addr: 4, Length: 5, LKey: 6}, {Addr: 7, Length: 8, LKey: 9}, {Addr: 10, Length: 11, LKey: 12}}}
	own := make(Ring, 2*WQEBB)
	r0, err := BuildSend(own, 0, 2, s)
	if err != nil || r0.WQEBBs != 2 {
		t.Fatalf("BuildSend: %+v, %v", r0, err)
	}
	const qpn, pi = 0x12345, 0xfff7 // slot 7 of 8: the WQE wraps
	want := make(Ring, 8*WQEBB)
	s.QPN = qpn
	rw, err := BuildSend(want, pi, 8, s)
	if err != nil {
		t.Fatal(err)
	}
	got := bytes.Repeat([]byte{0xee}, 8*WQEBB)
	before := bytes.Clone(own)
	rr, err := BuildRaw(got, pi, 8, qpn, own)
	if err != nil {
		t.Fatal(err)
	}
	if rr != rw {
		t.Errorf("Result %+v, BuildSend's %+v", rr, rw)
	}
	for _, i := range []uint16{pi, pi + 1} {
		if !bytes.Equal(Ring(got).Slot(i), want.Slot(i)) {
			t.Errorf("WQEBB %#x:\n got %x\nwant %x", i, Ring(got).Slot(i), want.Slot(i))
		}
	}
	if !bytes.Equal(own, before) {
		t.Error("BuildRaw changed its input")
	}
}

// TestBuildRawRefuses: each malformed WQE is refused with its error and
// leaves the ring as it was.
func TestBuildRawRefuses(t *testing.T) {
	wqeOf := func(n int, ds uint8) []byte {
		w := make([]byte, n)
		if n >= CtrlSegSize {
			w[0], w[3], w[7] = 0xff, OpcodeNOP, ds
		}
		return w
	}
	for _, c := range []struct {
		name string
		qpn  uint32
		w    []byte
		free int
		want error
	}{
		{"nil", 1, nil, 8, ErrShort},
		{"shorter than ctrl", 1, wqeOf(15, 1), 8, ErrShort},
		{"ds 0", 1, wqeOf(64, 0), 8, ErrRawDS},
		{"ds past the bytes", 1, wqeOf(16, 2), 8, ErrRawDS},
		{"ds short of the last WQEBB", 1, wqeOf(128, 4), 8, ErrRawDS},
		{"longer than 63 units", 1, wqeOf(MaxRawWQE+16, 63), 32, ErrTooLarge},
		{"qpn of 25 bits", 1 << 24, wqeOf(64, 1), 8, ErrQPN},
		{"larger than the ring", 1, wqeOf(16*WQEBB, 63), 32, ErrRing},
		{"no room", 1, wqeOf(128, 5), 1, ErrNoRoom},
	} {
		r := bytes.Repeat([]byte{0x5a}, 8*WQEBB)
		if c.name == "larger than the ring" {
			r = r[:8*WQEBB]
		}
		before := bytes.Clone(r)
		_, err := BuildRaw(r, 6, c.free, c.qpn, c.w)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if !bytes.Equal(r, before) {
			t.Errorf("%s: the ring was written", c.name)
		}
	}
	// At the limits: one unit, and 63 units in 16 WQEBBs.
	r := make(Ring, 16*WQEBB)
	for _, w := range [][]byte{wqeOf(16, 1), wqeOf(64, 1), wqeOf(MaxRawWQE, 63), wqeOf(63*16, 63)} {
		res, err := BuildRaw(r, 0, 16, 7, w)
		if err != nil || res.DS != w[7] || res.WQEBBs != (int(w[7])*16+63)/64 {
			t.Errorf("%d bytes, ds %d: %+v, %v", len(w), w[7], res, err)
		}
		// opmod and opcode kept, counter 0, QPN 7.
		if got := r[:8]; got[0] != 0xff || got[1] != 0 || got[2] != 0 || got[3] != OpcodeNOP || got[6] != 7 || got[7] != w[7] {
			t.Errorf("%d bytes: ctrl %x", len(w), got)
		}
	}
}
