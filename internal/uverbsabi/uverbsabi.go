// Package uverbsabi mirrors the kernel's generic RDMA user ABI: the uapi
// headers <rdma/rdma_user_ioctl_cmds.h>, <rdma/ib_user_ioctl_cmds.h>,
// <rdma/ib_user_ioctl_verbs.h>, <rdma/ib_user_verbs.h> and
// <rdma/rdma_netlink.h> (ioctl headers and attributes, object, method and
// attribute ids, legacy write() commands, netlink ids), and the one enum of
// the kernel-internal <rdma/ib_verbs.h> a command carries. Names are the
// kernel's, one Go struct per C struct with fields in C order, so that
// they can be grepped against the kernel and rdma-core.
//
// The enums and structs are generated from the kernel's BTF by
// internal/cmd/abigen (one file per header, internal/abigen's spec), with
// the tables the kernel lab checks against each kernel it boots
// (generated_btf_test.go, btf_lab_test.go). This file holds what BTF does
// not: macros and anonymous enums; the lab checks the anonymous enums
// that BTF keeps.
//
// It holds facts, no logic. It is internal, so that the users of package
// uverbs see Go names only.
package uverbsabi

// From <rdma/rdma_user_ioctl_cmds.h> (macros).
const (
	RDMA_IOCTL_MAGIC = 0x1b
	// RDMA_VERBS_IOCTL is _IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr).
	RDMA_VERBS_IOCTL = 3<<30 | SizeofIbUverbsIoctlHdr<<16 | RDMA_IOCTL_MAGIC<<8 | 1
)

// Attribute flags, an anonymous enum in <rdma/rdma_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_F_MANDATORY    = 1 << 0
	UVERBS_ATTR_F_VALID_OUTPUT = 1 << 1
)

// Attribute and method id namespaces, macros in <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ID_NS_MASK             = 0xF000
	UVERBS_ID_NS_SHIFT            = 12
	UVERBS_UDATA_DRIVER_DATA_NS   = 1
	UVERBS_UDATA_DRIVER_DATA_FLAG = 1 << UVERBS_ID_NS_SHIFT
)

// Driver-data attributes, an anonymous enum in <rdma/ib_user_ioctl_cmds.h>.
const (
	UVERBS_ATTR_UHW_IN  = UVERBS_UDATA_DRIVER_DATA_FLAG
	UVERBS_ATTR_UHW_OUT = UVERBS_UDATA_DRIVER_DATA_FLAG + 1
)

// From <rdma/ib_user_verbs.h> (macros, not in BTF; the extended flag is
// checked against the command libibverbs sent in the oracle's vectors,
// uverbs' TestOracleQueryDeviceEx).
const (
	IB_USER_VERBS_CMD_COMMAND_MASK  = 0xff
	IB_USER_VERBS_CMD_FLAG_EXTENDED = 0x80000000
)

// Extended write commands, an anonymous enum in <rdma/ib_user_verbs.h>
// (the values used). On the ioctl path they are sent as
// IB_USER_VERBS_CMD_FLAG_EXTENDED|cmd.
const (
	IB_USER_VERBS_EX_CMD_QUERY_DEVICE = IB_USER_VERBS_CMD_QUERY_DEVICE
	IB_USER_VERBS_EX_CMD_MODIFY_QP    = IB_USER_VERBS_CMD_MODIFY_QP
	IB_USER_VERBS_EX_CMD_MODIFY_CQ    = IB_USER_VERBS_CMD_THRESHOLD + 7
)

// IB_USER_VERBS_CMD_THRESHOLD is where the extended commands without a
// legacy counterpart start (a #define of <rdma/ib_user_verbs.h>).
const IB_USER_VERBS_CMD_THRESHOLD = 50

// IB_CQ_MODERATE is the only bit of ib_uverbs_ex_modify_cq.attr_mask
// (enum ib_cq_attr_mask of <rdma/ib_verbs.h>; libibverbs'
// IBV_CQ_ATTR_MODERATE).
const IB_CQ_MODERATE = 1 << 0

// RDMA netlink clients, an anonymous enum in <rdma/rdma_netlink.h>.
const (
	RDMA_NL_IWCM  = 2
	RDMA_NL_LS    = 4
	RDMA_NL_NLDEV = 5
)

// RDMA_NL_GET_TYPE is the netlink message type of op for client (the
// macro of <rdma/rdma_netlink.h>).
func RDMA_NL_GET_TYPE(client, op uint16) uint16 { return client<<10 + op }
