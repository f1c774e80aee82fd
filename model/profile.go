package model

import (
	"sort"

	"github.com/mlx5go/mlx5go/prm"
)

// capValue is one capability field and the value a profile reports for it.
type capValue struct {
	f prm.Field
	v uint64
}

// profile is what one ConnectX model answers: its capability pages, its
// adapter identity and the few facts the kernel side needs. docs/MODEL.md
// lists every value and which of them are guesses.
type profile struct {
	name  string
	descr string
	// general is cmd_hca_cap (MLX5_CAP_GENERAL); its maximum and current
	// pages are equal.
	general []capValue
	// general2 is cmd_hca_cap_2; nil if the profile has none (hca_cap_2 is
	// then 0 and QUERY_HCA_CAP for it is refused).
	general2 []capValue
	odp      []capValue
	roce     []capValue
	atomic   []capValue
	// crypto is the crypto caps page (crypto_caps.go); nil if the profile
	// has no crypto engine (cmd_hca_cap.crypto is then 0 and QUERY_HCA_CAP
	// for the page is refused).
	crypto []capValue
	// psid is the adapter's PSID in QUERY_ADAPTER (model-defined).
	psid string
	// compVectors and firstCompEQN answer QUERY_EQN: vector v has EQ
	// number firstCompEQN+v.
	compVectors  uint32
	firstCompEQN uint32

	pages map[uint16][]byte // capability type -> 256-byte page, built once
	// uctxResp is the GET_CONTEXT driver data (driverContext), built once.
	uctxResp []byte
}

// common holds the cmd_hca_cap values all three profiles share.
var common = []capValue{
	{prm.CmdHcaCap.LogMaxSrqSz, 15},
	{prm.CmdHcaCap.LogMaxQpSz, 15},
	{prm.CmdHcaCap.LogMaxQp, 18},
	{prm.CmdHcaCap.LogMaxSrq, 23},
	{prm.CmdHcaCap.LogMaxCqSz, 22},
	{prm.CmdHcaCap.LogMaxCq, 24},
	{prm.CmdHcaCap.LogMaxEqSz, 22},
	{prm.CmdHcaCap.LogMaxMkey, 24},
	{prm.CmdHcaCap.LogMaxEq, 9},
	{prm.CmdHcaCap.MaxIndirection, 4},
	{prm.CmdHcaCap.LogMaxMrwSz, 64},
	{prm.CmdHcaCap.LogMaxBsfListSize, 4},
	{prm.CmdHcaCap.UmrExtendedTranslationOffset, 1},
	{prm.CmdHcaCap.NullMkey, 1},
	// On-demand paging (mlx5_ib_internal_fill_odp_caps reads pg, and for
	// implicit ODP fixed_buffer_size, null_mkey and
	// umr_extended_translation_offset).
	{prm.CmdHcaCap.Pg, 1},
	{prm.CmdHcaCap.FixedBufferSize, 1},
	{prm.CmdHcaCap.LogMaxKlmListSize, 16},
	{prm.CmdHcaCap.LogMaxRaReqDc, 4},
	{prm.CmdHcaCap.LogMaxRaResDc, 4},
	{prm.CmdHcaCap.LogMaxRaReqQp, 4},
	{prm.CmdHcaCap.LogMaxRaResQp, 4},
	{prm.CmdHcaCap.CacheLine128byte, 1},
	{prm.CmdHcaCap.GidTableSize, 256},
	{prm.CmdHcaCap.PkeyTableSize, 1},
	{prm.CmdHcaCap.LocalCaAckDelay, 16},
	{prm.CmdHcaCap.PortType, 1}, // Ethernet (RoCE)
	{prm.CmdHcaCap.NumPorts, 1},
	{prm.CmdHcaCap.LogMaxMsg, 30},
	{prm.CmdHcaCap.MaxTc, 8},
	{prm.CmdHcaCap.CqeVersion, 1},
	{prm.CmdHcaCap.UmrFence, 1}, // MLX5_CAP_UMR_FENCE_SMALL
	{prm.CmdHcaCap.SigerrCqe, 1},
	{prm.CmdHcaCap.Sho, 1}, // signature handover offload: every ConnectX since the ConnectX-4
	{prm.CmdHcaCap.Dct, 1},
	{prm.CmdHcaCap.Roce, 1},
	{prm.CmdHcaCap.Atomic, 1},
	{prm.CmdHcaCap.CqOi, 1},
	{prm.CmdHcaCap.CqResize, 1},
	{prm.CmdHcaCap.CqModeration, 1},
	{prm.CmdHcaCap.Cd, 1},
	{prm.CmdHcaCap.Ud, 1},
	{prm.CmdHcaCap.Uc, 1},
	{prm.CmdHcaCap.Rc, 1},
	{prm.CmdHcaCap.Uar4k, 1},
	{prm.CmdHcaCap.UarSz, 0},
	{prm.CmdHcaCap.LogPgSz, 12},
	{prm.CmdHcaCap.Bf, 1},
	{prm.CmdHcaCap.LogBfRegSize, 9},
	{prm.CmdHcaCap.MaxWqeSzSq, 1024},
	{prm.CmdHcaCap.MaxWqeSzRq, 512},
	{prm.CmdHcaCap.MaxWqeSzSqDc, 1024},
	{prm.CmdHcaCap.LogMaxPd, 24},
	{prm.CmdHcaCap.LogMaxUctx, 10},
	{prm.CmdHcaCap.LogMaxUmem, 24},
	{prm.CmdHcaCap.MaxNumEqs, 512},
	{prm.CmdHcaCap.NumOfUarsPerPage, 1},
	{prm.CmdHcaCap.LogMaxAtomicSizeQp, 3},
	{prm.CmdHcaCap.LogMaxAtomicSizeDc, 3},
}

var commonODP = []capValue{
	{prm.OdpPerTransportServiceCap.Send.At(prm.OdpCap.RcOdpCaps), 1},
	{prm.OdpPerTransportServiceCap.Receive.At(prm.OdpCap.RcOdpCaps), 1},
	{prm.OdpPerTransportServiceCap.Write.At(prm.OdpCap.RcOdpCaps), 1},
	{prm.OdpPerTransportServiceCap.Read.At(prm.OdpCap.RcOdpCaps), 1},
	{prm.OdpPerTransportServiceCap.Atomic.At(prm.OdpCap.RcOdpCaps), 1},
	{prm.OdpPerTransportServiceCap.SrqReceive.At(prm.OdpCap.RcOdpCaps), 1},
	{prm.OdpPerTransportServiceCap.Send.At(prm.OdpCap.UdOdpCaps), 1},
}

var commonRoCE = []capValue{
	{prm.RoceCap.L3Type, 0x6},      // IPV4_CAP | IPV6_CAP
	{prm.RoceCap.RoceVersion, 0x5}, // VERSION_1_CAP | VERSION_2_CAP
	{prm.RoceCap.RRoceDestUdpPort, 4791},
	{prm.RoceCap.RRoceMaxSrcUdpPort, 0xffff},
	{prm.RoceCap.RRoceMinSrcUdpPort, 0xc000},
	{prm.RoceCap.RoceAddressTableSize, 255},
}

var commonAtomic = []capValue{
	{prm.AtomicCaps.SupportedAtomicReq8BEndiannessMode1, 1},
	// MLX5_ATOMIC_REQ_MODE_HOST_ENDIANNESS: mlx5_core sets it at probe
	// when mode 1 is supported (handle_hca_cap_atomic).
	{prm.AtomicCaps.AtomicReq8BEndiannessMode, 1},
	// CMP_SWAP | FETCH_ADD: the IB atomics the model executes. No
	// EXTENDED_CMP_SWAP or EXTENDED_FETCH_ADD (the masked atomics,
	// MLX5_OPCODE_ATOMIC_MASKED_CS/FA): a WQE with one is a local QP
	// operation error (transport.go), and mlx5_ib's get_atomic_mode gives
	// the QPs MLX5_ATOMIC_MODE_IB_COMP.
	{prm.AtomicCaps.AtomicOperations, mlx5AtomicOpsCmpSwap | mlx5AtomicOpsFetchAdd},
	{prm.AtomicCaps.AtomicSizeQp, 0x8}, // 8 bytes
	{prm.AtomicCaps.AtomicSizeDc, 0x8},
}

// realTimeTS and realTimeRoCE are the timestamp format caps of a
// device with a real-time clock in its CQEs, beside the free-running one
// (MLX5_TIMESTAMP_FORMAT_CAP_FREE_RUNNING_AND_REAL_TIME): ConnectX-6 Dx
// and later (NVIDIA's MLNX_OFED and mlx5 documentation: "Real Time
// Clock ... supported on ConnectX-6 Dx and above"); the ConnectX-5 has
// the free-running clock only (the caps 0, MLX5_TIMESTAMP_FORMAT_CAP_FREE_RUNNING).
var (
	realTimeTS = []capValue{
		{prm.CmdHcaCap.SqTsFormat, tsCapBoth},
		{prm.CmdHcaCap.RqTsFormat, tsCapBoth},
	}
	realTimeRoCE = []capValue{{prm.RoceCap.QpTsFormat, tsCapBoth}}
)

func join(parts ...[]capValue) []capValue {
	var all []capValue
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

// profiles are the ConnectX models, by name. The per-model values are the
// capability bits that decide what users may do; see docs/MODEL.md.
var profiles = map[string]*profile{
	"cx5": {
		name:  "cx5",
		descr: "ConnectX-5 (MT4119)",
		general: join(common, []capValue{
			{prm.CmdHcaCap.SigCrc32c, 1},
			{prm.CmdHcaCap.SigCrc64Xp10, 0},
			{prm.CmdHcaCap.SigBlock4048, 0},
			{prm.CmdHcaCap.DrainSigerr, 0},
			{prm.CmdHcaCap.QpcExtension, 0},
			{prm.CmdHcaCap.LogMaxDciStreamChannels, 0},
			{prm.CmdHcaCap.LogMaxDciErroredStreams, 0},
			{prm.CmdHcaCap.SigerrDomainAndSigType, 0},
			{prm.CmdHcaCap.HcaCap2, 0},
			{prm.CmdHcaCap.DeviceFrequencyKhz, 156250},
		}),
		odp:          commonODP,
		roce:         commonRoCE,
		atomic:       commonAtomic,
		psid:         "MODEL_CX5",
		compVectors:  8,
		firstCompEQN: 7,
	},
	"cx6dx": {
		name:  "cx6dx",
		descr: "ConnectX-6 Dx (MT4125)",
		general: join(common, []capValue{
			{prm.CmdHcaCap.SigCrc32c, 1},
			{prm.CmdHcaCap.SigCrc64Xp10, 1},
			{prm.CmdHcaCap.SigBlock4048, 1},
			{prm.CmdHcaCap.DrainSigerr, 1},
			{prm.CmdHcaCap.QpcExtension, 1},
			{prm.CmdHcaCap.LogMaxDciStreamChannels, 4},
			{prm.CmdHcaCap.LogMaxDciErroredStreams, 2},
			{prm.CmdHcaCap.SigerrDomainAndSigType, 1},
			{prm.CmdHcaCap.HcaCap2, 1},
			{prm.CmdHcaCap.EceSupport, 1},
			{prm.CmdHcaCap.DeviceFrequencyKhz, 1000000},
		}, realTimeTS, cryptoGeneral(0)),
		general2:     []capValue{{prm.CmdHcaCap2.LogMinMkeyEntitySize, 12}},
		odp:          commonODP,
		roce:         join(commonRoCE, realTimeRoCE),
		atomic:       commonAtomic,
		crypto:       cryptoPage(12),
		psid:         "MODEL_CX6DX",
		compVectors:  8,
		firstCompEQN: 7,
	},
	"cx7": {
		name:  "cx7",
		descr: "ConnectX-7 (MT4129)",
		general: join(common, []capValue{
			{prm.CmdHcaCap.SigCrc32c, 1},
			{prm.CmdHcaCap.SigCrc64Xp10, 1},
			{prm.CmdHcaCap.SigBlock4048, 1},
			{prm.CmdHcaCap.DrainSigerr, 1},
			{prm.CmdHcaCap.QpcExtension, 1},
			{prm.CmdHcaCap.LogMaxDciStreamChannels, 6},
			{prm.CmdHcaCap.LogMaxDciErroredStreams, 3},
			{prm.CmdHcaCap.SigerrDomainAndSigType, 1},
			{prm.CmdHcaCap.DciNoRdmaWrOptimizedPerformance, 1},
			{prm.CmdHcaCap.HcaCap2, 1},
			{prm.CmdHcaCap.EceSupport, 1},
			{prm.CmdHcaCap.DeviceFrequencyKhz, 1000000},
		}, realTimeTS, cryptoGeneral(1)),
		general2:     []capValue{{prm.CmdHcaCap2.LogMinMkeyEntitySize, 12}},
		odp:          commonODP,
		roce:         join(commonRoCE, realTimeRoCE),
		atomic:       commonAtomic,
		crypto:       cryptoPage(14),
		psid:         "MODEL_CX7",
		compVectors:  16,
		firstCompEQN: 7,
	},
}

func init() {
	for _, p := range profiles {
		p.pages = map[uint16][]byte{
			prm.MLX5_CAP_GENERAL: page(p.general),
			prm.MLX5_CAP_ODP:     page(p.odp),
			prm.MLX5_CAP_ROCE:    page(p.roce),
			prm.MLX5_CAP_ATOMIC:  page(p.atomic),
			// The NIC flow table and device memory (MEMIC) pages: every
			// ConnectX since the fifth answers them, and the model, which
			// has neither flow steering nor device memory, answers them
			// with every capability 0, as a device without them would
			// (rdma-core's test_mlx5_flow and test_mlx5_dm_ops read them
			// and skip).
			prm.MLX5_CAP_FLOW_TABLE: page(nil),
			prm.MLX5_CAP_DEV_MEM:    page(nil),
		}
		if p.general2 != nil {
			p.pages[prm.MLX5_CAP_GENERAL_2] = page(p.general2)
		}
		if p.crypto != nil {
			p.pages[prm.MLX5_CAP_CRYPTO] = page(p.crypto)
		}
		p.uctxResp = p.driverContext()
	}
}

// capPageSize is the size of every capability page the model answers
// (cmd_hca_cap, cmd_hca_cap_2, odp_cap, roce_cap, atomic_caps,
// crypto_caps, and the flow table and device memory pages, all 0); the
// rest of the 4096-byte capability union is 0.
const capPageSize = 256

func page(vals []capValue) []byte {
	b := make([]byte, capPageSize)
	for _, cv := range vals {
		cv.f.Set(b, cv.v)
	}
	return b
}

// general returns the profile's value of a cmd_hca_cap field.
func (p *profile) cap(f prm.Field) uint64 { return f.Get(p.pages[prm.MLX5_CAP_GENERAL]) }

// roceCap returns the profile's value of a roce_cap field.
// extendedAtomics reports whether the profile's atomic_operations has
// the extended (masked) compare-and-swap or fetch-and-add.
func (p *profile) extendedAtomics() bool {
	ops := prm.AtomicCaps.AtomicOperations.Get(p.pages[prm.MLX5_CAP_ATOMIC])
	return ops&(mlx5AtomicOpsExtendedCmpSwap|mlx5AtomicOpsExtendedFetchAdd) != 0
}

func (p *profile) roceCap(f prm.Field) uint64 { return f.Get(p.pages[prm.MLX5_CAP_ROCE]) }

// Profiles returns the names New accepts, sorted.
func Profiles() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Describe returns a profile's description ("ConnectX-5 (MT4119)"), or ""
// for an unknown name.
func Describe(profile string) string {
	if p, ok := profiles[profile]; ok {
		return p.descr
	}
	return ""
}
