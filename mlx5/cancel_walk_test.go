package mlx5

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/uverbs"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// The NOP rewrite: opmod and opcode become 0, the WQE index and every
// other byte stay; a NOP is left alone.
func TestCancelNOPWord(t *testing.T) {
	for _, op := range []uint8{wqe.OpcodeSend, wqe.OpcodeSendImm, wqe.OpcodeSendInval, wqe.OpcodeRDMAWrite, wqe.OpcodeRDMAWriteImm,
		wqe.OpcodeRDMARead, wqe.OpcodeAtomicCS, wqe.OpcodeAtomicFA, wqe.OpcodeUMR, wqe.OpcodeSetPSV, wqe.OpcodeNOP} {
		b := make([]byte, 2*wqe.WQEBB)
		for i := range b {
			b[i] = byte(i*13 + 1)
		}
		binary.BigEndian.PutUint32(b, 0xab<<24|0x1234<<8|uint32(op))
		want := bytes.Clone(b)
		if op != wqe.OpcodeNOP {
			binary.BigEndian.PutUint32(want, 0x1234<<8)
		}
		if got := nopWQE(b); got != (op != wqe.OpcodeNOP) || !bytes.Equal(b, want) {
			t.Errorf("opcode %#x: %v\n got %x\nwant %x", op, got, b, want)
		}
	}
}

// walkQP is a verbs QP on a recording kernel whose QUERY_QP answers SQD
// and the counter *hw; its send queue holds, from counter start, an mkey
// configure (a 4-WQEBB UMR and a SET_PSV) and a SEND, both wr_id 0x77,
// and a SEND 0x78.
func walkQP(t *testing.T, start uint16) (*QP, *recorded, *uint16) {
	t.Helper()
	r := newRecorded(t)
	hw := new(uint16)
	r.fill = func(c *uverbs.Call) {
		out := c.Data[2]
		clear(out)
		prm.Qpc.State.At(prm.QueryQpOut.Qpc).Set(out, qpcStateSQDrained)
		prm.Qpc.HwSqWqebbCounter.At(prm.QueryQpOut.Qpc).Set(out, uint64(*hw))
	}
	qp, _ := testQP(t, r.Context, 8)
	qp.verbs, qp.handle = true, seam.Handle(6)
	qp.sq.pi = start
	qp.sq.tail.Store(uint32(start))
	for _, w := range []struct {
		id  uint64
		wc  WCOpcode
		ops []uint8 // the WQEs' opcodes, one WQEBB each but the UMR's 4
	}{{0x77, WCUMR, []uint8{wqe.OpcodeUMR, wqe.OpcodeSetPSV}}, {0x77, WCSend, []uint8{wqe.OpcodeSend}}, {0x78, WCSend, []uint8{wqe.OpcodeSend}}} {
		at, bbs := qp.sq.pi, 0
		for _, op := range w.ops {
			c := at + uint16(bbs)
			binary.BigEndian.PutUint32(qp.sq.ring.Slot(c), uint32(c)<<8|uint32(op))
			binary.BigEndian.PutUint32(qp.sq.ring.Slot(c)[4:], qp.qpn<<8|1)
			if op == wqe.OpcodeUMR {
				bbs += 4
			} else {
				bbs++
			}
		}
		qp.sq.track(w.id, w.wc, bbs, at+uint16(bbs)-1, 0)
	}
	return qp, r, hw
}

// The walk starts at the first work request the device has not started:
// where the device stopped inside the configure (after its UMR, or inside
// the UMR's WQEBBs, which no device does) the configure is left alone;
// at the configure's start its UMR becomes a NOP (not its SET_PSV) and
// counts one work request. At the ring's end and across the 16-bit wrap
// alike. A counter outside the posted work is an error and writes
// nothing.
func TestCancelWalk(t *testing.T) {
	for _, start := range []uint16{0, 5, 1<<16 - 3} {
		for _, c := range []struct {
			hw    uint16 // from start
			n     int
			nopAt []uint16 // from start
		}{{0, 2, []uint16{0, 5}}, {1, 1, []uint16{5}}, {4, 1, []uint16{5}}, {5, 1, []uint16{5}}, {6, 0, nil}, {7, 0, nil}} {
			qp, _, hw := walkQP(t, start)
			*hw = start + c.hw
			before := bytes.Clone(qp.sq.ring)
			n, err := qp.CancelPostedSends(0x77)
			if n != c.n || err != nil {
				t.Errorf("start %d, device at +%d: %d, %v; want %d", start, c.hw, n, err, c.n)
			}
			want := before
			for _, at := range c.nopAt {
				want[int(start+at)%8*wqe.WQEBB+3] = wqe.OpcodeNOP
			}
			if !bytes.Equal(qp.sq.ring, want) {
				t.Errorf("start %d, device at +%d:\n%s", start, c.hw, ringDiff(qp.sq.ring, want))
			}
		}
		for _, off := range []uint16{8, 0xffff, 0x8000} {
			qp, _, hw := walkQP(t, start)
			*hw = start + off
			before := bytes.Clone(qp.sq.ring)
			if n, err := qp.CancelPostedSends(0x77); n != 0 || !errors.Is(Checked(t, err), unix.EIO) {
				t.Errorf("start %d, device at +%d: %d, %v; want EIO", start, off, n, err)
			}
			if !bytes.Equal(qp.sq.ring, before) {
				t.Errorf("start %d, device at +%d: written", start, off)
			}
		}
	}
}

// A closed QP's cancel sends nothing (the guard, before the query); nor
// does one during a batch.
func TestCancelNoCall(t *testing.T) {
	qp, r, _ := walkQP(t, 0)
	b := qp.Begin()
	r.last = nil
	if _, err := qp.CancelPostedSends(0x77); !errors.Is(Checked(t, err), ErrInvalid) || r.last != nil {
		t.Errorf("during a batch: %v, call %v", err, r.last)
	}
	b.Abort()
	qp.g.close()
	if _, err := qp.CancelPostedSends(0x77); !errors.Is(Checked(t, err), ErrClosed) || r.last != nil {
		t.Errorf("closed: %v, call %v", err, r.last)
	}
}

// drainedDevice answers QUERY_QP with SQD and counter hw, allocating
// nothing.
type drainedDevice struct {
	seam.Device
	hw uint16
}

func (d *drainedDevice) ObjQuery(h seam.Handle, in, out []byte) error {
	prm.Qpc.State.At(prm.QueryQpOut.Qpc).Set(out, qpcStateSQDrained)
	prm.Qpc.HwSqWqebbCounter.At(prm.QueryQpOut.Qpc).Set(out, uint64(d.hw))
	return nil
}

// A cancel allocates nothing (on a device whose query does not).
func TestCancelAllocs(t *testing.T) {
	qp, r, _ := walkQP(t, 0)
	dev := r.dev
	r.dev = &drainedDevice{Device: dev, hw: 0}
	defer func() { r.dev = dev }()
	if a := testing.AllocsPerRun(100, func() {
		if _, err := qp.CancelPostedSends(0x77); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocations per cancel", a)
	}
}
