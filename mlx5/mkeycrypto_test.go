package mlx5

import (
	"bytes"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// cryptoRig is a QP that posts configures, a PD, and crypto mkeys and
// DEKs made as CreateMkey and CreateDEK make them (without a device).
type cryptoRig struct {
	c  *Context
	pd *PD
	qp *QP
}

func newCryptoRig(tb testing.TB, inline int) *cryptoRig {
	tb.Helper()
	c := sbsContext()
	pd := &PD{c: c, pdn: 5}
	cq := benchCQ(tb, c, 255, 0x412)
	qp := benchQP(tb, c, QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 16, MaxSendSGE: 1, MaxRecvWR: 1, MaxRecvSGE: 1,
		MaxInlineData: inline, SendOps: Opcodes(OpRDMAWrite), MkeyConfigure: true}, 0x1c2)
	return &cryptoRig{c: c, pd: pd, qp: qp}
}

// mkey is a crypto mkey of the rig's PD (with block signature if sig) on a
// device of the given engines.
func (r *cryptoRig) mkey(lkey uint32, sigMkey, single, multi bool) *Mkey {
	m := &Mkey{c: r.c, pd: r.pd, lkey: lkey, rkey: lkey, maxEntries: 4, sigMkey: sigMkey, sentErrs: ^uint32(0),
		name: mkeyName(lkey), crypto: &mkeyCrypto{singleBlock: single, multiBlock: multi}}
	if sigMkey {
		m.psvIndex = [2]uint32{0x701, 0x702}
	}
	return m
}

func (r *cryptoRig) dek(id uint32, keytag bool) *DEK {
	return &DEK{c: r.c, pd: r.pd, id: id, keytag: keytag}
}

// users is the DEK's reference count.
func users(d *DEK) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.users
}

// closeDEK is what DEK.Close does before it destroys the object: refuse
// a DEK in use (inUse), else mark it closed.
func closeDEK(d *DEK) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.inUse(); err != nil {
		return err
	}
	d.closed = true
	return nil
}

func cryptoWR(m *Mkey, d *DEK) *MkeyConfigureWR {
	wr := &MkeyConfigureWR{WrID: 9, Mkey: m, Flags: SendSignaled, SetAccess: true, Access: AccessLocalWrite | AccessRemoteRead,
		List:   []KLM{{Addr: 0x1000, ByteCount: 512, Mkey: 0x77}},
		Crypto: &CryptoAttr{EncryptOnTx: true, DataUnitSize: sig.BlockSize512, InitialTweak: [16]byte{1}, DEK: d}}
	if d != nil && d.keytag {
		wr.Crypto.Keytag = []byte{1, 2, 3, 4, 5, 6, 7, 8}
	}
	return wr
}

// TestCryptoConfigureRefusals: every rule of mlx5dv_wr_set_mkey_crypto(3)
// and of the DEK a configure names, and what libmlx5 refuses at
// ibv_wr_complete, refused with an *Error before anything is written (the
// ring, the producer counter, the doorbell record untouched), and the DEK
// left without a reference.
func TestCryptoConfigureRefusals(t *testing.T) {
	both := &sig.BlockAttr{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, T10DIF: &sig.T10DIF{}, BlockSize: sig.BlockSize512},
		Wire: &sig.Domain{Type: sig.SigTypeT10DIF, T10DIF: &sig.T10DIF{}, BlockSize: sig.BlockSize512}}
	for _, tc := range []struct {
		name   string
		inline int
		change func(r *cryptoRig, wr *MkeyConfigureWR)
		want   error
	}{
		{"crypto on an mkey without MkeyOptions.Crypto", 0, func(_ *cryptoRig, wr *MkeyConfigureWR) { wr.Mkey.crypto = nil }, ErrInvalid},
		{"a nil DEK", 0, func(_ *cryptoRig, wr *MkeyConfigureWR) { wr.Crypto.DEK = nil }, ErrInvalid},
		{"a DEK not made by CreateDEK", 0, func(_ *cryptoRig, wr *MkeyConfigureWR) { wr.Crypto.DEK = &DEK{} }, ErrInvalid},
		{"a DEK of another context", 0, func(r *cryptoRig, wr *MkeyConfigureWR) { wr.Crypto.DEK.c = sbsContext() }, ErrInvalid},
		{"a DEK of another PD", 0, func(r *cryptoRig, wr *MkeyConfigureWR) { wr.Crypto.DEK.pd = &PD{c: r.c, pdn: 6} }, ErrInvalid},
		{"a closed DEK", 0, func(_ *cryptoRig, wr *MkeyConfigureWR) { wr.Crypto.DEK.closed = true }, ErrClosed},
		{"a DEK in the error state", 0, func(_ *cryptoRig, wr *MkeyConfigureWR) { wr.Crypto.DEK.state = DEKError }, ErrInvalid},
		{"an order out of the enum", 0, func(_ *cryptoRig, wr *MkeyConfigureWR) { wr.Crypto.Order = 2 }, ErrInvalid},
		{"a data unit size out of the enum", 0, func(_ *cryptoRig, wr *MkeyConfigureWR) { wr.Crypto.DataUnitSize = 5 }, ErrInvalid},
		{"no keytag for a DEK with one", 0, func(_ *cryptoRig, wr *MkeyConfigureWR) { wr.Crypto.DEK.keytag, wr.Crypto.Keytag = true, nil }, ErrInvalid},
		{"a keytag of 4 bytes", 0, func(_ *cryptoRig, wr *MkeyConfigureWR) {
			wr.Crypto.DEK.keytag, wr.Crypto.Keytag = true, make([]byte, 4)
		}, ErrInvalid},
		{"a keytag of 5 bytes for a DEK without one", 0, func(_ *cryptoRig, wr *MkeyConfigureWR) { wr.Crypto.Keytag = make([]byte, 5) }, ErrInvalid},
		{"longer than the data unit on a single-block engine", 0, func(_ *cryptoRig, wr *MkeyConfigureWR) {
			wr.Mkey.crypto.multiBlock, wr.List[0].ByteCount = false, 513
		}, ErrInvalid},
		{"raw wire data and a signature in both domains", 0, func(r *cryptoRig, wr *MkeyConfigureWR) {
			wr.Mkey.sigMkey, wr.Sig = true, both
		}, ErrInvalid},
		{"4 GiB", 0, func(r *cryptoRig, wr *MkeyConfigureWR) {
			wr.List = []KLM{{ByteCount: 1 << 31}, {ByteCount: 1 << 31}}
		}, ErrInvalid},
		{"BSFs and a list beyond the QP's inline data", 60, func(r *cryptoRig, wr *MkeyConfigureWR) {
			wr.Mkey.sigMkey, wr.Sig = true, &sig.BlockAttr{Wire: both.Wire}
		}, ErrInvalid},
	} {
		inline := tc.inline
		if inline == 0 {
			inline = 256
		}
		r := newCryptoRig(t, inline)
		m := r.mkey(0x500500, false, true, true)
		d := r.dek(0x42, false)
		wr := cryptoWR(m, d)
		tc.change(r, wr)
		pi := r.qp.sq.pi
		err := r.qp.PostMkeyConfigure(wr)
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want an *Error of %v", tc.name, err, tc.want)
		}
		if tc.want == ErrInvalid && !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v does not wrap EINVAL", tc.name, err)
		}
		if r.qp.sq.pi != pi || !bytes.Equal(r.qp.sq.ring, make([]byte, len(r.qp.sq.ring))) || r.qp.sq.bell.Counter() != 0 {
			t.Errorf("%s: the refused configure wrote to the queue", tc.name)
		}
		if users(d) != 0 || m.crypto != nil && (m.crypto.dek != nil || m.crypto.set) {
			t.Errorf("%s: the refused configure left a reference or a state", tc.name)
		}
	}
}

// TestCryptoDEKReferences: an mkey holds a reference on the DEK its last
// configure named: the DEK's Close is refused (EBUSY) while it does, and
// allowed once a configure names another DEK or the mkey is closed. A
// batch abandoned or poisoned gives back the references its configures
// took, and leaves the mkey's DEK as it was; one committed drops the DEKs
// its configures replaced.
func TestCryptoDEKReferences(t *testing.T) {
	r := newCryptoRig(t, 256)
	m := r.mkey(0x500600, false, false, true)
	d1, d2, d3, d4 := r.dek(1, false), r.dek(2, true), r.dek(3, false), r.dek(4, false)
	post := func(wr *MkeyConfigureWR) {
		t.Helper()
		if err := r.qp.PostMkeyConfigure(wr); err != nil {
			t.Fatal(err)
		}
		r.qp.sq.tail.Store(uint32(r.qp.sq.pi))
	}
	count := func(what string, want ...int) {
		t.Helper()
		for i, d := range []*DEK{d1, d2, d3, d4} {
			if users(d) != want[i] {
				t.Errorf("%s: DEK %d has %d references, want %d", what, i+1, users(d), want[i])
			}
		}
	}
	post(cryptoWR(m, d1))
	count("configured with DEK 1", 1, 0, 0, 0)
	err := closeDEK(d1)
	var e *Error
	if !errors.Is(err, unix.EBUSY) || !errors.As(err, &e) {
		t.Fatalf("closing a DEK in use: %v", err)
	}
	// A configure without crypto keeps it.
	post(&MkeyConfigureWR{Mkey: m, Flags: SendSignaled, List: []KLM{{ByteCount: 512}}})
	count("configured without crypto", 1, 0, 0, 0)
	post(cryptoWR(m, d2))
	count("configured with DEK 2", 0, 1, 0, 0)
	if err := closeDEK(d1); err != nil {
		t.Fatalf("closing the DEK the mkey no longer uses: %v", err)
	}
	// Abandoned and poisoned batches.
	b := r.qp.Begin().AddMkeyConfigure(cryptoWR(m, d3))
	count("a batch open with DEK 3", 0, 1, 1, 0)
	b.Abort()
	count("the batch aborted", 0, 1, 0, 0)
	if err := r.qp.Begin().AddMkeyConfigure(cryptoWR(m, d3)).AddMkeyConfigure(cryptoWR(m, d4)).AddMkeyConfigure(nil).Commit(); err == nil {
		t.Fatal("a batch with a nil work request committed")
	}
	count("a poisoned batch", 0, 1, 0, 0)
	if m.crypto.dek != d2 || m.crypto.cur.DEK != 2 {
		t.Fatalf("after the rollback the mkey holds %p (DEK id %d)", m.crypto.dek, m.crypto.cur.DEK)
	}
	if err := r.qp.Begin().AddMkeyConfigure(cryptoWR(m, d3)).AddMkeyConfigure(cryptoWR(m, d4)).Commit(); err != nil {
		t.Fatal(err)
	}
	r.qp.sq.tail.Store(uint32(r.qp.sq.pi))
	count("a batch of DEK 3 then 4", 0, 0, 0, 1)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	count("the mkey closed", 0, 0, 0, 0)
	if err := closeDEK(d4); err != nil {
		t.Fatalf("closing the DEK of a closed mkey: %v", err)
	}
	// A closed DEK is refused.
	m2 := r.mkey(0x500700, false, false, true)
	if err := r.qp.PostMkeyConfigure(cryptoWR(m2, d4)); !errors.Is(err, ErrClosed) {
		t.Fatalf("a configure naming a closed DEK: %v", err)
	}
}

// TestCryptoMkeyClosedInBatch: an mkey closed while a batch that
// configured it is open drops its DEK; the batch's rollback then drops
// the one the mkey held before, so that no reference is left.
func TestCryptoMkeyClosedInBatch(t *testing.T) {
	r := newCryptoRig(t, 256)
	m := r.mkey(0x500800, false, false, true)
	d1, d2 := r.dek(1, false), r.dek(2, false)
	if err := r.qp.PostMkeyConfigure(cryptoWR(m, d1)); err != nil {
		t.Fatal(err)
	}
	r.qp.sq.tail.Store(uint32(r.qp.sq.pi))
	b := r.qp.Begin().AddMkeyConfigure(cryptoWR(m, d2))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	b.Abort()
	if users(d1) != 0 || users(d2) != 0 {
		t.Fatalf("references left: %d, %d", users(d1), users(d2))
	}
}

// TestCryptoDEKRace: configures naming two DEKs in turn, on two mkeys,
// while other goroutines try to close the DEKs and close the mkeys: a
// DEK is closed only when no mkey uses it, a configure naming a closed
// DEK is refused with ErrClosed, and when everything is closed no
// reference is left (run with -race).
func TestCryptoDEKRace(t *testing.T) {
	r := newCryptoRig(t, 256)
	mkeys := []*Mkey{r.mkey(0x500900, false, false, true), r.mkey(0x500a00, true, false, true)}
	deks := []*DEK{r.dek(1, false), r.dek(2, true)}
	var poster, closer sync.WaitGroup
	var posted atomic.Int64
	stop := make(chan struct{})
	poster.Add(1)
	closer.Add(1)
	go func() {
		defer poster.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := r.qp.PostMkeyConfigure(cryptoWR(mkeys[i%2], deks[i/2%2]))
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Error(err)
				return
			}
			r.qp.sq.tail.Store(uint32(r.qp.sq.pi))
			posted.Add(1)
		}
	}()
	closed := make([]bool, len(deks))
	go func() {
		defer closer.Done()
		for i := 0; i < 2000 || posted.Load() < 2000; i++ {
			if i == 1000 {
				for posted.Load() < 1000 { // let the poster name both DEKs for a while
					runtime.Gosched()
				}
				for _, m := range mkeys {
					if err := m.Close(); err != nil {
						t.Error(err)
					}
				}
			}
			k := i % 2
			if closed[k] {
				continue
			}
			err := closeDEK(deks[k])
			switch {
			case err == nil:
				closed[k] = true
			case !errors.Is(err, unix.EBUSY):
				t.Error(err)
			}
		}
	}()
	closer.Wait()
	close(stop)
	poster.Wait()
	for i, d := range deks {
		if n := users(d); n != 0 {
			t.Errorf("DEK %d: %d references left", i+1, n)
		}
		if err := closeDEK(d); err != nil {
			t.Errorf("DEK %d: %v once the mkeys are closed", i+1, err)
		}
	}
}

// TestCryptoConfigureState: a crypto mkey's crypto state follows its
// configures as libmlx5's does: crypto set stays set (and its BSF is
// written again whenever the BSF is), the length of the last layout is
// kept, and a signature mkey keeps its block's BSF.
func TestCryptoConfigureState(t *testing.T) {
	r := newCryptoRig(t, 256)
	m := r.mkey(0x500b00, true, true, true)
	d := r.dek(0x33, false)
	block := &sig.BlockAttr{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, T10DIF: &sig.T10DIF{RefTag: 9}, BlockSize: sig.BlockSize512}}
	post := func(wr *MkeyConfigureWR) {
		t.Helper()
		if err := r.qp.PostMkeyConfigure(wr); err != nil {
			t.Fatal(err)
		}
		r.qp.sq.tail.Store(uint32(r.qp.sq.pi))
	}
	wr := cryptoWR(m, d)
	wr.Sig = block
	post(wr)
	mc := m.crypto
	var img [wqe.BSFSegSize]byte
	_ = wqe.PutBSF(img[:], block, 0x701, 0x702)
	if !mc.set || mc.cur.DEK != 0x33 || mc.length != 512 || mc.blockBSF != img || mc.dek != d {
		t.Fatalf("after crypto and a block: %+v", mc)
	}
	// No layout: the length stays.
	post(&MkeyConfigureWR{Mkey: m, Flags: SendSignaled})
	if mc.length != 512 || !mc.set {
		t.Fatalf("after a configure without a layout: length %d, set %v", mc.length, mc.set)
	}
	// A new block rewrites both BSFs: 1 + 1 + 1 (list) + 2 BSFs + 1 SET_PSV.
	pi := r.qp.sq.pi
	post(&MkeyConfigureWR{Mkey: m, Flags: SendSignaled, List: []KLM{{ByteCount: 256}}, Sig: block})
	if n := r.qp.sq.pi - pi; n != 6 || mc.length != 256 {
		t.Fatalf("a block on a crypto mkey: %d WQEBBs, length %d", n, mc.length)
	}
	var cbsf [wqe.CryptoBSFSize]byte
	_ = wqe.PutCryptoBSF(cbsf[:], &mc.cur, true, true)
	if got := r.qp.sq.ring.Slot(pi + 4); !bytes.Equal(got, cbsf[:]) {
		t.Fatalf("the crypto BSF written again\n got %x\nwant %x", got, cbsf)
	}
}
