package uverbs

// Kernel ABI mirror for the object calls: MR, completion channel, CQ, QP,
// AH, SRQ, the async event file, and the legacy write() headers. Names are
// the kernel's; values and layouts are checked against the kernel's BTF in
// the lab (btf_objects_test.go).

// More of enum ib_uverbs_write_cmds, <rdma/ib_user_verbs.h>.
const (
	IB_USER_VERBS_CMD_CREATE_AH           = 5
	IB_USER_VERBS_CMD_DESTROY_AH          = 8
	IB_USER_VERBS_CMD_REG_MR              = 9
	IB_USER_VERBS_CMD_DEREG_MR            = 13
	IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL = 17
	IB_USER_VERBS_CMD_CREATE_CQ           = 18
	IB_USER_VERBS_CMD_DESTROY_CQ          = 20
	IB_USER_VERBS_CMD_REQ_NOTIFY_CQ       = 23
	IB_USER_VERBS_CMD_CREATE_QP           = 24
	IB_USER_VERBS_CMD_QUERY_QP            = 25
	IB_USER_VERBS_CMD_MODIFY_QP           = 26
	IB_USER_VERBS_CMD_DESTROY_QP          = 27
	IB_USER_VERBS_CMD_CREATE_SRQ          = 32
	IB_USER_VERBS_CMD_MODIFY_SRQ          = 33
	IB_USER_VERBS_CMD_DESTROY_SRQ         = 35
)

// IB_USER_VERBS_EX_CMD_MODIFY_QP is from the anonymous enum of extended
// write commands, <rdma/ib_user_verbs.h>.
const IB_USER_VERBS_EX_CMD_MODIFY_QP = IB_USER_VERBS_CMD_MODIFY_QP

// enum uverbs_attrs_create_cq_cmd_attr_ids, <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_CREATE_CQ_HANDLE       = 0
	UVERBS_ATTR_CREATE_CQ_CQE          = 1
	UVERBS_ATTR_CREATE_CQ_USER_HANDLE  = 2
	UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL = 3
	UVERBS_ATTR_CREATE_CQ_COMP_VECTOR  = 4
	UVERBS_ATTR_CREATE_CQ_FLAGS        = 5
	UVERBS_ATTR_CREATE_CQ_RESP_CQE     = 6
	UVERBS_ATTR_CREATE_CQ_EVENT_FD     = 7
)

// enum uverbs_attrs_destroy_cq_cmd_attr_ids and enum uverbs_methods_cq.
const (
	UVERBS_ATTR_DESTROY_CQ_HANDLE = 0
	UVERBS_ATTR_DESTROY_CQ_RESP   = 1
	UVERBS_METHOD_CQ_CREATE       = 0
	UVERBS_METHOD_CQ_DESTROY      = 1
)

// enum uverbs_attrs_create_qp_cmd_attr_ids, <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_CREATE_QP_HANDLE           = 0
	UVERBS_ATTR_CREATE_QP_XRCD_HANDLE      = 1
	UVERBS_ATTR_CREATE_QP_PD_HANDLE        = 2
	UVERBS_ATTR_CREATE_QP_SRQ_HANDLE       = 3
	UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE   = 4
	UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE   = 5
	UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE = 6
	UVERBS_ATTR_CREATE_QP_USER_HANDLE      = 7
	UVERBS_ATTR_CREATE_QP_CAP              = 8
	UVERBS_ATTR_CREATE_QP_TYPE             = 9
	UVERBS_ATTR_CREATE_QP_FLAGS            = 10
	UVERBS_ATTR_CREATE_QP_SOURCE_QPN       = 11
	UVERBS_ATTR_CREATE_QP_EVENT_FD         = 12
	UVERBS_ATTR_CREATE_QP_RESP_CAP         = 13
	UVERBS_ATTR_CREATE_QP_RESP_QP_NUM      = 14
)

// enum uverbs_attrs_destroy_qp_cmd_attr_ids and enum uverbs_methods_qp.
const (
	UVERBS_ATTR_DESTROY_QP_HANDLE = 0
	UVERBS_ATTR_DESTROY_QP_RESP   = 1
	UVERBS_METHOD_QP_CREATE       = 0
	UVERBS_METHOD_QP_DESTROY      = 1
)

// enum uverbs_attrs_create_srq_cmd_attr_ids, <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_CREATE_SRQ_HANDLE           = 0
	UVERBS_ATTR_CREATE_SRQ_PD_HANDLE        = 1
	UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE      = 2
	UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE        = 3
	UVERBS_ATTR_CREATE_SRQ_USER_HANDLE      = 4
	UVERBS_ATTR_CREATE_SRQ_MAX_WR           = 5
	UVERBS_ATTR_CREATE_SRQ_MAX_SGE          = 6
	UVERBS_ATTR_CREATE_SRQ_LIMIT            = 7
	UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS     = 8
	UVERBS_ATTR_CREATE_SRQ_TYPE             = 9
	UVERBS_ATTR_CREATE_SRQ_EVENT_FD         = 10
	UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR      = 11
	UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE     = 12
	UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM     = 13
	UVERBS_ATTR_DESTROY_SRQ_HANDLE          = 0
	UVERBS_ATTR_DESTROY_SRQ_RESP            = 1
	UVERBS_METHOD_SRQ_CREATE                = 0
	UVERBS_METHOD_SRQ_DESTROY               = 1
	IB_UVERBS_SRQT_BASIC                    = 0
	UVERBS_ATTR_DESTROY_MR_HANDLE           = 0
	UVERBS_METHOD_MR_DESTROY                = 1
	UVERBS_METHOD_AH_DESTROY                = 0
	UVERBS_ATTR_DESTROY_AH_HANDLE           = 0
	UVERBS_METHOD_ASYNC_EVENT_ALLOC         = 0
	UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE = 0
)

// enum ib_uverbs_qp_type, <rdma/ib_user_ioctl_verbs.h>.
const (
	IB_UVERBS_QPT_RC     = 2
	IB_UVERBS_QPT_UC     = 3
	IB_UVERBS_QPT_UD     = 4
	IB_UVERBS_QPT_DRIVER = 0xff

	// IB_UVERBS_QP_CREATE_SQ_SIG_ALL is from enum ib_uverbs_qp_create_flags.
	IB_UVERBS_QP_CREATE_SQ_SIG_ALL = 1 << 12
)

// enum ib_uverbs_access_flags, <rdma/ib_user_ioctl_verbs.h>.
const (
	IB_UVERBS_ACCESS_LOCAL_WRITE   = 1 << 0
	IB_UVERBS_ACCESS_REMOTE_WRITE  = 1 << 1
	IB_UVERBS_ACCESS_REMOTE_READ   = 1 << 2
	IB_UVERBS_ACCESS_REMOTE_ATOMIC = 1 << 3
	IB_UVERBS_ACCESS_MW_BIND       = 1 << 4
	IB_UVERBS_ACCESS_ZERO_BASED    = 1 << 5
	IB_UVERBS_ACCESS_ON_DEMAND     = 1 << 6
	IB_UVERBS_ACCESS_HUGETLB       = 1 << 7
	// IB_UVERBS_ACCESS_RELAXED_ORDERING is IB_UVERBS_ACCESS_OPTIONAL_FIRST.
	IB_UVERBS_ACCESS_RELAXED_ORDERING = 1 << 20
)

// IbUverbsCmdHdr is struct ib_uverbs_cmd_hdr, <rdma/ib_user_verbs.h>: the
// header of a legacy write() command. Words are 4 bytes.
type IbUverbsCmdHdr struct {
	Command  uint32
	InWords  uint16
	OutWords uint16
}

// IbUverbsExCmdHdr is struct ib_uverbs_ex_cmd_hdr, <rdma/ib_user_verbs.h>:
// the second header of an extended write() command. Words are 8 bytes.
type IbUverbsExCmdHdr struct {
	Response         uint64
	ProviderInWords  uint16
	ProviderOutWords uint16
	CmdHdrReserved   uint32
}

// IbUverbsRegMr is struct ib_uverbs_reg_mr without driver_data[].
type IbUverbsRegMr struct {
	Response    uint64
	Start       uint64
	Length      uint64
	HcaVa       uint64
	PdHandle    uint32
	AccessFlags uint32
}

// IbUverbsRegMrResp is struct ib_uverbs_reg_mr_resp without driver_data[].
type IbUverbsRegMrResp struct {
	MrHandle uint32
	Lkey     uint32
	Rkey     uint32
}

// IbUverbsDeregMr is struct ib_uverbs_dereg_mr.
type IbUverbsDeregMr struct{ MrHandle uint32 }

// IbUverbsDeallocPd is struct ib_uverbs_dealloc_pd.
type IbUverbsDeallocPd struct{ PdHandle uint32 }

// IbUverbsCreateCompChannel is struct ib_uverbs_create_comp_channel.
type IbUverbsCreateCompChannel struct{ Response uint64 }

// IbUverbsCreateCompChannelResp is struct
// ib_uverbs_create_comp_channel_resp.
type IbUverbsCreateCompChannelResp struct{ Fd uint32 }

// IbUverbsCreateCq is struct ib_uverbs_create_cq without driver_data[].
type IbUverbsCreateCq struct {
	Response    uint64
	UserHandle  uint64
	Cqe         uint32
	CompVector  uint32
	CompChannel int32
	Reserved    uint32
}

// IbUverbsCreateCqResp is struct ib_uverbs_create_cq_resp without
// driver_data[].
type IbUverbsCreateCqResp struct {
	CqHandle uint32
	Cqe      uint32
}

// IbUverbsDestroyCq is struct ib_uverbs_destroy_cq.
type IbUverbsDestroyCq struct {
	Response uint64
	CqHandle uint32
	Reserved uint32
}

// IbUverbsDestroyCqResp is struct ib_uverbs_destroy_cq_resp.
type IbUverbsDestroyCqResp struct {
	CompEventsReported  uint32
	AsyncEventsReported uint32
}

// IbUverbsReqNotifyCq is struct ib_uverbs_req_notify_cq.
type IbUverbsReqNotifyCq struct {
	CqHandle      uint32
	SolicitedOnly uint32
}

// IbUverbsQpCap is struct ib_uverbs_qp_cap, <rdma/ib_user_ioctl_verbs.h>.
type IbUverbsQpCap struct {
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSge    uint32
	MaxRecvSge    uint32
	MaxInlineData uint32
}

// IbUverbsCreateQp is struct ib_uverbs_create_qp without driver_data[].
type IbUverbsCreateQp struct {
	Response      uint64
	UserHandle    uint64
	PdHandle      uint32
	SendCqHandle  uint32
	RecvCqHandle  uint32
	SrqHandle     uint32
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSge    uint32
	MaxRecvSge    uint32
	MaxInlineData uint32
	SqSigAll      uint8
	QpType        uint8
	IsSrq         uint8
	Reserved      uint8
}

// IbUverbsCreateQpResp is struct ib_uverbs_create_qp_resp without
// driver_data[].
type IbUverbsCreateQpResp struct {
	QpHandle      uint32
	Qpn           uint32
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSge    uint32
	MaxRecvSge    uint32
	MaxInlineData uint32
	Reserved      uint32
}

// IbUverbsQpDest is struct ib_uverbs_qp_dest.
type IbUverbsQpDest struct {
	Dgid         [16]uint8
	FlowLabel    uint32
	Dlid         uint16
	Reserved     uint16
	SgidIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	Sl           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     uint8
	PortNum      uint8
}

// IbUverbsModifyQp is struct ib_uverbs_modify_qp without driver_data[].
type IbUverbsModifyQp struct {
	Dest             IbUverbsQpDest
	AltDest          IbUverbsQpDest
	QpHandle         uint32
	AttrMask         uint32
	Qkey             uint32
	RqPsn            uint32
	SqPsn            uint32
	DestQpNum        uint32
	QpAccessFlags    uint32
	PkeyIndex        uint16
	AltPkeyIndex     uint16
	QpState          uint8
	CurQpState       uint8
	PathMtu          uint8
	PathMigState     uint8
	EnSqdAsyncNotify uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRnrTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RnrRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [2]uint8
}

// IbUverbsExModifyQp is struct ib_uverbs_ex_modify_qp.
type IbUverbsExModifyQp struct {
	Base      IbUverbsModifyQp
	RateLimit uint32
	Reserved  uint32
}

// IbUverbsExModifyQpResp is struct ib_uverbs_ex_modify_qp_resp.
type IbUverbsExModifyQpResp struct {
	CompMask       uint32
	ResponseLength uint32
}

// IbUverbsQueryQp is struct ib_uverbs_query_qp without driver_data[].
type IbUverbsQueryQp struct {
	Response uint64
	QpHandle uint32
	AttrMask uint32
}

// IbUverbsQueryQpResp is struct ib_uverbs_query_qp_resp without
// driver_data[].
type IbUverbsQueryQpResp struct {
	Dest            IbUverbsQpDest
	AltDest         IbUverbsQpDest
	MaxSendWr       uint32
	MaxRecvWr       uint32
	MaxSendSge      uint32
	MaxRecvSge      uint32
	MaxInlineData   uint32
	Qkey            uint32
	RqPsn           uint32
	SqPsn           uint32
	DestQpNum       uint32
	QpAccessFlags   uint32
	PkeyIndex       uint16
	AltPkeyIndex    uint16
	QpState         uint8
	CurQpState      uint8
	PathMtu         uint8
	PathMigState    uint8
	SqDraining      uint8
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	MinRnrTimer     uint8
	PortNum         uint8
	Timeout         uint8
	RetryCnt        uint8
	RnrRetry        uint8
	AltPortNum      uint8
	AltTimeout      uint8
	SqSigAll        uint8
	Reserved        [5]uint8
}

// IbUverbsDestroyQp is struct ib_uverbs_destroy_qp.
type IbUverbsDestroyQp struct {
	Response uint64
	QpHandle uint32
	Reserved uint32
}

// IbUverbsDestroyQpResp is struct ib_uverbs_destroy_qp_resp.
type IbUverbsDestroyQpResp struct{ EventsReported uint32 }

// IbUverbsGlobalRoute is struct ib_uverbs_global_route.
type IbUverbsGlobalRoute struct {
	Dgid         [16]uint8
	FlowLabel    uint32
	SgidIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	Reserved     uint8
}

// IbUverbsAhAttr is struct ib_uverbs_ah_attr.
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

// IbUverbsCreateAh is struct ib_uverbs_create_ah without driver_data[].
type IbUverbsCreateAh struct {
	Response   uint64
	UserHandle uint64
	PdHandle   uint32
	Reserved   uint32
	Attr       IbUverbsAhAttr
}

// IbUverbsCreateAhResp is struct ib_uverbs_create_ah_resp without
// driver_data[].
type IbUverbsCreateAhResp struct{ AhHandle uint32 }

// IbUverbsDestroyAh is struct ib_uverbs_destroy_ah.
type IbUverbsDestroyAh struct{ AhHandle uint32 }

// IbUverbsCreateSrq is struct ib_uverbs_create_srq without driver_data[].
type IbUverbsCreateSrq struct {
	Response   uint64
	UserHandle uint64
	PdHandle   uint32
	MaxWr      uint32
	MaxSge     uint32
	SrqLimit   uint32
}

// IbUverbsCreateSrqResp is struct ib_uverbs_create_srq_resp without
// driver_data[].
type IbUverbsCreateSrqResp struct {
	SrqHandle uint32
	MaxWr     uint32
	MaxSge    uint32
	Srqn      uint32
}

// enum ib_srq_attr_mask, <rdma/ib_verbs.h> (kernel-internal; the modify
// command carries it).
const (
	IB_SRQ_MAX_WR = 1 << 0
	IB_SRQ_LIMIT  = 1 << 1
)

// IbUverbsModifySrq is struct ib_uverbs_modify_srq without driver_data[].
type IbUverbsModifySrq struct {
	SrqHandle uint32
	AttrMask  uint32
	MaxWr     uint32
	SrqLimit  uint32
}

// IbUverbsDestroySrq is struct ib_uverbs_destroy_srq.
type IbUverbsDestroySrq struct {
	Response  uint64
	SrqHandle uint32
	Reserved  uint32
}

// IbUverbsDestroySrqResp is struct ib_uverbs_destroy_srq_resp.
type IbUverbsDestroySrqResp struct{ EventsReported uint32 }

// IbUverbsGetContext is struct ib_uverbs_get_context without
// driver_data[] (the legacy write() form of GET_CONTEXT).
type IbUverbsGetContext struct{ Response uint64 }

// IbUverbsGetContextResp is struct ib_uverbs_get_context_resp.
type IbUverbsGetContextResp struct {
	AsyncFd        uint32
	NumCompVectors uint32
}

// IbUverbsAsyncEventDesc is struct ib_uverbs_async_event_desc, what a read
// of the async event file returns.
type IbUverbsAsyncEventDesc struct {
	Element   uint64
	EventType uint32
	Reserved  uint32
}

// IbUverbsCompEventDesc is struct ib_uverbs_comp_event_desc, what a read of
// a completion channel returns.
type IbUverbsCompEventDesc struct{ CqHandle uint64 }

// IbUverbsQueryPort is struct ib_uverbs_query_port (legacy write() form of
// QUERY_PORT).
type IbUverbsQueryPort struct {
	Response uint64
	PortNum  uint8
	Reserved [7]uint8
}
