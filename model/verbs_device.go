package model

import (
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// The device query (ibv_query_device_ex): what Linux 6.1's
// mlx5_ib_query_device (drivers/infiniband/hw/mlx5/main.c) answers for
// the profile, through ib_uverbs_ex_query_device. docs/MODEL.md
// ("The device query") lists every field.

// Kernel facts mlx5_ib_query_device uses that are not the device's.
const (
	// ibAtomicNone and ibAtomicHCA are enum ib_atomic_cap.
	ibAtomicNone = 0
	ibAtomicHCA  = 1
	// mlx5AtomicOpsCmpSwap, mlx5AtomicOpsFetchAdd and the extended
	// (masked) ones are atomic_operations bits (include/linux/mlx5/
	// driver.h); mlx5AtomicSizeQP8Bytes is main.c's
	// MLX5_ATOMIC_SIZE_QP_8BYTES.
	mlx5AtomicOpsCmpSwap          = 1 << 0
	mlx5AtomicOpsFetchAdd         = 1 << 1
	mlx5AtomicOpsExtendedCmpSwap  = 1 << 2
	mlx5AtomicOpsExtendedFetchAdd = 1 << 3
	mlx5AtomicSizeQP8Bytes        = 1 << 3
	// ibQPTRawPacket is IB_QPT_RAW_PACKET.
	ibQPTRawPacket = 8
	// The striding RQ limits of mlx5_ib.h (MLX5_*_SINGLE_*).
	minSingleStrideLogNumBytes   = 6
	maxSingleStrideLogNumBytes   = 13
	minSingleWQELogNumStrides    = 9
	extMinSingleWQELogNumStrides = 3
	maxSingleWQELogNumStrides    = 16
)

// QueryDevice answers the extended query device. drvOut receives struct
// mlx5_ib_query_device_resp as mlx5_ib_query_device fills it: each part
// only if drvOut holds it whole, response_length counting what was
// filled, and that many bytes copied (ib_copy_to_udata). A drvOut shorter
// than comp_mask and response_length, but not empty, is EINVAL.
func (d *Device) QueryDevice(drvOut []byte) (seam.DeviceAttr, error) {
	const call = "query device"
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if err := d.enter(call); err != nil {
		return seam.DeviceAttr{}, err
	}
	var r mlx5abi.Mlx5IbQueryDeviceResp
	r.ResponseLength = uint32(unsafe.Sizeof(r.CompMask) + unsafe.Sizeof(r.ResponseLength))
	outlen := uintptr(len(drvOut))
	if outlen > 0 && outlen < uintptr(r.ResponseLength) {
		return seam.DeviceAttr{}, kerr(call, unix.EINVAL, "mlx5_ib_query_device: the driver response cannot hold comp_mask and response_length")
	}
	d.h.prof.queryDeviceResp(&r, outlen)
	if outlen > 0 {
		putDrv(drvOut, &r, int(r.ResponseLength))
	}
	a := d.h.prof.deviceAttr()
	a.NodeGUID = d.h.guid
	return a, nil
}

// deviceAttr is the generic attributes the seam carries, as
// mlx5_ib_query_device sets them in struct ib_device_attr.
func (p *profile) deviceAttr() seam.DeviceAttr {
	a := seam.DeviceAttr{AtomicCap: ibAtomicNone, HCACoreClock: p.cap(prm.CmdHcaCap.DeviceFrequencyKhz), ODP: p.odpCaps()}
	// cq_caps: MLX5_MAX_CQ_COUNT and MLX5_MAX_CQ_PERIOD (the widths of the
	// CQ context's cq_max_count and cq_period) with the cq_moderation
	// cap, else zero.
	if p.cap(prm.CmdHcaCap.CqModeration) != 0 {
		a.CQModerationCount, a.CQModerationPeriod = mlx5MaxCQCount, mlx5MaxCQPeriod
	}
	// get_atomic_caps_qp: 8-byte compare-and-swap and fetch-and-add, on
	// QPs, answered in host endianness (the current atomic_caps page:
	// mlx5_core's handle_hca_cap_atomic set the mode at probe).
	atomic := p.pages[prm.MLX5_CAP_ATOMIC]
	ops := prm.AtomicCaps.AtomicOperations.Get(atomic)
	const both = mlx5AtomicOpsCmpSwap | mlx5AtomicOpsFetchAdd
	if ops&both == both && prm.AtomicCaps.AtomicSizeQp.Get(atomic)&mlx5AtomicSizeQP8Bytes != 0 &&
		prm.AtomicCaps.AtomicReq8BEndiannessMode.Get(atomic) != 0 {
		a.AtomicCap = ibAtomicHCA
	}
	a.CapFlags = p.deviceCapFlags()
	return a
}

// enum ib_uverbs_device_cap_flags (rdma/ib_user_ioctl_verbs.h), the bits
// mlx5_ib_query_device sets.
const (
	ibDeviceBadPKeyCntr        = 1 << 1
	ibDeviceBadQKeyCntr        = 1 << 2
	ibDeviceAutoPathMig        = 1 << 4
	ibDeviceChangePhyPort      = 1 << 5
	ibDevicePortActiveEvent    = 1 << 10
	ibDeviceSysImageGUID       = 1 << 11
	ibDeviceRCRNRNAKGen        = 1 << 12
	ibDeviceMemWindow          = 1 << 17
	ibDeviceUDIPCsum           = 1 << 18
	ibDeviceXRC                = 1 << 20
	ibDeviceMemMgtExtensions   = 1 << 21
	ibDeviceMemWindowType2B    = 1 << 24
	ibDevicePCIWriteEndPadding = 1 << 36
)

// deviceCapFlags is device_cap_flags as mlx5_ib_query_device derives it
// from the general caps: always CHANGE_PHY_PORT, PORT_ACTIVE_EVENT,
// SYS_IMAGE_GUID and RC_RNR_NAK_GEN; BAD_PKEY_CNTR with pkv, BAD_QKEY_CNTR
// with qkv, AUTO_PATH_MIG with apm, XRC with xrc, MEM_WINDOW and
// MEM_WINDOW_TYPE_2B with imaicl, MEM_MGT_EXTENSIONS unless
// umr_modify_entity_size_disabled, UD_IP_CSUM with ipoib_basic_offloads,
// PCI_WRITE_END_PADDING with end_pad. The raw packet and flow steering
// bits need Ethernet offload and flow table caps, which no profile has.
// Every profile has neither xrc nor imaicl: libibverbs sees a device
// without XRC or memory windows (docs/MODEL.md, "Gaps").
func (p *profile) deviceCapFlags() uint64 {
	f := uint64(ibDeviceChangePhyPort | ibDevicePortActiveEvent | ibDeviceSysImageGUID | ibDeviceRCRNRNAKGen)
	for _, c := range []struct {
		cap  prm.Field
		want uint64
		flag uint64
	}{
		{prm.CmdHcaCap.Pkv, 1, ibDeviceBadPKeyCntr},
		{prm.CmdHcaCap.Qkv, 1, ibDeviceBadQKeyCntr},
		{prm.CmdHcaCap.Apm, 1, ibDeviceAutoPathMig},
		{prm.CmdHcaCap.Xrc, 1, ibDeviceXRC},
		{prm.CmdHcaCap.Imaicl, 1, ibDeviceMemWindow | ibDeviceMemWindowType2B},
		{prm.CmdHcaCap.UmrModifyEntitySizeDisabled, 0, ibDeviceMemMgtExtensions},
		{prm.CmdHcaCap.IpoibBasicOffloads, 1, ibDeviceUDIPCsum},
		{prm.CmdHcaCap.EndPad, 1, ibDevicePCIWriteEndPadding},
	} {
		if p.cap(c.cap) == c.want {
			f |= c.flag
		}
	}
	return f
}

// queryDeviceResp fills struct mlx5_ib_query_device_resp for a driver
// response of outlen bytes, in mlx5_ib_query_device's order. The device
// is not a multiport one (raw_support); the profiles have no Ethernet
// offload, QoS or device memory capability pages (eth_net_offloads and
// qos are 0), so what the kernel reads from those is zero.
func (p *profile) queryDeviceResp(r *mlx5abi.Mlx5IbQueryDeviceResp, outlen uintptr) {
	fits := func(off, size uintptr) bool { return off+size <= outlen }
	add := func(off, size uintptr) bool {
		if !fits(off, size) {
			return false
		}
		r.ResponseLength += uint32(size)
		return true
	}
	gen := prm.CmdHcaCap
	// tso_caps and rss_caps: without eth_net_offloads the kernel counts
	// them and leaves them zero.
	add(unsafe.Offsetof(r.TsoCaps), unsafe.Sizeof(r.TsoCaps))
	add(unsafe.Offsetof(r.RssCaps), unsafe.Sizeof(r.RssCaps))
	if add(unsafe.Offsetof(r.CqeCompCaps), unsafe.Sizeof(r.CqeCompCaps)) && p.cap(gen.CqeCompression) != 0 {
		r.CqeCompCaps.MaxNum = uint32(p.cap(gen.CqeCompressionMaxNum))
		r.CqeCompCaps.SupportedFormat = mlx5abi.MLX5_IB_CQE_RES_FORMAT_HASH | mlx5abi.MLX5_IB_CQE_RES_FORMAT_CSUM
		if p.cap(gen.MiniCqeRespStrideIndex) != 0 {
			r.CqeCompCaps.SupportedFormat |= mlx5abi.MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX
		}
	}
	// packet_pacing_caps: counted (raw_support); rates need the QoS page.
	add(unsafe.Offsetof(r.PacketPacingCaps), unsafe.Sizeof(r.PacketPacingCaps))
	// multi-packet send WQEs are Ethernet caps: none.
	add(unsafe.Offsetof(r.Mlx5IbSupportMultiPktSendWqes), unsafe.Sizeof(r.Mlx5IbSupportMultiPktSendWqes))
	if add(unsafe.Offsetof(r.Flags), unsafe.Sizeof(r.Flags)) {
		if p.cap(gen.CqeCompression128) != 0 {
			r.Flags |= mlx5abi.MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_COMP
		}
		if p.cap(gen.Cqe128Always) != 0 {
			r.Flags |= mlx5abi.MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD
		}
		if p.cap(gen.QpPacketBased) != 0 {
			r.Flags |= mlx5abi.MLX5_IB_QUERY_DEV_RESP_PACKET_BASED_CREDIT_MODE
		}
		r.Flags |= mlx5abi.MLX5_IB_QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT
	}
	// sw_parsing_caps are Ethernet caps: counted, zero.
	add(unsafe.Offsetof(r.SwParsingCaps), unsafe.Sizeof(r.SwParsingCaps))
	if add(unsafe.Offsetof(r.StridingRqCaps), unsafe.Sizeof(r.StridingRqCaps)) && p.cap(gen.StridingRq) != 0 {
		s := &r.StridingRqCaps
		s.MinSingleStrideLogNumOfBytes = minSingleStrideLogNumBytes
		s.MaxSingleStrideLogNumOfBytes = maxSingleStrideLogNumBytes
		s.MinSingleWqeLogNumOfStrides = minSingleWQELogNumStrides
		if p.cap(gen.ExtStrideNumRange) != 0 {
			s.MinSingleWqeLogNumOfStrides = extMinSingleWQELogNumStrides
		}
		s.MaxSingleWqeLogNumOfStrides = maxSingleWQELogNumStrides
		s.SupportedQpts = 1 << ibQPTRawPacket
	}
	// tunnel_offloads_caps are Ethernet caps: counted, zero.
	add(unsafe.Offsetof(r.TunnelOffloadsCaps), unsafe.Sizeof(r.TunnelOffloadsCaps))
	if add(unsafe.Offsetof(r.DciStreamsCaps), unsafe.Sizeof(r.DciStreamsCaps)) {
		r.DciStreamsCaps.MaxLogNumConcurent = uint8(p.cap(gen.LogMaxDciStreamChannels))
		r.DciStreamsCaps.MaxLogNumErrored = uint8(p.cap(gen.LogMaxDciErroredStreams))
	}
}
