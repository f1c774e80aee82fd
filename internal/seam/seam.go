// Package seam is the one interface between package mlx5 and what lies
// beneath it: the kernel with a ConnectX, or the software device model.
// Everything that crosses it is bytes (PRM mailboxes, mlx5 driver data) or
// a handle; see docs/ARCHITECTURE.md.
//
// The data path does not cross it: queues, doorbell records and UAR pages
// are shared memory that both sides see.
package seam

import "context"

// Handle is a kernel object handle (a uverbs IDR handle): DEVX objects,
// UMEMs, UARs, and verbs objects (QP, CQ, SRQ) that DEVX query and modify
// accept.
type Handle uint32

// UAR is a UAR page allocated for the context.
type UAR struct {
	Handle Handle
	// PageID is the UAR page index the firmware knows (uar_page in PRM).
	PageID uint32
	// MMapOffset and MMapLength locate the page for mmap on the device.
	MMapOffset uint64
	MMapLength uint32
}

// MR is a registered memory region: the keys WQEs name it by.
type MR struct {
	Handle     Handle
	LKey, RKey uint32
}

// AsyncCmdFD receives the completions of asynchronous DEVX commands.
type AsyncCmdFD interface {
	// Next waits for one completion and copies it into buf: an 8-byte
	// wr_id then the output mailbox (struct
	// mlx5_ib_uapi_devx_async_cmd_hdr). It returns the bytes written.
	Next(ctx context.Context, buf []byte) (int, error)
	// Fd is the descriptor the kernel knows (for the query's FD attribute).
	Fd() int
	Close() error
}

// EventChannel receives the device events a context subscribed to (a
// DEVX event channel, mlx5dv_devx_event_channel). Each event is read
// whole: an 8-byte cookie (native endian, as given to Subscribe) followed,
// unless the channel was made with OMIT_EV_DATA, by the 64-byte EQE the
// device raised (struct mlx5_ib_uapi_devx_async_event_hdr, then struct
// mlx5_eqe).
type EventChannel interface {
	// Next waits until an event arrives or ctx is done and copies it into
	// buf, which must hold one event (8 bytes with OMIT_EV_DATA, 8+64
	// without); it returns the bytes written.
	Next(ctx context.Context, buf []byte) (int, error)
	// Fd is the descriptor the kernel knows (for the subscribe call).
	Fd() int
	Close() error
}

// EventHeaderSize and EQESize are the parts of one event read from an
// EventChannel.
const (
	EventHeaderSize = 8
	EQESize         = 64
)

// Device is an mlx5 device context. Kernel failures are errors wrapping
// the errno; firmware failures come back in the output mailbox's status
// and syndrome, which the caller decodes.
type Device interface {
	// DEVX reports whether the context has a DEVX uid (GET_CONTEXT with
	// MLX5_IB_ALLOC_UCTX_DEVX succeeded). Without one the kernel refuses
	// the DEVX methods below; the verbs half and UARAlloc still work.
	DEVX() bool
	// GeneralCmd runs a firmware command that creates no object
	// (mlx5dv_devx_general_cmd).
	GeneralCmd(in, out []byte) error
	// ObjCreate runs a create command and returns the handle of the
	// kernel object that owns the firmware object.
	ObjCreate(in, out []byte) (Handle, error)
	ObjQuery(h Handle, in, out []byte) error
	ObjModify(h Handle, in, out []byte) error
	// ObjDestroy has the kernel run the destroy command it recorded at
	// creation.
	ObjDestroy(h Handle) error
	// ObjQueryAsync starts a query whose output, tagged with wrID, arrives
	// on fd.
	ObjQueryAsync(h Handle, in []byte, outLen int, wrID uint64, fd AsyncCmdFD) error
	NewAsyncCmdFD() (AsyncCmdFD, error)

	// NewEventChannel creates a DEVX event channel
	// (mlx5dv_devx_create_event_channel): with omitData its events carry
	// only the cookie (MLX5DV_DEVX_CREATE_EVENT_CHANNEL_FLAGS_OMIT_EV_DATA),
	// and the kernel keeps at most one unread event per subscription.
	NewEventChannel(omitData bool) (EventChannel, error)
	// Subscribe subscribes ch to the events of the given types
	// (MLX5_EVENT_TYPE_*) on the DEVX object h; each arrives tagged with
	// cookie (mlx5dv_devx_subscribe_devx_event). The subscription ends
	// when the object is destroyed or the channel closed.
	Subscribe(ch EventChannel, h Handle, types []uint16, cookie uint64) error
	// SubscribeFD has the event of type typ on h signal the eventfd fd
	// instead of queueing on ch (mlx5dv_devx_subscribe_devx_event_fd).
	// The kernel takes its own reference to the eventfd; the
	// subscription ends as Subscribe's does.
	SubscribeFD(ch EventChannel, h Handle, typ uint16, fd int) error

	// UMemReg registers mem for DEVX objects (mlx5dv_devx_umem_reg) and
	// returns its handle and the umem id commands refer to. The caller
	// keeps mem mapped (and pinned, if it is Go memory) until UMemDereg
	// succeeds; the device may use it in place until then.
	UMemReg(mem []byte, access uint32) (Handle, uint32, error)
	UMemDereg(h Handle) error
	// UARAlloc allocates a UAR page of the given type (0 BlueFlame, 1
	// non-cached).
	UARAlloc(typ uint32) (UAR, error)
	UARFree(h Handle) error
	// MapUAR maps the UAR page for doorbell and BlueFlame writes;
	// UnmapUAR releases the mapping.
	MapUAR(u UAR) ([]byte, error)
	UnmapUAR(page []byte) error
	// QueryEQN returns the EQ number of a completion vector.
	QueryEQN(vector uint32) (uint32, error)

	// AllocPD allocates a verbs protection domain (ibv_alloc_pd) and
	// returns its handle and the pdn PRM commands and WQEs refer to.
	AllocPD() (Handle, uint32, error)
	DeallocPD(h Handle) error
	// RegMR registers mem in the protection domain pd (ibv_reg_mr, with
	// the iova equal to mem's address). access is enum
	// ib_uverbs_access_flags. As for UMemReg, the caller keeps mem until
	// DeregMR succeeds.
	RegMR(pd Handle, mem []byte, access uint32) (MR, error)
	DeregMR(h Handle) error

	// Verbs is the context's own answers and the verbs objects (CQ, QP,
	// SRQ, AH) created with mlx5's driver data, with their events.
	Verbs

	Close() error
}

// ClockInfoSize is the size of struct mlx5_ib_clock_info, the start of
// the clock-info page.
const ClockInfoSize = 56

// ClockMapper is a Device that maps the clock-info page its driver keeps
// (mmap of MLX5_IB_MMAP_CLOCK_INFO, version MLX5_IB_CLOCK_INFO_V1): a
// struct mlx5_ib_clock_info that the driver rewrites under its sign word
// as the device clock runs. A Device without the page does not implement
// it.
type ClockMapper interface {
	// MapClockInfo maps the page read-only; UnmapClockInfo releases the
	// mapping, also after the Device is closed.
	MapClockInfo() ([]byte, error)
	UnmapClockInfo(page []byte) error
}
