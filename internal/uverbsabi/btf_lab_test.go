package uverbsabi

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/btfcheck"
)

// handConsts are the hand-written constants of uverbsabi.go that the
// kernel's BTF holds (anonymous enums the compiler kept), looked up among
// every enumerator of ib_uverbs', ib_core's and vmlinux's BTF. The macros
// are not in BTF: RDMA_VERBS_IOCTL is checked below, the extended command
// flag against libibverbs (uverbs' TestOracleQueryDeviceEx).
var handConsts = []btfcheck.Const{
	{Name: "UVERBS_ATTR_F_MANDATORY", Value: UVERBS_ATTR_F_MANDATORY},
	{Name: "UVERBS_ATTR_F_VALID_OUTPUT", Value: UVERBS_ATTR_F_VALID_OUTPUT},
	{Name: "UVERBS_ATTR_UHW_IN", Value: UVERBS_ATTR_UHW_IN},
	{Name: "UVERBS_ATTR_UHW_OUT", Value: UVERBS_ATTR_UHW_OUT},
	{Name: "IB_USER_VERBS_EX_CMD_QUERY_DEVICE", Value: IB_USER_VERBS_EX_CMD_QUERY_DEVICE},
	{Name: "IB_USER_VERBS_EX_CMD_MODIFY_QP", Value: IB_USER_VERBS_EX_CMD_MODIFY_QP},
	{Name: "RDMA_NL_NLDEV", Value: RDMA_NL_NLDEV},
}

// RDMA_VERBS_IOCTL is _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr), the
// number rdma-core's and the kernel's headers compute.
func TestVerbsIoctlNumber(t *testing.T) {
	if RDMA_VERBS_IOCTL != 0xc0181b01 {
		t.Errorf("RDMA_VERBS_IOCTL = %#x; _IOWR(0x1b, 1, 24 bytes) is 0xc0181b01", RDMA_VERBS_IOCTL)
	}
}
