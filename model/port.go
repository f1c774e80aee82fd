package model

import (
	"fmt"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// The port: every profile has one Ethernet port with RoCE (port_type 1,
// num_ports 1). What the kernel answers for it follows mlx5_query_port_roce
// (drivers/infiniband/hw/mlx5/main.c) and the core's GID table management
// (drivers/infiniband/core/roce_gid_mgmt.c); the netdev behind it (its
// MAC, its MTU, its one IPv4 address, link up) is the model's choice, the
// same for every HCA: the model has no network, only the loopback of one
// port.

// The model's netdev.
var (
	// portMAC is a locally administered unicast MAC.
	portMAC = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	// portIPv4 is 192.0.2.1 (TEST-NET-1, RFC 5737), on a /24.
	portIPv4 = [4]byte{192, 0, 2, 1}
	// portIPv6 is 2001:db8::1 (the documentation prefix, RFC 3849), on a
	// /64.
	portIPv6 = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
)

// portNetdevMTU is the netdev's MTU: Ethernet's 1500, which iboe_get_mtu
// turns into IB_MTU_1024 (the largest IB MTU whose packet, with the RoCE
// headers, fits).
const portNetdevMTU = 1500

// enum ib_port_state, enum ib_mtu, IB_LINK_LAYER_ETHERNET, port
// capability flags (include/rdma/ib_verbs.h, ib_mad.h,
// <rdma/ib_user_ioctl_verbs.h>), enum ib_uverbs_gid_type.
const (
	ibPortActive         = 4
	ibMTU256             = 1
	ibMTU1024            = 3
	ibMTU4096            = 5
	linkLayerEthernet    = 2
	ibPortCMSup          = 1 << 16 // IB_PORT_CM_SUP
	uverbsPCFIPBasedGIDs = 1 << 26 // IB_UVERBS_PCF_IP_BASED_GIDS (make_port_cap_flags for ip_gids)
	gidTypeRoCEv1        = 1       // IB_UVERBS_GID_TYPE_ROCE_V1
	gidTypeRoCEv2        = 2       // IB_UVERBS_GID_TYPE_ROCE_V2
	ibGRHBytes           = 40      // struct ib_grh: what a UD receive buffer starts with
)

// iboeMTU is iboe_get_mtu (include/rdma/ib_addr.h): the largest IB MTU
// that fits in an Ethernet MTU once the RoCE headers are taken off.
func iboeMTU(mtu int) uint8 {
	// IB_GRH_BYTES + IB_UDP_BYTES + IB_BTH_BYTES + IB_EXT_XRC_BYTES +
	// IB_EXT_ATOMICETH_BYTES + IB_ICRC_BYTES
	mtu -= 40 + 8 + 12 + 4 + 28 + 4
	switch {
	case mtu >= 4096:
		return ibMTU4096
	case mtu >= 2048:
		return 4
	case mtu >= 1024:
		return ibMTU1024
	case mtu >= 512:
		return 2
	case mtu >= 256:
		return ibMTU256
	}
	return 0
}

// mtuBytes is the byte size of an enum ib_mtu.
func mtuBytes(m uint8) int { return 128 << m }

// QueryPort answers ibv_query_port as mlx5_query_port_roce does for the
// model's netdev: ACTIVE (the netdev is up), max MTU 4096, the active MTU
// from the netdev's MTU, the GID table of roce_address_table_size
// entries, CM supported and IP-based GIDs, max_msg_sz 1 << log_max_msg,
// no LID.
func (d *Device) QueryPort(port uint8) (seam.PortAttr, error) {
	const call = "query port"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return seam.PortAttr{}, err
	}
	if !d.h.portValid(port) {
		return seam.PortAttr{}, kerr(call, unix.EINVAL, fmt.Sprintf("rdma_is_port_valid: the device has %d port(s)", d.h.prof.cap(prm.CmdHcaCap.NumPorts)))
	}
	return seam.PortAttr{
		State:        ibPortActive,
		MaxMTU:       ibMTU4096,
		ActiveMTU:    min(ibMTU4096, iboeMTU(portNetdevMTU)),
		GIDTableLen:  uint32(d.h.prof.roceCap(prm.RoceCap.RoceAddressTableSize)),
		PortCapFlags: ibPortCMSup | uverbsPCFIPBasedGIDs,
		MaxMsgSz:     1 << d.h.prof.cap(prm.CmdHcaCap.LogMaxMsg),
		LinkLayer:    linkLayerEthernet,
	}, nil
}

// portValid is rdma_is_port_valid.
func (h *hca) portValid(port uint8) bool {
	return port >= 1 && uint64(port) <= h.prof.cap(prm.CmdHcaCap.NumPorts)
}

// gidTable is the port's GID table as the core fills it for a netdev
// with one IPv4 and one IPv6 address: the default GIDs (the link-local
// IPv6 address made from the MAC, fe80::EUI-64) at indexes 0 (RoCE v1)
// and 1 (RoCE v2), then the IPv4-mapped address at 2 (v1) and 3 (v2),
// then the IPv6 address at 4 (v1) and 5 (v2), in the order the
// addresses were added (roce_gid_mgmt.c's enum_netdev_ipv4_ips, then
// enum_netdev_ipv6_ips).
func (h *hca) gidTable() []seam.GIDEntry {
	ll := [16]byte{0: 0xfe, 1: 0x80}
	ll[8] = portMAC[0] ^ 0x02 // the universal/local bit flipped
	ll[9], ll[10] = portMAC[1], portMAC[2]
	ll[11], ll[12] = 0xff, 0xfe
	ll[13], ll[14], ll[15] = portMAC[3], portMAC[4], portMAC[5]
	var v4 [16]byte
	v4[10], v4[11] = 0xff, 0xff
	copy(v4[12:], portIPv4[:])
	var t []seam.GIDEntry
	for i, g := range []struct {
		gid [16]byte
		typ uint32
	}{{ll, gidTypeRoCEv1}, {ll, gidTypeRoCEv2}, {v4, gidTypeRoCEv1}, {v4, gidTypeRoCEv2}, {portIPv6, gidTypeRoCEv1}, {portIPv6, gidTypeRoCEv2}} {
		t = append(t, seam.GIDEntry{GID: g.gid, Index: uint32(i), Port: 1, Type: g.typ, MAC: portMAC})
	}
	return t
}

// gid returns GID table entry index of port 1; ok is false for an empty
// entry (rdma_get_gid_attr's EINVAL).
func (h *hca) gid(index uint8) (seam.GIDEntry, bool) {
	t := h.gidTable()
	if int(index) >= len(t) {
		return seam.GIDEntry{}, false
	}
	return t[index], true
}

// isPortGID reports whether g is one of the port's addresses.
func (h *hca) isPortGID(g [16]byte) bool {
	for _, e := range h.gidTable() {
		if e.GID == g {
			return true
		}
	}
	return false
}

// QueryGIDTable answers ibv_query_gid_table: the valid entries of the
// port's GID table (gidTable).
func (d *Device) QueryGIDTable() ([]seam.GIDEntry, error) {
	const call = "query gid table"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return nil, err
	}
	return d.h.gidTable(), nil
}

// ipv4Mapped reports whether g is an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d), as RoCE v2 GIDs of IPv4 addresses are.
func ipv4Mapped(g [16]byte) bool {
	for _, b := range g[:10] {
		if b != 0 {
			return false
		}
	}
	return g[10] == 0xff && g[11] == 0xff
}

// linkLocal reports whether g is an IPv6 link-local address (fe80::/64),
// as rdma_link_local_addr does.
func linkLocal(g [16]byte) bool {
	return g[0] == 0xfe && g[1] == 0x80 && g[2] == 0 && g[3] == 0 && g[4] == 0 && g[5] == 0 && g[6] == 0 && g[7] == 0
}
