package uverbsabi

import (
	"slices"
	"testing"

	"github.com/mlx5go/mlx5go/internal/abigen"
	"github.com/mlx5go/mlx5go/internal/btfcheck"
	"github.com/mlx5go/mlx5go/internal/labenv"
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

// TestLabBTFUverbsABI checks the package against the booted kernel's
// BTF: the generated enums and structs (generated_btf_test.go) and
// handConsts under internal/btfcheck's rules, then the package
// regenerated from that kernel (internal/abigen.Check).
func TestLabBTFUverbsABI(t *testing.T) {
	labenv.Require(t)
	abigen.CheckRunningKernel(t, "internal/uverbsabi", slices.Concat(generatedConsts, handConsts), generatedLayouts)
}

// TestGeneratedLayouts checks, without the lab, that Go lays the
// generated structs out as the kernel they were generated from does, and
// that the generated constants are its values (the BTF snapshot in
// internal/abigen/testdata).
func TestGeneratedLayouts(t *testing.T) {
	abigen.CheckSnapshot(t, "internal/uverbsabi", "../abigen/testdata", generatedConsts, generatedLayouts)
}

// RDMA_VERBS_IOCTL is _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr), the
// number rdma-core's and the kernel's headers compute.
func TestVerbsIoctlNumber(t *testing.T) {
	if RDMA_VERBS_IOCTL != 0xc0181b01 {
		t.Errorf("RDMA_VERBS_IOCTL = %#x; _IOWR(0x1b, 1, 24 bytes) is 0xc0181b01", RDMA_VERBS_IOCTL)
	}
}
