package model

import (
	"encoding/binary"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
)

// UD sends. A UD SEND or SEND_IMM carries, after the control segment, a
// datagram segment (struct mlx5_wqe_datagram_seg: the 48-byte struct
// mlx5_av, include/linux/mlx5/qp.h): the Q_Key, the destination QPN
// (bit 31, MLX5_EXTENDED_UD_AV, marks libmlx5's extended address
// vector), and on RoCE the destination MAC and GID with the GRH's
// traffic class, hop limit, flow label and source GID index. The model's
// network is its own port: a datagram reaches a QP of this HCA when its
// destination is the port (one of its GIDs and its MAC); anything else
// leaves for hosts the model does not have. UD is unreliable: a datagram
// nobody takes is lost and the sender completes all the same. The send
// runs through the transports' one requester and responder
// (transport.go, udTransport); what is UD's own is here: the datagram's
// addressing and its network header.

// The address vector's fields (struct mlx5_av), as byte offsets in the
// datagram segment.
const (
	avQKey      = 0
	avDQP       = 8 // dqp_dct: the destination QP in the low 24 bits
	avRMAC      = 20
	avTclass    = 26
	avHopLimit  = 27
	avGRHGIDFl  = 28 // bit 30: a GRH (InfiniBand; reserved on RoCE); bits 27:20 the source GID index; 19:0 the flow label
	avRGID      = 32
	avSize      = 48
	qkeyPrivBit = 1 << 31
)

// Network header types of a UD receive CQE on RoCE (flags_rqpn bits
// 25:24, MLX5_CQE_ROCE_L3_HEADER_TYPE_*, device.h) and its GRH-present
// bits (29:28, read as "g" by mlx5_ib and libmlx5).
const (
	cqeL3GRH  = 0x0
	cqeL3IPv6 = 0x1
	cqeL3IPv4 = 0x2
	cqeGRH    = 1 << 28
)

// avPort checks that address vector av (UD's datagram segment, DC's
// struct mlx5_wqe_av) addresses the model's port: a valid source GID
// index, a destination GID of the port and its MAC. The port is RoCE:
// every packet has a GRH, and the AV's GRH bit is reserved and not read
// (libmlx5's mlx5_create_ah leaves it 0 on Ethernet; mlx5_ib's
// create_ib_ah sets it for any AH with a GRH). Anywhere else is off the
// model's network: nothing answers.
func (h *hca) avPort(av []byte) (sgid seam.GIDEntry, rgid [16]byte, f *wqeFail) {
	gidFl := binary.BigEndian.Uint32(av[avGRHGIDFl:])
	copy(rgid[:], av[avRGID:])
	sgid, ok := h.gid(uint8(gidFl >> 20))
	if !ok || !h.isPortGID(rgid) || [6]byte(av[avRMAC:avRMAC+6]) != portMAC {
		return sgid, rgid, retryExceeded("the address vector (source GID index %d, destination GID %x, MAC %x) is not the model's port: nothing answers",
			uint8(gidFl>>20), rgid, av[avRMAC:avRMAC+6])
	}
	return sgid, rgid, nil
}

// datagramPeer finds the UD QP a datagram of n bytes of UD QP q reaches,
// by the address vector of request m, and builds the network header its
// receive buffer starts with. The failures are the datagram's losses (UD
// acknowledges nothing: udTransport drops them).
func (h *hca) datagramPeer(q *qpObj, m *request, n int) (peer, *wqeFail) {
	// C10-93.1.1 (rxe_req.c): a message over the MTU sends no packet and
	// raises no error. The MTU is the QP's (4096 for UD, set by mlx5_ib)
	// and the port's active one, whichever is smaller.
	if mtu := min(uint8(prm.Qpc.Mtu.Get(q.qpc)), iboeMTU(portNetdevMTU)); n > mtuBytes(mtu) {
		return peer{}, retryExceeded("a datagram of %d bytes over the path MTU of %d: no packet", n, mtuBytes(mtu))
	}
	av := m.av
	sgid, rgid, f := h.avPort(av)
	if f != nil {
		return peer{}, f
	}
	dqp := binary.BigEndian.Uint32(av[avDQP:]) & 0xffffff
	r, ok := h.qps[dqp]
	if !ok || r.dct || prm.Qpc.St.Get(r.qpc) != stUD || !receiving(r) {
		return peer{}, retryExceeded("no UD QP %#x that receives", dqp)
	}
	// The Q_Key: one with the high bit set means the sender's own (rxe's
	// init_req_packet); it must be the receiver's (rxe_recv.c check_keys),
	// else the datagram is dropped.
	qkey := binary.BigEndian.Uint32(av[avQKey:])
	if qkey&qkeyPrivBit != 0 {
		qkey = uint32(prm.Qpc.QKey.Get(q.qpc))
	}
	if qkey != uint32(prm.Qpc.QKey.Get(r.qpc)) {
		return peer{}, retryExceeded("Q_Key %#x is not UD QP %#x's", qkey, dqp)
	}
	flowLabel := binary.BigEndian.Uint32(av[avGRHGIDFl:]) & flowLabelMask
	grh, l3 := roceGRH(sgid, rgid, av[avTclass], av[avHopLimit], flowLabel, n, m.w.opcode == opSendImm)
	return peer{r: r, flags: cqeGRH | uint32(l3)<<24, grh: grh}, nil
}

// roceGRH is the 40 bytes a UD receive buffer starts with on RoCE, and the
// CQE's network header type: for RoCE v2 over IPv4 (an IPv4-mapped source
// GID) 20 zero bytes and the IPv4 header, for RoCE v2 over IPv6 the IPv6
// header, for RoCE v1 the IB GRH (next header 0x1B), as rxe_resp.c copies
// the packet's headers (the device does the same). Lengths count the
// UDP header (v2), BTH, DETH, immediate data, payload and ICRC.
func roceGRH(sgid seam.GIDEntry, dgid [16]byte, tclass, hopLimit uint8, flowLabel uint32, payload int, imm bool) ([]byte, uint8) {
	grh := make([]byte, ibGRHBytes, ibGRHBytes+payload)
	rest := 12 + 8 + payload + 4 // BTH, DETH, payload, ICRC
	if imm {
		rest += 4
	}
	if sgid.Type == gidTypeRoCEv2 && ipv4Mapped(sgid.GID) {
		ip := grh[20:]
		ip[0] = 0x45
		ip[1] = tclass
		binary.BigEndian.PutUint16(ip[2:], uint16(20+8+rest))
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
		ip[8] = hopLimit
		ip[9] = 17 // UDP
		copy(ip[12:16], sgid.GID[12:])
		copy(ip[16:20], dgid[12:])
		binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:20]))
		return grh, cqeL3IPv4
	}
	next, l3 := uint8(0x1b), uint8(cqeL3GRH) // IB_GRH_NEXT_HDR
	if sgid.Type == gidTypeRoCEv2 {
		next, l3 = 17, cqeL3IPv6
		rest += 8
	}
	binary.BigEndian.PutUint32(grh[0:], 6<<28|uint32(tclass)<<20|flowLabel&flowLabelMask)
	binary.BigEndian.PutUint16(grh[4:], uint16(rest))
	grh[6] = next
	grh[7] = hopLimit
	copy(grh[8:24], sgid.GID[:])
	copy(grh[24:40], dgid[:])
	return grh, l3
}

// ipChecksum is the IPv4 header checksum (RFC 791).
func ipChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
