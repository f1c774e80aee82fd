package mlx5

import (
	"unsafe"

	"github.com/mlx5go/mlx5go/wqe"
)

// The types a user of mlx5 writes work requests with. mlx5 owns them, so
// that a program imports mlx5 (and sig for signature attributes) and
// nothing else. They have the layouts of the encoders' types in package
// wqe, so a list of them goes to the encoder as it is, without a copy
// (TestUserTypesAreTheEncoders pins that).

// SGE is a scatter/gather entry (struct ibv_sge): Length bytes at Addr of
// the memory region or mkey with key LKey. Through an mkey with a
// signature block, Addr and Length count bytes of the wire domain, in a
// send's SGL and a receive's alike (SendWR.SGL). Length is less than
// 2^31: a data segment's byte count has 31 bits (bit 31 marks an inline
// segment), and a post with a longer SGE fails with ErrInvalid. A
// length of 0 is an empty entry, which takes no data segment.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendFlags are a send work request's flags (enum ibv_send_flags).
type SendFlags uint32

// Send flags.
const (
	// SendFence: the work request waits until the RDMA READs and atomics
	// before it completed (IBV_SEND_FENCE).
	SendFence SendFlags = 1 << 0
	// SendSignaled: the work request makes a completion when it succeeds
	// (IBV_SEND_SIGNALED); it always makes one when it fails.
	SendSignaled SendFlags = 1 << 1
	// SendSolicited: the responder's completion raises a solicited event
	// (IBV_SEND_SOLICITED).
	SendSolicited SendFlags = 1 << 2
	// SendInline (IBV_SEND_INLINE) is implied by mkey configures; a
	// send's inline data is SendWR.Inline.
	SendInline SendFlags = 1 << 3
)

// KLM is one piece of an mkey's list layout (mlx5dv_wr_set_mkey_layout_list's
// struct ibv_sge): ByteCount bytes at Addr of memory key Mkey. A KLM maps
// at most 2^31 bytes (mlx5dv.h's "up to 2GB"); a longer one fails the
// configure with ErrInvalid.
type KLM struct {
	Addr      uint64
	ByteCount uint32
	Mkey      uint32
}

// RepeatEntry is one entry of an mkey's interleaved layout (struct
// mlx5dv_mr_interleaved): ByteCount bytes at Addr of memory key Mkey, then
// Skip bytes skipped, repeated.
type RepeatEntry struct {
	Addr      uint64
	ByteCount uint32
	Skip      uint32
	Mkey      uint32
}

// The encoders' views of the user's lists: the same memory.
func wqeSGL(s []SGE) []wqe.SGE {
	return unsafe.Slice((*wqe.SGE)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

func wqeKLMs(s []KLM) []wqe.KLM {
	return unsafe.Slice((*wqe.KLM)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

func wqeRepeat(s []RepeatEntry) []wqe.RepeatEntry {
	return unsafe.Slice((*wqe.RepeatEntry)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// AccessFlags are access rights (enum ibv_access_flags): of a memory
// region, of an mkey, of a QP's responder.
type AccessFlags uint32

// Access rights.
const (
	AccessLocalWrite   AccessFlags = 1 << 0 // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  AccessFlags = 1 << 1 // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   AccessFlags = 1 << 2 // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic AccessFlags = 1 << 3 // IBV_ACCESS_REMOTE_ATOMIC
	// AccessRelaxedOrdering lets the device write the region out of order
	// (IBV_ACCESS_RELAXED_ORDERING); memory regions only.
	AccessRelaxedOrdering AccessFlags = 1 << 20
)

const remoteAccess = AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic

// mkeyAccess is the part of a an mkey configure can set.
func (a AccessFlags) mkeyAccess() (wqe.Access, bool) {
	if a&^(AccessLocalWrite|remoteAccess) != 0 {
		return 0, false
	}
	return wqe.Access(a), true
}
