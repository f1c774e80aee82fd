package model

import (
	"github.com/mlx5go/mlx5go/prm"
)

// The DEVX rules of the kernel (drivers/infiniband/hw/mlx5/devx.c), as
// tables. docs/MODEL.md quotes each with its function.

// devx_is_general_cmd: what MLX5_IB_METHOD_DEVX_OTHER runs, besides the
// opcodes in [MLX5_CMD_OP_GENERAL_START, MLX5_CMD_OP_GENERAL_END).
var generalCmds = set(
	prm.MLX5_CMD_OP_QUERY_HCA_CAP,
	prm.MLX5_CMD_OP_QUERY_HCA_VPORT_CONTEXT,
	prm.MLX5_CMD_OP_QUERY_ESW_VPORT_CONTEXT,
	prm.MLX5_CMD_OP_QUERY_VPORT_STATE,
	prm.MLX5_CMD_OP_QUERY_ADAPTER,
	prm.MLX5_CMD_OP_QUERY_ISSI,
	prm.MLX5_CMD_OP_QUERY_NIC_VPORT_CONTEXT,
	prm.MLX5_CMD_OP_QUERY_ROCE_ADDRESS,
	prm.MLX5_CMD_OP_QUERY_VNIC_ENV,
	prm.MLX5_CMD_OP_QUERY_VPORT_COUNTER,
	prm.MLX5_CMD_OP_GET_DROPPED_PACKET_LOG,
	prm.MLX5_CMD_OP_NOP,
	prm.MLX5_CMD_OP_QUERY_CONG_STATUS,
	prm.MLX5_CMD_OP_QUERY_CONG_PARAMS,
	prm.MLX5_CMD_OP_QUERY_CONG_STATISTICS,
	prm.MLX5_CMD_OP_QUERY_LAG,
	prm.MLX5_CMD_OP_QUERY_ESW_FUNCTIONS, // in 6.1.166's list
)

// devx_is_whitelist_cmd: the general commands devx_get_uid lets a context
// without a DEVX uid run, as the device's whitelist uid.
var whitelistCmds = set(
	prm.MLX5_CMD_OP_QUERY_HCA_CAP,
	prm.MLX5_CMD_OP_QUERY_HCA_VPORT_CONTEXT,
	prm.MLX5_CMD_OP_QUERY_ESW_VPORT_CONTEXT,
	prm.MLX5_CMD_OP_QUERY_ESW_FUNCTIONS,
)

// MLX5_CMD_OP_GENERAL_START and _END (mlx5_ifc.h).
const (
	generalStart = 0xb00
	generalEnd   = 0xd00
)

func isGeneralCmd(op uint16) bool {
	return generalCmds[op] || (op >= generalStart && op < generalEnd)
}

// devx_is_obj_create_cmd; SET_FLOW_TABLE_ENTRY counts with op_mod 0 and
// CREATE_PSV with num_psv 1 (see isCreateCmd).
var createCmds = set(
	prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT,
	prm.MLX5_CMD_OP_CREATE_MKEY,
	prm.MLX5_CMD_OP_CREATE_CQ,
	prm.MLX5_CMD_OP_ALLOC_PD,
	prm.MLX5_CMD_OP_ALLOC_TRANSPORT_DOMAIN,
	prm.MLX5_CMD_OP_CREATE_RMP,
	prm.MLX5_CMD_OP_CREATE_SQ,
	prm.MLX5_CMD_OP_CREATE_RQ,
	prm.MLX5_CMD_OP_CREATE_RQT,
	prm.MLX5_CMD_OP_CREATE_TIR,
	prm.MLX5_CMD_OP_CREATE_TIS,
	prm.MLX5_CMD_OP_ALLOC_Q_COUNTER,
	prm.MLX5_CMD_OP_CREATE_FLOW_TABLE,
	prm.MLX5_CMD_OP_CREATE_FLOW_GROUP,
	prm.MLX5_CMD_OP_ALLOC_FLOW_COUNTER,
	prm.MLX5_CMD_OP_ALLOC_PACKET_REFORMAT_CONTEXT,
	prm.MLX5_CMD_OP_ALLOC_MODIFY_HEADER_CONTEXT,
	prm.MLX5_CMD_OP_CREATE_SCHEDULING_ELEMENT,
	prm.MLX5_CMD_OP_ADD_VXLAN_UDP_DPORT,
	prm.MLX5_CMD_OP_SET_L2_TABLE_ENTRY,
	prm.MLX5_CMD_OP_CREATE_QP,
	prm.MLX5_CMD_OP_CREATE_SRQ,
	prm.MLX5_CMD_OP_CREATE_XRC_SRQ,
	prm.MLX5_CMD_OP_CREATE_DCT,
	prm.MLX5_CMD_OP_CREATE_XRQ,
	prm.MLX5_CMD_OP_ATTACH_TO_MCG,
	prm.MLX5_CMD_OP_ALLOC_XRCD,
)

func isCreateCmd(in []byte) bool {
	op := uint16(prm.MboxIn.Opcode.Get(in))
	switch op {
	case prm.MLX5_CMD_OP_SET_FLOW_TABLE_ENTRY:
		return prm.MboxIn.OpMod.Get(in) == 0
	case prm.MLX5_CMD_OP_CREATE_PSV:
		return prm.CreatePsvIn.NumPsv.Get(in) == 1
	}
	return createCmds[op]
}

// devx_is_obj_modify_cmd. SQD_RTS_QP is not in it: the kernel moves a QP
// from SQD to RTS only through the verbs modify QP.
var modifyCmds = set(
	prm.MLX5_CMD_OP_MODIFY_GENERAL_OBJECT,
	prm.MLX5_CMD_OP_MODIFY_CQ,
	prm.MLX5_CMD_OP_MODIFY_RMP,
	prm.MLX5_CMD_OP_MODIFY_SQ,
	prm.MLX5_CMD_OP_MODIFY_RQ,
	prm.MLX5_CMD_OP_MODIFY_RQT,
	prm.MLX5_CMD_OP_MODIFY_TIR,
	prm.MLX5_CMD_OP_MODIFY_TIS,
	prm.MLX5_CMD_OP_MODIFY_FLOW_TABLE,
	prm.MLX5_CMD_OP_MODIFY_SCHEDULING_ELEMENT,
	prm.MLX5_CMD_OP_ADD_VXLAN_UDP_DPORT,
	prm.MLX5_CMD_OP_SET_L2_TABLE_ENTRY,
	prm.MLX5_CMD_OP_RST2INIT_QP,
	prm.MLX5_CMD_OP_INIT2RTR_QP,
	prm.MLX5_CMD_OP_INIT2INIT_QP,
	prm.MLX5_CMD_OP_RTR2RTS_QP,
	prm.MLX5_CMD_OP_RTS2RTS_QP,
	prm.MLX5_CMD_OP_SQERR2RTS_QP,
	prm.MLX5_CMD_OP_2ERR_QP,
	prm.MLX5_CMD_OP_2RST_QP,
	prm.MLX5_CMD_OP_ARM_XRC_SRQ,
	prm.MLX5_CMD_OP_ARM_RQ,
	prm.MLX5_CMD_OP_ARM_DCT_FOR_KEY_VIOLATION,
	prm.MLX5_CMD_OP_ARM_XRQ,
	prm.MLX5_CMD_OP_SET_XRQ_DC_PARAMS_ENTRY,
	prm.MLX5_CMD_OP_RELEASE_XRQ_ERROR,
	prm.MLX5_CMD_OP_MODIFY_XRQ,
)

func isModifyCmd(in []byte) bool {
	op := uint16(prm.MboxIn.Opcode.Get(in))
	if op == prm.MLX5_CMD_OP_SET_FLOW_TABLE_ENTRY {
		return prm.MboxIn.OpMod.Get(in) == 1
	}
	return modifyCmds[op]
}

// devx_is_obj_query_cmd.
var queryCmds = set(
	prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT,
	prm.MLX5_CMD_OP_QUERY_MKEY,
	prm.MLX5_CMD_OP_QUERY_CQ,
	prm.MLX5_CMD_OP_QUERY_RMP,
	prm.MLX5_CMD_OP_QUERY_SQ,
	prm.MLX5_CMD_OP_QUERY_RQ,
	prm.MLX5_CMD_OP_QUERY_RQT,
	prm.MLX5_CMD_OP_QUERY_TIR,
	prm.MLX5_CMD_OP_QUERY_TIS,
	prm.MLX5_CMD_OP_QUERY_Q_COUNTER,
	prm.MLX5_CMD_OP_QUERY_FLOW_TABLE,
	prm.MLX5_CMD_OP_QUERY_FLOW_GROUP,
	prm.MLX5_CMD_OP_QUERY_FLOW_TABLE_ENTRY,
	prm.MLX5_CMD_OP_QUERY_FLOW_COUNTER,
	prm.MLX5_CMD_OP_QUERY_MODIFY_HEADER_CONTEXT,
	prm.MLX5_CMD_OP_QUERY_SCHEDULING_ELEMENT,
	prm.MLX5_CMD_OP_QUERY_L2_TABLE_ENTRY,
	prm.MLX5_CMD_OP_QUERY_QP,
	prm.MLX5_CMD_OP_QUERY_SRQ,
	prm.MLX5_CMD_OP_QUERY_XRC_SRQ,
	prm.MLX5_CMD_OP_QUERY_DCT,
	prm.MLX5_CMD_OP_QUERY_XRQ,
	prm.MLX5_CMD_OP_QUERY_XRQ_DC_PARAMS_ENTRY,
	prm.MLX5_CMD_OP_QUERY_XRQ_ERROR_PARAMS,
	prm.MLX5_CMD_OP_QUERY_PACKET_REFORMAT_CONTEXT,
)

func isQueryCmd(in []byte) bool { return queryCmds[uint16(prm.MboxIn.Opcode.Get(in))] }

// objRef is how devx_get_obj_id finds the object a query or modify names:
// the opcode that created it and the field holding its number.
type objRef struct {
	creator uint16
	id      prm.Field
}

// objRefs covers the query and modify commands of the objects the model
// creates. For the others devx_get_obj_id names an object whose creator
// the model never runs, so no handle of the model can match: the model
// answers them as the kernel would, with EINVAL.
var objRefs = map[uint16]objRef{
	prm.MLX5_CMD_OP_QUERY_MKEY:   {prm.MLX5_CMD_OP_CREATE_MKEY, prm.QueryMkeyIn.MkeyIndex},
	prm.MLX5_CMD_OP_QUERY_CQ:     {prm.MLX5_CMD_OP_CREATE_CQ, prm.QueryCqIn.Cqn},
	prm.MLX5_CMD_OP_MODIFY_CQ:    {prm.MLX5_CMD_OP_CREATE_CQ, prm.ModifyCqIn.Cqn},
	prm.MLX5_CMD_OP_QUERY_QP:     {prm.MLX5_CMD_OP_CREATE_QP, prm.QueryQpIn.Qpn},
	prm.MLX5_CMD_OP_RST2INIT_QP:  {prm.MLX5_CMD_OP_CREATE_QP, prm.Rst2initQpIn.Qpn},
	prm.MLX5_CMD_OP_INIT2INIT_QP: {prm.MLX5_CMD_OP_CREATE_QP, prm.Init2initQpIn.Qpn},
	prm.MLX5_CMD_OP_INIT2RTR_QP:  {prm.MLX5_CMD_OP_CREATE_QP, prm.Init2rtrQpIn.Qpn},
	prm.MLX5_CMD_OP_RTR2RTS_QP:   {prm.MLX5_CMD_OP_CREATE_QP, prm.Rtr2rtsQpIn.Qpn},
	prm.MLX5_CMD_OP_RTS2RTS_QP:   {prm.MLX5_CMD_OP_CREATE_QP, prm.Rts2rtsQpIn.Qpn},
	prm.MLX5_CMD_OP_SQERR2RTS_QP: {prm.MLX5_CMD_OP_CREATE_QP, prm.Sqerr2rtsQpIn.Qpn},
	prm.MLX5_CMD_OP_2ERR_QP:      {prm.MLX5_CMD_OP_CREATE_QP, prm.Qp2errIn.Qpn},
	prm.MLX5_CMD_OP_2RST_QP:      {prm.MLX5_CMD_OP_CREATE_QP, prm.Qp2rstIn.Qpn},
}

// encObjID is get_enc_obj_id: the creator's opcode above the object
// number, since object numbers are unique only per object type.
func encObjID(creator uint16, id uint32) uint64 { return uint64(creator)<<32 | uint64(id) }

// genObjID is get_enc_obj_id of general object id, of the type the
// command in names: the obj_type joins CREATE_GENERAL_OBJECT's opcode
// (devx_obj_create, devx_get_obj_id).
func genObjID(in []byte, id uint32) uint64 {
	typ := prm.GeneralObjInCmdHdr.ObjType.Get(in)
	return typ<<48 | encObjID(prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT, id)
}

// objIDOf is devx_get_obj_id: the encoded id of the object a command
// names, 0 if the model cannot name it.
func objIDOf(in []byte) uint64 {
	switch uint16(prm.MboxIn.Opcode.Get(in)) {
	case prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT, prm.MLX5_CMD_OP_MODIFY_GENERAL_OBJECT:
		return genObjID(in, uint32(prm.GeneralObjInCmdHdr.ObjId.Get(in)))
	}
	r, ok := objRefs[uint16(prm.MboxIn.Opcode.Get(in))]
	if !ok {
		return 0
	}
	return encObjID(r.creator, uint32(r.id.Get(in)))
}

// created is devx_get_created_obj_id and devx_obj_build_destroy_cmd for
// the objects the model creates: where the new object's number is in the
// output, and the destroy command the kernel records for it.
type created struct {
	id        prm.Field // in the output mailbox
	destroyOp uint16
	destroyID prm.Field // in the destroy command
}

var createdObjs = map[uint16]created{
	prm.MLX5_CMD_OP_ALLOC_PD:    {prm.AllocPdOut.Pd, prm.MLX5_CMD_OP_DEALLOC_PD, prm.DeallocPdIn.Pd},
	prm.MLX5_CMD_OP_CREATE_MKEY: {prm.CreateMkeyOut.MkeyIndex, prm.MLX5_CMD_OP_DESTROY_MKEY, prm.DestroyMkeyIn.MkeyIndex},
	prm.MLX5_CMD_OP_CREATE_CQ:   {prm.CreateCqOut.Cqn, prm.MLX5_CMD_OP_DESTROY_CQ, prm.DestroyCqIn.Cqn},
	prm.MLX5_CMD_OP_CREATE_QP:   {prm.CreateQpOut.Qpn, prm.MLX5_CMD_OP_DESTROY_QP, prm.DestroyQpIn.Qpn},
	prm.MLX5_CMD_OP_CREATE_PSV:  {prm.CreatePsvOut.Psv0Index, prm.MLX5_CMD_OP_DESTROY_PSV, prm.DestroyPsvIn.Psvn},

	// devx_obj_build_destroy_cmd copies the obj_type too (ObjCreate).
	prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT: {prm.GeneralObjOutCmdHdr.ObjId, prm.MLX5_CMD_OP_DESTROY_GENERAL_OBJECT, prm.GeneralObjInCmdHdr.ObjId},
}

// setUmemValid is devx_set_umem_valid and devx_handle_mkey_create: the
// kernel marks the buffers of a DEVX object as UMEMs.
func setUmemValid(in []byte) {
	switch uint16(prm.MboxIn.Opcode.Get(in)) {
	case prm.MLX5_CMD_OP_CREATE_MKEY:
		mkc := prm.CreateMkeyIn.MemoryKeyMkeyEntry
		mode := prm.Mkc.AccessMode10.At(mkc).Get(in) | prm.Mkc.AccessMode42.At(mkc).Get(in)<<2
		if mode != accessModeKLMS && mode != accessModeKSM {
			prm.CreateMkeyIn.MkeyUmemValid.Set(in, 1)
		}
	case prm.MLX5_CMD_OP_CREATE_CQ:
		prm.CreateCqIn.CqUmemValid.Set(in, 1)
		prm.Cqc.DbrUmemValid.At(prm.CreateCqIn.CqContext).Set(in, 1)
	case prm.MLX5_CMD_OP_CREATE_QP:
		prm.Qpc.DbrUmemValid.At(prm.CreateQpIn.Qpc).Set(in, 1)
		prm.CreateQpIn.WqUmemValid.Set(in, 1)
	case prm.MLX5_CMD_OP_MODIFY_CQ:
		prm.ModifyCqIn.CqUmemValid.Set(in, 1)
	}
}

func set(ops ...uint16) map[uint16]bool {
	m := make(map[uint16]bool, len(ops))
	for _, op := range ops {
		m[op] = true
	}
	return m
}
