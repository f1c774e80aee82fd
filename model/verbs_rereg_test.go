package model

import (
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// TestReregMRRules: ib_uverbs_rereg_mr's refusals, each leaving the MR as
// it was.
func TestReregMRRules(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	mem, mr := r.mr(8192, accessLocalWrite)
	other, _, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq := r.cq(15, nil)
	for _, c := range []struct {
		name   string
		mr     seam.Handle
		flags  uint32
		pd     seam.Handle
		mem    []byte
		iova   uint64
		access uint32
		errno  unix.Errno
	}{
		{"no flags", mr.Handle, 0, 0, nil, 0, 0, unix.EINVAL},
		{"unknown flag", mr.Handle, 1 << 3, 0, nil, 0, 0, unix.EINVAL},
		{"unknown flag with PD", mr.Handle, ReregPD | 1<<31, other, nil, 0, 0, unix.EINVAL},
		{"page offsets differ", mr.Handle, ReregTranslation, 0, mem[16:], addr(mem), accessLocalWrite, unix.EINVAL},
		{"iova other than the address", mr.Handle, ReregTranslation, 0, mem, addr(mem) + 4096, accessLocalWrite, unix.EOPNOTSUPP},
		{"empty translation", mr.Handle, ReregTranslation, 0, mem[:0], addr(mem), accessLocalWrite, unix.EINVAL},
		{"unknown access", mr.Handle, ReregAccess, 0, nil, 0, 1 << 30, unix.EINVAL},
		{"remote write without local write", mr.Handle, ReregAccess, 0, nil, 0, accessRemoteWrite, unix.EINVAL},
		{"atomic without local write", mr.Handle, ReregAccess, 0, nil, 0, accessRemoteAtomic, unix.EINVAL},
		{"PD handle of a CQ", mr.Handle, ReregPD, cq.h, nil, 0, 0, unix.EINVAL},
		{"PD handle unknown", mr.Handle, ReregPD, 1 << 30, nil, 0, 0, unix.EINVAL},
		{"MR handle of a PD", r.pd, ReregPD, other, nil, 0, 0, unix.EINVAL},
	} {
		if _, _, err := d.ReregMR(c.mr, c.flags, c.pd, c.mem, c.iova, c.access); !errors.Is(err, c.errno) {
			t.Errorf("%s: %v, want %v", c.name, err, c.errno)
		}
	}
	d.h.mu.Lock()
	mk := d.h.mkeys[mr.LKey>>8]
	pdRefs, otherRefs := d.h.pds[r.pdn].refs, 0
	for n, p := range d.h.pds {
		if n != r.pdn {
			otherRefs += p.refs
		}
	}
	d.h.mu.Unlock()
	if mk == nil || mk.pdn != r.pdn || mk.access != accessLocalWrite || pdRefs < 1 || otherRefs != 0 {
		t.Errorf("after the refusals: mkey %+v, PD refs %d, other PD refs %d", mk, pdRefs, otherRefs)
	}
	if err := d.DeallocPD(other); err != nil {
		t.Errorf("the other PD: %v", err)
	}
	d.Close()
	if _, _, err := d.ReregMR(mr.Handle, ReregPD, r.pd, nil, 0, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("on a closed context: %v", err)
	}
}

// TestReregMRInPlace: a change of PD or of local write, remote read and
// remote write is a UMR on the mkey: the keys stay, the PD's references
// move, the mkey's bits follow.
func TestReregMRInPlace(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	_, mr := r.mr(8192, accessLocalWrite)
	pd2, pdn2, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	lkey, rkey, err := d.ReregMR(mr.Handle, ReregPD|ReregAccess, pd2, nil, 0, accessLocalWrite|remoteRW)
	if err != nil {
		t.Fatal(err)
	}
	if lkey != mr.LKey || rkey != mr.RKey {
		t.Errorf("keys %#x %#x, want %#x %#x kept", lkey, rkey, mr.LKey, mr.RKey)
	}
	d.h.mu.Lock()
	mk := d.h.mkeys[mr.LKey>>8]
	if _, e := d.h.mkey(mr.LKey, pdn2, accRemoteWrite); e != nil {
		t.Errorf("remote write in the new PD: %v", e)
	}
	if _, e := d.h.mkey(mr.LKey, r.pdn, accLocalRead); e == nil {
		t.Error("the mkey still answers in the old PD")
	}
	if mk.pdn != pdn2 || mk.access != accessLocalWrite|remoteRW {
		t.Errorf("mkey PD %#x access %#x", mk.pdn, mk.access)
	}
	d.h.mu.Unlock()
	if err := d.DeallocPD(pd2); !errors.Is(err, unix.EBUSY) {
		t.Errorf("dealloc of the MR's new PD: %v, want EBUSY", err)
	}
	if err := d.DeallocPD(r.pd); err != nil {
		t.Errorf("dealloc of the MR's old PD: %v", err)
	}
	if _, _, err := d.ReregMR(mr.Handle, ReregPD, r.pd, nil, 0, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("rereg to a freed PD: %v, want EINVAL", err)
	}
	// Access only, to local write alone: in place again.
	if lkey, _, err = d.ReregMR(mr.Handle, ReregAccess, 0, nil, 0, accessLocalWrite); err != nil || lkey != mr.LKey {
		t.Errorf("access change: key %#x, %v", lkey, err)
	}
	d.h.mu.Lock()
	if _, e := d.h.mkey(mr.LKey, pdn2, accRemoteRead); e == nil {
		t.Error("remote read allowed after the access change")
	}
	d.h.mu.Unlock()
	if err := d.DeregMR(mr.Handle); err != nil {
		t.Fatal(err)
	}
	if err := d.DeallocPD(pd2); err != nil {
		t.Errorf("dealloc after the dereg: %v", err)
	}
}

// TestReregMRNewMkey: a change a UMR cannot make (remote atomic, a new
// translation) makes a new mkey under the same handle: new keys, the old
// key gone, the PD's references counted once.
func TestReregMRNewMkey(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	mem, mr := r.mr(8192, accessLocalWrite)
	before := d.Objects()
	lkey, rkey, err := d.ReregMR(mr.Handle, ReregAccess, 0, nil, 0, accessLocalWrite|accessRemoteAtomic)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Objects(); got != before {
		t.Errorf("objects %d after the rereg, want %d", got, before)
	}
	if lkey == mr.LKey || lkey != rkey {
		t.Errorf("keys %#x %#x after an atomic change, old %#x: want new, equal keys", lkey, rkey, mr.LKey)
	}
	d.h.mu.Lock()
	if _, e := d.h.mkey(mr.LKey, r.pdn, accLocalRead); e == nil {
		t.Error("the old key still resolves")
	}
	if _, e := d.h.mkey(lkey, r.pdn, accRemoteAtomic); e != nil {
		t.Errorf("the new key: %v", e)
	}
	refs := d.h.pds[r.pdn].refs
	d.h.mu.Unlock()
	if refs != 1 {
		t.Errorf("PD refs %d, want 1", refs)
	}
	// A new translation: the second page.
	pd2, pdn2, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	l2, _, err := d.ReregMR(mr.Handle, ReregTranslation|ReregPD, pd2, mem[4096:], addr(mem[4096:]), 0)
	if err != nil {
		t.Fatal(err)
	}
	d.h.mu.Lock()
	if _, e := d.h.mkey(lkey, r.pdn, accLocalRead); e == nil {
		t.Error("the previous key still resolves")
	}
	mk, e := d.h.mkey(l2, pdn2, accRemoteAtomic)
	if e != nil {
		t.Errorf("the translated MR: %v", e)
	} else if _, e := inRange(mk, l2, addr(mem), 1); e == nil {
		t.Error("the first page is still in the MR")
	} else if _, e := inRange(mk, l2, addr(mem[4096:]), 4096); e != nil {
		t.Errorf("the second page: %v", e)
	}
	refs, refs2 := d.h.pds[r.pdn].refs, d.h.pds[pdn2].refs
	d.h.mu.Unlock()
	if refs != 0 || refs2 != 1 {
		t.Errorf("PD refs %d and %d, want 0 and 1", refs, refs2)
	}
	if err := d.DeregMR(mr.Handle); err != nil {
		t.Fatal(err)
	}
	if err := d.DeallocPD(pd2); err != nil {
		t.Fatal(err)
	}
	if got := d.Objects(); got != before-2 {
		t.Errorf("objects %d after the dereg (the MR's mkey and handle gone), want %d", got, before-2)
	}
}

// TestReregMRChangePDTraffic is what rdma-core's DCI stream bad flow
// relies on: after the MR moves to another PD, a QP of the old PD that
// sends from it completes with a local protection error.
func TestReregMRChangePDTraffic(t *testing.T) {
	r := newVRig(t, "cx6dx")
	d := r.d
	scq, rcq := r.cq(63, nil), r.cq(63, nil)
	a := r.qp(scq, rcq, vqpOpts{typ: seam.QPTypeRC, uidx: 1})
	b := r.qp(scq, rcq, vqpOpts{typ: seam.QPTypeRC, uidx: 2})
	a.connect(b, remoteRW)
	b.connect(a, remoteRW)
	mem, mr := r.mr(1<<14, accessLocalWrite|remoteRW)
	bad, _, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.ReregMR(mr.Handle, ReregPD, bad, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	a.post(wqe.Send{Opcode: wqe.OpcodeRDMAWrite, Flags: wqe.SendSignaled, RemoteAddr: addr(mem[8192:]), RKey: mr.RKey,
		SGL: []wqe.SGE{{Addr: addr(mem), Length: 64, LKey: mr.LKey}}})
	if op, syn := cqeStatus(scq.next()); op != 13 || syn != SyndromeLocalProt {
		t.Errorf("write from the MR in another PD: opcode %#x syndrome %#x, want 0xd and %#x", op, syn, SyndromeLocalProt)
	}
}
