package seam

// On-demand paging (ODP): memory regions whose pages the device faults in
// when it touches them instead of the kernel pinning them at
// registration (ib_umem_odp). RegMR with IB_UVERBS_ACCESS_ON_DEMAND makes
// one over a range; an ODPDevice also makes the implicit one over the
// whole address space and takes advice about ranges (ibv_advise_mr).

// ODPCaps are the on-demand paging caps of the device query (struct
// ib_uverbs_odp_caps and ib_uverbs_ex_query_device_resp.xrc_odp_caps):
// General holds enum ib_odp_general_cap_bits, the others enum
// ib_odp_transport_cap_bits.
type ODPCaps struct {
	General         uint64
	RC, UC, UD, XRC uint32
}

// AdviceSGE is one range of an advice (struct ib_uverbs_sge).
type AdviceSGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// ODPDevice is a Device that registers implicit ODP MRs and takes advice.
// A Device without them does not implement it.
type ODPDevice interface {
	// RegImplicitODP registers the whole address space in pd
	// (ibv_reg_mr(pd, NULL, SIZE_MAX, access): start 0, length
	// U64_MAX). access is enum ib_uverbs_access_flags and holds
	// IB_UVERBS_ACCESS_ON_DEMAND. The MR is closed with DeregMR.
	RegImplicitODP(pd Handle, access uint32) (MR, error)
	// AdviseMR is UVERBS_METHOD_ADVISE_MR: advice (enum
	// ib_uverbs_advise_mr_advice) and flags (enum
	// ib_uverbs_advise_mr_flag) over ranges of ODP MRs of pd.
	AdviseMR(pd Handle, advice, flags uint32, sges []AdviceSGE) error
}
