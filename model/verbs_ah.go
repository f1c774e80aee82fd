package model

import (
	"fmt"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// Address handles (ib_uverbs_create_ah, rdma_create_user_ah and
// mlx5_ib_create_ah, drivers/infiniband/hw/mlx5/ah.c), and the address
// resolution they share with the modify of a connected QP's path
// (_ib_modify_qp): on RoCE the kernel checks the source GID and resolves
// the destination MAC (ib_resolve_eth_dmac) before the driver sees the
// address. An AH is the kernel's alone: libmlx5 builds the address vector
// in its own memory from the attributes and the MAC mlx5_ib answers.

// vah is an address handle (struct mlx5_ib_ah).
type vah struct {
	d    *Device
	h    seam.Handle
	pd   *uobj
	attr seam.AHAttr
	dmac [6]byte
}

// Values of the address checks (include/rdma/ib_verbs.h, ib_addr.h).
const (
	ibRate600Gbps = 22 // IB_RATE_600_GBPS, the last enum ib_rate
	ibRate2_5Gbps = 2  // IB_RATE_2_5_GBPS, the first
	// resolvedHopLimit is what the IP route gives a resolved unicast
	// destination (ip4_dst_hoplimit and ip6_dst_hoplimit with Linux's
	// default TTL and hop limit).
	resolvedHopLimit = 64
)

// checkAV is rdma_check_ah_attr and rdma_fill_sgid_attr for an address
// on the model's RoCE port: a valid port, a GRH (RoCE needs one), and a
// source GID index that names an entry of the port's table.
func (h *hca) checkAV(call string, a *seam.AHAttr) (seam.GIDEntry, error) {
	if !h.portValid(a.Port) {
		return seam.GIDEntry{}, kerr(call, unix.EINVAL, fmt.Sprintf("rdma_check_ah_attr: port %d", a.Port))
	}
	if !a.IsGlobal {
		return seam.GIDEntry{}, kerr(call, unix.EINVAL, "rdma_check_ah_attr: a RoCE address needs a GRH")
	}
	sgid, ok := h.gid(a.GRH.SGIDIndex)
	if !ok {
		return seam.GIDEntry{}, kerr(call, unix.EINVAL, fmt.Sprintf("rdma_get_gid_attr: GID index %d is empty", a.GRH.SGIDIndex))
	}
	return sgid, nil
}

// resolveDMAC is ib_resolve_eth_dmac: a multicast destination maps to its
// multicast MAC (ip_eth_mc_map, ipv6_eth_mc_map); a link-local one from a
// RoCE v1 source GID gives the MAC in its interface identifier
// (rdma_get_ll_mac); any other goes through IP neighbour resolution
// (rdma_addr_find_l2_eth_by_grh), which on the model's network finds only
// the port itself: one of its GIDs resolves to its MAC with the route's
// hop limit, anything else times out.
func (h *hca) resolveDMAC(call string, sgid seam.GIDEntry, dgid [16]byte) (mac [6]byte, hopLimit int, err error) {
	switch {
	case ipv4Mapped(dgid) && dgid[12]&0xf0 == 0xe0:
		return [6]byte{0x01, 0x00, 0x5e, dgid[13] & 0x7f, dgid[14], dgid[15]}, -1, nil
	case dgid[0] == 0xff:
		return [6]byte{0x33, 0x33, dgid[12], dgid[13], dgid[14], dgid[15]}, -1, nil
	case linkLocal(dgid) && sgid.Type == gidTypeRoCEv1:
		return [6]byte{dgid[8] ^ 0x02, dgid[9], dgid[10], dgid[13], dgid[14], dgid[15]}, -1, nil
	case h.isPortGID(dgid):
		return portMAC, resolvedHopLimit, nil
	}
	return mac, 0, kerr(call, unix.ETIMEDOUT, "rdma_addr_find_l2_eth_by_grh: no neighbour answers for the destination (the model's network is its own port)")
}

// CreateAH is ib_uverbs_create_ah for the model's RoCE port: the checks
// of checkAV, the destination MAC of resolveDMAC, and mlx5_ib_create_ah's
// response (drvOut: struct mlx5_ib_create_ah_resp, at least up to dmac,
// else EINVAL; response_length is that length).
func (d *Device) CreateAH(pd seam.Handle, a *seam.AHAttr, userHandle uint64, drvOut []byte) (seam.Handle, error) {
	const call = "create ah"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return 0, err
	}
	p, err := d.lookupKind(call, pd, kindPD)
	if err != nil {
		return 0, err
	}
	if a == nil {
		return 0, kerr(call, unix.EFAULT, "no attributes")
	}
	sgid, err := d.h.checkAV(call, a)
	if err != nil {
		return 0, err
	}
	dmac, _, err := d.h.resolveDMAC(call, sgid, a.GRH.DGID)
	if err != nil {
		return 0, err
	}
	const minResp = 10 // offsetofend(struct mlx5_ib_create_ah_resp, dmac)
	if len(drvOut) < minResp {
		return 0, kerr(call, unix.EINVAL, "mlx5_ib_create_ah: the response has no room for the MAC")
	}
	putDrv(drvOut, &mlx5abi.Mlx5IbCreateAhResp{ResponseLength: minResp, Dmac: dmac}, minResp)
	v := &vah{d: d, pd: p, attr: *a, dmac: dmac}
	d.h.pds[p.pdn].refs++
	v.h = d.newHandle(&uobj{kind: kindAH, ah: v})
	return v.h, nil
}

// DestroyAH is ib_uverbs_destroy_ah.
func (d *Device) DestroyAH(h seam.Handle) error {
	const call = "destroy ah"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return err
	}
	o, err := d.lookupKind(call, h, kindAH)
	if err != nil {
		return err
	}
	d.destroyAH(o.ah)
	delete(d.handles, h)
	return nil
}

func (d *Device) destroyAH(v *vah) {
	if pd, ok := d.h.pds[v.pd.pdn]; ok {
		pd.refs--
	}
}
