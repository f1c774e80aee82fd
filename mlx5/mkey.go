package mlx5

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// MkeyOptions describe an indirect mkey (mlx5dv_create_mkey with
// MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT): created free, then given a layout,
// access rights and optionally a signature block by PostMkeyConfigure.
type MkeyOptions struct {
	// MaxEntries is the most layout entries a configure may give it
	// (mlx5dv_mkey_init_attr.max_entries), 1 to 1024.
	MaxEntries int
	// BlockSignature adds block signature support
	// (MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE): a BSF and one PSV per
	// domain.
	BlockSignature bool
	// RemoteInvalidate lets a peer invalidate the mkey with a SEND with
	// invalidate naming its RKey (MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE:
	// mkc.en_rinval). Without it such a SEND fails at this side: its
	// receive completes with WCRemInvReqErr and the receiving QP goes to
	// the error state.
	RemoteInvalidate bool
	// Crypto adds AES-XTS crypto support
	// (MLX5DV_MKEY_INIT_ATTR_FLAGS_CRYPTO): a crypto BSF, which a
	// configure's CryptoAttr fills.
	Crypto bool
}

// Mkey is an indirect mkey (struct mlx5dv_mkey).
type Mkey struct {
	c          *Context
	pd         *PD
	obj        *DevxObj
	psv        [2]*DevxObj // memory, wire
	psvIndex   [2]uint32
	maxEntries int
	sigMkey    bool
	// sigCaps are the device's signature caps (Context.SigCaps), which a
	// configure's signature block must fit; checked only with checkCaps,
	// which CreateMkey sets for every signature mkey (mkeys that tests
	// build by hand check nothing).
	sigCaps   sig.Caps
	checkCaps bool
	rinval    bool
	// crypto is the crypto state of an mkey made with MkeyOptions.Crypto
	// (nil without).
	crypto *mkeyCrypto
	// The keys (LKey, RKey), the same key. The CQ finds the mkey of a
	// signature error by it (Context.mkeys).
	lkey, rkey uint32

	name string

	// State of the send queue that configures it (the poster's).
	bsf wqe.BSFState
	// sentErrs is the count of signature errors the last counter update
	// carried to the device; ^0 before the first configure (libmlx5's
	// err_count_updated is the difference from sigErrs).
	sentErrs uint32
	// sigPSV are the transient signatures of the mkey's current signature
	// block, which a counter update posts again.
	sigPSV wqe.BlockPSVs
	// tmpl is the WQEs of its last configure, to copy (mkeyTmpl).
	tmpl mkeyTmpl
	// shape is what Check needs of the last signature block configured
	// (sigShape), published by the poster without a lock.
	shape atomic.Uint32
	// sigErrs counts the signature errors the CQ reported.
	sigErrs atomic.Uint32
	dead    atomic.Bool // Close began: configures are refused

	// The signature error report Check returns (the poller's and the
	// checker's; errors only, off the hot path): the first the CQ handed
	// over since the last Check that decoded one (hasPending), and whether
	// a Check has read it and failed to decode it (pendingRead: a later
	// report may then replace it).
	mu          sync.Mutex
	pending     sigErrInfo
	hasPending  bool
	pendingRead bool
	closed      bool
}

// sigShape packs, per domain, whether it has a signature, and whether it
// is T10-DIF or CRC64_XP10: what decoding a SIG_ERR CQE depends on.
type sigShape uint32

const (
	shapePresent sigShape = 1 << iota
	shapeT10DIF
	shapeCRC64
	shapeBits = 3 // per domain; the wire domain's are shifted by this
)

func shapeOf(a *sig.BlockAttr) sigShape {
	if a == nil {
		return 0
	}
	one := func(d *sig.Domain) sigShape {
		switch {
		case d == nil:
			return 0
		case d.Type == sig.SigTypeT10DIF:
			return shapePresent | shapeT10DIF
		case d.CRC != nil && d.CRC.Type == sig.CRCTypeCRC64XP10:
			return shapePresent | shapeCRC64
		}
		return shapePresent
	}
	return one(a.Mem) | one(a.Wire)<<shapeBits
}

func (s sigShape) domain(d sig.SigDomain) sigShape {
	if d == sig.DomainWire {
		return s >> shapeBits & (1<<shapeBits - 1)
	}
	return s & (1<<shapeBits - 1)
}

// sigErrInfo is what a SIG_ERR CQE said, decoded only when Check asks, as
// libmlx5 does, against the signature block the mkey had when the CQE
// arrived.
type sigErrInfo struct {
	cqe   sig.SigErrCQE
	shape sigShape
}

// mkeyTranslationAlign: a KLM mkey's translation area is counted in
// octowords and libmlx5 sizes it for max_entries rounded up to 4.
const mkeyTranslationAlign = 4

// Access mode of an indirect mkey (MLX5_MKC_ACCESS_MODE_KLMS).
const mkcAccessKLMs = 2

// CreateMkey creates an indirect mkey in the PD (mlx5dv_create_mkey): for
// a signature mkey, first a PSV for each domain (CREATE_PSV), then the
// mkey (CREATE_MKEY), free, with UMR enabled, local read, KLM access mode,
// the BSF enabled for a signature mkey and remote invalidation for
// RemoteInvalidate; the same commands libmlx5 sends. A device without
// block signature offload (Context.SigCaps) refuses BlockSignature with
// ErrUnsupported before any command, as libmlx5 does. A crypto mkey
// (Crypto) has crypto_en set and room in its BSF for the crypto BSF
// after the signature one; a device whose CryptoCaps report neither
// AES-XTS engine (single-block, multi-block) refuses it with
// ErrUnsupported (EOPNOTSUPP) before any command (libmlx5 refuses it after
// creating the PSVs of a signature mkey, and destroys them).
func (p *PD) CreateMkey(o MkeyOptions) (*Mkey, error) {
	const op = "create mkey"
	if err := p.checkOpen(op); err != nil {
		return nil, err
	}
	obj := pdName(p.pdn)
	if err := p.c.check(op, obj); err != nil {
		return nil, err
	}
	if o.MaxEntries < 1 || o.MaxEntries > 1024 {
		return nil, invalid(op, obj, "max entries %d (1 to 1024)", o.MaxEntries)
	}
	var caps sig.Caps
	if o.BlockSignature {
		var err error
		if caps, err = p.c.blockSignature(); err != nil {
			return nil, wrapAs(op, obj, "", err)
		}
		if !caps.Offload() {
			return nil, unsupported(op, obj, "the device has no block signature offload (its caps lack sho or sigerr_domain_and_sig_type)")
		}
	}
	var crypto *mkeyCrypto
	if o.Crypto {
		cc, err := p.c.CryptoCaps()
		if err != nil {
			return nil, wrapAs(op, obj, "", err)
		}
		single, multi := cc.Engines&CryptoEngineAESXTSSingleBlock != 0, cc.Engines&CryptoEngineAESXTSMultiBlock != 0
		if !single && !multi {
			return nil, unsupported(op, obj, "the device has no AES-XTS engine (CryptoCaps.Engines: neither single-block nor multi-block)")
		}
		crypto = &mkeyCrypto{singleBlock: single, multiBlock: multi}
	}
	m := &Mkey{c: p.c, pd: p, maxEntries: o.MaxEntries, sigMkey: o.BlockSignature, sigCaps: caps, checkCaps: o.BlockSignature,
		rinval: o.RemoteInvalidate, crypto: crypto, sentErrs: ^uint32(0)}
	err := m.create()
	if err == nil {
		m.name = mkeyName(m.lkey)
		p.c.addMkey(m)
		if err = p.c.adopt(m); err != nil {
			p.c.removeMkey(m)
		}
	}
	if err != nil {
		m.release()
		return nil, wrapAs(op, obj, "", err)
	}
	return m, nil
}

func (m *Mkey) create() error {
	if m.sigMkey {
		for i := range m.psv {
			in := mailbox(prm.CreatePsvIn.Layout().Size, prm.MLX5_CMD_OP_CREATE_PSV)
			prm.CreatePsvIn.NumPsv.Set(in, 1)
			prm.CreatePsvIn.Pd.Set(in, uint64(m.pd.pdn))
			out := make([]byte, prm.CreatePsvOut.Layout().Size)
			obj, err := m.c.createObj("devx obj create", in, out)
			if err != nil {
				return err
			}
			m.psv[i] = obj
			m.psvIndex[i] = uint32(prm.CreatePsvOut.Psv0Index.Get(out))
		}
	}
	in := mailbox(prm.CreateMkeyIn.Layout().Size, prm.MLX5_CMD_OP_CREATE_MKEY)
	mkc := prm.CreateMkeyIn.MemoryKeyMkeyEntry
	set := func(f prm.Field, v uint64) { f.At(mkc).Set(in, v) }
	set(prm.Mkc.Free, 1)
	set(prm.Mkc.UmrEn, 1)
	set(prm.Mkc.Lr, 1)
	set(prm.Mkc.AccessMode10, mkcAccessKLMs)
	set(prm.Mkc.Qpn, 0xffffff)
	set(prm.Mkc.Pd, uint64(m.pd.pdn))
	set(prm.Mkc.TranslationsOctwordSize, uint64((m.maxEntries+mkeyTranslationAlign-1)&^(mkeyTranslationAlign-1)))
	if m.crypto != nil {
		set(prm.Mkc.CryptoEn, 1)
	}
	if bsf := m.bsfSize(); bsf > 0 {
		set(prm.Mkc.BsfEn, 1)
		set(prm.Mkc.BsfOctwordSize, uint64(bsf/16))
	}
	if m.rinval {
		set(prm.Mkc.EnRinval, 1)
	}
	out := make([]byte, prm.CreateMkeyOut.Layout().Size)
	obj, err := m.c.createObj("devx obj create", in, out)
	if err != nil {
		return err
	}
	m.obj = obj
	key := uint32(prm.CreateMkeyOut.MkeyIndex.Get(out))<<8 | uint32(prm.Mkc.Mkey70.At(mkc).Get(in))
	m.lkey, m.rkey = key, key
	return nil
}

// bsfSize is the bytes of BSF the mkey has room for: a signature BSF for
// block signature, a crypto BSF for crypto.
func (m *Mkey) bsfSize() int {
	n := 0
	if m.sigMkey {
		n += wqe.BSFSegSize
	}
	if m.crypto != nil {
		n += wqe.CryptoBSFSize
	}
	return n
}

// release destroys what create made: the mkey, then the PSVs. It stops at
// the first the device refuses, so that what is left stays whole.
func (m *Mkey) release() error {
	for _, o := range []*DevxObj{m.obj, m.psv[0], m.psv[1]} {
		if o == nil {
			continue
		}
		if err := o.Close(); err != nil {
			return err
		}
	}
	return nil
}

// Close destroys the mkey and its PSVs; configures of it are refused from
// then on (ErrClosed), and a crypto mkey lets go of its DEK (which
// DEK.Close then destroys). If the device refuses the destroy, the mkey
// stays usable. Closing twice is safe.
//
// Close waits for no work: close an mkey once the configures posted for
// it and the transfers through it have completed. A configure the device
// had not run when the mkey went fails when it runs (on the model with
// WCLocProtErr, which moves its QP to ERR), as does a transfer through
// the mkey.
func (m *Mkey) Close() error {
	const op = "destroy mkey"
	if err := m.usable(op); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.dead.Store(true)
	if err := m.release(); err != nil {
		if !m.obj.isClosed() {
			m.dead.Store(false) // nothing was destroyed: still usable
		}
		return wrapAs(op, m.name, "", err)
	}
	m.closed = true
	m.releaseCrypto()
	m.c.removeMkey(m)
	m.c.forget(m)
	return nil
}

// usable fails for a nil Mkey and one not made by CreateMkey.
func (m *Mkey) usable(op string) error {
	if m == nil || m.c == nil {
		return unusable(op, "Mkey", "PD.CreateMkey", m == nil)
	}
	return nil
}

// LKey is the key that names the mkey in SGEs (SGE.LKey, KLM.Mkey); 0
// for a nil Mkey. It is the same key as RKey.
func (m *Mkey) LKey() uint32 {
	if m == nil {
		return 0
	}
	return m.lkey
}

// RKey is the key that names the mkey in a peer's remote accesses
// (SendWR.RKey); 0 for a nil Mkey.
func (m *Mkey) RKey() uint32 {
	if m == nil {
		return 0
	}
	return m.rkey
}

// SigMkey reports whether the mkey has block signature support.
func (m *Mkey) SigMkey() bool { return m != nil && m.sigMkey }

// RemoteInvalidate reports whether a peer's SEND with invalidate may
// invalidate the mkey (MkeyOptions.RemoteInvalidate).
func (m *Mkey) RemoteInvalidate() bool { return m != nil && m.rinval }

// PSVs returns the PSV indexes of the memory and wire domains (0 without
// block signature).
func (m *Mkey) PSVs() (mem, wire uint32) {
	if m == nil {
		return 0, 0
	}
	return m.psvIndex[0], m.psvIndex[1]
}

// Check returns the first signature error the device reported on the mkey
// since the last Check, and forgets it (mlx5dv_mkey_check): the zero
// MkeyErr when there was none. As mlx5dv_mkey_check(3) says, the first
// error is kept until Check reads it, whatever the device reports after it
// (libmlx5 44.0 keeps the last; docs/MLX5.md, "Differences from
// libmlx5"). The error arrives with the CQ poll that reads its SIG_ERR
// CQE: poll the QP's CQ first. The device reports the first error of each
// signature domain and ignores the next ones until a configure re-arms
// the mkey, as every PostMkeyConfigure after an error does
// (docs/MODEL.md, "Signature errors"). The result is decoded with the
// signature block the mkey had when the poll read the CQE; a report that
// does not fit it (an unknown syndrome, a domain without a signature, a
// transaction signature) is an error wrapping EINVAL, and the report is
// kept, as libmlx5 keeps it: every Check returns the same error until
// another signature error replaces it.
func (m *Mkey) Check() (sig.MkeyErr, error) {
	const op = "mkey check"
	if err := m.usable(op); err != nil {
		return sig.MkeyErr{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return sig.MkeyErr{}, opErr(op, m.name, ErrClosed)
	}
	if !m.sigMkey {
		return sig.MkeyErr{}, invalid(op, m.name, "the mkey has no block signature")
	}
	if !m.hasPending {
		return sig.MkeyErr{}, nil
	}
	me, err := m.pending.decode()
	if err != nil {
		m.pendingRead = true
		return sig.MkeyErr{}, opErr(op, m.name, err)
	}
	m.hasPending = false
	return me, nil
}

// decode turns the CQE's report into mlx5dv_mkey_check's answer
// (sig.DecodeSigErrCQE), with a signature block of the shape the mkey had.
func (e *sigErrInfo) decode() (sig.MkeyErr, error) {
	var attr sig.BlockAttr
	attr.Mem = e.shape.domain(sig.DomainMemory).attr()
	attr.Wire = e.shape.domain(sig.DomainWire).attr()
	me, err := sig.DecodeSigErrCQE(e.cqe, &attr)
	if err != nil {
		return sig.MkeyErr{}, fmt.Errorf("%w (%w)", err, unix.EINVAL)
	}
	return me, nil
}

// attr is a domain of the shape: enough of it for decoding.
func (s sigShape) attr() *sig.Domain {
	switch {
	case s&shapePresent == 0:
		return nil
	case s&shapeT10DIF != 0:
		return &sig.Domain{Type: sig.SigTypeT10DIF, T10DIF: &sig.T10DIF{}}
	case s&shapeCRC64 != 0:
		return &sig.Domain{Type: sig.SigTypeCRC, CRC: &sig.CRC{Type: sig.CRCTypeCRC64XP10}}
	}
	return &sig.Domain{Type: sig.SigTypeCRC, CRC: &sig.CRC{Type: sig.CRCTypeCRC32}}
}

// recordSigErr keeps a SIG_ERR CQE's report for Check, unless an earlier
// one waits there that no Check has read, and makes the next configure of
// the mkey update the device's signature error counter (one step per CQE,
// kept or not, as libmlx5 counts them).
func (m *Mkey) recordSigErr(c sig.SigErrCQE) {
	m.mu.Lock()
	if !m.hasPending || m.pendingRead {
		m.pending = sigErrInfo{cqe: c, shape: sigShape(m.shape.Load())}
		m.hasPending, m.pendingRead = true, false
	}
	m.mu.Unlock()
	m.sigErrs.Add(1)
}

// mkeys finds an mkey by its index (the key without its low byte), for
// the SIG_ERR CQEs that name it; replaced whole on change, so the poller
// reads it without a lock.
type mkeyTable = map[uint32]*Mkey

func (c *Context) addMkey(m *Mkey) {
	c.mkeyMu.Lock()
	defer c.mkeyMu.Unlock()
	old := c.mkeys.Load()
	t := make(mkeyTable, 1)
	if old != nil {
		for k, v := range *old {
			t[k] = v
		}
	}
	t[m.lkey>>8] = m
	c.mkeys.Store(&t)
}

func (c *Context) removeMkey(m *Mkey) {
	c.mkeyMu.Lock()
	defer c.mkeyMu.Unlock()
	old := c.mkeys.Load()
	if old == nil || (*old)[m.lkey>>8] != m {
		return
	}
	t := make(mkeyTable, len(*old))
	for k, v := range *old {
		if v != m {
			t[k] = v
		}
	}
	c.mkeys.Store(&t)
}

func (c *Context) mkeyByIndex(index uint32) *Mkey {
	t := c.mkeys.Load()
	if t == nil {
		return nil
	}
	return (*t)[index]
}
