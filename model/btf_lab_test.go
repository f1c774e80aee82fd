package model

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/internal/seam"
)

// modelConsts are the kernel enumerators the model's own constants
// mirror: the QP states (enum mlx5_qp_state, qp.h), the event types
// (enum mlx5_event, device.h) and the values the model writes into
// contexts and EQEs.
var modelConsts = []btfcheck.Const{
	{Enum: "mlx5_qp_state", Name: "MLX5_QP_STATE_RST", Value: StateRST},
	{Enum: "mlx5_qp_state", Name: "MLX5_QP_STATE_INIT", Value: StateINIT},
	{Enum: "mlx5_qp_state", Name: "MLX5_QP_STATE_RTR", Value: StateRTR},
	{Enum: "mlx5_qp_state", Name: "MLX5_QP_STATE_RTS", Value: StateRTS},
	{Enum: "mlx5_qp_state", Name: "MLX5_QP_STATE_SQER", Value: StateSQER},
	{Enum: "mlx5_qp_state", Name: "MLX5_QP_STATE_SQD", Value: StateSQD},
	{Enum: "mlx5_qp_state", Name: "MLX5_QP_STATE_ERR", Value: StateERR},
	{Enum: "mlx5_qp_state", Name: "MLX5_QP_STATE_SQ_DRAINING", Value: StateSQDraining},

	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_COMP", Value: evComp},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_PATH_MIG", Value: evPathMig},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_COMM_EST", Value: evCommEst},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_SQ_DRAINED", Value: evSQDrained},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_CQ_ERROR", Value: evCQError},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_WQ_CATAS_ERROR", Value: evWQCatasError},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_PATH_MIG_FAILED", Value: evPathMigFailed},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_WQ_INVAL_REQ_ERROR", Value: evWQInvalReqError},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_WQ_ACCESS_ERROR", Value: evWQAccessError},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_SRQ_CATAS_ERROR", Value: evSRQCatasError},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_SRQ_LAST_WQE", Value: evSRQLastWQE},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_SRQ_RQ_LIMIT", Value: evSRQRQLimit},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_XRQ_ERROR", Value: evXRQError},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_DCT_DRAINED", Value: evDCTDrained},
	{Enum: "mlx5_event", Name: "MLX5_EVENT_TYPE_DCT_KEY_VIOLATION", Value: evDCTKeyViolation},

	// An anonymous enum BTF keeps (devx.c uses it as get_dec_obj_type's
	// and get_event_obj_type's result).
	{Name: "MLX5_EVENT_QUEUE_TYPE_QP", Value: queueTypeQP},
	{Name: "MLX5_EVENT_QUEUE_TYPE_RQ", Value: queueTypeRQ},
	{Name: "MLX5_EVENT_QUEUE_TYPE_SQ", Value: queueTypeSQ},
	{Name: "MLX5_EVENT_QUEUE_TYPE_DCT", Value: queueTypeDCT},
}

// notInBTF are enumerators of anonymous enums the model mirrors that the
// lab kernel's (6.1) BTF does not hold: the compiler dropped their enum
// types, as their constants are only used as values. Their values are
// the 6.1 headers' (mlx5_ifc.h); the test fails if one turns up, so that
// it is compared and moved to modelConsts then. The kernel's mlx5_ifc.h
// calls 0x7 MLX5_QPC_STATE_SQD; it is the model's StateSQDraining (the
// QPC has no name for 0x5 there; qp.h's MLX5_QP_STATE_SQD is checked
// above).
var notInBTF = []btfcheck.Const{
	{Name: "MLX5_QPC_STATE_RST", Value: StateRST},
	{Name: "MLX5_QPC_STATE_INIT", Value: StateINIT},
	{Name: "MLX5_QPC_STATE_RTR", Value: StateRTR},
	{Name: "MLX5_QPC_STATE_RTS", Value: StateRTS},
	{Name: "MLX5_QPC_STATE_SQER", Value: StateSQER},
	{Name: "MLX5_QPC_STATE_ERR", Value: StateERR},
	{Name: "MLX5_QPC_STATE_SQD", Value: StateSQDraining},
	{Name: "MLX5_CQ_ERROR_SYNDROME_CQ_OVERRUN", Value: cqErrorCQOverrun},
	{Name: "MLX5_CQC_STATUS_CQ_OVERFLOW", Value: cqStatusOverflow},
}

// modelLayouts are the EQE and the event read header as the model writes
// them.
var modelLayouts = []btfcheck.Layout{
	{Struct: "mlx5_eqe", Size: seam.EQESize, Fields: []btfcheck.Field{
		{Name: "type", Offset: eqeType},
		{Name: "sub_type", Offset: eqeSubType},
		{Name: "data", Offset: eqeData},
		{Name: "signature", Offset: eqeSignature},
		{Name: "owner", Offset: eqeOwner},
	}},
	{Struct: "mlx5_eqe_cq_err", Size: cqErrSyndrome + 1, Fields: []btfcheck.Field{
		{Name: "cqn", Offset: cqErrCQN},
		{Name: "syndrome", Offset: cqErrSyndrome},
	}},
	{Struct: "mlx5_eqe_qp_srq", Size: qpSrqN + 4, Fields: []btfcheck.Field{
		{Name: "type", Offset: qpSrqType},
		{Name: "qp_srq_n", Offset: qpSrqN},
	}},
	{Struct: "mlx5_ib_uapi_devx_async_event_hdr", Size: seam.EventHeaderSize, Fields: []btfcheck.Field{
		{Name: "cookie", Offset: 0},
		{Name: "out_data", Offset: seam.EventHeaderSize},
	}},
}

// TestLabBTFModel checks the model's QP states, event types and EQE
// layout against the BTF of the lab kernel's mlx5_core and mlx5_ib.
func TestLabBTFModel(t *testing.T) {
	labenv.Require(t)
	s, err := btfcheck.Load("mlx5_ib", "mlx5_core")
	if err != nil {
		t.Fatal(err)
	}
	btfcheck.CheckConsts(t, s, modelConsts)
	btfcheck.CheckLayouts(t, s, modelLayouts)
	for _, c := range notInBTF {
		if v, err := s.EnumValue("", c.Name); err == nil {
			t.Errorf("%s is in %s's BTF now (%#x, the model has %#x): compare it and move it to modelConsts", c.Name, s.Name, v, c.Value)
		}
	}
	t.Logf("%d constants, %d structs checked; not in BTF: %d anonymous enumerators", len(modelConsts), len(modelLayouts), len(notInBTF))
}
