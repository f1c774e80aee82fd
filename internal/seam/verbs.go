package seam

import "context"

// The verbs half of the seam: the context's own answers, and the objects
// ib_uverbs creates with the mlx5 provider's driver data (CQ, QP, SRQ,
// AH), with their events.
//
// The generic parameters mirror the kernel's uverbs ABI
// (<rdma/ib_user_verbs.h>, enum ib_qp_state, ib_qp_attr_mask, ...) as
// plain values. The driver data are the bytes of <rdma/mlx5-abi.h>'s
// structs (mlx5_ib_create_cq, mlx5_ib_create_qp, mlx5_ib_create_srq,
// mlx5_ib_modify_qp, mlx5_ib_create_ah_resp and the responses), exactly as
// the kernel's mlx5_ib reads and writes them: the device side parses them
// itself. Addresses in the driver data (queue buffers, doorbell records)
// point to memory outside the Go heap that the caller keeps mapped for the
// object's life, as ib_umem_get pins it.

// NoHandle stands for an absent object (a QP without an SRQ).
const NoHandle = ^Handle(0)

// DeviceAttr is what the device query answers of the generic attributes
// (struct ib_uverbs_ex_query_device_resp): the few mlx5 keeps. The rest of
// what mlx5 learns is the driver data (struct mlx5_ib_query_device_resp).
type DeviceAttr struct {
	AtomicCap    uint32 // enum ib_atomic_cap: 0 NONE, 1 HCA, 2 GLOB
	HCACoreClock uint64 // kHz
	NodeGUID     uint64 // host order, as sysfs and the RDMA CM name the device
	ODP          ODPCaps
	// CQModerationCount and CQModerationPeriod are cq_moderation_caps'
	// max_cq_moderation_count and max_cq_moderation_period (µs): 0 and 0
	// for a device without moderation (mlx5_ib without the cq_moderation
	// cap, rxe).
	CQModerationCount, CQModerationPeriod uint16
	// CapFlags is device_cap_flags_ex (enum ib_uverbs_device_cap_flags:
	// IB_UVERBS_DEVICE_XRC, _MEM_WINDOW, ...), what libibverbs' query
	// device reports as device_cap_flags.
	CapFlags uint64
}

// PortAttr is what a port query answers (struct ib_uverbs_query_port_resp).
type PortAttr struct {
	State        uint8 // enum ib_port_state: 4 is ACTIVE
	MaxMTU       uint8 // enum ib_mtu: 1 (256) to 5 (4096)
	ActiveMTU    uint8
	GIDTableLen  uint32
	PortCapFlags uint32
	MaxMsgSz     uint32 // the longest message (mlx5_ib: 1 << log_max_msg)
	LID, SMLID   uint16
	LMC          uint8
	LinkLayer    uint8 // IB_LINK_LAYER_INFINIBAND 1, IB_LINK_LAYER_ETHERNET 2
	Flags        uint8 // IB_UVERBS_QPF_GRH_REQUIRED
}

// GIDEntry is one entry of a port's GID table (struct ib_uverbs_gid_entry),
// with the MAC of its netdev on RoCE.
type GIDEntry struct {
	GID   [16]byte
	Index uint32
	Port  uint32
	Type  uint32 // enum ib_uverbs_gid_type: 0 IB, 1 RoCE v1, 2 RoCE v2
	MAC   [6]byte
}

// CQCreate is a CQ's generic parameters (UVERBS_METHOD_CQ_CREATE).
type CQCreate struct {
	CQE        uint32 // entries asked for; the driver data give the ring
	CompVector uint32
	Channel    CompChannel // completion events go here; nil for none
	UserHandle uint64      // names the CQ in completion and async events
	Flags      uint32      // enum ib_uverbs_ex_create_cq_flags
}

// QPCap are a QP's queue capabilities (struct ib_uverbs_qp_cap).
type QPCap struct {
	MaxSendWR, MaxRecvWR   uint32
	MaxSendSGE, MaxRecvSGE uint32
	MaxInlineData          uint32
}

// QP types (enum ib_uverbs_qp_type). QPTypeDriver is the provider's own:
// mlx5's DC QPs, which the driver data's flags make a DCT or a DCI.
const (
	QPTypeRC     = 2
	QPTypeUC     = 3
	QPTypeUD     = 4
	QPTypeDriver = 0xff
)

// QPCreate is a QP's generic parameters (UVERBS_METHOD_QP_CREATE).
type QPCreate struct {
	Type           uint8
	PD             Handle
	SendCQ, RecvCQ Handle // NoHandle for none (a DCT has no send CQ)
	SRQ            Handle // NoHandle for none
	Cap            QPCap
	SigAll         bool
	Flags          uint32 // enum ib_uverbs_qp_create_flags
	UserHandle     uint64
}

// QPCreated is what the kernel answers: the QP's number and the
// capabilities it granted.
type QPCreated struct {
	QPN uint32
	Cap QPCap
}

// GlobalRoute is a GRH's addressing (struct ib_uverbs_global_route).
type GlobalRoute struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector (struct ib_uverbs_ah_attr).
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    bool
	Port        uint8
}

// QP states (enum ib_qp_state).
const (
	QPStateReset = 0
	QPStateInit  = 1
	QPStateRTR   = 2
	QPStateRTS   = 3
	QPStateSQD   = 4
	QPStateSQE   = 5
	QPStateErr   = 6
)

// QPAttr are a QP's attributes (struct ib_uverbs_modify_qp and
// ib_uverbs_query_qp_resp); the mask (enum ib_qp_attr_mask) of a modify
// or query says which.
type QPAttr struct {
	State, CurState  uint8 // enum ib_qp_state
	PathMTU          uint8 // enum ib_mtu
	PathMigState     uint8
	QKey             uint32
	RQPSN, SQPSN     uint32
	DestQPN          uint32
	AccessFlags      uint32 // enum ib_access_flags
	Cap              QPCap  // query only
	AH, AltAH        AHAttr
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify bool
	SQDraining       bool // query only
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	Port             uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPort          uint8
	AltTimeout       uint8
	SQSigAll         bool // query only
	RateLimit        uint32
}

// SRQCreate is a shared receive queue's generic parameters
// (UVERBS_METHOD_SRQ_CREATE, a basic SRQ).
type SRQCreate struct {
	PD            Handle
	MaxWR, MaxSGE uint32
	Limit         uint32
	UserHandle    uint64
}

// SRQCreated is what the kernel answers.
type SRQCreated struct {
	SRQN          uint32
	MaxWR, MaxSGE uint32
}

// AsyncEvent is one event of the context's async event file (struct
// ib_uverbs_async_event_desc).
type AsyncEvent struct {
	Type uint32 // enum ib_event_type
	// Element is the user handle of the QP, CQ or SRQ the event is about,
	// or the port number of a port event.
	Element uint64
}

// CompChannel is a completion channel (ibv_comp_channel): it receives an
// event when a CQ armed for one gets a completion.
type CompChannel interface {
	// Next waits until an event arrives or ctx is done, and returns the
	// user handle of the CQ it is for.
	Next(ctx context.Context) (uint64, error)
	// Fd is the descriptor the kernel knows.
	Fd() int
	Close() error
}

// Verbs is the verbs half of a Device.
type Verbs interface {
	// DriverContext is the driver-data response of GET_CONTEXT the
	// context was opened with (struct mlx5_ib_alloc_ucontext_resp).
	DriverContext() []byte
	// QueryDevice is the extended query device (ibv_query_device_ex, as
	// libmlx5 asks it at open). drvOut receives struct
	// mlx5_ib_query_device_resp as the kernel fills it (its
	// response_length says how much); an empty drvOut asks for none.
	QueryDevice(drvOut []byte) (DeviceAttr, error)
	QueryPort(port uint8) (PortAttr, error)
	QueryGIDTable() ([]GIDEntry, error)

	// NextAsyncEvent waits for the next event of the context's async
	// event file, or until ctx is done.
	NextAsyncEvent(ctx context.Context) (AsyncEvent, error)
	NewCompChannel() (CompChannel, error)

	// CreateCQ creates a CQ and returns its handle and the entries the
	// kernel granted. drvIn is struct mlx5_ib_create_cq, drvOut struct
	// mlx5_ib_create_cq_resp.
	CreateCQ(c CQCreate, drvIn, drvOut []byte) (Handle, uint32, error)
	DestroyCQ(h Handle) error
	// ResizeCQ asks for a CQ of cqe entries and returns the entries
	// granted; drvIn is struct mlx5_ib_resize_cq, the new ring. Once it
	// returns, the device writes the CQ's CQEs to the new ring, after a
	// resize CQE in the old one.
	ResizeCQ(h Handle, cqe uint32, drvIn []byte) (uint32, error)
	// ModifyCQ sets the CQ's moderation: count completions or period
	// microseconds per event.
	ModifyCQ(h Handle, count, period uint16) error

	// CreateQP creates a QP. drvIn is struct mlx5_ib_create_qp, drvOut
	// struct mlx5_ib_create_qp_resp.
	CreateQP(q QPCreate, drvIn, drvOut []byte) (Handle, QPCreated, error)
	// ModifyQP moves a QP with the attributes mask selects; drvIn and
	// drvOut are struct mlx5_ib_modify_qp and its response (may be
	// empty).
	ModifyQP(h Handle, a *QPAttr, mask uint32, drvIn, drvOut []byte) error
	QueryQP(h Handle, mask uint32) (QPAttr, error)
	DestroyQP(h Handle) error

	// CreateSRQ creates a basic SRQ. drvIn is struct mlx5_ib_create_srq,
	// drvOut struct mlx5_ib_create_srq_resp.
	CreateSRQ(s SRQCreate, drvIn, drvOut []byte) (Handle, SRQCreated, error)
	// ModifySRQ arms the SRQ's limit event (IBV_SRQ_LIMIT).
	ModifySRQ(h Handle, limit uint32) error
	DestroySRQ(h Handle) error

	// CreateAH creates an address handle in the PD; drvOut is struct
	// mlx5_ib_create_ah_resp (the destination MAC on RoCE).
	CreateAH(pd Handle, a *AHAttr, userHandle uint64, drvOut []byte) (Handle, error)
	DestroyAH(h Handle) error
}
