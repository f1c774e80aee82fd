package ucma

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/ucmaabi"
)

// TestGoNamesAreTheKernels: the Go-named constants of ucma's API, whose
// values are written out so that its users see no internal package, are
// the values of the kernel's names in internal/ucmaabi (checked against
// the lab kernels' BTF by TestLabBTFUCMA). A Go value typed wrong fails
// here.
func TestGoNamesAreTheKernels(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"PortSpaceTCP", uint64(PortSpaceTCP), ucmaabi.RDMA_PS_TCP},
		{"PortSpaceUDP", uint64(PortSpaceUDP), ucmaabi.RDMA_PS_UDP},
		{"PortSpaceIB", uint64(PortSpaceIB), ucmaabi.RDMA_PS_IB},
		{"PortSpaceIPoIB", uint64(PortSpaceIPoIB), ucmaabi.RDMA_PS_IPOIB},
		{"EventAddrResolved", uint64(EventAddrResolved), ucmaabi.RDMA_CM_EVENT_ADDR_RESOLVED},
		{"EventAddrError", uint64(EventAddrError), ucmaabi.RDMA_CM_EVENT_ADDR_ERROR},
		{"EventRouteResolved", uint64(EventRouteResolved), ucmaabi.RDMA_CM_EVENT_ROUTE_RESOLVED},
		{"EventRouteError", uint64(EventRouteError), ucmaabi.RDMA_CM_EVENT_ROUTE_ERROR},
		{"EventConnectRequest", uint64(EventConnectRequest), ucmaabi.RDMA_CM_EVENT_CONNECT_REQUEST},
		{"EventConnectResponse", uint64(EventConnectResponse), ucmaabi.RDMA_CM_EVENT_CONNECT_RESPONSE},
		{"EventConnectError", uint64(EventConnectError), ucmaabi.RDMA_CM_EVENT_CONNECT_ERROR},
		{"EventUnreachable", uint64(EventUnreachable), ucmaabi.RDMA_CM_EVENT_UNREACHABLE},
		{"EventRejected", uint64(EventRejected), ucmaabi.RDMA_CM_EVENT_REJECTED},
		{"EventEstablished", uint64(EventEstablished), ucmaabi.RDMA_CM_EVENT_ESTABLISHED},
		{"EventDisconnected", uint64(EventDisconnected), ucmaabi.RDMA_CM_EVENT_DISCONNECTED},
		{"EventDeviceRemoval", uint64(EventDeviceRemoval), ucmaabi.RDMA_CM_EVENT_DEVICE_REMOVAL},
		{"EventMulticastJoin", uint64(EventMulticastJoin), ucmaabi.RDMA_CM_EVENT_MULTICAST_JOIN},
		{"EventMulticastError", uint64(EventMulticastError), ucmaabi.RDMA_CM_EVENT_MULTICAST_ERROR},
		{"EventAddrChange", uint64(EventAddrChange), ucmaabi.RDMA_CM_EVENT_ADDR_CHANGE},
		{"EventTimewaitExit", uint64(EventTimewaitExit), ucmaabi.RDMA_CM_EVENT_TIMEWAIT_EXIT},
		{"RejectTimeout", RejectTimeout, ucmaabi.IB_CM_REJ_TIMEOUT},
		{"RejectInvalidServiceID", RejectInvalidServiceID, ucmaabi.IB_CM_REJ_INVALID_SERVICE_ID},
		{"RejectConsumerDefined", RejectConsumerDefined, ucmaabi.IB_CM_REJ_CONSUMER_DEFINED},
		{"RejectVendorOptionNotSupported", RejectVendorOptionNotSupported, ucmaabi.IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED},
		{"SIDRUnsupported", SIDRUnsupported, ucmaabi.IB_SIDR_UNSUPPORTED},
		{"SIDRReject", SIDRReject, ucmaabi.IB_SIDR_REJECT},
		{"SIDRNoQP", SIDRNoQP, ucmaabi.IB_SIDR_NO_QP},
		{"OptionLevelID", OptionLevelID, ucmaabi.RDMA_OPTION_ID},
		{"OptionLevelIB", OptionLevelIB, ucmaabi.RDMA_OPTION_IB},
		{"OptionTOS", OptionTOS, ucmaabi.RDMA_OPTION_ID_TOS},
		{"OptionReuseAddr", OptionReuseAddr, ucmaabi.RDMA_OPTION_ID_REUSEADDR},
		{"OptionAFOnly", OptionAFOnly, ucmaabi.RDMA_OPTION_ID_AFONLY},
		{"OptionAckTimeout", OptionAckTimeout, ucmaabi.RDMA_OPTION_ID_ACK_TIMEOUT},
		{"OptionIBPath", OptionIBPath, ucmaabi.RDMA_OPTION_IB_PATH},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, the kernel's %#x", c.name, c.got, c.want)
		}
	}
}
