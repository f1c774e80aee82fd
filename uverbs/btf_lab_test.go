package uverbs

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
)

// goConsts are this package's Go-named constants that stand for
// kernel-internal enums the ABI carries (<rdma/ib_verbs.h>: ib_qp_state,
// ib_mtu, ib_qp_attr_mask, ib_event_type), which internal/uverbsabi does
// not mirror; they are looked up in ib_uverbs', ib_core's and vmlinux's
// BTF. The uapi constants this package uses are internal/uverbsabi's,
// generated from BTF and checked there (its TestLabBTFGenerated), and its
// Go names for them (AccessFlags, QPType, DriverID, ...) equal them
// (TestGoNamesAreTheKernels).
var goConsts = []btfcheck.Const{
	{Enum: "ib_qp_state", Name: "IB_QPS_RESET", Value: uint64(QPStateReset)},
	{Enum: "ib_qp_state", Name: "IB_QPS_INIT", Value: uint64(QPStateInit)},
	{Enum: "ib_qp_state", Name: "IB_QPS_RTR", Value: uint64(QPStateRTR)},
	{Enum: "ib_qp_state", Name: "IB_QPS_RTS", Value: uint64(QPStateRTS)},
	{Enum: "ib_qp_state", Name: "IB_QPS_SQD", Value: uint64(QPStateSQD)},
	{Enum: "ib_qp_state", Name: "IB_QPS_SQE", Value: uint64(QPStateSQE)},
	{Enum: "ib_qp_state", Name: "IB_QPS_ERR", Value: uint64(QPStateErr)},
	{Enum: "ib_mtu", Name: "IB_MTU_256", Value: uint64(MTU256)},
	{Enum: "ib_mtu", Name: "IB_MTU_512", Value: uint64(MTU512)},
	{Enum: "ib_mtu", Name: "IB_MTU_1024", Value: uint64(MTU1024)},
	{Enum: "ib_mtu", Name: "IB_MTU_2048", Value: uint64(MTU2048)},
	{Enum: "ib_mtu", Name: "IB_MTU_4096", Value: uint64(MTU4096)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_STATE", Value: uint64(QPAttrState)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_CUR_STATE", Value: uint64(QPAttrCurState)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_EN_SQD_ASYNC_NOTIFY", Value: uint64(QPAttrEnSQDAsyncNotify)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_ACCESS_FLAGS", Value: uint64(QPAttrAccessFlags)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_PKEY_INDEX", Value: uint64(QPAttrPKeyIndex)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_PORT", Value: uint64(QPAttrPort)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_QKEY", Value: uint64(QPAttrQKey)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_AV", Value: uint64(QPAttrAV)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_PATH_MTU", Value: uint64(QPAttrPathMTU)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_TIMEOUT", Value: uint64(QPAttrTimeout)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_RETRY_CNT", Value: uint64(QPAttrRetryCnt)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_RNR_RETRY", Value: uint64(QPAttrRNRRetry)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_RQ_PSN", Value: uint64(QPAttrRQPSN)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_MAX_QP_RD_ATOMIC", Value: uint64(QPAttrMaxQPRdAtomic)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_ALT_PATH", Value: uint64(QPAttrAltPath)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_MIN_RNR_TIMER", Value: uint64(QPAttrMinRNRTimer)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_SQ_PSN", Value: uint64(QPAttrSQPSN)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_MAX_DEST_RD_ATOMIC", Value: uint64(QPAttrMaxDestRdAtomic)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_PATH_MIG_STATE", Value: uint64(QPAttrPathMigState)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_CAP", Value: uint64(QPAttrCap)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_DEST_QPN", Value: uint64(QPAttrDestQPN)},
	{Enum: "ib_qp_attr_mask", Name: "IB_QP_RATE_LIMIT", Value: uint64(QPAttrRateLimit)},
	{Enum: "ib_event_type", Name: "IB_EVENT_CQ_ERR", Value: uint64(EventCQErr)},
	{Enum: "ib_event_type", Name: "IB_EVENT_QP_FATAL", Value: uint64(EventQPFatal)},
	{Enum: "ib_event_type", Name: "IB_EVENT_QP_REQ_ERR", Value: uint64(EventQPReqErr)},
	{Enum: "ib_event_type", Name: "IB_EVENT_QP_ACCESS_ERR", Value: uint64(EventQPAccessErr)},
	{Enum: "ib_event_type", Name: "IB_EVENT_COMM_EST", Value: uint64(EventCommEst)},
	{Enum: "ib_event_type", Name: "IB_EVENT_SQ_DRAINED", Value: uint64(EventSQDrained)},
	{Enum: "ib_event_type", Name: "IB_EVENT_PATH_MIG", Value: uint64(EventPathMig)},
	{Enum: "ib_event_type", Name: "IB_EVENT_PATH_MIG_ERR", Value: uint64(EventPathMigErr)},
	{Enum: "ib_event_type", Name: "IB_EVENT_DEVICE_FATAL", Value: uint64(EventDeviceFatal)},
	{Enum: "ib_event_type", Name: "IB_EVENT_PORT_ACTIVE", Value: uint64(EventPortActive)},
	{Enum: "ib_event_type", Name: "IB_EVENT_PORT_ERR", Value: uint64(EventPortErr)},
	{Enum: "ib_event_type", Name: "IB_EVENT_LID_CHANGE", Value: uint64(EventLIDChange)},
	{Enum: "ib_event_type", Name: "IB_EVENT_PKEY_CHANGE", Value: uint64(EventPKeyChange)},
	{Enum: "ib_event_type", Name: "IB_EVENT_SM_CHANGE", Value: uint64(EventSMChange)},
	{Enum: "ib_event_type", Name: "IB_EVENT_SRQ_ERR", Value: uint64(EventSRQErr)},
	{Enum: "ib_event_type", Name: "IB_EVENT_SRQ_LIMIT_REACHED", Value: uint64(EventSRQLimitReached)},
	{Enum: "ib_event_type", Name: "IB_EVENT_QP_LAST_WQE_REACHED", Value: uint64(EventQPLastWQEReached)},
	{Enum: "ib_event_type", Name: "IB_EVENT_CLIENT_REREGISTER", Value: uint64(EventClientReregister)},
	{Enum: "ib_event_type", Name: "IB_EVENT_GID_CHANGE", Value: uint64(EventGIDChange)},
	{Enum: "ib_event_type", Name: "IB_EVENT_WQ_FATAL", Value: uint64(EventWQFatal)},
}

func TestLabBTFUverbs(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("ib_uverbs", "ib_core", "vmlinux")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, goConsts)
}
