package doorbell

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

func TestNewErrors(t *testing.T) {
	rec := u64bytes(RecordSize)
	uar := u64bytes(UARSize)
	reg := uar[BlueFlameOffset : BlueFlameOffset+512]
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"rq short record", second(NewRQ(rec[:7])), ErrRecord},
		{"rq misaligned record", second(NewRQ(u64bytes(16)[1:9])), ErrRecord},
		{"sq short record", second(NewSQ(rec[:4], reg, 256)), ErrRecord},
		{"sq bf size 100", second(NewSQ(rec, reg, 100)), ErrBFSize},
		{"sq bf size negative", second(NewSQ(rec, reg, -64)), ErrBFSize},
		{"sq short register", second(NewSQ(rec, reg[:511], 256)), ErrRegister},
		{"sq misaligned register", second(NewSQ(rec, uar[BlueFlameOffset+4:], 256)), ErrRegister},
		{"sq nil register", second(NewSQ(rec, nil, 256)), ErrRegister},
		{"sq no BlueFlame, short register", second(NewSQ(rec, reg[:4], 0)), ErrRegister},
		{"cq short uar", second(NewCQ(rec, uar[:CQDoorbellOffset+7], 1)), ErrRegister},
		{"cq misaligned uar", second(NewCQ(rec, uar[4:], 1)), ErrRegister},
		{"cq nil record", second(NewCQ(nil, uar, 1)), ErrRecord},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// TestRingBadInput: bad lengths are errors, and write nothing.
func TestRingBadInput(t *testing.T) {
	d := newFake()
	q, err := NewSQ(d.rec, d.reg(256), 256)
	if err != nil {
		t.Fatal(err)
	}
	wqebb := bytes.Repeat([]byte{0xab}, WQEBB)
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"ring nil ctrl", q.Ring(1, nil), ErrShortCtrl},
		{"ring 7 bytes", q.Ring(1, wqebb[:7]), ErrShortCtrl},
		{"bf empty", q.RingBF(1, nil, nil), ErrBFLength},
		{"bf only wrap", q.RingBF(1, nil, wqebb), ErrBFLength},
		{"bf partial wqebb", q.RingBF(1, wqebb[:48], nil), ErrBFLength},
		{"bf partial wrap", q.RingBF(1, wqebb, wqebb[:8]), ErrBFLength},
		{"bf over half", q.RingBF(1, bytes.Repeat(wqebb, 4), wqebb), ErrBFLength},
		{"bf1 nil", q.RingBF1(1, nil), ErrBFLength},
		{"bf2 nil", q.RingBF2(1, nil), ErrBFLength},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if !bytes.Equal(d.rec, make([]byte, RecordSize)) || !bytes.Equal(d.uar, make([]byte, UARSize)) || q.Half() != 0 {
		t.Fatalf("a failed ring wrote: record %x, half %d", d.rec, q.Half())
	}
}

// TestRingHalves: successive rings alternate halves and never write outside
// the register; the record holds the last counter, 16 bits wide.
func TestRingHalves(t *testing.T) {
	d := newFake()
	q, err := NewSQ(d.rec, d.reg(256), 256)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	wqe := bytes.Repeat([]byte{0x5a}, 2*WQEBB)
	wrap := bytes.Repeat([]byte{0xa5}, 2*WQEBB)
	for i, c := range []uint16{0xfffe, 0xffff, 0, 1, 2, 3} {
		want := []int{0, 256, 0, 256, 0, 256}[i]
		if q.Half() != want {
			t.Fatalf("ring %d: half %d, want %d", i, q.Half(), want)
		}
		clear(d.uar)
		switch i {
		case 0:
			err = q.Ring(c, ctrl)
		case 2:
			q.RingWord(c, binary.BigEndian.Uint64(ctrl))
		case 1:
			err = q.RingBF(c, wqe, wrap)
		case 3:
			err = q.RingBF1(c, (*[WQEBB]byte)(wqe))
		case 4, 5:
			err = q.RingBF2(c, (*[2 * WQEBB]byte)([][]byte{wqe, wrap}[i-4]))
		}
		if err != nil {
			t.Fatal(err)
		}
		if q.Counter() != c || binary.BigEndian.Uint32(d.rec[SendOffset:]) != uint32(c) {
			t.Fatalf("ring %d: record %x, want send counter %#x", i, d.rec, c)
		}
		exp := make([]byte, UARSize)
		switch i {
		case 0, 2:
			copy(exp[BlueFlameOffset+want:], ctrl)
		case 1:
			copy(exp[BlueFlameOffset+want:], append(append([]byte{}, wqe...), wrap...))
		case 3:
			copy(exp[BlueFlameOffset+want:], wqe[:WQEBB])
		case 4, 5:
			copy(exp[BlueFlameOffset+want:], [][]byte{wqe, wrap}[i-4])
		}
		if !bytes.Equal(d.uar, exp) {
			t.Fatalf("ring %d: UAR page differs from one write at %#x", i, BlueFlameOffset+want)
		}
	}
	q.SetHalf(256)
	if q.Half() != 256 {
		t.Fatal("SetHalf(256)")
	}
	q.SetHalf(0)
	if q.Half() != 0 {
		t.Fatal("SetHalf(0)")
	}
	if q.BlueFlameSize() != 256 {
		t.Fatal("BlueFlameSize")
	}
}

// A register without BlueFlame buffers (bf size 0) rings the 8-byte
// doorbell only, at its start.
func TestNoBlueFlame(t *testing.T) {
	rec := u64bytes(RecordSize)
	reg := u64bytes(8)
	q, err := NewSQ(rec, reg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if q.UseBlueFlame(1, 2) || q.BlueFlameSize() != 0 {
		t.Error("BlueFlame without a BlueFlame buffer")
	}
	for i := range 2 {
		ctrl := []byte{1, 2, 3, 4, 5, 6, 7, byte(i)}
		if err := q.Ring(uint16(i+1), ctrl); err != nil {
			t.Fatal(err)
		}
		if string(reg) != string(ctrl) || q.Half() != 0 {
			t.Errorf("ring %d: register % x, half %d", i, reg, q.Half())
		}
	}
	// RingBF1 and RingBF2 have no buffer to copy to: they refuse, and
	// write nothing.
	before := string(rec) + string(reg)
	if err := q.RingBF1(9, new([WQEBB]byte)); !errors.Is(err, ErrBFLength) {
		t.Errorf("RingBF1 without a BlueFlame buffer: %v, want ErrBFLength", err)
	}
	if err := q.RingBF2(9, new([2 * WQEBB]byte)); !errors.Is(err, ErrBFLength) {
		t.Errorf("RingBF2 without a BlueFlame buffer: %v, want ErrBFLength", err)
	}
	if string(rec)+string(reg) != before {
		t.Error("a refused RingBF1 or RingBF2 wrote")
	}
}

// TestRingBF2Short: RingBF2 refuses a register whose halves are one
// WQEBB, and writes nothing; RingBF1 rings it.
func TestRingBF2Short(t *testing.T) {
	d := newFake()
	q, err := NewSQ(d.rec, d.reg(2*WQEBB), WQEBB)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.RingBF2(1, new([2 * WQEBB]byte)); !errors.Is(err, ErrBFLength) {
		t.Errorf("RingBF2 with halves of one WQEBB: %v, want ErrBFLength", err)
	}
	if !bytes.Equal(d.rec, make([]byte, RecordSize)) || !bytes.Equal(d.uar, make([]byte, UARSize)) || q.Half() != 0 {
		t.Fatal("a refused RingBF2 wrote")
	}
	if err := q.RingBF1(1, new([WQEBB]byte)); err != nil || q.Counter() != 1 {
		t.Errorf("RingBF1 with halves of one WQEBB: %v, counter %d", err, q.Counter())
	}
}

func TestUseBlueFlame(t *testing.T) {
	d := newFake()
	q, _ := NewSQ(d.rec, d.reg(256), 256)
	for _, c := range []struct {
		nreq, ds int
		want     bool
	}{
		{1, 2, true}, {1, 16, true}, {1, 1, false}, {1, 17, false}, {2, 2, false}, {0, 2, false}, {3, 16, false},
	} {
		if got := q.UseBlueFlame(c.nreq, c.ds); got != c.want {
			t.Errorf("UseBlueFlame(%d, %d) = %v", c.nreq, c.ds, got)
		}
	}
}

// TestCQ checks the CQ record and arm doorbell against the layout of the
// kernel's mlx5_cq_set_ci / mlx5_cq_arm (cq.h) and libmlx5's mlx5dv.h:
// consumer index (24 bits) in word 0, sn<<28 | cmd | ci in word 1 and in
// the first word of the 8-byte UAR write at 0x20, the cqn in the second.
func TestCQ(t *testing.T) {
	d := newFake()
	c, err := NewCQ(d.rec, d.uar, 0x401)
	if err != nil {
		t.Fatal(err)
	}
	c.SetCI(0x1234567) // 25 bits: the 24 low ones are kept
	if want := []byte{0x00, 0x23, 0x45, 0x67}; !bytes.Equal(d.rec[CQSetCIOffset:CQSetCIOffset+4], want) || c.CI() != 0x234567 {
		t.Fatalf("set_ci: record %x", d.rec)
	}
	c.Arm(5, ArmSolicited, 0x1abcdef) // sn 5 -> 1, ci 24 bits
	wantArm := []byte{0x11, 0xab, 0xcd, 0xef}
	if !bytes.Equal(d.rec[CQArmOffset:CQArmOffset+4], wantArm) || c.ArmWord() != 0x11abcdef {
		t.Fatalf("arm: record %x", d.rec)
	}
	exp := make([]byte, UARSize)
	copy(exp[CQDoorbellOffset:], append(wantArm, 0, 0, 0x04, 0x01))
	if !bytes.Equal(d.uar, exp) {
		t.Fatalf("arm: UAR %x", d.uar[CQDoorbellOffset:CQDoorbellOffset+8])
	}
	c.Arm(2, ArmNext, 7)
	if want := []byte{0x20, 0, 0, 7, 0, 0, 4, 1}; !bytes.Equal(d.uar[CQDoorbellOffset:CQDoorbellOffset+8], want) {
		t.Fatalf("arm next: UAR %x", d.uar[CQDoorbellOffset:CQDoorbellOffset+8])
	}
}

// TestRecordMonotonic: a goroutine that polls the record (as the software
// device does) while one poster rings sees the send and receive counters
// only move forward (mod 2^16) and, once it sees a counter, sees the WQE
// bytes written before that ring: the ring is a release, the poll an
// acquire. Run with -race: the WQE buffer is plain memory, so a missing
// happens-before edge is a reported race.
func TestRecordMonotonic(t *testing.T) {
	const rings = 60000 // below 2^16: the counters do not wrap, so "forward" is ">="
	d := newFake()
	sq, err := NewSQ(d.rec, d.reg(256), 256)
	if err != nil {
		t.Fatal(err)
	}
	rq, _ := NewRQ(d.rec)
	ring := make([]uint64, rings+1) // the "SQ": slot i holds i+1 once WQE i is written
	send := (*uint32)(unsafe.Pointer(&d.rec[SendOffset]))
	recv := (*uint32)(unsafe.Pointer(&d.rec[RecvOffset]))
	var wg sync.WaitGroup
	var done atomic.Bool
	errs := make(chan string, 1)
	polls := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		var lastS, lastR uint32
		for !done.Load() {
			s := fromBE32(atomic.LoadUint32(send))
			r := fromBE32(atomic.LoadUint32(recv))
			polls++
			switch {
			case s < lastS || r < lastR:
				errs <- fmt.Sprintf("counters went back: send %d after %d, recv %d after %d", s, lastS, r, lastR)
				return
			case s > 0 && ring[s-1] != uint64(s):
				errs <- fmt.Sprintf("send counter %d before its WQE", s)
				return
			}
			lastS, lastR = s, r
		}
	}()
	ctrl := make([]byte, 8)
	for i := uint32(0); i < rings; i++ {
		ring[i] = uint64(i + 1) // the WQE, a plain store
		binary.BigEndian.PutUint32(ctrl, i)
		if err := sq.Ring(uint16(i+1), ctrl); err != nil {
			t.Fatal(err)
		}
		rq.Ring(uint16(i))
	}
	done.Store(true)
	wg.Wait()
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
	if sq.Counter() != rings || rq.Counter() != rings-1 {
		t.Fatalf("final counters %d %d", sq.Counter(), rq.Counter())
	}
	t.Logf("%d polls during %d rings", polls, rings)
}

// be32 and fromBE32 are encoding/binary's big-endian order, in a native
// word, whichever form the build uses (endian_le.go, endian_other.go).
func TestBE32(t *testing.T) {
	for _, v := range []uint32{0, 1, 0x1234, 0xffff, 0x12345678, 0x80000001, 0xffffffff} {
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], be32(v))
		if got := binary.BigEndian.Uint32(b[:]); got != v {
			t.Errorf("be32(%#x) holds %#x big-endian", v, got)
		}
		if fromBE32(be32(v)) != v {
			t.Errorf("fromBE32(be32(%#x)) = %#x", v, fromBE32(be32(v)))
		}
	}
}
