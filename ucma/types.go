package ucma

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// ID is the kernel's handle of an rdma_cm_id on a File.
type ID uint32

// PortSpace is an id's port space (enum rdma_ucm_port_space): it picks
// the QP type and the service id its port maps to.
type PortSpace uint16

// Port spaces (the values are the kernel's: TestGoNamesAreTheKernels).
const (
	PortSpaceTCP   PortSpace = 0x0106 // RDMA_PS_TCP: RC connections
	PortSpaceUDP   PortSpace = 0x0111 // RDMA_PS_UDP: UD, through SIDR
	PortSpaceIB    PortSpace = 0x013F // RDMA_PS_IB: any QP type, given at create
	PortSpaceIPoIB PortSpace = 0x0002 // RDMA_PS_IPOIB: UD
)

func (ps PortSpace) String() string {
	switch ps {
	case PortSpaceTCP:
		return "TCP"
	case PortSpaceUDP:
		return "UDP"
	case PortSpaceIB:
		return "IB"
	case PortSpaceIPoIB:
		return "IPoIB"
	}
	return fmt.Sprintf("PortSpace(%#x)", uint16(ps))
}

// QPType is a QP type as enum ib_qp_type numbers it (the kernel reads
// rdma_ucm_create_id.qp_type only for PortSpaceIB).
type QPType uint8

// QP types.
const (
	QPTypeRC QPType = 2
	QPTypeUC QPType = 3
	QPTypeUD QPType = 4
)

// EventType is an event's type (enum rdma_cm_event_type).
type EventType uint32

// Event types (the values are the kernel's: TestGoNamesAreTheKernels).
const (
	EventAddrResolved    EventType = 0  // RDMA_CM_EVENT_ADDR_RESOLVED
	EventAddrError       EventType = 1  // RDMA_CM_EVENT_ADDR_ERROR
	EventRouteResolved   EventType = 2  // RDMA_CM_EVENT_ROUTE_RESOLVED
	EventRouteError      EventType = 3  // RDMA_CM_EVENT_ROUTE_ERROR
	EventConnectRequest  EventType = 4  // RDMA_CM_EVENT_CONNECT_REQUEST
	EventConnectResponse EventType = 5  // RDMA_CM_EVENT_CONNECT_RESPONSE
	EventConnectError    EventType = 6  // RDMA_CM_EVENT_CONNECT_ERROR
	EventUnreachable     EventType = 7  // RDMA_CM_EVENT_UNREACHABLE
	EventRejected        EventType = 8  // RDMA_CM_EVENT_REJECTED
	EventEstablished     EventType = 9  // RDMA_CM_EVENT_ESTABLISHED
	EventDisconnected    EventType = 10 // RDMA_CM_EVENT_DISCONNECTED
	EventDeviceRemoval   EventType = 11 // RDMA_CM_EVENT_DEVICE_REMOVAL
	EventMulticastJoin   EventType = 12 // RDMA_CM_EVENT_MULTICAST_JOIN
	EventMulticastError  EventType = 13 // RDMA_CM_EVENT_MULTICAST_ERROR
	EventAddrChange      EventType = 14 // RDMA_CM_EVENT_ADDR_CHANGE
	EventTimewaitExit    EventType = 15 // RDMA_CM_EVENT_TIMEWAIT_EXIT
)

var eventNames = [...]string{
	"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
	"CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED",
	"DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE",
	"TIMEWAIT_EXIT",
}

func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint32(t))
}

// Reject reasons (enum ib_cm_rej_reason): a REJECTED event's Status is
// the reason the peer gave (ucma's reject sends RejectConsumerDefined or
// RejectVendorOptionNotSupported) or its CM's own (RejectInvalidServiceID
// when nobody listens on the port, RejectTimeout when the peer gave up).
const (
	RejectTimeout                  = 4  // IB_CM_REJ_TIMEOUT
	RejectInvalidServiceID         = 8  // IB_CM_REJ_INVALID_SERVICE_ID
	RejectConsumerDefined          = 28 // IB_CM_REJ_CONSUMER_DEFINED
	RejectVendorOptionNotSupported = 35 // IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED
)

// SIDR statuses (enum ib_cm_sidr_status): an UNREACHABLE event's Status
// on a UD id whose connect was answered.
const (
	SIDRUnsupported = 1 // IB_SIDR_UNSUPPORTED: nobody listens on the port
	SIDRReject      = 2 // IB_SIDR_REJECT: the listener rejected
	SIDRNoQP        = 3 // IB_SIDR_NO_QP
)

// MaxPrivateData is the most private data a command takes: its buffer
// holds 256 bytes and its length is a byte. The IB CM message carries
// less (see package cm's limits); the kernel refuses more with EINVAL.
const MaxPrivateData = 255

// ECE is the enhanced connection establishment options a connect or
// accept offers and an event carries (struct rdma_ucm_ece).
type ECE struct {
	VendorID uint32
	AttrMod  uint32
}

// ConnParam is a connected QP's parameters (struct rdma_ucm_conn_param):
// what a connect or accept sends, and what a connect request, response or
// reject reports of the peer's.
type ConnParam struct {
	QPN  uint32
	QKey uint32 // AF_IB only; the kernel ignores it for IP addresses
	// PrivateData is the consumer's data. An event gives the whole size
	// the IB CM message carries (the sender's bytes then zeros).
	PrivateData        []byte
	SRQ                bool
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
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

// UDParam is a UD peer's parameters (struct rdma_ucm_ud_param): its QP
// number and Q_Key, the address vector that reaches it, and the private
// data.
type UDParam struct {
	QPN         uint32
	QKey        uint32
	AH          AHAttr
	PrivateData []byte
}

// Event is one event of a File (struct rdma_ucm_event_resp).
type Event struct {
	// UID is the uid the id was created (or accepted) with; a connect
	// request carries its listener's.
	UID uint64
	// ID is the id the event is about; for a connect request, the new id
	// the kernel made for the connection.
	ID   ID
	Type EventType
	// Status is the kernel's int: a negative errno (-ETIMEDOUT, -ENODEV),
	// a REJECTED event's reject reason, an UNREACHABLE UD connect's SIDR
	// status, or 0.
	Status int32
	// Conn is the parameters of an id of a connected port space (TCP,
	// or IB with a connected QP), UD those of a UD id: the kernel fills
	// the one of the id's QP type, the caller reads that one.
	Conn ConnParam
	UD   UDParam
	ECE  ECE
}

// Errno returns the errno of a negative Status, or 0.
func (e *Event) Errno() unix.Errno {
	if e.Status < 0 {
		return unix.Errno(-e.Status)
	}
	return 0
}

// AddrInfo is what QUERY_ADDR answers (struct rdma_ucm_query_addr_resp):
// the id's addresses and, once it has one, its device and port.
type AddrInfo struct {
	Src, Dst netip.AddrPort
	// NodeGUID is the device's node GUID, as uverbs and sysfs number it
	// (0 while the id has no device).
	NodeGUID   uint64
	Port       uint8
	PKey       uint16
	IBDevIndex uint32
}

// PathRec is a route's path (struct ib_user_path_rec), multi-byte fields
// in host order.
type PathRec struct {
	DGID, SGID             [16]byte
	DLID, SLID             uint16
	RawTraffic             uint32
	FlowLabel              uint32
	Reversible             uint32
	MTU                    uint32
	PKey                   uint16
	HopLimit               uint8
	TrafficClass           uint8
	NumbPath               uint8
	SL                     uint8
	MTUSelector            uint8
	RateSelector           uint8
	Rate                   uint8
	PacketLifeTimeSelector uint8
	PacketLifeTime         uint8
	Preference             uint8
}

// Route is what QUERY_ROUTE answers (struct rdma_ucm_query_route_resp).
type Route struct {
	Src, Dst   netip.AddrPort
	NodeGUID   uint64
	Port       uint8
	IBDevIndex uint32
	// Paths are the primary and alternate paths (len is num_paths, at
	// most 2); with none the kernel still fills Paths[0]'s GIDs and
	// P_Key, which Path0 holds.
	Paths []PathRec
	Path0 PathRec
}

// PathRecord is one path of QUERY_PATH (struct ib_path_rec_data): the
// record packed as the subnet administrator sends it (64 bytes,
// big-endian) with its IB_PATH_* flags.
type PathRecord struct {
	Flags  uint32
	Packed [64]byte
}

// QPState is a QP state (enum ib_qp_state).
type QPState uint8

// QP states.
const (
	QPStateReset QPState = iota
	QPStateInit
	QPStateRTR
	QPStateRTS
	QPStateSQD
	QPStateSQE
	QPStateErr
)

// QPAttr is INIT_QP_ATTR's answer (struct ib_uverbs_qp_attr): the
// attributes Mask names (enum ib_qp_attr_mask) move a QP to State as the
// CM wants it.
type QPAttr struct {
	Mask             uint32
	State, CurState  QPState
	PathMTU          uint8
	PathMigState     uint8
	QKey             uint32
	RQPSN, SQPSN     uint32
	DestQPN          uint32
	AccessFlags      uint32
	AH, AltAH        AHAttr
	MaxSendWR        uint32
	MaxRecvWR        uint32
	MaxSendSGE       uint32
	MaxRecvSGE       uint32
	MaxInlineData    uint32
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify bool
	SQDraining       bool
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	Port             uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPort          uint8
	AltTimeout       uint8
}

// CallError is a failed command. It unwraps to the errno.
type CallError struct {
	Op    string // "connect id 5"
	Errno unix.Errno
}

func (e *CallError) Error() string { return fmt.Sprintf("ucma: %s: %v", e.Op, e.Errno) }
func (e *CallError) Unwrap() error { return e.Errno }
