package wqe

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// Constants of the data-path segments (mlx5dv.h).
const (
	// InlineSeg is or-ed into an inline segment's byte_count
	// (MLX5_INLINE_SEG).
	InlineSeg uint32 = 0x80000000
	// InvalidLKey is the lkey of the segment that ends a receive WQE with
	// fewer scatter entries than the queue allows (MLX5_INVALID_LKEY).
	InvalidLKey uint32 = 0x100
	// ExtendedUDAV is or-ed into a UD WQE's destination QPN
	// (MLX5_EXTENDED_UD_AV): the address vector is the 48-byte form.
	ExtendedUDAV uint32 = 0x80000000
	// MaxDS is the largest WQE a control segment can describe, in
	// 16-byte units (its ds field is 6 bits).
	MaxDS = 0x3f
	// MaxSGELength is the longest SGE a data segment holds: its
	// byte_count has 31 bits of count, bit 31 being InlineSeg. (2 GiB is
	// written as 0, libmlx5's mlx5_wr_memcpy says; the builders give a
	// zero-length SGE no segment, as libmlx5 does, so they never write
	// it.)
	MaxSGELength = 1<<31 - 1
	// MaxMessage is the longest message of the IB spec, 2^31 bytes: the
	// bound of a Send whose MaxMessage is 0.
	MaxMessage = 1 << 31
	// atomicSize is the byte count of an atomic's data segment: the
	// 8-byte operand the responder returns (MLX5_ATOMIC_SIZE).
	atomicSize = 8
)

// Errors of BuildSend, BuildLocalInv and PutRecv. libmlx5 fails the same
// work requests: ErrTooManySGEs and ErrInlineTooLong with ENOMEM on the
// send queue (EINVAL on the receive queue), ErrOpcode with EINVAL.
// libmlx5 does not check lengths: it writes an SGE of 2^31 bytes or more
// as it is, and the device reads the data segment as an inline one;
// ErrSGELength and ErrMsgTooLong refuse what rxe refuses at post
// (validate_send_wr: a message past the port's max_msg_sz).
var (
	ErrOpcode        = errors.New("wqe: opcode not supported by this work request or QP type")
	ErrTooManySGEs   = errors.New("wqe: more scatter/gather entries than the queue allows")
	ErrInlineTooLong = errors.New("wqe: inline data longer than the QP's max inline data")
	ErrInline        = errors.New("wqe: inline data together with an SGL, or on an RDMA read or atomic")
	ErrTooLarge      = errors.New("wqe: WQE larger than 63 16-byte units")
	ErrRecvStride    = errors.New("wqe: receive WQE stride is not a positive multiple of 16 bytes")
	ErrSGELength     = errors.New("wqe: SGE of 2^31 bytes or more: a data segment's byte count has 31 bits")
	ErrMsgTooLong    = errors.New("wqe: message longer than the QP's maximum message size")
	// ErrDest: a work request names a UD and a DC destination both
	// (libmlx5 cannot express it).
	ErrDest = errors.New("wqe: a UD and a DC destination both")
)

// SGE is a scatter/gather entry (struct ibv_sge): Length bytes at Addr of
// the memory region with key LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// Byte offsets in the data-path segments (checked against the kernel's
// BTF by TestLabBTFWQE, except the atomic segment's, which the kernel's
// modules do not use).
const (
	dataOffByteCount   = 0  // mlx5_wqe_data_seg.byte_count
	dataOffLKey        = 4  // mlx5_wqe_data_seg.lkey
	dataOffAddr        = 8  // mlx5_wqe_data_seg.addr
	raddrOffRaddr      = 0  // mlx5_wqe_raddr_seg.raddr
	raddrOffRKey       = 8  // mlx5_wqe_raddr_seg.rkey
	raddrOffReserved   = 12 // mlx5_wqe_raddr_seg.reserved
	atomicOffSwapAdd   = 0  // mlx5_wqe_atomic_seg.swap_add
	atomicOffCompare   = 8  // mlx5_wqe_atomic_seg.compare
	inlineOffByteCount = 0  // mlx5_wqe_inline_seg.byte_count
	inlineOffData      = 4  // mlx5_wqe_inline_seg.data
	avOffQKey          = 0  // mlx5_wqe_av.key.qkey.qkey (kernel: mlx5_av)
	avOffQKeyReserved  = 4  // mlx5_wqe_av.key.qkey.reserved
	avOffDQPDCT        = 8  // dqp_dct
	avOffStatRateSL    = 12 // stat_rate_sl
	avOffFlMlid        = 13 // fl_mlid
	avOffRLID          = 14 // rlid
	avOffReserved0     = 16 // reserved0
	avOffRMAC          = 20 // rmac
	avOffTClass        = 26 // tclass
	avOffHopLimit      = 27 // hop_limit
	avOffGRHGidFl      = 28 // grh_gid_fl
	avOffRGID          = 32 // rgid
)

// The segment writers: each stores one segment into the bytes s points
// to, its 8-byte words big-endian, one store a word (binary.BigEndian's
// PutUint64 of a word made of shifted fields compiles to narrower stores
// of the fields, which the 8-byte loads of a BlueFlame copy then wait
// for; a byte swap and a little-endian store write the same bytes in
// one). They take an array pointer, so that a caller that has the
// segment's place in the ring needs no bounds check per field, and they
// inline. They are the only encoding of their segments: the builders
// of this package write through them, the Put functions check a slice's
// length and call them, and mlx5's post composes them.

// putWords writes the 16-byte segment of words w0 and w1 into s.
func putWords(s *[16]byte, w0, w1 uint64) {
	binary.LittleEndian.PutUint64(s[0:], bits.ReverseBytes64(w0))
	binary.LittleEndian.PutUint64(s[8:], bits.ReverseBytes64(w1))
}

// CtrlHead is what the first word of a control segment holds of its
// work request's operation and QP: opmod, opcode and the QP number's low
// 24 bits (opmod_idx_opcode and qpn_ds without the counter and ds). A
// poster makes it once per QP and opcode; StoreCtrl adds the rest.
type CtrlHead uint64

// CtrlHeadOf is the CtrlHead of opmod, opcode and the QP number qpn.
func CtrlHeadOf(opmod, opcode uint8, qpn uint32) CtrlHead {
	return CtrlHead(uint64(opmod)<<56 | uint64(opcode)<<32 | uint64(qpn&0xffffff)<<8)
}

// StoreCtrl writes a control segment into s (struct mlx5_wqe_ctrl_seg:
// opmod_idx_opcode and qpn_ds, from h, the counter pi and ds's low 6
// bits; signature, dci_stream_channel_id, fm_ce_se, imm) and returns its
// first 8 bytes as the big-endian word they hold: the doorbell word an
// 8-byte ring writes, which holds the WQE's counter in bits 40 to 55 and
// its ds in the low 6 bits.
func StoreCtrl(s *[16]byte, h CtrlHead, pi uint16, ds, signature uint8, stream uint16, fm uint8, imm uint32) (doorbell uint64) {
	w0 := uint64(h) | uint64(pi)<<40 | uint64(ds&0x3f)
	putWords(s, w0, uint64(signature)<<56|uint64(stream)<<40|uint64(fm)<<32|uint64(imm))
	return w0
}

// StoreRaddr writes a remote address segment into s (struct
// mlx5_wqe_raddr_seg: raddr, rkey, a zero reserved word).
func StoreRaddr(s *[16]byte, raddr uint64, rkey uint32) { putWords(s, raddr, uint64(rkey)<<32) }

// StoreData writes the data segment of g into s (struct
// mlx5_wqe_data_seg: byte_count, lkey, addr). It writes g.Length as it
// is: a length past MaxSGELength sets the bit that makes the device read
// the segment as an inline one, and the builders refuse it first.
func StoreData(s *[16]byte, g SGE) { putWords(s, uint64(g.Length)<<32|uint64(g.LKey), g.Addr) }

// StoreAtomic writes an atomic segment into s (struct
// mlx5_wqe_atomic_seg: swap_add, compare).
func StoreAtomic(s *[16]byte, swapAdd, compare uint64) { putWords(s, swapAdd, compare) }

// AVImage is an address vector encoded as its segment holds it (struct
// mlx5_wqe_av) with the key and dqp_dct zero: stat_rate_sl, fl_mlid,
// rlid, a zero reserved word, rmac, tclass, hop_limit, grh_gid_fl, rgid.
// AV.Image makes it; a poster keeps one per address handle, so that a
// work request's address vector segment is StoreAV's copy of it.
type AVImage [DatagramSegSize]byte

// Image is av encoded (AVImage).
func (av *AV) Image() (img AVImage) {
	m := &av.RMAC
	putWords((*[16]byte)(img[0:16]), 0, uint64(av.StatRateSL)<<24|uint64(av.FlMlid)<<16|uint64(av.RLID))
	putWords((*[16]byte)(img[16:32]), uint64(m[0])<<24|uint64(m[1])<<16|uint64(m[2])<<8|uint64(m[3]),
		uint64(m[4])<<56|uint64(m[5])<<48|uint64(av.TClass)<<40|uint64(av.HopLimit)<<32|uint64(av.GRHGidFl))
	*(*[16]byte)(img[32:48]) = av.RGID
	return img
}

// StoreAV writes an address vector segment into s: key in its first 8
// bytes (a UD work request's Q_Key then a zero word, a DCI's DC access
// key), big-endian, dqp_dct, then the vector img (its first 12 bytes are
// not read). Two 8-byte stores and two 16-byte copies (a 32-byte one
// would be a call to memmove): it inlines.
func StoreAV(s *[48]byte, key uint64, dqp uint32, img *AVImage) {
	binary.LittleEndian.PutUint64(s[0:], bits.ReverseBytes64(key))
	binary.LittleEndian.PutUint64(s[8:], uint64(bits.ReverseBytes32(dqp))|binary.LittleEndian.Uint64(img[8:])&^0xffffffff)
	*(*[16]byte)(s[16:32]) = *(*[16]byte)(img[16:32])
	*(*[16]byte)(s[32:48]) = *(*[16]byte)(img[32:48])
}

// ctrlFlags is fm_ce_se by SendFence, SendSignaled and SendSolicited
// (the low three bits of the flags) and the small fence (bit 3).
var ctrlFlags = func() (t [16]uint8) {
	for i := range t {
		f := SendFlags(i & 7)
		t[i] = f.fence(i&8 != 0)
		if f&SendSignaled != 0 {
			t[i] |= CtrlCQUpdate
		}
	}
	return t
}()

// CtrlFlags is the fm_ce_se byte of a WQE of a work request with flags f
// (SendFence, SendSignaled, SendSolicited; the others are not looked at)
// posted after a WQE that armed the small fence (small): CtrlFence with
// SendFence, else CtrlSmallFence when small; CtrlCQUpdate when signaled;
// CtrlSolicited when solicited.
func CtrlFlags(f SendFlags, small bool) uint8 {
	i := f & 7
	if small {
		i |= 8
	}
	return ctrlFlags[i&15]
}

// PutData writes the data segment of s into b[:16] (struct
// mlx5_wqe_data_seg: byte_count, lkey, addr). It writes s.Length as it
// is: the builders refuse lengths past MaxSGELength before they call it.
func PutData(b []byte, s SGE) error {
	if len(b) < DataSegSize {
		return ErrShort
	}
	StoreData((*[16]byte)(b), s)
	return nil
}

// PutRaddr writes a remote address segment into b[:16] (struct
// mlx5_wqe_raddr_seg: raddr, rkey, a zero reserved word).
func PutRaddr(b []byte, raddr uint64, rkey uint32) error {
	if len(b) < RaddrSegSize {
		return ErrShort
	}
	StoreRaddr((*[16]byte)(b), raddr, rkey)
	return nil
}

// PutAtomic writes an atomic segment into b[:16] (struct
// mlx5_wqe_atomic_seg): swap_add is the swap value of a compare and swap
// or the addend of a fetch and add, compare the compare value (0 for a
// fetch and add).
func PutAtomic(b []byte, swapAdd, compare uint64) error {
	if len(b) < AtomicSegSize {
		return ErrShort
	}
	StoreAtomic((*[16]byte)(b), swapAdd, compare)
	return nil
}

// PutInline writes an inline segment (struct mlx5_wqe_inline_seg) into b:
// byte_count = the total length | InlineSeg, then the bytes of data one
// after the other, then zeros up to the next multiple of 16 bytes. It
// returns the bytes used (a multiple of 16). With no bytes at all it
// writes nothing and returns 0: libmlx5 leaves the segment out. BuildSend
// writes the same segment across the ring's end.
func PutInline(b []byte, data ...[]byte) (int, error) {
	n := 0
	for _, d := range data {
		n += len(d)
	}
	if n == 0 {
		return 0, nil
	}
	size := inlineSize(n)
	if len(b) < size {
		return 0, ErrShort
	}
	be.PutUint32(b[inlineOffByteCount:], uint32(n)|InlineSeg)
	off := inlineOffData
	for _, d := range data {
		off += copy(b[off:], d)
	}
	clear(b[off:size])
	return size, nil
}

// inlineSize is the size of an inline segment carrying n > 0 bytes.
func inlineSize(n int) int { return (InlineHdrSize + n + 15) &^ 15 }

// AV is the address vector of a UD work request (struct mlx5_wqe_av; the
// kernel's struct mlx5_av), without the key and destination QPN, which
// come with each work request.
type AV struct {
	StatRateSL uint8    // stat_rate_sl: static rate << 4 | SL (IB)
	FlMlid     uint8    // fl_mlid: force loopback bit, source path bits
	RLID       uint16   // rlid: destination LID (IB)
	RMAC       [6]byte  // rmac: destination MAC (RoCE)
	TClass     uint8    // tclass: GRH traffic class
	HopLimit   uint8    // hop_limit: GRH hop limit
	GRHGidFl   uint32   // grh_gid_fl: GRH present << 30 | SGID index << 20 | flow label
	RGID       [16]byte // rgid: destination GID
}

// AHAttr is an address handle on an InfiniBand port (the fields of
// struct ibv_ah_attr that libmlx5 copies into the address vector).
type AHAttr struct {
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8 // enum ibv_rate
	IsGlobal    bool  // with a GRH: the fields below
	DGID        [16]byte
	FlowLabel   uint32
	SGIDIndex   uint8
	HopLimit    uint8
	TClass      uint8
}

// mlx5Rate is the mlx5 static rate code of each enum ibv_rate value, as
// libmlx5 translates it; values past the table mean no limit (0).
var mlx5Rate = [...]uint8{
	0, 0, // IBV_RATE_MAX, (1: none)
	7, 8, 9, 10, 11, 12, 13, 14, 15, // 2.5, 10, 30, 5, 20, 40, 60, 80, 120 Gb/s
	11, 13, 15, 0, 9, 15, 0, 0, 9, 13, 0, 0, // 14, 56, 112, 168, 25, 100, 200, 300, 28, 50, 400, 600 Gb/s
}

// IBAV returns the address vector libmlx5 builds in ibv_create_ah for an
// address handle on an InfiniBand port: no kernel command is involved.
// (RoCE address vectors need the destination MAC from the kernel and are
// not built here.) A nil a gives the zero AV.
func IBAV(a *AHAttr) AV {
	var av AV
	if a == nil {
		return av
	}
	var rate uint8
	if int(a.StaticRate) < len(mlx5Rate) {
		rate = mlx5Rate[a.StaticRate]
	}
	av.StatRateSL = rate<<4 | a.SL&0xf
	av.FlMlid = a.SrcPathBits & 0x7f
	av.RLID = a.DLID
	if a.IsGlobal {
		av.TClass = a.TClass
		av.HopLimit = a.HopLimit
		av.GRHGidFl = 1<<30 | uint32(a.SGIDIndex)<<20 | a.FlowLabel&0xfffff
		av.RGID = a.DGID
	}
	return av
}

// UD is the destination of a UD work request (ibv_wr_set_ud_addr).
type UD struct {
	AV        AV     // the address handle's address vector
	RemoteQPN uint32 // destination QP number, 24 bits
	QKey      uint32 // Q_Key
}

// PutDatagram writes a datagram segment into b[:48] (struct
// mlx5_wqe_datagram_seg): the Q_Key, a zero reserved word, the
// destination QPN | ExtendedUDAV, then the address vector.
func PutDatagram(b []byte, u *UD) error {
	if u == nil {
		return ErrNil
	}
	if len(b) < DatagramSegSize {
		return ErrShort
	}
	img := u.AV.Image()
	StoreAV((*[DatagramSegSize]byte)(b), uint64(u.QKey)<<32, u.RemoteQPN&0xffffff|ExtendedUDAV, &img)
	return nil
}

// DC is the destination of a work request on a DCI
// (mlx5dv_wr_set_dc_addr): the address vector of the AH that reaches the
// DCT's port, the DCT's number and its access key.
type DC struct {
	AV   AV     // the AH's address vector
	DCTN uint32 // the DCT's number, 24 bits
	Key  uint64 // the DCT's access key (dc_access_key)
	// StreamID is the DCI stream channel the WQE belongs to
	// (mlx5dv_wr_set_dc_addr_stream), the ctrl segment's
	// dci_stream_channel_id; 0 is mlx5dv_wr_set_dc_addr's. BuildSend
	// writes it; PutDCAddr, the address vector alone, does not.
	StreamID uint16
}

// PutDCAddr writes a DCI's address vector segment into b[:48] as
// libmlx5's mlx5_send_wr_set_dc_addr does (struct mlx5_wqe_av, the
// datagram segment of UD): the DC access key, big-endian, in the 8 bytes
// where UD has its Q_Key, dqp_dct = the DCT number | ExtendedUDAV (the
// AV is always the 48-byte form; the number is not masked, as libmlx5
// does not mask it: BuildSend refuses one over 24 bits with ErrQPN), then
// the address vector.
func PutDCAddr(b []byte, d *DC) error {
	if d == nil {
		return ErrNil
	}
	if len(b) < DatagramSegSize {
		return ErrShort
	}
	img := d.AV.Image()
	StoreAV((*[DatagramSegSize]byte)(b), d.Key, d.DCTN|ExtendedUDAV, &img)
	return nil
}

// Send is one work request of a send queue (struct ibv_send_wr, or one
// ibv_wr_* builder call with its setters) and the state of its QP that the
// WQE depends on.
type Send struct {
	QPN    uint32    // the send queue's QP number, 24 bits
	Opcode uint8     // OpcodeSend, OpcodeSendImm, OpcodeSendInval, OpcodeRDMAWrite(Imm), OpcodeRDMARead, OpcodeAtomicCS, OpcodeAtomicFA
	Flags  SendFlags // SendFence, SendSignaled, SendSolicited; SendInline is not looked at
	// SmallFence: the previous WQE armed the small fence (Result.SmallFence;
	// libmlx5's fm_cache). Without SendFence this WQE then carries
	// CtrlSmallFence.
	SmallFence bool

	// Imm is the ctrl segment's imm word: the immediate data of
	// OpcodeSendImm and OpcodeRDMAWriteImm, or the rkey to invalidate of
	// OpcodeSendInval. It is written big-endian: pass the value whose
	// big-endian bytes go on the wire, as ibv_send_wr.imm_data holds them
	// after htobe32 (libmlx5 copies imm_data unchanged).
	Imm uint32

	// RemoteAddr and RKey: the remote address segment of RDMA and atomic
	// opcodes.
	RemoteAddr uint64
	RKey       uint32
	// SwapAdd and Compare: the atomic segment. OpcodeAtomicCS swaps in
	// SwapAdd if the remote value equals Compare; OpcodeAtomicFA adds
	// SwapAdd (Compare is written as 0).
	SwapAdd, Compare uint64

	// SGL is the gather list (the scatter list of a read or atomic).
	// Zero-length entries get no data segment, as in libmlx5; an atomic's
	// data segments have byte count 8, as ibv_post_send writes them. An
	// entry longer than MaxSGELength fails with ErrSGELength.
	SGL []SGE
	// Inline, when it holds any bytes, is copied into the WQE as one
	// inline segment instead of a gather list (ibv_wr_set_inline_data(_list),
	// or ibv_post_send with IBV_SEND_INLINE, which copies the SGEs' bytes:
	// pass those bytes here). The builder takes the bytes as slices, never
	// reads memory through SGE addresses. Inline and SGL are exclusive.
	Inline [][]byte

	// UD is the destination of a send on a UD QP, nil on RC.
	UD *UD
	// DC is the destination of a work request on a DCI, nil elsewhere:
	// its WQE carries the address vector segment after the ctrl segment,
	// and its stream id in the ctrl segment (every opcode BuildSend takes
	// is allowed on a DCI, as on RC).
	DC *DC

	// MaxSGE and MaxInline are the QP's send capabilities as the device
	// granted them (max_send_sge, max_inline_data): a longer SGL fails with
	// ErrTooManySGEs, more inline bytes with ErrInlineTooLong. Zero allows
	// none.
	MaxSGE    int
	MaxInline int
	// MaxMessage is the longest message the QP sends (the port's
	// max_msg_sz; on UD the MTU): a gather list or inline data adding up
	// to more, or a read of more, fails with ErrMsgTooLong. Zero is the
	// IB spec's MaxMessage. An atomic's message is its 8 bytes, whatever
	// its SGE says.
	MaxMessage uint32
}

// sendLayout is what a Send's WQE holds, worked out before writing.
type sendLayout struct {
	remote, atomic bool
	inline         int // inline bytes (0: none, or a gather list)
	ds             int
}

func (s *Send) layout() (l sendLayout, err error) {
	if s.QPN > 0xffffff {
		return l, ErrQPN
	}
	switch s.Opcode {
	case OpcodeSend, OpcodeSendImm:
	case OpcodeSendInval, OpcodeRDMAWrite, OpcodeRDMAWriteImm:
		l.remote = s.Opcode != OpcodeSendInval
	case OpcodeRDMARead:
		l.remote = true
	case OpcodeAtomicCS, OpcodeAtomicFA:
		l.remote, l.atomic = true, true
	default:
		return l, ErrOpcode
	}
	if len(s.SGL) > s.MaxSGE {
		return l, ErrTooManySGEs
	}
	for _, d := range s.Inline {
		l.inline += len(d)
	}
	l.ds = 1
	if s.UD != nil || s.DC != nil {
		// A UD or a DC destination: one of them, a QP or DCT number of 24
		// bits, and a UD QP only sends.
		switch {
		case s.UD != nil && s.DC != nil:
			return l, ErrDest
		case s.UD != nil && s.UD.RemoteQPN > 0xffffff, s.DC != nil && s.DC.DCTN > 0xffffff:
			return l, ErrQPN
		case s.UD != nil && s.Opcode != OpcodeSend && s.Opcode != OpcodeSendImm:
			return l, ErrOpcode
		}
		l.ds += DatagramSegSize / 16
	}
	if l.remote {
		l.ds++
	}
	if l.atomic {
		l.ds++
	}
	switch {
	case l.inline > 0:
		if len(s.SGL) > 0 || s.Opcode == OpcodeRDMARead || l.atomic {
			return l, ErrInline
		}
		if l.inline > s.MaxInline {
			return l, ErrInlineTooLong
		}
		if uint64(l.inline) > s.maxMessage() {
			return l, ErrMsgTooLong
		}
		l.ds += inlineSize(l.inline) / 16
	default:
		// The lengths' sum: past the maximum message, or 2^31 and more
		// (which an SGE no data segment holds makes), it is looked at
		// closer. An atomic's SGEs are written as 8 bytes.
		var total uint64
		for _, g := range s.SGL {
			if g.Length != 0 {
				l.ds++
			}
			total += uint64(g.Length)
		}
		if total >= min(s.maxMessage()+1, MaxMessage) && !l.atomic {
			if err := s.checkLengths(total); err != nil {
				return l, err
			}
		}
	}
	if l.ds > MaxDS {
		return l, ErrTooLarge
	}
	return l, nil
}

// checkLengths is the closer look at a gather list of total bytes:
// ErrSGELength for an SGE longer than MaxSGELength, ErrMsgTooLong for a
// total past the maximum message (a message of 2^31 bytes in SGEs that
// fit is fine where the maximum is 2^31).
func (s *Send) checkLengths(total uint64) error {
	for _, g := range s.SGL {
		if g.Length > MaxSGELength {
			return ErrSGELength
		}
	}
	if total > s.maxMessage() {
		return ErrMsgTooLong
	}
	return nil
}

// maxMessage is s.MaxMessage, or the IB spec's MaxMessage for 0.
func (s *Send) maxMessage() uint64 {
	m := uint64(s.MaxMessage)
	if m == 0 {
		m = MaxMessage
	}
	return m
}

// maxWQE is the largest WQE in bytes: MaxDS 16-byte units, rounded up to
// whole WQEBBs.
const maxWQE = (MaxDS*16 + WQEBB - 1) / WQEBB * WQEBB

// BuildSend writes the WQE of s into r at producer counter pi: the ctrl
// segment, the datagram segment (UD) or the DC address vector (DCI), the
// remote address segment (RDMA and atomics), the atomic segment, then the data segments or the inline
// segment. A WQE that crosses the ring's end continues at its start. Every
// byte of the WQEBBs it uses is written (the tail of the last one is
// zeroed). free is the number of WQEBBs from pi on that the caller may
// write (the ring size minus the WQEBBs posted and not yet completed); a
// WQE that needs more fails with ErrNoRoom and Result.WQEBBs set to what
// it needs. It checks s before writing, work request errors first, so on
// error r is unchanged. It does not ring the doorbell or advance any
// counter.
func BuildSend(r Ring, pi uint16, free int, s *Send) (Result, error) {
	if s == nil {
		return Result{}, ErrNil
	}
	l, err := s.layout()
	if err != nil {
		return Result{}, err
	}
	size := (l.ds*16 + WQEBB - 1) &^ (WQEBB - 1)
	if res, err := r.fit(size/WQEBB, free); err != nil {
		return res, err
	}
	var db uint64
	if at := int(pi) & (r.wqebbs() - 1) * WQEBB; at+size <= len(r) {
		db = s.encode(r[at:at+size:at+size], pi, &l)
	} else {
		db = s.encodeWrapped(r, at, size, pi, &l)
	}
	return Result{WQEBBs: size / WQEBB, DS: uint8(l.ds), Doorbell: db}, nil
}

// encodeWrapped encodes a WQE that crosses the ring's end: it builds it
// aside, then copies it in two pieces.
//
//go:noinline
func (s *Send) encodeWrapped(r Ring, at, size int, pi uint16, l *sendLayout) uint64 {
	var tmp [maxWQE]byte
	w := tmp[:size]
	db := s.encode(w, pi, l)
	copy(r, w[copy(r[at:], w):])
	return db
}

// encode writes the WQE of s, laid out as l, into w (its whole WQEBBs) and
// returns the doorbell word.
func (s *Send) encode(w []byte, pi uint16, l *sendLayout) uint64 {
	fm := CtrlFlags(s.Flags, s.SmallFence)
	var imm uint32
	if s.Opcode == OpcodeSendImm || s.Opcode == OpcodeRDMAWriteImm || s.Opcode == OpcodeSendInval {
		imm = s.Imm
	}
	var stream uint16
	if s.DC != nil {
		stream = s.DC.StreamID
	}
	db := StoreCtrl((*[16]byte)(w), CtrlHeadOf(0, s.Opcode, s.QPN), pi, uint8(l.ds), 0, stream, fm, imm)
	off := CtrlSegSize
	if s.UD != nil {
		_ = PutDatagram(w[off:], s.UD)
		off += DatagramSegSize
	} else if s.DC != nil {
		_ = PutDCAddr(w[off:], s.DC)
		off += DatagramSegSize
	}
	if l.remote {
		StoreRaddr((*[16]byte)(w[off:]), s.RemoteAddr, s.RKey)
		off += RaddrSegSize
	}
	if l.atomic {
		var cmp uint64
		if s.Opcode == OpcodeAtomicCS {
			cmp = s.Compare
		}
		StoreAtomic((*[16]byte)(w[off:]), s.SwapAdd, cmp)
		off += AtomicSegSize
	}
	if l.inline > 0 {
		be.PutUint32(w[off+inlineOffByteCount:], uint32(l.inline)|InlineSeg)
		off += inlineOffData
		for _, d := range s.Inline {
			off += copy(w[off:], d)
		}
		end := (off + 15) &^ 15
		clear(w[off:end])
		off = end
	} else {
		for _, g := range s.SGL {
			if g.Length == 0 {
				continue
			}
			if l.atomic {
				g.Length = atomicSize
			}
			StoreData((*[16]byte)(w[off:]), g)
			off += DataSegSize
		}
	}
	// Zero the rest of the last WQEBB: at most three 16-byte units.
	for ; off+16 <= len(w); off += 16 {
		*(*[16]byte)(w[off:]) = [16]byte{}
	}
	return db
}

// BuildNOP writes a NOP WQE into r at producer counter pi: a ctrl segment
// alone (ds 1), with the fence, CQ update and solicited bits of flags; the
// rest of the WQEBB is zeroed. free is as for BuildSend: with none free
// it fails with ErrNoRoom (Result.WQEBBs 1).
func BuildNOP(r Ring, pi uint16, free int, qpn uint32, flags SendFlags) (Result, error) {
	if qpn > 0xffffff {
		return Result{}, ErrQPN
	}
	if res, err := r.fit(1, free); err != nil {
		return res, err
	}
	fm := flags.fence(false)
	if flags&SendSignaled != 0 {
		fm |= CtrlCQUpdate
	}
	bb := r.slot(pi)
	_ = PutCtrl(bb, &Ctrl{Opcode: OpcodeNOP, WQEIndex: pi, QPN: qpn, DS: 1, FmCeSe: fm})
	clear(bb[CtrlSegSize:])
	return Result{WQEBBs: 1, DS: 1, Doorbell: be.Uint64(bb)}, nil
}

// LocalInv is a LOCAL_INV work request (ibv_wr_local_inv, or
// IBV_WR_LOCAL_INV with ibv_post_send): it invalidates the memory key
// RKey.
type LocalInv struct {
	QPN        uint32    // the send queue's QP number
	RKey       uint32    // the key to invalidate (the ctrl segment's imm)
	Flags      SendFlags // SendFence, SendSignaled, SendSolicited
	SmallFence bool      // the previous WQE armed the small fence
}

// Local invalidation as libmlx5 posts it: a UMR that frees the mkey and
// checks that it belongs to the QP.
const (
	localInvUMRFlags = UMRFlagInline | UMRFlagTranslationOffset | UMRFlagCheckQPN
	localInvMask     = MkeyMaskFree | MkeyMaskMkey | MkeyMaskQPN
	localInvDS       = (CtrlSegSize + UMRCtrlSegSize + MkcSegSize) / 16
)

// BuildLocalInv writes the WQE of l into r at producer counter pi. libmlx5
// posts a local invalidation as a UMR WQE (opcode OpcodeUMR, imm = the
// key, 2 WQEBBs): a UMR control segment with no translations and an mkey
// context with the free bit set and qpn 0xffffff. The next WQE must carry
// the small fence (Result.SmallFence). free is as for BuildSend.
func BuildLocalInv(r Ring, pi uint16, free int, l *LocalInv) (Result, error) {
	if l == nil {
		return Result{}, ErrNil
	}
	if l.QPN > 0xffffff {
		return Result{}, ErrQPN
	}
	bbs := localInvDS * 16 / WQEBB
	if res, err := r.fit(bbs, free); err != nil {
		return res, err
	}
	fm := l.Flags.fence(l.SmallFence)
	if l.Flags&SendSignaled != 0 {
		fm |= CtrlCQUpdate
	}
	bb := r.slot(pi)
	_ = PutCtrl(bb, &Ctrl{Opcode: OpcodeUMR, WQEIndex: pi, QPN: l.QPN, DS: localInvDS, FmCeSe: fm, Imm: l.RKey})
	_ = PutUMRCtrl(bb[CtrlSegSize:], &UMRCtrl{Flags: localInvUMRFlags, MkeyMask: localInvMask})
	_ = PutMkc(r.slot(pi+1), &Mkc{Free: true, QPN: 0xffffff})
	return Result{WQEBBs: bbs, DS: localInvDS, Doorbell: be.Uint64(bb), SmallFence: true}, nil
}

// CheckRecv checks a receive work request's scatter list as PutRecv
// does, writing nothing, for a queue whose WQEs take maxSGE data
// segments: a longer sgl fails with ErrTooManySGEs, an SGE longer than
// MaxSGELength with ErrSGELength. (A receive longer than any message is
// not an error: what a message does not fill stays as it was.)
func CheckRecv(sgl []SGE, maxSGE int) error {
	if len(sgl) > maxSGE {
		return ErrTooManySGEs
	}
	var or uint32
	for _, g := range sgl {
		or |= g.Length
	}
	if or&InlineSeg != 0 {
		return ErrSGELength
	}
	return nil
}

// PutRecv writes one receive WQE into wqe, whose length is the receive
// queue's stride (a multiple of 16): a data segment per SGE of non-zero
// length, then, when the WQE has room for more, a segment with byte count
// 0 and lkey InvalidLKey that ends the list, as libmlx5 writes it; the
// rest of the stride is zeroed. The queue takes stride/16 SGEs; a longer
// sgl fails with ErrTooManySGEs, an SGE longer than MaxSGELength with
// ErrSGELength, and wqe is left unchanged.
func PutRecv(wqe []byte, sgl []SGE) error {
	if len(wqe) == 0 || len(wqe)%DataSegSize != 0 {
		return ErrRecvStride
	}
	if err := CheckRecv(sgl, len(wqe)/DataSegSize); err != nil {
		return err
	}
	_ = WriteRecv(wqe, sgl)
	return nil
}

// WriteRecv is PutRecv in one pass, for a caller that has checked the
// stride (a positive multiple of 16 bytes) and the SGE count (at most
// len(wqe)/16) and would rather not read the SGEs twice on its hot path.
// It reports whether every SGE fit its data segment. When one did not (an
// SGE of 2^31 bytes or more, PutRecv's ErrSGELength), the WQE holds a
// segment the device would read as an inline one: the caller must not
// post it (it zeroes it and refuses the work request).
func WriteRecv(wqe []byte, sgl []SGE) bool {
	off := 0
	var or uint32
	for _, g := range sgl {
		or |= g.Length
		if g.Length != 0 {
			_ = PutData(wqe[off:], g)
			off += DataSegSize
		}
	}
	if off < len(wqe) {
		_ = PutData(wqe[off:], SGE{LKey: InvalidLKey})
		off += DataSegSize
	}
	clear(wqe[off:])
	return or&InlineSeg == 0
}
