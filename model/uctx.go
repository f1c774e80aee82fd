package model

import (
	"encoding/binary"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/prm"
)

// The context's driver data: what Linux 6.1's mlx5_ib_alloc_ucontext
// (drivers/infiniband/hw/mlx5/main.c) answers the request libmlx5 44.0
// sends at ibv_open_device (create_cmds.jsonl, open_device: struct
// mlx5_ib_alloc_ucontext_req_v2 with total_num_bfregs 16,
// num_low_latency_bfregs 4, flags MLX5_IB_ALLOC_UCTX_DEVX,
// max_cqe_version 1, lib_caps MLX5_LIB_CAP_4K_UAR | MLX5_LIB_CAP_DYN_UAR).

// libmlx5Request is the GET_CONTEXT request every model context is opened
// with: the seam carries no request, and libmlx5 always sends this one.
var libmlx5Request = mlx5abi.Mlx5IbAllocUcontextReqV2{
	TotalNumBfregs:      16,
	NumLowLatencyBfregs: 4,
	Flags:               mlx5abi.MLX5_IB_ALLOC_UCTX_DEVX,
	MaxCqeVersion:       1,
	LibCaps:             mlx5abi.MLX5_LIB_CAP_4K_UAR | mlx5abi.MLX5_LIB_CAP_DYN_UAR,
}

// Kernel facts set_ucontext_resp uses that are not the device's.
const (
	// cacheLineSize is cache_line_size() on x86-64 (L1_CACHE_BYTES).
	cacheLineSize = 64
	// hcaCoreClockOffset is offsetof(struct mlx5_init_seg,
	// internal_timer_h) % PAGE_SIZE: the timer is at 0x1000 of the
	// initialization segment (include/linux/mlx5/device.h), so 0 with 4 KiB
	// pages.
	hcaCoreClockOffset = 0x1000 % pageSize
	// mlx5AdapterPageShift is MLX5_ADAPTER_PAGE_SHIFT (device.h).
	mlx5AdapterPageShift = 12
	// userCmdsSuppUHW is MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE |
	// MLX5_USER_CMDS_SUPP_UHW_CREATE_AH (<rdma/mlx5-abi.h>).
	userCmdsSuppUHW = 1<<0 | 1<<1
	// clockInfoV1 is BIT(MLX5_IB_CLOCK_INFO_V1): mlx5_core keeps a clock
	// info page for every device with a device frequency.
	clockInfoV1 = 1 << 0
	// inlineModeL2 is MLX5_INLINE_MODE_L2 (device.h): what
	// mlx5_query_min_inline reports when the ETH caps' wqe_inline_mode is
	// MLX5_CAP_INLINE_MODE_L2 (0). The profiles answer no ETH caps
	// (eth_net_offloads 0), so the kernel reads 0.
	inlineModeL2 = 1
)

// driverContext builds struct mlx5_ib_alloc_ucontext_resp as
// set_ucontext_resp fills it for the request: the request's DYN_UAR makes
// mlx5_ib skip calc_total_bfregs and allocate_uars, so there are no
// static bfregs (tot_bfregs 0) and no dynamic bfreg count either
// (num_dyn_bfregs stays 0); the library allocates its UARs with
// UAR_OBJ_ALLOC.
func (p *profile) driverContext() []byte {
	req := libmlx5Request
	r := mlx5abi.Mlx5IbAllocUcontextResp{
		QpTabSize:     1 << p.cap(prm.CmdHcaCap.LogMaxQp),
		BfRegSize:     1 << p.cap(prm.CmdHcaCap.LogBfRegSize), // dev->wc_support: the model's UAR pages take BlueFlame writes
		CacheLineSize: cacheLineSize,
		MaxSqDescSz:   uint16(p.cap(prm.CmdHcaCap.MaxWqeSzSq)),
		MaxRqDescSz:   uint16(p.cap(prm.CmdHcaCap.MaxWqeSzRq)),
		MaxSendWqebb:  1 << p.cap(prm.CmdHcaCap.LogMaxQpSz),
		MaxRecvWr:     1 << p.cap(prm.CmdHcaCap.LogMaxQpSz),
		MaxSrqRecvWr:  1 << p.cap(prm.CmdHcaCap.LogMaxSrqSz),
		NumPorts:      uint16(p.cap(prm.CmdHcaCap.NumPorts)),
		CqeVersion:    uint8(min(p.cap(prm.CmdHcaCap.CqeVersion), uint64(req.MaxCqeVersion))),
		CmdsSuppUhw:   userCmdsSuppUHW,
		// The port is Ethernet: mlx5_query_min_inline + 1.
		EthMinInline:       inlineModeL2 + 1,
		HcaCoreClockOffset: hcaCoreClockOffset,
		LogUarSize:         mlx5AdapterPageShift, // uar_4k
		NumUarsPerPage:     uint32(p.cap(prm.CmdHcaCap.NumOfUarsPerPage)),
		TotBfregs:          0, // lib_uar_dyn
		NumDynBfregs:       0, // lib_uar_dyn: calc_total_bfregs never ran
		ClockInfoVersions:  0,
	}
	if p.cap(prm.CmdHcaCap.DeviceFrequencyKhz) != 0 {
		r.ClockInfoVersions = clockInfoV1
	}
	// PAGE_SIZE <= 4096: the core clock offset is offered.
	r.CompMask |= mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET
	if p.cap(prm.CmdHcaCap.EceSupport) != 0 {
		r.CompMask |= mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE
	}
	if p.cap(prm.CmdHcaCap.DrainSigerr) != 0 {
		r.CompMask |= mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS
	}
	// Set unconditionally by set_ucontext_resp.
	r.CompMask |= mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_MKEY_UPDATE_TAG
	// REAL_TIME_TS: the SQ, RQ and QP timestamp formats all have
	// real-time timestamps (rt_supported of sq_ts_format, rq_ts_format and
	// the RoCE caps' qp_ts_format).
	if rtSupported(p.cap(prm.CmdHcaCap.SqTsFormat)) && rtSupported(p.cap(prm.CmdHcaCap.RqTsFormat)) &&
		rtSupported(p.roceCap(prm.RoceCap.QpTsFormat)) {
		r.CompMask |= mlx5abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS
	}
	// dump_fill_mkey (no profile has the cap) stays off.
	r.ResponseLength = uint32(binary.Size(r)) // min(udata->outlen, sizeof(resp)) for libmlx5's 72 bytes
	return encodeDrv(&r)
}

// DriverContext returns struct mlx5_ib_alloc_ucontext_resp as the kernel
// answered GET_CONTEXT for libmlx5's request (see libmlx5Request). It is
// a copy; the context's values do not change.
func (d *Device) DriverContext() []byte {
	return append([]byte(nil), d.h.prof.uctxResp...)
}

// encodeDrv returns the bytes of a driver-data struct (host byte order,
// fields in C order: the mlx5abi mirrors have no padding).
func encodeDrv(v any) []byte {
	b, err := binary.Append(nil, binary.NativeEndian, v)
	if err != nil {
		panic("model: driver-data struct: " + err.Error())
	}
	return b
}

// decodeDrv reads a driver-data struct from in as the kernel copies it
// (ib_copy_from_udata of min(inlen, sizeof)): what in lacks is zero.
func decodeDrv(in []byte, v any) {
	b := make([]byte, binary.Size(v))
	copy(b, in)
	if _, err := binary.Decode(b, binary.NativeEndian, v); err != nil {
		panic("model: driver-data struct: " + err.Error())
	}
}

// putDrv copies a driver-data response into out as ib_copy_to_udata does
// with min(outlen, n): out may be shorter than the struct.
func putDrv(out []byte, v any, n int) {
	b := encodeDrv(v)
	copy(out, b[:min(n, len(b))])
}
