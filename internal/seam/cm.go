package seam

import (
	"context"
	"net/netip"
)

// The connection manager's half of the seam: what package cm needs of
// the kernel's RDMA CM (rdma_ucm, one open /dev/infiniband/rdma_cm with
// its ids), and what the software device model offers in its place. The
// calls are the ucma commands of <rdma/rdma_user_cm.h> one for one, with
// the kernel's semantics (drivers/infiniband/core/ucma.c and cma.c): the
// same states, events, private data sizes and errnos. Addresses are IP
// addresses with a port (an IPv6 zone is the scope id, a number or an
// interface name); the enums are the kernel's numbers (port spaces enum
// rdma_ucm_port_space, events enum rdma_cm_event_type, QP states and
// attribute masks as in QPAttr).

// CMConnParam is a connected QP's parameters (struct rdma_ucm_conn_param).
type CMConnParam struct {
	QPN                uint32
	QKey               uint32
	PrivateData        []byte
	SRQ                bool
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
}

// CMUDParam is a UD peer's parameters (struct rdma_ucm_ud_param).
type CMUDParam struct {
	QPN         uint32
	QKey        uint32
	AH          AHAttr
	PrivateData []byte
}

// CMEvent is one event of a CM (struct rdma_ucm_event_resp). Conn holds
// the parameters of a connected id, UD those of a UD id.
type CMEvent struct {
	UID    uint64
	ID     uint32
	Type   uint32 // enum rdma_cm_event_type
	Status int32  // a negative errno, a reject reason or SIDR status, or 0
	Conn   CMConnParam
	UD     CMUDParam
}

// CMAddr is what the address query answers (struct
// rdma_ucm_query_addr_resp): the id's addresses, and once it has a
// device, the device's node GUID (host order, as uverbs numbers it) and
// port.
type CMAddr struct {
	Src, Dst netip.AddrPort
	NodeGUID uint64
	Port     uint8
}

// CM is one event channel of the RDMA connection manager and the ids
// made on it. Errors wrap the kernel's errno.
type CM interface {
	// CreateID creates an id in port space ps (RDMA_PS_TCP, RDMA_PS_UDP,
	// ...) whose events carry uid.
	CreateID(uid uint64, ps uint16, qpType uint8) (uint32, error)
	// DestroyID destroys an id, disconnecting or rejecting what it holds
	// and dropping its events not yet taken.
	DestroyID(id uint32) error
	Bind(id uint32, addr netip.AddrPort) error
	// ResolveAddr and ResolveRoute start resolutions that end in an
	// event (ADDR_RESOLVED or ADDR_ERROR, ROUTE_RESOLVED or ROUTE_ERROR)
	// within timeoutMs. An invalid src binds the unspecified address.
	ResolveAddr(id uint32, src, dst netip.AddrPort, timeoutMs uint32) error
	ResolveRoute(id uint32, timeoutMs uint32) error
	QueryAddr(id uint32) (CMAddr, error)
	Listen(id uint32, backlog int) error
	Connect(id uint32, p *CMConnParam) error
	// Accept answers a connect request with p, after which the id's
	// events carry uid; with p nil it is the active side's RTU after
	// CONNECT_RESPONSE.
	Accept(id uint32, uid uint64, p *CMConnParam) error
	Reject(id uint32, reason uint8, privateData []byte) error
	Disconnect(id uint32) error
	// InitQPAttr answers the attributes, and the mask of them (enum
	// ib_qp_attr_mask), that move the id's QP to state.
	InitQPAttr(id uint32, state uint8) (QPAttr, uint32, error)
	// SetOption sets an option (level RDMA_OPTION_ID: TOS, REUSEADDR,
	// AFONLY, ACK_TIMEOUT) from its bytes.
	SetOption(id uint32, level, name uint32, value []byte) error
	// NextEvent waits for the next event until ctx is done.
	NextEvent(ctx context.Context) (CMEvent, error)
	// Close destroys every id and ends a NextEvent in progress.
	Close() error
}
