package main

import (
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/uverbs"
)

// The names ibv_devinfo (rdma-core's libibverbs/examples/devinfo.c) gives to
// enumerations and flag bits, as tables. Values are libibverbs' (verbs.h)
// and the kernel's (<rdma/ib_user_verbs.h>); an unknown value gets
// ibv_devinfo's "invalid ..." name.

// named is an enumeration's value with its ibv_devinfo name.
type named struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

func lookup(table map[uint64]string, v uint64, invalid string) named {
	if s, ok := table[v]; ok {
		return named{s, int64(v)}
	}
	return named{invalid, int64(v)}
}

// flags is a flag word with the names of its set bits, in bit order, and
// the bits no name covers.
type flags struct {
	Value   uint64   `json:"value"`
	Names   []string `json:"names"`
	Unknown uint64   `json:"unknown,omitempty"`
}

type flagBit struct {
	bit  uint64
	name string
}

func decodeFlags(v uint64, table []flagBit) flags {
	f := flags{Value: v, Names: []string{}}
	known := uint64(0)
	for _, b := range table {
		known |= b.bit
		if v&b.bit != 0 {
			f.Names = append(f.Names, b.name)
		}
	}
	f.Unknown = v &^ known
	return f
}

// transportNames maps enum ibv_transport_type, which libibverbs derives
// from the node type (transportOfNodeType).
var transportNames = map[uint64]string{
	0: "InfiniBand",
	1: "iWARP",
	2: "usNIC",
	3: "usNIC UDP",
	4: "unspecified",
}

// transportOfNodeType is libibverbs' mapping of enum ibv_node_type (sysfs
// node_type) to enum ibv_transport_type: CA, switch and router are
// InfiniBand; RNIC is iWARP; then usNIC, usNIC UDP and unspecified.
func transportOfNodeType(nodeType int) named {
	switch nodeType {
	case 1, 2, 3:
		return lookup(transportNames, 0, "")
	case 4, 5, 6, 7:
		return lookup(transportNames, uint64(nodeType-3), "")
	}
	return named{"invalid transport", -1} // IBV_TRANSPORT_UNKNOWN
}

var portStateNames = map[uint64]string{
	1: "PORT_DOWN",
	2: "PORT_INIT",
	3: "PORT_ARMED",
	4: "PORT_ACTIVE",
}

var physStateNames = map[uint64]string{
	1: "SLEEP",
	2: "POLLING",
	3: "DISABLED",
	4: "PORT_CONFIGURATION TRAINNING", // sic, as ibv_devinfo spells it
	5: "LINK_UP",
	6: "LINK_ERROR_RECOVERY",
	7: "PHY TEST",
}

// mtuNames maps enum ibv_mtu.
var mtuNames = map[uint64]string{1: "256", 2: "512", 3: "1024", 4: "2048", 5: "4096"}

// widthNames maps the IB port width encoding to lanes.
var widthNames = map[uint64]string{1: "1", 2: "4", 4: "8", 8: "12", 16: "2"}

var speedNames = map[uint64]string{
	1:   "2.5 Gbps",
	2:   "5.0 Gbps",
	4:   "10.0 Gbps",
	8:   "10.0 Gbps",
	16:  "14.0 Gbps",
	32:  "25.0 Gbps",
	64:  "50.0 Gbps",
	128: "100.0 Gbps",
	256: "200.0 Gbps", // XDR: only in active_speed_ex
}

var vlNames = map[uint64]string{1: "1", 2: "2", 3: "4", 4: "8", 5: "15"}

var linkLayerNames = map[uint64]string{0: "Unspecified", 1: "InfiniBand", 2: "Ethernet"}

var atomicCapNames = map[uint64]string{
	uint64(uverbs.AtomicNone): "ATOMIC_NONE",
	uint64(uverbs.AtomicHCA):  "ATOMIC_HCA",
	uint64(uverbs.AtomicGlob): "ATOMIC_GLOB",
}

// deviceCapFlags are the device_cap_flags bits ibv_devinfo names.
// INIT_TYPE (bit 9) is libibverbs' name for a bit the kernel no longer
// uses.
var deviceCapFlags = []flagBit{
	{uint64(uverbs.DeviceResizeMaxWR), "RESIZE_MAX_WR"},
	{uint64(uverbs.DeviceBadPKeyCntr), "BAD_PKEY_CNTR"},
	{uint64(uverbs.DeviceBadQKeyCntr), "BAD_QKEY_CNTR"},
	{uint64(uverbs.DeviceRawMulti), "RAW_MULTI"},
	{uint64(uverbs.DeviceAutoPathMig), "AUTO_PATH_MIG"},
	{uint64(uverbs.DeviceChangePhyPort), "CHANGE_PHY_PORT"},
	{uint64(uverbs.DeviceUDAVPortEnforce), "UD_AV_PORT_ENFORCE"},
	{uint64(uverbs.DeviceCurrQPStateMod), "CURR_QP_STATE_MOD"},
	{uint64(uverbs.DeviceShutdownPort), "SHUTDOWN_PORT"},
	{1 << 9, "INIT_TYPE"},
	{uint64(uverbs.DevicePortActiveEvent), "PORT_ACTIVE_EVENT"},
	{uint64(uverbs.DeviceSysImageGUID), "SYS_IMAGE_GUID"},
	{uint64(uverbs.DeviceRCRNRNAKGen), "RC_RNR_NAK_GEN"},
	{uint64(uverbs.DeviceSRQResize), "SRQ_RESIZE"},
	{uint64(uverbs.DeviceNNotifyCQ), "N_NOTIFY_CQ"},
	{uint64(uverbs.DeviceMemWindow), "MEM_WINDOW"},
	{uint64(uverbs.DeviceUDIPCsum), "UD_IP_CSUM"},
	{uint64(uverbs.DeviceXRC), "XRC"},
	{uint64(uverbs.DeviceMemMgtExtensions), "MEM_MGT_EXTENSIONS"},
	{uint64(uverbs.DeviceMemWindowType2A), "MEM_WINDOW_TYPE_2A"},
	{uint64(uverbs.DeviceMemWindowType2B), "MEM_WINDOW_TYPE_2B"},
	{uint64(uverbs.DeviceRCIPCsum), "RC_IP_CSUM"},
	{uint64(uverbs.DeviceRawIPCsum), "RAW_IP_CSUM"},
	{uint64(uverbs.DeviceManagedFlowSteering), "MANAGED_FLOW_STEERING"},
}

// deviceCapFlagsEx are the bits ibv_devinfo names in device_cap_flags_ex;
// it decodes only the upper 32 bits there (the lower ones repeat
// device_cap_flags).
var deviceCapFlagsEx = []flagBit{
	{uint64(uverbs.DeviceRawScatterFCS), "RAW_SCATTER_FCS"},
	{uint64(uverbs.DevicePCIWriteEndPadding), "PCI_WRITE_END_PADDING"},
}

// odpGeneralCaps are enum ibv_odp_general_caps.
var odpGeneralCaps = []flagBit{
	{1 << 0, "ODP_SUPPORT"},
	{1 << 1, "ODP_SUPPORT_IMPLICIT"},
}

// odpTransportCaps are enum ibv_odp_transport_cap_bits, named as
// ibv_devinfo prints them.
var odpTransportCaps = []flagBit{
	{1 << 0, "SUPPORT_SEND"},
	{1 << 1, "SUPPORT_RECV"},
	{1 << 2, "SUPPORT_WRITE"},
	{1 << 3, "SUPPORT_READ"},
	{1 << 4, "SUPPORT_ATOMIC"},
	{1 << 5, "SUPPORT_SRQ"},
}

// rawPacketCaps are enum ib_uverbs_raw_packet_caps, with ibv_devinfo's
// descriptions.
var rawPacketCaps = []flagBit{
	{uint64(uverbs.RawPacketCapCVLANStripping), "C-VLAN stripping offload"},
	{uint64(uverbs.RawPacketCapScatterFCS), "Scatter FCS offload"},
	{uint64(uverbs.RawPacketCapIPCsum), "IP csum offload"},
	{uint64(uverbs.RawPacketCapDelayDrop), "Delay drop"},
}

// qpTypeBits are the QP types ibv_devinfo names in supported_qpts masks
// (bit n is enum ibv_qp_type n: IBV_QPT_UD 4, IBV_QPT_RAW_PACKET 8).
var qpTypeBits = []flagBit{
	{1 << 8, "SUPPORT_RAW_PACKET"},
	{1 << 4, "SUPPORT_UD"},
}

// tmCapFlags are enum ibv_tm_cap_flags.
var tmCapFlags = []flagBit{{1 << 0, "IBV_TM_CAP_RC"}}

// gidTypeLabel is the type ibv_devinfo appends to a GID on an Ethernet
// port, from the report's type name: sysfs reports IB and RoCE v1 GIDs as
// one type, which ibv_devinfo prints as "RoCE v1".
func gidTypeLabel(typ string) string {
	if typ == uverbs.GIDTypeRoCEv2.String() {
		return "RoCE v2"
	}
	return "RoCE v1"
}

// gidText prints a GID as ibv_devinfo does: RoCE v2 GIDs as IPv6
// addresses, the others as eight groups of four hex digits.
func gidText(e uverbs.GIDEntry) string {
	if e.Type == uverbs.GIDTypeRoCEv2 {
		return e.GID.Addr().String()
	}
	return e.GID.String()
}

// driverNames names enum rdma_driver_id (<rdma/ib_user_ioctl_verbs.h>) as
// the kernel's provider drivers are known (9 is RDMA_DRIVER_I40IW, now
// RDMA_DRIVER_IRDMA).
var driverNames = map[uint64]string{
	0: "unknown", 1: "mlx5", 2: "mlx4", 3: "cxgb3", 4: "cxgb4", 5: "mthca", 6: "bnxt_re", 7: "ocrdma",
	8: "nes", 9: "irdma", 10: "vmw_pvrdma", 11: "qedr", 12: "hns", 13: "usnic", 14: "rxe", 15: "hfi1",
	16: "qib", 17: "efa", 18: "siw", 19: "erdma",
}

// The bits of struct mlx5dv_sig_caps, named as mlx5dv.h names them (enum
// mlx5dv_block_size_caps, mlx5dv_sig_prot_caps, mlx5dv_sig_t10dif_bg_caps,
// mlx5dv_sig_crc_type_caps): each bit is 1 << the value of sig's enum.
var (
	sigBlockSizeCaps = []flagBit{
		{1 << sig.BlockSize512, "MLX5DV_BLOCK_SIZE_CAP_512"},
		{1 << sig.BlockSize520, "MLX5DV_BLOCK_SIZE_CAP_520"},
		{1 << sig.BlockSize4048, "MLX5DV_BLOCK_SIZE_CAP_4048"},
		{1 << sig.BlockSize4096, "MLX5DV_BLOCK_SIZE_CAP_4096"},
		{1 << sig.BlockSize4160, "MLX5DV_BLOCK_SIZE_CAP_4160"},
	}
	sigProtCaps = []flagBit{
		{1 << sig.SigTypeT10DIF, "MLX5DV_SIG_PROT_CAP_T10DIF"},
		{1 << sig.SigTypeCRC, "MLX5DV_SIG_PROT_CAP_CRC"},
	}
	sigT10DIFBGCaps = []flagBit{
		{1 << sig.T10DIFGuardCRC, "MLX5DV_SIG_T10DIF_BG_CAP_CRC"},
		{1 << sig.T10DIFGuardCsum, "MLX5DV_SIG_T10DIF_BG_CAP_CSUM"},
	}
	sigCRCTypeCaps = []flagBit{
		{1 << sig.CRCTypeCRC32, "MLX5DV_SIG_CRC_TYPE_CAP_CRC32"},
		{1 << sig.CRCTypeCRC32C, "MLX5DV_SIG_CRC_TYPE_CAP_CRC32C"},
		{1 << sig.CRCTypeCRC64XP10, "MLX5DV_SIG_CRC_TYPE_CAP_CRC64_XP10"},
	}
)

// The bits of struct mlx5dv_crypto_caps, named as mlx5dv.h names them
// (enum mlx5dv_crypto_engines_caps, mlx5dv_crypto_wrapped_import_method_caps,
// mlx5dv_crypto_caps_flags): mlx5's values are mlx5dv.h's.
var (
	cryptoEngineCaps = []flagBit{
		{uint64(mlx5.CryptoEngineAESXTS), "MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS"},
		{uint64(mlx5.CryptoEngineAESXTSSingleBlock), "MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_SINGLE_BLOCK"},
		{uint64(mlx5.CryptoEngineAESXTSMultiBlock), "MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_MULTI_BLOCK"},
	}
	cryptoWrappedImportCaps = []flagBit{
		{uint64(mlx5.CryptoWrappedImportAESXTS), "MLX5DV_CRYPTO_WRAPPED_IMPORT_METHOD_CAP_AES_XTS"},
	}
	cryptoFlagCaps = []flagBit{
		{uint64(mlx5.CryptoFlagCrypto), "MLX5DV_CRYPTO_CAPS_CRYPTO"},
		{uint64(mlx5.CryptoFlagWrappedOperational), "MLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_OPERATIONAL"},
		{uint64(mlx5.CryptoFlagWrappedGoingToCommissioning), "MLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_GOING_TO_COMMISSIONING"},
	}
)
