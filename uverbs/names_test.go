package uverbs

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// TestGoNamesAreTheKernels: the Go-named constants of the public API
// have the values of the C enumerators they stand for, as
// internal/uverbsabi mirrors them (generated from the kernel's BTF and
// checked against every lab kernel). They are written out in Go so that
// go doc shows no C name; this keeps them equal.
func TestGoNamesAreTheKernels(t *testing.T) {
	for _, c := range []struct {
		name, c   string
		got, want uint64
	}{
		{"DriverUnknown", "RDMA_DRIVER_UNKNOWN", uint64(DriverUnknown), uverbsabi.RDMA_DRIVER_UNKNOWN},
		{"DriverMLX5", "RDMA_DRIVER_MLX5", uint64(DriverMLX5), uverbsabi.RDMA_DRIVER_MLX5},
		{"DriverRXE", "RDMA_DRIVER_RXE", uint64(DriverRXE), uverbsabi.RDMA_DRIVER_RXE},
		{"DeviceResizeMaxWR", "IB_UVERBS_DEVICE_RESIZE_MAX_WR", uint64(DeviceResizeMaxWR), uverbsabi.IB_UVERBS_DEVICE_RESIZE_MAX_WR},
		{"DeviceBadPKeyCntr", "IB_UVERBS_DEVICE_BAD_PKEY_CNTR", uint64(DeviceBadPKeyCntr), uverbsabi.IB_UVERBS_DEVICE_BAD_PKEY_CNTR},
		{"DeviceBadQKeyCntr", "IB_UVERBS_DEVICE_BAD_QKEY_CNTR", uint64(DeviceBadQKeyCntr), uverbsabi.IB_UVERBS_DEVICE_BAD_QKEY_CNTR},
		{"DeviceRawMulti", "IB_UVERBS_DEVICE_RAW_MULTI", uint64(DeviceRawMulti), uverbsabi.IB_UVERBS_DEVICE_RAW_MULTI},
		{"DeviceAutoPathMig", "IB_UVERBS_DEVICE_AUTO_PATH_MIG", uint64(DeviceAutoPathMig), uverbsabi.IB_UVERBS_DEVICE_AUTO_PATH_MIG},
		{"DeviceChangePhyPort", "IB_UVERBS_DEVICE_CHANGE_PHY_PORT", uint64(DeviceChangePhyPort), uverbsabi.IB_UVERBS_DEVICE_CHANGE_PHY_PORT},
		{"DeviceUDAVPortEnforce", "IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE", uint64(DeviceUDAVPortEnforce), uverbsabi.IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE},
		{"DeviceCurrQPStateMod", "IB_UVERBS_DEVICE_CURR_QP_STATE_MOD", uint64(DeviceCurrQPStateMod), uverbsabi.IB_UVERBS_DEVICE_CURR_QP_STATE_MOD},
		{"DeviceShutdownPort", "IB_UVERBS_DEVICE_SHUTDOWN_PORT", uint64(DeviceShutdownPort), uverbsabi.IB_UVERBS_DEVICE_SHUTDOWN_PORT},
		{"DevicePortActiveEvent", "IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT", uint64(DevicePortActiveEvent), uverbsabi.IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT},
		{"DeviceSysImageGUID", "IB_UVERBS_DEVICE_SYS_IMAGE_GUID", uint64(DeviceSysImageGUID), uverbsabi.IB_UVERBS_DEVICE_SYS_IMAGE_GUID},
		{"DeviceRCRNRNAKGen", "IB_UVERBS_DEVICE_RC_RNR_NAK_GEN", uint64(DeviceRCRNRNAKGen), uverbsabi.IB_UVERBS_DEVICE_RC_RNR_NAK_GEN},
		{"DeviceSRQResize", "IB_UVERBS_DEVICE_SRQ_RESIZE", uint64(DeviceSRQResize), uverbsabi.IB_UVERBS_DEVICE_SRQ_RESIZE},
		{"DeviceNNotifyCQ", "IB_UVERBS_DEVICE_N_NOTIFY_CQ", uint64(DeviceNNotifyCQ), uverbsabi.IB_UVERBS_DEVICE_N_NOTIFY_CQ},
		{"DeviceMemWindow", "IB_UVERBS_DEVICE_MEM_WINDOW", uint64(DeviceMemWindow), uverbsabi.IB_UVERBS_DEVICE_MEM_WINDOW},
		{"DeviceUDIPCsum", "IB_UVERBS_DEVICE_UD_IP_CSUM", uint64(DeviceUDIPCsum), uverbsabi.IB_UVERBS_DEVICE_UD_IP_CSUM},
		{"DeviceXRC", "IB_UVERBS_DEVICE_XRC", uint64(DeviceXRC), uverbsabi.IB_UVERBS_DEVICE_XRC},
		{"DeviceMemMgtExtensions", "IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS", uint64(DeviceMemMgtExtensions), uverbsabi.IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS},
		{"DeviceMemWindowType2A", "IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A", uint64(DeviceMemWindowType2A), uverbsabi.IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A},
		{"DeviceMemWindowType2B", "IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B", uint64(DeviceMemWindowType2B), uverbsabi.IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B},
		{"DeviceRCIPCsum", "IB_UVERBS_DEVICE_RC_IP_CSUM", uint64(DeviceRCIPCsum), uverbsabi.IB_UVERBS_DEVICE_RC_IP_CSUM},
		{"DeviceRawIPCsum", "IB_UVERBS_DEVICE_RAW_IP_CSUM", uint64(DeviceRawIPCsum), uverbsabi.IB_UVERBS_DEVICE_RAW_IP_CSUM},
		{"DeviceManagedFlowSteering", "IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING", uint64(DeviceManagedFlowSteering), uverbsabi.IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING},
		{"DeviceRawScatterFCS", "IB_UVERBS_DEVICE_RAW_SCATTER_FCS", uint64(DeviceRawScatterFCS), uverbsabi.IB_UVERBS_DEVICE_RAW_SCATTER_FCS},
		{"DevicePCIWriteEndPadding", "IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING", uint64(DevicePCIWriteEndPadding), uverbsabi.IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING},
		{"RawPacketCapCVLANStripping", "IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING", uint64(RawPacketCapCVLANStripping), uverbsabi.IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING},
		{"RawPacketCapScatterFCS", "IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS", uint64(RawPacketCapScatterFCS), uverbsabi.IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS},
		{"RawPacketCapIPCsum", "IB_UVERBS_RAW_PACKET_CAP_IP_CSUM", uint64(RawPacketCapIPCsum), uverbsabi.IB_UVERBS_RAW_PACKET_CAP_IP_CSUM},
		{"RawPacketCapDelayDrop", "IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP", uint64(RawPacketCapDelayDrop), uverbsabi.IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP},
		{"GIDTypeIB", "IB_UVERBS_GID_TYPE_IB", uint64(GIDTypeIB), uverbsabi.IB_UVERBS_GID_TYPE_IB},
		{"GIDTypeRoCEv1", "IB_UVERBS_GID_TYPE_ROCE_V1", uint64(GIDTypeRoCEv1), uverbsabi.IB_UVERBS_GID_TYPE_ROCE_V1},
		{"GIDTypeRoCEv2", "IB_UVERBS_GID_TYPE_ROCE_V2", uint64(GIDTypeRoCEv2), uverbsabi.IB_UVERBS_GID_TYPE_ROCE_V2},
		{"AttrMandatory", "UVERBS_ATTR_F_MANDATORY", uint64(AttrMandatory), uverbsabi.UVERBS_ATTR_F_MANDATORY},
		{"AttrValidOutput", "UVERBS_ATTR_F_VALID_OUTPUT", uint64(AttrValidOutput), uverbsabi.UVERBS_ATTR_F_VALID_OUTPUT},
		{"AccessLocalWrite", "IB_UVERBS_ACCESS_LOCAL_WRITE", uint64(AccessLocalWrite), uverbsabi.IB_UVERBS_ACCESS_LOCAL_WRITE},
		{"AccessRemoteWrite", "IB_UVERBS_ACCESS_REMOTE_WRITE", uint64(AccessRemoteWrite), uverbsabi.IB_UVERBS_ACCESS_REMOTE_WRITE},
		{"AccessRemoteRead", "IB_UVERBS_ACCESS_REMOTE_READ", uint64(AccessRemoteRead), uverbsabi.IB_UVERBS_ACCESS_REMOTE_READ},
		{"AccessRemoteAtomic", "IB_UVERBS_ACCESS_REMOTE_ATOMIC", uint64(AccessRemoteAtomic), uverbsabi.IB_UVERBS_ACCESS_REMOTE_ATOMIC},
		{"AccessMWBind", "IB_UVERBS_ACCESS_MW_BIND", uint64(AccessMWBind), uverbsabi.IB_UVERBS_ACCESS_MW_BIND},
		{"AccessZeroBased", "IB_UVERBS_ACCESS_ZERO_BASED", uint64(AccessZeroBased), uverbsabi.IB_UVERBS_ACCESS_ZERO_BASED},
		{"AccessOnDemand", "IB_UVERBS_ACCESS_ON_DEMAND", uint64(AccessOnDemand), uverbsabi.IB_UVERBS_ACCESS_ON_DEMAND},
		{"AccessHugeTLB", "IB_UVERBS_ACCESS_HUGETLB", uint64(AccessHugeTLB), uverbsabi.IB_UVERBS_ACCESS_HUGETLB},
		{"AccessRelaxedOrdering", "IB_UVERBS_ACCESS_RELAXED_ORDERING", uint64(AccessRelaxedOrdering), uverbsabi.IB_UVERBS_ACCESS_RELAXED_ORDERING},
		{"QPTypeRC", "IB_UVERBS_QPT_RC", uint64(QPTypeRC), uverbsabi.IB_UVERBS_QPT_RC},
		{"QPTypeUC", "IB_UVERBS_QPT_UC", uint64(QPTypeUC), uverbsabi.IB_UVERBS_QPT_UC},
		{"QPTypeUD", "IB_UVERBS_QPT_UD", uint64(QPTypeUD), uverbsabi.IB_UVERBS_QPT_UD},
		{"QPTypeDriver", "IB_UVERBS_QPT_DRIVER", uint64(QPTypeDriver), uverbsabi.IB_UVERBS_QPT_DRIVER},
		{"SRQAttrMaxWR", "IB_SRQ_MAX_WR", uint64(SRQAttrMaxWR), uverbsabi.IB_SRQ_MAX_WR},
		{"SRQAttrLimit", "IB_SRQ_LIMIT", uint64(SRQAttrLimit), uverbsabi.IB_SRQ_LIMIT},
		{"QPCreateSQSigAll", "IB_UVERBS_QP_CREATE_SQ_SIG_ALL", uint64(QPCreateSQSigAll), uverbsabi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, %s is %#x", c.name, c.got, c.c, c.want)
		}
	}
}
