package uverbs

// RDMA netlink (nldev) ABI mirror of <rdma/rdma_netlink.h>. Names are the
// kernel's.

// RDMA netlink clients (anonymous enum).
const (
	RDMA_NL_IWCM  = 2
	RDMA_NL_LS    = 4
	RDMA_NL_NLDEV = 5
)

// RDMA_NL_GET_TYPE is the netlink message type of op for client.
func RDMA_NL_GET_TYPE(client, op uint16) uint16 { return client<<10 + op }

// enum rdma_nldev_command (the values used).
const (
	RDMA_NLDEV_CMD_GET      = 1
	RDMA_NLDEV_CMD_SET      = 2
	RDMA_NLDEV_CMD_NEWLINK  = 3
	RDMA_NLDEV_CMD_DELLINK  = 4
	RDMA_NLDEV_CMD_PORT_GET = 5
	RDMA_NLDEV_CMD_RES_GET  = 9
)

// enum rdma_nldev_attr (the values used).
const (
	RDMA_NLDEV_ATTR_DEV_INDEX   = 1
	RDMA_NLDEV_ATTR_DEV_NAME    = 2
	RDMA_NLDEV_ATTR_PORT_INDEX  = 3
	RDMA_NLDEV_ATTR_RES_SUMMARY = 15
	RDMA_NLDEV_ATTR_NDEV_NAME   = 51
	RDMA_NLDEV_ATTR_LINK_TYPE   = 65
)
