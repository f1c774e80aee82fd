package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/uverbs"
)

// report is everything mlx5probe prints. JSON keys are ibv_devinfo's names
// where ibv_devinfo has the value, snake_case otherwise; they are stable.
type report struct {
	ABIVersion int            `json:"uverbs_abi_version,omitempty"`
	Devices    []deviceReport `json:"devices"`
}

// deviceReport is one device: its identity from sysfs, then what the
// generic verbs queries return. A later mlx5 section (HCA capability
// groups from QUERY_HCA_CAP) becomes another field here, filled for mlx5
// devices only, and `-sim PROFILE` another source of deviceReports (the
// software ConnectX) beside probeDevice.
type deviceReport struct {
	HCAID        string `json:"hca_id"`
	UverbsDevice string `json:"uverbs_device"`
	// Driver is the device's enum rdma_driver_id, which names the RDMA
	// driver (and the libibverbs provider): "mlx5", "rxe". Nil if RDMA
	// netlink could not tell it.
	Driver *named `json:"driver,omitempty"`
	// KernelDriver is the driver of the device's parent (e.g. mlx5_core
	// for a ConnectX PCI function), empty for software devices such as rxe.
	KernelDriver string `json:"kernel_driver,omitempty"`
	NodeType     int    `json:"node_type"`
	Transport    named  `json:"transport"`

	// Errors lists what could not be queried; the fields of a failed step
	// stay empty. A device that cannot be opened has only its sysfs
	// identity and an error.
	Errors []string `json:"errors,omitempty"`

	*DeviceAttrs
	Ports []portReport `json:"ports"`

	// HCACaps are an mlx5 device's general HCA capabilities, grouped
	// (QUERY_HCA_CAP through DEVX; absent for other drivers).
	HCACaps []capGroup `json:"hca_caps,omitempty"`
	// SigCaps are an mlx5 device's block signature caps as
	// mlx5dv_query_device reports them (absent for other drivers).
	SigCaps *sigCapsReport `json:"sig_caps,omitempty"`
	// CryptoCaps are an mlx5 device's crypto caps as mlx5dv_query_device
	// reports them (absent for other drivers).
	CryptoCaps *cryptoCapsReport `json:"crypto_caps,omitempty"`
	// DCIStreams are an mlx5 device's DCI stream caps as
	// mlx5dv_query_device reports them (dci_streams; absent for other
	// drivers).
	DCIStreams *dciStreamsReport `json:"dci_streams,omitempty"`
}

// DeviceAttrs is ibv_devinfo -v's device section (exported only so that
// encoding/json can fill the embedded pointer). It is a pointer in
// deviceReport so that a device that could not be queried has none of it.
type DeviceAttrs struct {
	FWVer                 string `json:"fw_ver"`
	NodeGUID              string `json:"node_guid"`
	SysImageGUID          string `json:"sys_image_guid"`
	VendorID              uint32 `json:"vendor_id"`
	VendorPartID          uint32 `json:"vendor_part_id"`
	HWVer                 uint32 `json:"hw_ver"`
	BoardID               string `json:"board_id,omitempty"`
	PhysPortCnt           uint8  `json:"phys_port_cnt"`
	MaxMRSize             uint64 `json:"max_mr_size"`
	PageSizeCap           uint64 `json:"page_size_cap"`
	MaxQP                 uint32 `json:"max_qp"`
	MaxQPWR               uint32 `json:"max_qp_wr"`
	DeviceCapFlags        flags  `json:"device_cap_flags"`
	MaxSGE                uint32 `json:"max_sge"`
	MaxSGERd              uint32 `json:"max_sge_rd"`
	MaxCQ                 uint32 `json:"max_cq"`
	MaxCQE                uint32 `json:"max_cqe"`
	MaxMR                 uint32 `json:"max_mr"`
	MaxPD                 uint32 `json:"max_pd"`
	MaxQPRdAtom           uint32 `json:"max_qp_rd_atom"`
	MaxEERdAtom           uint32 `json:"max_ee_rd_atom"`
	MaxResRdAtom          uint32 `json:"max_res_rd_atom"`
	MaxQPInitRdAtom       uint32 `json:"max_qp_init_rd_atom"`
	MaxEEInitRdAtom       uint32 `json:"max_ee_init_rd_atom"`
	AtomicCap             named  `json:"atomic_cap"`
	MaxEE                 uint32 `json:"max_ee"`
	MaxRDD                uint32 `json:"max_rdd"`
	MaxMW                 uint32 `json:"max_mw"`
	MaxRawIPv6QP          uint32 `json:"max_raw_ipv6_qp"`
	MaxRawEthyQP          uint32 `json:"max_raw_ethy_qp"`
	MaxMcastGrp           uint32 `json:"max_mcast_grp"`
	MaxMcastQPAttach      uint32 `json:"max_mcast_qp_attach"`
	MaxTotalMcastQPAttach uint32 `json:"max_total_mcast_qp_attach"`
	MaxAH                 uint32 `json:"max_ah"`
	MaxFMR                uint32 `json:"max_fmr"`
	MaxMapPerFMR          uint32 `json:"max_map_per_fmr"`
	MaxSRQ                uint32 `json:"max_srq"`
	MaxSRQWR              uint32 `json:"max_srq_wr"`
	MaxSRQSGE             uint32 `json:"max_srq_sge"`
	MaxPKeys              uint16 `json:"max_pkeys"`
	LocalCAAckDelay       uint8  `json:"local_ca_ack_delay"`

	GeneralODPCaps          flags            `json:"general_odp_caps"`
	RCODPCaps               flags            `json:"rc_odp_caps"`
	UCODPCaps               flags            `json:"uc_odp_caps"`
	UDODPCaps               flags            `json:"ud_odp_caps"`
	XRCODPCaps              flags            `json:"xrc_odp_caps"`
	CompletionTimestampMask uint64           `json:"completion_timestamp_mask"`
	HCACoreClock            uint64           `json:"hca_core_clock"` // kHz
	RawPacketCaps           flags            `json:"raw_packet_caps"`
	DeviceCapFlagsEx        flags            `json:"device_cap_flags_ex"`
	TSOCaps                 tsoCaps          `json:"tso_caps"`
	RSSCaps                 rssCaps          `json:"rss_caps"`
	MaxWQTypeRQ             uint32           `json:"max_wq_type_rq"`
	PacketPacingCaps        packetPacingCaps `json:"packet_pacing_caps"`
	TMCaps                  tmCaps           `json:"tm_caps"`
	CQModerationCaps        cqModerationCaps `json:"cq_moderation_caps"`
	MaxDMSize               uint64           `json:"max_dm_size"`
	NumCompVectors          uint32           `json:"num_comp_vectors"`
}

type tsoCaps struct {
	MaxTSO      uint32 `json:"max_tso"`
	SupportedQP flags  `json:"supported_qp"`
}

type rssCaps struct {
	MaxRWQIndirectionTables    uint32 `json:"max_rwq_indirection_tables"`
	MaxRWQIndirectionTableSize uint32 `json:"max_rwq_indirection_table_size"`
	RxHashFunction             uint8  `json:"rx_hash_function"`
	RxHashFieldsMask           uint64 `json:"rx_hash_fields_mask"`
	SupportedQP                flags  `json:"supported_qp"`
}

type packetPacingCaps struct {
	QPRateLimitMin uint32 `json:"qp_rate_limit_min"` // kbit/s
	QPRateLimitMax uint32 `json:"qp_rate_limit_max"` // kbit/s
	SupportedQP    flags  `json:"supported_qp"`
}

type tmCaps struct {
	MaxRndvHdrSize uint32 `json:"max_rndv_hdr_size"`
	MaxNumTags     uint32 `json:"max_num_tags"`
	MaxOps         uint32 `json:"max_ops"`
	MaxSGE         uint32 `json:"max_sge"`
	Flags          flags  `json:"flags"`
}

type cqModerationCaps struct {
	MaxCQCount  uint16 `json:"max_cq_count"`
	MaxCQPeriod uint16 `json:"max_cq_period"` // microseconds
}

// portReport is ibv_devinfo -v's port section.
type portReport struct {
	Port          uint8       `json:"port"`
	State         named       `json:"state"`
	MaxMTU        named       `json:"max_mtu"`
	ActiveMTU     named       `json:"active_mtu"`
	SMLID         uint16      `json:"sm_lid"`
	PortLID       uint16      `json:"port_lid"`
	PortLMC       uint8       `json:"port_lmc"`
	LinkLayer     string      `json:"link_layer"`
	MaxMsgSz      uint32      `json:"max_msg_sz"`
	PortCapFlags  uint32      `json:"port_cap_flags"`
	PortCapFlags2 uint16      `json:"port_cap_flags2"`
	MaxVLNum      named       `json:"max_vl_num"`
	BadPKeyCntr   uint32      `json:"bad_pkey_cntr"`
	QKeyViolCntr  uint32      `json:"qkey_viol_cntr"`
	SMSL          uint8       `json:"sm_sl"`
	PKeyTblLen    uint16      `json:"pkey_tbl_len"`
	GIDTblLen     uint32      `json:"gid_tbl_len"`
	SubnetTimeout uint8       `json:"subnet_timeout"`
	InitTypeReply uint8       `json:"init_type_reply"`
	ActiveWidth   named       `json:"active_width"` // name is the lane count, ibv_devinfo adds "X"
	ActiveSpeed   named       `json:"active_speed"`
	PhysState     named       `json:"phys_state"`
	GIDs          []gidReport `json:"gids"`
}

// gidReport is one valid GID table entry (ibv_devinfo's GID[n] lines).
type gidReport struct {
	Index uint32 `json:"index"`
	// GID is formatted as ibv_devinfo prints it: RoCE v2 GIDs as IPv6
	// addresses, others as eight groups of four hex digits.
	GID    string `json:"gid"`
	Type   string `json:"type"` // "IB", "RoCE v1" or "RoCE v2"
	Netdev string `json:"netdev,omitempty"`
}

// sysfsRoot is where sysfs is mounted (tests point it elsewhere).
var sysfsRoot = "/sys"

// probeDevice opens dev and runs the read-only queries. Failures are
// recorded in the report; it does not stop at the first.
func probeDevice(dev uverbs.Device) deviceReport {
	r := deviceReport{
		HCAID:        dev.Name,
		UverbsDevice: dev.Path,
		KernelDriver: dev.Driver,
		NodeType:     dev.NodeType,
		Transport:    transportOfNodeType(dev.NodeType),
		Ports:        []portReport{},
	}
	fail := func(err error) { r.Errors = append(r.Errors, err.Error()) }
	id, err := uverbs.DriverIDOf(dev.Name)
	if err != nil {
		fail(err)
		return r
	}
	drv := lookup(driverNames, uint64(id), "unknown")
	r.Driver = &drv
	ctx, err := uverbs.Open(dev.Name, &uverbs.Options{DriverID: id})
	if err != nil {
		fail(err)
		return r
	}
	defer ctx.Close()
	da, err := ctx.QueryDevice()
	if err != nil {
		fail(err)
		return r
	}
	r.DeviceAttrs = deviceSection(&da, dev)
	r.NumCompVectors = ctx.NumCompVectors
	for p := 1; p <= int(da.PhysPortCnt); p++ {
		pa, err := ctx.QueryPort(uint8(p))
		if err != nil {
			fail(err)
			continue
		}
		r.Ports = append(r.Ports, portSection(uint8(p), &pa))
	}
	gids, err := ctx.QueryGIDTable()
	if err != nil {
		fail(err)
		return r
	}
	for _, e := range gids {
		for i := range r.Ports {
			if uint32(r.Ports[i].Port) == e.Port {
				r.Ports[i].GIDs = append(r.Ports[i].GIDs, gidSection(e))
			}
		}
	}
	if id == uverbs.DriverMLX5 {
		if err := probeMlx5(&r, dev.Name); err != nil {
			fail(fmt.Errorf("hca caps: %w", err))
		}
	}
	return r
}

// probeMlx5 adds an mlx5 device's HCA capabilities: QUERY_HCA_CAP, which
// the kernel runs for a context with DEVX and, as the device's whitelist
// uid, for one without; and the signature caps derived from them.
func probeMlx5(r *deviceReport, name string) error {
	c, err := mlx5.Open(name, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	probeHCA(r, c)
	return nil
}

// fwVersion is what ibv_devinfo prints as fw_ver. libibverbs' providers
// format the kernel's number themselves (mlx5 pads the sub-minor to four
// digits, rxe does not); the kernel driver's own string in sysfs is that
// same text for mlx5, and rxe has none, so sysfs comes first and the
// generic format is the fallback.
func fwVersion(da *uverbs.DeviceAttr, dev uverbs.Device) string {
	if dev.FWVersion != "" {
		return dev.FWVersion
	}
	return da.FWVersion()
}

func deviceSection(da *uverbs.DeviceAttr, dev uverbs.Device) *DeviceAttrs {
	qpts := func(v uint32) flags { return decodeFlags(uint64(v), qpTypeBits) }
	board, _ := os.ReadFile(filepath.Join(sysfsRoot, "class/infiniband", dev.Name, "board_id"))
	return &DeviceAttrs{
		FWVer:                   fwVersion(da, dev),
		NodeGUID:                uverbs.FormatGUID(da.NodeGUID),
		SysImageGUID:            uverbs.FormatGUID(da.SysImageGUID),
		VendorID:                da.VendorID,
		VendorPartID:            da.VendorPartID,
		HWVer:                   da.HWVer,
		BoardID:                 strings.TrimSpace(string(board)),
		PhysPortCnt:             da.PhysPortCnt,
		MaxMRSize:               da.MaxMRSize,
		PageSizeCap:             da.PageSizeCap,
		MaxQP:                   da.MaxQP,
		MaxQPWR:                 da.MaxQPWR,
		DeviceCapFlags:          decodeFlags(uint64(da.DeviceCapFlags), deviceCapFlags),
		MaxSGE:                  da.MaxSGE,
		MaxSGERd:                da.MaxSGERd,
		MaxCQ:                   da.MaxCQ,
		MaxCQE:                  da.MaxCQE,
		MaxMR:                   da.MaxMR,
		MaxPD:                   da.MaxPD,
		MaxQPRdAtom:             da.MaxQPRdAtom,
		MaxEERdAtom:             da.MaxEERdAtom,
		MaxResRdAtom:            da.MaxResRdAtom,
		MaxQPInitRdAtom:         da.MaxQPInitRdAtom,
		MaxEEInitRdAtom:         da.MaxEEInitRdAtom,
		AtomicCap:               lookup(atomicCapNames, uint64(da.AtomicCap), "invalid atomic capability"),
		MaxEE:                   da.MaxEE,
		MaxRDD:                  da.MaxRDD,
		MaxMW:                   da.MaxMW,
		MaxRawIPv6QP:            da.MaxRawIPv6QP,
		MaxRawEthyQP:            da.MaxRawEthyQP,
		MaxMcastGrp:             da.MaxMcastGrp,
		MaxMcastQPAttach:        da.MaxMcastQPAttach,
		MaxTotalMcastQPAttach:   da.MaxTotalMcastQPAttach,
		MaxAH:                   da.MaxAH,
		MaxFMR:                  da.MaxFMR,
		MaxMapPerFMR:            da.MaxMapPerFMR,
		MaxSRQ:                  da.MaxSRQ,
		MaxSRQWR:                da.MaxSRQWR,
		MaxSRQSGE:               da.MaxSRQSGE,
		MaxPKeys:                da.MaxPKeys,
		LocalCAAckDelay:         da.LocalCAAckDelay,
		GeneralODPCaps:          decodeFlags(da.ODPCaps.General, odpGeneralCaps),
		RCODPCaps:               decodeFlags(uint64(da.ODPCaps.RC), odpTransportCaps),
		UCODPCaps:               decodeFlags(uint64(da.ODPCaps.UC), odpTransportCaps),
		UDODPCaps:               decodeFlags(uint64(da.ODPCaps.UD), odpTransportCaps),
		XRCODPCaps:              decodeFlags(uint64(da.XRCODPCaps), odpTransportCaps),
		CompletionTimestampMask: da.CompletionTimestampMask,
		HCACoreClock:            da.HCACoreClock,
		RawPacketCaps:           decodeFlags(uint64(da.RawPacketCaps), rawPacketCaps),
		DeviceCapFlagsEx:        decodeFlagsEx(uint64(da.DeviceCapFlagsEx)),
		TSOCaps:                 tsoCaps{MaxTSO: da.TSOCaps.MaxTSO, SupportedQP: qpts(da.TSOCaps.SupportedQPTs)},
		RSSCaps: rssCaps{
			MaxRWQIndirectionTables:    da.RSSCaps.MaxRWQIndirectionTables,
			MaxRWQIndirectionTableSize: da.RSSCaps.MaxRWQIndirectionTableSize,
			RxHashFunction:             da.RSSCaps.RxHashFunction,
			RxHashFieldsMask:           da.RSSCaps.RxHashFieldsMask,
			SupportedQP:                qpts(da.RSSCaps.SupportedQPTs),
		},
		MaxWQTypeRQ: da.MaxWQTypeRQ,
		PacketPacingCaps: packetPacingCaps{
			QPRateLimitMin: da.PacketPacingCaps.QPRateLimitMin,
			QPRateLimitMax: da.PacketPacingCaps.QPRateLimitMax,
			SupportedQP:    qpts(da.PacketPacingCaps.SupportedQPTs),
		},
		TMCaps: tmCaps{
			MaxRndvHdrSize: da.TMCaps.MaxRndvHdrSize, MaxNumTags: da.TMCaps.MaxNumTags,
			MaxOps: da.TMCaps.MaxOps, MaxSGE: da.TMCaps.MaxSGE,
			Flags: decodeFlags(uint64(da.TMCaps.Flags), tmCapFlags),
		},
		CQModerationCaps: cqModerationCaps{MaxCQCount: da.CQModerationCaps.MaxCQCount, MaxCQPeriod: da.CQModerationCaps.MaxCQPeriod},
		MaxDMSize:        da.MaxDMSize,
	}
}

// decodeFlagsEx names the upper 32 bits of device_cap_flags_ex, as
// ibv_devinfo does; Value keeps all 64.
func decodeFlagsEx(v uint64) flags {
	f := decodeFlags(v&^0xffffffff, deviceCapFlagsEx)
	f.Value = v
	return f
}

func portSection(port uint8, pa *uverbs.PortAttr) portReport {
	return portReport{
		Port:          port,
		State:         lookup(portStateNames, uint64(pa.State), "invalid state"),
		MaxMTU:        lookup(mtuNames, uint64(pa.MaxMTU), "invalid MTU"),
		ActiveMTU:     lookup(mtuNames, uint64(pa.ActiveMTU), "invalid MTU"),
		SMLID:         pa.SMLID,
		PortLID:       pa.LID,
		PortLMC:       pa.LMC,
		LinkLayer:     lookup(linkLayerNames, uint64(pa.LinkLayer), "Unknown").Name,
		MaxMsgSz:      pa.MaxMsgSize,
		PortCapFlags:  pa.PortCapFlags,
		PortCapFlags2: pa.PortCapFlags2,
		MaxVLNum:      lookup(vlNames, uint64(pa.MaxVLNum), "invalid value"),
		BadPKeyCntr:   pa.BadPKeyCntr,
		QKeyViolCntr:  pa.QKeyViolCntr,
		SMSL:          pa.SMSL,
		PKeyTblLen:    pa.PKeyTableLen,
		GIDTblLen:     pa.GIDTableLen,
		SubnetTimeout: pa.SubnetTimeout,
		InitTypeReply: pa.InitTypeReply,
		ActiveWidth:   lookup(widthNames, uint64(pa.ActiveWidth), "invalid width"),
		ActiveSpeed:   lookup(speedNames, uint64(pa.Speed()), "invalid speed"),
		PhysState:     lookup(physStateNames, uint64(pa.PhysState), "invalid physical state"),
		GIDs:          []gidReport{},
	}
}

func gidSection(e uverbs.GIDEntry) gidReport {
	g := gidReport{Index: e.Index, GID: gidText(e), Type: e.Type.String()}
	if e.NetdevIfindex != 0 {
		if ifi, err := net.InterfaceByIndex(int(e.NetdevIfindex)); err == nil {
			g.Netdev = ifi.Name
		}
	}
	return g
}
