// Package ucmaabi mirrors the kernel's RDMA connection manager ABI, the
// commands written to /dev/infiniband/rdma_cm: <rdma/rdma_user_cm.h> with
// the structs it takes from <rdma/ib_user_verbs.h> and <rdma/ib_user_sa.h>,
// and the kernel-internal enums its events carry (enum rdma_cm_event_type
// of <rdma/rdma_cm.h>, enum ib_cm_rej_reason and enum ib_cm_sidr_status of
// <rdma/ib_cm.h>, the IB CM's private data sizes). Names are the kernel's,
// one Go struct per C struct with fields in C order; the kernel lab checks
// every value and layout against rdma_ucm's, rdma_cm's and ib_cm's BTF, or
// lists it as absent there with the header it comes from
// (btf_lab_test.go).
//
// It holds facts, no logic: package ucma uses it, and so may the software
// device model. It is internal, so that ucma's users see Go names only.
package ucmaabi

// RDMA_USER_CM_ABI_VERSION is the ABI the structs below describe; the
// kernel publishes it in /sys/class/misc/rdma_cm/abi_version.
const RDMA_USER_CM_ABI_VERSION = 4

// RDMA_MAX_PRIVATE_DATA is the size of every private data buffer of the
// ABI (the IB CM carries less: see the IB_CM_*_PRIVATE_DATA_SIZE limits).
const RDMA_MAX_PRIVATE_DATA = 256

// Commands (the anonymous enum of <rdma/rdma_user_cm.h>), in
// rdma_ucm_cmd_hdr.cmd.
const (
	RDMA_USER_CM_CMD_CREATE_ID     = 0
	RDMA_USER_CM_CMD_DESTROY_ID    = 1
	RDMA_USER_CM_CMD_BIND_IP       = 2
	RDMA_USER_CM_CMD_RESOLVE_IP    = 3
	RDMA_USER_CM_CMD_RESOLVE_ROUTE = 4
	RDMA_USER_CM_CMD_QUERY_ROUTE   = 5
	RDMA_USER_CM_CMD_CONNECT       = 6
	RDMA_USER_CM_CMD_LISTEN        = 7
	RDMA_USER_CM_CMD_ACCEPT        = 8
	RDMA_USER_CM_CMD_REJECT        = 9
	RDMA_USER_CM_CMD_DISCONNECT    = 10
	RDMA_USER_CM_CMD_INIT_QP_ATTR  = 11
	RDMA_USER_CM_CMD_GET_EVENT     = 12
	RDMA_USER_CM_CMD_GET_OPTION    = 13
	RDMA_USER_CM_CMD_SET_OPTION    = 14
	RDMA_USER_CM_CMD_NOTIFY        = 15
	RDMA_USER_CM_CMD_JOIN_IP_MCAST = 16
	RDMA_USER_CM_CMD_LEAVE_MCAST   = 17
	RDMA_USER_CM_CMD_MIGRATE_ID    = 18
	RDMA_USER_CM_CMD_QUERY         = 19
	RDMA_USER_CM_CMD_BIND          = 20
	RDMA_USER_CM_CMD_RESOLVE_ADDR  = 21
	RDMA_USER_CM_CMD_JOIN_MCAST    = 22
)

// enum rdma_ucm_port_space (IBTA Annex A11, service id bytes 4 and 5).
const (
	RDMA_PS_IPOIB = 0x0002
	RDMA_PS_IB    = 0x013F
	RDMA_PS_TCP   = 0x0106
	RDMA_PS_UDP   = 0x0111
)

// Query options (the anonymous enum of <rdma/rdma_user_cm.h>), in
// rdma_ucm_query.option.
const (
	RDMA_USER_CM_QUERY_ADDR = 0
	RDMA_USER_CM_QUERY_PATH = 1
	RDMA_USER_CM_QUERY_GID  = 2
)

// Option levels and names (anonymous enums), in rdma_ucm_set_option.
const (
	RDMA_OPTION_ID = 0
	RDMA_OPTION_IB = 1

	RDMA_OPTION_ID_TOS         = 0
	RDMA_OPTION_ID_REUSEADDR   = 1
	RDMA_OPTION_ID_AFONLY      = 2
	RDMA_OPTION_ID_ACK_TIMEOUT = 3

	RDMA_OPTION_IB_PATH = 1
)

// enum rdma_cm_event_type (<rdma/rdma_cm.h>, kernel-internal; librdmacm's
// <rdma/rdma_cma.h> has the same values): rdma_ucm_event_resp.event.
const (
	RDMA_CM_EVENT_ADDR_RESOLVED    = 0
	RDMA_CM_EVENT_ADDR_ERROR       = 1
	RDMA_CM_EVENT_ROUTE_RESOLVED   = 2
	RDMA_CM_EVENT_ROUTE_ERROR      = 3
	RDMA_CM_EVENT_CONNECT_REQUEST  = 4
	RDMA_CM_EVENT_CONNECT_RESPONSE = 5
	RDMA_CM_EVENT_CONNECT_ERROR    = 6
	RDMA_CM_EVENT_UNREACHABLE      = 7
	RDMA_CM_EVENT_REJECTED         = 8
	RDMA_CM_EVENT_ESTABLISHED      = 9
	RDMA_CM_EVENT_DISCONNECTED     = 10
	RDMA_CM_EVENT_DEVICE_REMOVAL   = 11
	RDMA_CM_EVENT_MULTICAST_JOIN   = 12
	RDMA_CM_EVENT_MULTICAST_ERROR  = 13
	RDMA_CM_EVENT_ADDR_CHANGE      = 14
	RDMA_CM_EVENT_TIMEWAIT_EXIT    = 15
)

// enum ib_cm_rej_reason (<rdma/ib_cm.h>, kernel-internal): the status of
// a REJECTED event. ucma's reject accepts only CONSUMER_DEFINED (and 0,
// which it turns into CONSUMER_DEFINED) and VENDOR_OPTION_NOT_SUPPORTED.
const (
	IB_CM_REJ_NO_QP                       = 1
	IB_CM_REJ_NO_RESOURCES                = 3
	IB_CM_REJ_TIMEOUT                     = 4
	IB_CM_REJ_UNSUPPORTED                 = 5
	IB_CM_REJ_INVALID_SERVICE_ID          = 8
	IB_CM_REJ_STALE_CONN                  = 10
	IB_CM_REJ_INVALID_MTU                 = 26
	IB_CM_REJ_INSUFFICIENT_RESP_RESOURCES = 27
	IB_CM_REJ_CONSUMER_DEFINED            = 28
	IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED = 35
)

// enum ib_cm_sidr_status (<rdma/ib_cm.h>): the status of an UNREACHABLE
// event that answers a UD (SIDR) connect.
const (
	IB_SIDR_SUCCESS             = 0
	IB_SIDR_UNSUPPORTED         = 1
	IB_SIDR_REJECT              = 2
	IB_SIDR_NO_QP               = 3
	IB_SIDR_REDIRECT            = 4
	IB_SIDR_UNSUPPORTED_VERSION = 5
)

// The private data each IB CM message carries (the anonymous enum of
// <rdma/ib_cm.h>). The RDMA CM puts its 36-byte header (struct cma_hdr,
// drivers/infiniband/core/cma.c) at the start of a REQ's and a SIDR REQ's
// for the IP port spaces, so their users get 36 bytes less; the receiver
// is always given the whole size, the sender's bytes followed by zeros.
const (
	IB_CM_REQ_PRIVATE_DATA_SIZE      = 92
	IB_CM_MRA_PRIVATE_DATA_SIZE      = 222
	IB_CM_REJ_PRIVATE_DATA_SIZE      = 148
	IB_CM_REP_PRIVATE_DATA_SIZE      = 196
	IB_CM_RTU_PRIVATE_DATA_SIZE      = 224
	IB_CM_DREQ_PRIVATE_DATA_SIZE     = 220
	IB_CM_DREP_PRIVATE_DATA_SIZE     = 224
	IB_CM_REJ_ARI_LENGTH             = 72
	IB_CM_LAP_PRIVATE_DATA_SIZE      = 168
	IB_CM_APR_PRIVATE_DATA_SIZE      = 148
	IB_CM_APR_INFO_LENGTH            = 72
	IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE = 216
	IB_CM_SIDR_REP_PRIVATE_DATA_SIZE = 136
	IB_CM_SIDR_REP_INFO_LENGTH       = 72
)

// CMA_HDR_SIZE is sizeof(struct cma_hdr) (cma.c, not a uapi struct and
// not in BTF): cma_version, ip_version, port, and two 16-byte addresses.
const CMA_HDR_SIZE = 36

// RDMA_UDP_QKEY is the Q_Key of the RDMA CM's UDP port space
// (<rdma/rdma_cm_ib.h>; a #define, not in BTF).
const RDMA_UDP_QKEY = 0x01234567

// Address families of <linux/socket.h> the CM takes.
const (
	AF_INET  = 2
	AF_INET6 = 10
	AF_IB    = 27
)

// Sizes of the socket address structs: struct sockaddr_in,
// sockaddr_in6 (<linux/in.h>, <linux/in6.h>) and
// __kernel_sockaddr_storage (<linux/socket.h>).
const (
	SizeofSockaddrIn      = 16
	SizeofSockaddrIn6     = 28
	SizeofSockaddrStorage = 128
)

// RdmaUcmCmdHdr is struct rdma_ucm_cmd_hdr: in and out are the byte
// lengths of the command after the header and of its response.
type RdmaUcmCmdHdr struct {
	Cmd uint32
	In  uint16
	Out uint16
}

// SockaddrIn6 is struct sockaddr_in6 (port and flowinfo big-endian).
type SockaddrIn6 struct {
	Family   uint16
	Port     [2]byte
	Flowinfo [4]byte
	Addr     [16]byte
	ScopeID  uint32
}

// SockaddrStorage is struct __kernel_sockaddr_storage: 128 bytes,
// pointer-aligned.
type SockaddrStorage struct {
	_      [0]uint64 // first: a zero-size last field would be padded
	Family uint16
	Data   [126]byte
}

// RdmaUcmCreateId is struct rdma_ucm_create_id.
type RdmaUcmCreateId struct {
	Uid      uint64
	Response uint64
	Ps       uint16
	QpType   uint8
	Reserved [5]uint8
}

// RdmaUcmCreateIdResp is struct rdma_ucm_create_id_resp.
type RdmaUcmCreateIdResp struct {
	Id uint32
}

// RdmaUcmDestroyId is struct rdma_ucm_destroy_id.
type RdmaUcmDestroyId struct {
	Response uint64
	Id       uint32
	Reserved uint32
}

// RdmaUcmDestroyIdResp is struct rdma_ucm_destroy_id_resp.
type RdmaUcmDestroyIdResp struct {
	EventsReported uint32
}

// RdmaUcmBindIp is struct rdma_ucm_bind_ip (the AF_INET/AF_INET6 bind of
// kernels without AF_IB; RDMA_USER_CM_CMD_BIND replaces it).
type RdmaUcmBindIp struct {
	Response uint64
	Addr     SockaddrIn6
	Id       uint32
}

// RdmaUcmBind is struct rdma_ucm_bind.
type RdmaUcmBind struct {
	Id       uint32
	AddrSize uint16
	Reserved uint16
	Addr     SockaddrStorage
}

// RdmaUcmResolveIp is struct rdma_ucm_resolve_ip (replaced by
// RDMA_USER_CM_CMD_RESOLVE_ADDR).
type RdmaUcmResolveIp struct {
	SrcAddr   SockaddrIn6
	DstAddr   SockaddrIn6
	Id        uint32
	TimeoutMs uint32
}

// RdmaUcmResolveAddr is struct rdma_ucm_resolve_addr.
type RdmaUcmResolveAddr struct {
	Id        uint32
	TimeoutMs uint32
	SrcSize   uint16
	DstSize   uint16
	Reserved  uint32
	SrcAddr   SockaddrStorage
	DstAddr   SockaddrStorage
}

// RdmaUcmResolveRoute is struct rdma_ucm_resolve_route.
type RdmaUcmResolveRoute struct {
	Id        uint32
	TimeoutMs uint32
}

// RdmaUcmQuery is struct rdma_ucm_query (QUERY and QUERY_ROUTE).
type RdmaUcmQuery struct {
	Response uint64
	Id       uint32
	Option   uint32
}

// IbUserPathRec is struct ib_user_path_rec (<rdma/ib_user_sa.h>):
// dlid, slid, flow_label and pkey big-endian.
type IbUserPathRec struct {
	Dgid                   [16]byte
	Sgid                   [16]byte
	Dlid                   [2]byte
	Slid                   [2]byte
	RawTraffic             uint32
	FlowLabel              [4]byte
	Reversible             uint32
	Mtu                    uint32
	Pkey                   [2]byte
	HopLimit               uint8
	TrafficClass           uint8
	NumbPath               uint8
	Sl                     uint8
	MtuSelector            uint8
	RateSelector           uint8
	Rate                   uint8
	PacketLifeTimeSelector uint8
	PacketLifeTime         uint8
	Preference             uint8
}

// IbPathRecData is struct ib_path_rec_data (<rdma/ib_user_sa.h>): a
// path record packed as the SA sends it (big-endian), with flags.
type IbPathRecData struct {
	Flags    uint32
	Reserved uint32
	PathRec  [16]uint32
}

// Path record flags (the anonymous enum of <rdma/ib_user_sa.h>).
const (
	IB_PATH_GMP             = 1
	IB_PATH_PRIMARY         = 1 << 1
	IB_PATH_ALTERNATE       = 1 << 2
	IB_PATH_OUTBOUND        = 1 << 3
	IB_PATH_INBOUND         = 1 << 4
	IB_PATH_INBOUND_REVERSE = 1 << 5
	IB_PATH_BIDIRECTIONAL   = IB_PATH_OUTBOUND | IB_PATH_INBOUND_REVERSE
)

// RdmaUcmQueryRouteResp is struct rdma_ucm_query_route_resp. node_guid
// is the device's GUID in network byte order.
type RdmaUcmQueryRouteResp struct {
	NodeGuid   uint64
	IbRoute    [2]IbUserPathRec
	SrcAddr    SockaddrIn6
	DstAddr    SockaddrIn6
	NumPaths   uint32
	PortNum    uint8
	Reserved   [3]uint8
	IbdevIndex uint32
	Reserved1  uint32
}

// RdmaUcmQueryAddrResp is struct rdma_ucm_query_addr_resp (QUERY_ADDR
// and QUERY_GID). node_guid and pkey are in network byte order.
type RdmaUcmQueryAddrResp struct {
	NodeGuid   uint64
	PortNum    uint8
	Reserved   uint8
	Pkey       uint16
	SrcSize    uint16
	DstSize    uint16
	SrcAddr    SockaddrStorage
	DstAddr    SockaddrStorage
	IbdevIndex uint32
	Reserved1  uint32
}

// RdmaUcmQueryPathResp is struct rdma_ucm_query_path_resp without its
// flexible array of struct ib_path_rec_data, which follows it.
type RdmaUcmQueryPathResp struct {
	NumPaths uint32
	Reserved uint32
}

// RdmaUcmConnParam is struct rdma_ucm_conn_param.
type RdmaUcmConnParam struct {
	QpNum              uint32
	Qkey               uint32
	PrivateData        [RDMA_MAX_PRIVATE_DATA]byte
	PrivateDataLen     uint8
	Srq                uint8
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RnrRetryCount      uint8
	Valid              uint8
}

// IbUverbsGlobalRoute is struct ib_uverbs_global_route
// (<rdma/ib_user_verbs.h>).
type IbUverbsGlobalRoute struct {
	Dgid         [16]byte
	FlowLabel    uint32
	SgidIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	Reserved     uint8
}

// IbUverbsAhAttr is struct ib_uverbs_ah_attr (<rdma/ib_user_verbs.h>).
type IbUverbsAhAttr struct {
	Grh         IbUverbsGlobalRoute
	Dlid        uint16
	Sl          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    uint8
	PortNum     uint8
	Reserved    uint8
}

// RdmaUcmUdParam is struct rdma_ucm_ud_param.
type RdmaUcmUdParam struct {
	QpNum          uint32
	Qkey           uint32
	AhAttr         IbUverbsAhAttr
	PrivateData    [RDMA_MAX_PRIVATE_DATA]byte
	PrivateDataLen uint8
	Reserved       [7]uint8
}

// RdmaUcmEce is struct rdma_ucm_ece.
type RdmaUcmEce struct {
	VendorId uint32
	AttrMod  uint32
}

// RdmaUcmConnect is struct rdma_ucm_connect.
type RdmaUcmConnect struct {
	ConnParam RdmaUcmConnParam
	Id        uint32
	Reserved  uint32
	Ece       RdmaUcmEce
}

// RdmaUcmListen is struct rdma_ucm_listen.
type RdmaUcmListen struct {
	Id      uint32
	Backlog uint32
}

// RdmaUcmAccept is struct rdma_ucm_accept.
type RdmaUcmAccept struct {
	Uid       uint64
	ConnParam RdmaUcmConnParam
	Id        uint32
	Reserved  uint32
	Ece       RdmaUcmEce
}

// RdmaUcmReject is struct rdma_ucm_reject.
type RdmaUcmReject struct {
	Id             uint32
	PrivateDataLen uint8
	Reason         uint8
	Reserved       [2]uint8
	PrivateData    [RDMA_MAX_PRIVATE_DATA]byte
}

// RdmaUcmDisconnect is struct rdma_ucm_disconnect.
type RdmaUcmDisconnect struct {
	Id uint32
}

// RdmaUcmInitQpAttr is struct rdma_ucm_init_qp_attr.
type RdmaUcmInitQpAttr struct {
	Response uint64
	Id       uint32
	QpState  uint32
}

// IbUverbsQpAttr is struct ib_uverbs_qp_attr (<rdma/ib_user_verbs.h>),
// the response of INIT_QP_ATTR.
type IbUverbsQpAttr struct {
	QpAttrMask       uint32
	QpState          uint32
	CurQpState       uint32
	PathMtu          uint32
	PathMigState     uint32
	Qkey             uint32
	RqPsn            uint32
	SqPsn            uint32
	DestQpNum        uint32
	QpAccessFlags    uint32
	AhAttr           IbUverbsAhAttr
	AltAhAttr        IbUverbsAhAttr
	MaxSendWr        uint32
	MaxRecvWr        uint32
	MaxSendSge       uint32
	MaxRecvSge       uint32
	MaxInlineData    uint32
	PkeyIndex        uint16
	AltPkeyIndex     uint16
	EnSqdAsyncNotify uint8
	SqDraining       uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRnrTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RnrRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [5]uint8
}

// RdmaUcmNotify is struct rdma_ucm_notify.
type RdmaUcmNotify struct {
	Id    uint32
	Event uint32
}

// RdmaUcmGetEvent is struct rdma_ucm_get_event.
type RdmaUcmGetEvent struct {
	Response uint64
}

// RdmaUcmEventResp is struct rdma_ucm_event_resp. Param is the union of
// struct rdma_ucm_conn_param and struct rdma_ucm_ud_param (4-byte
// aligned, at offset 20): the id's QP type says which.
type RdmaUcmEventResp struct {
	Uid      uint64
	Id       uint32
	Event    uint32
	Status   uint32
	Param    [SizeofRdmaUcmUdParam]byte
	Reserved uint32
	Ece      RdmaUcmEce
}

// SizeofRdmaUcmUdParam is the size of struct rdma_ucm_ud_param, the larger
// member of rdma_ucm_event_resp's union.
const SizeofRdmaUcmUdParam = 304

// RdmaUcmSetOption is struct rdma_ucm_set_option.
type RdmaUcmSetOption struct {
	Optval  uint64
	Id      uint32
	Level   uint32
	Optname uint32
	Optlen  uint32
}

// RdmaUcmMigrateId is struct rdma_ucm_migrate_id.
type RdmaUcmMigrateId struct {
	Response uint64
	Id       uint32
	Fd       uint32
}

// RdmaUcmMigrateResp is struct rdma_ucm_migrate_resp.
type RdmaUcmMigrateResp struct {
	EventsReported uint32
}
