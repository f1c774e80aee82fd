package mlx5

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/sig"
)

func t10Attr() *sig.BlockAttr {
	d := &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512, T10DIF: &sig.T10DIF{Seed: 0xffff, AppTag: 1, RefTag: 2}}
	return &sig.BlockAttr{Mem: d, CheckMask: 0xff}
}

// A batch that fails undoes what its mkey configures did to their mkeys:
// the configure after it is the one a never-touched mkey gets.
func TestBatchAbortRestoresMkeys(t *testing.T) {
	build := func(abortFirst bool) []byte {
		c := &Context{devx: true}
		qp, _ := testQP(t, c, 64)
		qp.sq.maxWQE, qp.mkeyConf, qp.sq.maxInline = 64, true, mainQPInline
		m := &Mkey{c: c, lkey: 0x200300, rkey: 0x200300, maxEntries: 4, sigMkey: true, psvIndex: [2]uint32{0x301, 0x302},
			sentErrs: ^uint32(0), name: "m"}
		klm := []KLM{{Addr: 0x7e5a00000000, ByteCount: 4096, Mkey: 0x200100}}
		if abortFirst {
			b := qp.Begin()
			b.AddMkeyConfigure(&MkeyConfigureWR{WrID: 1, Mkey: m, Flags: SendSignaled, List: klm, Sig: t10Attr()})
			b.Add(&SendWR{WrID: 2, Opcode: OpSend}) // nothing to send: no SGE is fine, a bad opcode is not
			b.Add(&SendWR{WrID: 3})                 // the zero Opcode: invalid
			err := b.Commit()
			if !errors.Is(Checked(t, err), ErrInvalid) || !strings.Contains(err.Error(), "work request 2 ") {
				t.Fatalf("the batch: %v, want ErrInvalid naming work request 2", err)
			}
			if qp.sq.pi != 0 || qp.sq.fm || m.bsf != 0 || m.shape.Load() != 0 || m.sentErrs != ^uint32(0) {
				t.Fatalf("after the abort: pi %d, small fence %v, mkey %+v", qp.sq.pi, qp.sq.fm, m.bsf)
			}
			if !bytes.Equal(qp.sq.ring, make([]byte, len(qp.sq.ring))) {
				t.Fatal("the aborted batch left bytes in the ring")
			}
			if got := qp.sq.bell.Counter(); got != 0 {
				t.Fatalf("the aborted batch rang: doorbell record %d", got)
			}
		}
		if err := qp.PostMkeyConfigure(&MkeyConfigureWR{WrID: 4, Mkey: m, Flags: SendSignaled, List: klm, Sig: t10Attr()}); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), qp.sq.ring[:int(qp.sq.pi)*64]...)
	}
	if fresh, after := build(false), build(true); !bytes.Equal(fresh, after) {
		t.Errorf("a configure after an aborted batch differs from one on a fresh mkey:\n got %x\nwant %x", after, fresh)
	}
}

// Close does not wait for an open batch (issue 23 item 3: it used to
// wait for ever): the batch ends with it. Its work request is never
// rung, a later Add and Commit get ErrClosed, the QP's producer counter
// is back where Begin found it, and the hold is let go.
func TestCloseEndsOpenBatch(t *testing.T) {
	c := &Context{devx: true}
	qp, _ := testQP(t, c, 16)
	b := qp.Begin()
	b.Add(&SendWR{WrID: 1, Opcode: OpNOP, Flags: SendSignaled})
	closed := make(chan struct{})
	go func() {
		qp.g.close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(mustCome):
		b.Abort()
		<-closed
		t.Fatalf("Close waited for the open batch (%v)", mustCome)
	}
	b.Add(&SendWR{WrID: 2, Opcode: OpNOP, Flags: SendSignaled})
	if err := b.Commit(); !errors.Is(Checked(t, err), ErrClosed) {
		t.Errorf("Commit of the batch Close ended: %v, want ErrClosed", err)
	}
	if got := qp.sq.bell.Counter(); got != 0 {
		t.Errorf("the batch rang after Close: doorbell record %d", got)
	}
	if qp.sq.pi != 0 || !bytes.Equal(qp.sq.ring, make([]byte, len(qp.sq.ring))) {
		t.Errorf("the batch left its WQEs: pi %d", qp.sq.pi)
	}
	if v := qp.g.v.Load(); v&(guardHeld|guardCount) != 0 {
		t.Errorf("guard %#x: still held or entered", v)
	}
	if err := qp.Begin().Add(&SendWR{WrID: 3, Opcode: OpNOP}).Commit(); !errors.Is(Checked(t, err), ErrClosed) {
		t.Errorf("a batch on a closed QP: %v", err)
	}
}

func TestBatchMisuse(t *testing.T) {
	c := &Context{devx: true}
	qp, _ := testQP(t, c, 16)
	var b Batch
	if err := b.Commit(); !errors.Is(Checked(t, err), ErrInvalid) {
		t.Errorf("Commit without Begin: %v", err)
	}
	qp.Begin().Add(&SendWR{WrID: 1, Opcode: OpNOP})
	if err := qp.Begin().Commit(); !errors.Is(Checked(t, err), ErrInvalid) {
		t.Errorf("Begin over an open batch: %v", err)
	}
	if qp.sq.pi != 0 {
		t.Errorf("the abandoned batch was posted: pi %d", qp.sq.pi)
	}
	if err := qp.Begin().Add(&SendWR{WrID: 2, Opcode: OpNOP}).Commit(); err != nil {
		t.Errorf("a batch after the misuse: %v", err)
	}
	if err := qp.PostSend(&SendWR{Opcode: OpRDMARead, SGL: []SGE{{Length: 8}}}); err != nil {
		t.Errorf("a read on an RC QP: %v", err)
	}
	qp.typ = QPTypeUD
	if err := qp.PostSend(&SendWR{Opcode: OpRDMARead}); !errors.Is(Checked(t, err), ErrInvalid) {
		t.Errorf("a read on a UD QP: %v", err)
	}
	if err := qp.PostSend(&SendWR{Opcode: OpSend}); !errors.Is(Checked(t, err), ErrInvalid) || !strings.Contains(err.Error(), "AH") {
		t.Errorf("a UD send without an AH: %v", err)
	}
}
