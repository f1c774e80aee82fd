package mlx5

import (
	"errors"
	"fmt"

	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// mkeyCrypto is the crypto side of an mkey made with MkeyOptions.Crypto.
type mkeyCrypto struct {
	// The device's AES-XTS engines (CryptoCaps.Engines), which the BSF's
	// tweak and the single-block length rule depend on.
	multiBlock, singleBlock bool

	// The poster's state, as the rest of an mkey's configure state: the
	// crypto a configure set (set, cur: libmlx5 writes it again whenever
	// a later UMR rewrites the BSF), the length of the mkey's last layout
	// (libmlx5's mkey->length, which the length rules of a configure
	// without a layout check) and, for a signature mkey, the BSF of its
	// current signature block (Mkey.bsf BSFSet), which a UMR that sets
	// crypto alone writes again.
	set      bool
	cur      wqe.Crypto
	length   uint64
	blockBSF [wqe.BSFSegSize]byte
	// wr is the crypto of the work request being added.
	wr wqe.Crypto

	// dek is the DEK of cur, which the mkey holds a reference on
	// (DEK.acquire) until a configure names another, or Close; under
	// Mkey.mu.
	dek *DEK
}

// cryptoUndo is what a configure of a crypto mkey changed, for the
// batch's Commit (which drops the DEK the mkey no longer uses) and
// rollback (which drops the one it took and puts the old state back).
type cryptoUndo struct {
	m *Mkey
	// applied says that the mkey took the DEK the work request named
	// (cryptoAccepted); prev is then the DEK it held before. dek is the
	// named DEK until then.
	dek, prev *DEK
	applied   bool
	// The mkey's poster state before the configure.
	set      bool
	cur      wqe.Crypto
	length   uint64
	blockBSF [wqe.BSFSegSize]byte
}

// acquire takes a reference on the DEK for an mkey configure: refused
// (ErrClosed) once Close began, or when the DEK's last known state is
// DEKError. Close is refused while references are held (inUse).
func (d *DEK) acquire() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return ErrClosed
	case d.state == DEKError:
		return errDEKError
	}
	d.users++
	return nil
}

// errDEKError is acquire's refusal of a DEK in the error state.
var errDEKError = errors.New("the DEK is in the error state (DEK.Query)")

// release drops a reference acquire took.
func (d *DEK) release() {
	d.mu.Lock()
	d.users--
	d.mu.Unlock()
}

// inUse is Close's refusal of a DEK that an mkey's configure names: the
// mkey would go on encrypting with a key the device no longer has
// (libmlx5 44.0 lets it be destroyed). Called with d.mu held.
func (d *DEK) inUse() error {
	if d.users > 0 {
		return &Error{Op: "destroy DEK", Obj: d.name(), Err: &reasonError{
			msg:  fmt.Sprintf("%d mkey configures use it (close or configure their mkeys first)", d.users),
			errs: []error{unix.EBUSY}}}
	}
	return nil
}

// checkCrypto checks the crypto of work request n of a batch, wr on the
// crypto mkey m, against mlx5dv_wr_set_mkey_crypto(3) and the DEK's
// options, takes a reference on its DEK, and puts it into m's wr. Every
// refusal is ErrInvalid (EINVAL) but a closed DEK's (ErrClosed). libmlx5
// 44.0 checks less: a NULL DEK dereferences, the DEK's PD is not compared
// with the mkey's, and a keytag of any DEK is taken. A Keytag for a DEK
// without one is written as given, as libmlx5 writes it; the device
// compares keytags only for a DEK that has one.
//
//go:noinline
func (qp *QP) checkCrypto(n int, wr *MkeyConfigureWR, m *Mkey) error {
	const op = postMkeyConfigure
	a := wr.Crypto
	bad := func(format string, args ...any) error {
		return invalid(postOpNames[op], qp.name, "work request %d (wr_id %#x): %s: %s", n, wr.WrID, m.name, fmt.Sprintf(format, args...))
	}
	d := a.DEK
	switch {
	case m.crypto == nil:
		return bad("crypto on an mkey created without MkeyOptions.Crypto")
	case d == nil:
		return bad("crypto without a DEK")
	case d.c == nil:
		return bad("a DEK not made by PD.CreateDEK")
	case d.c != m.c:
		return bad("a DEK of another context")
	case d.pd != m.pd:
		return bad("a DEK of another PD than the mkey's")
	case a.Order != SigAfterCryptoOnTx && a.Order != SigBeforeCryptoOnTx:
		return bad("signature and crypto order %d", a.Order)
	case a.DataUnitSize.Bytes() == 0:
		return bad("data unit size %v", a.DataUnitSize)
	case len(a.Keytag) != 0 && len(a.Keytag) != 8:
		return bad("a Keytag of %d bytes, not 8", len(a.Keytag))
	case d.keytag && len(a.Keytag) == 0:
		return bad("the DEK has a keytag: Keytag must be its 8 bytes")
	}
	if err := d.acquire(); err == errDEKError {
		return bad("%v", err)
	} else if err != nil {
		return opErr(postOpNames[op], qp.name, fmt.Errorf("work request %d (wr_id %#x): %s: %w", n, wr.WrID, m.name, err))
	}
	c := &m.crypto.wr
	c.EncryptOnTx, c.SigBeforeCrypto, c.DataUnitSize = a.EncryptOnTx, a.Order == SigBeforeCryptoOnTx, a.DataUnitSize
	c.InitialTweak, c.DEK = a.InitialTweak, d.id
	c.Keytag = [8]byte{}
	copy(c.Keytag[:], a.Keytag)
	return nil
}

// cryptoInputs puts into c what a crypto mkey's configure depends on of
// its crypto: the work request's (newCrypto) or the mkey's current one,
// the engines, the mkey's length and its current signature BSF.
func (mc *mkeyCrypto) inputs(c *wqe.MkeyConfigure, newCrypto bool) {
	c.CryptoMkey, c.NewCrypto = true, newCrypto
	c.CryptoMultiBlock, c.CryptoSingleBlock = mc.multiBlock, mc.singleBlock
	c.Length, c.BlockBSF = mc.length, &mc.blockBSF
	c.Crypto = nil
	switch {
	case newCrypto:
		c.Crypto = &mc.wr
	case mc.set:
		c.Crypto = &mc.cur
	}
}

// cryptoAccepted records the configure wr of the crypto mkey m that the
// batch is adding, whose DEK (nil without crypto) checkCrypto acquired,
// and gives m the state it leaves: wr's crypto, its layout's length, its
// signature block's BSF, and the DEK. That is done before the WQEs are
// written, which read none of it (the length and the block's BSF only
// when wr has no layout or no block, and crypto only when wr has none):
// a work request that fails after this poisons the batch, whose rollback
// puts the state back.
func (b *Batch) cryptoAccepted(m *Mkey, wr *MkeyConfigureWR, dek *DEK) {
	mc := m.crypto
	b.cundo = append(b.cundo, cryptoUndo{m: m, dek: dek, set: mc.set, cur: mc.cur, length: mc.length, blockBSF: mc.blockBSF})
	u := &b.cundo[len(b.cundo)-1]
	if wr.List != nil || wr.Interleaved != nil {
		c := wqe.MkeyConfigure{List: wqeKLMs(wr.List), Interleaved: wqeRepeat(wr.Interleaved), RepeatCount: wr.RepeatCount}
		mc.length = c.LayoutLength()
	}
	if wr.Sig != nil && m.sigMkey {
		_ = wqe.PutBSF(mc.blockBSF[:], wr.Sig, m.psvIndex[0], m.psvIndex[1]) // an invalid block fails the build
	}
	if dek == nil {
		return
	}
	mc.set, mc.cur = true, mc.wr
	m.mu.Lock()
	if !m.closed {
		u.prev, mc.dek, u.applied = mc.dek, dek, true
	}
	m.mu.Unlock()
	if !u.applied {
		dek.release() // Close came first: the mkey holds nothing
	}
	u.dek = nil // the mkey's now, or released
}

// cryptoCommitted releases the DEKs the batch's configures replaced.
func (b *Batch) cryptoCommitted() {
	for i := range b.cundo {
		if p := b.cundo[i].prev; p != nil {
			p.release()
		}
		b.cundo[i] = cryptoUndo{}
	}
	b.cundo = b.cundo[:0]
}

// cryptoRollback undoes the batch's crypto configures, last first: the
// DEKs they took are released and the mkeys get back their state and the
// DEKs they held (released instead if the mkey was closed since).
func (b *Batch) cryptoRollback() {
	for i := len(b.cundo) - 1; i >= 0; i-- {
		u := &b.cundo[i]
		mc := u.m.crypto
		mc.set, mc.cur, mc.length, mc.blockBSF = u.set, u.cur, u.length, u.blockBSF
		drop := u.dek // accepted, not applied
		if u.applied {
			u.m.mu.Lock()
			if u.m.closed {
				drop = u.prev // Close released the one it held
			} else {
				drop, mc.dek = mc.dek, u.prev
			}
			u.m.mu.Unlock()
		}
		if drop != nil {
			drop.release()
		}
		*u = cryptoUndo{}
	}
	b.cundo = b.cundo[:0]
}

// releaseCrypto drops the mkey's DEK when it is destroyed; under m.mu.
func (m *Mkey) releaseCrypto() {
	if mc := m.crypto; mc != nil && mc.dek != nil {
		mc.dek.release()
		mc.dek = nil
	}
}

// Crypto reports whether the mkey has crypto support
// (MkeyOptions.Crypto).
func (m *Mkey) Crypto() bool { return m != nil && m.crypto != nil }
