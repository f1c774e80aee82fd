package uverbs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/netlink"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// DeviceAttr is what a device can do: the fields of libibverbs' struct
// ibv_device_attr_ex, from the kernel's extended query device response
// (struct ib_uverbs_ex_query_device_resp).
//
// Fields past the kernel's response are zero. The kernel writes as much of
// its struct as fits in the buffer and reports how much it wrote
// (ResponseLength); an older kernel whose struct is shorter than this
// package's leaves the newer fields out, and QueryDevice reports them as
// zero (unsupported) instead of reading whatever the buffer held, as
// libibverbs does. QueryDevice always passes the whole struct, so the base
// fields and ResponseLength are always written (on the ioctl path the
// kernel does not refuse a shorter buffer; it silently writes less).
//
// TSOCaps, PacketPacingCaps and RSSCaps' RxHash fields are not in the
// kernel's generic response; libibverbs' providers fill them from their
// driver data (mlx5: struct mlx5_ib_query_device_resp). uverbs leaves them
// zero and a provider sets them from the bytes it passed to
// QueryDeviceWithDriverData.
type DeviceAttr struct {
	// FWVer is the firmware version as the kernel encodes it: major in
	// bits 47..32, minor in 31..16, sub-minor in 15..0. FWVersion formats it.
	FWVer        uint64
	NodeGUID     uint64 // host order; FormatGUID prints it as sysfs does
	SysImageGUID uint64 // host order
	MaxMRSize    uint64
	PageSizeCap  uint64 // bit n set: pages of 2^n bytes are supported
	VendorID     uint32 // IEEE OUI, e.g. 0x02c9 for Mellanox
	VendorPartID uint32 // e.g. 4123 (0x101b) for ConnectX-6
	HWVer        uint32

	MaxQP                 uint32
	MaxQPWR               uint32
	DeviceCapFlags        DeviceCapFlags // the low 32 bits
	MaxSGE                uint32
	MaxSGERd              uint32
	MaxCQ                 uint32
	MaxCQE                uint32
	MaxMR                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32
	MaxEERdAtom           uint32
	MaxResRdAtom          uint32
	MaxQPInitRdAtom       uint32
	MaxEEInitRdAtom       uint32
	AtomicCap             AtomicCap
	MaxEE                 uint32
	MaxRDD                uint32
	MaxMW                 uint32
	MaxRawIPv6QP          uint32
	MaxRawEthyQP          uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32
	MaxTotalMcastQPAttach uint32
	MaxAH                 uint32
	MaxFMR                uint32
	MaxMapPerFMR          uint32
	MaxSRQ                uint32
	MaxSRQWR              uint32
	MaxSRQSGE             uint32
	MaxPKeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8

	// CompMask is the kernel's comp_mask (no bits are defined today).
	CompMask uint32
	// ResponseLength is how many bytes of struct
	// ib_uverbs_ex_query_device_resp the kernel wrote.
	ResponseLength uint32

	ODPCaps                 ODPCaps
	CompletionTimestampMask uint64
	HCACoreClock            uint64         // kHz
	DeviceCapFlagsEx        DeviceCapFlags // all 64 bits
	TSOCaps                 TSOCaps
	RSSCaps                 RSSCaps
	MaxWQTypeRQ             uint32
	PacketPacingCaps        PacketPacingCaps
	RawPacketCaps           RawPacketCaps
	TMCaps                  TMCaps
	CQModerationCaps        CQModerationCaps
	MaxDMSize               uint64
	XRCODPCaps              uint32 // ODP capabilities of XRC, as ODPCaps.RC
}

// DriverID names a device's kernel driver in the RDMA ABI (enum
// rdma_driver_id): every call's header carries it, and the kernel refuses
// a call that names another driver. DriverIDOf finds a device's.
type DriverID uint32

// The drivers mlx5go knows by name; DriverIDOf returns any.
const (
	DriverUnknown DriverID = 0  // RDMA_DRIVER_UNKNOWN
	DriverMLX5    DriverID = 1  // RDMA_DRIVER_MLX5
	DriverRXE     DriverID = 14 // RDMA_DRIVER_RXE
)

// DeviceCapFlags are what a device can do (enum
// ib_uverbs_device_cap_flags, libibverbs' IBV_DEVICE_*):
// DeviceAttr.DeviceCapFlags holds the low 32 bits, DeviceCapFlagsEx all 64.
type DeviceCapFlags uint64

// Device capability flags.
const (
	DeviceResizeMaxWR         DeviceCapFlags = 1 << 0  // IB_UVERBS_DEVICE_RESIZE_MAX_WR
	DeviceBadPKeyCntr         DeviceCapFlags = 1 << 1  // IB_UVERBS_DEVICE_BAD_PKEY_CNTR
	DeviceBadQKeyCntr         DeviceCapFlags = 1 << 2  // IB_UVERBS_DEVICE_BAD_QKEY_CNTR
	DeviceRawMulti            DeviceCapFlags = 1 << 3  // IB_UVERBS_DEVICE_RAW_MULTI
	DeviceAutoPathMig         DeviceCapFlags = 1 << 4  // IB_UVERBS_DEVICE_AUTO_PATH_MIG
	DeviceChangePhyPort       DeviceCapFlags = 1 << 5  // IB_UVERBS_DEVICE_CHANGE_PHY_PORT
	DeviceUDAVPortEnforce     DeviceCapFlags = 1 << 6  // IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE
	DeviceCurrQPStateMod      DeviceCapFlags = 1 << 7  // IB_UVERBS_DEVICE_CURR_QP_STATE_MOD
	DeviceShutdownPort        DeviceCapFlags = 1 << 8  // IB_UVERBS_DEVICE_SHUTDOWN_PORT
	DevicePortActiveEvent     DeviceCapFlags = 1 << 10 // IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT
	DeviceSysImageGUID        DeviceCapFlags = 1 << 11 // IB_UVERBS_DEVICE_SYS_IMAGE_GUID
	DeviceRCRNRNAKGen         DeviceCapFlags = 1 << 12 // IB_UVERBS_DEVICE_RC_RNR_NAK_GEN
	DeviceSRQResize           DeviceCapFlags = 1 << 13 // IB_UVERBS_DEVICE_SRQ_RESIZE
	DeviceNNotifyCQ           DeviceCapFlags = 1 << 14 // IB_UVERBS_DEVICE_N_NOTIFY_CQ
	DeviceMemWindow           DeviceCapFlags = 1 << 17 // IB_UVERBS_DEVICE_MEM_WINDOW
	DeviceUDIPCsum            DeviceCapFlags = 1 << 18 // IB_UVERBS_DEVICE_UD_IP_CSUM
	DeviceXRC                 DeviceCapFlags = 1 << 20 // IB_UVERBS_DEVICE_XRC
	DeviceMemMgtExtensions    DeviceCapFlags = 1 << 21 // IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS
	DeviceMemWindowType2A     DeviceCapFlags = 1 << 23 // IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A
	DeviceMemWindowType2B     DeviceCapFlags = 1 << 24 // IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B
	DeviceRCIPCsum            DeviceCapFlags = 1 << 25 // IB_UVERBS_DEVICE_RC_IP_CSUM
	DeviceRawIPCsum           DeviceCapFlags = 1 << 26 // IB_UVERBS_DEVICE_RAW_IP_CSUM
	DeviceManagedFlowSteering DeviceCapFlags = 1 << 29 // IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING
	DeviceRawScatterFCS       DeviceCapFlags = 1 << 34 // IB_UVERBS_DEVICE_RAW_SCATTER_FCS
	DevicePCIWriteEndPadding  DeviceCapFlags = 1 << 36 // IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING
)

// RawPacketCaps are the offloads of raw packet QPs (enum
// ib_uverbs_raw_packet_caps, libibverbs' IBV_RAW_PACKET_CAP_*).
type RawPacketCaps uint32

// Raw packet capabilities.
const (
	RawPacketCapCVLANStripping RawPacketCaps = 1 << 0 // IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING
	RawPacketCapScatterFCS     RawPacketCaps = 1 << 1 // IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS
	RawPacketCapIPCsum         RawPacketCaps = 1 << 2 // IB_UVERBS_RAW_PACKET_CAP_IP_CSUM
	RawPacketCapDelayDrop      RawPacketCaps = 1 << 3 // IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP
)

// AtomicCap is enum ibv_atomic_cap: how atomic operations are guaranteed.
type AtomicCap uint32

// Atomic capabilities (enum ib_atomic_cap in the kernel, ibv_atomic_cap in
// libibverbs).
const (
	AtomicNone AtomicCap = 0 // no atomics
	AtomicHCA  AtomicCap = 1 // atomic among the HCA's own QPs
	AtomicGlob AtomicCap = 2 // atomic with the CPU and other HCAs too
)

func (a AtomicCap) String() string {
	switch a {
	case AtomicNone:
		return "ATOMIC_NONE"
	case AtomicHCA:
		return "ATOMIC_HCA"
	case AtomicGlob:
		return "ATOMIC_GLOB"
	}
	return fmt.Sprintf("AtomicCap(%d)", uint32(a))
}

// ODPCaps are the on-demand paging capabilities. General holds
// IBV_ODP_SUPPORT (bit 0) and IBV_ODP_SUPPORT_IMPLICIT (bit 1); the
// per-transport masks hold IBV_ODP_SUPPORT_SEND, RECV, WRITE, READ, ATOMIC
// and SRQ_RECV (bits 0..5).
type ODPCaps struct {
	General uint64
	RC      uint32
	UC      uint32
	UD      uint32
}

// TSOCaps are the TCP segmentation offload capabilities (provider data).
type TSOCaps struct {
	MaxTSO        uint32
	SupportedQPTs uint32 // bit n: QP type n (IBV_QPT_*)
}

// RSSCaps are the receive-side scaling capabilities. RxHashFieldsMask and
// RxHashFunction come from provider data.
type RSSCaps struct {
	SupportedQPTs              uint32 // bit n: QP type n
	MaxRWQIndirectionTables    uint32
	MaxRWQIndirectionTableSize uint32
	RxHashFieldsMask           uint64
	RxHashFunction             uint8
}

// PacketPacingCaps are the rate-limiting capabilities (provider data).
type PacketPacingCaps struct {
	QPRateLimitMin uint32 // kbit/s
	QPRateLimitMax uint32 // kbit/s
	SupportedQPTs  uint32
}

// TMCaps are the tag matching capabilities.
type TMCaps struct {
	MaxRndvHdrSize uint32
	MaxNumTags     uint32
	Flags          uint32 // bit 0: tag matching on RC QPs
	MaxOps         uint32
	MaxSGE         uint32
}

// CQModerationCaps are the completion moderation limits.
type CQModerationCaps struct {
	MaxCQCount  uint16
	MaxCQPeriod uint16 // microseconds
}

// FWVersion formats FWVer as "major.minor.sub_minor" in decimal, as the
// generic providers of libibverbs do. Kernel drivers may format their own
// version differently (mlx5 pads the sub-minor to four digits); sysfs
// fw_ver has the driver's own string.
func (d *DeviceAttr) FWVersion() string {
	return fmt.Sprintf("%d.%d.%d", d.FWVer>>32&0xffff, d.FWVer>>16&0xffff, d.FWVer&0xffff)
}

// QueryDevice returns the device's attributes (libibverbs'
// ibv_query_device_ex).
func (c *Context) QueryDevice() (DeviceAttr, error) {
	return c.QueryDeviceWithDriverData(nil)
}

// QueryDeviceWithDriverData is QueryDevice with the provider's response:
// drvOut is sent as UVERBS_ATTR_UHW_OUT (by write(), as the extended
// header's provider words) and receives the provider's driver data (mlx5:
// struct mlx5_ib_query_device_resp, whose response_length says how much
// the kernel filled). The call is the one libibverbs' ibv_cmd_query_device_any
// sends for a provider: WRITE_CMD, CORE_IN (struct ib_uverbs_ex_query_device,
// zero), CORE_OUT (the whole struct ib_uverbs_ex_query_device_resp), then
// UHW_OUT. An empty drvOut sends no UHW_OUT, as QueryDevice. A driver
// without driver data for the query may refuse a non-empty one (rxe:
// EINVAL).
func (c *Context) QueryDeviceWithDriverData(drvOut []byte) (DeviceAttr, error) {
	var cmd uverbsabi.IbUverbsExQueryDevice
	var resp uverbsabi.IbUverbsExQueryDeviceResp
	err := c.InvokeWrite("query device (INVOKE_WRITE EX_QUERY_DEVICE)",
		uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbsabi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
		asBytes(&cmd), asBytes(&resp), nil, drvOut)
	if err != nil {
		return DeviceAttr{}, err
	}
	return decodeQueryDeviceResp(&resp), nil
}

// decodeQueryDeviceResp turns the kernel's response into a DeviceAttr,
// taking an extended field only if the kernel's response_length covers it.
func decodeQueryDeviceResp(r *uverbsabi.IbUverbsExQueryDeviceResp) DeviceAttr {
	b := &r.Base
	d := DeviceAttr{
		FWVer:                 b.FwVer,
		NodeGUID:              binary.BigEndian.Uint64(b.NodeGuid[:]),
		SysImageGUID:          binary.BigEndian.Uint64(b.SysImageGuid[:]),
		MaxMRSize:             b.MaxMrSize,
		PageSizeCap:           b.PageSizeCap,
		VendorID:              b.VendorID,
		VendorPartID:          b.VendorPartID,
		HWVer:                 b.HwVer,
		MaxQP:                 b.MaxQp,
		MaxQPWR:               b.MaxQpWr,
		DeviceCapFlags:        DeviceCapFlags(b.DeviceCapFlags),
		MaxSGE:                b.MaxSge,
		MaxSGERd:              b.MaxSgeRd,
		MaxCQ:                 b.MaxCq,
		MaxCQE:                b.MaxCqe,
		MaxMR:                 b.MaxMr,
		MaxPD:                 b.MaxPd,
		MaxQPRdAtom:           b.MaxQpRdAtom,
		MaxEERdAtom:           b.MaxEeRdAtom,
		MaxResRdAtom:          b.MaxResRdAtom,
		MaxQPInitRdAtom:       b.MaxQpInitRdAtom,
		MaxEEInitRdAtom:       b.MaxEeInitRdAtom,
		AtomicCap:             AtomicCap(b.AtomicCap),
		MaxEE:                 b.MaxEe,
		MaxRDD:                b.MaxRdd,
		MaxMW:                 b.MaxMw,
		MaxRawIPv6QP:          b.MaxRawIpv6Qp,
		MaxRawEthyQP:          b.MaxRawEthyQp,
		MaxMcastGrp:           b.MaxMcastGrp,
		MaxMcastQPAttach:      b.MaxMcastQpAttach,
		MaxTotalMcastQPAttach: b.MaxTotalMcastQpAttach,
		MaxAH:                 b.MaxAh,
		MaxFMR:                b.MaxFmr,
		MaxMapPerFMR:          b.MaxMapPerFmr,
		MaxSRQ:                b.MaxSrq,
		MaxSRQWR:              b.MaxSrqWr,
		MaxSRQSGE:             b.MaxSrqSge,
		MaxPKeys:              b.MaxPkeys,
		LocalCAAckDelay:       b.LocalCaAckDelay,
		PhysPortCnt:           b.PhysPortCnt,
		CompMask:              r.CompMask,
		ResponseLength:        r.ResponseLength,
	}
	n := uintptr(r.ResponseLength)
	has := func(off, size uintptr) bool { return n >= off+size }
	if has(unsafe.Offsetof(r.OdpCaps), unsafe.Sizeof(r.OdpCaps)) {
		d.ODPCaps = ODPCaps{General: r.OdpCaps.GeneralCaps, RC: r.OdpCaps.PerTransportCaps.RcOdpCaps, UC: r.OdpCaps.PerTransportCaps.UcOdpCaps, UD: r.OdpCaps.PerTransportCaps.UdOdpCaps}
	}
	if has(unsafe.Offsetof(r.TimestampMask), 8) {
		d.CompletionTimestampMask = r.TimestampMask
	}
	if has(unsafe.Offsetof(r.HcaCoreClock), 8) {
		d.HCACoreClock = r.HcaCoreClock
	}
	if has(unsafe.Offsetof(r.DeviceCapFlagsEx), 8) {
		d.DeviceCapFlagsEx = DeviceCapFlags(r.DeviceCapFlagsEx)
	}
	if has(unsafe.Offsetof(r.RssCaps), unsafe.Sizeof(r.RssCaps)) {
		d.RSSCaps = RSSCaps{
			SupportedQPTs:              r.RssCaps.SupportedQpts,
			MaxRWQIndirectionTables:    r.RssCaps.MaxRwqIndirectionTables,
			MaxRWQIndirectionTableSize: r.RssCaps.MaxRwqIndirectionTableSize,
		}
	}
	if has(unsafe.Offsetof(r.MaxWqTypeRq), 4) {
		d.MaxWQTypeRQ = r.MaxWqTypeRq
	}
	if has(unsafe.Offsetof(r.RawPacketCaps), 4) {
		d.RawPacketCaps = RawPacketCaps(r.RawPacketCaps)
	}
	if has(unsafe.Offsetof(r.TmCaps), unsafe.Sizeof(r.TmCaps)) {
		t := &r.TmCaps
		d.TMCaps = TMCaps{MaxRndvHdrSize: t.MaxRndvHdrSize, MaxNumTags: t.MaxNumTags, Flags: t.Flags, MaxOps: t.MaxOps, MaxSGE: t.MaxSge}
	}
	if has(unsafe.Offsetof(r.CqModerationCaps), unsafe.Sizeof(r.CqModerationCaps)) {
		d.CQModerationCaps = CQModerationCaps{MaxCQCount: r.CqModerationCaps.MaxCqModerationCount, MaxCQPeriod: r.CqModerationCaps.MaxCqModerationPeriod}
	}
	if has(unsafe.Offsetof(r.MaxDmSize), 8) {
		d.MaxDMSize = r.MaxDmSize
	}
	if has(unsafe.Offsetof(r.XrcOdpCaps), 4) {
		d.XRCODPCaps = r.XrcOdpCaps
	}
	return d
}

// GID is a 128-bit global identifier in network byte order: an IPv6
// address on RoCE ports (IPv4-mapped for IPv4 addresses).
type GID [16]byte

// String prints the GID the way sysfs does: eight groups of four hex digits,
// "fe80:0000:0000:0000:5054:00ff:fe12:3456".
func (g GID) String() string {
	var s [39]byte
	const hex = "0123456789abcdef"
	j := 0
	for i := 0; i < 16; i++ {
		if i > 0 && i%2 == 0 {
			s[j] = ':'
			j++
		}
		s[j], s[j+1] = hex[g[i]>>4], hex[g[i]&0xf]
		j += 2
	}
	return string(s[:])
}

// Addr returns the GID as an IPv6 address (IPv4-mapped GIDs stay mapped;
// use Unmap for the IPv4 address).
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g) }

// IsZero reports whether the GID is all zeros (an empty table slot).
func (g GID) IsZero() bool { return g == GID{} }

// GIDType is enum ib_uverbs_gid_type: which protocol a GID serves.
type GIDType uint32

// GID types.
const (
	GIDTypeIB     GIDType = 0 // IB_UVERBS_GID_TYPE_IB
	GIDTypeRoCEv1 GIDType = 1 // IB_UVERBS_GID_TYPE_ROCE_V1
	GIDTypeRoCEv2 GIDType = 2 // IB_UVERBS_GID_TYPE_ROCE_V2
)

// String names the type as libibverbs' ibv_devinfo does ("IB", "RoCE v1",
// "RoCE v2").
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint32(t))
}

// GIDEntry is one valid entry of a port's GID table.
type GIDEntry struct {
	GID   GID
	Index uint32 // index in the port's table
	Port  uint32
	Type  GIDType
	// NetdevIfindex is the interface index of the netdev the GID belongs
	// to (RoCE), 0 if none.
	NetdevIfindex uint32
}

func gidEntryFromABI(e *uverbsabi.IbUverbsGidEntry) GIDEntry {
	return GIDEntry{
		GID:           *(*GID)(unsafe.Pointer(&e.Gid)),
		Index:         e.GidIndex,
		Port:          e.PortNum,
		Type:          GIDType(e.GidType),
		NetdevIfindex: e.NetdevIfindex,
	}
}

// QueryGIDEntry returns entry index of port's GID table
// (UVERBS_METHOD_QUERY_GID_ENTRY, libibverbs' ibv_query_gid_ex). The kernel
// answers EINVAL for a port the device lacks or an index past the table,
// ENODATA for an empty slot.
func (c *Context) QueryGIDEntry(port, index uint32) (GIDEntry, error) {
	op := fmt.Sprintf("query gid entry (port %d, index %d)", port, index)
	if port == 0 {
		return GIDEntry{}, fmt.Errorf("uverbs: %s: ports are numbered from 1", op)
	}
	var resp uverbsabi.IbUverbsGidEntry
	var flags [4]byte
	var a Attrs
	a.InUint64(uverbsabi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, uint64(port))
	a.InUint64(uverbsabi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, uint64(index))
	a.In(uverbsabi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, flags[:])
	a.Out(uverbsabi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, asBytes(&resp))
	if err := c.Invoke(op, uverbsabi.UVERBS_OBJECT_DEVICE, uverbsabi.UVERBS_METHOD_QUERY_GID_ENTRY, &a); err != nil {
		return GIDEntry{}, err
	}
	return gidEntryFromABI(&resp), nil
}

// QueryGIDTable returns every valid GID of every port of the device
// (UVERBS_METHOD_QUERY_GID_TABLE, libibverbs' ibv_query_gid_table), in the
// kernel's order: by port, then by index. Empty slots are left out. It sizes
// the table from the ports' GID table lengths (one query device and one
// query port per port before the table query).
func (c *Context) QueryGIDTable() ([]GIDEntry, error) {
	da, err := c.QueryDevice()
	if err != nil {
		return nil, err
	}
	total := 0
	for p := 1; p <= int(da.PhysPortCnt); p++ {
		pa, err := c.QueryPort(uint8(p))
		if err != nil {
			return nil, err
		}
		total += int(pa.GIDTableLen)
	}
	return c.queryGIDTable(total)
}

// queryGIDTable asks for at most maxEntries entries.
func (c *Context) queryGIDTable(maxEntries int) ([]GIDEntry, error) {
	const op = "query gid table"
	if maxEntries == 0 {
		return []GIDEntry{}, nil
	}
	if maxEntries < 0 || maxEntries > 0xffff/uverbsabi.SizeofIbUverbsGidEntry {
		return nil, fmt.Errorf("uverbs: %s: %d entries do not fit one attribute (at most %d)", op, maxEntries, 0xffff/uverbsabi.SizeofIbUverbsGidEntry)
	}
	entries := make([]uverbsabi.IbUverbsGidEntry, maxEntries)
	var num uint64
	var flags [4]byte
	var a Attrs
	a.InUint64(uverbsabi.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, uverbsabi.SizeofIbUverbsGidEntry)
	a.In(uverbsabi.UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, flags[:])
	a.Out(uverbsabi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, unsafe.Slice((*byte)(unsafe.Pointer(&entries[0])), maxEntries*uverbsabi.SizeofIbUverbsGidEntry))
	a.Out(uverbsabi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, asBytes(&num))
	if err := c.Invoke(op, uverbsabi.UVERBS_OBJECT_DEVICE, uverbsabi.UVERBS_METHOD_QUERY_GID_TABLE, &a); err != nil {
		return nil, err
	}
	if num > uint64(maxEntries) {
		return nil, fmt.Errorf("uverbs: %s: kernel reports %d entries for a buffer of %d", op, num, maxEntries)
	}
	out := make([]GIDEntry, num)
	for i := range out {
		out[i] = gidEntryFromABI(&entries[i])
	}
	return out, nil
}

// UverbsChardev is a device's uverbs character device as RDMA netlink
// reports it (RDMA_NLDEV_CMD_GET_CHARDEV for type "uverbs"), which is how
// libibverbs matches a device to its provider.
type UverbsChardev struct {
	Name string // e.g. "uverbs0", under /dev/infiniband
	ABI  uint64 // the provider's uverbs ABI version
	// Dev is the character device's number in the kernel's 64-bit
	// encoding: minor bits 0..7 and 20..31, major bits 8..19.
	Dev uint64
	// DriverID is the device's enum rdma_driver_id. The kernel refuses
	// (EINVAL) a call whose header carries another, so Open needs it in
	// Options.DriverID.
	DriverID DriverID
}

// NetlinkUverbsChardev returns the uverbs character device of the RDMA
// device with netlink index index (NLDevice.Index).
func NetlinkUverbsChardev(index uint32) (UverbsChardev, error) {
	var req netlink.Attrs
	req.Uint32(uverbsabi.RDMA_NLDEV_ATTR_DEV_INDEX, index)
	req.String(uverbsabi.RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs")
	msgs, err := nldevRequest(uverbsabi.RDMA_NLDEV_CMD_GET_CHARDEV, 0, &req)
	if err != nil {
		return UverbsChardev{}, fmt.Errorf("uverbs: uverbs chardev of device %d (nldev get chardev): %w", index, err)
	}
	var cd UverbsChardev
	found := false
	for _, m := range msgs {
		attrs, err := netlink.ParseAttrs(m)
		if err != nil {
			return UverbsChardev{}, fmt.Errorf("uverbs: nldev get chardev: %w", err)
		}
		for _, a := range attrs {
			switch a.Type {
			case uverbsabi.RDMA_NLDEV_ATTR_CHARDEV_NAME:
				cd.Name, found = a.String(), true
			case uverbsabi.RDMA_NLDEV_ATTR_CHARDEV_ABI:
				cd.ABI = a.Uint64()
			case uverbsabi.RDMA_NLDEV_ATTR_CHARDEV:
				cd.Dev = a.Uint64()
			case uverbsabi.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID:
				// Declared u64; accept a u32 too.
				if len(a.Data) >= 8 {
					cd.DriverID = DriverID(a.Uint64())
				} else {
					cd.DriverID = DriverID(a.Uint32())
				}
			}
		}
	}
	if !found {
		return UverbsChardev{}, fmt.Errorf("uverbs: nldev get chardev: device %d: no uverbs character device in the answer", index)
	}
	return cd, nil
}

// DriverIDOf returns the enum rdma_driver_id of the named device, for
// Options.DriverID: it finds the device in RDMA netlink and asks for its
// uverbs character device.
func DriverIDOf(name string) (DriverID, error) {
	devs, err := NetlinkDevices()
	if err != nil {
		return 0, err
	}
	for _, d := range devs {
		if d.Name == name {
			cd, err := NetlinkUverbsChardev(d.Index)
			if err != nil {
				return 0, err
			}
			return cd.DriverID, nil
		}
	}
	return 0, fmt.Errorf("%w: %q (RDMA netlink)", ErrNoDevice, name)
}
