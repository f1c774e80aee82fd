package wqe

import (
	"errors"

	"github.com/mlx5go/mlx5go/sig"
)

// SendFlags are the work request flags (enum ibv_send_flags) the
// builders honour.
type SendFlags uint32

// Values of enum ibv_send_flags.
const (
	SendFence     SendFlags = 1 << 0 // IBV_SEND_FENCE: fm_ce_se CtrlFence
	SendSignaled  SendFlags = 1 << 1 // IBV_SEND_SIGNALED: fm_ce_se CtrlCQUpdate
	SendSolicited SendFlags = 1 << 2 // IBV_SEND_SOLICITED: fm_ce_se CtrlSolicited
	// IBV_SEND_INLINE: required by BuildMkeyConfigure (the UMR's
	// translations are inline); BuildSend does not look at it, Send.Inline
	// chooses inline data.
	SendInline SendFlags = 1 << 3
)

// BSFState is what the UMRs posted so far did to a signature mkey's BSF;
// it decides whether a UMR without a signature block touches bsf_en. The
// send queue keeps it per mkey.
type BSFState uint8

const (
	// BSFInit: no UMR has configured the mkey yet.
	BSFInit BSFState = iota
	// BSFSet: the last UMR that touched the BSF set a signature block.
	BSFSet
	// BSFReset: the last UMR that touched the BSF reset it
	// (MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR).
	BSFReset
)

// Errors of BuildMkeyConfigure. libmlx5 fails the same inputs at
// ibv_wr_complete: ErrNotInline with EOPNOTSUPP, ErrTooManyEntries with
// ENOMEM, the others with EINVAL.
var (
	ErrNotInline      = errors.New("wqe: mkey configure needs SendInline")
	ErrTooManyEntries = errors.New("wqe: layout has more entries than the mkey allows")
	ErrLayout         = errors.New("wqe: bad mkey layout")
	ErrNotSigMkey     = errors.New("wqe: signature block on an mkey without block signature support")
	ErrResetWithSig   = errors.New("wqe: signature block and RESET_SIG_ATTR in one work request")
	ErrRing           = errors.New("wqe: ring is not a power-of-two number of WQEBBs large enough for the WQEs")
	ErrQPN            = errors.New("wqe: QPN wider than 24 bits")
	// ErrNoSigBlock: the work request updates the signature error counter
	// of an mkey whose signature block stays (BSF BSFSet, no Sig, no
	// ResetSig), so its PSVs must be set again, but Block has no domain.
	ErrNoSigBlock = errors.New("wqe: signature error counter update without the mkey's signature block (MkeyConfigure.Block)")
	// ErrKLMLength: a list layout's entry of more than MaxKLMLength bytes.
	// libmlx5 does not check the list (its memory window bind refuses
	// more than 2 GiB with EOPNOTSUPP, "KLM support only 2GB").
	ErrKLMLength = errors.New("wqe: KLM of more than 2^31 bytes")
)

// MaxKLMLength is the most a KLM maps: 2 GiB (struct
// mlx5_wqe_umr_klm_seg's byte_count, "up to 2GB" in mlx5dv.h).
const MaxKLMLength = 1 << 31

// ErrNoRoom is returned by the Build functions when the WQEs of a valid
// work request need more WQEBBs than the caller says are free at the
// producer counter. The ring is left unchanged and Result.WQEBBs says how
// many WQEBBs the work request needs: poll completions until that many
// are free, then build again. (ErrRing: the ring is not valid, or the
// WQEs are larger than the whole ring, so they never fit.)
var ErrNoRoom = errors.New("wqe: not enough free WQEBBs in the send queue")

// MkeyConfigure is one mlx5dv_wr_mkey_configure work request with its
// setters (mlx5dv_wr_set_mkey_access_flags, _layout_list or
// _layout_interleaved, _sig_block), plus the per-QP and per-mkey state
// libmlx5 keeps and the WQE depends on.
type MkeyConfigure struct {
	QPN        uint32    // the send queue's QP number
	Mkey       uint32    // the mkey's lkey (the UMR ctrl's imm)
	Flags      SendFlags // the work request's send flags
	SmallFence bool      // the QP's previous WQE asked for a small fence (libmlx5's fm_cache)

	SetAccess bool   // mlx5dv_wr_set_mkey_access_flags was called
	Access    Access // its access flags

	// At most one layout: List (mlx5dv_wr_set_mkey_layout_list) or
	// Interleaved with RepeatCount (mlx5dv_wr_set_mkey_layout_interleaved).
	List        []KLM
	Interleaved []RepeatEntry
	RepeatCount uint32
	// MaxEntries is the mkey's max_entries (mlx5dv_mkey_init_attr); a
	// layout with more entries fails. 0 means no limit.
	MaxEntries int

	// Sig is the signature block (mlx5dv_wr_set_mkey_sig_block), nil for
	// none; MemPSV and WirePSV are the mkey's PSV indexes.
	Sig             *sig.BlockAttr
	MemPSV, WirePSV uint32
	SigMkey         bool     // created with MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE
	BSF             BSFState // the mkey's BSF state before this UMR
	ResetSig        bool     // MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR
	// UpdateSigErr: the UMR updates the mkey's signature error counter
	// (libmlx5 does on the first UMR of the mkey and on the first after
	// each SIG_ERR CQE the CQ reported for it); SigErrs is the number of
	// those CQEs so far.
	UpdateSigErr bool
	SigErrs      uint32
	// Block is the mkey's current signature block (PSVsOf the Sig of the
	// configure that set it), looked at only when BSF is BSFSet: a UMR
	// that updates the signature error counter without setting or
	// resetting the block (UpdateSigErr, Sig nil, no ResetSig) is followed
	// by the block's SET_PSVs again, as for a new block, so the PSVs leave
	// their error state. Without a domain in Block it fails with
	// ErrNoSigBlock.
	Block BlockPSVs
	// Caps, when not nil, are the device's signature caps, which Sig must
	// fit (sig.Caps.Supports): a block outside them fails with
	// Supports' error (matching sig.ErrUnsupported), after every check
	// of the work request's validity and before ErrNoRoom.
	Caps *sig.Caps

	// CryptoMkey: the mkey was created with
	// MLX5DV_MKEY_INIT_ATTR_FLAGS_CRYPTO. Its UMR rewrites the BSF only
	// when the work request sets crypto (NewCrypto) or sets or resets a
	// signature block; then it carries the signature BSF first on a
	// signature mkey (the current block's, BlockBSF, when the work request
	// leaves it), and the crypto BSF of Crypto.
	CryptoMkey bool
	// Crypto is the mkey's crypto for this UMR: the work request's
	// (mlx5dv_wr_set_mkey_crypto, NewCrypto) or, without NewCrypto, the
	// one an earlier configure set, which libmlx5 writes again each time
	// the UMR rewrites the BSF; nil while no configure has set one.
	Crypto    *Crypto
	NewCrypto bool
	// The device's AES-XTS engines (mlx5dv_crypto_caps' crypto_engines):
	// with the multi-block engine the BSF holds the tweak big-endian;
	// with only the single-block one, an mkey whose crypto is set may map
	// at most one data unit (ErrCryptoLength).
	CryptoMultiBlock, CryptoSingleBlock bool
	// Length is the mkey's length from its last layout (libmlx5's
	// mkey->length), which the length checks of a UMR without a layout
	// use.
	Length uint64
	// BlockBSF is the signature BSF of the mkey's current block (BSF
	// BSFSet), which a crypto mkey's UMR that sets crypto alone writes
	// again (ErrNoSigBlock without it). PutBSF of the block makes it;
	// its size bits are the UMR's.
	BlockBSF *[BSFSegSize]byte
}

// BlockPSVs is what the SET_PSV WQEs of a signature block load: for each
// domain whether the block has a signature there, and its transient
// signature (sig.Domain.TransientSignature). It has no pointers, so the
// mkey's owner keeps it by value.
type BlockPSVs struct {
	Mem, Wire       bool
	MemSig, WireSig uint64
}

// PSVsOf returns the SET_PSV values of the signature block a (none for a
// nil a).
func PSVsOf(a *sig.BlockAttr) BlockPSVs {
	if a == nil {
		return BlockPSVs{}
	}
	return BlockPSVs{
		Mem: a.Mem != nil, MemSig: a.Mem.TransientSignature(),
		Wire: a.Wire != nil, WireSig: a.Wire.TransientSignature(),
	}
}

// count is the number of SET_PSV WQEs.
func (p BlockPSVs) count() int { return int(b2u(p.Mem) + b2u(p.Wire)) }

// Result says what a Build function wrote, and what the caller needs to
// ring the doorbell as libmlx5 does: a post of one WQE of 2 to
// bf_size/16 ds is copied whole to the BlueFlame register (its WQEBBs
// from the producer counter it was built at), any other post rings the
// 8-byte doorbell with Doorbell. BuildMkeyConfigure posts 1+PSVs WQEs
// (MkeyConfigureResult), so with SET_PSVs it always rings the doorbell (DS
// is then a SET_PSV's); the other builders post one WQE.
//
// Result has four fields so that the compiler keeps it in registers: a
// larger struct returned by a builder is copied through memory, which
// costs the caller a store-forwarding stall on every work request.
type Result struct {
	WQEBBs   int    // WQEBBs used: the producer counter advances by this
	Doorbell uint64 // the first 8 bytes of the last WQE, big-endian: the doorbell write
	DS       uint8  // ds of the last WQE (its size in 16-byte units)

	// SmallFence says that the next WQE posted on the send queue must
	// carry the small fence (its SmallFence input): libmlx5 arms its
	// fm_cache after a UMR (mkey configure, SET_PSV, LOCAL_INV). Any WQE
	// consumes it; IBV_SEND_FENCE replaces it.
	SmallFence bool
}

// MkeyConfigureResult is what BuildMkeyConfigure wrote: the Result of its
// WQEs, and their parts.
type MkeyConfigureResult struct {
	Result
	UMRDS uint8 // ds of the UMR WQE
	PSVDS uint8 // ds of each SET_PSV WQE (0 without SET_PSVs)
	PSVs  int   // SET_PSV WQEs after the UMR (one per signature domain)
}

// Ring is a send queue buffer: a power-of-two number of 64-byte WQEBBs.
// WQEs are written at the producer counter modulo the ring size and
// continue at the start of the ring when they cross its end.
type Ring []byte

func (r Ring) wqebbs() int { return len(r) / WQEBB }

func (r Ring) valid() bool {
	n := r.wqebbs()
	return n > 0 && n&(n-1) == 0 && len(r) == n*WQEBB
}

// fit checks that n WQEBBs can be written at a producer counter with
// free WQEBBs free: ErrRing if r is not valid or smaller than n WQEBBs,
// ErrNoRoom, with the Result a Build function returns then, if n is more
// than free. A free above the ring size counts as the ring size, one below
// 0 as 0.
func (r Ring) fit(n, free int) (Result, error) {
	if !r.valid() || n > r.wqebbs() {
		return Result{}, ErrRing
	}
	if n > free {
		return Result{WQEBBs: n}, ErrNoRoom
	}
	return Result{}, nil
}

// Slot returns the WQEBB of producer counter pi (its index modulo the
// ring size), or nil if r is not a power-of-two number of WQEBBs.
func (r Ring) Slot(pi uint16) []byte {
	if !r.valid() {
		return nil
	}
	return r.slot(pi)
}

// slot is Slot for a valid r.
func (r Ring) slot(pi uint16) []byte {
	i := int(pi) & (r.wqebbs() - 1)
	return r[i*WQEBB : (i+1)*WQEBB : (i+1)*WQEBB]
}

// octowords rounds n 16-byte entries up to whole WQEBBs, in octowords.
func octowords(n int) int { return (n + 3) &^ 3 }

// layout checks c's layout and returns its octowords and the mkey length.
func (c *MkeyConfigure) layout() (klmOct int, length uint64, err error) {
	switch {
	case c.List != nil && c.Interleaved != nil:
		return 0, 0, ErrLayout
	case c.List != nil:
		if c.MaxEntries > 0 && len(c.List) > c.MaxEntries {
			return 0, 0, ErrTooManyEntries
		}
		for _, k := range c.List {
			if k.ByteCount > MaxKLMLength {
				return 0, 0, ErrKLMLength
			}
			length += uint64(k.ByteCount)
		}
		return octowords(len(c.List)), length, nil
	case c.Interleaved != nil:
		if len(c.Interleaved) == 0 || len(c.Interleaved) > 0xffff || c.RepeatCount == 0 {
			return 0, 0, ErrLayout
		}
		if c.MaxEntries > 0 && len(c.Interleaved) > c.MaxEntries {
			return 0, 0, ErrTooManyEntries
		}
		var block uint64
		for _, e := range c.Interleaved {
			if e.ByteCount > 0xffff || uint64(e.ByteCount)+uint64(e.Skip) > 0xffff {
				return 0, 0, ErrLayout
			}
			block += uint64(e.ByteCount)
		}
		if block > 0xffffffff {
			return 0, 0, ErrLayout
		}
		return octowords(1 + len(c.Interleaved)), block * uint64(c.RepeatCount), nil
	}
	return 0, 0, nil
}

// LayoutLength is the length of c's layout: the sum of a list's byte
// counts, or an interleaved layout's block times its repeat count; 0
// without a layout, or for one BuildMkeyConfigure refuses.
func (c *MkeyConfigure) LayoutLength() uint64 {
	_, length, err := c.layout()
	if err != nil {
		return 0
	}
	return length
}

// BuildMkeyConfigure writes the WQEs of c into r at producer counter pi:
// the UMR WQE (ctrl, UMR ctrl, mkey context, translations, BSF), then one
// SET_PSV WQE per signature domain (memory first) of the new block, or of
// the current one (c.Block) when the UMR updates the signature error
// counter of an mkey that keeps its block. The completion, if signaled, is
// on the last WQE. free is the number of WQEBBs from pi on that the
// caller may write (the ring size minus the WQEBBs posted and not yet
// completed); WQEs that need more fail with ErrNoRoom and Result.WQEBBs
// set to what they need. It checks everything before writing, work
// request errors first, so on error r is unchanged. It does not ring the
// doorbell or advance any counter.
func BuildMkeyConfigure(r Ring, pi uint16, free int, c *MkeyConfigure) (MkeyConfigureResult, error) {
	if c == nil {
		return MkeyConfigureResult{}, ErrNil
	}
	if c.Flags&SendInline == 0 {
		return MkeyConfigureResult{}, ErrNotInline
	}
	if c.QPN > 0xffffff {
		return MkeyConfigureResult{}, ErrQPN
	}
	klmOct, length, err := c.layout()
	if err != nil {
		return MkeyConfigureResult{}, err
	}
	psvs, err := c.psvs()
	if err != nil {
		return MkeyConfigureResult{}, err
	}
	// A BSF describes at most 2^32-1 bytes (its raw_data_size); a crypto
	// mkey's BSFs and rules are cryptoBSFs'.
	var bsfOct int
	if c.Sig != nil {
		bsfOct = BSFSegSize / 16
	}
	if c.CryptoMkey || c.NewCrypto {
		if bsfOct, err = c.cryptoBSFs(length); err != nil {
			return MkeyConfigureResult{}, err
		}
	} else if bsfOct > 0 && length > 0xffffffff {
		return MkeyConfigureResult{}, ErrBSFLength
	}
	ds := 1 + 3 + 4 + klmOct + bsfOct // ctrl, UMR ctrl, mkey context, translations, BSF
	if ds > MaxDS {
		return MkeyConfigureResult{}, ErrTooManyEntries
	}
	if c.Caps != nil && c.Sig != nil {
		if err := c.Caps.Supports(c.Sig); err != nil {
			return MkeyConfigureResult{}, err
		}
	}
	umrBBs := (ds*16 + WQEBB - 1) / WQEBB
	res := MkeyConfigureResult{Result: Result{WQEBBs: umrBBs + psvs.count(), DS: uint8(ds), SmallFence: true}, UMRDS: uint8(ds), PSVs: psvs.count()}
	if nr, err := r.fit(res.WQEBBs, free); err != nil {
		return MkeyConfigureResult{Result: nr}, err
	}

	// The UMR WQE.
	fm := c.Flags.fence(c.SmallFence)
	if res.PSVs == 0 && c.Flags&SendSignaled != 0 {
		fm |= CtrlCQUpdate
	}
	bb := r.slot(pi)
	_ = PutCtrl(bb, &Ctrl{Opcode: OpcodeUMR, WQEIndex: pi, QPN: c.QPN, DS: uint8(ds), FmCeSe: fm, Imm: c.Mkey})
	_ = PutUMRCtrl(bb[CtrlSegSize:], &UMRCtrl{
		Flags:        UMRFlagInline,
		KLMOctowords: uint16(klmOct),
		BSFOctowords: uint16(bsfOct),
		MkeyMask:     c.mkeyMask(bsfOct),
	})
	_ = PutMkc(r.slot(pi+1), &Mkc{
		Access:              c.Access,
		QPN:                 0xffffff,
		Mkey70:              uint8(c.Mkey),
		BSFEnable:           bsfOct > 0,
		ExpectedSigErrCount: uint8(b2u(c.SigMkey && c.UpdateSigErr && (c.SigErrs+1)&1 != 0)),
		Len:                 length,
	})
	next := pi + 2
	if klmOct > 0 {
		c.putTranslations(r, next, klmOct)
		next += uint16(klmOct / 4)
	}
	if bsfOct > 0 {
		if c.CryptoMkey {
			next = c.putCryptoBSFs(r, next)
		} else {
			putBSF(r.slot(next), c.Sig, c.MemPSV, c.WirePSV)
			next++
		}
	}
	res.Doorbell = be.Uint64(r.slot(pi))

	// One SET_PSV per domain, memory first; the work request's completion
	// moves to the last one.
	if psvs.Mem {
		res.Doorbell = c.putSetPSV(r.slot(next), next, c.MemPSV, psvs.MemSig, !psvs.Wire)
		next++
	}
	if psvs.Wire {
		res.Doorbell = c.putSetPSV(r.slot(next), next, c.WirePSV, psvs.WireSig, true)
	}
	if res.PSVs > 0 {
		res.PSVDS = setPSVDS
		res.DS = setPSVDS
	}
	return res, nil
}

// setPSVDS is the ds of a SET_PSV WQE: ctrl and SET_PSV segments.
const setPSVDS = (CtrlSegSize + SetPSVSegSize) / 16

// psvs checks c's signature block and returns the SET_PSVs the work
// request posts after the UMR: those of the new block Sig, or, when the
// UMR updates the signature error counter of an mkey whose block stays
// (BSF BSFSet, no Sig, no ResetSig), those of its current block Block, as
// libmlx5 posts them; none otherwise.
func (c *MkeyConfigure) psvs() (BlockPSVs, error) {
	var p BlockPSVs
	switch {
	case c.Sig != nil:
		if !c.SigMkey {
			return p, ErrNotSigMkey
		}
		if c.ResetSig {
			return p, ErrResetWithSig
		}
		if err := c.Sig.Validate(); err != nil {
			return p, err
		}
		p = PSVsOf(c.Sig)
	case c.SigMkey && c.UpdateSigErr && c.BSF == BSFSet && !c.ResetSig:
		p = c.Block
		if !p.Mem && !p.Wire {
			return p, ErrNoSigBlock
		}
	default:
		return p, nil
	}
	if (p.Mem && c.MemPSV > 0xffffff) || (p.Wire && c.WirePSV > 0xffffff) {
		return p, ErrPSV
	}
	return p, nil
}

// putSetPSV writes the SET_PSV WQE at counter idx into its WQEBB bb, the
// completion on it if it is the work request's last, and returns its
// doorbell word.
func (c *MkeyConfigure) putSetPSV(bb []byte, idx uint16, psv uint32, ts uint64, last bool) uint64 {
	fm := c.Flags.fence(true)
	if last && c.Flags&SendSignaled != 0 {
		fm |= CtrlCQUpdate
	}
	_ = PutCtrl(bb, &Ctrl{Opcode: OpcodeSetPSV, WQEIndex: idx, QPN: c.QPN, DS: setPSVDS, FmCeSe: fm})
	_ = PutSetPSV(bb[CtrlSegSize:], SetPSV{PSVIndex: psv, TransientSignature: ts})
	clear(bb[CtrlSegSize+SetPSVSegSize:])
	return be.Uint64(bb)
}

// fence returns the fence and solicited bits of a WQE of the request:
// the full fence with SendFence, else the small fence when asked.
func (f SendFlags) fence(small bool) uint8 {
	var fm uint8
	switch {
	case f&SendFence != 0:
		fm = CtrlFence
	case small:
		fm = CtrlSmallFence
	}
	if f&SendSolicited != 0 {
		fm |= CtrlSolicited
	}
	return fm
}

// mkeyMask is the UMR's mkey_mask: the mkey and free bits always, the
// access bits with SetAccess, the length with a layout; bsf_en on a
// signature mkey without crypto when the BSF changes or is not known to
// be set, on a crypto mkey when the UMR writes a BSF (bsfOct); and on a
// signature mkey the signature error counter (UpdateSigErr).
func (c *MkeyConfigure) mkeyMask(bsfOct int) MkeyMask {
	m := MkeyMaskFree | MkeyMaskMkey
	if c.SetAccess {
		m |= mkeyMaskAccessAll
	}
	if c.List != nil || c.Interleaved != nil {
		m |= MkeyMaskLen
	}
	switch {
	case c.CryptoMkey:
		if bsfOct > 0 {
			m |= MkeyMaskBSFEnable
		}
	case c.SigMkey && (c.Sig != nil || c.ResetSig || c.BSF != BSFSet):
		m |= MkeyMaskBSFEnable
	}
	if c.SigMkey && c.UpdateSigErr {
		m |= MkeyMaskSigErr
	}
	return m
}

// putTranslations writes the layout's KLMs or repeat block from WQEBB pi
// on, padded with zeros to klmOct octowords.
func (c *MkeyConfigure) putTranslations(r Ring, pi uint16, klmOct int) {
	entry := func(i int) []byte { return r.slot(pi + uint16(i/4))[(i%4)*16:] }
	n := 0
	if c.List != nil {
		for _, k := range c.List {
			_ = PutKLM(entry(n), k)
			n++
		}
	} else {
		var block uint32
		for _, e := range c.Interleaved {
			block += e.ByteCount
		}
		_ = PutRepeatBlockHeader(entry(0), block, c.RepeatCount, uint16(len(c.Interleaved)))
		n++
		for _, e := range c.Interleaved {
			_ = PutRepeatEntry(entry(n), e)
			n++
		}
	}
	for ; n < klmOct; n++ {
		clear(entry(n)[:16])
	}
}
