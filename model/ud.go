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
// nobody takes is lost and the sender completes all the same.

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

// udSend runs a UD SEND or SEND_IMM.
func (h *hca) udSend(q *qpObj, w *sendWQE) result {
	if len(w.b) < ctrlSegSize+avSize {
		return result{fail: qpOpErr("UD send without a datagram segment")}
	}
	av := w.b[ctrlSegSize : ctrlSegSize+avSize]
	sges, inline, f := dataSegs(w.b[ctrlSegSize+avSize:], true)
	if f != nil {
		return result{fail: f}
	}
	msg, sigs, f := h.gather(q, sges, inline)
	if f != nil {
		return result{fail: f}
	}
	done := result{sigs: sigs}
	// C10-93.1.1 (rxe_req.c): a message over the MTU sends no packet and
	// raises no error. The MTU is the QP's (4096 for UD, set by mlx5_ib)
	// and the port's active one, whichever is smaller.
	mtu := min(uint8(prm.Qpc.Mtu.Get(q.qpc)), iboeMTU(portNetdevMTU))
	if len(msg) > mtuBytes(mtu) {
		return done
	}
	// The port is RoCE: every packet has a GRH, so the AV's GRH bit is
	// reserved and not read. libmlx5's mlx5_create_ah leaves it 0 on
	// Ethernet; mlx5_ib's create_ib_ah sets it.
	gidFl := binary.BigEndian.Uint32(av[avGRHGIDFl:])
	var rgid [16]byte
	copy(rgid[:], av[avRGID:])
	// The port is RoCE: every packet has a GRH, and the AV's GRH bit is
	// reserved. libmlx5's mlx5_create_ah leaves it 0 on Ethernet; mlx5_ib's
	// create_ib_ah sets it for any AH with a GRH. Either way the source GID
	// index and destination GID address the datagram.
	sgid, ok := h.gid(uint8(gidFl >> 20))
	if !ok || !h.isPortGID(rgid) || [6]byte(av[avRMAC:avRMAC+6]) != portMAC {
		return done // anywhere but the port is off the model's network
	}
	r, ok := h.qps[binary.BigEndian.Uint32(av[avDQP:])&0xffffff]
	if !ok || r.dct || prm.Qpc.St.Get(r.qpc) != stUD || !receiving(r) {
		return done
	}
	// The Q_Key: one with the high bit set means the sender's own (rxe's
	// init_req_packet); it must be the receiver's (rxe_recv.c check_keys),
	// else the datagram is dropped.
	qkey := binary.BigEndian.Uint32(av[avQKey:])
	if qkey&qkeyPrivBit != 0 {
		qkey = uint32(prm.Qpc.QKey.Get(q.qpc))
	}
	if qkey != uint32(prm.Qpc.QKey.Get(r.qpc)) {
		return done
	}
	rw, ok := h.recvWQE(r)
	if !ok {
		return done // no receive WQE: class D, dropped
	}
	grh, l3 := roceGRH(sgid, rgid, av[avTclass], av[avHopLimit], gidFl&flowLabelMask, len(msg), w.opcode == opSendImm)
	total := uint64(len(grh) + len(msg))
	var room uint64
	for _, s := range rw.sges {
		if _, e := h.mkey(s.key, r.pdn, accLocalWrite); e != nil {
			// A receive WQE with a bad key: completed in error, the QP
			// goes to ERR; the sender knows nothing of it.
			return h.respFail(q, r, rw, SyndromeLocalProt, nil, 0).with(sigs)
		}
		room += s.n
	}
	if total > room {
		return done // too long for the receive WQE: class D, dropped
	}
	rsigs, _, e := h.scatter(r.pdn, rw.sges, append(grh, msg...))
	for _, s := range rsigs {
		h.sigErrCQE(r, r.recvCQ(), s.key, s.err)
	}
	if e != nil {
		return h.respFail(q, r, rw, SyndromeLocalProt, nil, 0).with(sigs)
	}
	op, imm := uint8(cqeRespSend), uint32(0)
	if w.opcode == opSendImm {
		op, imm = cqeRespSendIm, w.imm
	}
	h.consume(r, rw)
	h.respCQE(r, op, rw.counter, uint32(total), imm, q.qpn, cqeGRH|uint32(l3)<<24, w.fmCeSe&ctrlSolicited != 0)
	return done
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
