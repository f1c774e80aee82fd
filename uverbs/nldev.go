package uverbs

import (
	"fmt"

	"github.com/mlx5go/mlx5go/internal/netlink"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

// NLDevice is an RDMA device as RDMA netlink (RDMA_NLDEV_CMD_GET)
// describes it.
type NLDevice struct {
	Index        uint32
	Name         string
	FWVersion    string
	NodeGUID     uint64 // as a number; FormatGUID prints it as sysfs does
	SysImageGUID uint64
	NodeType     uint8
	Protocol     string // "roce", "ib", "iw", ...
	CapFlags     uint64
	Ports        uint32
}

// FormatGUID prints a GUID the way sysfs and ibv_devinfo do:
// "0011:2233:4455:6677".
func FormatGUID(v uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", v>>48, v>>32&0xffff, v>>16&0xffff, v&0xffff)
}

func nldevRequest(cmd uint16, flags uint16, attrs *netlink.Attrs) ([][]byte, error) {
	c, err := netlink.Dial(unix.NETLINK_RDMA)
	if err != nil {
		return nil, fmt.Errorf("uverbs: rdma netlink: %w", err)
	}
	defer c.Close()
	var payload []byte
	if attrs != nil {
		payload = attrs.Bytes()
	}
	return c.Request(uverbsabi.RDMA_NL_GET_TYPE(uverbsabi.RDMA_NL_NLDEV, cmd), flags, payload)
}

// AddLink creates a software RDMA device: what `rdma link add NAME type
// LINKTYPE netdev NETDEV` sends (RDMA_NLDEV_CMD_NEWLINK), e.g. an rdma_rxe
// device on an Ethernet netdev. It needs CAP_NET_ADMIN.
func AddLink(name, linkType, netdev string) error {
	var a netlink.Attrs
	a.String(uverbsabi.RDMA_NLDEV_ATTR_DEV_NAME, name)
	a.String(uverbsabi.RDMA_NLDEV_ATTR_LINK_TYPE, linkType)
	a.String(uverbsabi.RDMA_NLDEV_ATTR_NDEV_NAME, netdev)
	if _, err := nldevRequest(uverbsabi.RDMA_NLDEV_CMD_NEWLINK, 0, &a); err != nil {
		return fmt.Errorf("uverbs: add %s link %s on %s (nldev newlink): %w", linkType, name, netdev, err)
	}
	return nil
}

// NetlinkDevices lists the RDMA devices through RDMA netlink.
func NetlinkDevices() ([]NLDevice, error) {
	msgs, err := nldevRequest(uverbsabi.RDMA_NLDEV_CMD_GET, unix.NLM_F_DUMP, nil)
	if err != nil {
		return nil, fmt.Errorf("uverbs: list devices (nldev get): %w", err)
	}
	var devs []NLDevice
	for _, m := range msgs {
		attrs, err := netlink.ParseAttrs(m)
		if err != nil {
			return nil, fmt.Errorf("uverbs: nldev get: %w", err)
		}
		var d NLDevice
		for _, a := range attrs {
			switch a.Type {
			case uverbsabi.RDMA_NLDEV_ATTR_DEV_INDEX:
				d.Index = a.Uint32()
			case uverbsabi.RDMA_NLDEV_ATTR_DEV_NAME:
				d.Name = a.String()
			case uverbsabi.RDMA_NLDEV_ATTR_FW_VERSION:
				d.FWVersion = a.String()
			case uverbsabi.RDMA_NLDEV_ATTR_NODE_GUID:
				d.NodeGUID = a.Uint64()
			case uverbsabi.RDMA_NLDEV_ATTR_SYS_IMAGE_GUID:
				d.SysImageGUID = a.Uint64()
			case uverbsabi.RDMA_NLDEV_ATTR_DEV_NODE_TYPE:
				if len(a.Data) > 0 {
					d.NodeType = a.Data[0]
				}
			case uverbsabi.RDMA_NLDEV_ATTR_DEV_PROTOCOL:
				d.Protocol = a.String()
			case uverbsabi.RDMA_NLDEV_ATTR_CAP_FLAGS:
				d.CapFlags = a.Uint64()
			case uverbsabi.RDMA_NLDEV_ATTR_PORT_INDEX:
				d.Ports = a.Uint32()
			}
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// ResourceCounts returns the kernel's count of each resource type ("pd",
// "cq", "qp", "mr", "ctx", "srq", "cm_id") on the device with netlink index
// index (RDMA_NLDEV_CMD_RES_GET), across all processes.
func ResourceCounts(index uint32) (map[string]uint64, error) {
	var req netlink.Attrs
	req.Uint32(uverbsabi.RDMA_NLDEV_ATTR_DEV_INDEX, index)
	msgs, err := nldevRequest(uverbsabi.RDMA_NLDEV_CMD_RES_GET, 0, &req)
	if err != nil {
		return nil, fmt.Errorf("uverbs: resource counts (nldev res get): %w", err)
	}
	counts := map[string]uint64{}
	for _, m := range msgs {
		attrs, err := netlink.ParseAttrs(m)
		if err != nil {
			return nil, err
		}
		for _, a := range attrs {
			if a.Type != uverbsabi.RDMA_NLDEV_ATTR_RES_SUMMARY {
				continue
			}
			entries, err := netlink.ParseAttrs(a.Data)
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				fields, err := netlink.ParseAttrs(e.Data)
				if err != nil {
					return nil, err
				}
				var name string
				var curr uint64
				for _, f := range fields {
					switch f.Type {
					case uverbsabi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME:
						name = f.String()
					case uverbsabi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR:
						curr = f.Uint64()
					}
				}
				if name != "" {
					counts[name] = curr
				}
			}
		}
	}
	return counts, nil
}
